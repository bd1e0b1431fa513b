"""The Users tab: GPU memory, SM %, processes and GPUs per user, per owner, per compose project.

The owners' table (the person behind each container, :func:`gputui.derive.users.owner_usage`)
shows once some container's owner is known. A user is the host uid of the processes (a
container's root is the host's root); a uid the host has no name for is shown with its
container, ``uid 1000 (notebook)`` (:mod:`gputui.derive.users` has the rules). ``s`` / ``S``
sort the tables by the same column.
The rows are the analysis's (:attr:`gputui.derive.analysis.Analysis.totals`, computed once per
snapshot on the collector's thread, the same rows ``--once`` and the exporter print): this
widget only sorts and draws them. Every name passes :func:`gputui.boundary.sanitise.safe_text` here,
at the output boundary.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import DataTable, Static

from gputui.boundary import sanitise
from gputui.derive import units
from gputui.derive.users import (
    SORTS,
    ProjectUsage,
    UserTotals,
    UserUsage,
    gpu_list,
    sort_rows,
)
from gputui.model.snapshot import Snapshot

#: (key, header) of the users table; GPU-MEM, SM and PROCS are right-aligned numbers.
USER_COLUMNS: tuple[tuple[str, str], ...] = (
    ("user", "USER"),
    ("memory", "  GPU-MEM"),
    ("sm", "  SM"),
    ("processes", "PROCS"),
    ("gpus", "GPUS"),
    ("where", "WHERE"),
)
#: The owners table: the users table's columns, headed by the owner.
OWNER_COLUMNS: tuple[tuple[str, str], ...] = (("user", "OWNER"), *USER_COLUMNS[1:])
PROJECT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("project", "PROJECT"),
    ("memory", "  GPU-MEM"),
    ("sm", "  SM"),
    ("processes", "PROCS"),
    ("gpus", "GPUS"),
    ("containers", "CONTAINERS"),
    ("users", "USERS"),
)
#: The header of each sort column, for the status line.
SORT_LABELS = {
    "memory": "GPU-MEM",
    "sm": "SM",
    "processes": "PROCS",
    "gpus": "GPUS",
    "name": "NAME",
}
#: Longest name or list shown in a cell; names are shorter so the numbers fit 80 columns.
_CELL = 48
_NAME = 32


def _number(text: str, width: int) -> str:
    return text.rjust(width)


def user_cells(u: UserUsage) -> tuple[str, ...]:
    """The cells of one user's row (names made safe)."""
    return (
        sanitise.safe_text(u.label, _NAME),
        _number(units.size(u.gpu_memory_bytes), 9),
        _number(units.pct(u.sm_util), 4),
        _number(str(u.processes), 5),
        gpu_list(u.gpu_indexes),
        sanitise.safe_text(", ".join(u.containers) or "-", _CELL),
    )


def project_cells(p: ProjectUsage) -> tuple[str, ...]:
    """The cells of one compose project's row (names made safe)."""
    return (
        sanitise.safe_text(p.project, _NAME),
        _number(units.size(p.gpu_memory_bytes), 9),
        _number(units.pct(p.sm_util), 4),
        _number(str(p.processes), 5),
        gpu_list(p.gpu_indexes),
        sanitise.safe_text(", ".join(p.containers) or "-", _CELL),
        sanitise.safe_text(", ".join(p.users) or "-", _CELL),
    )


class UsersTable(DataTable[str]):
    """One row per user (or project), keyed by its id; vi keys as in the other tables."""

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("g", "scroll_top", "First", show=False),
        Binding("G", "scroll_bottom", "Last", show=False),
    ]


class UsersView(Vertical):
    """Users above, compose projects below; redrawn only for a new snapshot or sort."""

    DEFAULT_CSS = """
    UsersView #users-status { height: 1; padding: 0 1; }
    UsersView #users-table { height: 1fr; min-height: 3; }
    UsersView #owners-title { height: 2; padding: 0 1; border-top: solid $panel-lighten-2; }
    UsersView #owners-table { height: auto; max-height: 30%; }
    UsersView #projects-title { height: 2; padding: 0 1; border-top: solid $panel-lighten-2; }
    UsersView #projects-table { height: auto; max-height: 40%; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.status = Static("", id="users-status")
        self.table = UsersTable(cursor_type="row", id="users-table")
        self.owners_title = Static(
            "Owners (the person behind each container: label, rootless engine, compose directory"
            ", --user, bind mounts; `?` a guess; e: evidence)",
            id="owners-title",
        )
        self.owners = UsersTable(cursor_type="row", id="owners-table")
        self.projects_title = Static("Compose projects", id="projects-title")
        self.projects = UsersTable(cursor_type="row", id="projects-table")
        self.sort_index = 0
        self.sort_reverse = False
        self.snapshot: Snapshot | None = None
        self.users: tuple[UserUsage, ...] = ()
        self.owner_rows: tuple[UserUsage, ...] = ()
        self.project_rows: tuple[ProjectUsage, ...] = ()

    def compose(self) -> ComposeResult:
        """Status line, users, then the compose projects."""
        yield self.status
        yield self.table
        yield self.owners_title
        yield self.owners
        yield self.projects_title
        yield self.projects

    def on_mount(self) -> None:
        """Columns once; the projects section stays hidden until a project uses GPUs."""
        for key, header in USER_COLUMNS:
            self.table.add_column(header, key=key)
        for key, header in OWNER_COLUMNS:
            self.owners.add_column(header, key=key)
        self.owners_title.display = False
        self.owners.display = False
        for key, header in PROJECT_COLUMNS:
            self.projects.add_column(header, key=key)
        self.projects_title.display = False
        self.projects.display = False
        self._show_status()

    @property
    def sort_key(self) -> str:
        """The column both tables are sorted by."""
        return SORTS[self.sort_index % len(SORTS)]

    @property
    def sort_label(self) -> str:
        """The sort column's header, with an arrow when reversed."""
        return SORT_LABELS[self.sort_key] + (" ↑" if self.sort_reverse else "")

    def show(self, snapshot: Snapshot, totals: UserTotals) -> None:
        """Display one snapshot's users and projects (no-op for the same snapshot).

        Args:
            snapshot: The refresh.
            totals: Its users and projects, as the analysis computed them.
        """
        if snapshot is self.snapshot:
            return
        self.snapshot = snapshot
        self.users = totals.users
        self.owner_rows = totals.owners
        self.project_rows = totals.projects
        self._rebuild()

    def cycle_sort(self) -> None:
        """Next sort column (biggest first; names A to Z)."""
        self.sort_index = (self.sort_index + 1) % len(SORTS)
        self.sort_reverse = False
        self._rebuild()

    def reverse_sort(self) -> None:
        """Reverse the order of both tables."""
        self.sort_reverse = not self.sort_reverse
        self._rebuild()

    def sort_choices(self) -> tuple[str, ...]:
        """F6's list: the columns ``s`` cycles through."""
        return tuple(SORT_LABELS[key] for key in SORTS)

    def sort_current(self) -> int:
        """The column sorted by now."""
        return self.sort_index % len(SORTS)

    def sort_by(self, index: int) -> None:
        """Sort the tables by column ``index``, biggest first (names A to Z)."""
        self.sort_index = index % len(SORTS)
        self.sort_reverse = False
        self._rebuild()

    def _rebuild(self) -> None:
        users = sort_rows(self.users, self.sort_key, self.sort_reverse)
        _fill(self.table, [(u.key, user_cells(u)) for u in users])
        owners = sort_rows(self.owner_rows, self.sort_key, self.sort_reverse)
        _fill(self.owners, [(o.key, user_cells(o)) for o in owners])
        self.owners_title.display = bool(owners)
        self.owners.display = bool(owners)
        projects = sort_rows(self.project_rows, self.sort_key, self.sort_reverse)
        _fill(self.projects, [(p.project, project_cells(p)) for p in projects])
        self.projects_title.display = bool(projects)
        self.projects.display = bool(projects)
        self._show_status()

    def _show_status(self) -> None:
        if self.snapshot is not None and not self.users:
            self.status.update(
                Content.styled("No GPU processes: no user holds a GPU.", "$text-muted")
            )
            return
        memory = sum(u.gpu_memory_bytes for u in self.users)
        n = len(self.users)
        self.status.update(
            Content.assemble(
                ("sort ", "$text-muted"),
                (self.sort_label, "bold"),
                (f"  ·  {n} user{'' if n == 1 else 's'}, {units.size(memory)}", "$text-muted"),
                ("   (s/S: sort)", "$text-muted"),
            )
        )

    @property
    def selected(self) -> UserUsage | None:
        """The user under the cursor."""
        if not self.table.row_count:
            return None
        row_key = self.table.coordinate_to_cell_key(self.table.cursor_coordinate).row_key
        return next((u for u in self.users if u.key == row_key.value), None)


def _fill(table: DataTable[str], rows: list[tuple[str, tuple[str, ...]]]) -> None:
    """Replace a table's rows, keeping the cursor on the same key when it is still there."""
    current = None
    if table.row_count:
        current = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
    table.clear()
    for key, cells in rows:
        table.add_row(*cells, key=key)
    keys = [key for key, _ in rows]
    if current in keys:
        table.move_cursor(row=keys.index(str(current)), animate=False)
