"""Host PIDs of the PIDs an engine names, when the engine runs in a PID namespace of its own.

An engine's API gives PIDs in its own PID namespace (``State.Pid``, an exec's ``Pid``). For an
engine on the host they are host PIDs. For an engine inside a container (Docker under systemd in
a privileged podman container, Docker-in-Docker with its own PID namespace) they are not:
``/proc/<State.Pid>`` on the host is another process, or none. Read as a host PID it gave the
container no cgroup (no CPU or memory) and an inspect screen of "PID 172 is gone".

The engine's namespace is found from its socket: ``SO_PEERCRED`` names the process that made
the listening socket, in gputui's PID namespace, and that process's ``NSpid`` has one field per
namespace from gputui's down to its own. The engine sits at depth ``len(NSpid) - 1``: an engine
PID ``P`` is the host process whose ``NSpid`` field at that depth is ``P`` and that is in the
engine's namespace or below it. A sibling container's namespace at the same depth has its own
PID ``P``, so a candidate counts only when its cgroup names the container, or when it or one
of its parents is in the engine's namespace (the same ``/proc/<pid>/ns/pid``).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from gputui.collect.linux.fileio import read_capped
from gputui.collect.linux.membership import (
    parse_nspid_fields,
    parse_stat_ppid,
    path_names_container,
)
from gputui.model.records import record

__all__ = ["MAX_SCAN_PIDS", "EnginePids"]

#: The most ``/proc`` entries one scan reads (a host of thousands of processes fits).
MAX_SCAN_PIDS = 32_768
#: Parents climbed at most from a candidate to a process of the engine's namespace.
MAX_PARENTS = 32
_STATUS_BYTES = 8192
_SMALL_BYTES = 4096


@record
class _Namespace:
    depth: int
    link: str


class EnginePids:
    """Turns an engine's PIDs into host PIDs (one engine; the read and exec threads share it).

    Args:
        proc_root: The host's ``/proc``.
        peer_pid: The engine's process (``collect.docker.endpoint.socket_peer_pid``), in
            gputui's PID namespace; None when unknown: PIDs are then taken as they are, as for
            an engine on the host.
    """

    def __init__(self, proc_root: str | os.PathLike[str], peer_pid: int | None) -> None:
        self._proc = Path(proc_root)
        self._ns = self._namespace(peer_pid) if peer_pid else None
        #: Engine PID -> host PIDs with that PID at the engine's depth, from the last scan.
        self._scan: dict[int, list[int]] | None = None
        self._lock = threading.Lock()

    @property
    def depth(self) -> int:
        """How many PID namespaces the engine is below gputui's (0: the same, or unknown)."""
        return self._ns.depth if self._ns else 0

    def _namespace(self, pid: int) -> _Namespace | None:
        fields = self._nspid(pid)
        if not fields or len(fields) == 1:
            return None
        link = self._ns_link(pid)
        return _Namespace(len(fields) - 1, link) if link else None

    def _nspid(self, pid: int) -> tuple[int, ...] | None:
        data, _ = read_capped(self._proc / str(pid) / "status", _STATUS_BYTES)
        return parse_nspid_fields(data.decode("utf-8", "replace")) if data else None

    def _ns_link(self, pid: int) -> str | None:
        try:
            return os.readlink(self._proc / str(pid) / "ns" / "pid")
        except OSError:
            return None

    def host_pid(self, engine_pid: int, container_id: str) -> int | None:
        """The host PID of a process of ``container_id`` that the engine names ``engine_pid``.

        Args:
            engine_pid: The PID as the engine gives it.
            container_id: The container the process is in.

        Returns:
            ``engine_pid`` itself for an engine in gputui's namespace (or of unknown namespace);
            else the host PID, or None when no process of the engine's namespace has it.
        """
        ns = self._ns
        if ns is None:
            return engine_pid
        with self._lock:
            return self._find(engine_pid, container_id, ns)

    def _find(self, engine_pid: int, container_id: str, ns: _Namespace) -> int | None:
        scan = self._scan
        # The last scan first (one scan serves every container of a read); a PID it does not
        # have, or has for another process now, is looked for in a new one.
        for fresh in (False, True) if scan is not None else (True,):
            if fresh or scan is None:
                scan = self._scan = self._scan_proc(ns.depth)
            for pid in scan.get(engine_pid, ()):
                if self._belongs(pid, engine_pid, container_id, ns):
                    return pid
        return None

    def _scan_proc(self, depth: int) -> dict[int, list[int]]:
        """Every process's PID at ``depth``, for the processes that have one."""
        found: dict[int, list[int]] = {}
        try:
            names = os.listdir(self._proc)
        except OSError:
            return found
        seen = 0
        for name in names:
            if not name.isdigit():
                continue
            seen += 1
            if seen > MAX_SCAN_PIDS:
                break
            fields = self._nspid(int(name))
            if fields and len(fields) > depth:
                found.setdefault(fields[depth], []).append(int(name))
        return found

    def _belongs(self, pid: int, engine_pid: int, container_id: str, ns: _Namespace) -> bool:
        """Whether host ``pid`` is still the engine's ``engine_pid``, in ``container_id``."""
        fields = self._nspid(pid)
        if not fields or len(fields) <= ns.depth or fields[ns.depth] != engine_pid:
            return False  # gone, or a new process since the scan
        cgroup, _ = read_capped(self._proc / str(pid) / "cgroup", _SMALL_BYTES)
        if cgroup is not None and any(
            path_names_container(line.split(":", 2)[-1], container_id)
            for line in cgroup.decode("utf-8", "replace").splitlines()
        ):
            return True
        # A container without a cgroup of its own: one of its parents (the runtime's shim) is
        # in the engine's namespace, which a sibling namespace's process never has.
        current = pid
        for _ in range(MAX_PARENTS):
            if self._ns_link(current) == ns.link:
                return True
            stat, _ = read_capped(self._proc / str(current) / "stat", _SMALL_BYTES)
            parent = parse_stat_ppid(stat.decode("utf-8", "replace")) if stat else None
            if not parent or parent == current:
                return False
            current = parent
        return False
