"""A fixed-scale, one-line sparkline (Textual's Sparkline scales to the data's min and max)."""

from __future__ import annotations

from textual.content import Content
from textual.widget import Widget

from gputui.derive import fmt


class Spark(Widget):
    """Samples drawn on a fixed ``low``..``high`` scale, newest at the right.

    Assigning :attr:`data` repaints only when the drawn line changes: with more samples than
    cells each cell shows a bucket's maximum, so a steady load draws the same line for minutes
    while the samples behind it move every refresh.
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

    @property
    def data(self) -> tuple[float, ...]:
        """The samples, oldest first."""
        return self._data

    @data.setter
    def data(self, values: tuple[float, ...]) -> None:
        self._data = values
        if self._drawn is None or self._line() != self._drawn:
            self.refresh()

    def set_scale(self, low: float, high: float) -> None:
        """Change the scale (e.g. a GPU's power limit became known)."""
        if (low, high) != (self.low, self.high):
            self.low, self.high = low, high
            self.refresh()

    def _line(self) -> str:
        return fmt.spark(self._data, self.size.width, self.low, self.high)

    def render(self) -> Content:
        """The bars for the current width."""
        self._drawn = self._line() if self.size.width else None
        return Content(self._drawn or "")
