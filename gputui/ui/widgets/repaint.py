"""Which cells of a multi-line ``Content`` changed, so a widget repaints only those.

Textual writes to the terminal exactly the regions a widget marks dirty. ``refresh()`` with no
region marks the whole widget, so a header whose CPU figure moved by one digit rewrote both of
its 160-column lines every second. Refreshing only the changed cells keeps the terminal output
(and the compositing work behind it) proportional to what actually changed.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.segment import Segment
from textual.content import Content
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.visual import Visual
from textual.widget import Widget


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
    return _diff(old, new, width)[1]


def _diff(old: Content, new: Content, width: int) -> tuple[set[int], list[Region]]:
    """The lines that differ and the regions to repaint (none past ``width``; see above)."""
    old_lines = old.split("\n", allow_blank=True)
    new_lines = new.split("\n", allow_blank=True)
    lines: set[int] = set()
    regions: list[Region] = []
    for y in range(max(len(old_lines), len(new_lines))):
        if y >= len(old_lines) or y >= len(new_lines):
            lines.add(y)
            if width > 0:
                regions.append(Region(0, y, width, 1))
            continue
        change = _line_change(old_lines[y], new_lines[y])
        if change is None:
            continue
        lines.add(y)
        x1, x2 = change
        if x1 < width:
            # The line may end in an ellipsis at the edge: repaint through the last cell too.
            regions.append(Region(x1, y, min(x2, width) - x1 if x2 < width else width - x1, 1))
    return lines, regions


class LineCachedWidget(Widget):
    """A widget drawing a few pre-fitted lines, which renders again only the lines that changed.

    Textual renders a widget's whole content again when any part of it is marked dirty, even a
    single cell. A GPU card redrew its five lines (and the header its two) every refresh when one
    figure moved. Here each line keeps its rendered strip until :meth:`show_content` says that
    line changed; any repaint Textual asks for itself (a style, theme or size change, a text
    selection) renders everything again, exactly as :class:`~textual.widget.Widget` would.

    Subclasses implement ``render`` returning the :class:`Content` last given to
    :meth:`show_content` (or built for the current size).
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._strips: dict[int, Strip] = {}
        self._strips_size: Size | None = None
        #: Dirty regions (widget coordinates) that :meth:`show_content` asked for itself.
        self._expected: set[Region] = set()
        #: Lines rendered since mounting (for tests and benchmarks).
        self.lines_rendered = 0

    def show_content(self, old: Content | None, new: Content) -> None:
        """Repaint the cells that differ between what was shown (``old``) and ``new``.

        Args:
            old: The content given last (None: nothing yet, repaint everything).
            new: The content ``render`` returns from now on.
        """
        width = self.size.width
        if old is None or width <= 0:
            self.refresh()
            return
        lines, regions = _diff(old, new, width)
        for y in lines:
            self._strips.pop(y, None)
        if regions:
            offset = self.content_offset
            self._expected.update(region.translate(offset) for region in regions)
            self.refresh(*regions)

    def render_line(self, y: int) -> Strip:
        """One line: the kept strip, or the line rendered alone (see the class docstring)."""
        size = self.size
        if self._dirty_regions:
            if not self._dirty_regions <= self._expected or self.text_selection is not None:
                self._strips.clear()  # a repaint Textual asked for: everything again
            self._dirty_regions.clear()
            self._expected.clear()
        if size != self._strips_size:
            self._strips.clear()
            self._strips_size = size
        strip = self._strips.get(y)
        if strip is not None:
            return strip
        visual = self._render()
        if not isinstance(visual, Content) or self.text_selection is not None:
            return self._render_all(y)
        lines = visual.split("\n", allow_blank=True)
        if y >= len(lines) or y >= size.height:
            return Strip.blank(size.width, self.visual_style.rich_style)
        fitted = self._fitted_strip(lines[y], y, size.width)
        if fitted is not None:
            self.lines_rendered += 1
            self._strips[y] = fitted
            return fitted
        if len(lines) == 1:  # one line (a GPU's compact line): rendering it is rendering all
            return self._render_all(y)
        strips = Visual.to_strips(self, lines[y], size.width, None, self.visual_style)
        self.lines_rendered += len(strips)
        if len(strips) != 1:  # the line wraps: the lines below move, draw them all together
            return self._render_all(y)
        self._strips[y] = strips[0]
        return strips[0]

    def _fitted_strip(self, line: Content, y: int, width: int) -> Strip | None:
        """A line that fits the width, drawn from its spans as Textual draws it; else None.

        Textual's path for a line (``Visual.to_strips``) wraps, truncates, aligns and pads it
        first: about 150 us for a 160-column gauge line, paid for every changed line at every
        refresh. A line that already fits (the header and the cards fit theirs to the width)
        needs none of that, so its segments are made here with the same styles and the same
        ``offset`` meta text selection reads (about 70 us). None sends the line the full way:
        wider than the widget, tabs, or styles that align, pad or link it.
        """
        styles = self.styles
        if (
            line.cell_length > width
            or "\t" in line.plain
            or styles.text_align not in ("left", "start")
            or styles.content_align != ("left", "top")
            or styles.line_pad
            or any("@click" in str(span.style) for span in line.spans)
        ):
            return None
        base = self.visual_style
        segments = []
        x = 0
        # As Content's own line renderer does for a left-aligned line (the base style added to
        # each span's, the offset of each run in the line).
        for text, style in line.render(base, end="", parse_style=self._get_style):
            segments.append(Segment(text, (base + style).rich_style_with_offset(x, y)))
            x += len(text)
        return Strip(segments, line.cell_length)

    def _render_all(self, y: int) -> Strip:
        width, height = self.size
        strips = Visual.to_strips(self, self._render(), width, height, self.visual_style)
        self.lines_rendered += len(strips)
        self._strips = dict(enumerate(strips))
        return self._strips.get(y) or Strip.blank(width, self.visual_style.rich_style)


def same_content(a: Content, b: Content | None) -> bool:
    """Text *and* styles equal (``Content.__eq__`` compares the text only)."""
    return b is not None and a.plain == b.plain and a.spans == b.spans


class ContentLines(LineCachedWidget):
    """Lines of ``Content`` in a box of fixed size, repainting only the cells that change.

    The place of a ``Static`` that is updated every refresh: ``Static.update`` asks for a
    layout of the screen and a render of all its lines at each call, even when the text did not
    change (the selection pane's seven figure lines did, every second). The box's size comes from
    its CSS alone, so an update never lays the screen out again; lines past its height are not
    shown.
    """

    DEFAULT_CSS = """
    ContentLines {
        height: 1fr;
    }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._last: Content | None = None

    def update(self, content: Content) -> None:
        """Show ``content``; nothing happens when it equals what is shown."""
        if same_content(content, self._last):
            return
        old, self._last = self._last, content
        self.show_content(old, content)

    def render(self) -> Content:
        """The content given last."""
        return self._last if self._last is not None else Content("")

    def text_lines(self) -> list[str]:
        """The plain text of each line given last (for tests and screenshots)."""
        return [] if self._last is None else self._last.plain.split("\n")
