"""Every tab of the monitor in one table: id, title, content, sync, focus, selection, sort, filter.

The table generates the tab bar and the panes (``MainScreen.compose``), the per-snapshot sync of
the visible tab, the widget a shown tab focuses, the tab keys (``1``-``N``, in table order, bound
by the action table's :func:`gputui.ui.action_table.tab_rows`), which keys a tab answers (``s`` /
``S`` only where something sorts, ``/`` only where something filters, container and process keys
only where a row is selected) and the sentence a refused key says. Adding a tab is one row here
plus the widget it shows; the monitor takes the table as an argument, so a test adds a tab with
one entry.

No Textual import: the rows name the screen's parts through small functions, so this module is
read (and unit-tested) without building a screen.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Protocol

from gputui.model.records import record

if TYPE_CHECKING:
    from textual.widget import Widget

    from gputui.ledger.demo import DemoLedger
    from gputui.model.snapshot import Snapshot
    from gputui.ui.screens.main import MainScreen
    from gputui.ui.widgets.ledger_view import LedgerView


class Selection(Enum):
    """What a tab's keys act on (container and process actions, signals, Enter)."""

    NONE = "none"  # no row is a container or a process: those keys say which tab has one
    TREE = "tree"  # the container tree's node (a container or one of its processes)
    TABLE = "table"  # the process table's row (and that process's container)
    CHARTED = "charted"  # the tree's node, charted but not shown (History): Enter does nothing


class Sortable(Protocol):
    """A view ``s`` / ``S`` re-sorts."""

    def cycle_sort(self) -> None:
        """The next sort column, in its natural direction."""

    def reverse_sort(self) -> None:
        """The same column, the other way round."""

    def sort_choices(self) -> tuple[str, ...]:
        """The sort columns, in the order ``s`` cycles through (F6's list)."""

    def sort_current(self) -> int:
        """The index of the column sorted by now."""

    def sort_by(self, index: int) -> None:
        """Sort by column ``index``, in its natural direction."""


@record
class TabRow:
    """One tab of the monitor.

    Attributes:
        id: The pane id (``containers``); the tab key's binding id is ``tab.<id>``.
        title: The tab bar's title (a sync may decorate it: ``Health ✗ 1 fail``).
        content: The pane's widgets, given the screen (built once: when the screen composes for
            the first tab and the tabs whose rows keys act on, else when the tab is first shown).
        sync: Brings the pane up to date with a snapshot (only while it is visible, once per
            snapshot; a hidden tab is caught up when shown).
        focus: The widget focused when the tab is shown (None: leave the focus alone).
        selection: What container and process keys act on here.
        sort: The view ``s`` / ``S`` re-sort (None: the keys are dimmed here and say so).
        filter: Opens this tab's filter (None: ``/`` is dimmed here and says so).
    """

    id: str
    title: str
    content: Callable[[MainScreen], Sequence[Widget]]
    sync: Callable[[MainScreen, Snapshot], None]
    focus: Callable[[MainScreen], Widget | None]
    selection: Selection = Selection.NONE
    sort: Callable[[MainScreen], Sortable | None] | None = None
    filter: Callable[[MainScreen], None] | None = None

    @property
    def has_container_selection(self) -> bool:
        """Whether a container (or a process with its container) can be selected here."""
        return self.selection is not Selection.NONE

    @property
    def shows_rows(self) -> bool:
        """Whether the selection is a row on screen here (Enter opens a process's drill-down)."""
        return self.selection in (Selection.TREE, Selection.TABLE)


class TabTable:
    """The monitor's tabs in order, looked up by id; checked once when built.

    Args:
        rows: The tabs, in the tab bar's order (their keys are 1, 2, ... in this order).

    Raises:
        ValueError: No tab, two tabs with one id, or more tabs than digit keys.
    """

    def __init__(self, rows: Sequence[TabRow]) -> None:
        if not rows:
            raise ValueError("the monitor needs at least one tab")
        ids = [row.id for row in rows]
        if len(set(ids)) != len(ids):
            raise ValueError(f"tab ids must be unique: {ids}")
        if len(rows) > 9:
            raise ValueError("at most 9 tabs: keys 1-9 switch to them")
        self.rows: tuple[TabRow, ...] = tuple(rows)
        self.ids: tuple[str, ...] = tuple(ids)
        self._by_id = {row.id: row for row in rows}

    def __iter__(self) -> Iterator[TabRow]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def row(self, tab_id: str) -> TabRow:
        """The row of ``tab_id`` (the first tab's for an unknown id, as Textual's default)."""
        return self._by_id.get(tab_id, self.rows[0])

    def key(self, tab_id: str) -> str:
        """The digit that shows ``tab_id``."""
        return str(self.ids.index(tab_id) + 1)

    def with_selection(self) -> tuple[TabRow, ...]:
        """The tabs whose rows are containers or processes (where those keys act)."""
        return tuple(row for row in self.rows if row.shows_rows)

    def where_to_go(self) -> str:
        """``the Containers or Processes tab; press 1 or 2 first``: where selection keys act."""
        rows = self.with_selection()
        if not rows:
            return "no tab shows containers or processes"
        names = " or ".join(row.title for row in rows)
        keys = " or ".join(self.key(row.id) for row in rows)
        return f"the {names} tab; press {keys} first"

    def where(self, has: Callable[[TabRow], bool]) -> str:
        """``the Containers, Processes or Users tab``: the tabs for which ``has`` is true."""
        names = [row.title for row in self.rows if has(row)]
        if not names:
            return "no tab"
        if len(names) == 1:
            return f"the {names[0]} tab"
        return f"the {', '.join(names[:-1])} or {names[-1]} tab"


def _containers(screen: MainScreen) -> Sequence[Widget]:
    return (screen.tree_note, screen.cpane)


def _ledger(screen: MainScreen) -> Sequence[Widget]:
    from gputui.config.file import LedgerPrefs
    from gputui.ledger.store import default_store_path
    from gputui.ui.widgets.ledger_view import LedgerView

    prefs: LedgerPrefs = getattr(screen.app, "ledger_prefs", None) or LedgerPrefs()
    demo: DemoLedger | None = getattr(screen.app, "demo_ledger", None)
    if demo is not None:
        from gputui.ledger.demo import LABEL

        # The demo's windows end at the snapshot shown (its time is simulated).
        shown: Callable[[], float] = screen.app.demo_time  # type: ignore[attr-defined]
        return (
            LedgerView(
                lambda: demo.ensure(shown()),
                prefs.prices,
                clock=shown,
                label=LABEL,
                id="ledger-view",
            ),
        )
    return (
        LedgerView(lambda: prefs.store or default_store_path(), prefs.prices, id="ledger-view"),
    )


def _ledger_view(screen: MainScreen) -> LedgerView:
    from gputui.ui.widgets.ledger_view import LedgerView

    return screen.query_one("#ledger-view", LedgerView)


def _processes(screen: MainScreen) -> Sequence[Widget]:
    from textual.containers import Vertical  # only the screen that composes it needs Textual

    return (Vertical(screen.filter_input, screen.proc_status, screen.proc_empty, screen.table),)


#: The monitor's tabs, in the tab bar's order.
TABS = TabTable(
    (
        TabRow(
            "containers",
            "Containers",
            _containers,
            lambda screen, snapshot: screen.sync_containers(snapshot),
            lambda screen: screen.ctree,
            Selection.TREE,
            sort=lambda screen: screen.ctree,
            filter=lambda screen: screen.cpane.open_filter(),
        ),
        TabRow(
            "processes",
            "Processes",
            _processes,
            lambda screen, snapshot: screen.sync_processes(snapshot),
            # A filter being typed into keeps the focus (Tab key, ``/`` then the tab's change).
            lambda screen: None if screen.filter_input.has_focus else screen.table,
            Selection.TABLE,
            sort=lambda screen: screen.process_sort,
            filter=lambda screen: screen.open_process_filter(),
        ),
        TabRow(
            "health",
            "Health",
            lambda screen: (screen.health,),
            lambda screen, snapshot: screen.health.show(snapshot.health),
            lambda screen: screen.health.table,
        ),
        TabRow(
            "history",
            "History",
            lambda screen: (screen.history_panel,),
            lambda screen, snapshot: screen.history_panel.show(
                snapshot.gpus, screen.history, screen.window, screen.tree_container
            ),
            lambda screen: screen.history_panel,
            Selection.CHARTED,
        ),
        TabRow(
            "alerts",
            "Alerts",
            lambda screen: (screen.alerts,),
            lambda screen, snapshot: screen.alerts.show(
                screen.analysis.alerts if screen.analysis else None, screen.rules
            ),
            lambda screen: screen.alerts.active,
        ),
        TabRow(
            "users",
            "Users",
            lambda screen: (screen.users_view,),
            lambda screen, snapshot: screen.sync_users(snapshot),
            lambda screen: screen.users_view.table,
            sort=lambda screen: screen.users_view,
        ),
        TabRow(
            "ledger",
            "Ledger",
            _ledger,
            # Read again when due (the store is read on a worker thread, never here).
            lambda screen, snapshot: _ledger_view(screen).tick(),
            lambda screen: _ledger_view(screen).table,
            sort=_ledger_view,
        ),
    )
)
