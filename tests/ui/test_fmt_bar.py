from __future__ import annotations

import pytest

from gputui.derive.fmt import bar


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
