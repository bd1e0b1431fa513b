"""The parents of a process, for the drill-down: who started it, up to init.

Blocking file reads (a few small ``/proc`` files per parent), bounded in depth and time: called
off the UI thread.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from gputui.collect.linux.fileio import read_capped
from gputui.collect.linux.host_view import boot_time
from gputui.collect.linux.proc_parse import (
    MAX_STAT_BYTES,
    PID_MAX_LIMIT,
    ProcStat,
    clean_text,
    parse_cmdline,
    parse_stat,
    same_start,
    start_time_of,
)
from gputui.model.records import record

#: Parents the drill-down's chain climbs at most (init is rarely more than a dozen away).
MAX_PARENT_DEPTH = 16
#: Seconds a parent-chain read may take in all; past it the chain stops where it got.
PARENT_CHAIN_DEADLINE_S = 0.5
#: Bytes of a parent's command line read (the chain shows one line per parent).
MAX_PARENT_CMDLINE_BYTES = 4096
#: How :func:`parent_chain`'s note begins when the process itself is gone.
EXITED_NOTE = "the process has exited"


@record
class ParentLink:
    """One ancestor of a process, as ``/proc/<pid>/stat`` and ``cmdline`` describe it.

    Attributes:
        pid: Its PID.
        name: Its command name (``comm``, at most 64 characters).
        command: Its command line joined by spaces (cut at 4 KiB); None for a kernel thread.
    """

    pid: int
    name: str
    command: str | None


def parent_chain(
    pid: int,
    start_time: float | None,
    *,
    depth: int = MAX_PARENT_DEPTH,
    deadline_s: float = PARENT_CHAIN_DEADLINE_S,
    proc_root: str | os.PathLike[str] = "/proc",
) -> tuple[tuple[ParentLink, ...], str | None]:
    """The ancestors of ``pid``, nearest first, if it is still the process started then.

    Blocking file reads (a few small ``/proc`` files per parent): call it off the UI thread.
    Bounded by ``depth`` parents and by ``deadline_s`` seconds, whichever comes first.

    Args:
        pid: Host PID of the process.
        start_time: Its start time as the snapshot saw it; when the PID now names a process
            that started at another time, no chain is given (it would be another's).
        depth: Parents climbed at most.
        deadline_s: Seconds the reads may take in all.
        proc_root: The ``/proc`` to read.

    Returns:
        ``(parents, note)``: parents nearest first, up to the one whose parent is 0 (init, or
        the first process of a PID namespace gputui cannot see above); ``note`` says in a few
        words why the chain is empty or stops early, None when it is complete; it begins with
        :data:`EXITED_NOTE` when the process is gone.
    """
    deadline = time.monotonic() + deadline_s
    root = Path(proc_root)
    if not 0 < pid <= PID_MAX_LIMIT:
        return (), "not a process ID"
    stat = _chain_stat(root, pid)
    if stat is None:
        return (), EXITED_NOTE
    if start_time is not None:
        boot = boot_time(root / "stat")
        if boot is None:
            return (), "the boot time is unreadable"
        if not same_start(start_time_of(stat.start_ticks, boot), start_time):
            return (), f"{EXITED_NOTE} (PID {pid} now names another process)"
    links: list[ParentLink] = []
    seen = {pid}
    parent = stat.ppid
    while parent > 0:
        if len(links) >= depth:
            return tuple(links), f"stopped after {depth} parents"
        if time.monotonic() > deadline:
            return tuple(links), "stopped: /proc answered too slowly"
        if parent in seen:
            return tuple(links), "stopped: the parents loop"
        seen.add(parent)
        stat = _chain_stat(root, parent)
        if stat is None:
            return tuple(links), f"PID {parent} is not readable (exited, or hidden by /proc)"
        data, _ = read_capped(root / str(parent) / "cmdline", MAX_PARENT_CMDLINE_BYTES)
        args = parse_cmdline(data, cut=len(data) >= MAX_PARENT_CMDLINE_BYTES) if data else []
        links.append(ParentLink(parent, clean_text(stat.comm), " ".join(args) or None))
        parent = stat.ppid
    return tuple(links), None


def _chain_stat(root: Path, pid: int) -> ProcStat | None:
    data, _ = read_capped(root / str(pid) / "stat", MAX_STAT_BYTES + 1)
    if data is None:
        return None
    return parse_stat(data.decode("utf-8", "surrogateescape"))
