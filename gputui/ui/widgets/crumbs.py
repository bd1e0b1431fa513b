"""The line at the top of a drill-down screen saying where it was opened from.

``Containers > trainer-a > PID 1234``, with :data:`SEPARATOR` between the steps: the tab,
the container (``host`` for a process outside any), then what the screen shows. Escape (or
``q``) goes back one step, to the monitor.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual.content import Content
from textual.widgets import Static

from gputui.boundary import sanitise

#: Between two steps of the path.
SEPARATOR = " \N{SINGLE RIGHT-POINTING ANGLE QUOTATION MARK} "


def crumbs_content(steps: Sequence[str]) -> Content:
    """The path: earlier steps muted, the screen's own step bold (every step sanitised)."""
    parts: list[str | tuple[str, str]] = []
    for i, step in enumerate(steps):
        if i:
            parts.append((SEPARATOR, "$text-muted"))
        text = sanitise.safe_text(step, 60)
        parts.append((text, "bold") if i == len(steps) - 1 else (text, "$text-muted"))
    return Content.assemble(*parts)


class Breadcrumbs(Static):
    """One line: where this screen was opened from (hidden when it was given no path)."""

    DEFAULT_CSS = """
    Breadcrumbs { height: 1; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, steps: Sequence[str], *, id: str | None = None) -> None:
        super().__init__(crumbs_content(steps), id=id)
        #: The path as given (before sanitising).
        self.steps = tuple(steps)
        self.display = bool(steps)

    @property
    def text(self) -> str:
        """The path as shown (plain)."""
        return crumbs_content(self.steps).plain if self.steps else ""
