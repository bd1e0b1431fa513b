"""The Processes tab: every GPU process in a sortable, filterable, keyed DataTable.

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
from textual.widgets import DataTable
from textual.widgets.data_table import RowKey

from gputui.derive import fmt
from gputui.derive.tree import process_key
from gputui.model import ContainerUsage, GpuProcess, Snapshot
from gputui.ui.styles import EMPH, ERROR, MUTED, themed
from gputui.ui.textual_compat import cells_written, write_row_cells
from gputui.ui.widgets.tree_labels import HIDDEN_TEXT

#: (column key, header, width) in display order.
COLUMNS: tuple[tuple[str, str, int | None], ...] = (
    ("pid", "PID", 7),
    ("container", "CONTAINER", 14),
    ("gpu", "GPU", 3),
    ("mem", "GPU MEM", 9),
    ("sm", "SM%", 4),
    ("cpu", "CPU%", 5),
    ("user", "USER", 8),
    ("command", "COMMAND", None),
    ("cpid", "CPID", 6),
    ("rss", "RSS", 8),
)

#: Sort orders ``s`` cycles through: (column key, label, descending).
SORTS: tuple[tuple[str, str, bool], ...] = (
    ("mem", "GPU mem", True),
    ("sm", "SM %", True),
    ("cpu", "CPU %", True),
    ("pid", "PID", False),
    ("container", "container", False),
)


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


def row_inputs(process: GpuProcess, container: str) -> tuple[object, ...]:
    """The raw values behind each cell, one entry per column of :data:`COLUMNS`, in order.

    Equal entries mean equal cells, so a refresh builds only the cells whose values moved.
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
        (info.exists, info.proc_hidden, info.command, info.name),
        info.container_pid,
        info.rss_bytes,
    )


def _command(process: GpuProcess, container: str) -> Cell:
    info = process.info
    if not info.exists:
        return _txt("<PID not found: unfindable GPU memory>", ERROR)
    if info.proc_hidden:
        return _txt(HIDDEN_TEXT, MUTED)
    return _txt(fmt.safe_text(info.command or info.name, 80, na="?"))


def _user(process: GpuProcess, container: str) -> Cell:
    # A process hidden by hidepid has no readable owner; the command column says why.
    return _txt(fmt.safe_text(process.info.user, 16, na="" if process.info.proc_hidden else "?"))


def _cpid(process: GpuProcess, container: str) -> Cell:
    cpid = process.info.container_pid
    return _num(cpid, "" if cpid is None else str(cpid))


#: One builder per column key: a moved value rebuilds its own cell only.
CELL_BUILDERS: dict[str, Callable[[GpuProcess, str], Cell]] = {
    "pid": lambda p, c: _num(p.pid, str(p.pid), EMPH),
    "container": lambda p, c: _txt(c, "" if p.info.exists else ERROR),
    "gpu": lambda p, c: _num(p.sample.gpu_index, str(p.sample.gpu_index)),
    "mem": lambda p, c: _num(p.sample.used_memory_bytes, fmt.mib(p.sample.used_memory_bytes), EMPH),
    "sm": lambda p, c: _num(p.sample.sm_util, fmt.pct(p.sample.sm_util)),
    "cpu": lambda p, c: _num(p.info.cpu_percent, fmt.pct(p.info.cpu_percent)),
    "user": _user,
    "command": _command,
    "cpid": _cpid,
    "rss": lambda p, c: _num(p.info.rss_bytes, fmt.size(p.info.rss_bytes)),
}


def row_cells(process: GpuProcess, container: str) -> dict[str, Cell]:
    """The cells of one process row, by column key.

    Args:
        process: The process.
        container: Its container's display name (already made safe).

    Returns:
        One :class:`Cell` per column of :data:`COLUMNS`.
    """
    return {column: CELL_BUILDERS[column](process, container) for column, _, _ in COLUMNS}


def matches(process: GpuProcess, container: str, needle: str) -> bool:
    """True when the filter text occurs in the command, container, user or PID (case-blind)."""
    if not needle:
        return True
    needle = needle.lower()
    info = process.info
    haystack = (info.command or info.name or "", container, info.user or "", str(process.pid))
    return any(needle in field.lower() for field in haystack)


class ProcessTable(DataTable[Cell]):
    """Flat list of GPU processes; ``sync`` applies one snapshot incrementally."""

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("g", "scroll_top", "First", show=False),
        Binding("G", "scroll_bottom", "Last", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.sort_index = 0
        self.filter_text = ""
        self._cells: dict[str, dict[str, Cell]] = {}
        self._inputs: dict[str, tuple[object, ...]] = {}
        self.processes: dict[str, GpuProcess] = {}

    def on_mount(self) -> None:
        """Create the columns once; their keys are the column names."""
        for key, header, width in COLUMNS:
            self.add_column(header, key=key, width=width)

    @property
    def sort_label(self) -> str:
        """The active sort, e.g. ``GPU mem ↓``."""
        _, label, descending = SORTS[self.sort_index]
        return f"{label} {'↓' if descending else '↑'}"

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
        """Move to the next sort order and re-sort now."""
        self.sort_index = (self.sort_index + 1) % len(SORTS)
        self._sort()

    def _sort(self) -> None:
        column, _, descending = SORTS[self.sort_index]
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
            inputs = row_inputs(process, name)
            before = self._inputs.get(key)
            if before == inputs:
                continue
            self._inputs[key] = inputs
            if before is None:
                cells = self._cells[key] = row_cells(process, name)
                self.add_row(*(cells[c] for c, _, _ in COLUMNS), key=key)
                changed = True
                continue
            moved = {
                column: CELL_BUILDERS[column](process, name)
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
