"""The GPM lane: NVML's GPU Performance Monitoring figures, from sample pairs on their own cadence.

GPM (Hopper and later) measures what ``utilization.gpu`` cannot: how many SMs were busy, how
full they were, which pipes (tensor, FP32...) and how much DRAM bandwidth were used. A figure
is computed from two samples (``nvmlGpmSampleGet``, or ``nvmlGpmMigSampleGet`` for one MIG GPU
instance) taken at least 100 ms apart, so the lane keeps the previous sample of every GPU and
GPU instance, takes a new one each period and computes the figures from the pair
(``nvmlGpmMetricsGet``, each metric with its own return code).

Measured on an H200: a sample costs ~0.2 ms, the metrics of one pair ~1.1 ms; cheap, but the
lane still runs beside the core read (its own thread in the TUI and the exporter), so a slow
GPM call never delays a refresh: the core read picks up the last figures. The lane also reads
the total-energy counter, on a slower cadence of its own: that call costs ~3 ms of CPU a GPU
on the H200 (the driver's, not Python's), more than the GPM pair, and the ledger, its one
reader, trues its power estimates up to the counter whenever it moves.

This module never imports pynvml: it works on the module object :class:`NvmlSource` hands it.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from gputui.collect.nvml.slow_lane import error_name
from gputui.model.gauges import GPU_GAUGES, GpuGauge
from gputui.model.gpu import GPM_DROPPED, GPM_LOST, GPM_MIG, GPM_PENDING, GPM_UNSUPPORTED
from gputui.model.records import record

#: NVML wants the two samples of a pair at least this far apart.
MIN_GAP_S = 0.1
_MIB = 1024 * 1024
#: Errors that say GPM will never work on this device (or with this driver or binding).
_NEVER = frozenset({"NotSupported", "FunctionNotFound", "NVMLLibraryMismatchError"})

#: (GPU index, GPU instance id or None for the whole GPU): one sampled target.
Key = tuple[int, int | None]
#: Figures of one pair: GpuSample field name -> value (None: this metric not available).
Figures = dict[str, float | None]


@record
class GpmMetric:
    """One metric the lane asks for.

    Attributes:
        field: The :class:`~gputui.model.gpu.GpuSample` field it fills.
        constant: The pynvml constant naming its id (``NVML_GPM_METRIC_SM_UTIL``).
        factor: Sample unit per NVML unit (a MiB for bytes/s of NVML's MiB/s).
        percent: NVML gives a percent (clamped to 100; rounding can overshoot a little).
    """

    field: str
    constant: str
    factor: float = 1.0
    percent: bool = True


def gpm_metrics(gauges: Sequence[GpuGauge] = GPU_GAUGES) -> tuple[GpmMetric, ...]:
    """The metrics of the field table's GPM rows (getter ``nvmlGpmMetricsGet``)."""
    return tuple(
        GpmMetric(
            g.field,
            g.nvml.args[0],
            factor=float(_MIB) if g.unit == "B/s" else 1.0,
            percent=g.unit == "%",
        )
        for g in gauges
        if g.nvml.getter == "nvmlGpmMetricsGet"
    )


class _Lost(Exception):
    """The GPU fell off the bus during a GPM call."""


class GpmLane:
    """GPM figures of every GPU and MIG GPU instance, from sample pairs.

    Args:
        nv: The pynvml-shaped module.
        clock: Monotonic clock (pair spacing and the cadence).
        interval: Seconds between samples (at least :data:`MIN_GAP_S`).
        min_gap: The least spacing of a pair's samples; 0 for a stand-in without real counters.
        sleep: Waits for the second sample of a first pair in inline mode.
        metrics: What to ask for (the field table's GPM rows).
        energy_interval: Seconds between reads of the total-energy counter (0: every tick).
    """

    def __init__(
        self,
        nv: Any,
        clock: Callable[[], float],
        interval: float,
        *,
        min_gap: float = MIN_GAP_S,
        sleep: Callable[[float], None] = time.sleep,
        metrics: tuple[GpmMetric, ...] | None = None,
        energy_interval: float = 0.0,
    ) -> None:
        self._nv = nv
        self._clock = clock
        self._min_gap = min_gap
        self._interval = max(interval, min_gap)
        self._sleep = sleep
        self._metrics = gpm_metrics() if metrics is None else metrics
        self._ids: tuple[int, ...] | None = None
        self._lock = threading.Lock()
        #: What to sample: (index, handle, GPU instance ids), set by the core read.
        self._targets: tuple[tuple[int, Any, tuple[int, ...]], ...] = ()
        self._handles: dict[int, Any] = {}
        self._prev: dict[Key, tuple[Any, float]] = {}
        self._figures: dict[Key, Figures] = {}
        self._notes: dict[Key, str] = {}
        self._supported: dict[int, bool] = {}
        self._never: set[Key] = set()
        self._energy: dict[int, int] = {}
        self._energy_never: set[int] = set()
        self._energy_interval = energy_interval
        self._energy_due = 0.0
        self._due = 0.0
        self._stop = threading.Event()
        self._reset_requested = threading.Event()
        self._thread: threading.Thread | None = None
        #: Calls made, by pynvml function name (the benchmark's count).
        self.calls: dict[str, int] = {}

    # -- what the core read hands in and picks up -------------------------------------------

    def set_targets(self, targets: tuple[tuple[int, Any, tuple[int, ...]], ...]) -> None:
        """The GPUs (index, handle) and their GPU instance ids to sample from now on."""
        self._targets = targets  # one reference swap: the lane's thread reads it whole

    def figures(self, index: int, gi: int | None = None) -> tuple[Figures | None, str | None]:
        """The last pair's figures of a GPU (or GPU instance), or None and why not."""
        key = (index, gi)
        with self._lock:
            figures = self._figures.get(key)
            note = self._notes.get(key)
        if figures is None and note is None:
            note = GPM_PENDING
        return figures, note

    def energy_mj(self, index: int) -> int | None:
        """The GPU's total-energy counter (mJ since the driver loaded) at the last tick."""
        with self._lock:
            return self._energy.get(index)

    # -- running ---------------------------------------------------------------------------

    @property
    def sampled(self) -> bool:
        """True once any target has a sample."""
        return bool(self._prev)

    def tick_if_due(self) -> None:
        """Inline mode: sample when due; a first pair gets its second sample after the gap."""
        if self._clock() >= self._due:
            self.tick()
        with self._lock:
            pending = [t for key, (_, t) in self._prev.items() if key not in self._figures]
        if pending:
            # A one-shot has no later refresh: complete the first pairs now (≈0.1 s, less what
            # the core read took since the first samples). The energy counter was read.
            self._sleep(max(0.0, max(pending) + self._min_gap - self._clock()))
            self.tick(energy=False)

    def tick(self, *, energy: bool = True) -> None:
        """Take a sample of every target; compute figures where a pair is complete.

        Args:
            energy: Read the energy counters too when their cadence is due (≈3.3 ms a GPU on
                H200).
        """
        if self._reset_requested.is_set():
            self._reset_requested.clear()
            self.reset()
        now = self._clock()
        self._due = now + self._interval
        energy = energy and now >= self._energy_due
        if energy:
            self._energy_due = now + self._energy_interval
        targets = self._targets
        wanted: set[Key] = set()
        lost: set[int] = set()
        for index, handle, gis in targets:
            self._handles[index] = handle
            wanted.add((index, None))
            wanted.update((index, gi) for gi in gis)
            try:
                self._sample(index, handle, gis)
            except _Lost:
                self._lost(index, gis)
                lost.add(index)
        # Every GPU's samples first, then the counters (milliseconds each): a first pair's
        # 100 ms, which a one-shot waits out, starts with the samples of every GPU.
        for index, handle, gis in targets if energy else ():
            if index in lost:
                continue
            try:
                self._read_energy(index, handle)
            except _Lost:
                self._lost(index, gis)
        with self._lock:
            first = any(key not in self._figures for key in self._prev)
        if first:
            # A first sample waits for its pair only NVML's gap, not a whole period: the first
            # figures show within ~0.1 s of the start.
            self._due = min(self._due, self._clock() + self._min_gap)
        # GPUs and GPU instances gone since the last tick: free their samples.
        for key in [k for k in self._prev if k not in wanted]:
            self._free(self._prev.pop(key)[0])
        with self._lock:
            for index in [i for i in self._energy if (i, None) not in wanted]:
                del self._energy[index]
            for key in [k for k in self._figures if k not in wanted]:
                del self._figures[key]
            for key in [k for k in self._notes if k not in wanted]:
                del self._notes[key]

    def _sample(self, index: int, handle: Any, gis: tuple[int, ...]) -> None:
        """One GPU's samples (and its GPU instances'), or why it has none."""
        if not self._is_supported(index, handle):
            self._publish((index, None), None, GPM_UNSUPPORTED)
            for gi in gis:
                self._publish((index, gi), None, GPM_UNSUPPORTED)
            return
        self._step((index, None), handle)
        for gi in gis:
            self._step((index, gi), handle)

    def _lost(self, index: int, gis: tuple[int, ...]) -> None:
        """A GPU off the bus: its samples freed, its figures said lost."""
        for key in [k for k in self._prev if k[0] == index]:
            self._free(self._prev.pop(key)[0])
        for key in [(index, None), *((index, gi) for gi in gis)]:
            self._publish(key, None, GPM_LOST)
        with self._lock:
            self._energy.pop(index, None)
        # A GPU back after a reset is asked about GPM again.
        self._supported.pop(index, None)

    def _read_energy(self, index: int, handle: Any) -> None:
        """The total-energy counter: on this cadence, as it costs milliseconds a call."""
        nv = self._nv
        if index in self._energy_never:
            return
        value: int | None = None
        try:
            self._count("nvmlDeviceGetTotalEnergyConsumption")
            value = int(nv.nvmlDeviceGetTotalEnergyConsumption(handle))
        except nv.NVMLError as exc:
            kind = error_name(exc)
            if kind == "GpuIsLost":
                raise _Lost from exc
            if kind in _NEVER:
                self._energy_never.add(index)
        except (nv.NVMLLibraryMismatchError, AttributeError):
            self._energy_never.add(index)
        if value is not None and value < 0:
            value = None
        with self._lock:
            if value is None:
                self._energy.pop(index, None)
            else:
                self._energy[index] = value

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def _is_supported(self, index: int, handle: Any) -> bool:
        known = self._supported.get(index)
        if known is not None:
            return known
        nv = self._nv
        query = getattr(nv, "nvmlGpmQueryDeviceSupport", None)
        supported = False
        if query is not None:
            try:
                self._count("nvmlGpmQueryDeviceSupport")
                supported = bool(query(handle).isSupportedDevice)
            except nv.NVMLError as exc:
                if error_name(exc) == "GpuIsLost":
                    raise _Lost from exc  # not remembered: asked again once the GPU is back
                supported = False
            except nv.NVMLLibraryMismatchError:
                supported = False
        self._supported[index] = supported
        return supported

    def _step(self, key: Key, handle: Any) -> None:
        """One target: a new sample, and the figures of the pair it completes."""
        if key in self._never:
            return
        prev = self._prev.get(key)
        now = self._clock()
        # A millisecond of slack: a wait of exactly the gap must complete the pair.
        if prev is not None and now - prev[1] < self._min_gap - 1e-3:
            return  # too soon for a pair: keep the older sample and the last figures
        sample = self._take(key, handle)
        if sample is None:
            return
        self._prev[key] = (sample, now)
        if prev is None:
            return
        try:
            figures = self._pair(prev[0], sample)
        finally:
            self._free(prev[0])
        if figures is None:
            self._publish(key, None, GPM_DROPPED)
        else:
            self._publish(key, figures, None)

    def _take(self, key: Key, handle: Any) -> Any:
        """A new sample of one target, None when there is none (the reason is published)."""
        nv = self._nv
        sample = None
        try:
            self._count("nvmlGpmSampleAlloc")
            sample = nv.nvmlGpmSampleAlloc()
            if key[1] is None:
                self._count("nvmlGpmSampleGet")
                nv.nvmlGpmSampleGet(handle, sample)
            else:
                self._count("nvmlGpmMigSampleGet")
                nv.nvmlGpmMigSampleGet(handle, key[1], sample)
            return sample
        except (nv.NVMLError, nv.NVMLLibraryMismatchError, AttributeError) as exc:
            if sample is not None:
                self._free(sample)
            kind = error_name(exc) if isinstance(exc, nv.NVMLError) else "FunctionNotFound"
            if kind == "GpuIsLost":
                raise _Lost from exc
            if kind in _NEVER:
                self._never.add(key)
                old = self._prev.pop(key, None)
                if old is not None:
                    self._free(old[0])
                # A MIG-enabled GPU samples per GPU instance only.
                mig = key[1] is None and self._has_gis(key)
                self._publish(key, None, GPM_MIG if mig else GPM_UNSUPPORTED)
            return None

    def _has_gis(self, key: Key) -> bool:
        return any(index == key[0] and gis for index, _, gis in self._targets)

    def _metric_ids(self) -> tuple[int, ...]:
        if self._ids is None:
            self._ids = tuple(int(getattr(self._nv, m.constant)) for m in self._metrics)
        return self._ids

    def _pair(self, first: Any, second: Any) -> Figures | None:
        """The figures of one pair; None when the pair is unusable (counters reset)."""
        nv = self._nv
        ids = self._metric_ids()
        request = nv.c_nvmlGpmMetricsGet_t()
        request.version = nv.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(ids)
        request.sample1 = first
        request.sample2 = second
        for i, metric_id in enumerate(ids):
            request.metrics[i].metricId = metric_id
        try:
            self._count("nvmlGpmMetricsGet")
            nv.nvmlGpmMetricsGet(request)
        except nv.NVMLError as exc:
            if error_name(exc) == "GpuIsLost":
                raise _Lost from exc
            return None
        ok = int(getattr(nv, "NVML_SUCCESS", 0))
        figures: Figures = {}
        for i, metric in enumerate(self._metrics):
            result = request.metrics[i]
            if int(result.nvmlReturn) != ok:
                figures[metric.field] = None  # this metric only: not on this GPU
                continue
            value = float(result.value)
            if not math.isfinite(value) or value < 0:
                return None  # a counter went backwards between the samples
            if metric.percent:
                value = min(value, 100.0)
            figures[metric.field] = value * metric.factor
        return figures

    def _publish(self, key: Key, figures: Figures | None, note: str | None) -> None:
        with self._lock:
            if figures is None:
                self._figures.pop(key, None)
            else:
                self._figures[key] = figures
            if note is None:
                self._notes.pop(key, None)
            else:
                self._notes[key] = note

    def _free(self, sample: Any) -> None:
        nv = self._nv
        # Freeing returns host memory; a failure (driver gone) leaves nothing else to do.
        with contextlib.suppress(Exception):
            self._count("nvmlGpmSampleFree")
            nv.nvmlGpmSampleFree(sample)

    def request_reset(self) -> None:
        """Forget every sample at the next tick (NVML re-initialised: old handles are void).

        The lane's own thread does it, so the caller never waits for a GPM call in flight.
        """
        self._targets = ()
        self._reset_requested.set()

    def reset(self) -> None:
        """Forget every sample now (only from the thread that ticks, or once it stopped)."""
        for sample, _ in self._prev.values():
            self._free(sample)
        self._prev.clear()
        self._supported.clear()
        self._never.clear()
        self._energy_never.clear()
        self._energy_due = 0.0
        self._targets = ()
        with self._lock:
            self._figures.clear()
            self._notes.clear()
            self._energy.clear()

    def start(self) -> None:
        """Run in a daemon thread until :meth:`stop`."""
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="gputui-nvml-gpm", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop the thread (within about a second) and free every sample."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=2.0)
            if thread.is_alive():
                return  # stuck in a call: its samples die with the process
        self.reset()

    def _run(self) -> None:
        while not self._stop.is_set():
            if self._targets or self._reset_requested.is_set():
                with contextlib.suppress(Exception):
                    # Any surprise from the driver must not end the lane; the next tick retries.
                    self.tick()
            self._stop.wait(max(0.05, self._due - self._clock()) if self._targets else 0.05)
