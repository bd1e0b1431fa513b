"""The Processes tab: every GPU process in a sortable, filterable, keyed DataTable.

Fixed-width columns first and the variable-width COMMAND last, so everything else stays on
screen; PID stays put while the table scrolls sideways. The sort column's header carries ▼ / ▲;
``s`` picks the next column, ``S`` reverses it; Home / End go to the first / last row.

Rows are keyed by ``"<pid>:<gpu index>"``. A refresh removes stale keys, calls ``update_cell``
only for cells whose value changed, adds new rows and sorts once: ``remove_row`` and
``clear()`` + ``add_rows`` re-layout the whole table, which dominates refresh cost on big hosts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.text import Text
from textual.binding import Binding
from textual.content import Content
from textual.widgets import DataTable, Static
from textual.widgets.data_table import RowKey

from gputui.derive import fmt
from gputui.derive.tree import process_key
from gputui.model import ContainerUsage, GpuProcess, Snapshot
from gputui.ui.styles import EMPH, ERROR, MUTED, themed
from gputui.ui.textual_compat import cells_written, set_column_label, write_row_cells
from gputui.ui.widgets.tree_labels import HIDDEN_TEXT, elapsed_key, since

#: (column key, header, width) in display order; widths leave room for the sort arrow.
COLUMNS: tuple[tuple[str, str, int | None], ...] = (
    ("pid", "PID", 7),
    ("container", "CONTAINER", 14),
    ("gpu", "GPU", 5),
    ("mem", "GPU MEM", 10),
    ("sm", "SM%", 5),
    ("cpu", "CPU%", 6),
    ("user", "USER", 8),
    ("cpid", "CPID", 7),
    ("rss", "RSS", 9),
    ("elapsed", "ELAPSED", 9),
    ("command", "COMMAND", None),
)

#: Columns that stay on screen while the table scrolls sideways (PID).
FIXED_COLUMNS = 1

#: Sort orders ``s`` cycles through: (column key, label, descending).
SORTS: tuple[tuple[str, str, bool], ...] = (
    ("mem", "GPU mem", True),
    ("sm", "SM %", True),
    ("cpu", "CPU %", True),
    ("pid", "PID", False),
    ("container", "container", False),
    ("elapsed", "elapsed", True),
)

#: The header's marks of the sort column: descending, ascending.
DOWN, UP = "▼", "▲"


@dataclass(frozen=True, slots=True)
class Cell:
    """A cell that renders as text but sorts by its raw value (numbers stay numbers)."""

    text: Text
    sort_key: tuple[int, float | str]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        """Render the text, theme-variable styles resolved for the current theme."""
        yield themed(self.text)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        """Measure the text."""
        return Measurement.get(console, options, self.text)


def _num(value: float | None, text: str, style: str = "") -> Cell:
    # None sorts below every number in either direction's "smallest" end: (0, ...) < (1, ...).
    key: tuple[int, float | str] = (0, 0.0) if value is None else (1, float(value))
    return Cell(Text(text, style=style, justify="right", no_wrap=True), key)


def _txt(value: str, style: str = "") -> Cell:
    return Cell(Text(value, style=style, no_wrap=True, overflow="ellipsis"), (1, value.lower()))


def container_name(process: GpuProcess, snapshot: Snapshot) -> str:
    """The display name of a process's container: name, short id, ``-`` for the host."""
    if process.container_id is None:
        return "-" if process.info.exists and not process.info.proc_hidden else "?"
    usage: ContainerUsage | None = snapshot.container(process.container_id)
    if usage is None:
        return process.container_id[:12]
    return fmt.safe_text(usage.info.name, 40)


def _names(snapshot: Snapshot) -> dict[str, str]:
    # container_name looks a container up by a linear scan; with 200 containers and 2,000
    # processes that was 400,000 comparisons a refresh. First entry wins, like Snapshot.container.
    names: dict[str, str] = {}
    for usage in snapshot.containers:
        if usage.info.id not in names:
            names[usage.info.id] = fmt.safe_text(usage.info.name, 40)
    return names


def _name(process: GpuProcess, names: dict[str, str]) -> str:
    """:func:`container_name` from a precomputed id -> name map."""
    if process.container_id is None:
        # Gone, or hidden by hidepid: its cgroup (so its container) cannot be read.
        return "-" if process.info.exists and not process.info.proc_hidden else "?"
    return names.get(process.container_id) or process.container_id[:12]


def row_inputs(process: GpuProcess, container: str, now: float | None = None) -> tuple[object, ...]:
    """The raw values behind each cell, one entry per column of :data:`COLUMNS`, in order.

    Equal entries mean equal cells, so a refresh builds only the cells whose values moved. The
    elapsed time enters as the text it shows: it changes once a minute after the first hour.
    """
    info, sample = process.info, process.sample
    return (
        process.pid,
        (container, info.exists),
        sample.gpu_index,
        sample.used_memory_bytes,
        sample.sm_util,
        info.cpu_percent,
        (info.user, info.proc_hidden),
        info.container_pid,
        info.rss_bytes,
        (info.start_time, elapsed_key(info.start_time, now)),
        (info.exists, info.proc_hidden, info.command, info.name),
    )


def _command(process: GpuProcess, container: str, now: float | None) -> Cell:
    info = process.info
    if not info.exists:
        return _txt("<PID not found: unfindable GPU memory>", ERROR)
    if info.proc_hidden:
        return _txt(HIDDEN_TEXT, MUTED)
    return _txt(fmt.safe_text(info.command or info.name, 80, na="?"))


def _user(process: GpuProcess, container: str, now: float | None) -> Cell:
    # A process hidden by hidepid has no readable owner; the command column says why.
    return _txt(fmt.safe_text(process.info.user, 16, na="" if process.info.proc_hidden else "?"))


def _cpid(process: GpuProcess, container: str, now: float | None) -> Cell:
    cpid = process.info.container_pid
    return _num(cpid, "" if cpid is None else str(cpid))


def _elapsed(process: GpuProcess, container: str, now: float | None) -> Cell:
    # Sorted by start time (earliest = longest running), which does not move between refreshes.
    start = process.info.start_time
    return _num(None if start is None else -start, since(start, now))


#: One builder per column key: a moved value rebuilds its own cell only.
CELL_BUILDERS: dict[str, Callable[[GpuProcess, str, float | None], Cell]] = {
    "pid": lambda p, c, n: _num(p.pid, str(p.pid), EMPH),
    "container": lambda p, c, n: _txt(c, "" if p.info.exists else ERROR),
    "gpu": lambda p, c, n: _num(p.sample.gpu_index, str(p.sample.gpu_index)),
    "mem": lambda p, c, n: _num(
        p.sample.used_memory_bytes, fmt.mib(p.sample.used_memory_bytes), EMPH
    ),
    "sm": lambda p, c, n: _num(p.sample.sm_util, fmt.pct(p.sample.sm_util)),
    "cpu": lambda p, c, n: _num(p.info.cpu_percent, fmt.pct(p.info.cpu_percent)),
    "user": _user,
    "cpid": _cpid,
    # MiB like GPU MEM: one unit for every row of a column.
    "rss": lambda p, c, n: _num(p.info.rss_bytes, fmt.mib(p.info.rss_bytes)),
    "elapsed": _elapsed,
    "command": _command,
}


def row_cells(process: GpuProcess, container: str, now: float | None = None) -> dict[str, Cell]:
    """The cells of one process row, by column key.

    Args:
        process: The process.
        container: Its container's display name (already made safe).
        now: The snapshot's time (the elapsed column).

    Returns:
        One :class:`Cell` per column of :data:`COLUMNS`.
    """
    return {column: CELL_BUILDERS[column](process, container, now) for column, _, _ in COLUMNS}


def matches(process: GpuProcess, container: str, needle: str) -> bool:
    """True when the filter text occurs in the command, container, user or PID (case-blind)."""
    if not needle:
        return True
    needle = needle.lower()
    info = process.info
    haystack = (info.command or info.name or "", container, info.user or "", str(process.pid))
    return any(needle in field.lower() for field in haystack)


class EmptyNote(Static):
    """Why a tree or table has no row (from :mod:`gputui.ui.empty_states`); hidden otherwise."""

    DEFAULT_CSS = """
    EmptyNote { height: auto; padding: 0 1; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id)
        self.display = False
        self._shown: Content | None = None

    def show(self, text: Content | None) -> None:
        """Show ``text`` (None hides the note); an unchanged text is not redrawn."""
        if text is None:
            if self.display:
                self.display = False
            return
        if text != self._shown:
            self._shown = text
            self.update(text)
        if not self.display:
            self.display = True

    @property
    def text(self) -> str:
        """The note's plain text while shown, else empty."""
        return self._shown.plain if self.display and self._shown is not None else ""


class ProcessTable(DataTable[Cell]):
    """Flat list of GPU processes; ``sync`` applies one snapshot incrementally."""

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("g", "scroll_top", "First", show=False),
        Binding("G", "scroll_bottom", "Last", show=False),
        # A row cursor: Home / End go to the first / last row (DataTable scrolls sideways).
        Binding("home", "scroll_top", "First", show=False),
        Binding("end", "scroll_bottom", "Last", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True, fixed_columns=FIXED_COLUMNS)
        self.sort_index = 0
        self.reverse = False
        self.filter_text = ""
        self._cells: dict[str, dict[str, Cell]] = {}
        self._inputs: dict[str, tuple[object, ...]] = {}
        self.processes: dict[str, GpuProcess] = {}

    def on_mount(self) -> None:
        """Create the columns once; their keys are the column names."""
        for key, header, width in COLUMNS:
            self.add_column(self._header(key, header), key=key, width=width)

    @property
    def descending(self) -> bool:
        """The active sort's direction (its natural one unless reversed with ``S``)."""
        return SORTS[self.sort_index][2] != self.reverse

    @property
    def sort_label(self) -> str:
        """The active sort, e.g. ``GPU mem ▼`` (``▲``: ascending)."""
        return f"{SORTS[self.sort_index][1]} {DOWN if self.descending else UP}"

    def _header(self, key: str, title: str) -> Text:
        if key != SORTS[self.sort_index][0]:
            return Text(title)
        return Text(f"{title} {DOWN if self.descending else UP}", style="bold")

    def _mark_sort_column(self, previous: str) -> None:
        titles = {key: title for key, title, _ in COLUMNS}
        for key in {previous, SORTS[self.sort_index][0]}:
            set_column_label(self, key, self._header(key, titles[key]))

    def header_labels(self) -> list[str]:
        """The column headers as shown, in order (for tests)."""
        return [column.label.plain for column in self.ordered_columns]

    @property
    def selected(self) -> GpuProcess | None:
        """The process under the cursor, if any."""
        if not self.row_count or self.cursor_row < 0:
            return None
        try:
            key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        except Exception:
            return None
        return self.processes.get(str(key.value))

    def cycle_sort(self) -> None:
        """Move to the next sort order (in its natural direction) and re-sort now."""
        previous = SORTS[self.sort_index][0]
        self.sort_index = (self.sort_index + 1) % len(SORTS)
        self.reverse = False
        self._mark_sort_column(previous)
        self._sort()

    def reverse_sort(self) -> None:
        """Sort the same column the other way round."""
        self.reverse = not self.reverse
        self._mark_sort_column(SORTS[self.sort_index][0])
        self._sort()

    def _sort(self) -> None:
        column = SORTS[self.sort_index][0]
        descending = self.descending
        selected = self.selected
        # Ties (same memory, same container) fall back to PID then GPU so the order is stable.
        self.sort(
            column,
            "pid",
            "gpu",
            key=lambda cells: tuple(cell.sort_key for cell in cells),
            reverse=descending,
        )
        self._restore_cursor(selected)

    def _restore_cursor(self, process: GpuProcess | None) -> None:
        if process is None:
            return
        key = process_key(process)
        if key in self._cells:
            row = self.get_row_index(key)
            if row != self.cursor_row:
                self.move_cursor(row=row, animate=False)

    def sync(self, snapshot: Snapshot) -> None:
        """Apply one snapshot: remove stale rows, update changed cells, add new rows, sort once.

        Rows whose raw values are unchanged cost one tuple comparison: no cells are built.

        Args:
            snapshot: The refresh to show (rows filtered by :attr:`filter_text`).
        """
        selected = self.selected
        now = snapshot.taken_at
        names = _names(snapshot)
        wanted: dict[str, tuple[GpuProcess, str]] = {}
        for process in snapshot.processes:
            name = _name(process, names)
            if matches(process, name, self.filter_text):
                wanted[process_key(process)] = (process, name)
        stale = [key for key in self._cells if key not in wanted]
        if len(stale) > len(self._cells) // 2 and len(stale) > 8:
            # Mass removal: one clear() is cheaper than k re-indexing remove_row calls.
            self.clear()
            self._cells.clear()
            self._inputs.clear()
        else:
            for key in stale:
                self.remove_row(key)
                del self._cells[key]
                self._inputs.pop(key, None)
        changed = bool(stale)
        updated = False
        sort_column = SORTS[self.sort_index][0]
        for key, (process, name) in wanted.items():
            inputs = row_inputs(process, name, now)
            before = self._inputs.get(key)
            if before == inputs:
                continue
            self._inputs[key] = inputs
            if before is None:
                cells = self._cells[key] = row_cells(process, name, now)
                self.add_row(*(cells[c] for c, _, _ in COLUMNS), key=key)
                changed = True
                continue
            moved = {
                column: CELL_BUILDERS[column](process, name, now)
                for (column, _, _), old, new in zip(COLUMNS, before, inputs, strict=True)
                if old != new
            }
            if moved:
                self._cells[key].update(moved)
                self.write_cells(key, moved)
                updated = True
                changed |= not moved.keys().isdisjoint(("pid", "gpu", sort_column))
        self.processes = {key: process for key, (process, _) in wanted.items()}
        if updated:
            cells_written(self)
        if changed:
            self._sort()
        else:
            self._restore_cursor(selected)

    def write_cells(self, key: str, cells: dict[str, Cell]) -> None:
        """Put new cells into one row without repainting (:meth:`sync` refreshes once after)."""
        write_row_cells(self, key, cells)

    def row_keys(self) -> Sequence[str]:
        """Row keys in display order (for tests)."""
        return [str(row.key.value) for row in self.ordered_rows]

    def key_of(self, row: RowKey) -> str:
        """The string key of a row key."""
        return str(row.value)
