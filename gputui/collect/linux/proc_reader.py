"""Host facts about GPU processes, from ``/proc/<pid>``: the per-PID reader.

The live facts (command line, user, CPU, RSS, start time) are read from ``/proc/<pid>`` the way
psutil computes them, with the same results; the container id and the in-container PID come from
``<proc_root>/<pid>/cgroup`` and ``<proc_root>/<pid>/status``. ``proc_root`` exists so tests can
point those two files at a prepared directory while the live facts keep describing real
processes. :class:`ProcSource` is the collector's process source: host figures and visibility
come from :mod:`~gputui.collect.linux.host_view`, signals go through
:mod:`~gputui.collect.linux.signals`.

Per-process files that are read on every refresh (``stat``, ``statm``) stay open between
refreshes in a :class:`~gputui.collect.linux.fileio.KeptFiles` (owner: the PID) and are read
again with ``os.pread``: one syscall per file instead of four. A kept descriptor names the
process it was opened for, never a later one under the same PID (its reads fail with ESRCH once
that process is reaped), and it is closed as soon as its PID is gone, its start time changes or
nobody asks about it any more.

Up to :data:`FULL_READ_MAX` GPU processes, every one is read on every refresh. Beyond that a
refresh reads a rotating share of them, sized so that each is read again within
:data:`SAMPLE_WINDOW_S` (nvitop keeps per-process figures 5 s too); a process seen for the first
time is read at once (and once more at the next refresh, for its first CPU %), and one that exits
is read at the next refresh: a pidfd per process, all in one epoll set, says which exited with a
single non-blocking ``epoll_wait``. Each figure then carries the time it was read
(``ProcessInfo.sampled_at``), so the screen can say how old it is.
"""

from __future__ import annotations

import errno
import math
import os
import select
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from gputui.collect.linux import signals
from gputui.collect.linux.ancestry import RuntimeAncestry
from gputui.collect.linux.cgroup_usage import EarlyCgroupCpu, early_cgroup_cpu
from gputui.collect.linux.fileio import KeptFiles, fd_budget, read_capped
from gputui.collect.linux.host_view import HostView, boot_time
from gputui.collect.linux.membership import (
    MAX_CGROUP_CHARS,
    MAX_STATUS_CHARS,
    CgroupMatch,
    parse_cgroup,
    parse_nspid_fields,
)
from gputui.collect.linux.parent_chain import ParentLink, parent_chain
from gputui.collect.linux.proc_parse import (
    MAX_STAT_BYTES,
    PID_MAX_LIMIT,
    ProcStat,
    clean_text,
    container_pid,
    parse_cmdline,
    parse_stat,
    parse_uint,
    real_uid,
    same_start,
    start_time_of,
    status_field,
)
from gputui.collect.linux.users import UserNames
from gputui.model.processes import ProcessInfo, Visibility
from gputui.model.records import record
from gputui.model.snapshot import HostStats

__all__ = ["EarlyCpuSample", "ProcSource", "early_cpu_sample"]

#: psutil measures CPU time in clock ticks (10 ms); a sample over a shorter span than this is
#: mostly rounding noise, so the previous value is kept instead.
MIN_CPU_INTERVAL_S = 0.1
#: Bounds of :meth:`ProcSource.prime_cpu` (a one-shot's early CPU sample of every process).
PRIME_MAX_PIDS = 32_768
PRIME_BUDGET_S = 0.25
_DEFAULT_PROC_ROOT = Path("/proc")
#: Read limits per file: statm is under 100 bytes; one argument may be 128 KiB (MAX_ARG_STRLEN),
#: a longer command line is cut there.
MAX_STATM_BYTES = 512
MAX_CMDLINE_BYTES = 128 * 1024
#: Descriptors kept open for per-process files (``stat``, ``statm`` and a pidfd: up to three per
#: process). Beyond this, or half of what the soft ``RLIMIT_NOFILE`` leaves, further processes
#: are read by open/read/close: admission stops rather than evicting, because every PID is read
#: once per refresh in turn, so evicting the least recently read one would reopen a file on
#: every read.
MAX_KEPT_FDS = 16_384
#: Up to this many GPU processes, every one is read on every refresh (and ``sampled_at`` stays
#: None: the figures are this refresh's). Beyond it a refresh reads a rotating share, never fewer
#: than this many: at 0.5 ms per 30 processes a refresh stays a few ms whatever the interval.
FULL_READ_MAX = 300
#: Beyond :data:`FULL_READ_MAX`, each process's CPU % and RSS are read again at least this often
#: (seconds); nvitop keeps its per-process figures for 5 s too.
SAMPLE_WINDOW_S = 5.0
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
#: Parents climbed at most to find the shallowest PID namespace of a process's container (a
#: process tree inside one container is rarely more than a few levels deep).
MAX_CONTAINER_ANCESTORS = 32
#: The key of a process's pidfd among its kept descriptors (never a path).
_PIDFD = "pidfd"


def kept_fd_budget() -> int:
    """How many descriptors the process source may keep open (see :data:`MAX_KEPT_FDS`)."""
    return fd_budget(MAX_KEPT_FDS, 2)


@dataclass(slots=True)
class _Tracked:
    """One process across refreshes: facts fixed for its lifetime, and the last CPU sample.

    The user and start time are read once, the command line and name when the process is first
    seen and again whenever it execs another program; a refresh otherwise reads only
    ``/proc/<pid>/stat`` and ``statm``, through descriptors kept open under the PID. Its
    start-time field detects PID reuse exactly (an integer tick count, no float tolerance
    needed) and its :attr:`ProcStat.image` fields change on every exec. ``pidfd`` is the
    process's kept pidfd (-1 when none), registered in the exit watch. ``info`` is the last
    answer and ``info_key`` what it was built from: an unchanged process gets the same object
    back, not a new one per refresh.
    """

    start_ticks: int
    image: tuple[str, int, int, int, int] = ("", 0, 0, 0, 0)
    command: str | None = None
    name: str | None = None
    user: str | None = None
    start_time: float | None = None
    denied: bool = False
    cpu_ticks: int | None = None
    sampled_at: float | None = None
    sampled_wall: float | None = None
    cpu_percent: float | None = None
    pidfd: int = -1
    info: ProcessInfo | None = None
    info_key: tuple[object, ...] | None = None


_UNREAD_IMAGE: tuple[str, int, int, int, int] = ("", 0, 0, 0, 0)


@record
class _FileFacts:
    """What the cgroup and status files said about one process (fixed for its lifetime)."""

    container_id: str | None = None
    runtime: str | None = None
    pod_uid: str | None = None
    container_pid: int | None = None
    name: str | None = None


class _Vanished(Exception):
    """The process disappeared while its files were being read."""


_DENIED = frozenset({errno.EACCES, errno.EPERM})
_TEXT_LIMITS = {"cgroup": MAX_CGROUP_CHARS, "status": MAX_STATUS_CHARS}


class ProcSource:
    """A :class:`~gputui.collect.sources.ProcessSource` over ``/proc``.

    Args:
        proc_root: Where the cgroup and status files are read (tests point it at a prepared
            directory; the live facts always come from the real ``/proc``).
        clock: Monotonic clock that decides when a process is due (tests inject one).
        wall: Wall clock for ``ProcessInfo.sampled_at``.
        full_read_max: Up to this many PIDs every one is read on every refresh; beyond it a
            rotating share of at least this many (see :data:`FULL_READ_MAX`).
        sample_window: Beyond ``full_read_max``, each PID is read again within this many
            seconds (see :data:`SAMPLE_WINDOW_S`).
    """

    def __init__(
        self,
        proc_root: str | Path = "/proc",
        clock: Callable[[], float] = time.monotonic,
        *,
        wall: Callable[[], float] = time.time,
        full_read_max: int = FULL_READ_MAX,
        sample_window: float = SAMPLE_WINDOW_S,
    ) -> None:
        self._root = Path(proc_root)
        self._fixture = self._root != _DEFAULT_PROC_ROOT
        self._clock = clock
        self._tracked: dict[int, _Tracked] = {}
        self._file_facts: dict[int, tuple[float | None, _FileFacts]] = {}
        self._ancestry = RuntimeAncestry(self._root)
        self._host = HostView(self._root, self._fixture)
        #: Descriptors of per-process files and pidfds kept open, by PID.
        self._files = KeptFiles(kept_fd_budget())
        #: Per :meth:`read`: the boot time and user names looked up (a read sees one of each).
        self._boot_time: float | None = None
        self._users = UserNames()
        self._wall = wall
        self._full_read_max = max(0, full_read_max)
        self._window = max(0.0, sample_window)
        #: Rotation order of the tracked processes (stale entries are skipped when reached),
        #: those with one CPU sample only (read again next refresh), and the clock at the last
        #: read (the interval sizes the rotating share).
        self._rotation: deque[tuple[int, _Tracked]] = deque()
        self._unrated: set[int] = set()
        self._last_read: float | None = None
        #: One epoll set of every kept pidfd (rotating mode only): the processes that exited.
        self._exits: select.epoll | None = None
        self._pidfd_owner: dict[int, int] = {}
        #: Processes read by the last :meth:`read` (for benchmarks and tests).
        self.last_read_count = 0
        #: First CPU samples taken by :meth:`prime_cpu` before the GPU PIDs were known:
        #: pid -> (start ticks, CPU ticks, clock, monotonic time).
        self._primed: dict[int, tuple[int, int, float, float]] = {}

    def read(self, pids: Iterable[int]) -> dict[int, ProcessInfo]:
        """Facts for each PID.

        Args:
            pids: Host PIDs (duplicates are fine).

        Returns:
            One entry per PID; ``exists=False`` for a PID that is gone, ``proc_hidden=True`` for
            one that exists but ``/proc`` does not show (``hidepid``).
        """
        wanted = set(pids)
        self._boot_time = None
        self._users.clear()
        now = self._clock()
        if len(wanted) <= self._full_read_max:
            result = {pid: self._read_one(pid, None) for pid in wanted}
            self.last_read_count = len(wanted)
        else:
            result = self._read_rotating(wanted, now)
        self._last_read = now
        self._primed = {}  # one read consumes the early samples; later ones are stale
        # Forget processes nobody asks about any more: the caches stay as big as the GPU
        # process list, a later PID reuse cannot inherit a stale entry, and their kept
        # descriptors are closed.
        for pid in self._tracked.keys() - wanted:
            self._drop(pid)
        for pid in self._file_facts.keys() - wanted:
            del self._file_facts[pid]
        if len(self._rotation) > 2 * len(self._tracked) + 64:
            # Entries of dropped processes leave the rotation when reached; reading every PID
            # on every refresh reaches none, so prune them here (amortised: at most this often).
            tracked = self._tracked
            self._rotation = deque(e for e in self._rotation if tracked.get(e[0]) is e[1])
        return result

    def _read_rotating(self, wanted: set[int], now: float) -> dict[int, ProcessInfo]:
        """Read the due share of ``wanted``; the others keep their last answer and its age.

        Due: processes never read (or never with an age: the previous refresh read every one),
        those with a single CPU sample, those whose pidfd says they exited, and the next ones
        in rotation order: enough that the whole list turns over within the sample window at
        the interval since the previous read, and never fewer than ``full_read_max``.
        """
        due = self._exited()
        due.update(self._unrated)
        elapsed = self._window if self._last_read is None else max(0.0, now - self._last_read)
        if elapsed >= self._window:
            share = len(wanted)
        else:
            share = max(self._full_read_max, math.ceil(len(wanted) * elapsed / self._window))
        rotation = self._rotation
        tracked_now = self._tracked
        for _ in range(len(rotation)):
            if share <= 0:
                break
            pid, entry = rotation.popleft()
            if tracked_now.get(pid) is not entry or pid not in wanted:
                continue  # gone, reused or no longer asked about: the entry ends here
            rotation.append((pid, entry))
            due.add(pid)
            share -= 1
        wall = self._wall()
        result = {}
        read = 0
        for pid in wanted:
            tracked = tracked_now.get(pid)
            info = None if tracked is None else tracked.info
            if pid in due or info is None or info.sampled_at is None:
                result[pid] = self._read_one(pid, wall)
                read += 1
            else:
                result[pid] = info
        self.last_read_count = read
        return result

    def _exited(self) -> set[int]:
        """PIDs whose pidfd became readable (the process exited) since it was registered."""
        if self._exits is None:
            return set()
        try:
            events = self._exits.poll(0)
        except OSError:
            return set()
        owner = self._pidfd_owner
        return {owner[fd] for fd, _ in events if fd in owner}

    def _watch_exit(self, pid: int, tracked: _Tracked) -> None:
        """Register a pidfd for ``pid`` so that its exit is seen without reading its files.

        Opened after the process's ``stat`` was read through its kept descriptor and checked
        again through it afterwards: a successful read means the process was not reaped when
        the pidfd was opened, so the PID could not name another process yet.
        """
        files, owner = self._files, str(pid)
        stat_path = f"/proc/{pid}/stat"
        if tracked.pidfd >= 0 or not files.holds(owner, stat_path) or not files.has_room():
            return
        try:
            pidfd = os.pidfd_open(pid)
        except (OSError, AttributeError):  # gone, or a kernel before 5.3: the rotation only
            return
        try:
            if files.read_kept(owner, stat_path, 1) is None:
                raise ProcessLookupError(pid)  # reaped since: the pidfd may name another
            if self._exits is None:
                self._exits = select.epoll()
            self._exits.register(pidfd, select.EPOLLIN)
        except OSError:
            os.close(pidfd)
            return
        if not files.adopt(owner, _PIDFD, pidfd):  # cannot happen (room was checked above)
            os.close(pidfd)  # closing also removes it from the epoll set
            return
        tracked.pidfd = pidfd
        self._pidfd_owner[pidfd] = pid

    @property
    def kept_fds(self) -> int:
        """How many descriptors of per-process files (and pidfds) are open now."""
        return len(self._files)

    def tracked_pids(self) -> dict[str, frozenset[int]]:
        """The PIDs each per-process cache holds (for leak checks: churn tests and soaks)."""
        return {"tracked": frozenset(self._tracked), "file_facts": frozenset(self._file_facts)}

    def parent_chain(
        self, pid: int, start_time: float | None
    ) -> tuple[tuple[ParentLink, ...], str | None]:
        """The drill-down's parent chain of ``pid`` (see :func:`parent_chain`), from ``/proc``."""
        return parent_chain(pid, start_time)

    def close(self) -> None:
        """Close every kept descriptor (the source still works: it opens them again)."""
        for pid in list(self._tracked):
            self._drop(pid)
        self._files.close()
        self._pidfd_owner.clear()
        if self._exits is not None:
            self._exits.close()
            self._exits = None

    def _drop(self, pid: int) -> None:
        """Forget a tracked process and close its kept descriptors."""
        tracked = self._tracked.pop(pid, None)
        self._unrated.discard(pid)
        self._close_kept(pid, tracked)

    def _close_kept(self, pid: int, tracked: _Tracked | None) -> None:
        """Close the kept descriptors of one PID (its pidfd too)."""
        if tracked is not None and tracked.pidfd >= 0:
            self._pidfd_owner.pop(tracked.pidfd, None)
            tracked.pidfd = -1
        self._files.close_owner(str(pid))

    def _read_one(self, pid: int, wall: float | None) -> ProcessInfo:
        """Read one PID; ``wall`` is the time to record as ``sampled_at`` (None: this refresh)."""
        if not 0 < pid <= PID_MAX_LIMIT:
            return ProcessInfo(pid, exists=False)
        tracked = self._tracked.get(pid)
        # Live facts always come from the real /proc (as psutil's do); a prepared proc_root only
        # stands in for the cgroup and status files.
        stat_path, owner = f"/proc/{pid}/stat", str(pid)
        stat = None
        if tracked is not None:
            # Fails (ESRCH) once the process the descriptor was opened for has been reaped.
            data = self._files.read_kept(owner, stat_path, MAX_STAT_BYTES)
            stat = None if data is None else parse_stat(data.decode(errors="replace"))
        fresh = stat is None
        if stat is None:
            # Not kept, or the kept descriptor failed (the process is gone: its PID may already
            # name another one), so open the file again, as for a process never seen; its
            # descriptor is kept while there is room.
            self._close_kept(pid, tracked)
            data, error = self._files.read_raw(owner, stat_path, MAX_STAT_BYTES)
            stat = None if data is None else parse_stat(data.decode(errors="replace"))
            if stat is None:
                self._drop(pid)  # a garbled file's descriptor is not kept either
                if error in _DENIED:  # hidepid=1: the directory is listed, its files are not
                    return _hidden(pid)
                fixture = self._read_fixture_only(pid)
                if fixture is not None:
                    return fixture
                return _hidden(pid) if _exists_unseen(pid) else ProcessInfo(pid, exists=False)
        if tracked is None or tracked.start_ticks != stat.start_ticks:
            if tracked is not None:  # PID reused: the old process's container facts are wrong too.
                # Only a fresh read sees a new start time: what is kept now is the new
                # process's stat descriptor, which stays.
                if not fresh:
                    self._close_kept(pid, tracked)
                del self._tracked[pid]
                self._unrated.discard(pid)
                self._file_facts.pop(pid, None)
            tracked = self._track(pid, stat)
            if tracked is None:
                self._close_kept(pid, None)
                return ProcessInfo(pid, exists=False)
        elif tracked.image != stat.image and not self._read_command(pid, tracked, stat):
            # The process exec'd another program: its command line and name are new.
            self._drop(pid)
            return ProcessInfo(pid, exists=False)
        if wall is not None and tracked.pidfd < 0:
            self._watch_exit(pid, tracked)
        try:
            facts, facts_denied = self._facts(pid, tracked.start_time, stat.ppid)
        except _Vanished:
            self._drop(pid)
            return ProcessInfo(pid, exists=False)
        zombie = stat.state == "Z"
        cpu = None if zombie else self._cpu_percent(tracked, stat.cpu_ticks)
        rss = None if zombie else self._rss(pid, stat)
        denied = tracked.denied or facts_denied
        if cpu is None and not zombie:
            self._unrated.add(pid)  # one sample so far: read again next refresh for a CPU %
        else:
            self._unrated.discard(pid)
        # The facts object is cached per process: the comparison is by identity first.
        key = (cpu, rss, denied, tracked.command, tracked.name, facts, wall)
        if tracked.info is not None and tracked.info_key == key:
            return tracked.info
        info = ProcessInfo(
            pid,
            command=tracked.command,
            name=tracked.name or facts.name,
            user=tracked.user,
            cpu_percent=cpu,
            rss_bytes=rss,
            start_time=tracked.start_time,
            container_id=facts.container_id,
            runtime=facts.runtime,
            pod_uid=facts.pod_uid,
            container_pid=facts.container_pid,
            access_denied=denied,
            sampled_at=wall,
        )
        tracked.info, tracked.info_key = info, key
        return info

    def _rss(self, pid: int, stat: ProcStat) -> int:
        # statm is what psutil, ps and top report. stat's rss field differs: since Linux 6.16
        # statm sums the per-CPU counters exactly, stat reads their approximate total (a
        # quarter of the processes of a test machine differ by up to ~50 pages).
        # Its descriptor is kept only with the process's stat descriptor (closed with it).
        files, owner = self._files, str(pid)
        data, _ = files.read_raw(
            owner,
            f"/proc/{pid}/statm",
            MAX_STATM_BYTES,
            keep=files.holds(owner, f"/proc/{pid}/stat"),
        )
        try:
            return parse_uint((data or b"").decode(errors="replace").split()[1]) * _PAGE_SIZE
        except (IndexError, ValueError):
            return stat.rss_pages * _PAGE_SIZE

    def prime_cpu(self, limit: int = PRIME_MAX_PIDS, budget_s: float = PRIME_BUDGET_S) -> int:
        """Take a first CPU sample of every process now, before the GPU PIDs are known.

        A one-shot report needs two samples of a process for its CPU %. Taken while NVML starts
        (on another thread: NVML's ctypes calls release the GIL), the first one is already old
        enough when NVML names the GPU processes, so ``--once`` does not wait for a second.
        One read of ``/proc/<pid>/stat`` per process; bounded in count and time.

        Args:
            limit: At most this many processes are sampled.
            budget_s: Stop after this many seconds (a host with a huge process table).

        Returns:
            The number of processes sampled.
        """
        deadline = time.monotonic() + budget_s
        primed: dict[int, tuple[int, int, float, float]] = {}
        try:
            entries = os.scandir("/proc")
        except OSError:
            return 0
        with entries:
            for entry in entries:
                if len(primed) >= limit or time.monotonic() > deadline:
                    break
                if not entry.name.isdigit():
                    continue
                data, _ = read_capped(f"/proc/{entry.name}/stat", MAX_STAT_BYTES)
                stat = None if data is None else parse_stat(data.decode(errors="replace"))
                if stat is not None:
                    primed[int(entry.name)] = (
                        stat.start_ticks,
                        stat.cpu_ticks,
                        self._clock(),
                        time.monotonic(),
                    )
        self._primed = primed
        return len(primed)

    def _track(self, pid: int, stat: ProcStat) -> _Tracked | None:
        """Read the lifetime facts of a process seen for the first time (None: it is gone)."""
        tracked = _Tracked(stat.start_ticks)
        early = self._primed.pop(pid, None)
        if early is not None and early[0] == stat.start_ticks:  # the same process, not a reuse
            tracked.cpu_ticks, tracked.sampled_at, tracked.sampled_wall = early[1:]
        owner = self._read_owner(pid)
        if owner is None:
            if not self._fixture:
                return None
        else:
            tracked.user, tracked.denied = owner
            tracked.start_time = self._start_time(stat.start_ticks)
        if not self._read_command(pid, tracked, stat) and not self._fixture:
            return None
        self._tracked[pid] = tracked
        self._rotation.append((pid, tracked))
        return tracked

    def _read_owner(self, pid: int) -> tuple[str | None, bool] | None:
        """The user a process runs as, as psutil names it (its real uid, or the uid in digits).

        Returns:
            (user or None, whether ``status`` was denied), or None when the process is gone.
        """
        data, error = read_capped(f"/proc/{pid}/status", MAX_STATUS_CHARS)
        if data is None:
            if error in (errno.ENOENT, errno.ESRCH):
                return None
            return None, error in _DENIED
        uid = real_uid(data)
        if uid is None:
            return None, False
        return clean_text(self._users(uid)), False

    def _start_time(self, start_ticks: int) -> float | None:
        """Start time in seconds since the epoch, as psutil computes it (ticks + boot time).

        The boot time is read once per :meth:`read` (psutil reads it on every call): the wall
        clock being stepped moves it, and a later read then sees the new one.
        """
        if self._boot_time is None:
            self._boot_time = boot_time()
        if self._boot_time is None:
            return None
        return start_time_of(start_ticks, self._boot_time)

    def _read_command(self, pid: int, tracked: _Tracked, stat: ProcStat) -> bool:
        """(Re)read the command line and name into ``tracked``; False when the process is gone.

        Read directly (not through psutil) so that the read is bounded: a command line can be
        megabytes long.
        """
        data, error = read_capped(f"/proc/{pid}/cmdline", MAX_CMDLINE_BYTES)
        args: list[str] = []
        if data is None:
            if error in _DENIED:
                tracked.denied = True
            elif error in (errno.ENOENT, errno.ESRCH):
                return False
        else:
            args = parse_cmdline(data, cut=len(data) >= MAX_CMDLINE_BYTES)
        command = " ".join(args) or None
        if command is not None and data is not None and len(data) >= MAX_CMDLINE_BYTES:
            command += "…"  # cut at the read limit
        name = stat.comm
        # comm is cut to 15 characters; psutil (and ps) then show argv[0]'s base name instead
        # when it starts with the same characters ("gnome-keyring-d" → "gnome-keyring-daemon").
        if len(name) >= 15 and args:
            extended = os.path.basename(args[0])
            if extended.startswith(name):
                name = extended
        tracked.name = name or None
        tracked.command = command or tracked.name
        # A command line read empty (the process was just exec'ing, or exiting) or not read for
        # another reason than a denial is not its command: leave the image unknown so that the
        # next refresh reads it again.
        tracked.image = stat.image if args or tracked.denied else _UNREAD_IMAGE
        return True

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

    def _read_fixture_only(self, pid: int) -> ProcessInfo | None:
        """A PID the real /proc does not show, as a prepared ``proc_root`` describes it.

        Returns:
            None when there is no prepared root describing it.
        """
        # On the real /proc a directory that appears after the stat read failed is a new process
        # under a reused PID, so only a prepared root is trusted here.
        if not self._fixture or not (self._root / str(pid)).is_dir():
            return None
        try:
            facts, denied = self._facts(pid, None, self._ppid(pid, real=False))
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

    def _facts(
        self, pid: int, start_time: float | None, ppid: int | None
    ) -> tuple[_FileFacts, bool]:
        """Container id and in-container PID of one process, cached per (pid, start time).

        The in-container PID is the ``NSpid`` field at the depth of the container's own PID
        namespace (:func:`~gputui.collect.linux.proc_parse.container_pid`), found among the
        process's ancestors in the same container when it has more than one field.

        Returns:
            The facts and whether a file could not be read for lack of permission.

        Raises:
            _Vanished: The process went away (real ``/proc`` only).
        """
        cached = self._file_facts.get(pid)
        if cached is not None and same_start(cached[0], start_time):
            return cached[1], False
        cgroup_text, cgroup_denied = self._read_text(pid, "cgroup")
        status_text, status_denied = self._read_text(pid, "status")
        match = None
        if cgroup_text is not None:
            self._host.note_cgroup(cgroup_text)
            match = parse_cgroup(cgroup_text)
        # No container in the cgroup (a rootless engine on cgroup v1, ``ctr run``'s named ids),
        # or one of no known runtime: the runtime's monitor among the parents tells. A cgroup
        # that names a container keeps it (an engine nested in a container: the outer one).
        monitor = self._ancestry.resolve(pid) if match is None or match.runtime is None else None
        if monitor is not None and match is not None and monitor.container_id != match.container_id:
            monitor = None
        name = None if status_text is None else status_field(status_text, "Name", MAX_STATUS_CHARS)
        facts = _FileFacts(
            container_id=monitor.container_id if monitor else match.container_id if match else None,
            runtime=monitor.runtime if monitor else match.runtime if match else None,
            pod_uid=match.pod_uid if match else None,
            container_pid=self._container_pid(status_text, match, ppid),
            name=name,
        )
        denied = cgroup_denied or status_denied
        if not denied:  # A permission failure may be fixed later (e.g. run as root); retry then.
            self._file_facts[pid] = (start_time, facts)
        return facts, denied

    def _read_text(self, pid: int, leaf: str) -> tuple[str | None, bool]:
        """Read ``<proc_root>/<pid>/<leaf>`` up to its size limit: (text or None, denied)."""
        data, error = read_capped(self._root / str(pid) / leaf, _TEXT_LIMITS[leaf])
        if data is not None:
            return data.decode(errors="replace"), False
        if error in _DENIED:
            return None, True
        if error in (errno.ENOENT, errno.ESRCH):
            # A prepared root may simply lack the file for a live process: that process then
            # looks like a host process. On the real /proc it means the process just exited.
            if self._fixture:
                return None, False
            raise _Vanished
        return None, False

    def _container_pid(
        self, status_text: str | None, match: CgroupMatch | None, ppid: int | None
    ) -> int | None:
        """The process's PID in its container's namespace (its own last field outside one)."""
        fields = None if status_text is None else parse_nspid_fields(status_text)
        if not fields:
            return None
        ancestors: list[tuple[int, ...]] = []
        if match is not None and len(fields) > 1 and ppid is not None:
            ancestors = self._container_ancestors(match.container_id, ppid)
        return container_pid(fields, ancestors)

    def _container_ancestors(self, container_id: str, parent: int) -> list[tuple[int, ...]]:
        """The ``NSpid`` fields of a process's ancestors in container ``container_id``.

        Climbs from ``parent`` while the parent's cgroup names the same container: the
        parent of the container's init (the runtime's shim) and of a ``docker exec``'d process
        is outside it. Stops at an unreadable parent, at a single field (nothing is shallower)
        and after :data:`MAX_CONTAINER_ANCESTORS`. A parent that exits meanwhile ends the
        climb; one whose PID was reused within the container has fields at least as deep as
        the container's, so the answer is never shallower than the container.
        """
        found: list[tuple[int, ...]] = []
        seen: set[int] = set()
        while 0 < parent <= PID_MAX_LIMIT and parent not in seen:
            if len(found) >= MAX_CONTAINER_ANCESTORS:
                break
            seen.add(parent)
            cgroup = self._read_quiet(parent, "cgroup")
            match = None if cgroup is None else parse_cgroup(cgroup)
            if match is None or match.container_id != container_id:
                break
            status = self._read_quiet(parent, "status")
            fields = None if status is None else parse_nspid_fields(status)
            if not fields:
                break
            found.append(fields)
            next_parent = self._ppid(parent)
            if len(fields) == 1 or next_parent is None:
                break
            parent = next_parent
        return found

    def _read_quiet(self, pid: int, leaf: str) -> str | None:
        """``<proc_root>/<pid>/<leaf>`` up to its size limit, or None (never raises)."""
        data, _ = read_capped(self._root / str(pid) / leaf, _TEXT_LIMITS[leaf])
        return None if data is None else data.decode(errors="replace")

    def _ppid(self, pid: int, real: bool = True) -> int | None:
        """The parent of ``pid`` from ``<proc_root>/<pid>/stat``; None when unreadable.

        Args:
            pid: The process.
            real: Read the real ``/proc`` when a prepared root lacks the file.
        """
        data, _ = read_capped(self._root / str(pid) / "stat", MAX_STAT_BYTES)
        if data is None and self._fixture and real:
            data, _ = read_capped(f"/proc/{pid}/stat", MAX_STAT_BYTES)
        stat = None if data is None else parse_stat(data.decode(errors="replace"))
        return None if stat is None else stat.ppid

    def host_stats(self) -> HostStats:
        """The host's CPU (since the previous call), load, memory and swap (:class:`HostView`)."""
        return self._host.host_stats()

    def visibility(self) -> Visibility:
        """What gputui sees of the host's processes (see :meth:`HostView.visibility`)."""
        return self._host.visibility()

    def send_signal(self, pid: int, signum: int, start_time: float | None) -> str | None:
        """Send ``signum`` to ``pid`` if it is still the process that started at ``start_time``.

        See :func:`gputui.collect.linux.signals.send_signal` for what is refused and why.

        Returns:
            None on success, else a one-line reason.
        """
        return signals.send_signal(
            pid,
            signum,
            start_time,
            host_pid_namespace=lambda: self.visibility().host_pid_namespace,
            proc_root=self._root,
        )


class EarlyCpuSample:
    """A one-shot's first CPU sample of every process and of the host, and when it was taken.

    Attributes:
        procs: The reader holding the sample (the one-shot's collection must use it).
        taken_at: ``time.monotonic()`` right after the sample.
        cgroups: The containers' cgroup CPU counters, read just before (None: unreadable).
    """

    __slots__ = ("cgroups", "procs", "taken_at")

    def __init__(
        self, procs: ProcSource, taken_at: float, cgroups: EarlyCgroupCpu | None = None
    ) -> None:
        self.procs = procs
        self.taken_at = taken_at
        self.cgroups = cgroups


def early_cpu_sample() -> EarlyCpuSample:
    """Take a one-shot's first CPU sample now, before the rest of the program is loaded.

    ``--once`` measures CPU % over a window (two samples per process); taken this early, the
    window passes while the configuration, the Docker client and NVML load and start, instead
    of being waited for once NVML has answered.
    """
    cgroups = early_cgroup_cpu()  # containers' CPU %, which needs a window as processes' does
    procs = ProcSource()
    procs.host_stats()  # the host's CPU % is measured from here
    procs.prime_cpu()
    return EarlyCpuSample(procs, time.monotonic(), cgroups)


def _hidden(pid: int) -> ProcessInfo:
    """A process that exists while ``/proc`` hides it from gputui (``hidepid``)."""
    return ProcessInfo(pid, exists=True, access_denied=True, proc_hidden=True)


def _exists_unseen(pid: int) -> bool:
    """Whether ``pid`` exists although ``/proc`` did not show it.

    ``kill(pid, 0)`` delivers nothing; EPERM means a process of another user holds the PID,
    which only ``hidepid`` keeps out of ``/proc``. Success (a process gputui may signal, so
    never hidden from it) means the PID was just reused: treated as gone, like ESRCH.
    """
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True
    except OSError:
        return False
    return False
