"""A container's logs as lines: the engine's stream decoded, bounded and split.

The logs endpoint answers with the container's output as it was written: for a container
without a TTY, frames with an 8-byte header (stream 1 or 2, then a big-endian length); for one
with a TTY, raw bytes (stdout and stderr are one stream there). Every line starts with the
timestamp the engine added (gputui always asks for them, the screen shows or hides them).

Everything here is bounded: a frame header claiming more than :data:`MAX_FRAME_BYTES` ends the
stream as malformed, a line longer than :data:`MAX_LINE_BYTES` is cut (the rest of it up to its
newline is skipped), and undelivered lines are kept up to :data:`MAX_PENDING_LINES` lines and
:data:`MAX_PENDING_BYTES` bytes (the oldest go first, counted), so a flood costs bounded memory
however far behind the screen is.
The bytes are decoded, never interpreted: the screen passes every line through the one
sanitiser before showing it.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import field
from typing import Literal, Protocol

from gputui.model.records import record

#: The largest frame a non-TTY stream may announce; the engine writes at most 16 KiB per line
#: part (and attach streams about 32 KiB), so a larger header means a stream out of step.
MAX_FRAME_BYTES = 1 << 20
#: Bytes of one line kept; the rest of it is dropped (the line is marked as cut).
MAX_LINE_BYTES = 8 << 10
#: Lines kept at most between two deliveries, and by a screen showing them.
MAX_PENDING_LINES = 10_000
#: Bytes of undelivered lines kept at most (as received): 128 lines of the longest kind.
MAX_PENDING_BYTES = 1 << 20
#: Lines asked for when a logs screen opens (``docker logs --tail``).
DEFAULT_TAIL = 500

Stream = Literal["stdout", "stderr", "tty"]
_STREAMS: dict[int, Stream] = {1: "stdout", 2: "stderr"}
#: The engine's RFC 3339 timestamp and the space it puts after it.
_TIMESTAMP_RE = re.compile(rb"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)) ")


class LogStreamError(Exception):
    """The logs stream could not be opened or read (one line, for the screen)."""


@record
class LogLine:
    """One line of a container's output.

    Attributes:
        stream: ``stdout``, ``stderr``, or ``tty`` (a TTY container: the two are one stream).
        text: The line, decoded as UTF-8 (bad bytes replaced), without its newline. Not yet
            sanitised: the front-end passes it through ``safe_text`` before showing it.
        timestamp: The engine's RFC 3339 time of the line, None when it had none.
        cut: The line was longer than :data:`MAX_LINE_BYTES`; its rest was dropped.
        size: Bytes of the line as received (what the pending buffer is bounded by).
    """

    stream: Stream
    text: str
    timestamp: str | None = None
    cut: bool = False
    size: int = field(default=0, compare=False)


class LogReader(Protocol):
    """An open logs stream: one thread reads, any thread may close.

    Attributes:
        tty: The container has a TTY: stdout and stderr cannot be told apart.
    """

    tty: bool

    def read(self) -> list[LogLine] | None:
        """The next lines (blocking until some arrive), None once the stream has ended.

        Raises:
            LogStreamError: the stream broke or was malformed.
        """
        ...

    def close(self) -> None:
        """End the stream; a thread blocked in :meth:`read` returns (idempotent)."""
        ...


class FrameDecoder:
    """Incremental decoder of the engine's multiplexed stream, without buffering whole frames.

    Args:
        multiplexed: False for a TTY container's raw stream (every byte is ``tty`` output).
    """

    def __init__(self, multiplexed: bool) -> None:
        self.multiplexed = multiplexed
        self._header = bytearray()
        self._stream: Stream = "stdout"
        self._left = 0  # payload bytes of the current frame still to come

    def feed(self, data: bytes) -> list[tuple[Stream, bytes]]:
        """Split received bytes into (stream, payload piece) pairs, in order.

        Raises:
            LogStreamError: a header names a stream other than stdout/stderr, or a frame larger
                than :data:`MAX_FRAME_BYTES` (the stream is out of step or not multiplexed).
        """
        if not self.multiplexed:
            return [("tty", data)] if data else []
        pieces: list[tuple[Stream, bytes]] = []
        view = memoryview(data)
        while view:
            if self._left:
                take = view[: self._left]
                pieces.append((self._stream, bytes(take)))
                self._left -= len(take)
                view = view[len(take) :]
                continue
            need = 8 - len(self._header)
            self._header += view[:need]
            view = view[need:]
            if len(self._header) < 8:
                break
            stream = _STREAMS.get(self._header[0])
            size = int.from_bytes(self._header[4:8], "big")
            if stream is None or self._header[1:4] != b"\0\0\0" or size > MAX_FRAME_BYTES:
                raise LogStreamError("the logs stream is malformed (a bad frame header)")
            self._header.clear()
            self._stream, self._left = stream, size
        return pieces


class LineSplitter:
    """Joins one stream's payload pieces into lines of at most :data:`MAX_LINE_BYTES` bytes."""

    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        self._pending = bytearray()
        self._cut = False  # the line in progress is over the bound: skip to its newline

    def feed(self, data: bytes) -> list[LogLine]:
        """The lines that ``data`` completes."""
        lines: list[LogLine] = []
        start = 0
        while True:
            end = data.find(b"\n", start)
            part = data[start:] if end < 0 else data[start:end]
            if not self._cut:
                room = MAX_LINE_BYTES - len(self._pending)
                self._pending += part[:room]
                if len(part) > room:
                    self._cut = True
            if end < 0:
                return lines
            lines.append(self._emit())
            start = end + 1

    def flush(self) -> list[LogLine]:
        """The last line when the stream ended without a newline."""
        return [self._emit()] if self._pending or self._cut else []

    def _emit(self) -> LogLine:
        raw = bytes(self._pending)
        cut, self._cut = self._cut, False
        self._pending.clear()
        return parse_line(self.stream, raw, cut)


def parse_line(stream: Stream, raw: bytes, cut: bool = False) -> LogLine:
    """One raw line (no newline) as a :class:`LogLine`, its engine timestamp split off."""
    timestamp = None
    match = _TIMESTAMP_RE.match(raw)
    if match is not None:
        timestamp = match.group(1).decode("ascii")
        raw = raw[match.end() :]
    if raw.endswith(b"\r"):  # a TTY ends lines with CR LF
        raw = raw[:-1]
    return LogLine(stream, raw.decode("utf-8", errors="replace"), timestamp, cut, len(raw))


class _Chunks(Protocol):
    def read(self) -> bytes: ...

    def close(self) -> None: ...


class EngineLogReader:
    """A :class:`LogReader` over the engine's reply (see ``EngineApi.logs``).

    Args:
        chunks: The open reply: ``read()`` returns bytes, ``b""`` at the end.
        tty: The container has a TTY (a raw stream, not a multiplexed one).
    """

    def __init__(self, chunks: _Chunks, tty: bool) -> None:
        self.tty = tty
        self._chunks = chunks
        self._decoder = FrameDecoder(multiplexed=not tty)
        self._splitters: dict[Stream, LineSplitter] = {}
        self._ended = False

    def read(self) -> list[LogLine] | None:
        """The lines of the next chunks that complete any (None after the end)."""
        if self._ended:
            return None
        # Bounded: a chunk is at most 64 KiB, so one read returns at most that many lines.
        while True:
            try:
                data = self._chunks.read()
            except Exception as exc:  # EngineError, EngineSlow, OSError: the stream is over
                self._ended = True
                raise LogStreamError(_one_line(exc)) from exc
            if not data:
                self._ended = True
                tail = [line for s in self._splitters.values() for line in s.flush()]
                return tail or None
            lines: list[LogLine] = []
            try:
                pieces = self._decoder.feed(data)
            except LogStreamError:
                self._ended = True
                raise
            for stream, piece in pieces:
                splitter = self._splitters.get(stream)
                if splitter is None:
                    splitter = self._splitters[stream] = LineSplitter(stream)
                lines += splitter.feed(piece)
            if lines:
                return lines

    def close(self) -> None:
        """Close the reply (a blocked :meth:`read` returns)."""
        self._chunks.close()


def line_weight(line: LogLine) -> int:
    """What a line costs to hold and show: its bytes as received or its characters (at least 1)."""
    return max(1, line.size, len(line.text))


class PendingLines:
    """Lines read but not yet shown, bounded in lines and bytes: the oldest go first, counted.

    Not locked: the screen guards it (one reader thread appends, the UI thread drains).

    Args:
        limit: Lines kept at most.
        byte_limit: Bytes kept at most (each line weighs :func:`line_weight`).
    """

    def __init__(self, limit: int = MAX_PENDING_LINES, byte_limit: int = MAX_PENDING_BYTES) -> None:
        self._lines: deque[LogLine] = deque()
        self.limit = max(1, limit)
        self.byte_limit = max(1, byte_limit)
        #: Bytes of the lines held now.
        self.bytes = 0
        #: Lines dropped since the last drain.
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._lines)

    def extend(self, lines: list[LogLine]) -> None:
        """Add lines, dropping the oldest beyond either bound."""
        for line in lines:
            self._lines.append(line)
            self.bytes += line_weight(line)
        while len(self._lines) > self.limit or self.bytes > self.byte_limit:
            self.bytes -= line_weight(self._lines.popleft())
            self.dropped += 1

    def drain(
        self, max_bytes: int | None = None, max_lines: int | None = None
    ) -> tuple[list[LogLine], int]:
        """The oldest pending lines, within a budget, and how many were dropped since the last.

        Args:
            max_bytes: Bytes to take at most (at least one line is taken); None for all.
            max_lines: Lines to take at most; None for all.

        Returns:
            The lines taken (the rest stay pending) and the count of lines dropped.
        """
        dropped, self.dropped = self.dropped, 0
        if max_bytes is None and max_lines is None:
            lines = list(self._lines)
            self._lines.clear()
            self.bytes = 0
            return lines, dropped
        taken: list[LogLine] = []
        budget = max_bytes if max_bytes is not None else self.byte_limit + 1
        count = max_lines if max_lines is not None else len(self._lines)
        while self._lines and len(taken) < count:
            size = line_weight(self._lines[0])
            if taken and size > budget:
                break
            taken.append(self._lines.popleft())
            self.bytes -= size
            budget -= size
        return taken, dropped


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:200]
    return text or type(exc).__name__
