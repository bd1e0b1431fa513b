"""The monitor screen: header, GPU panel, the tabs of its tab table, footer.

Only this screen holds the snapshot. ``apply`` hands each widget its slice; widgets on hidden
tabs are skipped and caught up when their tab is shown, so a refresh costs what is visible. The
tabs, their order, their sync and what their keys act on come from :mod:`gputui.ui.tab_table`.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import Container
from textual.content import Content
from textual.css.query import NoMatches
from textual.events import Resize
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input, Static, TabbedContent, TabPane, Tree

from gputui.boundary import sanitise
from gputui.derive.analysis import Analysis, worst_severity
from gputui.derive.freshness import container_stats_note, process_figures_note
from gputui.derive.history import HistoryReader
from gputui.derive.tree import build_groups
from gputui.derive.users import user_totals
from gputui.model.processes import GpuProcess
from gputui.model.snapshot import ContainerUsage, Snapshot
from gputui.model.status import HealthStatus, worst_status
from gputui.ui import action_table
from gputui.ui.empty_states import containers_empty, gpus_empty, processes_empty
from gputui.ui.filters import key_hint, scope_parts
from gputui.ui.layout import (
    SIDE_HYSTERESIS,
    SIDE_WIDTH,
    Layout,
    choose_layout,
    wants_pane,
    wants_side,
)
from gputui.ui.messages import SelectionChanged
from gputui.ui.state import UiState
from gputui.ui.tab_table import TABS, Selection, Sortable, TabRow, TabTable
from gputui.ui.widgets.container_tree import ContainerPane, ContainerTree, NodeRef
from gputui.ui.widgets.footer import Footer
from gputui.ui.widgets.gpu_panel import GpuPanel
from gputui.ui.widgets.header import HeaderBar
from gputui.ui.widgets.process_table import EmptyNote, ProcessTable

if TYPE_CHECKING:
    from gputui.ui.widgets.alerts_panel import AlertsPanel
    from gputui.ui.widgets.health_panel import HealthPanel
    from gputui.ui.widgets.history import HistoryPanel
    from gputui.ui.widgets.users_view import UsersView

if TYPE_CHECKING:
    from gputui.ui.widgets.selection_pane import LogOpener, SelectionPane

#: Below this width the GPU panel goes above the tabs (the stacked layout); kept under this
#: name for the layout's callers. The choice itself is :func:`gputui.ui.layout.choose_layout`.
NARROW_WIDTH = SIDE_WIDTH

#: Once side by side, the layout stays so down to ``NARROW_WIDTH - NARROW_HYSTERESIS`` columns.
NARROW_HYSTERESIS = SIDE_HYSTERESIS

#: The smallest terminal the layout is drawn in; below it a message says so instead.
MIN_WIDTH, MIN_HEIGHT = 40, 12


def is_narrow(width: int, was_narrow: bool | None) -> bool:
    """Whether a terminal ``width`` columns wide stacks the GPU panel above the tabs (``auto``).

    Args:
        width: The terminal's width in columns.
        was_narrow: The layout in use (None before the first choice).

    Returns:
        True for the stacked layout: below :data:`NARROW_WIDTH`, or, when already side by side,
        below ``NARROW_WIDTH - NARROW_HYSTERESIS``.
    """
    return not wants_side(width, "auto", None if was_narrow is None else not was_narrow)


def too_small_text(width: int, height: int) -> str:
    """``gputui needs at least 40x12 — this terminal is 35x10`` (with a multiplication sign)."""
    x = "\N{MULTIPLICATION SIGN}"
    return f"gputui needs at least {MIN_WIDTH}{x}{MIN_HEIGHT} — this terminal is {width}{x}{height}"


class MainScreen(Screen[None]):
    """Everything the monitor shows at once."""

    BINDINGS = action_table.bindings(action_table.Scope.MAIN)

    # A status line carrying a note on figures read in turn is cut with an ellipsis rather than
    # wrapped (its second line would be hidden): the key hint at its end goes first.
    DEFAULT_CSS = """
    MainScreen #proc-status.-noted { text-wrap: nowrap; text-overflow: ellipsis; }
    MainScreen #tree-note {
        height: 1;
        padding: 0 1;
        color: $text-muted;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    def __init__(self, history: HistoryReader, rules: int = 0, tabs: TabTable = TABS) -> None:
        super().__init__()
        #: The tabs shown, in order (:data:`gputui.ui.tab_table.TABS` unless a test adds one).
        self.tabs = tabs
        self.history: HistoryReader = history
        self.rules: int = rules
        self.snapshot: Snapshot | None = None
        self.analysis: Analysis | None = None
        self.state = UiState(interval=1.0)
        self.window: float = 300.0
        self.header: HeaderBar = HeaderBar(id="header")
        self.gpus: GpuPanel = GpuPanel(id="gpus")
        self.ctree: ContainerTree = ContainerTree(id="tree")
        self.cpane: ContainerPane = ContainerPane(self.ctree, id="tree-pane")
        self.table: ProcessTable = ProcessTable(id="procs")
        #: The process table's sort as ``s`` / ``S`` see it (the status line follows).
        self.process_sort: Sortable = _ProcessSort(self)
        #: Tabs whose widgets are built and mounted when the tab is first shown (see compose).
        self._unfilled: set[str] = set()
        self._filling: set[str] = set()
        self.filter_input: Input = Input(
            placeholder="filter: command, container, user or PID", id="filter"
        )
        self.proc_status: Static = Static("", id="proc-status")
        #: Above the tree, only while container CPU/memory are read in turn (many containers).
        self.tree_note: Static = Static("", id="tree-note")
        self._tree_note_text: str | None = None
        self.proc_empty: EmptyNote = EmptyNote(id="proc-empty")
        self.too_small: Static = Static("", id="too-small")
        self._synced: dict[str, Snapshot | None] = dict.fromkeys(tabs.ids)
        self._tabs: TabbedContent | None = None
        self._health_title: str = ""
        self._alerts_title: str = ""
        self._narrow: bool | None = None
        self._fitted: tuple[object, ...] | None = None
        #: ``[ui] layout``: auto, top or side.
        self.layout_preference = "auto"
        #: The user collapsed the GPU panel to its summary line (``v``).
        self.gpus_collapsed = False
        #: The arrangement in use (None until the first fit).
        self.arrangement: Layout | None = None
        self._focus_before_small: Widget | None = None
        #: Tagged processes (Space): PID -> the start time it had when tagged (a PID reused by
        #: another process is not tagged).
        self.tags: dict[int, float | None] = {}
        #: The GPU the tree and the table are scoped to (``f``, a click on a GPU); None: all.
        self.gpu_scope: int | None = None
        #: The container pane under the tree: None follows the terminal's size (``o`` flips).
        self.pane_wanted: bool | None = None
        #: Mounted the first time it is shown (its module is imported then).
        self.selection_pane: SelectionPane | None = None
        #: How the pane opens a container's logs (set by the app; None: no logs in the pane).
        self.pane_logs: LogOpener | None = None

    def compose(self) -> ComposeResult:
        """Header, body (GPU panel + tabs), footer."""
        # The arrangement's class before the widgets exist, as the first fit_layout (no
        # snapshot yet) will choose it: changed once they are mounted, the class restyles
        # every widget of the screen (~0.2 s of the 2-core machine's first frame).
        width, height = self.app.size
        first = choose_layout(
            width, height, 0, collapsed=self.gpus_collapsed, preference=self.layout_preference
        )
        self.set_class(not first.side, "-narrow", update=False)
        yield self.too_small
        yield self.header
        with Container(id="body"):
            yield self.gpus
            with TabbedContent(id="tabs", initial=self.tabs.ids[0]):
                for tab in self.tabs:
                    # Only the first tab is drawn at start. The other tabs' widgets (Health,
                    # History, Alerts, Users, Ledger: their modules, DataTables, charts) are
                    # imported, built and mounted when their tab is first shown, so the first
                    # frame pays for what it shows. The tree and the table stay: keys act on
                    # their rows from any tab.
                    eager = tab.id == self.tabs.ids[0] or tab.shows_rows
                    if not eager:
                        self._unfilled.add(tab.id)
                    yield TabPane(tab.title, *(tab.content(self) if eager else ()), id=tab.id)
        yield Footer()

    @cached_property
    def health(self) -> HealthPanel:
        """The Health tab's panel (built on first use)."""
        from gputui.ui.widgets.health_panel import HealthPanel

        return HealthPanel(id="health-panel")

    @cached_property
    def history_panel(self) -> HistoryPanel:
        """The History tab's panel (built on first use)."""
        from gputui.ui.widgets.history import HistoryPanel

        return HistoryPanel(id="history-panel")

    @cached_property
    def alerts(self) -> AlertsPanel:
        """The Alerts tab's panel (built on first use)."""
        from gputui.ui.widgets.alerts_panel import AlertsPanel

        return AlertsPanel(id="alerts-panel")

    @cached_property
    def users_view(self) -> UsersView:
        """The Users tab's view (built on first use)."""
        from gputui.ui.widgets.users_view import UsersView

        return UsersView(id="users-view")

    def on_mount(self) -> None:
        """Start with the tree focused and the filter hidden."""
        self.filter_input.display = False
        self.tree_note.display = False
        self.ctree.focus()
        self.header.show(None, self.state, None)

    # ----------------------------------------------------------------- applying snapshots

    @property
    def active_tab(self) -> str:
        """The id of the visible tab pane."""
        tabs = self._tabs
        if tabs is None:  # looked up once: the app asks for every key binding's state
            tabs = self._tabs = self.query_one(TabbedContent)
        return tabs.active or self.tabs.ids[0]

    @property
    def active_row(self) -> TabRow:
        """The tab table's row of the visible tab."""
        return self.tabs.row(self.active_tab)

    def apply(
        self,
        snapshot: Snapshot | None,
        state: UiState,
        window: float,
        analysis: Analysis | None,
    ) -> None:
        """Show one snapshot (call inside ``App.batch_update``).

        Args:
            snapshot: The refresh; None re-renders the last one (pause, interval, window change).
            state: Header state.
            window: History window in seconds.
            analysis: The snapshot's findings, alerts and GPU shares (from the collector thread).
        """
        if snapshot is not None:
            self.snapshot = snapshot
            self._prune_tags(snapshot)
        if analysis is not None:
            self.analysis = analysis
        self.state = state
        self.window = window
        self.header.show(self.snapshot, state, self.analysis)
        if self.snapshot is None:
            return
        self.fit_layout()  # the GPU count decides the layout too
        shares = self.analysis.shares if self.analysis is not None else None
        if not self.snapshot.gpus:
            self.gpus.show_empty(gpus_empty(self.snapshot))
        self.gpus.show(self.snapshot.gpus, self.history, window, shares)
        self._update_health_title(self.snapshot)
        self._update_alerts_title()
        if snapshot is None:
            # A re-render (the window, the interval, a pause): the tabs show the same snapshot
            # in a new way, so none of them is up to date any more (paused, no new snapshot
            # would ever catch them up: ``w`` said the window changed but the chart did not).
            self._synced = dict.fromkeys(self.tabs.ids)
        self.sync_tab(self.active_tab)

    def sync_tab(self, tab: str, force: bool = False) -> None:
        """Bring one tab up to date with the current snapshot (skipped if it already is)."""
        snapshot = self.snapshot
        if snapshot is None or (self._synced.get(tab) is snapshot and not force):
            return
        if tab in self._unfilled:
            return  # not shown yet: synced once its widgets are mounted
        self._synced[tab] = snapshot
        self.tabs.row(tab).sync(self, snapshot)

    def sync_containers(self, snapshot: Snapshot) -> None:
        """The Containers tab: the tree from the analysis's groups, its empty state and note."""
        analysis = self.analysis
        docker = snapshot.sources.get("docker")
        stale = docker is not None and not docker.ok
        markers = analysis.markers if analysis else None
        groups = analysis.groups if analysis is not None else None
        if groups is None or analysis is None or analysis.snapshot is not snapshot:
            groups = build_groups(snapshot)  # else built on the collector's thread
        self.ctree.sync(groups, markers, stale, snapshot.taken_at)
        self.cpane.show_empty(None if groups else containers_empty(snapshot))
        self._update_tree_note(container_stats_note(snapshot))
        self.show_pane()

    def sync_users(self, snapshot: Snapshot) -> None:
        """The Users tab: the analysis's totals (computed here only for a hand-built analysis)."""
        analysis = self.analysis
        totals = analysis.totals if analysis is not None else None
        if totals is None or analysis is None or analysis.snapshot is not snapshot:
            totals = user_totals(snapshot)  # else computed on the collector's thread
        self.users_view.show(snapshot, totals)

    def sync_processes(self, snapshot: Snapshot) -> None:
        """The Processes tab: the table and its status line."""
        self.table.sync(snapshot)
        self._update_proc_status()

    def _update_health_title(self, snapshot: Snapshot) -> None:
        worst = worst_status(snapshot.health)
        fails = sum(1 for c in snapshot.health if c.status is HealthStatus.FAIL)
        warns = sum(1 for c in snapshot.health if c.status is HealthStatus.WARN)
        if worst is HealthStatus.FAIL:
            title = f"Health ✗ {fails} fail"
        elif worst is HealthStatus.WARN:
            title = f"Health ! {warns} warn"
        elif worst is None:
            title = "Health"
        else:
            title = "Health ✓"
        if title != self._health_title:
            try:
                tab = self.query_one(TabbedContent).get_tab("health")
            except NoMatches:
                return  # the tabs are not composed yet; the next snapshot sets the title
            style = {HealthStatus.FAIL: "bold $text-error", HealthStatus.WARN: "bold $text-warning"}
            tab.label = Content.styled(title, style.get(worst, "")) if worst else Content(title)
            self._health_title = title

    def _update_alerts_title(self) -> None:
        state = self.analysis.alerts if self.analysis is not None else None
        firing = state.firing if state is not None else ()
        title = f"Alerts ⚠ {len(firing)}" if firing else "Alerts"
        if title == self._alerts_title:
            return
        try:
            tab = self.query_one(TabbedContent).get_tab("alerts")
        except NoMatches:
            return  # not composed yet; the next snapshot sets the title
        worst = worst_severity(firing)
        style = "bold $text-error" if worst == "critical" else "bold $text-warning"
        tab.label = Content.styled(title, style) if firing else Content(title)
        self._alerts_title = title

    @property
    def alerts_title(self) -> str:
        """The Alerts tab's current title."""
        return self._alerts_title

    @property
    def health_title(self) -> str:
        """The Health tab's current title."""
        return self._health_title

    def _update_proc_status(self) -> None:
        shown = self.table.row_count
        total = len(self.snapshot.processes) if self.snapshot else 0
        needle = sanitise.safe_text(self.table.filter_text, 60)
        filt = f"  ·  filter “{needle}”" if self.table.filter_text else ""
        note = process_figures_note(self.snapshot) if self.snapshot else None
        self.proc_status.set_class(note is not None, "-noted")
        self.proc_status.update(
            Content.assemble(
                ("sort ", "$text-muted"),
                (self.table.sort_label, "bold"),
                (f"  ·  {shown} of {total} GPU processes", "$text-muted"),
                *scope_parts(self.gpu_scope, len(self.tags)),
                (filt, "$text-warning"),
                # Before the key hint, which the footer repeats: a narrow terminal cuts the hint.
                (f"  ·  {note}" if note else "", "$text-muted"),
                (f"   ({key_hint(self.gpu_scope, len(self.tags))})", "$text-muted"),
            )
        )
        self.proc_empty.show(
            processes_empty(self.snapshot, self.table.filter_text, shown, self.gpu_scope)
        )

    def _update_tree_note(self, note: str | None) -> None:
        """Show (or hide) the line saying container CPU/memory are read in turn."""
        if note == self._tree_note_text:
            return
        self._tree_note_text = note
        self.tree_note.display = note is not None
        self.tree_note.update(note or "")

    @property
    def tree_note_text(self) -> str | None:
        """The Containers tab's note on figures read in turn, None when all are current."""
        return self._tree_note_text

    # ----------------------------------------------------------------------- selection

    @property
    def tree_container(self) -> ContainerUsage | None:
        """The container selected in the tree (its own node or one of its processes)."""
        ref: NodeRef | None = self.ctree.selected
        return None if ref is None else ref.container

    def selection(self) -> tuple[ContainerUsage | None, GpuProcess | None]:
        """The container and process the keys act on.

        What the visible tab's :attr:`~gputui.ui.tab_table.TabRow.selection` says: the table's
        row on the Processes tab, the tree's node on the Containers and History tabs (the History
        tab charts the tree's container); nothing on the Health, Alerts and Users tabs, whose
        rows are no container, so no key acts on a selection the user cannot see.
        """
        selection = self.active_row.selection
        if selection is Selection.NONE:
            return None, None
        if selection is Selection.TABLE:
            process = self.table.selected
            if process is None:
                return None, None
            container = None
            if process.container_id is not None and self.snapshot is not None:
                container = self.snapshot.container(process.container_id)
            return container, process
        ref = self.ctree.selected
        if ref is None:
            return None, None
        return ref.container, ref.process

    # ------------------------------------------------------------------------- events

    def on_resize(self, event: Resize) -> None:
        """The terminal (or, in Textual's eyes, this screen) changed size: re-fit the layout."""
        self.fit_layout()

    def on_screen_resume(self) -> None:
        """Back from a dialog: the terminal may have been resized meanwhile."""
        self.fit_layout()

    @property
    def is_too_small(self) -> bool:
        """The terminal is below the minimum size: the message covers the monitor."""
        return self.has_class("-too-small")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """This screen's keys (Tab, shift+Tab, Escape) do nothing behind the too-small message."""
        return not self.is_too_small

    def fit_layout(self) -> None:
        """Choose the layout for the terminal's size (``App.size``) and the GPU count.

        See :func:`gputui.ui.layout.choose_layout`. Classes and sizes change only on change.
        Below the minimum size the layout is hidden behind a message naming the minimum (it is
        kept, and comes back as it was when the terminal grows). The screen's own Resize events
        can carry sizes from an earlier layout pass (a dumb terminal reports 80x25 first):
        deciding from them made the class change and the relayout it causes feed each other.
        """
        width, height = self.app.size
        gpus = len(self.snapshot.gpus) if self.snapshot is not None else 0
        key = (width, height, gpus, self.gpus_collapsed, self.layout_preference)
        if self._fitted == key:
            return
        self._fitted = key
        small = width < MIN_WIDTH or height < MIN_HEIGHT
        if small:
            self.too_small.update(too_small_text(width, height))
        if small != self.has_class("-too-small"):
            self.set_class(small, "-too-small")
            # Behind the message no key acts: the focused widget (the tree's arrows, Enter)
            # lets go, the app's and this screen's keys are refused (``is_too_small``), and the
            # focus comes back where it was when the terminal grows.
            body = self.query("#body")  # empty before the screen is composed
            if small:
                self._focus_before_small = self.focused or self._focus_before_small
                body.set(disabled=True)  # nothing in it can hold the focus or take a key
            else:
                body.set(disabled=False)
                if self._focus_before_small is not None:
                    self.set_focus(self._focus_before_small)
                    self._focus_before_small = None
        was_side = None if self._narrow is None else not self._narrow
        layout = choose_layout(
            width,
            height,
            gpus,
            collapsed=self.gpus_collapsed,
            preference=self.layout_preference,
            was_side=was_side,
        )
        self.arrangement = layout
        narrow = not layout.side
        if narrow != self._narrow:
            self._narrow = narrow
            self.set_class(narrow, "-narrow")
        if self.header.styles.height is None or self.header.styles.height.value != (
            layout.header_rows
        ):
            self.header.styles.height = layout.header_rows
        self.gpus.styles.height = "1fr" if layout.side else layout.gpu_rows
        self.gpus.set_style(layout.style, collapsed=self.gpus_collapsed and gpus > 0)
        if not gpus:
            self.gpus.show_empty(gpus_empty(self.snapshot))
        self.fit_pane()

    # ------------------------------------------------------------------ the container pane

    @property
    def pane_shown(self) -> bool:
        """The container pane is on screen (under the tree)."""
        return self.selection_pane is not None and bool(self.selection_pane.display)

    def fit_pane(self) -> None:
        """Show the container pane when the terminal is tall and wide enough (or asked)."""
        width, height = self.app.size
        show = wants_pane(width, height, self.pane_wanted)
        pane = self.selection_pane
        if pane is None:
            if not show or self.pane_logs is None:
                return
            try:
                tab = self.query_one("#containers", TabPane)
            except NoMatches:
                return  # not composed yet: the first resize or snapshot fits it
            from gputui.ui.widgets.selection_pane import SelectionPane

            pane = self.selection_pane = SelectionPane(self.pane_logs, id="selection-pane")
            tab.mount(pane)
        if bool(pane.display) != show:
            pane.display = show
        if show:
            self.show_pane()
        else:
            pane.show(None, None, None)  # its log stream closes while hidden

    def toggle_pane(self) -> bool:
        """Show or hide the container pane (``o``); whether it is shown now."""
        self.pane_wanted = not self.pane_shown
        self.fit_pane()
        return self.pane_shown

    def show_pane(self) -> None:
        """The pane follows the tree's selection and the latest snapshot."""
        if self.selection_pane is not None and self.pane_shown:
            self.selection_pane.show(self.tree_container, self.snapshot, self.analysis)

    def side_end(self, right: bool) -> None:
        """Scroll the visible tree or table to its left or right edge (``^`` / ``$``)."""
        widget = {"containers": self.ctree, "processes": self.table}.get(self.active_tab)
        if widget is not None:
            widget.scroll_to(x=widget.max_scroll_x if right else 0, animate=False)

    def toggle_gpus(self) -> bool:
        """Collapse the GPU panel to its summary line, or expand it; returns the new state."""
        self.gpus_collapsed = not self.gpus_collapsed
        self.fit_layout()
        if self.snapshot is not None:
            shares = self.analysis.shares if self.analysis is not None else None
            self.gpus.show(self.snapshot.gpus, self.history, self.window, shares)
        return self.gpus_collapsed

    async def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        """Catch the newly visible tab up and focus its main widget.

        A tab shown for the first time gets its widgets first (composed empty: see compose).
        The focus stays where it is when it is already inside the shown pane: keys typed before
        this message arrived (``1`` then ``/``) opened that pane's filter, and taking the focus
        from it would send the text typed next to the monitor's keys.
        """
        tab = event.pane.id or ""
        if tab in self._unfilled:
            if tab in self._filling:
                return  # shown again while its widgets are being mounted: that call goes on
            self._filling.add(tab)
            try:
                await event.pane.mount_all(self.tabs.row(tab).content(self))
            finally:
                self._filling.discard(tab)
            # Only now: a snapshot applied while mounting skipped the tab (sync_tab below).
            self._unfilled.discard(tab)
            if self.active_tab != tab:
                return  # another tab was shown meanwhile; it is synced when shown again
        self.sync_tab(tab)
        focused = self.focused
        inside = focused is not None and event.pane in focused.ancestors_with_self
        widget = self.tabs.row(tab).focus(self)
        if widget is not None and not inside:
            widget.focus()
        self.post_message(SelectionChanged())

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[NodeRef]) -> None:
        """The tree cursor moved: keys like x may change state; the flags line and pane follow."""
        self.cpane.refresh_flags()
        self.show_pane()
        self.post_message(SelectionChanged())

    def on_input_changed(self, event: Input.Changed) -> None:
        """Filter as you type."""
        if event.input is self.filter_input:
            self.table.filter_text = event.value.strip()
            self.sync_tab("processes", force=True)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter keeps the filter and returns to the table."""
        if event.input is self.filter_input:
            if not event.value.strip():
                self.filter_input.display = False
            self.table.focus()

    # ------------------------------------------------------------------------ actions

    def show_tab(self, tab: str) -> None:
        """Make a tab visible."""
        tabs = self.query_one(TabbedContent)
        if tabs.active != tab:
            # TabbedContent re-activates the pane holding the focused widget, so a focused widget
            # left in the old pane would switch straight back: drop focus first.
            self.set_focus(None)
            tabs.active = tab

    def action_cycle_tab(self, step: int) -> None:
        """Next / previous tab."""
        ids = self.tabs.ids
        index = ids.index(self.active_tab) if self.active_tab in ids else 0
        self.show_tab(ids[(index + step) % len(ids)])

    def open_filter(self) -> None:
        """Show and focus the visible tab's filter (none: nothing happens; the key is dimmed)."""
        opener = self.active_row.filter
        if opener is not None:
            opener(self)

    def open_process_filter(self) -> None:
        """Show and focus the process table's filter input.

        Focused at once, not with ``focus()`` (which waits for the next message): keys typed
        right after ``/`` are already queued, and until the input has the focus they would run
        as commands (``e`` opened the evidence view).
        """
        self.filter_input.display = True
        self.set_focus(self.filter_input)

    def action_close_filter(self) -> None:
        """Escape: clear and hide the filter when it is focused."""
        if self.active_tab == "containers" and self.cpane.close_filter():
            return
        if self.active_tab == "processes" and (
            self.filter_input.has_focus or self.filter_input.display
        ):
            self.filter_input.value = ""
            self.filter_input.display = False
            self.table.focus()
            return
        if self.gpu_scope is not None and self.active_row.shows_rows:
            self.set_gpu_scope(None)  # no filter left to close: back to every GPU

    @property
    def sort_target(self) -> Sortable | None:
        """What ``s`` / ``S`` re-sort on the visible tab (None: nothing sorts here)."""
        sort = self.active_row.sort
        return None if sort is None else sort(self)

    def cycle_sort(self) -> None:
        """Next sort column of the visible tab's view (nothing on a tab without one)."""
        target = self.sort_target
        if target is not None:
            target.cycle_sort()

    def reverse_sort(self) -> None:
        """Reverse the sort of the visible tab's view (nothing on a tab without one)."""
        target = self.sort_target
        if target is not None:
            target.reverse_sort()

    def update_proc_status(self) -> None:
        """Redraw the Processes tab's status line (after a sort or filter change)."""
        self._update_proc_status()

    def crumbs(self, container: ContainerUsage | None, leaf: str) -> tuple[str, ...]:
        """A drill-down's path: the visible tab, the container (``host`` outside any), ``leaf``."""
        name = container.info.name if container is not None else "host"
        return (self.active_row.title, name, leaf)

    # ------------------------------------------------------------------ tags and scope

    def _prune_tags(self, snapshot: Snapshot) -> None:
        """Tags of processes that exited (or whose PID was reused) go with them."""
        if not self.tags:
            return
        alive = {p.pid: p.info.start_time for p in snapshot.processes if p.info.exists}
        kept = {pid: start for pid, start in self.tags.items() if alive.get(pid, -1.0) == start}
        if kept != self.tags:
            self.tags = kept
            self._show_tags()

    def tagged_processes(self) -> list[GpuProcess]:
        """The tagged processes of the snapshot shown, one per PID, in the snapshot's order."""
        if not self.tags or self.snapshot is None:
            return []
        found: dict[int, GpuProcess] = {}
        for process in self.snapshot.processes:
            pid = process.pid
            if pid in self.tags and pid not in found and self.tags[pid] == process.info.start_time:
                found[pid] = process
        return list(found.values())

    def container_processes(self, usage: ContainerUsage) -> list[GpuProcess]:
        """The GPU processes of a container in the snapshot shown, one per PID."""
        if self.snapshot is None:
            return []
        found: dict[int, GpuProcess] = {}
        for process in self.snapshot.processes:
            if process.container_id == usage.info.id:
                found.setdefault(process.pid, process)
        return list(found.values())

    def toggle_tag(self) -> None:
        """Space: tag or untag the process under the cursor, then move down (as htop does)."""
        _, process = self.selection()
        if process is None:
            return
        if process.pid in self.tags:
            del self.tags[process.pid]
        else:
            self.tags[process.pid] = process.info.start_time
        self._show_tags()
        if self.active_row.selection is Selection.TABLE:
            self.table.action_cursor_down()
        else:
            self.ctree.action_cursor_down()

    def untag_all(self) -> int:
        """``u``: untag every process; returns how many were tagged."""
        count = len(self.tags)
        if count:
            self.tags = {}
            self._show_tags()
        return count

    def _show_tags(self) -> None:
        pids = frozenset(self.tags)
        self.ctree.set_tagged(pids)
        self.table.set_tagged(pids)
        self.cpane.refresh_status()
        self._update_proc_status()
        self.post_message(SelectionChanged())

    def cycle_gpu_scope(self, step: int = 1) -> None:
        """``f``: scope to the next GPU of the snapshot; after the last, every GPU again."""
        indexes = [gpu.index for gpu in self.snapshot.gpus] if self.snapshot else []
        if not indexes:
            self.app.notify("No GPU to scope to.", severity="warning", timeout=3)
            return
        options: list[int | None] = [*indexes, None]
        at = options.index(self.gpu_scope) if self.gpu_scope in options else len(options) - 1
        self.set_gpu_scope(options[(at + step) % len(options)])

    def set_gpu_scope(self, gpu: int | None) -> None:
        """Show only what runs on GPU ``gpu`` in the tree and the table (None: every GPU)."""
        if gpu == self.gpu_scope:
            return
        self.gpu_scope = gpu
        self.gpus.set_scope(gpu)
        self.table.scope_gpu = gpu
        self._synced["processes"] = None  # caught up when shown
        if self.active_tab == "processes":
            self.sync_tab("processes")
        self._update_proc_status()
        self.ctree.set_scope(gpu)
        self.cpane.refresh_status()

    def on_gpu_panel_picked(self, event: GpuPanel.Picked) -> None:
        """A click on a GPU: scope to it; a click on the scoped GPU: every GPU again."""
        self.set_gpu_scope(None if event.index == self.gpu_scope else event.index)


class _ProcessSort:
    """The process table's sort as ``s`` / ``S`` see it: the status line names the new order."""

    def __init__(self, screen: MainScreen) -> None:
        self._screen = screen

    def cycle_sort(self) -> None:
        self._screen.table.cycle_sort()
        self._screen.update_proc_status()

    def reverse_sort(self) -> None:
        self._screen.table.reverse_sort()
        self._screen.update_proc_status()

    def sort_choices(self) -> tuple[str, ...]:
        return self._screen.table.sort_choices()

    def sort_current(self) -> int:
        return self._screen.table.sort_index

    def sort_by(self, index: int) -> None:
        self._screen.table.sort_by(index)
        self._screen.update_proc_status()
