"""Host facts about PIDs, from psutil and ``/proc`` (the only module that imports psutil).

psutil supplies the live facts (command line, user, CPU, RSS, start time); the container id and
the in-container PID come from ``<proc_root>/<pid>/cgroup`` and ``<proc_root>/<pid>/status``,
which psutil does not expose. ``proc_root`` exists so tests can point those two files at a
prepared directory while psutil keeps describing real processes.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import psutil

from gputui.collect.linux.fileio import read_small
from gputui.collect.linux.membership import has_relative_path, parse_cgroup, parse_nspid
from gputui.model import HostStats, ProcessInfo, Visibility

__all__ = ["ProcSource"]

#: psutil measures CPU time in clock ticks (10 ms); a sample over a shorter span than this is
#: mostly rounding noise, so the previous value is kept instead.
MIN_CPU_INTERVAL_S = 0.1
#: Start times are a tick count (10 ms ticks) plus the boot time, so two processes never differ by
#: less than a tick; the tolerance only absorbs float rounding. The boot time moves when the wall
#: clock is stepped, which then makes a signal be refused as "PID reused": the safe way to fail.
START_TIME_TOLERANCE_S = 0.005
_DEFAULT_PROC_ROOT = Path("/proc")
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


@dataclass(slots=True)
class _Tracked:
    """One process across refreshes: facts fixed for its lifetime, and the last CPU sample.

    The command line, name, user and start time are read once (through psutil); afterwards a
    refresh reads only ``/proc/<pid>/stat`` (about 10 µs), whose start-time field also detects
    PID reuse exactly (an integer tick count, no float tolerance needed).
    """

    start_ticks: int
    command: str | None = None
    name: str | None = None
    user: str | None = None
    start_time: float | None = None
    denied: bool = False
    cpu_ticks: int | None = None
    sampled_at: float | None = None
    sampled_wall: float | None = None
    cpu_percent: float | None = None


@dataclass(frozen=True, slots=True)
class _Stat:
    """The fields of ``/proc/<pid>/stat`` a refresh needs."""

    state: str
    cpu_ticks: int
    start_ticks: int
    rss_pages: int


def clean_text(value: str) -> str:
    """Turn psutil's undecodable bytes (lone surrogates) into U+FFFD.

    psutil decodes command lines and names with ``surrogateescape``, so a process whose argv or
    name holds bytes that are not UTF-8 comes back with lone surrogates, which no UTF-8 writer
    accepts: ``gputui --once``, the exporter and the TUI would crash writing them. The
    replacement keeps every valid character, terminal escapes included (those are removed only
    where text is displayed, by ``fmt.safe_text``; JSON escapes them).
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        # surrogatepass, not surrogateescape: it encodes any lone surrogate, so this never raises.
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return value


def parse_stat(text: str) -> _Stat | None:
    """Parse ``/proc/<pid>/stat``; None when it is garbled.

    The command name (field 2) is in parentheses and may itself contain spaces and parentheses,
    so the fields are counted from the *last* closing parenthesis.
    """
    end = text.rfind(")")
    if end < 0:
        return None
    fields = text[end + 2 :].split()
    try:
        # Field numbers in proc(5) are 1-based and count pid and comm: state is field 3.
        return _Stat(
            state=fields[0],
            cpu_ticks=int(fields[11]) + int(fields[12]),
            start_ticks=int(fields[19]),
            rss_pages=int(fields[21]),
        )
    except (IndexError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class _FileFacts:
    """What the cgroup and status files said about one process (fixed for its lifetime)."""

    container_id: str | None = None
    runtime: str | None = None
    pod_uid: str | None = None
    container_pid: int | None = None
    name: str | None = None


class _Vanished(Exception):
    """The process disappeared while its files were being read."""


class ProcSource:
    """A :class:`~gputui.collect.sources.ProcessSource` over psutil and ``/proc``."""

    def __init__(
        self, proc_root: str | Path = "/proc", clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._root = Path(proc_root)
        self._fixture = self._root != _DEFAULT_PROC_ROOT
        self._clock = clock
        self._tracked: dict[int, _Tracked] = {}
        self._file_facts: dict[int, tuple[float | None, _FileFacts]] = {}
        self._host_pid_ns: bool | None = None
        self._relative_seen = False
        self._host_cpu_primed = False

    def read(self, pids: Iterable[int]) -> dict[int, ProcessInfo]:
        """Facts for each PID.

        Args:
            pids: Host PIDs (duplicates are fine).

        Returns:
            One entry per PID; ``exists=False`` for a PID that is gone.
        """
        wanted = set(pids)
        result = {pid: self._read_one(pid) for pid in wanted}
        # Forget processes nobody asks about any more: the caches stay as big as the GPU
        # process list, and a later PID reuse cannot inherit a stale entry.
        for cache in (self._tracked, self._file_facts):
            for pid in cache.keys() - wanted:
                del cache[pid]
        return result

    def _read_one(self, pid: int) -> ProcessInfo:
        if pid <= 0:
            return ProcessInfo(pid, exists=False)
        stat = self._read_stat(pid)
        if stat is None:
            return self._read_fixture_only(pid)
        tracked = self._tracked.get(pid)
        if tracked is None or tracked.start_ticks != stat.start_ticks:
            if tracked is not None:  # PID reused: the old process's container facts are wrong too.
                self._file_facts.pop(pid, None)
            tracked = self._track(pid, stat)
            if tracked is None:
                return ProcessInfo(pid, exists=False)
        try:
            facts, facts_denied = self._facts(pid, tracked.start_time)
        except _Vanished:
            self._tracked.pop(pid, None)
            return ProcessInfo(pid, exists=False)
        zombie = stat.state == "Z"
        return ProcessInfo(
            pid,
            command=tracked.command,
            name=tracked.name or facts.name,
            user=tracked.user,
            cpu_percent=None if zombie else self._cpu_percent(tracked, stat.cpu_ticks),
            rss_bytes=None if zombie else self._rss(pid, stat),
            start_time=tracked.start_time,
            container_id=facts.container_id,
            runtime=facts.runtime,
            pod_uid=facts.pod_uid,
            container_pid=facts.container_pid,
            access_denied=tracked.denied or facts_denied,
        )

    def _read_stat(self, pid: int) -> _Stat | None:
        # Live facts always come from the real /proc (as psutil's do); a prepared proc_root only
        # stands in for the cgroup and status files.
        text = read_small(f"/proc/{pid}/stat")
        return None if text is None else parse_stat(text)

    def _rss(self, pid: int, stat: _Stat) -> int:
        # statm is what psutil, ps and top report; stat's rss field can lag it by the per-CPU
        # counters the kernel has not folded in yet.
        text = read_small(f"/proc/{pid}/statm")
        try:
            return int((text or "").split()[1]) * _PAGE_SIZE
        except (IndexError, ValueError):
            return stat.rss_pages * _PAGE_SIZE

    def _track(self, pid: int, stat: _Stat) -> _Tracked | None:
        """Read the lifetime facts of a process seen for the first time (None: it is gone)."""
        tracked = _Tracked(stat.start_ticks)
        try:
            proc = psutil.Process(pid)
            with proc.oneshot():
                for key, getter in (
                    ("name", proc.name),
                    ("user", proc.username),
                    ("start_time", proc.create_time),
                    ("command", proc.cmdline),
                ):
                    try:
                        value = getter()
                    except psutil.ZombieProcess:
                        continue  # A zombie still exists; it just has no command line.
                    except psutil.AccessDenied:
                        tracked.denied = True
                        continue
                    if isinstance(value, list):  # the command line
                        setattr(tracked, key, clean_text(" ".join(value)) or None)
                    elif isinstance(value, str):
                        setattr(tracked, key, clean_text(value))
                    else:
                        setattr(tracked, key, value)
        except psutil.NoSuchProcess:
            if not self._fixture:
                return None
        tracked.command = tracked.command or tracked.name
        self._tracked[pid] = tracked
        return tracked

    def _cpu_percent(self, tracked: _Tracked, cpu_ticks: int) -> float | None:
        """CPU % since the previous sample (100 = one core); None until there is one."""
        now, wall = self._clock(), time.monotonic()
        if tracked.sampled_at is None or tracked.cpu_ticks is None:
            tracked.cpu_ticks, tracked.sampled_at, tracked.sampled_wall = cpu_ticks, now, wall
        elif now - tracked.sampled_at >= MIN_CPU_INTERVAL_S:
            # The injected clock decides *when* to sample (tests); the rate itself needs the
            # real elapsed time, because the CPU ticks are real.
            elapsed = wall - (tracked.sampled_wall or wall)
            if elapsed > 0:
                ticks = max(0, cpu_ticks - tracked.cpu_ticks)
                tracked.cpu_percent = round(100.0 * ticks / _CLOCK_TICKS / elapsed, 1)
            tracked.cpu_ticks, tracked.sampled_at, tracked.sampled_wall = cpu_ticks, now, wall
        return tracked.cpu_percent

    def _read_fixture_only(self, pid: int) -> ProcessInfo:
        """A PID psutil cannot see: gone, unless a prepared ``proc_root`` describes it."""
        self._tracked.pop(pid, None)
        # On the real /proc a directory that appears after NoSuchProcess is a new process under a
        # reused PID, so only a prepared root is trusted here.
        if not self._fixture or not (self._root / str(pid)).is_dir():
            return ProcessInfo(pid, exists=False)
        try:
            facts, denied = self._facts(pid, None)
        except _Vanished:
            return ProcessInfo(pid, exists=False)
        return ProcessInfo(
            pid,
            command=facts.name,
            name=facts.name,
            container_id=facts.container_id,
            runtime=facts.runtime,
            pod_uid=facts.pod_uid,
            container_pid=facts.container_pid,
            access_denied=denied,
        )

    def _facts(self, pid: int, start_time: float | None) -> tuple[_FileFacts, bool]:
        """Container id and in-container PID of one process, cached per (pid, start time).

        Returns:
            The facts and whether a file could not be read for lack of permission.

        Raises:
            _Vanished: The process went away (real ``/proc`` only).
        """
        cached = self._file_facts.get(pid)
        if cached is not None and _same_start(cached[0], start_time):
            return cached[1], False
        cgroup_text, cgroup_denied = self._read_text(pid, "cgroup")
        status_text, status_denied = self._read_text(pid, "status")
        match = None
        if cgroup_text is not None:
            self._relative_seen = self._relative_seen or has_relative_path(cgroup_text)
            match = parse_cgroup(cgroup_text)
        facts = _FileFacts(
            container_id=match.container_id if match else None,
            runtime=match.runtime if match else None,
            pod_uid=match.pod_uid if match else None,
            container_pid=parse_nspid(status_text) if status_text is not None else None,
            name=_status_field(status_text, "Name") if status_text is not None else None,
        )
        denied = cgroup_denied or status_denied
        if not denied:  # A permission failure may be fixed later (e.g. run as root); retry then.
            self._file_facts[pid] = (start_time, facts)
        return facts, denied

    def _read_text(self, pid: int, leaf: str) -> tuple[str | None, bool]:
        """Read ``<proc_root>/<pid>/<leaf>``: (text or None, permission denied)."""
        try:
            return (self._root / str(pid) / leaf).read_text(errors="replace"), False
        except PermissionError:
            return None, True
        except (FileNotFoundError, ProcessLookupError) as exc:
            # A prepared root may simply lack the file for a live process: that process then
            # looks like a host process. On the real /proc it means the process just exited.
            if self._fixture:
                return None, False
            raise _Vanished from exc
        except OSError:
            return None, False

    def host_stats(self) -> HostStats:
        """The host's CPU (since the previous call), load, memory and swap."""
        # psutil measures CPU between calls; the very first value covers nothing, so say N/A.
        cpu = psutil.cpu_percent(interval=None)
        first, self._host_cpu_primed = not self._host_cpu_primed, True
        try:
            load: tuple[float, float, float] | None = psutil.getloadavg()
        except OSError:
            load = None
        memory = psutil.virtual_memory()
        swap = psutil.swap_memory()
        return HostStats(
            cpu_percent=None if first else cpu,
            cpu_count=psutil.cpu_count(),
            load_avg=load,
            memory_used_bytes=int(memory.total - memory.available),
            memory_total_bytes=int(memory.total),
            swap_used_bytes=int(swap.used),
            swap_total_bytes=int(swap.total),
        )

    def visibility(self) -> Visibility:
        """Whether gputui sees the host PID namespace and the host cgroup namespace.

        Returns:
            Kernel thread ``kthreadd`` as PID 2 proves the host PID namespace (kernel threads
            live only there). ``..`` in any cgroup path read so far, or in PID 1's, proves a
            private cgroup namespace; PID 1's clean path proves the opposite only when PID 1 is
            the host's init, i.e. in the host PID namespace.
        """
        if self._host_pid_ns is None:
            try:
                comm = (self._root / "2" / "comm").read_text(errors="replace").strip()
                self._host_pid_ns = comm == "kthreadd"
            except FileNotFoundError:
                self._host_pid_ns = False
            except OSError:
                pass  # Unknown for now (permission, I/O); ask again next time.
        if not self._relative_seen:
            try:
                init_cgroup = (self._root / "1" / "cgroup").read_text(errors="replace")
            except OSError:
                init_cgroup = None
            if init_cgroup is not None and has_relative_path(init_cgroup):
                self._relative_seen = True
            elif init_cgroup is None or not self._host_pid_ns:
                return Visibility(self._host_pid_ns, None)
        return Visibility(self._host_pid_ns, self._relative_seen)

    def send_signal(self, pid: int, signum: int, start_time: float | None) -> str | None:
        """Send ``signum`` to ``pid`` if it is still the process that started at ``start_time``.

        Args:
            pid: Host PID.
            signum: Signal number, e.g. ``signal.SIGTERM``.
            start_time: The start time the caller saw (``ProcessInfo.start_time``); None skips the
                PID-reuse check because there is nothing to compare.

        Returns:
            None on success, else a one-line reason.
        """
        if pid <= 0:
            # os.kill(0 or negative) would signal whole process groups.
            return f"refusing to signal PID {pid}"
        if not 0 <= signum < signal.NSIG:
            # os.kill truncates large numbers to a C int: 2**32 + 9 would arrive as SIGKILL.
            return f"cannot send signal {signum} to process {pid}: not a signal number"
        try:
            proc = psutil.Process(pid)
            if start_time is not None and not _same_start(proc.create_time(), start_time):
                return f"PID {pid} now belongs to another process"
            if proc.status() == psutil.STATUS_ZOMBIE:
                return f"process {pid} has already exited (a zombie its parent has not reaped)"
            proc.send_signal(signum)
        except psutil.NoSuchProcess:
            return f"process {pid} has already exited"
        except psutil.AccessDenied:
            return (
                f"permission denied: process {pid} belongs to {_owner(pid)} "
                "(run gputui as that user or root)"
            )
        except OSError as exc:  # Any other errno: the caller wants a reason, not a traceback.
            return f"cannot send signal {signum} to process {pid}: {exc.strerror or exc}"
        return None


def _same_start(a: float | None, b: float | None) -> bool:
    """Whether two start times belong to the same process (None matches only None)."""
    if a is None or b is None:
        return a is b
    return abs(a - b) < START_TIME_TOLERANCE_S


def _status_field(status_text: str, key: str) -> str | None:
    """The value of ``key:`` in ``/proc/<pid>/status`` text, or None."""
    for line in status_text.splitlines():
        name, sep, value = line.partition(":")
        if sep and name == key:
            return value.strip() or None
    return None


def _owner(pid: int) -> str:
    """User name (or uid) owning ``pid``, for messages; ``another user`` when unreadable."""
    try:
        return psutil.Process(pid).username()
    except (psutil.Error, OSError):
        return "another user"
