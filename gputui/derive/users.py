"""Who holds the GPUs: GPU memory, SM %, processes and GPUs per user and per compose project.

A process's user is its **real uid in the host's user namespace**, read from
``/proc/<pid>/status`` by the collector and named from the host's passwd (``ProcessInfo.user``:
the name, or the uid in digits when the host has no name for it). So:

* a process in a container that runs as root is the host's ``root``, added up with the host's
  own root processes (without user-namespace remapping they are the same uid);
* a uid the host has no name for is shown with its container, ``uid 1000 (notebook)``: the same
  number in two containers (or on the host) need not be the same person, so each container's
  uid is its own row. A container's ``/etc/passwd`` is never read (it is the container's to
  forge);
* under user-namespace remapping (``userns-remap``, rootless Docker) the host uid is the
  subordinate one (``uid 100000 (trainer)``), not the uid the process believes it has: that is
  the uid the host accounts the process to, and the one shown;
* GPU memory held by PIDs that do not exist here, and by processes ``/proc`` hides from gputui
  (``hidepid``), is a row of its own, so the rows add up to everything NVML listed.

Pure: functions over a :class:`~gputui.model.snapshot.Snapshot`, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from gputui.model.processes import GpuProcess, per_gpu_sm
from gputui.model.records import record
from gputui.model.snapshot import Snapshot

__all__ = [
    "HOST",
    "SORTS",
    "UNKNOWN_PLACE",
    "ProjectUsage",
    "UserTotals",
    "UserUsage",
    "gpu_list",
    "owner_usage",
    "place_of",
    "project_usage",
    "sort_rows",
    "user_label",
    "user_of",
    "user_totals",
    "user_usage",
]

#: Where a process runs when /proc shows it in no container.
HOST = "host"
#: Where a process runs when /proc cannot tell (a PID nobody can find, one hidepid hides).
UNKNOWN_PLACE = "unknown"

#: Sort columns of the users view (``s`` cycles them), first the default.
SORTS: tuple[str, ...] = ("memory", "sm", "processes", "gpus", "name")

#: A row's kind: a named host user, a uid without a name, PIDs nobody can find, processes
#: ``/proc`` hides, a process whose owner could not be read; and on the owners' rows, a person.
USER_KINDS = ("user", "uid", "unknown", "hidden", "unreadable", "owner")


@record
class UserUsage:
    """One user's GPU use across the host and its containers.

    Attributes:
        key: Stable id: ``user:<name>``, ``uid:<uid>`` (host), ``uid:<uid>@<container id>``,
            ``unknown``, ``hidden`` or ``unreadable``.
        label: For people: ``alice``, ``uid 1000 (notebook)``, ``PIDs nobody can find``.
        kind: One of :data:`USER_KINDS`.
        gpu_memory_bytes: GPU memory of its processes, over every GPU.
        sm_util: Its processes' SM % per GPU (the mean over their GPUs, ``per_gpu_sm``), None
            when none was reported.
        processes: Distinct PIDs (a process on two GPUs counts once).
        gpu_indexes: GPUs its processes use.
        containers: Names of the containers its processes run in, plus :data:`HOST`.
    """

    key: str
    label: str
    kind: str
    gpu_memory_bytes: int
    sm_util: int | None
    processes: int
    gpu_indexes: tuple[int, ...]
    containers: tuple[str, ...]


@record
class ProjectUsage:
    """One compose project's GPU use (its containers' processes).

    Attributes:
        project: The ``com.docker.compose.project`` label.
        gpu_memory_bytes: GPU memory of its containers' processes.
        sm_util: Their SM % per GPU (the mean over their GPUs, ``per_gpu_sm``), None when none
            was reported.
        processes: Distinct PIDs.
        gpu_indexes: GPUs they use.
        containers: Its containers that run GPU processes or asked for GPUs.
        users: Labels of the users running them.
    """

    project: str
    gpu_memory_bytes: int
    sm_util: int | None
    processes: int
    gpu_indexes: tuple[int, ...]
    containers: tuple[str, ...]
    users: tuple[str, ...]


def _container_name(snapshot: Snapshot, container_id: str) -> str:
    usage = snapshot.container(container_id)
    return usage.info.name if usage is not None and usage.info.name else container_id[:12]


def user_of(snapshot: Snapshot, proc: GpuProcess) -> tuple[str, str, str]:
    """(key, label, kind) of the user a GPU process runs as (see the module's text).

    Args:
        snapshot: The snapshot the process is part of (names its container).
        proc: The process.
    """
    return _user_of(proc, lambda cid: _container_name(snapshot, cid))


def _names(snapshot: Snapshot) -> Callable[[str], str]:
    """:func:`_container_name` over one snapshot, from a dict built once (the totals' hot path)."""
    names = {u.info.id: u.info.name or u.info.id[:12] for u in snapshot.containers}
    return lambda cid: names.get(cid) or cid[:12]


def _user_of(proc: GpuProcess, name_of: Callable[[str], str]) -> tuple[str, str, str]:
    info = proc.info
    if not info.exists:
        return "unknown", "PIDs nobody can find", "unknown"
    if info.proc_hidden:
        return "hidden", "another user (hidden by /proc)", "hidden"
    user = info.user
    if not user:
        return "unreadable", "user unknown (no permission)", "unreadable"
    if user.isascii() and user.isdigit():
        if proc.container_id is not None:
            name = name_of(proc.container_id)
            return f"uid:{user}@{proc.container_id}", f"uid {user} ({name})", "uid"
        return f"uid:{user}", f"uid {user}", "uid"
    return f"user:{user}", user, "user"


def user_label(snapshot: Snapshot, proc: GpuProcess) -> str:
    """The user of a GPU process as every surface shows it (the one formatting of a user).

    The Users tab's rows, the exporter's ``user`` label on process and user series alike, and
    the text report's USER column all use this text, so one user is one value everywhere:
    ``alice``, ``uid 123456`` (host), ``uid 1000 (notebook)`` (a uid without a host name, in a
    container), ``another user (hidden by /proc)``, ``user unknown (no permission)``. JSON
    keeps the raw ``user`` field (data, not a display value).
    """
    return user_of(snapshot, proc)[1]


class _Sum:
    """Running totals of one row."""

    __slots__ = ("gpus", "memory", "pids", "places", "rows")

    def __init__(self) -> None:
        self.memory = 0
        self.rows: list[GpuProcess] = []
        self.pids: set[int] = set()
        self.gpus: set[int] = set()
        self.places: set[str] = set()

    def add(self, proc: GpuProcess, place: str) -> None:
        self.memory += max(0, proc.sample.used_memory_bytes or 0)
        self.rows.append(proc)
        self.pids.add(proc.pid)
        self.gpus.add(proc.sample.gpu_index)
        self.places.add(place)


def place_of(snapshot: Snapshot, proc: GpuProcess) -> str:
    """Where a GPU process runs, for people: its container's name, ``host`` or ``unknown``.

    ``host`` only when ``/proc`` showed it in no container (:attr:`GpuProcess.on_host`); a
    process ``/proc`` hides or nobody can find is ``unknown``.
    """
    return _place_of(proc, lambda cid: _container_name(snapshot, cid))


def _place_of(proc: GpuProcess, name_of: Callable[[str], str]) -> str:
    if proc.container_id is not None:
        return name_of(proc.container_id)
    return HOST if proc.on_host else UNKNOWN_PLACE


def user_usage(snapshot: Snapshot) -> tuple[UserUsage, ...]:
    """Every user with GPU processes, most GPU memory first (then by label).

    Args:
        snapshot: One refresh.

    Returns:
        One row per user; their memory adds up to the memory of every process NVML listed.
    """
    sums: dict[str, _Sum] = {}
    meta: dict[str, tuple[str, str]] = {}
    name_of = _names(snapshot)
    for proc in snapshot.processes:
        key, label, kind = _user_of(proc, name_of)
        meta[key] = (label, kind)
        row = sums.get(key)
        if row is None:
            row = sums[key] = _Sum()
        row.add(proc, _place_of(proc, name_of))
    return _usage_rows(sums, meta)


def _usage_rows(sums: dict[str, _Sum], meta: dict[str, tuple[str, str]]) -> tuple[UserUsage, ...]:
    """The rows of the sums (key -> totals; key -> label and kind), most GPU memory first."""
    rows = [
        UserUsage(
            key=key,
            label=meta[key][0],
            kind=meta[key][1],
            gpu_memory_bytes=s.memory,
            sm_util=per_gpu_sm(s.rows),
            processes=len(s.pids),
            gpu_indexes=tuple(sorted(s.gpus)),
            containers=tuple(sorted(s.places)),
        )
        for key, s in sums.items()
    ]
    return tuple(sort_rows(rows, "memory"))


def project_usage(snapshot: Snapshot) -> tuple[ProjectUsage, ...]:
    """Every compose project whose containers run GPU processes or asked for GPUs.

    Args:
        snapshot: One refresh.

    Returns:
        One row per project, most GPU memory first (then by name).
    """
    sums: dict[str, _Sum] = {}
    users: dict[str, set[str]] = {}
    for usage in snapshot.containers:
        project = usage.info.compose_project
        if project and (usage.pids or usage.info.gpu_request is not None):
            sums.setdefault(project, _Sum()).places.add(usage.info.name)
            users.setdefault(project, set())
    name_of = _names(snapshot)
    projects = {u.info.id: u.info.compose_project for u in snapshot.containers}
    for proc in snapshot.processes:
        if proc.container_id is None:
            continue
        project = projects.get(proc.container_id)
        if not project:
            continue
        sums.setdefault(project, _Sum()).add(proc, _place_of(proc, name_of))
        users.setdefault(project, set()).add(_user_of(proc, name_of)[1])
    rows = [
        ProjectUsage(
            project=project,
            gpu_memory_bytes=s.memory,
            sm_util=per_gpu_sm(s.rows),
            processes=len(s.pids),
            gpu_indexes=tuple(sorted(s.gpus)),
            containers=tuple(sorted(s.places)),
            users=tuple(sorted(users.get(project, ()))),
        )
        for project, s in sums.items()
    ]
    return tuple(sort_rows(rows, "memory"))


#: The owner row of containers nothing names an owner of.
UNKNOWN_OWNER = "owner unknown"


def owner_usage(snapshot: Snapshot) -> tuple[UserUsage, ...]:
    """GPU use per owner: the person behind each container, host processes by their user.

    A container's owner is its :class:`~gputui.model.containers.Owner` (``alice?`` for a
    low-confidence guess), :data:`UNKNOWN_OWNER` when nothing names one; a host process's
    owner is its user. Empty when no container's owner is known (the rows would be the users'
    again).

    Args:
        snapshot: One refresh.

    Returns:
        One row per owner (kind ``owner``, or the user kinds for host processes), most GPU
        memory first.
    """
    owners = {
        u.info.id: u.info.owner
        for u in snapshot.containers
        if u.info.owner is not None and u.info.owner.name
    }
    if not owners:
        return ()
    sums: dict[str, _Sum] = {}
    meta: dict[str, tuple[str, str]] = {}
    name_of = _names(snapshot)
    for proc in snapshot.processes:
        if proc.container_id is not None:
            owner = owners.get(proc.container_id)
            if owner is None or owner.name is None:
                key, label, kind = "owner:", UNKNOWN_OWNER, "unknown"
            else:
                guess = "?" if owner.confidence == "low" else ""
                key, label, kind = f"owner:{owner.name}{guess}", owner.name + guess, "owner"
        else:
            key, label, kind = _user_of(proc, name_of)
            if kind == "user":
                key = f"owner:{label}"  # a host user and a container owner of that name add up
                kind = "owner"
        meta[key] = (label, kind)
        row = sums.get(key)
        if row is None:
            row = sums[key] = _Sum()
        row.add(proc, _place_of(proc, name_of))
    return _usage_rows(sums, meta)


@record
class UserTotals:
    """One snapshot's users and compose projects, computed once for every front-end.

    The analysis computes them on the collector's thread (:class:`~gputui.derive.analysis.
    Analysis` carries them), so the Users tab, ``--once`` (text and JSON) and the exporter's
    user series show the same rows from one computation.

    Attributes:
        users: :func:`user_usage` of the snapshot.
        projects: :func:`project_usage` of the snapshot.
        owners: :func:`owner_usage` of the snapshot (empty while no owner is known).
    """

    users: tuple[UserUsage, ...]
    projects: tuple[ProjectUsage, ...]
    owners: tuple[UserUsage, ...] = ()


def user_totals(snapshot: Snapshot) -> UserTotals:
    """:class:`UserTotals` of ``snapshot``."""
    return UserTotals(user_usage(snapshot), project_usage(snapshot), owner_usage(snapshot))


Row = TypeVar("Row", UserUsage, ProjectUsage)


def _name(row: UserUsage | ProjectUsage) -> str:
    return row.label if isinstance(row, UserUsage) else row.project


_SORT_KEYS: dict[str, Callable[[UserUsage | ProjectUsage], tuple[float | str, ...]]] = {
    "memory": lambda r: (-r.gpu_memory_bytes, _name(r)),
    "sm": lambda r: (-(r.sm_util if r.sm_util is not None else -1), _name(r)),
    "processes": lambda r: (-r.processes, -r.gpu_memory_bytes, _name(r)),
    "gpus": lambda r: (-len(r.gpu_indexes), -r.gpu_memory_bytes, _name(r)),
    "name": lambda r: (_name(r).casefold(), _name(r)),
}


def sort_rows(rows: Iterable[Row], by: str, reverse: bool = False) -> list[Row]:
    """Rows sorted by one of :data:`SORTS`: biggest first (names A to Z), or the other way.

    Args:
        rows: User or project rows.
        by: The column; an unknown one sorts by memory.
        reverse: Smallest first (names Z to A).
    """
    key = _SORT_KEYS.get(by, _SORT_KEYS["memory"])
    return sorted(rows, key=key, reverse=reverse)


def gpu_list(indexes: Sequence[int]) -> str:
    """``0,2,3`` (``-`` for none): the GPUs of a row, for people and label values."""
    return ",".join(str(i) for i in indexes) or "-"
