"""Time-bounded ring buffers of GPU and container metrics, fed one snapshot per refresh.

Pure and Textual-free: the UI asks for a window of a series as a fresh tuple (Textual's Sparkline
only repaints when its ``data`` attribute is assigned a new object).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from gputui.boundary import sanitise
from gputui.derive import units
from gputui.derive.columns import Columns, Frozen, Values
from gputui.derive.units import ratio
from gputui.model.gpu import GpuSample, MigInstance
from gputui.model.snapshot import ContainerUsage, Snapshot

#: The windows the history key cycles through, in seconds (1 min, 5 min, 30 min).
WINDOWS: tuple[float, ...] = (60.0, 300.0, 1800.0)

#: The GPU metrics kept per GPU, in display order.
GPU_METRICS: tuple[str, ...] = ("util", "mem", "power", "temp")
#: The GPM metrics kept per GPU that has GPM (Hopper+), shown under util: SM activity, tensor
#: activity and DRAM bandwidth, percent each.
GPM_METRICS: tuple[str, ...] = ("sm_act", "tensor", "dram")


#: The unit of each series, by (kind, metric): ``%``, ``W``, ``°C`` or ``B`` (bytes). A GPU's
#: ``mem`` is the share of its memory in use; a container's ``mem`` is bytes of host memory.
UNITS: dict[tuple[str, str], str] = {
    ("gpu", "util"): "%",
    ("gpu", "mem"): "%",
    ("gpu", "power"): "W",
    ("gpu", "temp"): "°C",
    ("gpu", "sm_act"): "%",
    ("gpu", "tensor"): "%",
    ("gpu", "dram"): "%",
    ("container", "gpu_mem"): "B",
    ("container", "cpu"): "%",
    ("container", "mem"): "B",
    ("mig", "mem"): "B",
}


def format_value(value: float | None, unit: str) -> str:
    """One sample with its unit: ``82%``, ``612W``, ``66°C``, ``12.5GiB``."""
    if value is None:
        return sanitise.NA
    if unit == "B":
        return units.size(value)
    if unit == "%":
        return f"{value:.0f}%"
    return f"{value:.0f}{unit}"


def value_summary(values: tuple[float, ...], unit: str) -> str:
    """``82%  min 40%  max 98%``: the newest sample, then the window's extremes, with units."""
    if not values:
        return sanitise.NA
    now, low, high = (format_value(v, unit) for v in (values[-1], min(values), max(values)))
    return f"{now}  min {low}  max {high}"


def span_text(seconds: float) -> str:
    """A covered span to the second: ``45s``, ``4m12s``, ``1h02m``."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def coverage_label(covered_s: float, window_s: float) -> str:
    """``last 4m12s of 30 min``, or ``last 30 min`` once the history fills the window."""
    if covered_s >= window_s - 1.0:  # a refresh's jitter short of the window is the window
        return f"last {window_label(window_s)}"
    return f"last {span_text(covered_s)} of {window_label(window_s)}"


def resample(
    times: tuple[float, ...], values: tuple[float, ...], end: float, window_s: float, cells: int
) -> tuple[float, ...]:
    """Samples placed by time into ``cells`` equal slices of the window ending at ``end``.

    Each slice holds its samples' maximum (a slice without one repeats the previous value); the
    slices before the first sample are left out, so a sparkline drawn right-aligned covers only
    the part of its width that the history covers (5 minutes of a 30-minute window fill a sixth).

    Args:
        times: Sample times, oldest first.
        values: Sample values, parallel to ``times``.
        end: The window's end (the newest snapshot's time).
        window_s: The window's length.
        cells: How many slices (the sparkline's width); at least 1.

    Returns:
        One value per slice from the first slice holding a sample to the last slice.
    """
    cells = max(1, cells)
    if not values or window_s <= 0:
        return ()
    start = end - window_s
    slices: list[float | None] = [None] * cells
    for t, v in zip(times, values, strict=True):
        index = min(cells - 1, max(0, int((t - start) / window_s * cells)))
        old = slices[index]
        slices[index] = v if old is None else max(old, v)
    first = next(i for i, v in enumerate(slices) if v is not None)
    out: list[float] = []
    for value in slices[first:]:
        out.append(out[-1] if value is None else value)
    return tuple(out)


#: A series key: ``("gpu", <gpu id>, <metric>)``, ``("container", <container id>, <metric>)`` or
#: ``("mig", "<gpu id>:<MIG device index>", "mem")``.
SeriesKey = tuple[str, str, str]


def gpu_id(gpu: GpuSample) -> str:
    """A stable identity for a GPU's history: its UUID, or its index when NVML gives no UUID."""
    return gpu.uuid if gpu.uuid else f"#{gpu.index}"


def gpu_key(gpu: GpuSample, metric: str) -> SeriesKey:
    """The series key of one metric of one GPU."""
    return ("gpu", gpu_id(gpu), metric)


def mig_key(gpu: GpuSample, instance: MigInstance) -> SeriesKey:
    """The series key of a MIG device's memory in use: ``("mig", "<gpu id>:<index>", "mem")``."""
    return ("mig", f"{gpu_id(gpu)}:{instance.index}", "mem")


def mig_parent(key: SeriesKey) -> str:
    """The GPU id a MIG series belongs to (the part of its id before the device index)."""
    return key[1].rpartition(":")[0]


def mig_devices(gpu: GpuSample) -> tuple[MigInstance, ...]:
    """The MIG devices of a GPU that processes can run on (a GI without a CI has none)."""
    return tuple(inst for inst in gpu.mig_instances if inst.index >= 0)


def container_key(container_id: str, metric: str = "gpu_mem") -> SeriesKey:
    """The series key of one metric of a container (default: its GPU memory)."""
    return ("container", container_id, metric)


def container_values(usage: ContainerUsage) -> dict[str, float | None]:
    """A container's GPU memory, CPU % and memory at one refresh (None: not available)."""
    info = usage.info
    return {
        "gpu_mem": float(usage.gpu_memory_bytes),
        "cpu": info.cpu_percent,
        "mem": None if info.memory_used_bytes is None else float(info.memory_used_bytes),
    }


def gpu_values(gpu: GpuSample) -> dict[str, float | None]:
    """One sample's metric values (None: N/A).

    Util %, memory %, power W, temperature °C, and GPM's SM activity, tensor activity and DRAM
    bandwidth %.
    """
    return {
        "util": None if gpu.utilization_gpu is None else float(gpu.utilization_gpu),
        "mem": ratio(gpu.memory_used_bytes, gpu.memory_total_bytes),
        "power": gpu.power_w,
        "temp": None if gpu.temperature_c is None else float(gpu.temperature_c),
        "sm_act": gpu.gpm_sm_active,
        "tensor": gpu.gpm_tensor_active,
        "dram": gpu.gpm_dram_active,
    }


class _Series:
    """Parallel time and value columns; times let windows stay right when the interval changes.

    Flat ``array('d')`` buffers hold 8 bytes a sample where a deque of floats held 32 (the
    float object and its slot): at 8 GPUs and 200 containers, 632 series of 1,800 samples take
    18 MB instead of 73 MB. They are chunked (:class:`~gputui.derive.columns.Columns`) so that
    the view handed to the UI with each refresh (:meth:`freeze`) costs a few references, not a
    copy. Appends go to the end; once the series is :data:`SLACK` past its length the oldest
    samples are cut in one move, so an append costs O(1) amortised.
    """

    __slots__ = ("cols", "maxlen", "start")

    def __init__(self, maxlen: int) -> None:
        self.maxlen = maxlen
        self.start = 0.0  # when the newest point's step began (see ``fold_s``)
        self.cols = Columns("dd", _chunk(maxlen))

    def append(self, at: float, value: float, fold_s: float = 0.0) -> None:
        """Add a sample; within ``fold_s`` of the newest point's start it joins that point.

        A joined point keeps the larger value (sparklines draw each cell's maximum) and the
        newer time (so the series' end and its pruning follow the newest sample).
        """
        cols = self.cols
        if fold_s and len(cols) and at - self.start < fold_s:
            cols.set_last(0, at)
            if value > cols.last(1):
                cols.set_last(1, value)
            return
        self.start = at
        cols.append((at, value))
        excess = len(cols) - self.maxlen
        if excess > self.maxlen // SLACK:
            cols.cut(excess)

    def newest(self) -> float | None:
        """The newest sample's time (None: no sample)."""
        return self.cols.last(0) if len(self.cols) else None

    def resize(self, maxlen: int) -> None:
        self.maxlen = maxlen
        self.cols.chunk = _chunk(maxlen)
        self.cols.keep_newest(maxlen)

    def freeze(self) -> _Frozen:
        """The series as it is now, for a :class:`HistoryView`."""
        return _Frozen(self.cols.freeze(), self.maxlen)


def _chunk(maxlen: int) -> int:
    """Rows per chunk of a series of ``maxlen`` points: the slack that a cut may leave."""
    return max(1, maxlen // SLACK)


class _Frozen:
    """One series as a view saw it: its rows and the point budget in force then."""

    __slots__ = ("maxlen", "rows")

    def __init__(self, rows: Frozen, maxlen: int) -> None:
        self.rows = rows
        self.maxlen = maxlen

    def arrays(self) -> tuple[Values, Values]:
        """Times and values of the newest :attr:`maxlen` samples, oldest first."""
        times, values = self.rows.column(0), self.rows.column(1)
        excess = len(times) - self.maxlen
        if excess > 0:  # the slack a cut leaves, or samples kept past a shorter budget
            del times[:excess]
            del values[:excess]
        return times, values


#: A series may hold up to ``maxlen + maxlen // SLACK`` samples before its oldest are cut.
SLACK = 8


#: Points kept per series at most. Below half a second (at the default 30 minutes) a refresh
#: no longer gets its own point: samples within one step (``history_seconds / MAX_POINTS``)
#: share one. At 0.1 s a series held 18,000 samples (288 KB with their times), 1 MB per
#: container for its three series; the sparklines, 60 to 100 cells wide, never showed them.
MAX_POINTS = 3600


class HistoryReader:
    """The reads every holder of history answers.

    :class:`History` (the writer's own), :class:`HistoryView` (one refresh's, handed to the
    front-ends) and :class:`ShownHistory` (the view a front-end shows).
    """

    __slots__ = ()

    #: The newest recorded snapshot's time (None: none yet).
    last_time: float | None

    def _frozen(self, key: SeriesKey) -> _Frozen | None:
        raise NotImplementedError

    def series(
        self, key: SeriesKey, window_s: float, now: float | None = None
    ) -> tuple[float, ...]:
        """The values of one series within the last ``window_s`` seconds, oldest first.

        Args:
            key: Which series.
            window_s: Window length in seconds.
            now: End of the window; defaults to the newest recorded snapshot time.

        Returns:
            A fresh tuple (empty when the series is unknown).
        """
        return self.timed(key, window_s, now)[1]

    def timed(
        self, key: SeriesKey, window_s: float, now: float | None = None
    ) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """Times and values of one series within the window, oldest first (see :meth:`series`)."""
        s = self._frozen(key)
        if s is None or not len(s.rows):
            return (), ()
        times, values = s.arrays()
        start = self._window_start(times, window_s, now)
        return tuple(times[start:]), tuple(values[start:])

    def _window_start(self, times: Sequence[float], window_s: float, now: float | None) -> int:
        """Index of the first sample within ``window_s`` before ``now`` (or the newest time).

        Walks from the newest sample back: the cost is the window, not the whole buffer.
        """
        end = self.last_time if now is None else now
        if end is None:
            end = times[-1]
        start = end - window_s
        count = 0
        for t in reversed(times):
            if t < start:
                break
            count += 1
        return len(times) - count

    def covered(self, keys: Iterable[SeriesKey], window_s: float) -> float:
        """Seconds of the window the longest of ``keys`` actually covers (0: no samples)."""
        end = self.last_time
        best = 0.0
        for key in keys:
            s = self._frozen(key)
            if end is None or s is None or not len(s.rows):
                continue
            times, _ = s.arrays()
            oldest = next((t for t in times if t >= end - window_s), None)
            if oldest is not None:
                best = max(best, end - oldest)
        return min(best, window_s)


class History(HistoryReader):
    """Ring buffers sized by time: ``history_seconds / interval`` points per series (or fewer).

    Below half a second, samples within one step share a point (see :data:`MAX_POINTS`).

    Args:
        history_seconds: How far back every series reaches.
        interval: The refresh period the buffers are sized for.
    """

    def __init__(self, history_seconds: float = 1800.0, interval: float = 1.0) -> None:
        if history_seconds <= 0 or interval <= 0:
            raise ValueError("history_seconds and interval must be positive")
        self.history_seconds = history_seconds
        self.interval = interval
        self._fold_s = self.fold_s
        self._series: dict[SeriesKey, _Series] = {}
        self.last_time: float | None = None

    @property
    def maxlen(self) -> int:
        """Points kept per series: one per refresh, or one per fold step (see :attr:`fold_s`)."""
        return max(1, round(self.history_seconds / (self.fold_s or self.interval)))

    @property
    def fold_s(self) -> float:
        """Seconds within which samples share a point (0: every refresh has its own).

        Only when the step is well above the refresh period, so that a refresh's jitter never
        joins two samples that each fit.
        """
        step = self.history_seconds / MAX_POINTS
        return step if step > 1.5 * self.interval else 0.0

    def set_interval(self, interval: float) -> None:
        """Resize every buffer for a new refresh period, keeping the newest samples."""
        if interval <= 0:
            raise ValueError("interval must be positive")
        if interval == self.interval:
            return
        self.interval = interval
        self._fold_s = self.fold_s
        for series in self._series.values():
            series.resize(self.maxlen)

    def add(self, key: SeriesKey, at: float, value: float | None) -> None:
        """Append one sample; None (not available) is skipped rather than drawn as zero."""
        if value is None:
            return
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = _Series(self.maxlen)
        series.append(at, value, self._fold_s)

    def clear(self) -> None:
        """Forget every series (a replay jumped back in time: the old samples are the future)."""
        self._series.clear()
        self.last_time = None

    def record(self, snapshot: Snapshot) -> None:
        """Append every GPU metric, each MIG device's memory and every container's metrics.

        A container's series are dropped as soon as the engine stops listing it, so the buffers
        do not grow with container churn; while Docker is unreachable the list is empty for
        reasons other than the containers leaving, so their series are kept then. Any series not
        updated for longer than ``history_seconds`` (a GPU gone for good) is dropped too, and so is
        a MIG device's series once its GPU stops listing it.
        """
        at = snapshot.taken_at
        if self.last_time is not None and at <= self.last_time:
            return  # the same snapshot applied twice (or a clock step back) must not duplicate
        self.last_time = at
        live_mig: set[SeriesKey] = set()
        mig_parents: set[str] = set()
        for gpu in snapshot.gpus:
            if gpu.lost:
                continue
            for metric, value in gpu_values(gpu).items():
                self.add(gpu_key(gpu, metric), at, value)
            mig_parents.add(gpu_id(gpu))
            for inst in mig_devices(gpu):
                key = mig_key(gpu, inst)
                live_mig.add(key)
                used = inst.memory_used_bytes
                self.add(key, at, None if used is None else float(used))
        for usage in snapshot.containers:
            if usage.pids or usage.info.running:
                for metric, value in container_values(usage).items():
                    self.add(container_key(usage.info.id, metric), at, value)
        docker = snapshot.sources.get("docker")
        live = {u.info.id for u in snapshot.containers} if docker is None or docker.ok else None
        self._prune(at, live, live_mig, mig_parents)

    def _prune(
        self,
        now: float,
        live_containers: set[str] | None,
        live_mig: set[SeriesKey],
        mig_parents: set[str],
    ) -> None:
        horizon = now - self.history_seconds
        stale = [
            key
            for key, s in self._series.items()
            if (newest := s.newest()) is None
            or newest < horizon
            or (
                live_containers is not None
                and key[0] == "container"
                and key[1] not in live_containers
            )
            # A MIG device its GPU no longer lists (MIG reconfigured or turned off) is gone;
            # a lost GPU's devices keep their history until the horizon, like the GPU's own.
            or (key[0] == "mig" and key not in live_mig and mig_parent(key) in mig_parents)
        ]
        for key in stale:
            del self._series[key]

    def view(self) -> HistoryView:
        """Every series as it is now, for another thread to read while this one appends.

        A few references per series, no copy of the samples (see :mod:`gputui.derive.columns`).
        """
        frozen = {key: s.freeze() for key, s in self._series.items()}
        return HistoryView(frozen, self.last_time, self.maxlen)

    def _frozen(self, key: SeriesKey) -> _Frozen | None:
        s = self._series.get(key)
        return None if s is None else s.freeze()

    def keys(self) -> Iterable[SeriesKey]:
        """Every series currently kept."""
        return self._series.keys()

    def __len__(self) -> int:
        return len(self._series)


class HistoryView(HistoryReader):
    """Every series of a :class:`History` at one refresh; later appends never change it.

    Built on the collector's thread with each analysis (:meth:`History.view`) and read on the
    UI's, so the UI never reads a buffer that the collector is appending to.

    Args:
        series: Each series' frozen rows.
        last_time: The newest recorded snapshot's time.
        maxlen: Points kept per series when the view was taken.
    """

    __slots__ = ("_series", "last_time", "maxlen")

    def __init__(
        self,
        series: Mapping[SeriesKey, _Frozen] | None = None,
        last_time: float | None = None,
        maxlen: int = 0,
    ) -> None:
        self._series: Mapping[SeriesKey, _Frozen] = series if series is not None else {}
        self.last_time = last_time
        self.maxlen = maxlen

    def _frozen(self, key: SeriesKey) -> _Frozen | None:
        return self._series.get(key)

    def keys(self) -> Iterable[SeriesKey]:
        """Every series the view holds."""
        return self._series.keys()

    def __len__(self) -> int:
        return len(self._series)


class ShownHistory(HistoryReader):
    """The history a front-end shows: the view of the last refresh it applied.

    The UI thread swaps the view (:meth:`show`) when it applies a snapshot and at no other
    time, so a paused monitor keeps showing the history as it was when it paused.
    """

    __slots__ = ("view",)

    def __init__(self, view: HistoryView | None = None) -> None:
        self.view = view if view is not None else HistoryView()

    def show(self, view: HistoryView) -> None:
        """Show ``view`` from now on."""
        self.view = view

    @property
    def last_time(self) -> float | None:  # type: ignore[override]
        """The shown view's newest snapshot time."""
        return self.view.last_time

    @property
    def maxlen(self) -> int:
        """Points kept per series in the shown view."""
        return self.view.maxlen

    def _frozen(self, key: SeriesKey) -> _Frozen | None:
        return self.view._frozen(key)

    def keys(self) -> Iterable[SeriesKey]:
        """Every series the shown view holds."""
        return self.view.keys()

    def __len__(self) -> int:
        return len(self.view)


def next_window(current: float) -> float:
    """The window after ``current`` in :data:`WINDOWS`, wrapping around."""
    for window in WINDOWS:
        if window > current:
            return window
    return WINDOWS[0]


def window_label(seconds: float) -> str:
    """``"1 min"``, ``"5 min"``, ``"30 min"``: the visible window for a title."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min"
