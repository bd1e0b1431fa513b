"""The Health tab: runtime-health checks in a table, the highlighted one's details and fix below."""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import DataTable, Static

from gputui.derive import fmt
from gputui.model import STATUS_RANK, HealthCheck
from gputui.ui.styles import STATUS_STYLE, Styled


def ordered(checks: Iterable[HealthCheck]) -> list[HealthCheck]:
    """Worst first, then by id, so problems sit at the top."""
    return sorted(checks, key=lambda c: (STATUS_RANK[c.status], c.id))


def detail_content(check: HealthCheck | None) -> Content:
    """The details, fix and docs link of one check (all untrusted text made safe)."""
    if check is None:
        return Content.styled("No health checks yet.", "$text-muted")
    parts: list[str | tuple[str, str]] = [
        (fmt.safe_text(check.id, 80), "bold"),
        "  ",
        (fmt.safe_text(check.summary, 300), ""),
        "\n",
    ]
    if check.subject:
        parts += [("subject  ", "$text-muted"), fmt.safe_text(check.subject, 80), "\n"]
    for line in check.details:
        parts += [("  • ", "$text-muted"), fmt.safe_text(line, 300), "\n"]
    if check.fix:
        parts += ["\n", ("fix  ", "bold $text-success")]
        for index, line in enumerate(check.fix.splitlines() or [""]):
            parts += [("\n     " if index else ""), (fmt.safe_text(line, 300), "$text-success")]
        parts.append("\n")
    if check.docs:
        parts += [("docs ", "$text-muted"), fmt.safe_text(check.docs, 200)]
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
    """Checks table plus a detail pane; redraws only when the checks change."""

    DEFAULT_CSS = """
    HealthPanel HealthTable { height: 1fr; min-height: 4; }
    HealthPanel #health-detail {
        height: auto; max-height: 50%; border-top: solid $panel-lighten-2;
    }
    HealthPanel #health-detail Static { padding: 0 1; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.table = HealthTable(cursor_type="row", id="health-table")
        self.detail = Static("", id="health-detail-text")
        self.checks: tuple[HealthCheck, ...] | None = None
        self._by_id: dict[str, HealthCheck] = {}

    def compose(self) -> ComposeResult:
        """Table above, details below."""
        yield self.table
        with VerticalScroll(id="health-detail"):
            yield self.detail

    def on_mount(self) -> None:
        """Columns once."""
        self.table.add_column("STATUS", key="status", width=6)
        self.table.add_column("CHECK", key="id", width=30)
        self.table.add_column("SUMMARY", key="summary")

    def show(self, checks: tuple[HealthCheck, ...]) -> None:
        """Display a snapshot's checks (no-op when they are unchanged: frozen, value-compared)."""
        if checks == self.checks:
            return
        self.checks = checks
        current = self.selected
        rows = ordered(checks)
        self._by_id = {check.id: check for check in rows}
        self.table.clear()
        for check in rows:
            self.table.add_row(
                Styled(Text(f" {check.status.value} ", style=STATUS_STYLE[check.status])),
                Styled(Text(fmt.safe_text(check.id, 60), no_wrap=True, overflow="ellipsis")),
                Styled(Text(fmt.safe_text(check.summary, 200), no_wrap=True, overflow="ellipsis")),
                key=check.id,
            )
        if current is not None and current.id in self._by_id:
            self.table.move_cursor(row=self.table.get_row_index(current.id), animate=False)
        self._show_detail()

    @property
    def selected(self) -> HealthCheck | None:
        """The check under the cursor."""
        if not self.table.row_count:
            return None
        row_key = self.table.coordinate_to_cell_key(self.table.cursor_coordinate).row_key
        return self._by_id.get(str(row_key.value))

    def _show_detail(self) -> None:
        self.detail.update(detail_content(self.selected))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """Follow the cursor with the detail pane."""
        event.stop()
        self._show_detail()
