"""``--ascii`` in the TUI: a line filter that draws every widget's lines in plain ASCII.

Textual applies the app's line filters (``App.get_line_filters``) to each line a widget
renders, after layout: the one place every glyph passes, gputui's (bars, sparklines, sort and
health markers) and Textual's own (borders, tree guides, scrollbars, the footer). The
translation keeps each cell's width (:func:`gputui.boundary.glyphs.to_ascii`), so the layout
stays exact.
"""

from __future__ import annotations

from rich.segment import Segment
from textual.color import Color
from textual.filter import LineFilter

from gputui.boundary.glyphs import to_ascii


class AsciiFilter(LineFilter):
    """Every segment's text through :func:`~gputui.boundary.glyphs.to_ascii`; styles kept."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        """The line with its glyphs in ASCII.

        Args:
            segments: One rendered line.
            background: Its background colour (unused: only the characters change).
        """
        return [
            segment if segment.text.isascii() else Segment(to_ascii(segment.text), *segment[1:])
            for segment in segments
        ]
