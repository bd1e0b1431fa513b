from __future__ import annotations

from dataclasses import replace

import pytest
from textual.app import App, ComposeResult

from gputui.derive.history import (
    UNITS,
    WINDOWS,
    History,
    container_key,
    coverage_label,
    gpu_key,
    next_window,
    resample,
    value_summary,
    window_label,
)
from gputui.model.status import SourceStatus
from gputui.ui.widgets.history import HistoryPanel
from tests.support.factories import GIB, cid, container, gpu, proc, snapshot


def test_maxlen_is_history_over_interval() -> None:
    assert History(1800.0, 1.0).maxlen == 1800
    assert History(1800.0, 0.5).maxlen == 3600
    assert History(60.0, 7.0).maxlen == 9


def test_rejects_non_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        History(0, 1.0)
    with pytest.raises(ValueError, match="positive"):
        History(60, 1.0).set_interval(0)


def test_ring_drops_oldest() -> None:
    h = History(5.0, 1.0)
    for t in range(10):
        h.add(("gpu", "g", "util"), float(t), float(t))
    assert h.series(("gpu", "g", "util"), 1e9) == (5.0, 6.0, 7.0, 8.0, 9.0)


def test_window_selects_by_time() -> None:
    h = History(100.0, 1.0)
    for t in range(50):
        h.add(("gpu", "g", "util"), float(t), float(t))
    h.last_time = 49.0
    assert h.series(("gpu", "g", "util"), 3.0) == (46.0, 47.0, 48.0, 49.0)
    assert h.series(("gpu", "g", "util"), 1000.0) == tuple(float(t) for t in range(50))
    assert h.series(("gpu", "x", "util"), 10.0) == ()


def test_series_returns_fresh_tuples() -> None:
    h = History(100.0, 1.0)
    h.add(("gpu", "g", "util"), 1.0, 2.0)
    first = h.series(("gpu", "g", "util"), 60.0)
    assert isinstance(first, tuple)
    h.add(("gpu", "g", "util"), 2.0, 3.0)
    assert first == (2.0,)
    assert h.series(("gpu", "g", "util"), 60.0, now=2.0) == (2.0, 3.0)


def test_resize_keeps_newest() -> None:
    h = History(10.0, 1.0)
    for t in range(10):
        h.add(("gpu", "g", "util"), float(t), float(t))
    h.set_interval(2.0)
    assert h.maxlen == 5
    assert h.series(("gpu", "g", "util"), 1e9, now=9.0) == (5.0, 6.0, 7.0, 8.0, 9.0)
    h.set_interval(0.5)
    assert h.maxlen == 20
    h.add(("gpu", "g", "util"), 10.0, 10.0)
    assert len(h.series(("gpu", "g", "util"), 1e9, now=10.0)) == 6


def test_record_snapshot_metrics_and_containers() -> None:
    processes = [proc(10, 0, 2048, cid(1))]
    containers = [container(1, "a", processes), container(2, "stopped", status="exited")]
    g = gpu(0, util=80, used_gib=70.5, power_w=350.0, temperature_c=61)
    h = History(60.0, 1.0)
    h.record(snapshot(100.0, gpus=[g], processes=processes, containers=containers))
    assert h.series(gpu_key(g, "util"), 60) == (80.0,)
    assert h.series(gpu_key(g, "mem"), 60) == pytest.approx((100 * 70.5 / 141,))
    assert h.series(gpu_key(g, "power"), 60) == (350.0,)
    assert h.series(gpu_key(g, "temp"), 60) == (61.0,)
    assert h.series(container_key(cid(1)), 60) == (2048.0 * 1024 * 1024,)
    assert h.series(container_key(cid(2)), 60) == ()  # stopped, no GPU process: nothing to draw


def test_record_skips_none_lost_and_duplicates() -> None:
    g = gpu(0, utilization_gpu=None, power_w=None)
    lost = gpu(1, lost=True)
    h = History(60.0, 1.0)
    snap = snapshot(100.0, gpus=[g, lost])
    h.record(snap)
    h.record(snap)  # applied twice: must not double the sample
    assert h.series(gpu_key(g, "util"), 60) == ()
    assert h.series(gpu_key(g, "power"), 60) == ()
    assert len(h.series(gpu_key(g, "temp"), 60)) == 1
    assert not any(key[1] == gpu_key(lost, "util")[1] for key in set(h.keys()))


def test_prunes_series_gone_longer_than_history() -> None:
    h = History(10.0, 1.0)
    processes = [proc(10, 0, 1, cid(1))]
    docker_down = {"docker": SourceStatus("docker", False, kind="unreachable")}
    h.record(snapshot(0.0, processes=processes, containers=[container(1, "a", processes)]))
    assert container_key(cid(1)) in set(h.keys())
    # Docker unreachable: an empty container list says nothing about the containers; keep them.
    h.record(snapshot(5.0, sources=docker_down))
    assert container_key(cid(1)) in set(h.keys())
    h.record(snapshot(20.0, sources=docker_down))
    assert container_key(cid(1)) not in set(h.keys())
    g = gpu(0)
    assert h.series(gpu_key(g, "util"), 60) == (50.0, 50.0, 50.0)


def test_container_series_dropped_when_the_container_leaves() -> None:
    h = History(600.0, 1.0)
    processes = [proc(10, 0, 2048, cid(1), cpu=150.0)]
    one = container(1, "a", processes, cpu_percent=150.0, memory_used_bytes=3 * GIB)
    h.record(snapshot(0.0, processes=processes, containers=[one]))
    assert h.series(container_key(cid(1), "cpu"), 60) == (150.0,)
    assert h.series(container_key(cid(1), "mem"), 60) == (3.0 * GIB,)
    assert h.series(container_key(cid(1)), 60) == (2048.0 * 1024 * 1024,)
    h.record(snapshot(1.0))  # Docker answered and no longer lists it
    assert not any(key[0] == "container" for key in list(h.keys()))


def test_clear_forgets_everything() -> None:
    h = History(600.0, 1.0)
    h.record(snapshot(10.0))
    h.clear()
    assert len(h) == 0
    assert h.last_time is None
    h.record(snapshot(5.0))  # earlier than before the clear: recorded, not skipped
    assert h.last_time == 5.0


def test_windows_cycle() -> None:
    assert WINDOWS == (60.0, 300.0, 1800.0)
    assert next_window(60.0) == 300.0
    assert next_window(300.0) == 1800.0
    assert next_window(1800.0) == 60.0
    assert [window_label(w) for w in WINDOWS] == ["1 min", "5 min", "30 min"]


def test_gib_constant_sane() -> None:
    assert GIB == 1024**3


def test_units_and_summaries() -> None:
    assert UNITS[("gpu", "mem")] == "%"  # a GPU's memory row is the share in use
    assert UNITS[("container", "mem")] == "B"  # a container's is bytes
    assert value_summary((82.0, 40.0, 98.0, 82.0), "%") == "82%  min 40%  max 98%"
    assert value_summary((612.4, 580.0), "W") == "580W  min 580W  max 612W"
    assert value_summary((66.0,), "°C") == "66°C  min 66°C  max 66°C"
    assert value_summary((12.5 * GIB, 12.0 * GIB), "B") == "12.0GiB  min 12.0GiB  max 12.5GiB"
    assert value_summary((), "%") == "N/A"


def test_coverage_label_says_how_much_of_the_window_is_known() -> None:
    assert coverage_label(252.0, 1800.0) == "last 4m12s of 30 min"
    assert coverage_label(45.0, 60.0) == "last 45s of 1 min"
    assert coverage_label(3725.0, 7200.0) == "last 1h02m of 120 min"
    assert coverage_label(1799.5, 1800.0) == "last 30 min"  # a refresh short is the window


def test_covered_and_timed() -> None:
    h = History(1800.0, 1.0)
    key = ("gpu", "g", "util")
    for t in range(100, 353):  # 253 samples: 252 s of history
        h.add(key, float(t), 50.0)
    h.last_time = 352.0
    assert h.covered([key, ("gpu", "other", "util")], 1800.0) == 252.0
    assert h.covered([key], 60.0) == 60.0
    times, values = h.timed(key, 10.0)
    assert times == tuple(float(t) for t in range(342, 353))
    assert values == (50.0,) * 11


def test_resample_spans_the_window_by_time() -> None:
    # 5 minutes of samples in a 30-minute window over 60 cells of 30 s: the last sixth.
    times = tuple(float(t) for t in range(1500, 1801))
    values = tuple(float(t % 7) for t in range(1500, 1801))
    drawn = resample(times, values, 1800.0, 1800.0, 60)
    assert len(drawn) == 10  # cells 50..59
    assert max(drawn) == 6.0
    # The same samples in a 5-minute window fill every cell.
    assert len(resample(times, values, 1800.0, 300.0, 60)) == 60
    # A gap repeats the previous value instead of collapsing the time axis.
    assert resample((0.0, 50.0), (1.0, 2.0), 60.0, 60.0, 6) == (1.0, 1.0, 1.0, 1.0, 1.0, 2.0)
    assert resample((), (), 60.0, 60.0, 6) == ()


class _HistoryApp(App[None]):
    def compose(self) -> ComposeResult:
        yield HistoryPanel(id="history")


async def test_history_rows_print_units_min_max_and_the_span_covered() -> None:
    g = gpu(0, util=80, used_gib=70.5, power_w=350.0, temperature_c=61)
    processes = [proc(10, 0, 2048, cid(1))]
    ctr = container(1, "trainer", processes)
    h = History(1800.0, 1.0)
    for step in range(253):  # 4m12s of a 30-minute window
        sample = replace(g, utilization_gpu=40 + step % 59, power_w=300.0 + step % 3)
        h.record(snapshot(1000.0 + step, gpus=[sample], processes=processes, containers=[ctr]))
    app = _HistoryApp()
    async with app.run_test(size=(120, 30)) as pilot:
        panel = app.query_one(HistoryPanel)
        panel.show((g,), h, 1800.0, None)
        await pilot.pause()
        panel.show((g,), h, 1800.0, None)  # laid out now: sparklines placed by time
        await pilot.pause()
        assert str(panel.title_label.content).startswith("last 4m12s of 30 min")
        rows = panel.rows[gpu_key(g, "util")[1]]
        texts = {m: str(row.value.content) for m, row in rows.items()}
        assert texts["util"] == "56%  min 40%  max 98%"
        assert texts["mem"] == "50%  min 50%  max 50%"  # 70.5 of 141 GiB, as a percentage
        assert texts["power"] == "300W  min 300W  max 302W"
        assert texts["temp"] == "61°C  min 61°C  max 61°C"
        # 252 s of 1800 s: the line covers about a seventh of the sparkline, at its right.
        spark = rows["util"].spark
        width = spark.size.width
        assert 0 < len(spark.data) <= width * 252 // 1800 + 2
        line = spark.render().plain
        assert len(line) == width and line.lstrip() == line.strip()
        assert len(line) - len(line.lstrip()) >= width - width * 252 // 1800 - 2
        # The 1-minute window is full: no "of", and every cell is drawn.
        panel.show((g,), h, 60.0, ctr)
        await pilot.pause()
        assert str(panel.title_label.content).startswith("last 1 min  ·")
        assert len(spark.data) == width
        assert str(panel.container_row.value.content) == ("2.0GiB  min 2.0GiB  max 2.0GiB")
