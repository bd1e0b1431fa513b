"""A fixed-scale, one-line sparkline (Textual's Sparkline scales to the data's min and max)."""

from __future__ import annotations

from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

from gputui.derive import fmt


class Spark(Widget):
    """Samples drawn on a fixed ``low``..``high`` scale, newest at the right.

    Assign a *fresh* tuple to :attr:`data` to repaint (reactive attributes compare by value, and
    a fresh tuple is what the history hands out anyway).
    """

    DEFAULT_CSS = """
    Spark { height: 1; width: 1fr; color: $accent; }
    """

    data: reactive[tuple[float, ...]] = reactive(())
    """The samples, oldest first."""

    def __init__(
        self, low: float = 0.0, high: float = 100.0, *, classes: str | None = None
    ) -> None:
        super().__init__(classes=classes)
        self.low = low
        self.high = high

    def set_scale(self, low: float, high: float) -> None:
        """Change the scale (e.g. a GPU's power limit became known)."""
        if (low, high) != (self.low, self.high):
            self.low, self.high = low, high
            self.refresh()

    def render(self) -> Content:
        """The bars for the current width."""
        return Content(fmt.spark(self.data, self.size.width, self.low, self.high))
