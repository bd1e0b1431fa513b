"""The Ledger tab: who used the GPUs over today, 7 or 30 days, grouped as ``gputui ledger``.

One row per group (owner, container, compose project, image or GPU: ``b`` cycles them) over a
window (``t`` cycles today / 7 d / 30 d, ``c`` types any other: ``3d``, ``2026-11-01``):
reserved, busy and wasted GPU-hours, efficiency, GiB-hours, kWh, cost when priced, and a
sparkline of busy GPU-hours per hour (today) or per day. The store is read on a worker thread
(:func:`gputui.ledger.board.read_board`) when the tab is shown, every
:data:`RELOAD_S` while it stays shown, and when the window or grouping changes; never on the UI
thread. Every name passes :func:`gputui.boundary.sanitise.safe_text` here.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import DataTable, Input, Static
from textual.widgets.data_table import ColumnKey

from gputui.boundary import sanitise, timestamps
from gputui.derive import units
from gputui.ledger.board import GROUPS, WINDOWS, Board, read_board, window_start
from gputui.ledger.report import Line
from gputui.model.settings import Prices

#: Seconds between reads while the tab is shown.
RELOAD_S = 30.0
#: (key, header) of the table; the sparkline's header says hourly or daily.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("group", "GROUP"),
    ("reserved", "RESERVED"),
    ("busy", "  BUSY"),
    ("eff", " EFF%"),
    ("waste", " WASTE"),
    ("gib_h", " GiB-h"),
    ("kwh", "   kWh"),
    ("cost", "  COST"),
    ("spark", "BUSY PER DAY"),
)
#: What ``s`` cycles through (biggest first; names A to Z).
SORTS = ("reserved", "busy", "waste", "eff", "gib_h", "kwh", "group")
#: How each sort column reads in F6's list.
SORT_TITLES = {
    "reserved": "reserved GPU-h",
    "busy": "busy GPU-h",
    "waste": "wasted GPU-h",
    "eff": "efficiency",
    "gib_h": "GiB-h",
    "kwh": "kWh",
    "group": "name",
}
#: The sparkline's widest (a 30-day window: a cell a day).
SPARK_CELLS = 30
#: How many characters of a group's name are shown.
_NAME = 32


def _hours(value: float) -> str:
    """GPU-hours: two decimals, or three significant digits under one (a short window)."""
    if 0 < abs(value) < 1:
        return f"{value:.3g}"
    return f"{value:.2f}"


def _sort_value(line: Line, key: str) -> float | str:
    if key == "group":
        return line.key
    if key == "eff":
        return line.efficiency if line.efficiency is not None else -1.0
    return {
        "reserved": line.reserved_h,
        "busy": line.busy_h,
        "waste": line.waste_h,
        "gib_h": line.mem_gib_h,
        "kwh": line.kwh,
    }[key]


def line_cells(line: Line, series: tuple[float, ...], priced: bool) -> tuple[str, ...]:
    """One group's cells: name, hours, efficiency, GiB-h, kWh, cost, sparkline."""
    eff = line.efficiency
    high = max(series, default=0.0)
    return (
        sanitise.safe_text(line.key, _NAME),
        _hours(line.reserved_h).rjust(8),
        _hours(line.busy_h).rjust(6),
        ("-" if eff is None else f"{100 * eff:.0f}").rjust(5),
        _hours(line.waste_h).rjust(6),
        _hours(line.mem_gib_h).rjust(6),
        f"{line.kwh:.2f}".rjust(6),
        (f"{line.cost:.2f}" if priced and line.cost is not None else "-").rjust(6),
        # A cell per slot (7 for a week), at most SPARK_CELLS; each group on its own scale.
        units.spark(series, min(len(series), SPARK_CELLS), 0.0, high) if high > 0 else "",
    )


class LedgerTable(DataTable[str]):
    """One row per group; vi keys as in the other tables."""

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("g", "scroll_top", "First", show=False),
        Binding("G", "scroll_bottom", "Last", show=False),
    ]


class LedgerView(Vertical):
    """The store's window, grouped; reloaded off the UI thread.

    Args:
        store: The store's path (called on the read's worker thread as each read starts: the
            config may name it; the demo makes its store there).
        prices: The config's prices.
        clock: The wall clock (tests move it; the demo's is its snapshots' time).
        label: What the status line says of the store instead of its path (the demo's).
    """

    BINDINGS = [
        Binding("b", "cycle_by", "By", tooltip="Group by owner, container, project, image, GPU"),
        Binding("t", "cycle_window", "Window", tooltip="Today, 7 days, 30 days"),
        Binding("c", "custom_window", "Custom", tooltip="Type a window: 3d, 12h, 2026-11-01"),
        Binding("escape", "close_prompt", "Cancel", show=False),
    ]

    DEFAULT_CSS = """
    LedgerView #ledger-status { height: auto; padding: 0 1; }
    LedgerView #ledger-window { display: none; height: 3; margin: 0 1; }
    LedgerView #ledger-window.-shown { display: block; }
    LedgerView #ledger-table { height: 1fr; min-height: 3; }
    """

    def __init__(
        self,
        store: Callable[[], Path],
        prices: Prices,
        *,
        clock: Callable[[], float] = time.time,
        label: str | None = None,
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self._store = store
        self._label = label
        self._path: Path | None = None
        self._prices = prices
        self._clock = clock
        self.status = Static("", id="ledger-status")
        self.window_input = Input(
            placeholder="window: 3d, 12h, today, 2026-11-01", id="ledger-window"
        )
        self.table = LedgerTable(cursor_type="row", id="ledger-table")
        self.by = GROUPS[0]
        self.window = WINDOWS[1]
        self.sort_index = 0
        self.sort_reverse = False
        self.board: Board | None = None
        self.loading = False
        self._loaded_at = -RELOAD_S
        self._error: str | None = None

    def compose(self) -> ComposeResult:
        """Status line, the window prompt (hidden), the table."""
        yield self.status
        yield self.window_input
        yield self.table

    def on_mount(self) -> None:
        """Columns once, and a first status line until the first read lands."""
        for key, header in COLUMNS:
            self.table.add_column(header, key=key)
        self._show_status()

    # -- reading --------------------------------------------------------------------------

    def tick(self) -> None:
        """Called while the tab is shown (each refresh): read again when due."""
        if not self.loading and time.monotonic() - self._loaded_at >= RELOAD_S:
            self.reload()

    def reload(self) -> None:
        """Read the window again on a worker thread (the one read in flight wins)."""
        self.loading = True
        self._loaded_at = time.monotonic()
        self._show_status()
        by, window, prices, now = self.by, self.window, self._prices, self._clock()

        def work() -> None:
            path = self._store()
            self._path = path
            try:
                board: Board | str = read_board(path, by, window, prices, now)
            except ValueError as exc:
                board = str(exc)
            with contextlib.suppress(RuntimeError):  # the app is closing
                self.app.call_from_thread(self._landed, board)

        self.run_worker(work, thread=True, exclusive=True, group="ledger", exit_on_error=False)

    def _landed(self, board: Board | str) -> None:
        self.loading = False
        if isinstance(board, str):
            self._error = board
        else:
            self._error = None
            if (board.by, board.window) == (self.by, self.window):
                self.board = board
        self._rebuild()

    # -- keys -----------------------------------------------------------------------------

    def action_cycle_by(self) -> None:
        """Group by the next of owner, container, project, image, GPU."""
        self.by = GROUPS[(GROUPS.index(self.by) + 1) % len(GROUPS)]
        self.reload()

    def action_cycle_window(self) -> None:
        """The next of today, 7 days, 30 days (from a custom window: today)."""
        index = WINDOWS.index(self.window) + 1 if self.window in WINDOWS else 0
        self.window = WINDOWS[index % len(WINDOWS)]
        self.reload()

    def action_custom_window(self) -> None:
        """Type a window (``3d``, ``12h``, ``today``, a date); Enter reads it, Escape cancels."""
        self.window_input.value = "" if self.window in WINDOWS else self.window
        self.window_input.add_class("-shown")
        self.window_input.focus()

    @on(Input.Submitted, "#ledger-window")
    def _window_typed(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text:
            self._close_prompt()
            return
        try:
            window_start(text, self._clock())
        except ValueError as exc:
            self._error = str(exc).replace("--since: ", "window: ")
            self._show_status()
            return
        self.window = text
        self._close_prompt()
        self.reload()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Escape is the prompt's only while it is shown (elsewhere it is the screen's)."""
        if action == "close_prompt":
            return self.window_input.has_class("-shown")
        return True

    def action_close_prompt(self) -> None:
        """Escape closes the window prompt without changing the window."""
        self._close_prompt()

    def _close_prompt(self) -> None:
        self.window_input.remove_class("-shown")
        self._error = None
        self.table.focus()
        self._show_status()

    def cycle_sort(self) -> None:
        """Next sort column (biggest first; names A to Z)."""
        self.sort_index = (self.sort_index + 1) % len(SORTS)
        self.sort_reverse = False
        self._rebuild()

    def reverse_sort(self) -> None:
        """The same column, the other way round."""
        self.sort_reverse = not self.sort_reverse
        self._rebuild()

    def sort_choices(self) -> tuple[str, ...]:
        """F6's list: the columns ``s`` cycles through."""
        return tuple(SORT_TITLES[key] for key in SORTS)

    def sort_current(self) -> int:
        """The column sorted by now."""
        return self.sort_index % len(SORTS)

    def sort_by(self, index: int) -> None:
        """Sort by column ``index``, biggest first (names A to Z)."""
        self.sort_index = index % len(SORTS)
        self.sort_reverse = False
        self._rebuild()

    # -- drawing --------------------------------------------------------------------------

    @property
    def sort_key(self) -> str:
        """The column the rows are sorted by."""
        return SORTS[self.sort_index % len(SORTS)]

    def _rebuild(self) -> None:
        board = self.board
        lines = list(board.lines) if board is not None else []
        key = self.sort_key
        # Numbers biggest first, names A to Z; S turns either round.
        lines.sort(key=lambda x: _sort_value(x, key), reverse=(key != "group") != self.sort_reverse)
        priced = self._prices.any
        self.table.clear()
        grouped = board.by if board is not None else self.by
        self.table.columns[ColumnKey("group")].label = Text(grouped.upper())
        spark = "BUSY PER HOUR" if board is not None and board.slot_s == 3600 else "BUSY PER DAY"
        self.table.columns[ColumnKey("spark")].label = Text(spark)
        for line in lines:
            series = board.series.get(line.key, ()) if board is not None else ()
            self.table.add_row(*line_cells(line, series, priced), key=line.key)
        self._show_status()

    def _show_status(self) -> None:
        board = self.board
        parts: list[str | tuple[str, str]] = [("Ledger ", "bold")]
        parts.append(f"{sanitise.safe_text(self.window, 40)} by {self.by}")
        if (
            board is not None
            and board.problem is None
            and (board.by, board.window) == (self.by, self.window)
        ):
            parts += [
                ("  ·  ", "$text-muted"),
                f"{timestamps.utc(board.since)} .. now, covered {100 * board.covered:.0f} %",
            ]
            if board.gaps:
                n = len(board.gaps)
                parts.append((f", {n} gap{'' if n == 1 else 's'}", "$text-warning"))
        if self.loading:
            parts.append(("  ·  reading…", "$text-muted"))
        parts.append(("   (b: by  t: window  c: custom  s/S: sort)", "$text-muted"))
        lines: list[Content] = [Content.assemble(*parts)]
        path = self._label or sanitise.safe_text(f"store {self._path or self._store()}", 126)
        if self._error is not None:
            lines.append(Content.styled(sanitise.safe_text(self._error, 200), "bold $text-error"))
        if board is not None and board.problem is not None:
            lines.append(Content.styled(sanitise.safe_text(board.problem, 200), "$text-warning"))
            lines.append(
                Content.styled(
                    "A monitor, `gputui export` or `gputui record` writes the ledger while it runs "
                    "on a live host; `gputui daemon` keeps it when none does (docs/ledger.md).",
                    "$text-muted",
                )
            )
        elif board is not None:
            # The demo's store is its own: who writes it says nothing.
            said = path if self._label else f"{path}: {sanitise.safe_text(board.status, 80)}"
            lines.append(Content.styled(said, "$text-muted"))
            if not board.lines:
                lines.append(Content.styled("Nothing recorded in this window.", "$text-muted"))
            else:
                lines.append(
                    Content.styled(
                        "busy, waste, kWh and cost are estimates (kernel time, energy split)",
                        "$text-muted",
                    )
                )
        self.status.update(Content("\n").join(lines))
