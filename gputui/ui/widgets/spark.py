"""A fixed-scale, one-line sparkline (Textual's Sparkline scales to the data's min and max)."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style as RichStyle
from textual.content import Content
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from gputui.derive import units


def appended_line(
    old: tuple[float, ...], new: tuple[float, ...], drawn: str, low: float, high: float
) -> str | None:
    """``drawn`` after ``new`` only appended a sample to ``old`` (shifting a full window).

    One new cell on the right instead of the whole line; None when the samples moved otherwise,
    or when there are more samples than cells (each cell is then a bucket, which moves whole).
    """
    width = len(drawn)
    if not new or len(new) > width:
        return None
    if len(new) == len(old) + 1:
        if new[:-1] != old:
            return None
    elif len(new) == len(old) == width:
        if new[:-1] != old[1:]:
            return None
    else:
        return None
    return drawn[1:] + units.spark((new[-1],), 1, low, high)


class Spark(Widget):
    """Samples drawn on a fixed ``low``..``high`` scale, newest at the right.

    Assigning :attr:`data` repaints only when the drawn line changes: with more samples than
    cells each cell shows a bucket's maximum, so a steady load draws the same line for minutes
    while the samples behind it move every refresh. While every sample has its own cell, a
    refresh that only appended a sample (or shifted a full window by one) draws the new cell
    and shifts the drawn ones, instead of mapping every sample again.
    """

    DEFAULT_CSS = """
    Spark { height: 1; width: 1fr; color: $accent; }
    """

    def __init__(
        self, low: float = 0.0, high: float = 100.0, *, classes: str | None = None
    ) -> None:
        super().__init__(classes=classes)
        self.low = low
        self.high = high
        self._data: tuple[float, ...] = ()
        self._drawn: str | None = None  # the line of the last render, at its width
        self._pending: str | None = None  # the line the next render draws, when known
        #: Refreshes drawn by appending a cell (for tests and benchmarks).
        self.appends = 0

    @property
    def data(self) -> tuple[float, ...]:
        """The samples, oldest first."""
        return self._data

    @data.setter
    def data(self, values: tuple[float, ...]) -> None:
        old, self._data = self._data, values
        # The line the screen will show for ``old``: drawn, or still waiting to be drawn.
        shown = self._pending if self._pending is not None else self._drawn
        if shown is None:
            self.refresh()
            return
        line = self._appended(old, values, shown)
        if line is None:
            line = self._line()
        if line != shown:
            self._pending = line
            self.refresh()

    def _appended(self, old: tuple[float, ...], new: tuple[float, ...], drawn: str) -> str | None:
        """The line after one sample was appended, from the drawn one; None: draw it whole."""
        if len(drawn) != self.size.width:
            return None
        line = appended_line(old, new, drawn, self.low, self.high)
        if line is not None:
            self.appends += 1
        return line

    def set_scale(self, low: float, high: float) -> None:
        """Change the scale (e.g. a GPU's power limit became known)."""
        if (low, high) != (self.low, self.high):
            self.low, self.high = low, high
            self._pending = None
            self.refresh()

    def _line(self) -> str:
        return units.spark(self._data, self.size.width, self.low, self.high)

    def render(self) -> Content:
        """The bars for the current width."""
        pending, self._pending = self._pending, None
        width = self.size.width
        if pending is not None and len(pending) == width:
            self._drawn = pending
        else:
            self._drawn = self._line() if width else None
        return Content(self._drawn or "")


class SparkLane:
    """The samples of one sparkline drawn inside another widget (see :class:`SparkPair`).

    Like :class:`Spark`, the drawn line is kept and a refresh that only appended a sample
    shifts it by one cell instead of mapping every sample again.
    """

    def __init__(self, low: float = 0.0, high: float = 100.0) -> None:
        self.low = low
        self.high = high
        self._data: tuple[float, ...] = ()
        self._drawn: str | None = None  # the line for the data at its own width
        #: Refreshes drawn by appending a cell (for tests and benchmarks).
        self.appends = 0

    @property
    def data(self) -> tuple[float, ...]:
        """The samples, oldest first."""
        return self._data

    def update(self, values: tuple[float, ...], width: int) -> bool:
        """Take new samples; True when the line drawn ``width`` cells wide changed."""
        old, self._data = self._data, values
        drawn = self._drawn
        if drawn is None or len(drawn) != width:
            self._drawn = None
            return True
        line = self._appended(old, values, drawn)
        self._drawn = line if line is not None else self._line(width)
        return self._drawn != drawn

    def _appended(self, old: tuple[float, ...], new: tuple[float, ...], drawn: str) -> str | None:
        line = appended_line(old, new, drawn, self.low, self.high)
        if line is not None:
            self.appends += 1
        return line

    def _line(self, width: int) -> str:
        return units.spark(self._data, width, self.low, self.high) if width > 0 else ""

    def line(self, width: int) -> str:
        """The line ``width`` cells wide (kept until the samples or the width change)."""
        if self._drawn is None or len(self._drawn) != width:
            self._drawn = self._line(width)
        return self._drawn


class SparkPair(Widget):
    """``util ▂▃▅…  mem ▁▁▂…``: two labelled sparklines in one widget, one line high.

    Draws the cells (text and styles) that a row of two 5-cell labels and two ``1fr``
    sparklines with a one-cell right margin each drew (the first sparkline gets the lower half of
    an odd width), as one widget rather than five: every widget on screen costs the compositor
    work on each refresh.
    """

    COMPONENT_CLASSES = {"spark-pair--label", "spark-pair--first", "spark-pair--second"}

    DEFAULT_CSS = """
    SparkPair { height: 1; }
    SparkPair > .spark-pair--label { color: $text-muted; }
    SparkPair > .spark-pair--first { color: $accent; }
    SparkPair > .spark-pair--second { color: $secondary; }
    """

    LABEL_WIDTH = 5

    def __init__(
        self, labels: tuple[str, str] = ("util", "mem"), *, classes: str | None = None
    ) -> None:
        super().__init__(classes=classes)
        self.labels = labels
        self.first = SparkLane()
        self.second = SparkLane()
        #: Times a changed line was drawn (for tests and benchmarks).
        self.redraws = 0
        #: The label, sparkline and blank styles, resolved once: looking them up took most of
        #: a redraw. Dropped when Textual repaints the widget itself (style, theme, size).
        self._styles: tuple[RichStyle, RichStyle, RichStyle, RichStyle] | None = None
        #: Dirty regions (widget coordinates) that :meth:`show` asked for itself.
        self._expected: set[Region] = set()

    def widths(self, width: int) -> tuple[int, int]:
        """The two sparklines' widths in a row ``width`` cells wide."""
        room = max(0, width - 2 * self.LABEL_WIDTH - 2)
        return room // 2, room - room // 2

    def show(self, first: tuple[float, ...], second: tuple[float, ...]) -> None:
        """New samples for both sparklines; repaints only when a drawn line changed."""
        a, b = self.widths(self.size.width)
        changed = self.first.update(first, a)
        changed = self.second.update(second, b) or changed
        if changed:
            self.redraws += 1
            width = self.size.width
            if width <= self.LABEL_WIDTH:
                self.refresh()
                return
            # From the first sparkline on: the first label never changes, and a region other
            # than the whole widget tells this repaint from one Textual asks for.
            region = Region(self.LABEL_WIDTH, 0, width - self.LABEL_WIDTH, 1)
            self._expected.add(region.translate(self.content_offset))
            self.refresh(region)

    def text(self) -> str:
        """The plain line (for tests)."""
        return "".join(segment.text for segment in self.render_line(0))

    def render_line(self, y: int) -> Strip:
        """The one line: labels as muted text, blank cells as background only (as before)."""
        width = self.size.width
        if self._dirty_regions:
            if not self._dirty_regions <= self._expected:
                self._styles = None  # a repaint Textual asked for: resolve the styles again
            self._dirty_regions.clear()
            self._expected.clear()
        if self._styles is None:
            self._styles = (
                self.get_component_rich_style("spark-pair--label"),
                self.get_component_rich_style("spark-pair--first"),
                self.get_component_rich_style("spark-pair--second"),
                RichStyle(bgcolor=self.rich_style.bgcolor),
            )
        label, first_style, second_style, blank = self._styles
        if y:
            return Strip.blank(width, blank)
        a, b = self.widths(width)
        segments: list[Segment] = []
        for name, lane, cells, part in (
            (self.labels[0], self.first, a, first_style),
            (self.labels[1], self.second, b, second_style),
        ):
            name = name[: self.LABEL_WIDTH]
            segments.append(Segment(name, label))
            if len(name) < self.LABEL_WIDTH:
                segments.append(Segment(" " * (self.LABEL_WIDTH - len(name)), blank))
            if cells:
                segments.append(Segment(lane.line(cells), part))
            segments.append(Segment(" ", blank))
        return Strip(segments).crop_extend(0, width, blank)
