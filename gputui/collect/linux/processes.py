"""Host facts about PIDs, from ``/proc`` (the only module that imports psutil).

The live facts (command line, user, CPU, RSS, start time) are read from ``/proc/<pid>`` the way
psutil computes them, with the same results; the container id and the in-container PID come from
``<proc_root>/<pid>/cgroup`` and ``<proc_root>/<pid>/status``. ``proc_root`` exists so tests can
point those two files at a prepared directory while the live facts keep describing real
processes. psutil is imported only to send a signal (``send_signal``) and where ``/proc`` lacks
a field it needs (kernels without ``MemAvailable``), so ``--once`` never loads it.

Per-process files that are read on every refresh (``stat``, ``statm``) stay open between
refreshes and are read again with ``os.pread``: one syscall per file instead of four. A kept
descriptor names the process it was opened for, never a later one under the same PID (its reads
fail with ESRCH once that process is reaped), and it is closed as soon as its PID is gone, its
start time changes or nobody asks about it any more.

Up to :data:`FULL_READ_MAX` GPU processes, every one is read on every refresh. Beyond that a
refresh reads a rotating share of them, sized so that each is read again within
:data:`SAMPLE_WINDOW_S` (nvitop keeps per-process figures 5 s too); a process seen for the first
time is read at once (and once more at the next refresh, for its first CPU %), and one that exits
is read at the next refresh: a pidfd per process, all in one epoll set, says which exited with a
single non-blocking ``epoll_wait``. Each figure then carries the time it was read
(``ProcessInfo.sampled_at``), so the screen can say how old it is.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import pwd
import select
import signal
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from gputui.collect.linux.ancestry import RuntimeAncestry
from gputui.collect.linux.fileio import fd_budget
from gputui.collect.linux.membership import (
    MAX_CGROUP_CHARS,
    MAX_MOUNTINFO_CHARS,
    MAX_STATUS_CHARS,
    has_relative_path,
    hides_other_users,
    parse_cgroup,
    parse_nspid,
    parse_nspid_fields,
    parse_proc_mount,
)
from gputui.model import HostStats, ProcessInfo, Visibility

__all__ = ["ProcSource"]

#: psutil measures CPU time in clock ticks (10 ms); a sample over a shorter span than this is
#: mostly rounding noise, so the previous value is kept instead.
MIN_CPU_INTERVAL_S = 0.1
#: Bounds of :meth:`ProcSource.prime_cpu` (a one-shot's early CPU sample of every process).
PRIME_MAX_PIDS = 32_768
PRIME_BUDGET_S = 0.25
#: Start times are a tick count (10 ms ticks) plus the boot time, so two processes never differ by
#: less than a tick; the tolerance only absorbs float rounding. The boot time moves when the wall
#: clock is stepped, which then makes a signal be refused as "PID reused": the safe way to fail.
START_TIME_TOLERANCE_S = 0.005
_DEFAULT_PROC_ROOT = Path("/proc")
#: The kernel never hands out a PID above this (PID_MAX_LIMIT on 64-bit): anything larger from
#: NVML is garbage, and os.kill() would overflow a C int on it.
PID_MAX_LIMIT = 4_194_304
#: The inode of the initial (host) PID namespace, fixed by the kernel (PROC_PID_INIT_INO):
#: ``/proc/self/ns/pid`` names it exactly when gputui runs in the host's PID namespace.
HOST_PID_NS_LINK = f"pid:[{0xEFFFFFFC}]"
#: ``task->flags`` bit of a kernel thread (field 9 of ``/proc/<pid>/stat``).
PF_KTHREAD = 0x00200000
#: Read limits per file: stat is about 300 bytes (its command name is at most 64), statm under
#: 100; one argument may be 128 KiB (MAX_ARG_STRLEN), a longer command line is cut there.
MAX_STAT_BYTES = 4096
MAX_STATM_BYTES = 512
MAX_CMDLINE_BYTES = 128 * 1024
#: How often the /proc mount options (hidepid) are read again: a remount that fixes them is
#: noticed without a restart, and mountinfo is not read on every refresh.
MOUNT_RECHECK_S = 30.0
#: ``/proc/stat`` holds one line per CPU and per interrupt: tens of kB on large machines.
MAX_PROC_STAT_BYTES = 1 << 20
#: ``/proc/meminfo`` is about 1.5 kB.
MAX_MEMINFO_BYTES = 64 * 1024
#: Descriptors kept open for per-process files (``stat`` and ``statm``: two per process). Beyond
#: this, or half of what the soft ``RLIMIT_NOFILE`` leaves, further processes are read by
#: open/read/close: admission stops rather than evicting, because every PID is read once per
#: refresh in turn, so evicting the least recently read one would reopen a file on every read.
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
_OPEN_FLAGS = os.O_RDONLY | os.O_CLOEXEC


def kept_fd_budget() -> int:
    """How many descriptors the process source may keep open (see :data:`MAX_KEPT_FDS`)."""
    return fd_budget(MAX_KEPT_FDS, 2)


@dataclass(slots=True)
class _Tracked:
    """One process across refreshes: facts fixed for its lifetime, and the last CPU sample.

    The user and start time are read once, the command line and name when the process is first
    seen and again whenever it execs another program; a refresh otherwise reads only
    ``/proc/<pid>/stat`` and ``statm`` through descriptors kept open (``stat_fd``,
    ``statm_fd``; -1 when none is kept). Its start-time field detects PID reuse exactly (an
    integer tick count, no float tolerance needed) and its :attr:`_Stat.image` fields change on
    every exec. ``info`` is the last answer and ``info_key`` what it was built from: an
    unchanged process gets the same object back, not a new one per refresh.
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
    stat_fd: int = -1
    statm_fd: int = -1
    pidfd: int = -1
    info: ProcessInfo | None = None
    info_key: tuple[object, ...] | None = None


class _Stat(NamedTuple):
    """The fields of ``/proc/<pid>/stat`` gputui needs (a tuple: built on every refresh).

    Attributes:
        comm: The command name (field 2; at most 64 characters, kernel threads included).
        state: One-letter state (``R``, ``S``, ``Z``...).
        ppid: Parent PID.
        flags: ``task->flags`` (``PF_KTHREAD`` marks a kernel thread).
        cpu_ticks: User plus system time, in clock ticks.
        start_ticks: Start time in clock ticks since boot.
        rss_pages: Resident set size in pages.
        code_start: Start of the program text (0 when not permitted to see it).
        code_end: End of the program text.
        arg_start: Address of the argument block.
        arg_end: End of the argument block.
    """

    comm: str
    state: str
    ppid: int
    flags: int
    cpu_ticks: int
    start_ticks: int
    rss_pages: int
    code_start: int = 0
    code_end: int = 0
    arg_start: int = 0
    arg_end: int = 0

    @property
    def image(self) -> tuple[str, int, int, int, int]:
        """What an exec changes: the name and the addresses of the program text and arguments.

        A new program gets a new name, or (same binary, address space layout randomised) a new
        text address; the kernel shows the addresses as 0 to readers not allowed to trace the
        process, for whom the name alone tells.
        """
        return (self.comm, self.code_start, self.code_end, self.arg_start, self.arg_end)


#: The image of a process whose command line could not be read yet (never a real one: a
#: process always has a name).
_UNREAD_IMAGE: tuple[str, int, int, int, int] = ("", 0, 0, 0, 0)


def clean_text(value: str) -> str:
    """Turn undecodable bytes (lone surrogates from ``surrogateescape``) into U+FFFD.

    Command lines and names are decoded with ``surrogateescape`` (as psutil and ``os.fsdecode``
    do), so a process whose argv or name holds bytes that are not UTF-8 comes back with lone
    surrogates, which no UTF-8 writer accepts: ``gputui --once``, the exporter and the TUI would
    crash writing them. The replacement keeps every valid character, terminal escapes included
    (those are removed only where text is displayed, by ``fmt.safe_text``; JSON escapes them).
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        # surrogatepass, not surrogateescape: it encodes any lone surrogate, so this never raises.
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return value


#: Decimal digits of any 64-bit counter: a longer field is garbage, not a number.
_MAX_INT_DIGITS = 20


def _num(field: str) -> int:
    """A non-negative decimal stat field; ValueError for anything else (signs, huge numbers)."""
    if not field.isascii() or not field.isdigit() or len(field) > _MAX_INT_DIGITS:
        raise ValueError(field)
    return int(field)


def parse_stat(text: str) -> _Stat | None:
    """Parse ``/proc/<pid>/stat``; None when it is garbled or oversized.

    The command name (field 2) is in parentheses and may itself contain spaces and parentheses,
    so the fields are counted from the *last* closing parenthesis. Every number used must be
    plain ASCII digits of at most 20 characters (no signs, no 65-bit values).
    """
    if len(text) > MAX_STAT_BYTES:
        return None
    start, end = text.find("("), text.rfind(")")
    if start < 0 or end < start:
        return None
    fields = text[end + 2 :].split()
    if len(fields) < 22:
        return None
    # Field numbers in proc(5) are 1-based and count pid and comm: state is field 3, so field n
    # is fields[n - 3]. The text and argument addresses came with later kernels (2.6.x, 3.5):
    # absent means 0. The numbers are checked together: this runs for every process on every
    # refresh, and one check of the joined digits costs what one per field would cost each.
    count = len(fields)
    numbers = [fields[1], fields[6], fields[11], fields[12], fields[19], fields[21]]
    numbers += [fields[i] if i < count else "0" for i in (23, 24, 45, 46)]
    joined = "".join(numbers)
    if not (joined.isascii() and joined.isdigit()) or max(map(len, numbers)) > _MAX_INT_DIGITS:
        return None
    ppid, flags, utime, stime, start_ticks, rss, code_start, code_end, arg_start, arg_end = map(
        int, numbers
    )
    return _Stat(
        text[start + 1 : end][:64],
        fields[0][:1],
        ppid,
        flags,
        utime + stime,
        start_ticks,
        rss,
        code_start,
        code_end,
        arg_start,
        arg_end,
    )


def parse_cmdline(data: bytes, cut: bool = False) -> list[str]:
    """Split ``/proc/<pid>/cmdline`` bytes into arguments, the way psutil does.

    Arguments are NUL-separated with a trailing NUL; a process that rewrote its command line
    (``setproctitle``) may use spaces instead. Undecodable bytes become U+FFFD; line breaks are
    read as psutil reads them (CR and CR LF as LF).

    Args:
        data: The file's bytes.
        cut: The bytes stop at a read limit: the trailing NUL is missing, not the separators.

    Returns:
        The arguments; empty for a kernel thread or a zombie.
    """
    text = data.decode("utf-8", "surrogateescape").replace("\r\n", "\n").replace("\r", "\n")
    if not text:
        return []
    sep = "\x00" if text.endswith("\x00") or (cut and "\x00" in text) else " "
    if text.endswith(sep):
        text = text[:-1]
    args = text.split(sep)
    if sep == "\x00" and len(args) == 1 and " " in text:
        args = text.split(" ")
    return [clean_text(arg) for arg in args]


def read_capped(path: str | os.PathLike[str], limit: int) -> tuple[bytes | None, int]:
    """Read at most ``limit`` bytes of a file.

    Args:
        path: The file.
        limit: The most bytes to read; a longer file is cut there.

    Returns:
        ``(data, 0)``, or ``(None, errno)`` when it could not be opened or read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        return None, exc.errno or errno.EIO
    try:
        chunks: list[bytes] = []
        size = 0
        # /proc files arrive whole in one read; the loop is for the rest of the file system.
        while size < limit:
            chunk = os.read(fd, limit - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks), 0
    except OSError as exc:
        return None, exc.errno or errno.EIO
    finally:
        os.close(fd)


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
        self._host_pid_ns: bool | None = None
        self._relative_seen = False
        self._hidepid: str | None = None
        self._mount_read_at: float | None = None
        self._host_cpu: tuple[float, ...] | None = None
        #: Descriptors kept open now, and the most that may be.
        self._kept = 0
        self._kept_limit = kept_fd_budget()
        #: Per :meth:`read`: the boot time and user names looked up (a read sees one of each).
        self._boot_time: float | None = None
        self._users: dict[int, str] = {}
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
        if tracked.pidfd >= 0 or tracked.stat_fd < 0 or self._kept >= self._kept_limit:
            return
        try:
            pidfd = os.pidfd_open(pid)
        except (OSError, AttributeError):  # gone, or a kernel before 5.3: the rotation only
            return
        try:
            os.pread(tracked.stat_fd, 1, 0)
            if self._exits is None:
                self._exits = select.epoll()
            self._exits.register(pidfd, select.EPOLLIN)
        except OSError:
            os.close(pidfd)
            return
        tracked.pidfd = pidfd
        self._pidfd_owner[pidfd] = pid
        self._kept += 1

    @property
    def kept_fds(self) -> int:
        """How many descriptors of per-process files are open now."""
        return self._kept

    def tracked_pids(self) -> dict[str, frozenset[int]]:
        """The PIDs each per-process cache holds (for leak checks: churn tests and soaks)."""
        return {"tracked": frozenset(self._tracked), "file_facts": frozenset(self._file_facts)}

    def close(self) -> None:
        """Close every kept descriptor (the source still works: it opens them again)."""
        for pid in list(self._tracked):
            self._drop(pid)
        if self._exits is not None:
            self._exits.close()
            self._exits = None

    def __del__(self) -> None:
        # A source dropped without close() (tests, one-shot runs) must not leak descriptors.
        for tracked in getattr(self, "_tracked", {}).values():
            _close_fds(tracked)

    def _drop(self, pid: int) -> None:
        """Forget a tracked process and close its kept descriptors."""
        tracked = self._tracked.pop(pid, None)
        self._unrated.discard(pid)
        if tracked is not None:
            self._kept -= self._close_fds(tracked)

    def _close_fds(self, tracked: _Tracked) -> int:
        """Close the kept descriptors of one process (its pidfd too); how many were open."""
        self._pidfd_owner.pop(tracked.pidfd, None)
        return _close_fds(tracked)

    def _read_one(self, pid: int, wall: float | None) -> ProcessInfo:
        """Read one PID; ``wall`` is the time to record as ``sampled_at`` (None: this refresh)."""
        if not 0 < pid <= PID_MAX_LIMIT:
            return ProcessInfo(pid, exists=False)
        tracked = self._tracked.get(pid)
        stat = None if tracked is None else self._kept_stat(tracked)
        fd = -1
        if stat is None:
            # Not kept, or the kept descriptor failed (the process is gone: its PID may already
            # name another one), so open the file again, as for a process never seen.
            if tracked is not None:
                self._kept -= self._close_fds(tracked)
            stat, error, fd = self._read_stat(pid)
            if stat is None:
                self._drop(pid)
                if error in _DENIED:  # hidepid=1: the directory is listed, its files are not
                    return _hidden(pid)
                fixture = self._read_fixture_only(pid)
                if fixture is not None:
                    return fixture
                return _hidden(pid) if _exists_unseen(pid) else ProcessInfo(pid, exists=False)
        if tracked is None or tracked.start_ticks != stat.start_ticks:
            if tracked is not None:  # PID reused: the old process's container facts are wrong too.
                self._drop(pid)
                self._file_facts.pop(pid, None)
            tracked = self._track(pid, stat)
            if tracked is None:
                _close_fd(fd)
                return ProcessInfo(pid, exists=False)
        elif tracked.image != stat.image and not self._read_command(pid, tracked, stat):
            # The process exec'd another program: its command line and name are new.
            _close_fd(fd)
            self._drop(pid)
            return ProcessInfo(pid, exists=False)
        if fd >= 0:
            self._keep_stat_fd(tracked, fd)
        if wall is not None and tracked.pidfd < 0:
            self._watch_exit(pid, tracked)
        try:
            facts, facts_denied = self._facts(pid, tracked.start_time)
        except _Vanished:
            self._drop(pid)
            return ProcessInfo(pid, exists=False)
        zombie = stat.state == "Z"
        cpu = None if zombie else self._cpu_percent(tracked, stat.cpu_ticks)
        rss = None if zombie else self._rss(pid, stat, tracked)
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

    def _read_stat(self, pid: int) -> tuple[_Stat | None, int, int]:
        """``/proc/<pid>/stat`` opened afresh and parsed.

        Returns:
            (stat, 0, descriptor) with the descriptor left open when one may be kept (-1 when
            not), or (None, errno, -1); errno 0 when the file was garbled.
        """
        # Live facts always come from the real /proc (as psutil's do); a prepared proc_root only
        # stands in for the cgroup and status files.
        path = f"/proc/{pid}/stat"
        if self._kept >= self._kept_limit:
            data, error = read_capped(path, MAX_STAT_BYTES)
            if data is None:
                return None, error, -1
            return parse_stat(data.decode(errors="replace")), 0, -1
        try:
            fd = os.open(path, _OPEN_FLAGS)
        except OSError as exc:
            return None, exc.errno or errno.EIO, -1
        try:
            data = os.pread(fd, MAX_STAT_BYTES, 0)
        except OSError as exc:
            os.close(fd)
            return None, exc.errno or errno.EIO, -1
        stat = parse_stat(data.decode(errors="replace"))
        if stat is None:
            os.close(fd)
            return None, 0, -1
        return stat, 0, fd

    def _keep_stat_fd(self, tracked: _Tracked, fd: int) -> None:
        if tracked.stat_fd >= 0:  # cannot happen (closed before a fresh open); never leak one
            os.close(fd)
            return
        tracked.stat_fd = fd
        self._kept += 1

    def _kept_stat(self, tracked: _Tracked) -> _Stat | None:
        """``stat`` through the kept descriptor; None when none is kept or it failed."""
        if tracked.stat_fd < 0:
            return None
        try:
            data = os.pread(tracked.stat_fd, MAX_STAT_BYTES, 0)
        except OSError:  # ESRCH: the process it was opened for has been reaped
            return None
        return parse_stat(data.decode(errors="replace"))

    def _rss(self, pid: int, stat: _Stat, tracked: _Tracked) -> int:
        # statm is what psutil, ps and top report. stat's rss field differs: since Linux 6.16
        # statm sums the per-CPU counters exactly, stat reads their approximate total (a
        # quarter of the processes of a test machine differ by up to ~50 pages).
        data = None
        if tracked.statm_fd >= 0:
            try:
                data = os.pread(tracked.statm_fd, MAX_STATM_BYTES, 0)
            except OSError:
                self._kept -= _close_fd(tracked.statm_fd)
                tracked.statm_fd = -1
        if data is None:
            if tracked.stat_fd >= 0 and self._kept < self._kept_limit:
                data = self._open_statm(pid, tracked)
            else:
                data, _ = read_capped(f"/proc/{pid}/statm", MAX_STATM_BYTES)
        try:
            return _num((data or b"").decode(errors="replace").split()[1]) * _PAGE_SIZE
        except (IndexError, ValueError):
            return stat.rss_pages * _PAGE_SIZE

    def _open_statm(self, pid: int, tracked: _Tracked) -> bytes | None:
        """Open ``statm``, keep its descriptor with the process's, return its first read."""
        try:
            fd = os.open(f"/proc/{pid}/statm", _OPEN_FLAGS)
        except OSError:
            return None
        try:
            data = os.pread(fd, MAX_STATM_BYTES, 0)
        except OSError:
            os.close(fd)
            return None
        tracked.statm_fd = fd
        self._kept += 1
        return data

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

    def _track(self, pid: int, stat: _Stat) -> _Tracked | None:
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
        uid = _real_uid(data)
        if uid is None:
            return None, False
        name = self._users.get(uid)
        if name is None:
            try:
                name = pwd.getpwuid(uid).pw_name
            except KeyError:  # a uid with no passwd entry: psutil gives the number
                name = str(uid)
            self._users[uid] = name
        return clean_text(name), False

    def _start_time(self, start_ticks: int) -> float | None:
        """Start time in seconds since the epoch, as psutil computes it (ticks + boot time).

        The boot time is read once per :meth:`read` (psutil reads it on every call): the wall
        clock being stepped moves it, and a later read then sees the new one.
        """
        if self._boot_time is None:
            data, _ = read_capped("/proc/stat", MAX_PROC_STAT_BYTES)
            self._boot_time = _btime(data or b"")
        if self._boot_time is None:
            return None
        return start_ticks / _CLOCK_TICKS + self._boot_time

    def _read_command(self, pid: int, tracked: _Tracked, stat: _Stat) -> bool:
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
        # No container in the cgroup (a rootless engine on cgroup v1, ``ctr run``'s named ids),
        # or one of no known runtime: the runtime's monitor among the parents tells. A cgroup
        # that names a container keeps it (an engine nested in a container: the outer one).
        monitor = self._ancestry.resolve(pid) if match is None or match.runtime is None else None
        if monitor is not None and match is not None and monitor.container_id != match.container_id:
            monitor = None
        facts = _FileFacts(
            container_id=monitor.container_id if monitor else match.container_id if match else None,
            runtime=monitor.runtime if monitor else match.runtime if match else None,
            pod_uid=match.pod_uid if match else None,
            container_pid=parse_nspid(status_text) if status_text is not None else None,
            name=_status_field(status_text, "Name") if status_text is not None else None,
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
            import psutil  # only where meminfo lacks a field psutil can compute otherwise

            vm, sw = psutil.virtual_memory(), psutil.swap_memory()
            memory = (int(vm.total), int(vm.available), int(sw.total), int(sw.total - sw.free))
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

    def send_signal(self, pid: int, signum: int, start_time: float | None) -> str | None:
        """Send ``signum`` to ``pid`` if it is still the process that started at ``start_time``.

        Refused: PIDs that are not one process (0, negatives), PID 1, gputui itself and its
        parent, kernel threads, any PID while gputui is not known to be in the host PID namespace
        (NVML's host PIDs would name other processes here), and a process whose start time is
        unknown (a reused PID could not be told apart). The process is pinned with a pidfd
        before it is checked, so a PID reused between the checks and the signal is never hit.

        Args:
            pid: Host PID.
            signum: Signal number, e.g. ``signal.SIGTERM``.
            start_time: The start time the caller saw (``ProcessInfo.start_time``).

        Returns:
            None on success, else a one-line reason.
        """
        if pid <= 0:
            # os.kill(0 or negative) would signal whole process groups.
            return f"refusing to signal PID {pid}"
        if pid > PID_MAX_LIMIT:
            return f"refusing to signal PID {pid}: above the kernel's PID limit"
        if not 0 <= signum < signal.NSIG:
            # os.kill truncates large numbers to a C int: 2**32 + 9 would arrive as SIGKILL.
            return f"cannot send signal {signum} to process {pid}: not a signal number"
        # The namespace first: outside the host's, even "PID 1" or "PID 2" are not the
        # processes the numbers say, and that is the reason to give.
        host = self.visibility().host_pid_namespace
        if host is not True:
            why = (
                "gputui is not in the host PID namespace"
                if host is False
                else "gputui cannot tell whether it is in the host PID namespace"
            )
            return f"refusing to signal PID {pid}: {why}, so NVML's PID may name another process"
        refusal = _protected(pid)
        if refusal is not None:
            return refusal
        if start_time is None:
            return (
                f"refusing to signal PID {pid}: its start time is unknown, so a reused PID "
                "cannot be ruled out"
            )
        try:
            pidfd: int | None = os.pidfd_open(pid)
        except ProcessLookupError:
            return f"process {pid} has already exited"
        except OSError:
            pidfd = None  # kernel before 5.3: os.kill after the checks, a narrower race
        try:
            return self._checked_send(pid, signum, start_time, pidfd)
        finally:
            if pidfd is not None:
                os.close(pidfd)

    def _checked_send(
        self, pid: int, signum: int, start_time: float, pidfd: int | None
    ) -> str | None:
        """The checks that need the process itself, then the signal (through ``pidfd``)."""
        import psutil  # only here: reading and reporting never load it

        stat = self._signal_stat(pid)
        try:
            if not _same_start(psutil.Process(pid).create_time(), start_time):
                return f"PID {pid} now belongs to another process"
            if stat is None:
                return f"refusing to signal PID {pid}: cannot read /proc/{pid}/stat"
            if stat.flags & PF_KTHREAD or stat.ppid == 2:
                return f"refusing to signal PID {pid}: it is a kernel thread"
            if stat.state == "Z":
                return f"process {pid} has already exited (a zombie its parent has not reaped)"
            if pidfd is not None:
                signal.pidfd_send_signal(pidfd, signum)
            else:
                os.kill(pid, signum)
        except (psutil.NoSuchProcess, ProcessLookupError):
            return f"process {pid} has already exited"
        except (psutil.AccessDenied, PermissionError):
            return (
                f"permission denied: process {pid} belongs to {_owner(pid)} "
                "(run gputui as that user or root)"
            )
        except OSError as exc:  # Any other errno: the caller wants a reason, not a traceback.
            return f"cannot send signal {signum} to process {pid}: {exc.strerror or exc}"
        return None

    def _signal_stat(self, pid: int) -> _Stat | None:
        """``<proc_root>/<pid>/stat`` (the real one when a prepared root lacks it)."""
        data, _ = read_capped(self._root / str(pid) / "stat", MAX_STAT_BYTES)
        if data is None and self._fixture:
            data, _ = read_capped(f"/proc/{pid}/stat", MAX_STAT_BYTES)
        return None if data is None else parse_stat(data.decode(errors="replace"))


class EarlyCpuSample:
    """A one-shot's first CPU sample of every process and of the host, and when it was taken.

    Attributes:
        procs: The reader holding the sample (the one-shot's collection must use it).
        taken_at: ``time.monotonic()`` right after the sample.
    """

    __slots__ = ("procs", "taken_at")

    def __init__(self, procs: ProcSource, taken_at: float) -> None:
        self.procs = procs
        self.taken_at = taken_at


def early_cpu_sample() -> EarlyCpuSample:
    """Take a one-shot's first CPU sample now, before the rest of the program is loaded.

    ``--once`` measures CPU % over a window (two samples per process); taken this early, the
    window passes while the configuration, the Docker client and NVML load and start, instead
    of being waited for once NVML has answered.
    """
    procs = ProcSource()
    procs.host_stats()  # the host's CPU % is measured from here
    procs.prime_cpu()
    return EarlyCpuSample(procs, time.monotonic())


def _protected(pid: int) -> str | None:
    """Why ``pid`` must never be signalled from gputui, or None."""
    if pid == 1:
        return "refusing to signal PID 1: it is init (the whole system or container stops)"
    if pid == 2:
        return "refusing to signal PID 2: it is kthreadd, a kernel thread"
    if pid == os.getpid():
        return f"refusing to signal PID {pid}: it is gputui itself"
    if pid == os.getppid():
        return f"refusing to signal PID {pid}: it is gputui's parent process"
    return None


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


def _same_start(a: float | None, b: float | None) -> bool:
    """Whether two start times belong to the same process (None matches only None)."""
    if a is None or b is None:
        return a is b
    return abs(a - b) < START_TIME_TOLERANCE_S


def _status_field(status_text: str, key: str) -> str | None:
    """The value of ``key:`` in ``/proc/<pid>/status`` text (at most 64 characters), or None."""
    for line in status_text[:MAX_STATUS_CHARS].splitlines():
        name, sep, value = line.partition(":")
        if sep and name == key:
            return value.strip()[:64] or None
    return None


def _owner(pid: int) -> str:
    """User name (or uid) owning ``pid``, for messages; ``another user`` when unreadable."""
    import psutil

    try:
        return psutil.Process(pid).username()
    except (psutil.Error, OSError):
        return "another user"


def _close_fd(fd: int) -> int:
    """Close ``fd`` when it is one (>= 0); how many were closed (0 or 1)."""
    if fd < 0:
        return 0
    # EBADF cannot happen for a descriptor this module owns; closing is best effort.
    with contextlib.suppress(OSError):
        os.close(fd)
    return 1


def _close_fds(tracked: _Tracked) -> int:
    """Close the kept descriptors of one process; how many were open."""
    closed = _close_fd(tracked.stat_fd) + _close_fd(tracked.statm_fd) + _close_fd(tracked.pidfd)
    tracked.stat_fd = tracked.statm_fd = tracked.pidfd = -1
    return closed


def _real_uid(status: bytes) -> int | None:
    """The real uid from ``/proc/<pid>/status`` (the first number of its ``Uid:`` line)."""
    at = status.find(b"\nUid:")
    if at < 0:
        return None
    fields = status[at + 5 : status.find(b"\n", at + 5)].split()
    if not fields or not fields[0].isdigit() or len(fields[0]) > _MAX_INT_DIGITS:
        return None
    return int(fields[0])


def _btime(proc_stat: bytes) -> float | None:
    """The boot time (``btime``, seconds since the epoch) from ``/proc/stat``."""
    at = proc_stat.find(b"\nbtime ")
    if at < 0:
        return None
    value = proc_stat[at + 7 : proc_stat.find(b"\n", at + 7)].strip()
    if not value.isdigit() or len(value) > _MAX_INT_DIGITS:
        return None
    return float(value)


#: The ``cpu`` line's fields psutil reads (Linux 2.6.33+: user ... guest_nice).
_CPU_FIELDS = 10


def cpu_times(proc_stat: bytes) -> tuple[float, ...] | None:
    """Host CPU times in seconds from the first line of ``/proc/stat``, as psutil reads them.

    Returns:
        ``user, nice, system, idle, iowait, irq, softirq, steal, guest, guest_nice``; None when
        the line is missing or malformed.
    """
    line = proc_stat[: proc_stat.find(b"\n")] if b"\n" in proc_stat else proc_stat
    fields = line.split()
    if len(fields) < _CPU_FIELDS + 1 or fields[0] != b"cpu":
        return None
    values = fields[1 : _CPU_FIELDS + 1]
    if not all(v.isdigit() and len(v) <= _MAX_INT_DIGITS for v in values):
        return None
    return tuple(float(v) / _CLOCK_TICKS for v in values)


def busy_percent(before: tuple[float, ...], after: tuple[float, ...]) -> float:
    """Host CPU busy % between two :func:`cpu_times`, psutil's ``cpu_percent`` formula.

    Negative deltas count as 0; guest time is already in user/nice, so it is subtracted from
    the total; idle and iowait are not busy.
    """
    deltas = [max(0, b - a) for a, b in zip(before, after, strict=True)]
    total = sum(deltas) - deltas[8] - deltas[9]
    busy = total - deltas[3] - deltas[4]
    if total == 0:
        return 0.0
    return round(busy / total * 100, 1)


def parse_meminfo(meminfo: bytes) -> tuple[int, int, int, int] | None:
    """(total, available, swap total, swap used) in bytes from ``/proc/meminfo``.

    Returns:
        None when a line is missing (kernels before 3.14 have no ``MemAvailable``, which psutil
        then estimates from other lines).
    """
    wanted = {b"MemTotal:": 0, b"MemAvailable:": 0, b"SwapTotal:": 0, b"SwapFree:": 0}
    found = 0
    for line in meminfo.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] in wanted:
            if not fields[1].isdigit() or len(fields[1]) > _MAX_INT_DIGITS:
                return None
            wanted[fields[0]] = int(fields[1]) * 1024
            found += 1
            if found == len(wanted):
                break
    if found < len(wanted):
        return None
    return (
        wanted[b"MemTotal:"],
        wanted[b"MemAvailable:"],
        wanted[b"SwapTotal:"],
        wanted[b"SwapTotal:"] - wanted[b"SwapFree:"],
    )


#: Parents the drill-down's chain climbs at most (init is rarely more than a dozen away).
MAX_PARENT_DEPTH = 16
#: Seconds a parent-chain read may take in all; past it the chain stops where it got.
PARENT_CHAIN_DEADLINE_S = 0.5
#: Bytes of a parent's command line read (the chain shows one line per parent).
MAX_PARENT_CMDLINE_BYTES = 4096
#: How :func:`parent_chain`'s note begins when the process itself is gone.
EXITED_NOTE = "the process has exited"


@dataclass(frozen=True, slots=True)
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
    proc_root: str | os.PathLike[str] = _DEFAULT_PROC_ROOT,
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
        data, _ = read_capped(root / "stat", MAX_PROC_STAT_BYTES)
        boot = _btime(data or b"")
        if boot is None:
            return (), "the boot time is unreadable"
        if not _same_start(stat.start_ticks / _CLOCK_TICKS + boot, start_time):
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


def _chain_stat(root: Path, pid: int) -> _Stat | None:
    data, _ = read_capped(root / str(pid) / "stat", MAX_STAT_BYTES + 1)
    if data is None:
        return None
    return parse_stat(data.decode("utf-8", "surrogateescape"))
