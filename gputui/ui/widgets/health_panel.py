"""The Health tab: runtime-health checks in a table, the highlighted one's details and fix below.

The table's CHECK column is as wide as the longest check id needs (within bounds) and SUMMARY
takes the rest of the width. The detail pane wraps its text to the pane's width itself, so that
wrapped lines keep their indent, and puts every URL on a line of its own that is never wrapped:
the pane scrolls sideways instead, so a link can always be copied whole.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import ScrollableContainer, Vertical
from textual.content import Content
from textual.widgets import DataTable, Static

from gputui.boundary import sanitise
from gputui.model.status import STATUS_RANK, HealthCheck
from gputui.ui.styles import STATUS_STYLE, Styled
from gputui.ui.widgets.alerts_panel import fit_columns

COLUMNS: tuple[tuple[str, str, int | None], ...] = (
    ("status", "STATUS", 6),
    ("id", "CHECK", 30),
    ("summary", "SUMMARY", None),
)

#: Text wraps at this width at most (long lines are hard to read even on a wide terminal).
MAX_TEXT_WIDTH = 160

# A URL ends before whitespace; closing punctuation right before the whitespace is the prose's.
_URL = re.compile(r"https?://\S+?(?=[).,;:\]]*(?:\s|$))")
MUTED = "$text-muted"

Part = str | tuple[str, str]


def ordered(checks: Iterable[HealthCheck]) -> list[HealthCheck]:
    """Worst first, then by id, so problems sit at the top."""
    return sorted(checks, key=lambda c: (STATUS_RANK[c.status], c.id))


def wrap_text(text: str, width: int, first: str, rest: str) -> list[str]:
    """Wrap one paragraph with a hanging indent; URLs get lines of their own, never broken.

    Args:
        text: One paragraph (already safe).
        width: Columns available.
        first: The first line's prefix (a bullet, a label).
        rest: The prefix of every other line (spaces as wide as ``first``).

    Returns:
        The lines, prefixes included; a URL line may be longer than ``width``.
    """
    lines: list[str] = []
    prefix = first
    for index, piece in enumerate(_URL.split(text)):
        piece = piece.strip()
        if piece:
            body = max(10, width - len(rest))
            for line in textwrap.wrap(
                piece, body, break_long_words=False, break_on_hyphens=False
            ) or [""]:
                lines.append(prefix + line)
                prefix = rest
        urls = _URL.findall(text)
        if index < len(urls):
            lines.append(prefix + urls[index])
            prefix = rest
    return lines or [first]


def detail_content(check: HealthCheck | None, width: int = MAX_TEXT_WIDTH) -> Content:
    """The details, fix and docs link of one check (all untrusted text made safe).

    Args:
        check: The check to explain; None before the first checks ran.
        width: Columns of the pane: text wraps there with its indent kept; URLs do not wrap.
    """
    if check is None:
        return Content.styled("No health checks yet.", "$text-muted")
    width = max(20, min(width, MAX_TEXT_WIDTH))
    parts: list[Part] = []

    def add(lines: list[str], style: str, head: int = 0, head_style: str = "") -> None:
        # ``head`` leading columns of the first line (a label or bullet) get ``head_style``.
        for n, line in enumerate(lines):
            if n == 0 and head:
                parts.extend([(line[:head], head_style), (line[head:], style), "\n"])
            else:
                parts.extend([(line, style), "\n"])

    check_id = sanitise.safe_text(check.id, 80)
    summary = sanitise.safe_text(check.summary, 300)
    parts += [(check_id, "bold"), "\n"]
    add(wrap_text(summary, width, "", ""), "")
    if check.subject:
        add(
            wrap_text(sanitise.safe_text(check.subject, 80), width, "subject  ", " " * 9),
            "",
            9,
            MUTED,
        )
    for line in check.details:
        add(wrap_text(sanitise.safe_text(line, 300), width, "  • ", "    "), "", 4, MUTED)
    if check.fix:
        parts.append("\n")
        for index, line in enumerate(check.fix.splitlines() or [""]):
            label = "fix  " if index == 0 else "     "
            lines = wrap_text(sanitise.safe_text(line, 300), width, label, "     ")
            add(lines, "$text-success", 5, "bold $text-success")
    if check.docs:
        # On its own line, whole: a URL broken by wrapping cannot be copied.
        parts += [("docs", MUTED), "\n", (sanitise.safe_text(check.docs, 300), "underline"), "\n"]
    return Content.assemble(*parts)


class HealthTable(DataTable[Styled]):
    """The checks, one row each, keyed by check id."""

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("g", "scroll_top", "First", show=False),
        Binding("G", "scroll_bottom", "Last", show=False),
    ]


class HealthPanel(Vertical):
    """Checks table plus a detail pane; redraws only when the checks or the width change."""

    DEFAULT_CSS = """
    HealthPanel HealthTable { height: 1fr; min-height: 4; }
    HealthPanel #health-detail {
        height: auto; max-height: 50%; border-top: solid $panel-lighten-2;
        overflow-x: auto; overflow-y: auto;
    }
    HealthPanel #health-detail Static { padding: 0 1; width: auto; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.table = HealthTable(cursor_type="row", id="health-table")
        self.detail = Static("", id="health-detail-text")
        self.checks: tuple[HealthCheck, ...] | None = None
        self._by_id: dict[str, HealthCheck] = {}
        self.widths: dict[str, int] = {}

    def compose(self) -> ComposeResult:
        """Table above, details below (scrolling sideways for long URLs)."""
        yield self.table
        with ScrollableContainer(id="health-detail"):
            yield self.detail

    def on_mount(self) -> None:
        """Columns once (resized to the content and the width as checks arrive)."""
        self._add_columns()

    def _add_columns(self) -> None:
        for key, header, width in COLUMNS:
            self.table.add_column(header, key=key, width=self.widths.get(key, width))

    def show(self, checks: tuple[HealthCheck, ...]) -> None:
        """Display a snapshot's checks (no-op when they are unchanged: frozen, value-compared)."""
        if checks == self.checks:
            return
        self.checks = checks
        self._rebuild(force=True)

    def _rebuild(self, force: bool = False) -> None:
        checks = self.checks or ()
        rows = ordered(checks)
        plain = [
            {
                "status": f" {c.status.value} ",
                "id": sanitise.safe_text(c.id, 60),
                "summary": c.summary,
            }
            for c in rows
        ]
        widths = fit_columns(COLUMNS, plain, self.size.width or 80)
        if not force and widths == self.widths:
            self._show_detail()
            return
        current = self.selected
        if widths != self.widths:
            self.widths = widths
            self.table.clear(columns=True)
            self._add_columns()
        else:
            self.table.clear()
        self._by_id = {check.id: check for check in rows}
        for check in rows:
            self.table.add_row(
                Styled(Text(f" {check.status.value} ", style=STATUS_STYLE[check.status])),
                Styled(Text(sanitise.safe_text(check.id, 60), no_wrap=True, overflow="ellipsis")),
                Styled(
                    Text(sanitise.safe_text(check.summary, 300), no_wrap=True, overflow="ellipsis")
                ),
                key=check.id,
            )
        if current is not None and current.id in self._by_id:
            self.table.move_cursor(row=self.table.get_row_index(current.id), animate=False)
        self._show_detail()

    def on_resize(self) -> None:
        """Columns and the detail's wrapping follow the width."""
        if self.checks is not None:
            self._rebuild()

    @property
    def selected(self) -> HealthCheck | None:
        """The check under the cursor."""
        if not self.table.row_count:
            return None
        row_key = self.table.coordinate_to_cell_key(self.table.cursor_coordinate).row_key
        return self._by_id.get(str(row_key.value))

    def _show_detail(self) -> None:
        # Two columns of padding and two for a scrollbar.
        width = (self.size.width or 80) - 4
        self.detail.update(detail_content(self.selected, width))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """Follow the cursor with the detail pane."""
        event.stop()
        self._show_detail()
