"""A fixed-scale, one-line sparkline (Textual's Sparkline scales to the data's min and max)."""

from __future__ import annotations

from textual.content import Content
from textual.widget import Widget

from gputui.derive import fmt


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
        width = len(drawn)
        if not new or len(new) > width or width != self.size.width:
            return None  # buckets (more samples than cells) move as a whole
        if len(new) == len(old) + 1:
            if new[:-1] != old:
                return None
        elif len(new) == len(old) == width:
            if new[:-1] != old[1:]:
                return None
        else:
            return None
        self.appends += 1
        return drawn[1:] + fmt.spark((new[-1],), 1, self.low, self.high)

    def set_scale(self, low: float, high: float) -> None:
        """Change the scale (e.g. a GPU's power limit became known)."""
        if (low, high) != (self.low, self.high):
            self.low, self.high = low, high
            self._pending = None
            self.refresh()

    def _line(self) -> str:
        return fmt.spark(self._data, self.size.width, self.low, self.high)

    def render(self) -> Content:
        """The bars for the current width."""
        pending, self._pending = self._pending, None
        width = self.size.width
        if pending is not None and len(pending) == width:
            self._drawn = pending
        else:
            self._drawn = self._line() if width else None
        return Content(self._drawn or "")
