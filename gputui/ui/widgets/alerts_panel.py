"""The Alerts tab: firing and pending alerts above, the history of firings and resolutions below.

Both tables are keyed (``rule|subject`` for active alerts, the transition itself for history) and
updated cell by cell, like the process table: an alert whose value moves costs one cell.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from gputui.boundary import sanitise
from gputui.derive import units
from gputui.derive.alerts import Alert, AlertPhase, AlertState
from gputui.ui.styles import EMPH, PHASE_STYLE, Styled, severity_style

ACTIVE_COLUMNS: tuple[tuple[str, str, int | None], ...] = (
    ("phase", "STATE", 7),
    ("severity", "SEVERITY", 8),
    ("rule", "RULE", 20),
    ("subject", "SUBJECT", 16),
    ("for", "FOR", 6),
    ("message", "MESSAGE", None),
)
HISTORY_COLUMNS: tuple[tuple[str, str, int | None], ...] = (
    ("time", "TIME (UTC)", 19),
    ("event", "EVENT", 8),
    ("rule", "RULE", 20),
    ("subject", "SUBJECT", 16),
    ("message", "MESSAGE", None),
)

#: Columns that give up width (down to the minimum) before the flexible one goes below
#: :data:`FLEX_MIN`: names are still recognisable cut short, a message is not.
SHRINKABLE: dict[str, int] = {"rule": 8, "subject": 8, "id": 12}
#: The width the flexible column (message, summary) keeps while others can shrink.
FLEX_MIN = 40
#: Columns a content-sized column never grows beyond (a container subject is its name, up to
#: 40 columns as the tree shows it, after "container ").
NATURAL_MAX: dict[str, int] = {"rule": 30, "subject": 50, "id": 40}
#: A DataTable pads each cell by one column on either side; the vertical scrollbar takes 2.
_PADDING = 2
_SCROLLBAR = 2


def fit_columns(
    spec: Sequence[tuple[str, str, int | None]],
    rows: Sequence[Mapping[str, str]],
    total: int,
) -> dict[str, int]:
    """Column widths from the content and the width: the flexible column gets what is left.

    A column with a :data:`NATURAL_MAX` entry is as wide as its widest cell or header (at most
    that); other fixed columns keep their spec width;
    the one column whose spec width is None takes the rest. When that leaves it under
    :data:`FLEX_MIN`, the :data:`SHRINKABLE` columns give up width first.

    Args:
        spec: ``(key, header, width)`` per column; width None marks the flexible column.
        rows: The plain text of each row's cells, by column key.
        total: The table's width in cells.

    Returns:
        Content width per column key (padding excluded).
    """
    widths: dict[str, int] = {}
    flex = ""
    for key, header, fixed in spec:
        natural = max([len(header), *(len(row.get(key, "")) for row in rows)])
        if fixed is None:
            flex = key
            widths[key] = natural
        else:
            cap = NATURAL_MAX.get(key)
            widths[key] = fixed if cap is None else min(natural, max(fixed, cap))
    available = total - _SCROLLBAR - _PADDING * len(spec)
    rest = available - sum(w for k, w in widths.items() if k != flex)
    for key, low in SHRINKABLE.items():
        if rest >= FLEX_MIN or key not in widths or key == flex:
            continue
        give = min(widths[key] - low, FLEX_MIN - rest)
        if give > 0:
            widths[key] -= give
            rest += give
    if flex:
        widths[flex] = max(rest, 10)
    return widths


def _utc(ts: float | None) -> str:
    if ts is None:
        return sanitise.NA
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _message(alert: Alert) -> str:
    # The subject has its own column: the message need not start with it again.
    message = alert.message.removeprefix(f"{alert.subject}: ")
    return sanitise.safe_text(message, 200)


def _text(value: str, style: str = "") -> Styled:
    return Styled(Text(value, style=style, no_wrap=True, overflow="ellipsis"))


def active_key(alert: Alert) -> str:
    """Row key of an active alert: one row per rule and subject."""
    return f"{alert.rule}|{alert.subject}"


def history_key(alert: Alert) -> str:
    """Row key of a history entry: the transition (an alert fires and resolves once each)."""
    return f"{alert.rule}|{alert.subject}|{alert.phase.value}|{alert.firing_since}|{alert.since}"


def active_cells(alert: Alert, now: float) -> dict[str, Styled]:
    """The cells of an active alert's row (rule ids, subjects and messages made safe)."""
    held = now - (alert.firing_since if alert.firing_since is not None else alert.since)
    return {
        "phase": _text(alert.phase.value, PHASE_STYLE[alert.phase]),
        "severity": _text(sanitise.safe_text(alert.severity, 10), severity_style(alert.severity)),
        "rule": _text(sanitise.safe_text(alert.rule, 60), EMPH),
        "subject": _text(sanitise.safe_text(alert.subject, 60)),
        "for": _text(units.duration(held)),
        "message": _text(_message(alert)),
    }


def history_cells(alert: Alert) -> dict[str, Styled]:
    """The cells of one history entry."""
    resolved = alert.phase is AlertPhase.RESOLVED
    when = alert.resolved_at if resolved else alert.firing_since
    return {
        "time": _text(_utc(when)),
        "event": _text("resolved" if resolved else "fired", PHASE_STYLE[alert.phase]),
        "rule": _text(sanitise.safe_text(alert.rule, 60), EMPH),
        "subject": _text(sanitise.safe_text(alert.subject, 60)),
        "message": _text(_message(alert)),
    }


class KeyedTable(DataTable[Styled]):
    """A DataTable synced from ``{row key: {column: cell}}``, cell by cell, order kept."""

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("g", "scroll_top", "First", show=False),
        Binding("G", "scroll_bottom", "Last", show=False),
    ]

    def __init__(self, columns: Sequence[tuple[str, str, int | None]], *, id: str) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.column_spec = tuple(columns)
        self.rows_by_key: dict[str, dict[str, Styled]] = {}
        self.widths: dict[str, int] = {}

    def on_mount(self) -> None:
        """Columns once, keyed by name."""
        self._add_columns()

    def _add_columns(self) -> None:
        for key, header, width in self.column_spec:
            self.add_column(header, key=key, width=self.widths.get(key, width))

    def fit(self, total: int) -> None:
        """Size the columns for the rows held and a table ``total`` cells wide.

        A change rebuilds the columns and re-adds the rows in their order (the public way to
        resize a DataTable's columns), keeping the cursor on its row.
        """
        if total <= 0:
            return
        rows = [
            {k: cell.text.plain for k, cell in cells.items()} for cells in self.rows_by_key.values()
        ]
        widths = fit_columns(self.column_spec, rows, total)
        if widths == self.widths:
            return
        self.widths = widths
        order = self.keys()
        cursor = self.cursor_row
        self.clear(columns=True)
        self._add_columns()
        for key in order:
            cells = self.rows_by_key[key]
            self.add_row(*(cells[c] for c, _, _ in self.column_spec), key=key)
        if order:
            self.move_cursor(row=min(cursor, len(order) - 1), animate=False)

    def sync(self, rows: Mapping[str, dict[str, Styled]]) -> None:
        """Remove stale rows, update changed cells, add new rows, then put rows in ``rows`` order.

        Args:
            rows: The wanted rows in display order.
        """
        for key in [k for k in self.rows_by_key if k not in rows]:
            self.remove_row(key)
            del self.rows_by_key[key]
        added = False
        for key, cells in rows.items():
            old = self.rows_by_key.get(key)
            if old is None:
                self.add_row(*(cells[c] for c, _, _ in self.column_spec), key=key)
                self.rows_by_key[key] = dict(cells)
                added = True
                continue
            for column, cell in cells.items():
                if old[column] != cell:
                    self.update_cell(key, column, cell)
                    old[column] = cell  # the stored cell stays the very object the table holds
        if added:
            # New rows land at the bottom; sort them into place by their wanted position. The key
            # function sees cells, not row keys, so it finds the row by its first cell's identity.
            first = self.column_spec[0][0]
            position = {id(self.rows_by_key[k][first]): i for i, k in enumerate(rows)}
            self.sort(first, key=lambda cell: position.get(id(cell), 0))

    def keys(self) -> list[str]:
        """Row keys in display order (for tests)."""
        return [str(row.key.value) for row in self.ordered_rows]


class AlertsPanel(Vertical):
    """Active alerts table, history table, a one-line summary above each."""

    DEFAULT_CSS = """
    AlertsPanel .alerts-title { height: 1; padding: 0 1; text-style: bold; }
    AlertsPanel #alerts-active { height: auto; max-height: 50%; }
    AlertsPanel #alerts-history { height: 1fr; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.summary = Static("", classes="alerts-title", id="alerts-summary")
        self.active = KeyedTable(ACTIVE_COLUMNS, id="alerts-active")
        self.history_title = Static("", classes="alerts-title", id="alerts-history-title")
        self.history = KeyedTable(HISTORY_COLUMNS, id="alerts-history")
        self.state: AlertState | None = None

    def compose(self) -> ComposeResult:
        """Summary, active table, history title, history table."""
        yield self.summary
        yield self.active
        yield self.history_title
        yield self.history

    def show(self, state: AlertState | None, rules: int) -> None:
        """Display the alert engine's state (no-op when it is the same object as before).

        Args:
            state: After the latest snapshot; None before the first analysis.
            rules: How many rules are in force (said when nothing fires).
        """
        if state is self.state:
            return
        self.state = state
        if state is None:
            self.summary.update(f"Alerts: {rules} rules, waiting for the first refresh")
            return
        firing, pending = len(state.firing), len(state.pending)
        quiet = "nothing firing" if not firing else f"{firing} firing"
        self.summary.update(f"{quiet}  ·  {pending} pending  ·  {rules} rules in force")
        self.active.sync({active_key(a): active_cells(a, state.at) for a in state.active})
        self.history_title.update(f"History  ·  {len(state.history)} transitions, newest first")
        self.history.sync({history_key(a): history_cells(a) for a in reversed(state.history)})
        self._fit()

    def _fit(self) -> None:
        self.active.fit(self.size.width)
        self.history.fit(self.size.width)

    def on_resize(self) -> None:
        """Columns follow the width: the message gets whatever the other columns leave."""
        self._fit()
