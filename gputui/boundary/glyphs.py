"""``--ascii`` / ``--no-unicode``: every drawn glyph as plain ASCII, cell for cell.

The one switch for terminals without Unicode (a serial console, an old PuTTY, ``LANG=C``), as in
nvitop: the text report passes through :func:`to_ascii` as it is written, and the TUI through a
line filter on every widget's lines (``gputui.ui.ascii_filter``), so the bars, borders,
sparklines, tree guides, sort and health markers of gputui *and* of Textual are translated
where they are drawn, without each widget choosing twice.

Every character keeps its width: a one-cell glyph becomes one ASCII character (``█`` ``#``,
``▏``-``▉`` ``|``, ``▁▂▃▄▅▆▇`` ``_.:-=+*``, box drawing ``-`` ``|`` ``+``, ``▼`` ``v``,
``…`` ``~``), a wide character (CJK, most emoji) two ``?``, a combining mark nothing; a letter
with an accent loses it (``é`` ``e``). The layout computed before the translation stays exact.
"""

from __future__ import annotations

import unicodedata

__all__ = ["ASCII_GLYPHS", "to_ascii"]

#: The glyphs gputui and Textual draw, each to one ASCII character of the same width.
ASCII_GLYPHS: dict[str, str] = {
    # gauges (derive.units.bar) and Textual's scrollbars and tall borders
    "█": "#",
    **dict.fromkeys("▏▎▍▌▋▊▉▐▕", "|"),
    "░": ".",
    "▒": ":",
    "▓": "%",
    "▀": "-",
    "▔": "-",
    # sparklines (derive.units.spark): a density ramp, lowest to full
    "▁": "_",
    "▂": ".",
    "▃": ":",
    "▄": "-",
    "▅": "=",
    "▆": "+",
    "▇": "*",
    # sort, expanders, arrows
    **dict.fromkeys("▼▾▽↓", "v"),
    **dict.fromkeys("▲▴△↑", "^"),
    **dict.fromkeys("▶▸►→⇒", ">"),
    **dict.fromkeys("◀◂◄←⇐", "<"),
    "⇄": "&",
    "↔": "-",
    # markers
    "✓": "+",
    "✔": "+",
    "✗": "x",
    "✘": "x",
    "⚠": "!",
    **dict.fromkeys("•●◆■", "*"),
    **dict.fromkeys("○◇□", "o"),
    "·": ".",
    "…": "~",
    "⋯": "~",
    # punctuation and signs
    **dict.fromkeys("“”„«»", '"'),
    **dict.fromkeys("\u2018\u2019\u201a", "'"),  # single quotation marks
    **dict.fromkeys("—\u2013\u2012―\u2212", "-"),  # dashes, the minus sign
    "°": " ",
    "≤": "<",
    "≥": ">",
    "≠": "#",
    "≈": "~",
    "±": "+",
    "\u00d7": "x",  # the multiplication sign
    "␤": "?",
    "\u00a0": " ",
}


def _box(char: str) -> str:
    """A box-drawing character (U+2500-U+257F) by its Unicode name."""
    name = unicodedata.name(char, "")
    words = set(name.split())
    if "DIAGONAL" in words:
        if "CROSS" in words:
            return "X"
        return "/" if "UPPER RIGHT" in name else "\\"
    across = bool(words & {"HORIZONTAL", "LEFT", "RIGHT"})
    down = bool(words & {"VERTICAL", "UP", "DOWN"})
    if across and not down:
        return "=" if "DOUBLE" in words else "-"
    if down and not across:
        return "|"
    return "+"


def _fallback(char: str) -> str:
    """The ASCII for a character the table does not name, as wide as the character."""
    code = ord(char)
    if 0x2500 <= code <= 0x257F:
        return _box(char)
    if 0x2580 <= code <= 0x259F:
        return "#"  # quadrants and the rarer blocks
    if 0x2800 <= code <= 0x28FF:
        return " " if code == 0x2800 else ":"  # braille graphs
    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return ""  # drawn on the previous cell (or not at all): no cell of its own
    if unicodedata.east_asian_width(char) in ("W", "F"):
        return "??"
    base = "".join(c for c in unicodedata.normalize("NFKD", char) if c.isascii())
    return base if len(base) == 1 and base.isprintable() else "?"


class _Table(dict[int, str]):
    """``str.translate``'s table: the glyphs above, anything else worked out once."""

    #: Characters worked out and kept; beyond this they are worked out each time (the text
    #: drawn includes container names and commands: a flood of distinct characters stays
    #: bounded).
    LIMIT = 4096

    def __missing__(self, code: int) -> str:
        if code < 128:
            raise LookupError(code)  # ASCII stays as it is
        value = _fallback(chr(code))
        if len(self) < self.LIMIT:
            self[code] = value
        return value


_TABLE = _Table({ord(k): v for k, v in ASCII_GLYPHS.items()})


def to_ascii(text: str) -> str:
    """``text`` with every non-ASCII character replaced by ASCII of the same width.

    Args:
        text: What is about to be drawn or printed.

    Returns:
        Plain ASCII (control characters are left alone: sanitising is ``safe_text``'s job).
    """
    return text if text.isascii() else text.translate(_TABLE)
