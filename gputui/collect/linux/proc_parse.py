"""Pure parsers of ``/proc`` text: stat, cmdline, status, ``/proc/stat``, meminfo (no I/O).

Each takes what a file gave (bytes or text) and returns values, or None when the text is
garbled, oversized or out of range; none raises, whatever the text. The cgroup, NSpid and
mountinfo parsers are in :mod:`gputui.collect.linux.membership`.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Iterable
from typing import NamedTuple

#: Clock ticks per second: the unit of CPU times and start times in ``/proc``.
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
#: The kernel never hands out a PID above this (PID_MAX_LIMIT on 64-bit): anything larger from
#: NVML is garbage, and os.kill() would overflow a C int on it.
PID_MAX_LIMIT = 4_194_304
#: Start times are a tick count (10 ms ticks) plus the boot time, so two processes never differ by
#: less than a tick; the tolerance only absorbs float rounding. The boot time moves when the wall
#: clock is stepped, which then makes a signal be refused as "PID reused": the safe way to fail.
START_TIME_TOLERANCE_S = 0.005
#: ``task->flags`` bit of a kernel thread (field 9 of ``/proc/<pid>/stat``).
PF_KTHREAD = 0x00200000
#: stat is about 300 bytes (its command name is at most 64): longer text is not a stat file.
MAX_STAT_BYTES = 4096
#: Decimal digits of any 64-bit counter: a longer field is garbage, not a number.
_MAX_INT_DIGITS = 20
#: The stat fields parse_stat reads, as indexes from the state (field 3): ppid (4), flags (9),
#: utime and stime (14, 15), start time (22), rss (24), start and end of the program text
#: (26, 27), start and end of the arguments (48, 49).
_STAT_NUMBERS = operator.itemgetter(1, 6, 11, 12, 19, 21, 23, 24, 45, 46)
_STAT_LAST = 46
_STAT_SPLITS = _STAT_LAST + 1
#: The ``cpu`` line's fields psutil reads (Linux 2.6.33+: user ... guest_nice).
_CPU_FIELDS = 10


class ProcStat(NamedTuple):
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


def parse_uint(field: str) -> int:
    """A non-negative decimal field; ValueError for anything else (signs, huge numbers)."""
    if not field.isascii() or not field.isdigit() or len(field) > _MAX_INT_DIGITS:
        raise ValueError(field)
    return int(field)


def parse_stat(text: str) -> ProcStat | None:
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
    # Split no further than the last field read (arg_end, fields[46]): the rest is one string.
    fields = text[end + 2 :].split(None, _STAT_SPLITS)
    count = len(fields)
    # Field numbers in proc(5) are 1-based and count pid and comm: state is field 3, so field n
    # is fields[n - 3]. The text and argument addresses came with later kernels (2.6.x, 3.5):
    # absent means 0. The numbers are checked together: this runs for every process on every
    # refresh, and one check of the joined digits costs what one per field would cost each.
    if count > _STAT_LAST:
        numbers = _STAT_NUMBERS(fields)
    elif count >= 22:
        numbers = (fields[1], fields[6], fields[11], fields[12], fields[19], fields[21],
                   *[fields[i] if i < count else "0" for i in (23, 24, 45, 46)])  # fmt: skip
    else:
        return None
    joined = "".join(numbers)
    if not (joined.isascii() and joined.isdigit()) or max(map(len, numbers)) > _MAX_INT_DIGITS:
        return None
    ppid, flags, utime, stime, start_ticks, rss, code_start, code_end, arg_start, arg_end = map(
        int, numbers
    )
    return ProcStat(
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


def status_field(status_text: str, key: str, limit: int) -> str | None:
    """The value of ``key:`` in ``/proc/<pid>/status`` text (at most 64 characters), or None.

    Args:
        status_text: The file's text.
        key: The field name, without its colon.
        limit: Characters of the text looked at.
    """
    for line in status_text[:limit].splitlines():
        name, sep, value = line.partition(":")
        if sep and name == key:
            return value.strip()[:64] or None
    return None


def real_uid(status: bytes) -> int | None:
    """The real uid from ``/proc/<pid>/status`` (the first number of its ``Uid:`` line)."""
    at = status.find(b"\nUid:")
    if at < 0:
        return None
    fields = status[at + 5 : status.find(b"\n", at + 5)].split()
    if not fields or not fields[0].isdigit() or len(fields[0]) > _MAX_INT_DIGITS:
        return None
    return int(fields[0])


def container_pid(own: tuple[int, ...], ancestors: Iterable[tuple[int, ...]]) -> int | None:
    """The PID of a process in its container's PID namespace, from ``NSpid`` fields.

    ``NSpid`` lists a PID per namespace, from the reader's down to the process's own. A process
    in a sub-PID namespace of its container (``unshare -fp`` inside it) has one field more than
    the container's init, and its last field is its PID in that sub-namespace (often 1), not in
    the container. The container's namespace is the shallowest one among the process and its
    ancestors in the same container: a process is never in a shallower namespace than its
    parent, and every process of a container is in the container's namespace or below it.

    Args:
        own: The process's ``NSpid`` fields.
        ancestors: The ``NSpid`` fields of its ancestors that are in the same container.

    Returns:
        The field at the container's depth; None when ``own`` is empty.
    """
    if not own:
        return None
    levels = min((len(f) for f in ancestors if f), default=len(own))
    return own[min(levels, len(own)) - 1]


def btime(proc_stat: bytes) -> float | None:
    """The boot time (``btime``, seconds since the epoch) from ``/proc/stat``."""
    at = proc_stat.find(b"\nbtime ")
    if at < 0:
        return None
    value = proc_stat[at + 7 : proc_stat.find(b"\n", at + 7)].strip()
    if not value.isdigit() or len(value) > _MAX_INT_DIGITS:
        return None
    return float(value)


def start_time_of(start_ticks: int, boot_time: float) -> float:
    """A process's start time in seconds since the epoch, as psutil computes it."""
    return start_ticks / CLOCK_TICKS + boot_time


def same_start(a: float | None, b: float | None) -> bool:
    """Whether two start times belong to the same process (None matches only None)."""
    if a is None or b is None:
        return a is b
    return abs(a - b) < START_TIME_TOLERANCE_S


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
    return tuple(float(v) / CLOCK_TICKS for v in values)


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
