from __future__ import annotations

import pytest
from ui_factories import GIB, cid, container, gpu, proc, snapshot

from gputui.derive.history import (
    WINDOWS,
    History,
    container_key,
    gpu_key,
    next_window,
    window_label,
)
from gputui.model import SourceStatus


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
    assert h.series(gpu_key(g, "mem"), 60) == (pytest.approx(100 * 70.5 / 141),)
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
