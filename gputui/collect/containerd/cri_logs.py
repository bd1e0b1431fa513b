"""A Kubernetes container's log file, as the CRI writes it: read from its tail, bounded, joined.

containerd's CRI plugin writes each container's output to the file its ``ContainerStatus``
names (``/var/log/pods/<namespace>_<pod>_<uid>/<container>/0.log``), one record a line::

    2026-12-02T02:13:34.123456789Z stdout F the line's text

the time (RFC 3339, nanoseconds), the stream, a tag (``F`` a full line, ``P`` a part of one
that the next record continues: the runtime splits long lines) and the text. This is what
``kubectl logs`` reads (through the kubelet).

Everything is bounded: at most :data:`TAIL_BYTES` of the file's end are read when it opens
(nothing before them), one read takes at most :data:`CHUNK_BYTES` of what is written after, a
record longer than :data:`MAX_RECORD_BYTES` is cut, and a joined line is at most
:data:`~gputui.collect.docker.logs.MAX_LINE_BYTES` (the rest dropped, the line marked cut). The
file is opened by the one reader of files gputui is named
(:func:`~gputui.boundary.userfiles.open_user_tail`: only a regular file, no symlink of another
user, non-blocking). Following polls the open file for growth, and a rotated file (the kubelet
renames it at its size limit and the runtime reopens ``0.log``) is followed to the new one. The
bytes are decoded, never interpreted: the screen sanitises every line.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import threading
from pathlib import Path
from typing import BinaryIO

from gputui.boundary.userfiles import UserFileError, open_user_tail
from gputui.collect.docker.logs import MAX_LINE_BYTES, LogLine, LogStreamError, Stream

#: Bytes of the file's end read when it opens: 500 lines of a chatty trainer, many times over.
TAIL_BYTES = 2 << 20
#: Bytes read at most by one read while following.
CHUNK_BYTES = 64 << 10
#: The longest record taken (the runtime splits lines at 16 KiB; a longer one is not its).
MAX_RECORD_BYTES = 64 << 10
#: Seconds between two looks at a followed file that has not grown.
POLL_S = 0.25

_RECORD_RE = re.compile(
    rb"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)) (stdout|stderr) ([^ ]*)"
)
_OFFSET_RE = re.compile(r"^(.{19})(\.\d{1,9})?([+-]\d\d:\d\d)$")


def utc_timestamp(stamp: str) -> str:
    """The record's time in UTC (``…Z``), its fraction kept: containerd writes local time."""
    if stamp.endswith("Z"):
        return stamp
    match = _OFFSET_RE.match(stamp)
    if match is None:
        return stamp
    try:
        moment = dt.datetime.fromisoformat(match.group(1) + match.group(3))
    except ValueError:
        return stamp
    utc = moment.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{utc}{match.group(2) or ''}Z"


class RecordJoiner:
    """CRI log records in, whole lines out: each stream's ``P`` parts joined up to its ``F``."""

    def __init__(self) -> None:
        self._parts: dict[Stream, tuple[bytearray, str | None, bool]] = {}

    def record(self, raw: bytes, cut: bool = False) -> LogLine | None:
        """One record (a line of the file, without its newline); the line it ends, if any.

        A line that is no record (another writer's, a damaged one) is shown as it is, on
        stdout, without a time.
        """
        match = _RECORD_RE.match(raw)
        if match is None:
            return _line(
                "stdout", bytes(raw[:MAX_LINE_BYTES]), None, cut or len(raw) > MAX_LINE_BYTES
            )
        stamp = match.group(1).decode("ascii")
        stream: Stream = "stderr" if match.group(2) == b"stderr" else "stdout"
        partial = match.group(3).split(b":", 1)[0] == b"P"
        text = raw[match.end() + 1 :] if raw[match.end() : match.end() + 1] == b" " else b""
        pending, first, was_cut = self._parts.pop(stream, (bytearray(), None, False))
        room = MAX_LINE_BYTES - len(pending)
        pending += text[: max(0, room)]
        was_cut = was_cut or cut or len(text) > room
        if partial:
            self._parts[stream] = (pending, first or stamp, was_cut)
            return None
        return _line(stream, bytes(pending), first or stamp, was_cut)

    def flush(self) -> list[LogLine]:
        """The parts of lines never finished (the file ended inside one)."""
        lines = [_line(s, bytes(p), t, c) for s, (p, t, c) in self._parts.items()]
        self._parts.clear()
        return lines


def _line(stream: Stream, raw: bytes, stamp: str | None, cut: bool) -> LogLine:
    text = raw.decode("utf-8", errors="replace")
    return LogLine(stream, text, utc_timestamp(stamp) if stamp else None, cut, len(raw))


class CriLogReader:
    """A :class:`~gputui.collect.docker.logs.LogReader` over a CRI log file.

    The first :meth:`read` gives the last ``tail`` lines of the file's last :data:`TAIL_BYTES`;
    then, while ``follow``, what is written after, as it comes (a poll every :data:`POLL_S`).

    Args:
        path: The log file (``ContainerStatus.log_path``).
        tail: Lines to start with.
        follow: Keep reading as the file grows.

    Raises:
        LogStreamError: the file cannot be opened (one line).
    """

    tty = False  # the CRI writes a TTY container's output as stdout records

    def __init__(self, path: str, *, tail: int, follow: bool) -> None:
        self.path = Path(path)
        self._tail = max(0, tail)
        self._follow = follow
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._joiner = RecordJoiner()
        self._rest = bytearray()
        self._skipping = False  # inside a record over MAX_RECORD_BYTES: drop to its newline
        self._first = True
        self._file: BinaryIO | None
        self._file, skipped = self._open(TAIL_BYTES)
        # Started inside a record: its start is not in the tail, so it is no record.
        self._skipping = skipped > 0

    def _open(self, tail_bytes: int) -> tuple[BinaryIO, int]:
        try:
            return open_user_tail(self.path, "container log", tail_bytes)
        except UserFileError as exc:
            raise LogStreamError(str(exc)) from exc

    def read(self) -> list[LogLine] | None:
        """The next lines (the tail first), None once the file is read and not followed."""
        while not self._stop.is_set():
            with self._lock:
                if self._file is None:
                    return None
                try:
                    data = self._file.read(TAIL_BYTES if self._first else CHUNK_BYTES)
                except OSError as exc:
                    raise LogStreamError(f"cannot read {self.path}: {exc.strerror}") from exc
                lines = self._lines(data or b"")
                if self._first:
                    self._first = False
                    if not self._follow:
                        lines += self._joiner.flush()
                    return lines[-self._tail :] if self._tail else []
            if lines:
                return lines
            if not self._follow:
                return None
            if not data and self._rotated():
                continue
            self._stop.wait(POLL_S)
        return None

    def _lines(self, data: bytes) -> list[LogLine]:
        """The lines that ``data`` completes (a record without its newline waits for it)."""
        lines: list[LogLine] = []
        start = 0
        while True:
            end = data.find(b"\n", start)
            piece = data[start:] if end < 0 else data[start:end]
            if end < 0:
                if not self._skipping:
                    self._rest += piece
                    if len(self._rest) > MAX_RECORD_BYTES:
                        line = self._joiner.record(bytes(self._rest[:MAX_RECORD_BYTES]), True)
                        lines += [line] if line is not None else []
                        self._rest.clear()
                        self._skipping = True
                return lines
            if self._skipping:
                self._skipping = False
            else:
                raw = bytes(self._rest) + piece
                self._rest.clear()
                cut = len(raw) > MAX_RECORD_BYTES
                line = self._joiner.record(raw[:MAX_RECORD_BYTES], cut)
                if line is not None:
                    lines.append(line)
            start = end + 1

    def _rotated(self) -> bool:
        """Whether the path is now another file (rotated): if so, read that one from its start."""
        with self._lock:
            if self._file is None:
                return False
            try:
                now = os.stat(self.path)
                kept = os.fstat(self._file.fileno())
            except OSError:
                return False  # renamed, the new one not there yet: look again later
            if (now.st_dev, now.st_ino) == (kept.st_dev, kept.st_ino):
                return False
            try:
                fresh, _ = self._open(now.st_size + CHUNK_BYTES)
            except LogStreamError:
                return False
            self._file.close()
            self._file = fresh
            self._rest.clear()
            self._skipping = False
            return True

    def close(self) -> None:
        """End the reading; a thread waiting in :meth:`read` returns (idempotent)."""
        self._stop.set()
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
