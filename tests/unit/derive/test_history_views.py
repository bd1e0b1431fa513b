"""History views: what one analysis hands the UI never changes while the collector records on.

The collector's thread appends to the buffers (:class:`~gputui.derive.columns.Columns`) while the
UI thread reads the view of the snapshot it applied; a view must keep that refresh's state whole
through later appends, folds, cuts, resizes, thinning and clears, and cost references, not a copy.
"""

from __future__ import annotations

import itertools
import math
import random
import threading

from gputui.derive.analysis import Analyzer
from gputui.derive.columns import Columns
from gputui.derive.history import History, gpu_key
from gputui.derive.process_history import ProcessHistory, identity_of
from gputui.model.gpu import GpuProcessSample, GpuSample
from gputui.model.processes import GpuProcess, ProcessInfo
from gputui.model.snapshot import HostInfo, Snapshot
from gputui.model.status import SourceStatus


def _gpu(util: int) -> GpuSample:
    return GpuSample(
        index=0,
        uuid="GPU-0",
        name="test",
        utilization_gpu=util,
        utilization_memory=0,
        memory_used_bytes=util * 1024**2,
        memory_total_bytes=100 * 1024**2,
        temperature_c=40,
        power_w=100.0,
        power_limit_w=300.0,
        clock_sm_mhz=1000,
        clock_mem_mhz=1000,
        throttle_reasons=0,
        pstate=0,
    )


def _snap(at: float, util: int, pids: int = 3) -> Snapshot:
    procs = tuple(
        GpuProcess(
            sample=GpuProcessSample(
                pid=100 + i, gpu_index=0, used_memory_bytes=(i + 1 + util) * 1024**2, sm_util=util
            ),
            info=ProcessInfo(pid=100 + i, exists=True, user="root", start_time=1.0 + i),
        )
        for i in range(pids)
    )
    return Snapshot(
        taken_at=at,
        mode="scenario",
        host=HostInfo(hostname="t"),
        sources={"nvml": SourceStatus("nvml", True)},
        gpus=(_gpu(util),),
        processes=procs,
    )


def test_columns_frozen_views_match_a_plain_model_through_appends_and_cuts() -> None:
    rng = random.Random(7)
    cols = Columns("dd", chunk=5)
    model: list[tuple[float, float]] = []
    views: list[tuple[object, list[tuple[float, float]]]] = []
    t = 0.0
    for _ in range(2000):
        op = rng.random()
        if op < 0.6:
            t += 1.0
            row = (t, rng.random())
            cols.append(row)
            model.append(row)
        elif op < 0.7 and model:
            value = rng.random()
            cols.set_last(1, value)  # a fold: the newest row changes in place
            model[-1] = (model[-1][0], value)
        elif op < 0.85:
            n = rng.randrange(0, 8)
            cols.cut(n)
            del model[:n]
        elif op < 0.9:
            horizon = t - rng.randrange(0, 20)
            below = cols.count_below(0, horizon)
            assert below == sum(1 for r in model if r[0] < horizon)
        else:
            views.append((cols.freeze(), list(model)))
        assert len(cols) == len(model)
        assert cols.allocated <= len(model) + 2 * 5 + 5  # cut rows linger within one chunk
    for frozen, seen in views:
        assert isinstance(frozen, type(cols.freeze()))
        assert list(zip(frozen.column(0), frozen.column(1), strict=True)) == seen


def test_a_history_view_keeps_its_refresh_through_every_later_change() -> None:
    history = History(history_seconds=40.0, interval=1.0)
    key = gpu_key(_gpu(0), "util")
    for step in range(30):
        history.record(_snap(1000.0 + step, step))
    view = history.view()
    before = view.timed(key, 1e9)
    assert before[1] == tuple(float(u) for u in range(30))
    assert view.last_time == 1029.0
    for step in range(30, 200):  # past its length: the oldest samples are cut
        history.record(_snap(1000.0 + step, step % 101))
    history.set_interval(0.05)  # folds samples from now on (and resizes the buffers)
    for step in range(40):
        history.record(_snap(1200.0 + step * 0.05, 100))
    history.set_interval(4.0)  # fewer points: the newest are kept
    assert view.timed(key, 1e9) == before
    assert view.covered([key], 1e9) == 29.0
    history.clear()
    assert view.series(key, 1e9) == before[1]
    assert len(view) == len(list(view.keys())) > 0


def test_a_process_history_view_keeps_its_refresh_through_thinning_and_pruning() -> None:
    history = ProcessHistory(window_s=50.0, max_points=16)
    snaps = [_snap(1000.0 + s, s % 7) for s in range(12)]
    for snap in snaps:
        history.record(snap)
    key = identity_of(snaps[0].processes[0])
    view = history.view()
    before = view.timed(key, "mem", 1e9)
    assert len(before[0]) == 12
    for s in range(12, 200):  # thinned past 16 points, pruned past the window
        history.record(_snap(1000.0 + s, s % 7))
    assert view.timed(key, "mem", 1e9) == before
    assert view.last_time == 1011.0 and view.last_seen(key) == 1011.0
    assert len(history.timed(key, "mem", 1e9)[0]) <= 16
    history.clear()
    assert view.timed(key, "mem", 1e9) == before and key in view


def test_views_read_on_another_thread_are_whole_while_the_analysis_records() -> None:
    analyzer = Analyzer((), history_seconds=60.0, interval=1.0)
    key = gpu_key(_gpu(0), "util")
    published: list[object] = []
    done = threading.Event()
    errors: list[BaseException] = []

    def read() -> None:
        try:
            while not done.is_set() or published:
                if not published:
                    done.wait(0.001)
                    continue
                analysis = published.pop()
                assert analysis is not None
                view = analysis.history  # type: ignore[attr-defined]
                times, values = view.timed(key, 1e9)
                assert len(times) == len(values) and times[-1] == view.last_time
                assert all(a < b for a, b in itertools.pairwise(times))
                # Each sample is the one its snapshot carried (util = its step modulo 101).
                assert all(v == (t - 1000.0) % 101 for t, v in zip(times, values, strict=True))
                procs = analysis.process_history  # type: ignore[attr-defined]
                for proc in analysis.snapshot.processes:  # type: ignore[attr-defined]
                    mem = procs.timed(identity_of(proc), "mem", 1e9)
                    assert len(mem[0]) == len(mem[1]) and mem[0][-1] == view.last_time
        except BaseException as exc:  # reported on the test's thread
            errors.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for step in range(1500):
            published.append(analyzer.analyse(_snap(1000.0 + step, step % 101)))
    finally:
        done.set()
        reader.join(60)
    assert not reader.is_alive()
    assert not errors, errors[0]


def test_an_analyzer_without_history_carries_none_and_one_with_it_carries_views() -> None:
    assert Analyzer(()).analyse(_snap(1.0, 5)).history is None
    analyzer = Analyzer((), history_seconds=60.0)
    first = analyzer.analyse(_snap(1.0, 5))
    second = analyzer.analyse(_snap(2.0, 6))
    key = gpu_key(_gpu(0), "util")
    assert first.history is not None and second.history is not None
    assert first.history.series(key, 60.0) == (5.0,)  # the view of its own refresh
    assert second.history.series(key, 60.0) == (5.0, 6.0)
    # A snapshot older than the last (a replay seeking back) restarts the history there.
    back = analyzer.analyse(_snap(1.5, 9))
    assert back.history is not None and back.history.series(key, 60.0) == (9.0,)
    assert back.process_history is not None and back.process_history.last_time == 1.5
    # The interval asked for from another thread sizes the buffers with the next analysis.
    analyzer.set_interval(0.5)
    third = _snap(3.0, 1)
    assert analyzer.analyse(third).history.maxlen == 120  # type: ignore[union-attr]
    # Asked for while the collector hands the same snapshot again (a stalled source, a paused
    # replay): that repeat and every later one carry the new size.
    analyzer.set_interval(2.0)
    assert analyzer.analyse(third).history.maxlen == 30  # type: ignore[union-attr]
    assert analyzer.analyse(third).history.maxlen == 30  # type: ignore[union-attr]


def test_a_followed_process_is_kept_whatever_its_memory() -> None:
    analyzer = Analyzer((), history_seconds=60.0)
    analyzer.process_history.max_processes = 1  # type: ignore[union-attr]
    small = identity_of(_snap(1.0, 0).processes[0])  # the least memory of the three
    analyzer.follow({small})
    analysis = analyzer.analyse(_snap(1.0, 0))
    assert analysis.process_history is not None and small in analysis.process_history
    assert not math.isnan(analysis.process_history.timed(small, "mem", 60.0)[1][0])
