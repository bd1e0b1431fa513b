"""Which cells of a multi-line ``Content`` changed, so a widget repaints only those.

Textual writes to the terminal exactly the regions a widget marks dirty. ``refresh()`` with no
region marks the whole widget, so a header whose CPU figure moved by one digit rewrote both of
its 160-column lines every second. Refreshing only the changed cells keeps the terminal output
(and the compositing work behind it) proportional to what actually changed.
"""

from __future__ import annotations

from rich.cells import cell_len
from textual.content import Content
from textual.geometry import Region


def _line_change(old: Content, new: Content) -> tuple[int, int] | None:
    """The changed column range ``[x1, x2)`` between two single-line contents, None if equal."""
    a, b = old.plain, new.plain
    a_spans, b_spans = old.spans, new.spans
    if a == b and a_spans == b_spans:
        return None
    shortest = min(len(a), len(b))
    prefix = 0
    while prefix < shortest and a[prefix] == b[prefix]:
        prefix += 1
    suffix = 0
    while suffix < shortest - prefix and a[-1 - suffix] == b[-1 - suffix]:
        suffix += 1
    start, end_a, end_b = prefix, len(a) - suffix, len(b) - suffix
    if a_spans != b_spans:
        # A style moved or changed: everything from the first differing span on may look
        # different (offsets after a length change shift too), so widen to cover those spans.
        first = 0
        while first < min(len(a_spans), len(b_spans)) and a_spans[first] == b_spans[first]:
            first += 1
        rest = [*a_spans[first:], *b_spans[first:]]
        if rest:
            start = min(start, *(span.start for span in rest))
            end_a = max(end_a, *(span.end for span in a_spans[first:]), 0)
            end_b = max(end_b, *(span.end for span in b_spans[first:]), 0)
    x1 = min(cell_len(a[:start]), cell_len(b[:start]))
    x2 = max(cell_len(a[:end_a]), cell_len(b[:end_b]))
    if cell_len(a) != cell_len(b):
        # A common suffix is only unchanged on screen when it has not moved: a change of width
        # shifts it, so everything from the first difference to the end of the line repaints
        # ("ECC on, 0 uncorrected" after a longer PCIe figure left "ECC rrected" on screen).
        x2 = max(cell_len(a), cell_len(b))
    return (x1, x2) if x2 > x1 else (x1, x1 + 1)


def changed_regions(old: Content | None, new: Content, width: int) -> list[Region] | None:
    """Regions (content coordinates) that differ between two renders of a widget.

    Args:
        old: What the widget showed; None when nothing was shown yet.
        new: What it will show.
        width: The widget's content width (changes past it are clipped away).

    Returns:
        The dirty regions, possibly empty; None when the whole widget should repaint (nothing
        shown before, or an unknown width).
    """
    if old is None or width <= 0:
        return None
    old_lines = old.split("\n", allow_blank=True)
    new_lines = new.split("\n", allow_blank=True)
    regions: list[Region] = []
    for y in range(max(len(old_lines), len(new_lines))):
        if y >= len(old_lines) or y >= len(new_lines):
            regions.append(Region(0, y, width, 1))
            continue
        change = _line_change(old_lines[y], new_lines[y])
        if change is None:
            continue
        x1, x2 = change
        if x1 < width:
            # The line may end in an ellipsis at the edge: repaint through the last cell too.
            regions.append(Region(x1, y, min(x2, width) - x1 if x2 < width else width - x1, 1))
    return regions
