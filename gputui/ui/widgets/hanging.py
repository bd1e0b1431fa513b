"""Text whose wrapped lines keep their indentation (a hanging indent), for the detail screens.

Textual wraps a long line back to column 0, so on a narrow terminal the continuation of an
indented fact ("  image  nvcr.io/…") or a parent's command line reads as a new, unindented
line. :class:`HangingStatic` wraps each line itself, to the width it has, and indents every
continuation :data:`HANG` cells deeper than the line it continues.
"""

from __future__ import annotations

from textual.content import Content
from textual.events import Resize
from textual.visual import VisualType
from textual.widgets import Static

#: Cells a continuation is indented beyond its line's own indentation.
HANG = 2


def hanging(content: Content, width: int) -> Content:
    """``content`` wrapped to ``width`` cells, each continuation indented under its line.

    Args:
        content: Lines (a newline ends each).
        width: The cells a line may take (nothing is done below 8).

    Returns:
        The same text, wrapped; lines that fit are unchanged.
    """
    if width < 8:
        return content
    out: list[Content] = []
    for line in content.split("\n", allow_blank=True):
        if line.cell_length <= width:
            out.append(line)
            continue
        plain = line.plain
        indent = min(len(plain) - len(plain.lstrip(" ")) + HANG, width // 3)
        first = line.wrap(width)[0].rstrip()
        out.append(first)
        start = len(first.plain)
        while start < len(plain) and plain[start] == " ":
            start += 1
        rest = line[start:]
        if rest.cell_length:
            out.extend(piece.rstrip().pad_left(indent) for piece in rest.wrap(width - indent))
    return Content("\n").join(out)


class HangingStatic(Static):
    """A :class:`Static` whose long lines wrap with a hanging indent (see :func:`hanging`)."""

    def __init__(self, content: VisualType = "", *, id: str | None = None) -> None:
        super().__init__(content, id=id)
        self._source: Content | None = None

    def update(self, content: VisualType = "", *, layout: bool = True) -> None:
        """Show ``content``, wrapped to this widget's width when it is a :class:`Content`."""
        self._source = content if isinstance(content, Content) else None
        super().update(self._fit(content), layout=layout)

    def _fit(self, content: VisualType) -> VisualType:
        width = self.content_region.width
        if not isinstance(content, Content) or width <= 0:
            return content  # not laid out yet: the first Resize wraps it
        return hanging(content, width)

    def on_resize(self, event: Resize) -> None:
        """A new width: wrap again."""
        if self._source is not None:
            super().update(self._fit(self._source))

    @property
    def content(self) -> VisualType:
        """The text as given, before wrapping (what was drawn is :attr:`visual`)."""
        return self._source if self._source is not None else super().content

    @content.setter
    def content(self, content: VisualType) -> None:
        self.update(content)
