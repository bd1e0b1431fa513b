"""Partial repaints cover every cell whose content changed on screen."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from textual.content import Content

from gputui.ui.widgets.repaint import changed_regions


def _screen(lines: list[str], width: int) -> list[str]:
    return [line.ljust(width)[:width] for line in lines]


def _apply(old: list[str], new: list[str], width: int) -> list[str]:
    """What a terminal shows after repainting only the regions changed_regions names."""
    shown = _screen(old, width)
    target = _screen(new, width)
    regions = changed_regions(Content("\n".join(old)), Content("\n".join(new)), width)
    if regions is None:
        return target
    for r in regions:
        row = shown[r.y]
        shown[r.y] = row[: r.x] + target[r.y][r.x : r.x + r.width] + row[r.x + r.width :]
    return shown


def test_a_shifted_suffix_is_repainted() -> None:
    """Seen on a real GPU: a longer PCIe figure moved the ECC text, the old cells stayed."""
    old = ["PCIe rx N/A tx N/A  enc 0% dec 0%  ECC on, 0 uncorrected"]
    new = ["PCIe rx 8.1MiB/s tx 729KiB/s  enc 0% dec 0%  ECC on, 0 uncorrected"]
    assert _apply(old, new, 120) == _screen(new, 120)


_TEXT = st.text(alphabet="ab %0123456789", max_size=40)


@given(st.lists(st.tuples(_TEXT, _TEXT), min_size=1, max_size=3))
def test_repainting_the_regions_gives_the_new_screen(pairs: list[tuple[str, str]]) -> None:
    # A widget of fixed height: each line before and after.
    old, new = [a for a, _ in pairs], [b for _, b in pairs]
    assert _apply(old, new, 50) == _screen(new, 50)
