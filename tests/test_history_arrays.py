"""History keeps samples in flat arrays, bounded by its length (plus a small slack)."""

from __future__ import annotations

import sys
from array import array

from gputui.derive.history import SLACK, History


def test_samples_are_flat_doubles_bounded_by_maxlen() -> None:
    history = History(history_seconds=100.0, interval=1.0)
    key = ("gpu", "GPU-0", "util")
    for t in range(1, 1001):
        history.add(key, float(t), float(t % 7))
    series = history._series[key]
    assert isinstance(series.values, array) and series.values.typecode == "d"
    assert len(series.times) <= 100 + 100 // SLACK
    # Exactly the newest 100 come back, oldest first, whatever the slack holds.
    assert history.series(key, 1e9) == tuple(float(t % 7) for t in range(901, 1001))
    times, values = history.timed(key, 10.0)
    assert times == tuple(float(t) for t in range(990, 1001))
    assert values == tuple(float(t % 7) for t in range(990, 1001))
    history.last_time = 1000.0  # what record() sets
    assert history.covered([key], 1e9) == 99.0  # from the oldest kept sample, not the slack
    # 8 bytes a sample and a value, where a deque of floats took about 32 each.
    per_sample = (sys.getsizeof(series.times) + sys.getsizeof(series.values)) / len(series.times)
    assert per_sample < 20


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
