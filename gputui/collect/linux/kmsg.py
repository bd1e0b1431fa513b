"""Following the kernel log (``/dev/kmsg``) for NVIDIA XID lines and OOM kills.

``/dev/kmsg`` hands out one record per ``read(2)``; opened non-blocking, a read at the end fails
with ``EAGAIN`` instead of waiting, and one whose record was overwritten in the ring buffer
meanwhile fails once with ``EPIPE`` (the next read returns the oldest record left). The reader
starts at the oldest record and keeps the faults of the last ``lookback_s`` seconds (the recent
past: what happened while gputui was not running), then follows new records.

Like the NVML slow lane, it runs on a thread of its own with its own cadence (or inline, for
``--once`` and tests), and everything is bounded: records per cycle, bytes per record, faults
kept between two collections. A line is matched with a cheap byte test before it is decoded,
so the kernel's other chatter costs one ``read`` each.
"""

from __future__ import annotations

import collections
import contextlib
import os
import threading
import time
from collections.abc import Callable

from gputui.collect.linux.kernel_faults import (
    MAX_RECORD_BYTES,
    KmsgRecord,
    OomContext,
    OomKill,
    XidLine,
    parse_line,
    parse_record,
)
from gputui.model.records import record
from gputui.model.status import SourceStatus

__all__ = [
    "KMSG_FIX",
    "KMSG_PATH",
    "FaultLine",
    "KmsgReader",
    "read_history",
]

KMSG_PATH = "/dev/kmsg"
#: The most records one cycle reads: a full 16 MiB ring buffer holds about 150,000.
MAX_RECORDS_PER_CYCLE = 50_000
#: Faults kept for the collector between two collections (a flood beyond this drops the oldest).
MAX_PENDING = 1024
#: OOM contexts (``oom-kill:`` lines) waiting for their ``Killed process`` line.
MAX_OOM_CONTEXTS = 32
#: Seconds between attempts to open ``/dev/kmsg`` after it could not be opened.
REOPEN_S = 30.0
#: The byte tests a record must pass before it is decoded and parsed.
_NEEDLES = (b"NVRM: Xid", b"Killed process", b"oom-kill:", b"killed as a result of limit")

#: What to do when the kernel log cannot be read.
KMSG_FIX = (
    "Reading the kernel log (/dev/kmsg) needs CAP_SYSLOG while kernel.dmesg_restrict=1: run "
    "gputui as root or give it the capability (setcap cap_syslog+ep, or --cap-add SYSLOG and "
    "--device /dev/kmsg for a container), or set sysctl kernel.dmesg_restrict=0."
)


@record
class FaultLine:
    """One kernel-log record that is an XID line or an OOM kill.

    Attributes:
        record: The record (sequence number, time stamp, text).
        at: When it was logged, seconds since the epoch.
        parsed: Its facts.
        oom_context: For an OOM kill, the ``oom-kill:`` (or ``Task in``) line before it.
    """

    record: KmsgRecord
    at: float
    parsed: XidLine | OomKill
    oom_context: OomContext | None = None


def boot_time(wall: Callable[[], float] = time.time) -> float:
    """The wall-clock time of boot as the kernel log's time stamps count from it.

    printk stamps records with the local clock, which counts from boot like CLOCK_MONOTONIC
    (neither counts suspend), so the wall clock minus the monotonic clock is the base.
    """
    return wall() - time.clock_gettime(time.CLOCK_MONOTONIC)


class _Matcher:
    """Turns records into fault lines, pairing each OOM kill with the context line before it."""

    def __init__(self) -> None:
        self._contexts: collections.OrderedDict[int | None, OomContext] = collections.OrderedDict()

    def feed(self, record: KmsgRecord, at: float) -> FaultLine | None:
        parsed = parse_line(record.message)
        if parsed is None:
            return None
        if isinstance(parsed, OomContext):
            # Keyed by PID (5.x lines) or None (the 4.x "Task in" line, PID in the next line).
            self._contexts[parsed.pid] = parsed
            self._contexts.move_to_end(parsed.pid)
            while len(self._contexts) > MAX_OOM_CONTEXTS:
                self._contexts.popitem(last=False)
            return None
        context = None
        if isinstance(parsed, OomKill):
            context = self._contexts.pop(parsed.pid, None) or self._contexts.pop(None, None)
        return FaultLine(record, at, parsed, context)


def _open(path: str) -> tuple[int | None, SourceStatus]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except PermissionError as exc:
        return None, SourceStatus(
            "kmsg", ok=False, error=f"{path}: {exc.strerror}", kind="permission", fix=KMSG_FIX
        )
    except FileNotFoundError:
        return None, SourceStatus(
            "kmsg",
            ok=False,
            error=f"{path} does not exist (a container without the device)",
            kind="not_found",
            fix=KMSG_FIX,
        )
    except OSError as exc:
        return None, SourceStatus(
            "kmsg", ok=False, error=f"{path}: {exc.strerror or exc}", kind="error", fix=KMSG_FIX
        )
    return fd, SourceStatus("kmsg", ok=True)


class KmsgReader:
    """Follows ``/dev/kmsg`` and keeps the fault lines for the collector.

    Args:
        path: The kernel log device (a test may point it elsewhere).
        lookback_s: On start, keep the faults of this many seconds before now.
        interval: Seconds between reads on the background thread.
        background: Read on a daemon thread (False: :meth:`drain` reads inline first).
        wall: Wall clock.
    """

    def __init__(
        self,
        path: str = KMSG_PATH,
        *,
        lookback_s: float = 3600.0,
        interval: float = 1.0,
        background: bool = True,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._path = path
        self._lookback_s = lookback_s
        self._interval = interval
        self._background = background
        self._wall = wall
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._status = SourceStatus("kmsg", ok=False, error="not read yet", kind="Pending")
        self._reopen_at = 0.0
        self._since: float | None = None
        self._pending: collections.deque[FaultLine] = collections.deque(maxlen=MAX_PENDING)
        self._matcher = _Matcher()
        self.lost_records = 0
        self.dropped_faults = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- what the collector picks up ---------------------------------------------------------

    def status(self) -> SourceStatus:
        """Whether the kernel log could be read, and if not, why and what to do."""
        with self._lock:
            return self._status

    def drain(self) -> list[FaultLine]:
        """The fault lines read since the last call, oldest first (inline mode reads first)."""
        if not self._background:
            self.poll()
        return self.take()

    def take(self) -> list[FaultLine]:
        """The fault lines read since the last call, oldest first (no read)."""
        with self._lock:
            out = list(self._pending)
            self._pending.clear()
        return out

    # -- running ----------------------------------------------------------------------------

    def poll(self) -> int:
        """One cycle: read what the kernel log holds now (bounded); how many records were read."""
        fd = self._ensure_open()
        if fd is None:
            return 0
        base = boot_time(self._wall)
        if self._since is None:
            self._since = self._wall() - self._lookback_s
        since = self._since
        found: list[FaultLine] = []
        count = 0
        while count < MAX_RECORDS_PER_CYCLE:
            try:
                data = os.read(fd, MAX_RECORD_BYTES)
            except BlockingIOError:
                break  # nothing more for now
            except BrokenPipeError:
                self.lost_records += 1  # overwritten before we read it; the next read goes on
                continue
            except InterruptedError:
                continue
            except OSError as exc:
                self._close(f"{self._path}: {exc.strerror or exc}", "error")
                break
            if not data:
                break
            count += 1
            if not any(needle in data for needle in _NEEDLES):
                continue
            record = parse_record(data)
            if record is None:
                continue
            at = base + record.usec / 1e6
            line = self._matcher.feed(record, at)
            if line is not None and at >= since:
                found.append(line)
        if found:
            with self._lock:
                room = MAX_PENDING - len(self._pending)
                if len(found) > room:
                    self.dropped_faults += len(found) - room
                self._pending.extend(found)
        return count

    def _ensure_open(self) -> int | None:
        if self._fd is not None:
            return self._fd
        now = time.monotonic()
        if now < self._reopen_at:
            return None
        self._reopen_at = now + REOPEN_S
        fd, status = _open(self._path)
        with self._lock:
            self._status = status
        if fd is not None:
            # The oldest record still in the ring buffer: the recent past is filtered by time.
            with contextlib.suppress(OSError):
                os.lseek(fd, 0, os.SEEK_SET)
        self._fd = fd
        return fd

    def _close(self, error: str, kind: str) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        with self._lock:
            self._status = SourceStatus("kmsg", ok=False, error=error, kind=kind, fix=KMSG_FIX)

    def start(self) -> None:
        """Read on a daemon thread until :meth:`stop`."""
        if self._thread is None and self._background:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="gputui-kmsg", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            # A full cycle (50,000 records) means more is waiting: go on without a pause.
            if self.poll() < MAX_RECORDS_PER_CYCLE:
                self._stop.wait(self._interval)

    def close(self) -> None:
        """Stop the thread (within about one interval) and close the device (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(2.0, self._interval * 2))
            self._thread = None
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


def read_history(
    since: float, path: str = KMSG_PATH, wall: Callable[[], float] = time.time
) -> tuple[list[FaultLine], SourceStatus]:
    """Every fault line the kernel log still holds from ``since`` on (``gputui faults``).

    Reads the ring buffer once, from its oldest record to its end, at most a few cycles' worth
    of records; the kernel keeps only what fits its buffer, so older faults may be gone.
    """
    reader = KmsgReader(path, lookback_s=max(0.0, wall() - since), background=False, wall=wall)
    try:
        lines: list[FaultLine] = []
        for _ in range(4):
            read = reader.poll()
            lines.extend(reader.take())
            if read < MAX_RECORDS_PER_CYCLE:
                break
        return lines, reader.status()
    finally:
        reader.close()
