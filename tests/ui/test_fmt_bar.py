from __future__ import annotations

import pytest

from gputui.derive.units import bar


@pytest.mark.parametrize(
    ("percent", "width", "expected"),
    [
        (0, 4, "    "),
        (100, 4, "████"),
        (50, 4, "██  "),
        (None, 3, "░░░"),
        (150, 2, "██"),
        (-5, 2, "  "),
        (12.5, 1, "▏"),
        (50, 0, "▌"),
    ],
)
def test_bar(percent: float | None, width: int, expected: str) -> None:
    assert bar(percent, width) == expected


def test_bar_width_always_exact() -> None:
    for p in range(0, 101):
        for w in (1, 5, 13):
            assert len(bar(p, w)) == w


def test_spark_fixed_scale_and_padding() -> None:
    from gputui.derive.units import spark

    assert spark([], 3, 0, 100) == "   "
    assert spark([0, 100], 4, 0, 100) == "  ▁█"
    assert spark([97, 98, 97], 3, 0, 100) == "███"  # flat near the top stays flat
    assert spark([50], 1, 0, 100) in ("▄", "▅")
    assert spark([200, -5], 2, 0, 100) == "█▁"  # clamped


def test_spark_buckets_keep_peaks() -> None:
    from gputui.derive.units import spark

    values = [0.0] * 100
    values[37] = 100.0
    line = spark(values, 10, 0, 100)
    assert len(line) == 10
    assert line.count("█") == 1
    assert line[3] == "█"
