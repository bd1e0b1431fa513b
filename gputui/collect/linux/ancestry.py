"""Which container a process is in when its cgroup does not say: its runtime monitor ancestor.

A rootless engine on cgroup v1 gives its containers no cgroup (their processes stay in the user's
session cgroup), and ``ctr run`` names a container's cgroup after an id no cgroup rule can tell
from any other path. Every runtime still keeps a monitor process as the parent of a container's
processes (``conmon -c <id>``, ``containerd-shim-runc-v2 -namespace <ns> -id <id>``), so the
container is found by climbing the parents to the nearest monitor. What one process of a PID
namespace showed is kept for a process of the same namespace whose parents cannot be read.

The climb is bounded (parents, bytes per file, seconds) and each answer is cached by the caller
per process lifetime: it costs a few small reads once per process.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from gputui.collect.linux.fileio import read_capped
from gputui.collect.linux.membership import MonitorMatch, parse_monitor_cmdline, parse_stat_ppid

__all__ = ["MAX_ANCESTRY_DEPTH", "RuntimeAncestry"]

#: Parents climbed at most: a container's process is a few levels below its monitor (``sh`` in
#: ``sh -c`` in a launcher...); the kernel nests PID namespaces at most 32 deep.
MAX_ANCESTRY_DEPTH = 32
#: Seconds one climb may take in all (a few small reads per parent).
ANCESTRY_DEADLINE_S = 0.05
#: Bytes of a parent's command line looked at: the options naming the container come first.
MAX_MONITOR_CMDLINE_BYTES = 16 * 1024
_MAX_STAT_BYTES = 4096
#: PID namespaces remembered; beyond this the memory is dropped and rebuilt.
MAX_REMEMBERED_NAMESPACES = 4096


def _read_prefix(path: Path, limit: int) -> bytes | None:
    """At most ``limit`` bytes from the start of a file, or None when it cannot be read."""
    # The one capped /proc reader (fileio.read_capped): non-blocking, close-on-exec, bounded.
    data, _ = read_capped(path, limit)
    return data


class RuntimeAncestry:
    """Finds the container of a process from its nearest runtime monitor ancestor.

    Args:
        proc_root: The ``/proc`` to read.
        depth: Parents climbed at most.
        deadline_s: Seconds one climb may take.
    """

    def __init__(
        self,
        proc_root: str | os.PathLike[str] = "/proc",
        *,
        depth: int = MAX_ANCESTRY_DEPTH,
        deadline_s: float = ANCESTRY_DEADLINE_S,
    ) -> None:
        self._root = Path(proc_root)
        self._depth = max(0, depth)
        self._deadline_s = deadline_s
        #: PID namespace (``pid:[inode]``) -> the container found for a process in it.
        self._by_namespace: dict[str, MonitorMatch] = {}
        self._own_namespace: str | None = None

    def _namespace(self, pid: int | str) -> str | None:
        try:
            return os.readlink(self._root / str(pid) / "ns" / "pid")
        except OSError:
            return None

    def resolve(self, pid: int) -> MonitorMatch | None:
        """The container ``pid`` runs in, by its runtime monitor ancestor, or None.

        A process in the reader's own PID namespace is a container's only when a monitor is
        among its parents (``--pid=host`` containers); one in another PID namespace whose
        parents cannot be read gets what another process of that namespace showed.

        Args:
            pid: PID as the reader sees it.

        Returns:
            The container, or None when no monitor is among the first parents (a host
            process), the parents cannot be read, or the climb ran out of time.
        """
        if self._own_namespace is None:
            self._own_namespace = self._namespace("self") or ""
        namespace = self._namespace(pid)
        if namespace is not None and namespace == self._own_namespace:
            namespace = None  # the host's (or gputui's own): shared by unrelated processes
        found = self._climb(pid)
        if namespace is None:
            return found
        if found is None:
            # The parents could not be read (or the climb ran out of time): another process
            # of the same PID namespace may have shown its container. Climbing comes first,
            # because containers may share one namespace (``--pid=container:<other>``).
            return self._by_namespace.get(namespace)
        if len(self._by_namespace) >= MAX_REMEMBERED_NAMESPACES:
            self._by_namespace.clear()
        self._by_namespace[namespace] = found
        return found

    def _climb(self, pid: int) -> MonitorMatch | None:
        deadline = time.monotonic() + self._deadline_s
        seen = {pid}
        current = pid
        for _ in range(self._depth):
            if time.monotonic() > deadline:
                return None
            stat = _read_prefix(self._root / str(current) / "stat", _MAX_STAT_BYTES)
            parent = parse_stat_ppid(stat.decode(errors="replace")) if stat else None
            if parent is None or parent <= 1 or parent in seen:
                return None  # init (or the top of a namespace) reached: no monitor above
            seen.add(parent)
            data = _read_prefix(self._root / str(parent) / "cmdline", MAX_MONITOR_CMDLINE_BYTES)
            if data:
                args = [a.decode(errors="replace") for a in data.split(b"\0") if a]
                found = parse_monitor_cmdline(args)
                if found is not None:
                    return found
            current = parent
        return None
