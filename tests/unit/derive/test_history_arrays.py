"""History keeps samples in flat arrays, bounded by its length (plus a small slack)."""

from __future__ import annotations

import sys
from array import array

from gputui.derive.history import MAX_POINTS, SLACK, History


def test_samples_are_flat_doubles_bounded_by_maxlen() -> None:
    history = History(history_seconds=100.0, interval=1.0)
    key = ("gpu", "GPU-0", "util")
    for t in range(1, 1001):
        history.add(key, float(t), float(t % 7))
    series = history._series[key]
    column = series.cols.column(1)
    assert isinstance(column, array) and column.typecode == "d"
    assert len(series.cols) <= 100 + 100 // SLACK
    # Rows cut but still in their chunk: at most one chunk more.
    assert series.cols.allocated <= 100 + 2 * (100 // SLACK)
    # Exactly the newest 100 come back, oldest first, whatever the slack holds.
    assert history.series(key, 1e9) == tuple(float(t % 7) for t in range(901, 1001))
    times, values = history.timed(key, 10.0)
    assert times == tuple(float(t) for t in range(990, 1001))
    assert values == tuple(float(t % 7) for t in range(990, 1001))
    history.last_time = 1000.0  # what record() sets
    assert history.covered([key], 1e9) == 99.0  # from the oldest kept sample, not the slack
    # 8 bytes a sample and a value, where a deque of floats took about 32 each.
    frozen = series.cols.freeze()
    per_sample = (sys.getsizeof(frozen.column(0)) + sys.getsizeof(frozen.column(1))) / len(frozen)
    assert per_sample < 20
    assert series.cols.nbytes() <= 16 * series.cols.allocated


def test_resize_keeps_the_newest() -> None:
    history = History(history_seconds=100.0, interval=1.0)
    key = ("gpu", "GPU-0", "power")
    for t in range(1, 201):
        history.add(key, float(t), float(t))
    history.set_interval(2.0)  # 50 samples now
    assert history.series(key, 1e9) == tuple(float(t) for t in range(151, 201))
    history.add(key, 201.0, 201.0)
    assert history.series(key, 1e9)[-2:] == (200.0, 201.0)
    assert len(history.series(key, 1e9)) == 50


def test_fast_refreshes_share_points_so_a_series_stays_within_max_points() -> None:
    # At 0.1 s a 30-minute series held 18,000 samples; samples within one step share a point.
    h = History(1800.0, 0.1)
    assert h.fold_s == 1800.0 / MAX_POINTS
    assert h.maxlen == MAX_POINTS
    key = ("gpu", "g", "util")
    for i in range(40_000):  # over an hour of 0.1 s refreshes, one 0.1 s spike
        h.add(key, i * 0.1, 100.0 if i == 30_001 else 1.0)
    h.last_time = 39_999 * 0.1
    times, values = h.timed(key, 1800.0)
    assert len(values) <= MAX_POINTS
    assert times[-1] - times[0] >= 1800.0 - 1.0  # the window is still covered
    assert values.count(100.0) == 1  # a point keeps the largest of its samples: the spike
    assert set(values) == {1.0, 100.0}
    assert times[-1] == 39_999 * 0.1  # and the newest sample's time


def test_refreshes_at_half_a_second_or_slower_keep_one_point_each() -> None:
    for interval in (0.4, 0.5, 1.0, 2.0):
        h = History(1800.0, interval)
        assert h.fold_s == 0.0
        key = ("gpu", "g", "util")
        for i in range(100):
            h.add(key, i * interval * 1.02, float(i))  # with some jitter
        assert len(h.series(key, 1800.0, now=100 * interval * 1.02)) == 100
        assert h.maxlen == round(1800.0 / interval)


def test_changing_the_interval_changes_the_folding() -> None:
    h = History(1800.0, 1.0)
    assert h.fold_s == 0.0
    h.set_interval(0.1)
    assert h.fold_s > 0 and h.maxlen == MAX_POINTS
