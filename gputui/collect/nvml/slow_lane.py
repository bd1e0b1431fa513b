"""The NVML slow lane: reads that cost milliseconds, on their own cadence, plus XID events.

PCIe throughput samples a byte counter over a 20 ms window (≈21 ms per direction on H200) and
per-process utilization costs ≈2 ms; reading them on every refresh would make one refresh of 8
GPUs take a third of a second. The lane reads them every ``interval`` seconds, in a background
thread for the TUI (waiting for XID events in between) or inline for ``--once`` and tests.
Results are kept under a lock and picked up by the core read.

This module never imports pynvml: it works on the module object :class:`NvmlSource` hands it.
"""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Callable, Sequence
from typing import Any

from gputui.model.gpu import XidEvent

XID_CRITICAL = 0x8  # nvmlEventTypeXidCriticalError
MAX_XIDS = 64

#: (sm, mem, enc, dec) utilization of one process, 0-100 each.
ProcUtil = tuple[int, int, int, int]


class GpuLost(Exception):
    """Raised inside one GPU's read when NVML says the GPU fell off the bus."""


class NvmlGone(Exception):
    """Raised inside a read when NVML itself stopped working mid-run."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def error_name(exc: BaseException) -> str:
    """``NVMLError_NotSupported`` -> ``NotSupported``; other exceptions keep their class name."""
    return type(exc).__name__.removeprefix("NVMLError_")


def average_samples(samples: Sequence[Any], since: int) -> tuple[dict[int, ProcUtil], int]:
    """Average process-utilization samples per PID; also return the newest timestamp seen."""
    # Written out by hand: this runs over every process sample of every GPU (thousands per
    # refresh on a busy host), and a loop over the four fields with min/max costs twice this.
    sums: dict[int, list[int]] = {}
    newest = since
    for s in samples:
        ts = int(s.timeStamp)
        if ts > newest:
            newest = ts
        sm, mem, enc, dec = int(s.smUtil), int(s.memUtil), int(s.encUtil), int(s.decUtil)
        # Drivers have returned garbage for zombies (nvtop#110): clamp.
        if not 0 <= sm <= 100:
            sm = 0 if sm < 0 else 100
        if not 0 <= mem <= 100:
            mem = 0 if mem < 0 else 100
        if not 0 <= enc <= 100:
            enc = 0 if enc < 0 else 100
        if not 0 <= dec <= 100:
            dec = 0 if dec < 0 else 100
        pid = int(s.pid)
        acc = sums.get(pid)
        if acc is None:
            sums[pid] = [sm, mem, enc, dec, 1]
        else:
            acc[0] += sm
            acc[1] += mem
            acc[2] += enc
            acc[3] += dec
            acc[4] += 1
    averaged = {
        pid: (a[0], a[1], a[2], a[3])
        if a[4] == 1
        else (a[0] // a[4], a[1] // a[4], a[2] // a[4], a[3] // a[4])
        for pid, a in sums.items()
    }
    return averaged, newest


class SlowLane:
    """PCIe throughput, per-process utilization and XID events for every GPU.

    Args:
        nv: The pynvml-shaped module.
        query: The source's guarded getter ``query(index, fn, *args) -> value | None`` (it raises
            :class:`GpuLost` / :class:`NvmlGone`, and remembers unsupported calls).
        handles: Returns the current device handles.
        clock: Monotonic clock.
        wall: Wall clock (sample timestamps are wall-clock microseconds).
        interval: Seconds between slow reads.
        pcie: Whether to read PCIe throughput (off for one-shot reports).
    """

    def __init__(
        self,
        nv: Any,
        query: Callable[..., Any],
        handles: Callable[[], list[Any]],
        clock: Callable[[], float],
        wall: Callable[[], float],
        interval: float,
        *,
        pcie: bool = True,
    ) -> None:
        self._nv = nv
        self._read_pcie = pcie
        self._query = query
        self._handles = handles
        self._clock = clock
        self._wall = wall
        self._interval = interval
        self._lock = threading.Lock()
        self._pcie: dict[int, tuple[int | None, int | None]] = {}
        self._util: dict[int, tuple[dict[int, ProcUtil], bool]] = {}
        self._last_ts: dict[int, int] = {}
        self._util_unsupported: set[int] = set()
        self._gpu_util: dict[int, float | None] = {}
        self._gpu_util_ts: dict[int, int] = {}
        self._gpu_util_unsupported: set[int] = set()
        self._xids: collections.deque[XidEvent] = collections.deque(maxlen=MAX_XIDS)
        self._due = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- what the core read picks up ---------------------------------------------------------

    def pcie(self, index: int) -> tuple[int | None, int | None]:
        """(rx, tx) KB/s of the last slow read, (None, None) before the first."""
        with self._lock:
            return self._pcie.get(index, (None, None))

    def process_util(self, index: int) -> tuple[dict[int, ProcUtil], bool]:
        """Per-PID utilization and whether the query works on this GPU at all."""
        with self._lock:
            return self._util.get(index, ({}, False))

    def gpu_util_mean(self, index: int) -> float | None:
        """The mean of the GPU's utilization samples read by the last slow read (None: none)."""
        with self._lock:
            return self._gpu_util.get(index)

    def xids(self) -> tuple[XidEvent, ...]:
        """Recent XID events, oldest first."""
        with self._lock:
            return tuple(self._xids)

    # -- running ------------------------------------------------------------------------------

    def tick_if_due(self) -> None:
        """Inline mode: run a slow read when one is due."""
        if self._clock() >= self._due:
            self.tick()

    def tick(self) -> None:
        """Read PCIe throughput and per-process utilization for every GPU (tens of ms per GPU)."""
        nv = self._nv
        self._due = self._clock() + self._interval
        for index, handle in enumerate(list(self._handles())):
            try:
                rx = tx = None
                if self._read_pcie:
                    rx = self._query(
                        index, nv.nvmlDeviceGetPcieThroughput, handle, nv.NVML_PCIE_UTIL_RX_BYTES
                    )
                    tx = self._query(
                        index, nv.nvmlDeviceGetPcieThroughput, handle, nv.NVML_PCIE_UTIL_TX_BYTES
                    )
                util = self._process_util(index, handle)
                gpu_util = self._gpu_util_mean(index, handle)
            except (GpuLost, NvmlGone):
                continue  # the core read reports it
            with self._lock:
                self._pcie[index] = (rx, tx)
                self._util[index] = util
                self._gpu_util[index] = gpu_util

    def _process_util(self, index: int, handle: Any) -> tuple[dict[int, ProcUtil], bool]:
        nv = self._nv
        if index in self._util_unsupported:
            return {}, False
        # First call: look back one interval; later: continue from the newest sample seen, so
        # each sample is counted once (nvtop's approach; without it NVML averages over an
        # unspecified, driver-dependent period).
        since = self._last_ts.get(index) or int((self._wall() - max(self._interval, 1.0)) * 1e6)
        try:
            samples = nv.nvmlDeviceGetProcessUtilization(handle, since)
        except nv.NVMLError as exc:
            kind = error_name(exc)
            if kind == "NotFound":  # no sample newer than `since`: every process was idle
                return {}, True
            if kind == "GpuIsLost":
                raise GpuLost(str(exc)) from exc
            if kind in ("NotSupported", "FunctionNotFound"):  # e.g. MIG: never available
                self._util_unsupported.add(index)
            return {}, False
        averaged, self._last_ts[index] = average_samples(samples, since)
        return averaged, True

    def _gpu_util_mean(self, index: int, handle: Any) -> float | None:
        """The mean of every GPU-utilization sample the driver took since the previous read.

        A point read of ``utilization.gpu`` covers the driver's last sample period only (200 ms
        on an H200), so a load that is busy part of each second reads 0 % or 100 % depending on
        when it is read (0 % throughout for a 25 %-duty load read at 1 Hz, measured); the
        samples since the previous read cover the whole time between reads (as far as the
        driver's sample buffer reaches back).
        """
        nv = self._nv
        if index in self._gpu_util_unsupported:
            return None
        since = self._gpu_util_ts.get(index) or int((self._wall() - max(self._interval, 1.0)) * 1e6)
        try:
            _kind, samples = nv.nvmlDeviceGetSamples(handle, nv.NVML_GPU_UTILIZATION_SAMPLES, since)
        except nv.NVMLError as exc:
            kind = error_name(exc)
            if kind == "GpuIsLost":
                raise GpuLost(str(exc)) from exc
            if kind in ("NotSupported", "FunctionNotFound"):
                self._gpu_util_unsupported.add(index)
            return None  # NotFound: no sample since the last read (not even an idle one)
        except (nv.NVMLLibraryMismatchError, AttributeError):
            self._gpu_util_unsupported.add(index)
            return None
        total, count, newest = 0, 0, since
        for sample in samples:
            ts = int(sample.timeStamp)
            if ts <= since:
                continue  # not newer than the previous read's newest: counted then
            value = int(sample.sampleValue.uiVal)
            total += 100 if value > 100 else max(0, value)
            count += 1
            newest = max(newest, ts)
        self._gpu_util_ts[index] = newest
        return None if count == 0 else total / count

    def start(self) -> None:
        """Run in a daemon thread until :meth:`stop`."""
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="gputui-nvml-slow", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop the thread (returns within about a second)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None

    def _run(self) -> None:
        nv = self._nv
        event_set = self._register_xids()
        while not self._stop.is_set():
            self.tick_if_due()
            wait_s = max(0.05, min(1.0, self._due - self._clock()))
            if event_set is None:
                self._stop.wait(wait_s)
                continue
            try:
                data = nv.nvmlEventSetWait(event_set, int(wait_s * 1000))
            except nv.NVMLError:  # Timeout is the normal case; anything else: try again later
                continue
            if data.eventType & XID_CRITICAL:
                try:
                    gpu = int(nv.nvmlDeviceGetIndex(data.device))
                except nv.NVMLError:
                    gpu = -1
                with self._lock:
                    self._xids.append(XidEvent(gpu, int(data.eventData), self._wall()))
        if event_set is not None:
            with contextlib.suppress(nv.NVMLError):
                nv.nvmlEventSetFree(event_set)

    def _register_xids(self) -> Any:
        nv = self._nv
        if not hasattr(nv, "nvmlEventSetCreate"):
            return None
        try:
            event_set = nv.nvmlEventSetCreate()
        except nv.NVMLError:
            return None
        registered = False
        for handle in self._handles():
            try:
                if nv.nvmlDeviceGetSupportedEventTypes(handle) & XID_CRITICAL:
                    nv.nvmlDeviceRegisterEvents(handle, XID_CRITICAL, event_set)
                    registered = True
            except nv.NVMLError:
                continue
        return event_set if registered else None
