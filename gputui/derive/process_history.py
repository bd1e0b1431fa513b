"""Per-process GPU memory and SM % history, for the process drill-down.

Compact and bounded whatever the machine runs: one ``array`` of times (``d``: epoch seconds need
double precision) and two of values (``f``: 4 bytes a sample) per process; at most
:data:`MAX_PROCESSES` processes (those holding the most GPU memory) plus the ones being viewed;
samples older than the window are dropped, and a series that still grows past its point budget
keeps every other sample (each kept one the larger of its pair), so it covers the whole window at
a coarser step. A process that has not been seen for longer than the window is forgotten.

Pure and Textual-free, like :mod:`gputui.derive.history`: the UI asks for a window of a series as
fresh tuples.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from gputui.derive.columns import Columns, Frozen
from gputui.model.processes import GpuProcess
from gputui.model.records import record
from gputui.model.snapshot import Snapshot

#: Processes followed at once (the ones holding the most GPU memory), besides the viewed ones.
MAX_PROCESSES = 256

#: Samples kept per process at most; past it the series is thinned to every other sample.
MAX_POINTS = 1024

#: The metrics kept per process: GPU memory in bytes (summed over its GPUs) and SM % (summed).
METRICS: tuple[str, ...] = ("mem", "sm")

#: The unit of each metric, as :data:`gputui.derive.history.UNITS` spells units.
UNITS: dict[str, str] = {"mem": "B", "sm": "%"}

#: A process's identity across refreshes: its PID and start time (a reused PID is another one).
ProcessKey = tuple[int, float | None]


def process_identity(pid: int, start_time: float | None) -> ProcessKey:
    """The history key of a process: PID and start time (rounded to the 10 ms of a clock tick).

    Args:
        pid: Host PID.
        start_time: Its start, seconds since the epoch; None when unknown (the PID alone then).

    Returns:
        A hashable key equal for every refresh of the same process.
    """
    if start_time is None or not math.isfinite(start_time):
        return (pid, None)
    return (pid, round(start_time, 2))


def identity_of(process: GpuProcess) -> ProcessKey:
    """:func:`process_identity` of a snapshot's process record."""
    return process_identity(process.pid, process.info.start_time)


@record
class ProcessTotals:
    """One process at one refresh, its rows on several GPUs added up.

    Attributes:
        key: Its identity.
        memory_bytes: GPU memory over all its GPUs; None when NVML gave no figure for any.
        sm_util: SM % per GPU (the mean over its GPUs); None when no GPU reported one.
        gpu_indexes: The GPUs it uses, ascending.
    """

    key: ProcessKey
    memory_bytes: int | None
    sm_util: int | None
    gpu_indexes: tuple[int, ...]


def _sums(processes: Iterable[GpuProcess]) -> dict[ProcessKey, list[Any]]:
    """Identity -> ``[memory, sm, gpu indexes]`` over a process's rows (one pass).

    Memory is summed over its GPUs; SM % is the mean over the GPUs that reported one.
    """
    found: dict[ProcessKey, list[Any]] = {}
    readings: dict[ProcessKey, int] = {}  # rows with an SM % of each process on several GPUs
    for process in processes:
        start = process.info.start_time
        # process_identity, inline: this runs for every GPU process on every refresh.
        key = (process.sample.pid, None if start is None or start != start else round(start, 2))
        used, util = process.sample.used_memory_bytes, process.sample.sm_util
        entry = found.get(key)
        if entry is None:
            found[key] = [used, util, (process.sample.gpu_index,)]
            continue
        if used is not None:
            entry[0] = used if entry[0] is None else entry[0] + used
        if util is not None:
            if entry[1] is None:
                entry[1] = util
            else:
                entry[1] += util
                readings[key] = readings.get(key, 1) + 1
        entry[2] += (process.sample.gpu_index,)
    for key, count in readings.items():
        # SM % per GPU, as everywhere else: a process on three busy GPUs is 90 %, not 270 %.
        entry = found[key]
        entry[1] = round(entry[1] / count)
    return found


@record
class RefreshSums:
    """One refresh's processes summed over their GPUs, most GPU memory first.

    Computed once per snapshot where the snapshot is made (the collector's thread), so the UI
    thread's :meth:`ProcessHistory.record` only appends.

    Attributes:
        taken_at: The snapshot's time (the sums belong to that snapshot only).
        found: Identity -> ``[memory, sm, gpu indexes]``; never changed once built.
        by_memory: The identities, most GPU memory first (unknown memory last).
    """

    taken_at: float
    found: Mapping[ProcessKey, Sequence[Any]]
    by_memory: tuple[ProcessKey, ...]


def refresh_sums(snapshot: Snapshot) -> RefreshSums:
    """:class:`RefreshSums` of ``snapshot``."""
    found = _sums(snapshot.processes)
    order = sorted(found, key=lambda k: found[k][0] or 0, reverse=True)
    return RefreshSums(snapshot.taken_at, found, tuple(order))


def totals(processes: Iterable[GpuProcess]) -> dict[ProcessKey, ProcessTotals]:
    """Every process of a snapshot once, with its GPU memory and SM % summed over its GPUs.

    Args:
        processes: ``Snapshot.processes`` (one row per process and GPU).

    Returns:
        Identity -> totals, in the order the processes first appear.
    """
    return {
        key: ProcessTotals(key, mem, sm, tuple(sorted(set(gpus))))
        for key, (mem, sm, gpus) in _sums(processes).items()
    }


class _Track:
    """One process's samples: times, memory and SM % columns, NaN where a metric had no figure.

    Chunked (:class:`~gputui.derive.columns.Columns`), so that the view handed to the UI with
    each refresh takes a few references, not a copy.
    """

    __slots__ = ("cols", "last_seen")

    def __init__(self, chunk: int) -> None:
        self.cols = Columns("dff", chunk)
        self.last_seen = -math.inf

    def append(self, at: float, mem: int | None, sm: int | None) -> None:
        self.cols.append((at, math.nan if mem is None else mem, math.nan if sm is None else sm))
        self.last_seen = at

    def __len__(self) -> int:
        return len(self.cols)

    def drop_before(self, horizon: float) -> None:
        """Forget the samples older than ``horizon`` (an offset moved, nothing deleted in place)."""
        self.cols.cut(self.cols.count_below(0, horizon))

    def thin(self) -> None:
        """Keep every other sample, each the larger of its pair (the newest always kept)."""
        old = self.cols.freeze()
        old_times, old_mem, old_sm = old.column(0), old.column(1), old.column(2)
        n = len(old_times)
        # Pairs end at the newest sample, so the latest figure is never merged away.
        start = n % 2
        times = array("d", old_times[:start])
        mem = array("f", old_mem[:start])
        sm = array("f", old_sm[:start])
        for i in range(start, n, 2):
            times.append(old_times[i + 1])
            mem.append(_larger(old_mem[i], old_mem[i + 1]))
            sm.append(_larger(old_sm[i], old_sm[i + 1]))
        # New arrays: a view taken before still holds the old ones, whole.
        self.cols.replace((times, mem, sm))

    def freeze(self) -> _FrozenTrack:
        """The track as it is now, for a :class:`ProcessHistoryView`."""
        return _FrozenTrack(self.cols.freeze(), self.last_seen)

    def nbytes(self) -> int:
        return self.cols.nbytes()


class _FrozenTrack:
    """One process's samples as a view saw them."""

    __slots__ = ("last_seen", "rows")

    def __init__(self, rows: Frozen, last_seen: float) -> None:
        self.rows = rows
        self.last_seen = last_seen


def _larger(a: float, b: float) -> float:
    """The larger of two samples; a missing one (NaN) loses to a figure."""
    if math.isnan(a):
        return b
    if math.isnan(b):
        return a
    return max(a, b)


class ProcessHistoryReader:
    """The reads every holder of per-process history answers.

    :class:`ProcessHistory` (the writer's own), :class:`ProcessHistoryView` (one refresh's,
    handed to the front-ends) and :class:`ShownProcessHistory` (the view a front-end shows).
    """

    __slots__ = ()

    #: The newest recorded refresh's time (None: none yet).
    last_time: float | None

    def _frozen(self, key: ProcessKey) -> _FrozenTrack | None:
        raise NotImplementedError

    def timed(
        self, key: ProcessKey, metric: str, window_s: float, now: float | None = None
    ) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """Times and values of one metric within the last ``window_s`` seconds, oldest first.

        Args:
            key: The process.
            metric: ``mem`` (bytes) or ``sm`` (%).
            window_s: Window length in seconds.
            now: End of the window; defaults to the newest recorded refresh.

        Returns:
            Fresh tuples; samples without a figure are left out (empty for an unknown process).
        """
        track = self._frozen(key)
        if track is None or not len(track.rows):
            return (), ()
        times = track.rows.column(0)
        values = track.rows.column(1 if metric == "mem" else 2)
        end = self.last_time if now is None else now
        first = bisect_left(times, (end if end is not None else times[-1]) - window_s)
        pairs = [
            (t, v) for t, v in zip(times[first:], values[first:], strict=True) if not math.isnan(v)
        ]
        return tuple(t for t, _ in pairs), tuple(v for _, v in pairs)

    def covered(self, key: ProcessKey, window_s: float) -> float:
        """Seconds of the window the process's samples cover (0: none)."""
        track = self._frozen(key)
        if track is None or not len(track.rows) or self.last_time is None:
            return 0.0
        times = track.rows.column(0)
        first = bisect_left(times, self.last_time - window_s)
        if first >= len(times):
            return 0.0
        return min(window_s, self.last_time - times[first])

    def last_seen(self, key: ProcessKey) -> float | None:
        """When the process was last recorded; None when it is not followed."""
        track = self._frozen(key)
        return None if track is None else track.last_seen


class ProcessHistory(ProcessHistoryReader):
    """GPU memory and SM % per process over a time window, bounded in processes and points.

    Args:
        window_s: How far back every series reaches (and how long a vanished process is kept).
        max_processes: Processes followed at once, besides the viewed ones.
        max_points: Samples per process before the series is thinned.
    """

    def __init__(
        self,
        window_s: float = 1800.0,
        max_processes: int = MAX_PROCESSES,
        max_points: int = MAX_POINTS,
    ) -> None:
        if window_s <= 0 or max_processes < 1 or max_points < 2:
            raise ValueError("window_s must be positive, max_processes >= 1 and max_points >= 2")
        self.window_s = window_s
        self.max_processes = max_processes
        self.max_points = max_points
        self.last_time: float | None = None
        self._tracks: dict[ProcessKey, _Track] = {}
        # A thinned track restarts at half its budget: a chunk an eighth of it cuts finely.
        self._chunk = max(16, max_points // 8)

    def record(
        self,
        snapshot: Snapshot,
        viewed: Collection[ProcessKey] = (),
        sums: RefreshSums | None = None,
    ) -> None:
        """Append one refresh: the processes holding the most GPU memory, and the viewed ones.

        Args:
            snapshot: The refresh.
            viewed: Identities followed whatever their memory (the drill-down's process).
            sums: :func:`refresh_sums` of ``snapshot`` when already computed (else computed here).
        """
        at = snapshot.taken_at
        if self.last_time is not None and at <= self.last_time:
            return  # the same snapshot twice (or a clock step back) must not duplicate samples
        self.last_time = at
        if sums is None or sums.taken_at != at:
            sums = refresh_sums(snapshot)
        found = sums.found
        keys = list(sums.by_memory[: self.max_processes])
        if len(found) > self.max_processes:
            kept = set(keys)
            keys += [k for k in viewed if k in found and k not in kept]
        tracks = self._tracks
        for key in keys:
            track = tracks.get(key)
            if track is None:
                track = tracks[key] = _Track(self._chunk)
            mem, sm, _ = found[key]
            track.append(at, mem, sm)
        self._prune(at, viewed)

    def _prune(self, now: float, viewed: Collection[ProcessKey]) -> None:
        horizon = now - self.window_s
        for key in [k for k, t in self._tracks.items() if t.last_seen < horizon]:
            del self._tracks[key]
        for track in self._tracks.values():
            track.drop_before(horizon)
            if len(track) > self.max_points:
                track.thin()
        excess = len(self._tracks) - self.max_processes - len(viewed)
        if excess > 0:
            # Processes that left the top: the longest unseen go first, never a viewed one.
            tracks = self._tracks
            spare = sorted(
                (k for k in tracks if k not in viewed), key=lambda k: tracks[k].last_seen
            )
            for key in spare[:excess]:
                del self._tracks[key]

    def view(self) -> ProcessHistoryView:
        """Every followed process as it is now, for another thread to read while this one records.

        A few references per process, no copy of the samples.
        """
        tracks = {key: t.freeze() for key, t in self._tracks.items()}
        return ProcessHistoryView(tracks, self.last_time)

    def _frozen(self, key: ProcessKey) -> _FrozenTrack | None:
        track = self._tracks.get(key)
        return None if track is None else track.freeze()

    def clear(self) -> None:
        """Forget everything (a replay jumped back in time)."""
        self._tracks.clear()
        self.last_time = None

    def nbytes(self) -> int:
        """Bytes the samples take (the arrays' contents)."""
        return sum(t.nbytes() for t in self._tracks.values())

    def __contains__(self, key: object) -> bool:
        return key in self._tracks

    def __len__(self) -> int:
        return len(self._tracks)


class ProcessHistoryView(ProcessHistoryReader):
    """Every followed process of a :class:`ProcessHistory` at one refresh, never changed later.

    Built on the collector's thread with each analysis and read on the UI's (the drill-down).

    Args:
        tracks: Each process's frozen samples.
        last_time: The newest recorded refresh's time.
    """

    __slots__ = ("_tracks", "last_time")

    def __init__(
        self,
        tracks: Mapping[ProcessKey, _FrozenTrack] | None = None,
        last_time: float | None = None,
    ) -> None:
        self._tracks: Mapping[ProcessKey, _FrozenTrack] = tracks if tracks is not None else {}
        self.last_time = last_time

    def _frozen(self, key: ProcessKey) -> _FrozenTrack | None:
        return self._tracks.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self._tracks

    def __len__(self) -> int:
        return len(self._tracks)


class ShownProcessHistory(ProcessHistoryReader):
    """The per-process history a front-end shows: the view of the last refresh it applied."""

    __slots__ = ("view",)

    def __init__(self, view: ProcessHistoryView | None = None) -> None:
        self.view = view if view is not None else ProcessHistoryView()

    def show(self, view: ProcessHistoryView) -> None:
        """Show ``view`` from now on."""
        self.view = view

    @property
    def last_time(self) -> float | None:  # type: ignore[override]
        """The shown view's newest refresh time."""
        return self.view.last_time

    def _frozen(self, key: ProcessKey) -> _FrozenTrack | None:
        return self.view._frozen(key)

    def __contains__(self, key: object) -> bool:
        return key in self.view

    def __len__(self) -> int:
        return len(self.view)
