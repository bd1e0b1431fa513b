"""Every process of one container, from ``/proc`` and its cgroup: ``top`` in the container.

The container's cgroup is found from its init PID's ``/proc/<pid>/cgroup`` line (the unified
hierarchy, or the v1 ``pids`` / ``memory`` controller), when that path names the container;
its ``cgroup.procs`` files (the directory and its children, a bounded walk) list the PIDs. A
container without a cgroup of its own (a rootless engine on cgroup v1) has none to read: then
``/proc`` is scanned, a bounded number of PIDs, for those whose cgroup path names the container.

Each PID's facts are read from ``/proc/<pid>/stat``, ``status`` (``NSpid``, ``Uid``) and
``cmdline``, each read capped; CPU % is the difference between this reader's two last reads of
a PID (the reader keeps a sample per PID, for PIDs it listed last time only). One reader serves
one caller at a time (its lock): the inspect screen's worker, never the UI thread.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from gputui.collect.linux.cgroup_usage import cgroup_path_from_proc
from gputui.collect.linux.fileio import read_capped
from gputui.collect.linux.membership import parse_nspid_fields, path_names_container
from gputui.collect.linux.proc_parse import container_pid, parse_cmdline, parse_stat, real_uid
from gputui.collect.linux.users import UserNames
from gputui.model.containers import ContainerProcess, ContainerProcesses

#: The most processes one read describes (a container may run thousands: the rest are counted).
MAX_PROCESSES = 256
#: The most PIDs listed from the cgroup files, or scanned in ``/proc`` without a cgroup.
MAX_PIDS = 32_768
#: Sub-cgroups walked below the container's (systemd in a container makes a few).
MAX_CGROUP_DIRS = 64
#: Bytes read of each file: stat and status are under 2 KiB; a command line is cut there.
_STAT_BYTES = 4096
_STATUS_BYTES = 8192
_CMDLINE_BYTES = 4096
_CGROUP_BYTES = 4096
_PROCS_BYTES = 1 << 20
#: Characters of a command kept.
MAX_COMMAND_CHARS = 512
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class ContainerTop:
    """Reads one container's processes at a time (keeps CPU samples between reads).

    Args:
        proc_root: The host's ``/proc``.
        cgroup_root: Where the host's cgroup hierarchy is mounted.
        limit: The most processes one read describes.
    """

    def __init__(
        self,
        proc_root: str | os.PathLike[str] = "/proc",
        cgroup_root: str | os.PathLike[str] = "/sys/fs/cgroup",
        limit: int = MAX_PROCESSES,
    ) -> None:
        self._proc = Path(proc_root)
        self._cgroup = Path(cgroup_root)
        self._limit = limit
        self._lock = threading.Lock()
        #: PID -> (start ticks, CPU ticks, when read): the previous read's samples.
        self._samples: dict[int, tuple[int, int, float]] = {}
        self._users = UserNames()

    def read(self, container_id: str, init_pid: int | None) -> ContainerProcesses:
        """The container's processes, by host PID (at most the limit; the total counted).

        Args:
            container_id: The container's id (its cgroup path names it).
            init_pid: Host PID of its init process; None when it is not running.

        Returns:
            The processes, or an ``error`` saying why there are none.
        """
        if init_pid is None or init_pid <= 0:
            return ContainerProcesses(error="the container is not running: it has no processes")
        with self._lock:
            pids = self._pids(container_id, init_pid)
            if pids is None:
                return ContainerProcesses(
                    error=f"PID {init_pid} is gone or not this container's (it stopped?)"
                )
            now = time.monotonic()
            samples: dict[int, tuple[int, int, float]] = {}
            shown: list[ContainerProcess] = []
            # The init's NSpid depth is the container's PID namespace: a process in a
            # sub-namespace below it is shown with its PID in the container's, as everywhere.
            init = self._nspid(init_pid)
            for pid in sorted(pids)[: self._limit]:
                process = self._process(pid, now, samples, init)
                if process is not None:
                    shown.append(process)
            self._samples = samples  # only the PIDs listed now: the dict stays bounded
            total = max(len(pids), len(shown))
            return ContainerProcesses(tuple(shown), total)

    # --- which PIDs ---------------------------------------------------------------------------

    def _pids(self, container_id: str, init_pid: int) -> set[int] | None:
        text, _ = read_capped(self._proc / str(init_pid) / "cgroup", _CGROUP_BYTES)
        if text is None:
            return None
        lines = text.decode("utf-8", "replace")
        for controller, mount in ((None, ""), ("pids", "pids"), ("memory", "memory")):
            path = cgroup_path_from_proc(lines, controller)
            if path is None or not path_names_container(path, container_id):
                continue
            found = self._cgroup_pids(self._cgroup / mount / path.lstrip("/"))
            if found:
                return found
        if not any(path_names_container(line, container_id) for line in lines.splitlines()):
            # The init PID is in no cgroup of the container's: another process took the PID.
            return {init_pid} if self._scan_matches(init_pid, container_id) else None
        return self._scan(container_id) or {init_pid}

    def _cgroup_pids(self, top: Path) -> set[int]:
        """PIDs in ``top``'s ``cgroup.procs`` and its sub-cgroups' (bounded)."""
        pids: set[int] = set()
        queue, walked = [top], 0
        while queue and walked < MAX_CGROUP_DIRS and len(pids) < MAX_PIDS:
            folder = queue.pop(0)
            walked += 1
            data, _ = read_capped(folder / "cgroup.procs", _PROCS_BYTES)
            if data is None:
                continue
            for word in data.split()[: MAX_PIDS - len(pids)]:
                if word.isdigit() and len(word) < 9:
                    pids.add(int(word))
            try:
                with os.scandir(folder) as entries:
                    queue += [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)][
                        :MAX_CGROUP_DIRS
                    ]
            except OSError:
                continue
        return pids

    def _scan(self, container_id: str) -> set[int]:
        """Without a cgroup of its own: the PIDs whose cgroup names the container (bounded)."""
        found: set[int] = set()
        try:
            with os.scandir(self._proc) as entries:
                names = [e.name for e in entries if e.name.isdigit()][:MAX_PIDS]
        except OSError:
            return found
        for name in names:
            if self._scan_matches(int(name), container_id):
                found.add(int(name))
        return found

    def _scan_matches(self, pid: int, container_id: str) -> bool:
        data, _ = read_capped(self._proc / str(pid) / "cgroup", _CGROUP_BYTES)
        if data is None:
            return False
        text = data.decode("utf-8", "replace")
        return any(path_names_container(line, container_id) for line in text.splitlines())

    # --- one PID's facts ----------------------------------------------------------------------

    def _nspid(self, pid: int) -> tuple[int, ...]:
        status, _ = read_capped(self._proc / str(pid) / "status", _STATUS_BYTES)
        if status is None:
            return ()
        return parse_nspid_fields(status.decode("utf-8", "replace")) or ()

    def _process(
        self,
        pid: int,
        now: float,
        samples: dict[int, tuple[int, int, float]],
        init: tuple[int, ...] = (),
    ) -> ContainerProcess | None:
        folder = self._proc / str(pid)
        raw, _ = read_capped(folder / "stat", _STAT_BYTES)
        stat = parse_stat(raw.decode("utf-8", "replace")) if raw is not None else None
        if stat is None:
            return None  # gone since it was listed
        status, _ = read_capped(folder / "status", _STATUS_BYTES)
        cmdline, _ = read_capped(folder / "cmdline", _CMDLINE_BYTES + 1)
        nspid: int | None = None
        uid: int | None = None
        if status is not None:
            fields = parse_nspid_fields(status.decode("utf-8", "replace")) or ()
            nspid = container_pid(fields, (init,))
            uid = real_uid(status)
        argv = (
            parse_cmdline(cmdline[:_CMDLINE_BYTES], cut=len(cmdline) > _CMDLINE_BYTES)
            if cmdline
            else []
        )
        command = " ".join(argv) if argv else f"[{stat.comm}]"
        cpu: float | None = None
        before = self._samples.get(pid)
        if before is not None and before[0] == stat.start_ticks and now > before[2]:
            ticks = max(0, stat.cpu_ticks - before[1])
            cpu = round(100.0 * ticks / _CLOCK_TICKS / (now - before[2]), 1)
        samples[pid] = (stat.start_ticks, stat.cpu_ticks, now)
        return ContainerProcess(
            pid=pid,
            container_pid=nspid,
            user=self._user(uid),
            cpu_percent=cpu,
            rss_bytes=max(0, stat.rss_pages) * _PAGE,
            command=command[:MAX_COMMAND_CHARS],
            state=stat.state[:1],
        )

    def _user(self, uid: int | None) -> str:
        if uid is None:
            return "?"
        return self._users(uid)[:32]
