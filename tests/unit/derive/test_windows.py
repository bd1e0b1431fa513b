"""SampledWindow: bounded points at any refresh rate, falls never hidden."""

from __future__ import annotations

from gputui.derive.windows import SampledWindow, newer


def test_points_stay_bounded_at_a_high_refresh_rate() -> None:
    window = SampledWindow(window_s=1800.0, points=240)
    for i in range(18_000 * 3):  # 1.5 h at 10 Hz
        window.add(i / 10.0, float(i))
    assert 230 <= len(window) <= 242
    times = [t for t, _ in window.points()]
    assert times == sorted(times)
    assert times[-1] - times[0] <= 1800.0


def test_a_short_fall_survives_folding() -> None:
    window = SampledWindow(window_s=600.0, points=120)  # 5 s steps
    for i in range(100):  # 10 Hz for 10 s; one sample drops to 1
        window.add(i / 10.0, 1.0 if i == 33 else 10.0)
    assert min(window.values()) == 1.0


def test_newer_keeps_a_plain_subsample() -> None:
    window = SampledWindow(window_s=100.0, points=10, combine=newer)
    for i in range(100):
        window.add(float(i), float(i))
    assert window.values()[-1] == 99.0
    assert len(window) <= 11
