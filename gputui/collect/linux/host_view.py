"""The host as gputui sees it: CPU, load, memory and swap, and what ``/proc`` lets it see.

Host figures are read from ``/proc/stat`` and ``/proc/meminfo`` with psutil's formulas. The
visibility answers say whether PIDs mean what NVML means by them (the host PID namespace),
whether cgroup paths are whole (the host cgroup namespace), and whether ``hidepid`` hides other
users' processes.
"""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

from gputui.collect.linux import psutil_facts
from gputui.collect.linux.fileio import read_capped
from gputui.collect.linux.membership import (
    MAX_CGROUP_CHARS,
    MAX_MOUNTINFO_CHARS,
    MAX_STATUS_CHARS,
    has_relative_path,
    hides_other_users,
    parse_nspid_fields,
    parse_proc_mount,
)
from gputui.collect.linux.proc_parse import btime, busy_percent, cpu_times, parse_meminfo
from gputui.model.processes import Visibility
from gputui.model.snapshot import HostStats

#: The inode of the initial (host) PID namespace, fixed by the kernel (PROC_PID_INIT_INO):
#: ``/proc/self/ns/pid`` names it exactly when gputui runs in the host's PID namespace.
HOST_PID_NS_LINK = f"pid:[{0xEFFFFFFC}]"
#: How often the /proc mount options (hidepid) are read again: a remount that fixes them is
#: noticed without a restart, and mountinfo is not read on every refresh.
MOUNT_RECHECK_S = 30.0
#: ``/proc/stat`` holds one line per CPU and per interrupt: tens of kB on large machines.
MAX_PROC_STAT_BYTES = 1 << 20
#: ``/proc/meminfo`` is about 1.5 kB.
MAX_MEMINFO_BYTES = 64 * 1024


def boot_time(proc_stat: str | os.PathLike[str] = "/proc/stat") -> float | None:
    """The boot time (seconds since the epoch) from a ``/proc/stat`` file; None if unreadable."""
    data, _ = read_capped(proc_stat, MAX_PROC_STAT_BYTES)
    return btime(data or b"")


class HostView:
    """Host figures and visibility, from the real ``/proc`` or a prepared root.

    Args:
        proc_root: Where ``self``, PID 1's and PID 2's files are read for the visibility
            answers (tests point it at a prepared directory; host figures always come from the
            real ``/proc``).
        fixture: ``proc_root`` is a prepared directory, not the real ``/proc``.
    """

    def __init__(self, proc_root: Path, fixture: bool) -> None:
        self._root = proc_root
        self._fixture = fixture
        self._host_pid_ns: bool | None = None
        self._relative_seen = False
        self._hidepid: str | None = None
        self._mount_read_at: float | None = None
        self._host_cpu: tuple[float, ...] | None = None

    def note_cgroup(self, cgroup_text: str) -> None:
        """Take in a process's cgroup file: ``..`` in it proves a private cgroup namespace."""
        self._relative_seen = self._relative_seen or has_relative_path(cgroup_text)

    def host_stats(self) -> HostStats:
        """The host's CPU (since the previous call), load, memory and swap, as psutil gives them.

        Read from ``/proc/stat`` and ``/proc/meminfo`` with psutil's formulas; psutil itself is
        asked only on a kernel whose ``meminfo`` lacks ``MemAvailable`` or the swap lines.
        """
        data, _ = read_capped("/proc/stat", MAX_PROC_STAT_BYTES)
        times = cpu_times(data or b"")
        # CPU is measured between calls; the very first value covers nothing, so say N/A.
        cpu = None
        if times is not None:
            if self._host_cpu is not None:
                cpu = busy_percent(self._host_cpu, times)
            self._host_cpu = times
        try:
            load: tuple[float, float, float] | None = os.getloadavg()
        except OSError:
            load = None
        data, _ = read_capped("/proc/meminfo", MAX_MEMINFO_BYTES)
        memory = parse_meminfo(data or b"")
        if memory is None:
            memory = psutil_facts.memory_and_swap()
        total, available, swap_total, swap_used = memory
        try:  # psutil.cpu_count(): online CPUs, None when the count is not positive
            cpus: int | None = os.sysconf("SC_NPROCESSORS_ONLN")
        except (OSError, ValueError):
            cpus = os.cpu_count()
        if cpus is not None and cpus < 1:
            cpus = None
        return HostStats(
            cpu_percent=cpu,
            cpu_count=cpus,
            load_avg=load,
            memory_used_bytes=total - available,
            memory_total_bytes=total,
            swap_used_bytes=swap_used,
            swap_total_bytes=swap_total,
        )

    def visibility(self) -> Visibility:
        """Whether gputui sees the host PID namespace, the host cgroup namespace, all processes.

        Returns:
            The host PID namespace is proven by ``<proc>/self/ns/pid`` naming the initial PID
            namespace (its inode is fixed) while ``/proc`` shows gputui's own namespace (a single
            ``NSpid`` field); without the link, by kernel thread ``kthreadd`` as PID 2. ``..``
            in any cgroup path read so far, or in PID 1's, proves a private cgroup namespace;
            PID 1's clean path proves the opposite only when PID 1 is the host's init, i.e. in
            the host PID namespace. ``hidepid`` comes from the mount options of ``/proc``.
        """
        hidepid = self._proc_hidepid()
        if self._host_pid_ns is None:
            self._host_pid_ns = self._detect_host_pid_ns(hidepid is not None)
        if not self._relative_seen:
            data, _ = read_capped(self._root / "1" / "cgroup", MAX_CGROUP_CHARS)
            init_cgroup = None if data is None else data.decode(errors="replace")
            if init_cgroup is not None and has_relative_path(init_cgroup):
                self._relative_seen = True
            elif init_cgroup is None or not self._host_pid_ns:
                return Visibility(self._host_pid_ns, None, hidepid)
        return Visibility(self._host_pid_ns, self._relative_seen, hidepid)

    def _detect_host_pid_ns(self, hidden: bool) -> bool | None:
        """True/False when proven, None when it cannot be told (asked again next time)."""
        try:
            link: str | None = os.readlink(self._root / "self" / "ns" / "pid")
        except OSError:
            link = None  # a prepared root without it, or a kernel without namespaces
        same_view = self._proc_shows_own_namespace()
        if link is not None:
            if link != HOST_PID_NS_LINK:
                return False
            return same_view
        if same_view is False:
            return False
        data, error = read_capped(self._root / "2" / "comm", 64)
        if data is not None:
            return data.decode(errors="replace").strip() == "kthreadd" and same_view
        if error == errno.ENOENT and not hidden:
            return False
        # Unknown for now (permission, I/O, or hidepid hiding kthreadd); ask again next time.
        return None

    def _proc_shows_own_namespace(self) -> bool | None:
        """Whether ``/proc`` shows gputui's own PID namespace (not an ancestor's or another's).

        ``NSpid`` lists a PID from the namespace of the ``/proc`` mount down to the process's
        own: a single field means both are the same, so PIDs and ``/proc`` entries agree.
        """
        data, _ = read_capped(self._root / "self" / "status", MAX_STATUS_CHARS)
        if data is None:
            # Unresolvable /proc/self: the mount belongs to a namespace gputui is not in.
            return True if self._fixture else None
        fields = parse_nspid_fields(data.decode(errors="replace"))
        if fields is None:
            return True if self._fixture else None
        if len(fields) > 1:
            return False
        return self._fixture or fields[0] == os.getpid()

    def _proc_hidepid(self) -> str | None:
        """The ``hidepid`` value of the ``/proc`` mount when it hides processes from gputui."""
        now = time.monotonic()
        if self._mount_read_at is not None and now - self._mount_read_at < MOUNT_RECHECK_S:
            return self._hidepid
        self._mount_read_at = now
        data, _ = read_capped(self._root / "self" / "mountinfo", MAX_MOUNTINFO_CHARS)
        mount = None if data is None else parse_proc_mount(data.decode(errors="replace"))
        groups = frozenset((os.getegid(), *os.getgroups()))
        self._hidepid = (
            mount.hidepid if mount and hides_other_users(mount, os.geteuid(), groups) else None
        )
        return self._hidepid
