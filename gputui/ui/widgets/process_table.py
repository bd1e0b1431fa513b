"""The Processes tab: every GPU process in a sortable, filterable, virtualised table.

Fixed-width columns first and the variable-width COMMAND last, so everything else stays on
screen; PID stays put while the table scrolls sideways. The sort column's header carries ▼ / ▲;
``s`` picks the next column, ``S`` reverses it; Home / End go to the first / last row. The
columns, their order and the sort orders come from the per-process field table
(:data:`gputui.model.process_fields.PROCESS_FIELDS`); this module adds the styled cells of its own
columns, and a column it has no builder for is drawn from the field's text.

Rows are keyed by ``"<pid>:<gpu index>"`` and kept as the raw values behind their cells
(:func:`row_inputs`). Only the lines on screen are drawn: a row's cells are built when it is
first drawn after its values moved (only the moved columns), and its drawn line is cached by
those values. A refresh re-sorts only when a sort value or the set of rows changed, and repaints
only the visible lines whose values moved. At 2,000 processes a refresh whose values all move
builds the ~40 lines on screen, not 22,000 cells.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.content import Content
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Static

from gputui.boundary import sanitise
from gputui.derive import units
from gputui.derive.tree import process_key
from gputui.model.mig import mig_device_name
from gputui.model.process_fields import (
    PROCESS_FIELDS,
    ProcessColumn,
    ProcessField,
    SortValue,
    gpu_order,
    sort_orders,
)
from gputui.model.process_fields import columns as field_columns
from gputui.model.processes import GpuProcess
from gputui.model.records import record
from gputui.model.snapshot import ContainerUsage, Snapshot
from gputui.ui.filters import parse_filter
from gputui.ui.messages import SelectionChanged
from gputui.ui.styles import EMPH, ERROR, MUTED, themed
from gputui.ui.widgets.tree_labels import HIDDEN_TEXT, SIDE_STEP, elapsed_key, since

#: (column key, header, width) in display order; widths leave room for the sort arrow.
Layout = tuple[tuple[str, str, int | None], ...]


def layout_of(fields: Sequence[ProcessField] = PROCESS_FIELDS) -> Layout:
    """(column key, header, width) of every column of a field table, in display order."""
    return tuple((c.key, c.header, c.width) for c in field_columns(fields))


#: The columns of :data:`~gputui.model.process_fields.PROCESS_FIELDS`.
COLUMNS: Layout = layout_of()

#: The columns a narrow table leaves out, first to last, so COMMAND keeps :data:`MIN_COMMAND`
#: cells (as nvitop gives the command what is left).
#: CPU % is never among them: with GPU memory and SM % it is what the table is read for (htop
#: and nvitop keep it at 80 columns too).
DROPPED_FIRST: tuple[str, ...] = ("cpid", "rss", "user", "elapsed")
#: Cells COMMAND keeps on screen as long as leaving columns out can give them.
MIN_COMMAND = 20


def fit_columns(width: int, layout: Layout = COLUMNS) -> tuple[int, ...]:
    """The widths of the columns before COMMAND for a table ``width`` cells wide (0: left out).

    Args:
        width: The table's width (0 before it has one: every column).
        layout: The table's columns.

    Returns:
        One width per column of ``layout`` but the last.
    """
    widths = {key: (w or len(title)) for key, title, w in layout[:-1]}
    if width <= 0:
        return tuple(widths.values())

    def left() -> int:
        return width - sum(w + 2 * PAD for w in widths.values() if w) - 2 * PAD

    for key in DROPPED_FIRST:
        if left() >= MIN_COMMAND:
            break
        if key in widths:
            widths[key] = 0
    return tuple(widths.values())


#: Columns that stay on screen while the table scrolls sideways (PID).
FIXED_COLUMNS = 1

#: Sort orders ``s`` cycles through: (column key, label, descending).
Sorts = tuple[tuple[str, str, bool], ...]


def sorts_of(fields: Sequence[ProcessField] = PROCESS_FIELDS) -> Sorts:
    """The sort orders of a field table: (column key, label, descending), in the cycle's order."""
    return tuple((c.key, order.label, order.descending) for c, order in sort_orders(fields))


#: The sort orders of :data:`~gputui.model.process_fields.PROCESS_FIELDS`.
SORTS: Sorts = sorts_of()

#: The header's marks of the sort column: descending, ascending.
DOWN, UP = "▼", "▲"


@record
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
    return sanitise.safe_text(usage.info.name, 40)


def _names(snapshot: Snapshot) -> dict[str, str]:
    # container_name looks a container up by a linear scan; with 200 containers and 2,000
    # processes that was 400,000 comparisons a refresh. First entry wins, like Snapshot.container.
    names: dict[str, str] = {}
    for usage in snapshot.containers:
        if usage.info.id not in names:
            names[usage.info.id] = sanitise.safe_text(usage.info.name, 40)
    return names


def _name(process: GpuProcess, names: dict[str, str]) -> str:
    """:func:`container_name` from a precomputed id -> name map."""
    if process.container_id is None:
        # Gone, or hidden by hidepid: its cgroup (so its container) cannot be read.
        return "-" if process.info.exists and not process.info.proc_hidden else "?"
    return names.get(process.container_id) or process.container_id[:12]


#: The raw values behind the cells of this module's own columns, by column key. Equal values
#: mean equal cells. The elapsed time enters as the text it shows: it changes once a minute
#: after the first hour.
ROW_INPUTS: dict[str, Callable[[GpuProcess, str, float | None], object]] = {
    "pid": lambda p, c, n: p.pid,
    "container": lambda p, c, n: (c, p.info.exists),
    "gpu": lambda p, c, n: (p.sample.gpu_index, p.sample.mig_index),
    "mem": lambda p, c, n: p.sample.used_memory_bytes,
    "sm": lambda p, c, n: p.sample.sm_util,
    "cpu": lambda p, c, n: p.info.cpu_percent,
    "user": lambda p, c, n: (p.info.user, p.info.proc_hidden),
    "cpid": lambda p, c, n: p.info.container_pid,
    "rss": lambda p, c, n: p.info.rss_bytes,
    "elapsed": lambda p, c, n: (p.info.start_time, elapsed_key(p.info.start_time, n)),
    "command": lambda p, c, n: (
        p.info.exists,
        p.info.proc_hidden,
        p.info.command,
        p.info.name,
        p.sample.mps,
    ),
}


#: Before a tagged process's PID (Space), as the container tree marks its line.
TAG_MARK = "*"

#: The COMMAND cell's mark of an MPS client (nvidia-smi's ``M+C``), as the container tree says it.
MPS_MARK = "[MPS client]"


def gpu_text(process: GpuProcess) -> str:
    """The GPU column: the GPU index, or the MIG device (``3:0``) the process runs on."""
    sample = process.sample
    if sample.mig_index is None:
        return str(sample.gpu_index)
    return mig_device_name(sample.gpu_index, sample.mig_index)


#: The COMMAND text of a process whose PID is gone.
GONE_TEXT = "<PID not found: unfindable GPU memory>"


def _command_text(process: GpuProcess) -> str:
    info = process.info
    if not info.exists:
        text = GONE_TEXT
    elif info.proc_hidden:
        text = HIDDEN_TEXT
    else:
        text = sanitise.safe_text(info.command or info.name, 80, na="?")
    return f"{MPS_MARK} {text}" if process.sample.mps else text


def _command(process: GpuProcess, container: str, now: float | None) -> Cell:
    info = process.info
    if not info.exists:
        cell = _txt(GONE_TEXT, ERROR)
    elif info.proc_hidden:
        cell = _txt(HIDDEN_TEXT, MUTED)
    else:
        cell = _txt(sanitise.safe_text(info.command or info.name, 80, na="?"))
    if not process.sample.mps:
        return cell
    # An MPS client's SM % may be credited to the MPS server: say so before the command.
    text = Text(f"{MPS_MARK} ", style=MUTED, no_wrap=True, overflow="ellipsis")
    text.append_text(cell.text)
    return Cell(text, cell.sort_key)


def _user(process: GpuProcess, container: str, now: float | None) -> Cell:
    # A process hidden by hidepid has no readable owner; the command column says why.
    return _txt(
        sanitise.safe_text(process.info.user, 16, na="" if process.info.proc_hidden else "?")
    )


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
    "gpu": lambda p, c, n: _num(gpu_order(p), gpu_text(p)),
    "mem": lambda p, c, n: _num(
        p.sample.used_memory_bytes, units.size(p.sample.used_memory_bytes), EMPH
    ),
    "sm": lambda p, c, n: _num(p.sample.sm_util, units.pct(p.sample.sm_util)),
    "cpu": lambda p, c, n: _num(p.info.cpu_percent, units.pct(p.info.cpu_percent)),
    "user": _user,
    "cpid": _cpid,
    "rss": lambda p, c, n: _num(p.info.rss_bytes, units.size(p.info.rss_bytes)),
    "elapsed": _elapsed,
    "command": _command,
}


def _sort_key(value: SortValue) -> tuple[int, float | str]:
    """A raw value as a sort key: a missing value sorts below every number, texts case-blind."""
    if value is None:
        return (0, 0.0)
    if isinstance(value, str):
        return (1, value.lower())
    return (1, float(value))


@record
class Columns:
    """Everything the table draws and sorts by, generated from a per-process field table.

    Attributes:
        fields: The column of each key.
        layout: (key, header, width) per column, in display order.
        index: Each column's position in the layout (and in a row's inputs and cells).
        sorts: The orders ``s`` cycles through.
    """

    fields: Mapping[str, ProcessColumn]
    layout: Layout
    index: Mapping[str, int]
    sorts: Sorts

    @classmethod
    def of(cls, fields: Sequence[ProcessField] = PROCESS_FIELDS) -> Columns:
        """The columns of a field table."""
        found = field_columns(fields)
        layout = tuple((c.key, c.header, c.width) for c in found)
        return cls(
            {c.key: c for c in found},
            layout,
            {key: i for i, (key, _, _) in enumerate(layout)},
            sorts_of(fields),
        )

    def inputs(self, process: GpuProcess, container: str, now: float | None) -> tuple[object, ...]:
        """The raw values behind each cell, one per column, in display order."""
        out: list[object] = []
        for key, _, _ in self.layout:
            own = ROW_INPUTS.get(key)
            if own is not None:
                out.append(own(process, container, now))
            else:
                column = self.fields[key]
                out.append((column.value(process, container), column.cell_text(process, container)))
        return tuple(out)

    def cell(self, key: str, process: GpuProcess, container: str, now: float | None) -> Cell:
        """One cell: this module's styled builder, else the field's text (sanitised)."""
        build = CELL_BUILDERS.get(key)
        if build is not None:
            return build(process, container, now)
        column = self.fields[key]
        value = column.value(process, container)
        text = sanitise.safe_text(column.cell_text(process, container), 80, na="")
        if column.numeric:
            return Cell(Text(text, justify="right", no_wrap=True), _sort_key(value))
        return Cell(Text(text, no_wrap=True, overflow="ellipsis"), _sort_key(value))

    def sort_value(self, key: str, process: GpuProcess, container: str) -> tuple[int, float | str]:
        """The value a row sorts by in column ``key``, from raw values (no cell is built).

        Raises:
            ValueError: No column has that key.
        """
        column = self.fields.get(key)
        if column is None:
            raise ValueError(f"no sort by {key!r}")
        return _sort_key(column.value(process, container))


#: The columns of :data:`~gputui.model.process_fields.PROCESS_FIELDS`.
DEFAULT_COLUMNS = Columns.of()


def row_inputs(process: GpuProcess, container: str, now: float | None = None) -> tuple[object, ...]:
    """The raw values behind each cell, one entry per column of :data:`COLUMNS`, in order.

    Equal entries mean equal cells, so a refresh builds only the cells whose values moved.
    """
    return DEFAULT_COLUMNS.inputs(process, container, now)


def row_cells(process: GpuProcess, container: str, now: float | None = None) -> dict[str, Cell]:
    """The cells of one process row, by column key.

    Args:
        process: The process.
        container: Its container's display name (already made safe).
        now: The snapshot's time (the elapsed column).

    Returns:
        One :class:`Cell` per column of :data:`COLUMNS`.
    """
    return {
        column: DEFAULT_COLUMNS.cell(column, process, container, now) for column, _, _ in COLUMNS
    }


def matches(process: GpuProcess, container: str, needle: str) -> bool:
    """True when the filter's text occurs in the command, container, user, PID or GPU column.

    Case-blind; ``gpu:3`` / ``gpu:0,2`` tokens keep only the processes on those GPUs
    (:func:`gputui.ui.filters.parse_filter`).
    """
    if not needle:
        return True
    query = parse_filter(needle)
    return query.on_gpus(process) and _text_matches(process, container, query.text)


def _text_matches(process: GpuProcess, container: str, text: str) -> bool:
    """The (case-blind) text occurs in the command, container, user, PID or GPU column."""
    if not text:
        return True
    needle = text.lower()
    info = process.info
    haystack = (
        info.command or info.name or "",
        container,
        info.user or "",
        str(process.pid),
        gpu_text(process),
    )
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


def sort_value(column: str, process: GpuProcess, container: str) -> tuple[int, float | str]:
    """The value a row sorts by in ``column``, from raw values (no cell is built).

    The same order as the cells' :attr:`Cell.sort_key`: a missing value sorts below every number.
    """
    return DEFAULT_COLUMNS.sort_value(column, process, container)


#: Index of each column in :data:`COLUMNS` (and in a row's inputs and cells).
COLUMN_INDEX: Mapping[str, int] = DEFAULT_COLUMNS.index

#: Blank cells on either side of every cell (as a DataTable draws them).
PAD = 1

#: The most rows whose drawn lines are kept (a few screens' worth; the rest are rebuilt).
LINE_CACHE_SIZE = 512


class ProcessRow:
    """One process row: its raw values, its cells as last built, its sort value."""

    __slots__ = (
        "built",
        "cells",
        "command",
        "inputs",
        "key",
        "name",
        "now",
        "process",
        "sort",
        "width",
    )

    def __init__(
        self,
        key: str,
        process: GpuProcess,
        name: str,
        inputs: tuple[object, ...],
        now: float | None,
    ) -> None:
        self.key = key
        self.process = process
        self.name = name
        self.inputs = inputs
        #: The snapshot time the inputs were taken with (the elapsed text depends on it).
        self.now = now
        #: The COMMAND input :attr:`width` was measured for, and that width in cells.
        self.command: object = None
        self.width = 0
        #: The inputs :attr:`cells` were built from (None: never built).
        self.built: tuple[object, ...] | None = None
        self.cells: list[Cell] = []
        self.sort: tuple[tuple[int, float | str], ...] = ()


class ProcessTable(ScrollView, can_focus=True):
    """Flat list of GPU processes; ``sync`` applies one snapshot, drawing only visible lines.

    Line 0 is the header (it stays while the rows scroll); line ``i + 1`` is row ``i``.
    """

    BINDINGS = [
        Binding("up,k", "cursor_up", "Up", show=False),
        Binding("down,j", "cursor_down", "Down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home,g", "scroll_top", "First", show=False),
        Binding("end,G", "scroll_bottom", "Last", show=False),
        Binding("left", "scroll_left", "Left", show=False),
        Binding("right", "scroll_right", "Right", show=False),
    ]

    COMPONENT_CLASSES = {
        "process-table--header",
        "process-table--fixed",
        "process-table--even-row",
        "process-table--cursor",
        "process-table--fixed-cursor",
        "process-table--tagged",
    }

    # The look of Textual's DataTable, which this table replaced.
    DEFAULT_CSS = """
    ProcessTable {
        background: $surface;
        color: $foreground;
        height: 1fr;
        &:focus {
            background-tint: $foreground 5%;
            & > .process-table--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
            & > .process-table--header { background-tint: $foreground 5%; }
            & > .process-table--fixed-cursor {
                color: $block-cursor-foreground;
                background: $block-cursor-background;
            }
        }
        &:dark > .process-table--even-row { background: $surface-darken-1 40%; }
        & > .process-table--header { text-style: bold; background: $panel; color: $foreground; }
        &:ansi > .process-table--header { background: ansi_bright_blue; color: ansi_default; }
        & > .process-table--fixed { background: $secondary-muted; color: $foreground; }
        & > .process-table--even-row { background: $surface-lighten-1 50%; }
        & > .process-table--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        & > .process-table--fixed-cursor {
            background: $block-cursor-blurred-background;
            color: $foreground;
        }
        & > .process-table--tagged { color: $text-warning; text-style: bold; }
    }
    """

    #: Columns that stay on screen while the table scrolls sideways.
    fixed_columns = FIXED_COLUMNS

    #: Whether the cursor row is highlighted.
    show_cursor = True

    def __init__(
        self, *, id: str | None = None, fields: Sequence[ProcessField] = PROCESS_FIELDS
    ) -> None:
        super().__init__(id=id)
        #: The columns and sort orders, from the per-process field table.
        self.columns = DEFAULT_COLUMNS if fields is PROCESS_FIELDS else Columns.of(fields)
        self.sort_index = 0
        self.reverse = False
        self.filter_text = ""
        #: The GPU the monitor is scoped to (``f``, a click on a GPU): only its processes.
        self.scope_gpu: int | None = None
        #: The PIDs tagged with Space: their rows carry :data:`TAG_MARK` in the tag colour.
        self.tagged: frozenset[int] = frozenset()
        self.cursor_row = 0
        self._rows: dict[str, ProcessRow] = {}
        self._order: list[str] = []
        self._index: dict[str, int] | None = {}
        self._widths: tuple[int, ...] = tuple(w or len(h) for _, h, w in self.columns.layout)
        #: Row key -> (what the line was drawn from, the drawn line at full width).
        self._lines: dict[str, tuple[tuple[object, ...], Strip]] = {}
        self._header_line: tuple[tuple[object, ...], Strip] | None = None
        self._announced: str | None = None

    # ------------------------------------------------------------------ reading the table

    @property
    def processes(self) -> dict[str, GpuProcess]:
        """The shown processes by row key."""
        return {key: row.process for key, row in self._rows.items()}

    @property
    def row_count(self) -> int:
        """How many rows are shown (after the filter)."""
        return len(self._order)

    @property
    def descending(self) -> bool:
        """The active sort's direction (its natural one unless reversed with ``S``)."""
        return self.columns.sorts[self.sort_index][2] != self.reverse

    @property
    def sort_label(self) -> str:
        """The active sort, e.g. ``GPU mem ▼`` (``▲``: ascending)."""
        return f"{self.columns.sorts[self.sort_index][1]} {DOWN if self.descending else UP}"

    def _header(self, key: str, title: str) -> Text:
        if key != self.columns.sorts[self.sort_index][0]:
            return Text(title, no_wrap=True)
        return Text(f"{title} {DOWN if self.descending else UP}", style="bold", no_wrap=True)

    def header_labels(self) -> list[str]:
        """The column headers as shown, in order (for tests)."""
        return [self._header(key, title).plain for key, title, _ in self.columns.layout]

    def row_keys(self) -> Sequence[str]:
        """Row keys in display order."""
        return list(self._order)

    def get_row_index(self, key: str) -> int:
        """The display index of the row ``key`` (KeyError when it is not shown)."""
        if self._index is None:
            self._index = {k: i for i, k in enumerate(self._order)}
        return self._index[key]

    def get_row(self, key: str) -> list[Cell]:
        """The cells of row ``key`` in column order (built now if they are out of date)."""
        return list(self._cells_of(self._rows[key]))

    def get_cell(self, key: str, column: str) -> Cell:
        """One cell of row ``key``."""
        return self._cells_of(self._rows[key])[self.columns.index[column]]

    @property
    def selected(self) -> GpuProcess | None:
        """The process under the cursor, if any."""
        key = self._cursor_key()
        return None if key is None else self._rows[key].process

    def _cursor_key(self) -> str | None:
        if 0 <= self.cursor_row < len(self._order):
            return self._order[self.cursor_row]
        return None

    # ------------------------------------------------------------------------ sorting

    def set_tagged(self, pids: frozenset[int]) -> None:
        """Mark the rows of the tagged PIDs (Space); their lines are drawn again."""
        if pids != self.tagged:
            self.tagged = pids
            self.refresh()

    def cycle_sort(self) -> None:
        """Move to the next sort order (in its natural direction) and re-sort now."""
        self.sort_index = (self.sort_index + 1) % len(self.columns.sorts)
        self.reverse = False
        self._resort_all()

    def reverse_sort(self) -> None:
        """Sort the same column the other way round."""
        self.reverse = not self.reverse
        self._resort_all()

    def sort_choices(self) -> tuple[str, ...]:
        """F6's list: the sort orders ``s`` cycles through."""
        return tuple(order[1] for order in self.columns.sorts)

    def sort_by(self, index: int) -> None:
        """Sort by order ``index``, in its natural direction."""
        self.sort_index = index % len(self.columns.sorts)
        self.reverse = False
        self._resort_all()

    def _resort_all(self) -> None:
        column = self.columns.sorts[self.sort_index][0]
        for row in self._rows.values():
            row.sort = self._sort_key(column, row)
        self._header_line = None
        self._sort(self._cursor_key())
        self.refresh()

    def _sort_key(self, column: str, row: ProcessRow) -> tuple[tuple[int, float | str], ...]:
        # Ties (same memory, same container) fall back to PID then GPU so the order is stable.
        p = row.process
        return (
            self.columns.sort_value(column, p, row.name),
            (1, float(p.pid)),
            (1, float(p.sample.gpu_index)),
        )

    def _sort(self, keep: str | None) -> None:
        rows = self._rows
        self._order = sorted(rows, key=lambda k: rows[k].sort, reverse=self.descending)
        self._index = None
        self._follow(keep)

    def _follow(self, keep: str | None) -> None:
        """Keep the cursor on the process ``keep`` (its identity), else in range."""
        if keep is not None and keep in self._rows:
            self.cursor_row = self.get_row_index(keep)
        self.cursor_row = max(0, min(self.cursor_row, len(self._order) - 1))
        self._scroll_cursor_into_view()

    # ------------------------------------------------------------------------ syncing

    def sync(self, snapshot: Snapshot) -> None:
        """Apply one snapshot: only raw values are compared; lines are built when drawn.

        Rows whose raw values are unchanged cost one tuple comparison. The rows are re-sorted
        only when the set of rows or a value of the sort column (or PID / GPU) moved, and only
        the visible lines whose values moved are repainted.

        Args:
            snapshot: The refresh to show (rows filtered by :attr:`filter_text`).
        """
        keep = self._cursor_key()
        now = snapshot.taken_at
        names = _names(snapshot)
        column = self.columns.sorts[self.sort_index][0]
        # The sort value is a function of this input (PID and GPU are the row's key).
        sort_input = self.columns.index[column]
        query = parse_filter(self.filter_text, self.scope_gpu)
        rows = self._rows
        seen: set[str] = set()
        moved: list[str] = []
        resort = False
        for process in snapshot.processes:
            name = _name(process, names)
            if not query.empty and not (
                query.on_gpus(process) and _text_matches(process, name, query.text)
            ):
                continue
            key = process_key(process)
            if key in seen:
                continue  # one row per key: the first
            seen.add(key)
            inputs = self.columns.inputs(process, name, now)
            row = rows.get(key)
            if row is None:
                row = rows[key] = ProcessRow(key, process, name, inputs, now)
                row.sort = self._sort_key(column, row)
                resort = True
                continue
            row.process, row.name, row.now = process, name, now
            before = row.inputs
            if before == inputs:
                continue
            row.inputs = inputs
            moved.append(key)
            if before[sort_input] != inputs[sort_input]:
                row.sort = self._sort_key(column, row)
                resort = True
        if len(seen) != len(rows):
            for key in [k for k in rows if k not in seen]:
                del rows[key]
                self._lines.pop(key, None)
            resort = True
        widths = self._measure()
        if widths != self._widths:
            self._widths = widths
            self._lines.clear()
            self._header_line = None
            resort = True  # everything is redrawn
        if resort:
            self._sort(keep)
            self._set_virtual_size()
            self.refresh()
        else:
            self._follow(keep)
            self._repaint(moved)
        self._announce()

    def _measure(self) -> tuple[int, ...]:
        """Column widths: the fixed ones, and COMMAND as wide as its widest text."""
        widest = len(self.columns.layout[-1][1])
        for row in self._rows.values():
            command = row.inputs[-1]
            if command != row.command:
                row.command, row.width = command, cell_len(_command_text(row.process))
            if row.width > widest:
                widest = row.width
        return (*fit_columns(self.size.width, self.columns.layout), widest)

    def on_resize(self) -> None:
        """A new width: the columns that fit, and every line drawn again."""
        widths = self._measure()
        if widths != self._widths:
            self._widths = widths
            self._lines.clear()
            self._header_line = None
            self._set_virtual_size()
            self.refresh()

    def _set_virtual_size(self) -> None:
        size = Size(sum(w + 2 * PAD for w in self._widths if w), len(self._order) + 1)
        if size != self.virtual_size:
            self.virtual_size = size

    def _repaint(self, keys: list[str]) -> None:
        """Repaint the visible lines of ``keys`` (rows off screen are drawn when scrolled to).

        One refresh covers the span from the first to the last changed visible line: each
        ``refresh`` call costs more than the compositor's work on an unchanged cached line.
        """
        if not keys:
            return
        top = round(self.scroll_y)
        bottom = top + max(0, self.scrollable_content_region.height - 1)
        index = self._index
        if index is None:
            index = self._index = {k: i for i, k in enumerate(self._order)}
        lines = [i for i in map(index.get, keys) if i is not None and top <= i < bottom]
        if lines:
            first, last = min(lines), max(lines)
            self.refresh_lines(first + 1, last - first + 1)

    # ------------------------------------------------------------------------ the cursor

    def move_cursor(self, *, row: int, animate: bool = False) -> None:
        """Put the cursor on display row ``row`` (clamped) and scroll it into view.

        Args:
            row: The display index.
            animate: Accepted for the DataTable call sites; the cursor never animates.
        """
        if not self._order:
            return
        row = max(0, min(row, len(self._order) - 1))
        if row != self.cursor_row:
            old = self.cursor_row
            self.cursor_row = row
            self.refresh_line(old + 1)
            self.refresh_line(row + 1)
        self._scroll_cursor_into_view()
        self._announce()

    def _scroll_cursor_into_view(self) -> None:
        height = self.scrollable_content_region.height - 1  # under the header
        if height <= 0:
            return
        top = round(self.scroll_y)
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False, immediate=True)
        elif self.cursor_row >= top + height:
            self.scroll_to(y=self.cursor_row - height + 1, animate=False, immediate=True)

    def action_scroll_left(self) -> None:
        """← : :data:`SIDE_STEP` columns left."""
        self.scroll_to(x=max(0, self.scroll_x - SIDE_STEP), animate=False)

    def action_scroll_right(self) -> None:
        """→ : :data:`SIDE_STEP` columns right."""
        self.scroll_to(x=min(self.max_scroll_x, self.scroll_x + SIDE_STEP), animate=False)

    def _announce(self) -> None:
        """Tell the screen the process under the cursor changed (keys may change state)."""
        key = self._cursor_key()
        if key != self._announced:
            self._announced = key
            self.post_message(SelectionChanged())

    def _page(self) -> int:
        return max(1, self.scrollable_content_region.height - 2)

    def action_cursor_up(self) -> None:
        """One row up."""
        self.move_cursor(row=self.cursor_row - 1)

    def action_cursor_down(self) -> None:
        """One row down."""
        self.move_cursor(row=self.cursor_row + 1)

    def action_page_up(self) -> None:
        """One page up."""
        self.move_cursor(row=self.cursor_row - self._page())

    def action_page_down(self) -> None:
        """One page down."""
        self.move_cursor(row=self.cursor_row + self._page())

    def action_scroll_top(self) -> None:
        """The first row (a row cursor: not sideways)."""
        self.move_cursor(row=0)

    def action_scroll_bottom(self) -> None:
        """The last row."""
        self.move_cursor(row=len(self._order) - 1)

    def on_click(self, event: events.Click) -> None:
        """A click on a row puts the cursor there."""
        if event.y >= 1:
            self.move_cursor(row=event.y - 1 + round(self.scroll_y))

    # ------------------------------------------------------------------------ drawing

    def notify_style_update(self) -> None:
        """The theme or focus changed the styles: every cached line is drawn again."""
        super().notify_style_update()
        self._lines.clear()
        self._header_line = None

    def _on_focus(self, event: events.Focus) -> None:
        super()._on_focus(event)
        self.refresh()  # the cursor's colour depends on the focus

    def _on_blur(self, event: events.Blur) -> None:
        super()._on_blur(event)
        self.refresh()

    def _cells_of(self, row: ProcessRow) -> list[Cell]:
        """The row's cells, rebuilding only the columns whose values moved since last built."""
        built, inputs = row.built, row.inputs
        if built == inputs:
            return row.cells
        if built is None:
            row.cells = [self.build_cell(row, column) for column, _, _ in self.columns.layout]
        else:
            cells = row.cells
            for i, (old, new) in enumerate(zip(built, inputs, strict=True)):
                if old != new:
                    cells[i] = self.build_cell(row, self.columns.layout[i][0])
        row.built = inputs
        return row.cells

    def build_cell(self, row: ProcessRow, column: str) -> Cell:
        """Build one cell of ``row`` (only for rows being drawn or read, only moved columns)."""
        return self.columns.cell(column, row.process, row.name, row.now)

    def _draw(self, texts: Sequence[Text], style: Style, fixed: Style) -> Strip:
        """One line at full width: cells padded and cut to their columns."""
        console = self.app.console
        line = Text(no_wrap=True, end="")
        split = 0
        for i, (text, width) in enumerate(zip(texts, self._widths, strict=True)):
            if not width:
                continue  # a column the table's width leaves out
            cell = themed(text).copy()
            cell.align(cell.justify if cell.justify in ("left", "right") else "left", width)
            line.append(" " * PAD)
            line.append_text(cell)
            line.append(" " * PAD)
            if i + 1 == self.fixed_columns:
                split = line.cell_len
        segments = list(line.render(console))
        total = line.cell_len
        if not split:
            return Strip(segments, total).apply_style(style)
        head, tail = Strip(segments, total).divide([split, total])
        return Strip.join([head.apply_style(fixed), tail.apply_style(style)])

    def _header_strip(self) -> Strip:
        style = self.get_component_rich_style("process-table--header")
        key = (style, self._widths, self.sort_index, self.reverse)
        if self._header_line is None or self._header_line[0] != key:
            texts = [self._header(k, title) for k, title, _ in self.columns.layout]
            self._header_line = (key, self._draw(texts, style, style))
        return self._header_line[1]

    def _row_strip(self, index: int) -> Strip:
        key = self._order[index]
        row = self._rows[key]
        if index == self.cursor_row and self.show_cursor:
            style = self.get_component_rich_style("process-table--cursor")
            fixed = self.get_component_rich_style("process-table--fixed-cursor")
        else:
            base = self.rich_style
            even = index % 2 == 0
            style = (
                base + self.get_component_rich_style("process-table--even-row") if even else base
            )
            fixed = self.get_component_rich_style("process-table--fixed")
        tagged = row.process.pid in self.tagged
        drawn = (row.inputs, style, fixed, self._widths, tagged)
        cached = self._lines.get(key)
        if cached is not None and cached[0] == drawn:
            return cached[1]
        texts = [cell.text for cell in self._cells_of(row)]
        if tagged:
            # htop's tagged rows: a mark before the PID, the whole row in the tag colour.
            tag = self.get_component_rich_style("process-table--tagged")
            pid = texts[0].copy()
            pid.plain = f"{TAG_MARK}{pid.plain}"
            texts = [pid, *texts[1:]]
            style, fixed = style + tag, fixed + tag
        strip = self._draw(texts, style, fixed)
        if len(self._lines) >= LINE_CACHE_SIZE:
            self._lines.pop(next(iter(self._lines)))
        self._lines[key] = (drawn, strip)
        return strip

    def render_line(self, y: int) -> Strip:
        """Line ``y`` of the viewport: the header, a row, or blank below the last row."""
        width = self.scrollable_content_region.width
        base = self.rich_style
        if y == 0:
            strip = self._header_strip()
        else:
            index = y - 1 + round(self.scroll_y)
            if not 0 <= index < len(self._order):
                return Strip.blank(width, base)
            strip = self._row_strip(index)
        scroll_x = round(self.scroll_x)
        if scroll_x:
            fixed = sum(w + 2 * PAD for w in self._widths[: self.fixed_columns])
            strip = Strip.join(
                [strip.crop(0, fixed), strip.crop(fixed + scroll_x, fixed + scroll_x + width)]
            )
        return strip.crop(0, width).adjust_cell_length(width, base)
