"""Per-process GPU memory and SM % history: identity, windows and its bounds."""

from __future__ import annotations

import math

import pytest

from gputui.derive.process_history import (
    MAX_POINTS,
    MAX_PROCESSES,
    ProcessHistory,
    identity_of,
    process_identity,
    refresh_sums,
    totals,
)
from gputui.model.gpu import GpuProcessSample
from gputui.model.processes import GpuProcess, ProcessInfo
from gputui.model.snapshot import HostInfo, Snapshot

MIB = 1024**2


def proc(
    pid: int,
    gpu: int = 0,
    mem_mib: int | None = 100,
    sm: int | None = 10,
    start: float | None = None,
) -> GpuProcess:
    used = None if mem_mib is None else mem_mib * MIB
    return GpuProcess(
        GpuProcessSample(pid=pid, gpu_index=gpu, used_memory_bytes=used, sm_util=sm),
        ProcessInfo(pid=pid, start_time=1000.0 + pid if start is None else start),
    )


def snap(at: float, *processes: GpuProcess) -> Snapshot:
    return Snapshot(taken_at=at, mode="live", host=HostInfo("h"), processes=processes)


def test_a_process_on_two_gpus_is_summed_once() -> None:
    found = totals([proc(7, 0, 100, 20), proc(7, 1, 50, None), proc(8, 0, None, None)])
    seven = found[process_identity(7, 1007.0)]
    assert seven.memory_bytes == 150 * MIB
    assert seven.sm_util == 20
    assert seven.gpu_indexes == (0, 1)
    eight = found[process_identity(8, 1008.0)]
    assert eight.memory_bytes is None and eight.sm_util is None


def test_identity_is_pid_and_start_time() -> None:
    assert identity_of(proc(7)) == (7, 1007.0)
    assert process_identity(7, 1007.001) == process_identity(7, 1007.0)  # float noise
    assert process_identity(7, 2000.0) != process_identity(7, 1007.0)  # a reused PID
    assert process_identity(7, None) == (7, None)
    assert process_identity(7, math.nan) == (7, None)


def test_series_over_a_window_skip_missing_figures() -> None:
    history = ProcessHistory(window_s=60.0)
    for i in range(10):
        sm = None if i % 2 else i
        history.record(snap(100.0 + i, proc(7, mem_mib=100 + i, sm=sm)))
    key = process_identity(7, 1007.0)
    times, mem = history.timed(key, "mem", 60.0)
    assert times == tuple(100.0 + i for i in range(10))
    assert mem == tuple(float((100 + i) * MIB) for i in range(10))
    times, sm_values = history.timed(key, "sm", 60.0)
    assert sm_values == (0.0, 2.0, 4.0, 6.0, 8.0)
    assert times == (100.0, 102.0, 104.0, 106.0, 108.0)
    # A shorter window is the newest samples only.
    assert history.timed(key, "mem", 3.0)[0] == (106.0, 107.0, 108.0, 109.0)
    assert history.covered(key, 60.0) == 9.0
    assert history.covered(key, 3.0) == 3.0
    assert history.timed(process_identity(7, 5.0), "mem", 60.0) == ((), ())


def test_the_same_snapshot_twice_adds_nothing() -> None:
    history = ProcessHistory()
    history.record(snap(100.0, proc(7)))
    history.record(snap(100.0, proc(7)))
    history.record(snap(99.0, proc(7)))
    assert len(history.timed(identity_of(proc(7)), "mem", 60.0)[0]) == 1


def test_a_reused_pid_starts_a_new_series() -> None:
    history = ProcessHistory()
    history.record(snap(100.0, proc(7, start=1.0)))
    history.record(snap(101.0, proc(7, start=50.0, mem_mib=5)))
    assert history.timed((7, 1.0), "mem", 60.0)[1] == (100.0 * MIB,)
    assert history.timed((7, 50.0), "mem", 60.0)[1] == (5.0 * MIB,)


def test_only_the_processes_with_most_memory_plus_the_viewed_ones() -> None:
    history = ProcessHistory(max_processes=3)
    small = proc(1, mem_mib=1)
    processes = [small, *(proc(10 + i, mem_mib=100 + i) for i in range(5))]
    history.record(snap(100.0, *processes), viewed={identity_of(small)})
    assert len(history) == 4
    assert identity_of(small) in history
    assert identity_of(processes[-1]) in history  # the most memory
    assert identity_of(processes[1]) not in history  # the fewest but the viewed one
    # No longer viewed and never in the top: it goes once the count is over the bound.
    history.record(snap(101.0, *processes))
    assert len(history) == 3
    assert identity_of(small) not in history


def test_default_bounds_hold_for_many_processes_and_long_runs() -> None:
    history = ProcessHistory(window_s=1800.0)
    processes = [proc(100 + i, mem_mib=i + 1) for i in range(MAX_PROCESSES + 200)]
    for step in range(MAX_POINTS + 300):
        history.record(snap(float(step), *processes))
    assert len(history) == MAX_PROCESSES
    # Times are doubles, the two metrics floats: 16 bytes a sample.
    assert history.nbytes() <= MAX_PROCESSES * MAX_POINTS * 16


def test_thinning_keeps_the_whole_window_and_the_newest_sample() -> None:
    history = ProcessHistory(window_s=1000.0, max_points=16)
    for step in range(200):
        history.record(snap(float(step), proc(7, mem_mib=step, sm=step % 7)))
    key = process_identity(7, 1007.0)
    times, mem = history.timed(key, "mem", 1000.0)
    assert 8 <= len(times) <= 16
    assert times[-1] == 199.0 and mem[-1] == 199.0 * MIB
    assert times[0] <= 30.0  # still reaches back to the start, at a coarser step
    assert list(times) == sorted(times)
    # A thinned sample is the larger of its pair: peaks survive.
    assert max(history.timed(key, "sm", 1000.0)[1]) == 6.0


def test_samples_older_than_the_window_go_and_so_does_a_vanished_process() -> None:
    history = ProcessHistory(window_s=10.0)
    for step in range(30):
        history.record(snap(float(step), proc(7), *([proc(8)] if step < 5 else [])))
    assert history.timed(process_identity(7, 1007.0), "mem", 100.0)[0][0] >= 19.0
    assert process_identity(8, 1008.0) not in history  # gone for longer than the window
    gone_recently = ProcessHistory(window_s=10.0)
    gone_recently.record(snap(0.0, proc(8)))
    gone_recently.record(snap(9.0, proc(7)))
    assert gone_recently.last_seen(process_identity(8, 1008.0)) == 0.0  # kept: within window


def test_clear_forgets_everything() -> None:
    history = ProcessHistory()
    history.record(snap(100.0, proc(7)))
    history.clear()
    assert len(history) == 0 and history.last_time is None
    history.record(snap(50.0, proc(7)))  # earlier than before the clear: accepted
    assert len(history) == 1


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="window_s must be positive"):
        ProcessHistory(window_s=0)
    with pytest.raises(ValueError, match="max_points >= 2"):
        ProcessHistory(max_points=1)


def test_sums_computed_elsewhere_record_what_the_snapshot_gives() -> None:
    """Sums made on the collector's thread are used only for their own snapshot."""
    processes = [proc(pid, gpu=pid % 2, mem_mib=pid) for pid in range(1, 400)]
    first, second = snap(1.0, *processes), snap(2.0, *processes[:10])
    mine, given = ProcessHistory(60.0, max_processes=50), ProcessHistory(60.0, max_processes=50)
    mine.record(first)
    mine.record(second)
    given.record(first, sums=refresh_sums(first))
    given.record(second, sums=refresh_sums(first))  # another snapshot's sums: not used
    assert len(given) == len(mine)
    followed = [p for p in processes if identity_of(p) in given]
    assert followed == [p for p in processes if identity_of(p) in mine]
    # The second refresh's own processes (all 10), and 40 of the first's 50 biggest.
    pids = {p.pid for p in followed}
    assert set(range(1, 11)) <= pids and len(pids - set(range(350, 400))) == 10
    for process in followed:
        key = identity_of(process)
        assert given.timed(key, "mem", 60.0) == mine.timed(key, "mem", 60.0)


def test_refresh_sums_order_by_memory_unknown_last() -> None:
    sums = refresh_sums(snap(1.0, proc(1, mem_mib=None), proc(2, mem_mib=5), proc(3, mem_mib=9)))
    assert [key[0] for key in sums.by_memory] == [3, 2, 1]
    assert sums.found[identity_of(proc(2, mem_mib=5))][0] == 5 * MIB
