"""Host facts about PIDs, from psutil and ``/proc`` (the only module that imports psutil).

psutil supplies the live facts (command line, user, CPU, RSS, start time); the container id and
the in-container PID come from ``<proc_root>/<pid>/cgroup`` and ``<proc_root>/<pid>/status``,
which psutil does not expose. ``proc_root`` exists so tests can point those two files at a
prepared directory while psutil keeps describing real processes.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import psutil

from gputui.collect.cgroups import has_relative_path, parse_cgroup, parse_nspid
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


@dataclass(slots=True)
class _Tracked:
    """A psutil handle kept across refreshes, so ``cpu_percent`` has a previous sample."""

    proc: psutil.Process
    sampled_at: float | None = None
    cpu_percent: float | None = None


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
        try:
            fresh = psutil.Process(pid)
        except psutil.NoSuchProcess:
            return self._read_fixture_only(pid)
        tracked = self._tracked.get(pid)
        # psutil's equality compares (pid, create time): a different process under the same PID
        # must start a new CPU sample rather than subtract the old process's CPU time.
        if tracked is None or tracked.proc != fresh:
            if tracked is not None:  # PID reused: the old process's container facts are wrong too.
                self._file_facts.pop(pid, None)
            tracked = self._tracked[pid] = _Tracked(fresh)
        proc = tracked.proc
        denied = False
        values: dict[str, object] = {}
        try:
            with proc.oneshot():
                for key, getter in (
                    ("cmdline", proc.cmdline),
                    ("name", proc.name),
                    ("user", proc.username),
                    ("rss", lambda: proc.memory_info().rss),
                    ("start", proc.create_time),
                    ("cpu", lambda: self._cpu_percent(tracked)),
                ):
                    try:
                        values[key] = getter()
                    except psutil.ZombieProcess:
                        continue  # A zombie still exists; it just has no cmdline/memory.
                    except psutil.AccessDenied:
                        denied = True
        except psutil.NoSuchProcess:
            self._tracked.pop(pid, None)
            return ProcessInfo(pid, exists=False)
        start = values.get("start")
        start_time = start if isinstance(start, float) else None
        try:
            facts, facts_denied = self._facts(pid, start_time)
        except _Vanished:
            self._tracked.pop(pid, None)
            return ProcessInfo(pid, exists=False)
        name = values.get("name")
        name = name if isinstance(name, str) else facts.name
        cmdline = values.get("cmdline")
        command = " ".join(cmdline) if isinstance(cmdline, list) and cmdline else name
        user, rss, cpu = values.get("user"), values.get("rss"), values.get("cpu")
        return ProcessInfo(
            pid,
            command=command,
            name=name,
            user=user if isinstance(user, str) else None,
            cpu_percent=cpu if isinstance(cpu, float) else None,
            rss_bytes=rss if isinstance(rss, int) else None,
            start_time=start_time,
            container_id=facts.container_id,
            runtime=facts.runtime,
            pod_uid=facts.pod_uid,
            container_pid=facts.container_pid,
            access_denied=denied or facts_denied,
        )

    def _cpu_percent(self, tracked: _Tracked) -> float | None:
        """CPU % since the previous sample; None until there is a previous sample."""
        now = self._clock()
        if tracked.sampled_at is None:
            tracked.proc.cpu_percent(interval=None)  # Primes psutil; its 0.0 means nothing yet.
            tracked.sampled_at = now
        elif now - tracked.sampled_at >= MIN_CPU_INTERVAL_S:
            tracked.cpu_percent = tracked.proc.cpu_percent(interval=None)
            tracked.sampled_at = now
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
