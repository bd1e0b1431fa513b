"""``gputui fleet``: the host table of a Prometheus-scraped fleet, and a drill-down per host.

A small App of its own (the monitor's App is built around one machine's collector), with the
monitor's look and habits: a one-line header, a table with the cursor, ``/`` to filter, ``s`` /
``S`` to sort, Enter to drill down, Escape to go back, ``r`` to refresh now, ``q`` to quit.

Nothing here blocks the UI thread: one thread worker runs the refresh loop (the host table,
then the drilled-down host when one is open), never two refreshes at a time, and hands each
result to the UI with ``call_from_thread``. Every query has the client's deadline. The fleet
view never changes anything, so it has no write actions at all.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Footer, Input, Static

from gputui.boundary import sanitise
from gputui.derive import units
from gputui.fleet.client import FleetError
from gputui.fleet.command import FleetOptions
from gputui.fleet.model import (
    SORT_NAMES,
    HostDetail,
    HostRow,
    Kind,
    filtered,
    sorted_rows,
)
from gputui.fleet.report import COLUMNS, cells, memory
from gputui.fleet.source import FleetSnapshot, FleetSource
from gputui.model.records import record
from gputui.ui.crash import CrashSafeApp, run_app

#: Cells of a drill-down sparkline.
SPARK_WIDTH = 20
#: The drill-down's container columns; POD only on a host whose containers include a pod's.
CONTAINER_COLUMNS = ("CONTAINER", "POD", "IMAGE", "GPUS", "GPU MEM", "SM", "GPU MEM 10m", "IDLE")

CSS = """
#fleet-header, #host-header {
    height: auto;
    max-height: 3;
    padding: 0 1;
    background: $panel;
}
#fleet-error {
    display: none;
    height: auto;
    padding: 0 1;
    color: $error;
    text-style: bold;
}
#fleet-error.-shown { display: block; }
#fleet-filter { display: none; height: 3; }
#fleet-filter.-shown { display: block; }
#hosts, #host-gpus, #host-containers { height: 1fr; }
#host-gpus { max-height: 12; }
#host-problems { height: auto; max-height: 8; padding: 0 1; }
.section { padding: 0 1; text-style: bold; color: $text-muted; }
"""


#: The help screen's rows: (keys, what they do).
HELP_ROWS = (
    ("↑ ↓ PgUp PgDn", "move in the host table"),
    ("Enter", "drill down: the host's GPUs, containers, alerts and checks"),
    ("Esc", "back to the host table; clear the filter"),
    ("/", "filter hosts by name, instance, job, top container, pod or namespace"),
    ("s / S", "next sort order (" + ", ".join(SORT_NAMES) + ") / reverse it"),
    ("r", "refresh now"),
    ("?", "this help"),
    ("q", "quit"),
)


class FleetHelp(ModalScreen[None]):
    """The fleet view's keys (it has no actions: nothing here changes a host)."""

    BINDINGS = [
        Binding("escape", "app.pop_screen", "Close"),
        Binding("question_mark", "app.pop_screen", "Close", show=False),
        Binding("q", "app.pop_screen", "Close", show=False),
    ]
    DEFAULT_CSS = """
    FleetHelp { align: center middle; }
    FleetHelp > Static { width: auto; max-width: 90%; height: auto; padding: 1 2;
        background: $panel; border: round $primary; }
    """

    def compose(self) -> ComposeResult:
        """The key table."""
        text = Text("gputui fleet: keys\n\n", style="bold")
        for keys, what in HELP_ROWS:
            text.append(f"{keys:<14}", "bold")
            text.append(f"{what}\n")
        text.append("\nEvery figure comes from Prometheus; the fleet view changes nothing.", "dim")
        yield Static(text)


@record
class _Refreshed:
    snapshot: FleetSnapshot | None
    error: str | None
    detail: HostDetail | None = None
    detail_key: str | None = None


def _state_style(row: HostRow) -> str:
    if row.up is not True:
        return "bold red"
    if row.failing or row.sources_down or row.alerts:
        return "yellow"
    return ""


def _row_cells(row: HostRow) -> list[Text]:
    texts = cells(row)
    style = _state_style(row)
    out = [Text(t, no_wrap=True, overflow="ellipsis") for t in texts]
    out[1].stylize(style or "green")
    if row.alerts:
        out[9].stylize("bold red")
    if row.failing or row.sources_down:
        out[10].stylize("red")
    elif row.warning:
        out[10].stylize("yellow")
    if row.down:
        for cell in out[2:]:
            cell.stylize("dim")
    return out


class FleetScreen(Screen[None]):
    """The host table."""

    BINDINGS = [
        # Enter is the table's own (select_cursor → RowSelected → the drill-down); this row
        # only names it in the footer.
        Binding("enter", "open_host", "Host", show=True),
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("escape", "close_filter", "Clear", show=False),
        Binding("s", "sort", "Sort"),
        Binding("S", "sort_reverse", "Reverse", show=False),
        Binding("r", "refresh", "Refresh"),
        Binding("question_mark", "app.push_screen('fleet-help')", "Help", key_display="?"),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self, sort: str) -> None:
        super().__init__()
        self.sort = sort if sort in SORT_NAMES else "host"
        self.reverse = False
        self.filter_text = ""
        self.snapshot: FleetSnapshot | None = None
        self.error: str | None = None
        self.shown: list[HostRow] = []
        self._ready = False

    def compose(self) -> ComposeResult:
        """Header, error line, filter box, host table, footer."""
        yield Static("gputui fleet: asking Prometheus…", id="fleet-header")
        yield Static("", id="fleet-error")
        yield Input(
            placeholder="filter hosts, jobs, containers, pods (Esc clears)", id="fleet-filter"
        )
        table: DataTable[Text] = DataTable(id="hosts", cursor_type="row", zebra_stripes=True)
        yield table
        yield Footer()

    def on_mount(self) -> None:
        """Add the columns; show a refresh that came before the mount."""
        table = self.query_one("#hosts", DataTable)
        for name in COLUMNS:
            table.add_column(name, key=name)
        table.focus()
        self._ready = True
        self.apply(_Refreshed(self.snapshot, self.error))

    def apply(self, refreshed: _Refreshed) -> None:
        """Show a refresh (or its error, keeping the last good table)."""
        if refreshed.snapshot is not None:
            self.snapshot = refreshed.snapshot
        self.error = refreshed.error
        if not self._ready:  # on_mount renders what landed before it
            return
        error = self.query_one("#fleet-error", Static)
        error.update(sanitise.safe_text(self.error, 400) if self.error else "")
        error.set_class(self.error is not None, "-shown")
        self._render_table()

    def _render_table(self) -> None:
        snapshot = self.snapshot
        table = self.query_one("#hosts", DataTable)
        header = self.query_one("#fleet-header", Static)
        if snapshot is None:
            return
        rows = sorted_rows(filtered(snapshot.hosts, self.filter_text), self.sort, self.reverse)
        keep = table.cursor_row
        selected = self.shown[keep].key if 0 <= keep < len(self.shown) else None
        self.shown = rows
        table.clear()
        for row in rows:
            table.add_row(*_row_cells(row), key=row.key)
        if selected is not None:
            for index, row in enumerate(rows):
                if row.key == selected:
                    table.move_cursor(row=index)
                    break
        down = sum(1 for r in snapshot.hosts if r.down)
        gpus = sum(r.gpus for r in snapshot.hosts)
        problems = sum(1 for r in snapshot.hosts if r.failing or r.alerts or r.sources_down)
        arrow = "↑" if self.reverse else "↓"
        line = Text.assemble(
            ("gputui fleet", "bold"),
            f"  {snapshot.source}  ",
            (f"{len(snapshot.hosts)} hosts", "bold"),
            " (",
            (f"{down} down", "bold red" if down else ""),
            f", {problems} with problems)  ",
            (f"{gpus} GPUs", "bold"),
            f"  sort {self.sort}{arrow}",
            f"  filter {self.filter_text!r}" if self.filter_text else "",
            f"  query {snapshot.query_s:.2f}s",
        )
        if not snapshot.hosts:
            line.append(
                "  no GPU hosts: is gputui export or dcgm-exporter scraped, and does --match fit?",
                "yellow",
            )
        header.update(line)

    def action_open_host(self) -> None:
        """Enter: drill down into the host under the cursor."""
        table = self.query_one("#hosts", DataTable)
        index = table.cursor_row
        if 0 <= index < len(self.shown):
            app = self.app
            if isinstance(app, FleetApp):
                app.open_host(self.shown[index])

    @on(DataTable.RowSelected, "#hosts")
    def _selected(self, _event: DataTable.RowSelected) -> None:
        self.action_open_host()

    def action_filter(self) -> None:
        """``/``: open the filter box."""
        box = self.query_one("#fleet-filter", Input)
        box.add_class("-shown")
        box.focus()

    def action_close_filter(self) -> None:
        """Escape: clear and close the filter."""
        box = self.query_one("#fleet-filter", Input)
        box.value = ""
        box.remove_class("-shown")
        self.filter_text = ""
        self.query_one("#hosts", DataTable).focus()
        self._render_table()

    @on(Input.Changed, "#fleet-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value[:200]
        self._render_table()

    @on(Input.Submitted, "#fleet-filter")
    def _filter_done(self, _event: Input.Submitted) -> None:
        self.query_one("#hosts", DataTable).focus()

    def action_sort(self) -> None:
        """``s``: the next sort order."""
        self.sort = SORT_NAMES[(SORT_NAMES.index(self.sort) + 1) % len(SORT_NAMES)]
        self._render_table()

    def action_sort_reverse(self) -> None:
        """``S``: reverse the order."""
        self.reverse = not self.reverse
        self._render_table()

    def action_refresh(self) -> None:
        """``r``: refresh now."""
        app = self.app
        if isinstance(app, FleetApp):
            app.wake()


class HostScreen(Screen[None]):
    """One host: its GPUs with sparklines, its containers, firing alerts and failing checks."""

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("backspace", "back", "Back", show=False),
        Binding("r", "refresh", "Refresh"),
        Binding("question_mark", "app.push_screen('fleet-help')", "Help", key_display="?"),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self, row: HostRow) -> None:
        super().__init__()
        self.row = row
        self.detail: HostDetail | None = None
        self._pending: tuple[HostRow | None, HostDetail | None] = (None, None)
        self._ready = False
        self._pod_column = False

    def compose(self) -> ComposeResult:
        """Header, GPU table, container table, alerts and checks, footer."""
        yield Static(self._title(), id="host-header")
        with Vertical():
            yield Static("GPUs", classes="section")
            gpus: DataTable[Text] = DataTable(id="host-gpus", cursor_type="row")
            yield gpus
            yield Static("Containers", classes="section")
            containers: DataTable[Text] = DataTable(id="host-containers", cursor_type="row")
            yield containers
            yield Static("", id="host-problems")
        yield Footer()

    def _title(self) -> Text:
        r = self.row
        kind = "gputui export" if r.kind is Kind.GPUTUI else "dcgm-exporter (no containers)"
        return Text.assemble(
            (r.host, "bold"),
            f"  {r.instance}  job {r.job}  {kind}  ",
            (cells(r)[1], "bold red" if r.down else "green"),
            f"  {r.gpus} GPUs  util {units.pct(r.util_pct)}  ",
            f"memory {memory(r.mem_used_mib, r.mem_total_mib)}  {units.watts(r.power_w)}",
        )

    def on_mount(self) -> None:
        """Add the columns."""
        gpus = self.query_one("#host-gpus", DataTable)
        for name in ("GPU", "MODEL", "UTIL", "UTIL 10m", "MEMORY", "MEM 10m", "POWER", "TEMP"):
            gpus.add_column(name, key=name)
        containers = self.query_one("#host-containers", DataTable)
        self._container_columns(containers, pods=False)
        containers.focus()
        self._ready = True
        if self._pending != (None, None):
            self.apply(*self._pending)

    def _container_columns(self, table: DataTable[Text], pods: bool) -> None:
        """The container table's columns; POD (``namespace/pod``) only when a row has one.

        As the monitor's COMPOSE/POD column: a host without Kubernetes pods spends no width on it.
        """
        table.clear(columns=True)
        self._pod_column = pods
        for name in CONTAINER_COLUMNS:
            if name != "POD" or pods:
                table.add_column(name, key=name)

    def apply(self, row: HostRow | None, detail: HostDetail | None) -> None:
        """Show the host's latest figures (its row from the table, its drill-down)."""
        if not self._ready:  # landed before the columns exist: on_mount shows it
            self._pending = (row or self._pending[0], detail or self._pending[1])
            return
        if row is not None:
            self.row = row
            self.query_one("#host-header", Static).update(self._title())
        if detail is None:
            return
        self.detail = detail
        gpus = self.query_one("#host-gpus", DataTable)
        gpus.clear()
        for g in detail.gpus:
            top = max(g.mem_total_mib or 0.0, max(g.mem_history, default=0.0), 1.0)
            temp = None if g.temp_c is None else round(g.temp_c)
            gpus.add_row(
                Text(g.gpu),
                Text(g.model, no_wrap=True, overflow="ellipsis"),
                Text(units.pct(g.util_pct)),
                Text(units.spark(g.util_history, SPARK_WIDTH, 0.0, 100.0), style="cyan"),
                Text(memory(g.mem_used_mib, g.mem_total_mib)),
                Text(units.spark(g.mem_history, SPARK_WIDTH, 0.0, top), style="magenta"),
                Text(units.watts(g.power_w)),
                Text(units.temp(temp)),
            )
        containers = self.query_one("#host-containers", DataTable)
        pods = any(c.pod for c in detail.containers)
        if pods != self._pod_column:
            self._container_columns(containers, pods)
        containers.clear()
        if self.row.kind is Kind.DCGM:
            containers.add_row(Text("dcgm-exporter's series name no containers", style="dim"))
        for c in detail.containers:
            top = max(max(c.memory_history, default=0.0), c.memory_bytes, 1.0)
            pod = [Text(c.pod_shown or "-", no_wrap=True, overflow="ellipsis")] if pods else []
            containers.add_row(
                Text(c.name, no_wrap=True, overflow="ellipsis"),
                *pod,
                Text(c.image, no_wrap=True, overflow="ellipsis"),
                Text(",".join(c.gpus) or "-"),
                Text(units.size(c.memory_bytes)),
                Text(units.pct(c.sm_util)),
                Text(units.spark(c.memory_history, SPARK_WIDTH, 0.0, top), style="magenta"),
                Text("idle reservation", style="yellow") if c.idle_reservation else Text(""),
            )
        lines = Text()
        for alert in detail.alerts:
            lines.append("alert firing  ", "bold red")
            lines.append(alert + "\n")
        for check, status in detail.checks:
            lines.append(f"check {status:<4}    ", "red" if status == "fail" else "yellow")
            lines.append(check + "\n")
        if not lines:
            lines.append("no firing alerts, no failing checks", "green")
        self.query_one("#host-problems", Static).update(lines)

    def action_back(self) -> None:
        """Escape: back to the host table."""
        app = self.app
        if isinstance(app, FleetApp):
            app.close_host()

    def action_refresh(self) -> None:
        """``r``: refresh now."""
        app = self.app
        if isinstance(app, FleetApp):
            app.wake()


class FleetApp(CrashSafeApp):
    """The fleet view: a host table refreshed every ``interval`` seconds, a drill-down per host."""

    TITLE = "gputui fleet"
    CSS = CSS
    SCREENS = {"fleet-help": FleetHelp}

    def __init__(self, source: FleetSource, options: FleetOptions, interval: float = 5.0) -> None:
        super().__init__()
        self.source = source
        self.options = options
        self.interval = max(interval, 0.5)
        self.fleet = FleetScreen(options.sort)
        self.host_screen: HostScreen | None = None
        self._open: HostRow | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        #: Refreshes applied (tests wait on it).
        self.refreshes = 0

    def on_mount(self) -> None:
        """Show the host table and start the refresh loop."""
        self.push_screen(self.fleet)
        self._refresh_loop()

    def on_unmount(self) -> None:
        """Stop the refresh loop, and the queries in flight: quitting never waits for one."""
        self._stop.set()
        self._wake.set()
        # The loop's thread is joined when the event loop closes; cancelling its queries is
        # what lets it return now, whatever the server does.
        self.source.close()

    def wake(self) -> None:
        """Refresh now (``r``), instead of at the next interval."""
        self._wake.set()

    def open_host(self, row: HostRow) -> None:
        """Drill down into ``row``: its screen opens now, its figures come with the next refresh."""
        if self.host_screen is not None:
            return
        self._open = row
        self.host_screen = HostScreen(row)
        self.push_screen(self.host_screen)
        self._wake.set()

    def close_host(self) -> None:
        """Back to the host table."""
        self._open = None
        if self.host_screen is not None:
            self.host_screen = None
            self.pop_screen()

    @work(thread=True, exclusive=True, group="fleet-refresh")
    def _refresh_loop(self) -> None:
        # One loop on one thread: a refresh never overlaps the previous one, however slow
        # Prometheus is (each query has the client's deadline).
        while not self._stop.is_set():
            started = time.monotonic()
            refreshed = self._refresh_once()
            if self._stop.is_set():
                return
            try:
                self.call_from_thread(self._apply, refreshed)
            except RuntimeError:  # the app is closing
                return
            self._wake.wait(max(0.0, self.interval - (time.monotonic() - started)))
            self._wake.clear()

    def _refresh_once(self) -> _Refreshed:
        try:
            snapshot = self.source.snapshot()
        except FleetError as exc:
            return _Refreshed(None, str(exc))
        opened = self._open
        if opened is None:
            return _Refreshed(snapshot, None)
        try:
            detail = self.source.detail(opened)
        except FleetError as exc:
            return _Refreshed(snapshot, str(exc))
        return _Refreshed(snapshot, None, detail, opened.key)

    def _apply(self, refreshed: _Refreshed) -> None:
        self.fleet.apply(refreshed)
        screen = self.host_screen
        if screen is not None and (
            refreshed.detail_key is None or refreshed.detail_key == screen.row.key
        ):
            row = None
            if refreshed.snapshot is not None:
                row = next((r for r in refreshed.snapshot.hosts if r.key == screen.row.key), None)
            detail = refreshed.detail if refreshed.detail_key == screen.row.key else None
            screen.apply(row, detail)
        self.refreshes += 1


def run_fleet(
    source: FleetSource,
    options: FleetOptions,
    interval: float,
    *,
    secrets: Sequence[str | None] = (),
    headless: bool = False,
) -> int:
    """Run the fleet view until the user quits.

    Args:
        source: Where the answers come from.
        options: The command line.
        interval: Seconds between refreshes.
        secrets: The config file's credentials: never printed, not even by a crash report.
        headless: Run without a terminal (the tests).

    Returns:
        The exit status: 0 after ``q``, 1 after a crash (its report on stderr, without locals
        or secrets).
    """

    def build() -> FleetApp:
        app = FleetApp(source, options, interval)
        app.keep_secret(*secrets)
        return app

    return run_app(build, headless=headless)
