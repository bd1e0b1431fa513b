"""Recordings: ``gputui record`` writes snapshots as JSON lines, ``gputui replay`` plays them back.

A recording is a text file of one JSON object per line (:mod:`gputui.serialize` records), rotated
by size into ``FILE.1`` (newest) ... ``FILE.<keep>`` (oldest). Each file stands alone: its first
line is always a full snapshot. :class:`ReplayCollector` implements the one collector protocol
(:class:`~gputui.collect.sources.CollectorProtocol`), so the TUI and ``--once`` run on a recording
exactly as on a live machine, and offers the controls a player needs (pause, step, seek) as its
:attr:`~ReplayCollector.player`. A recording holds snapshots only: findings and alerts are
reproduced on replay by the same ``Analyzer`` (its engines take the time from the snapshots). The
format is documented in docs/record-replay.md.
"""

from __future__ import annotations

import array
import bisect
import datetime as dt
import fcntl
import json
import os
import re
import stat
import threading
import typing
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gputui import timestamps
from gputui.collect.loop import CollectLoop
from gputui.collect.sources import CollectorProtocol, ContainerCapabilities, ContainerOwner
from gputui.model import ExecResult, Snapshot
from gputui.serialize import (
    FORMAT_VERSION,
    MAX_TIME,
    SerializeError,
    snapshot_from_record,
    snapshot_from_report,
    snapshot_to_record,
)
from gputui.userfiles import (
    REPORT_LIMIT,
    UserFileError,
    open_user_append,
    open_user_file,
    read_user_text,
)

if TYPE_CHECKING:
    from gputui.collect.docker.logs import LogReader
    from gputui.collect.linux.parent_chain import ParentLink

#: Why actions are refused while replaying (shown by the UI like the read-only reason).
REPLAY_REASON = "replay: a recording cannot be acted on (no exec, no signals)"


class RecordingError(ValueError):
    """An unreadable or invalid recording, or a time outside it; the message is one line."""


# -- writing ---------------------------------------------------------------------------------

#: ``gputui record``'s default rotation size: a day at one snapshot a second of a busy host.
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
#: Rotated files kept at most (each rotation renames them all).
MAX_KEEP = 100


class RecorderBusyError(RecordingError):
    """Another recorder holds the file's lock."""


class RecordWriter:
    """Appends snapshots to ``path`` as compact JSON lines, rotating by size.

    The file is opened on the first write (or :meth:`open`) and held, with an exclusive
    ``flock``, until :meth:`close`: a second recorder on the same file is refused instead of
    interleaving lines whose ``same`` references would then point at the other's snapshots.
    Only a regular file of the user's is written, never through a symlink (a FIFO or device
    would block or ignore rotation; a planted symlink would append to its target); a new
    recording is created ``0600`` (it holds every user's command lines), an existing one keeps
    its mode, and so does the file a rotation starts (see :mod:`gputui.userfiles`). A file
    whose last line was cut (a recorder killed mid-write, a full disk) gets a newline first, so
    the cut line stays one unreadable line and the new lines stay readable.

    Args:
        path: The recording; appended to when it exists.
        max_bytes: Rotate before a line would make the file larger than this (0: never rotate).
        keep: How many rotated files (``path.1`` ... ``path.<keep>``) to keep.
    """

    def __init__(self, path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES, keep: int = 3) -> None:
        if not 0 <= keep <= MAX_KEEP:
            raise RecordingError(f"keep must be between 0 and {MAX_KEEP}, got {keep}")
        self.path = path
        self.max_bytes = max_bytes
        self.keep = keep
        self._fd: int | None = None
        self._previous: Snapshot | None = None  # None: the next line must be a full snapshot
        self._check_tail = True  # the file's last byte may not be a newline
        self._mode: int | None = None  # the mode a file created by a rotation gets

    def __enter__(self) -> RecordWriter:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> None:
        """Open and lock the file (a no-op when open).

        Raises:
            RecorderBusyError: another recorder is writing it.
            RecordingError: a symlink, not a regular file, another user's file, or it cannot
                be opened.
        """
        if self._fd is not None:
            return
        for _ in range(10):
            # Read-write so the last byte can be checked; a new file is 0600 (command lines of
            # every user are in it), a planted symlink is refused (see gputui.userfiles).
            try:
                fd = open_user_append(self.path, "recording", readable=True)
            except UserFileError as exc:
                raise RecordingError(str(exc)) from None
            try:
                opened = os.fstat(fd)
                if (
                    self._mode is not None
                    and opened.st_size == 0
                    and stat.S_IMODE(opened.st_mode) != self._mode
                ):
                    # Created by a rotation: the recording keeps the mode its file had.
                    os.fchmod(fd, self._mode)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise RecorderBusyError(
                        f"cannot record to {self.path}: another gputui record is writing it"
                    ) from None
                try:
                    now = os.lstat(self.path)
                except FileNotFoundError:
                    now = None
            except BaseException:
                os.close(fd)
                raise
            if now is not None and (now.st_dev, now.st_ino) == (opened.st_dev, opened.st_ino):
                self._fd = fd
                self._previous = None
                self._check_tail = True
                return
            os.close(fd)  # rotated away between open and lock: open the new file
        raise RecorderBusyError(f"cannot record to {self.path}: it keeps being replaced")

    def close(self) -> None:
        """Release the lock and the file."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:
        self.close()

    def write(self, snapshot: Snapshot) -> None:
        """Append one snapshot (one line, written whole or, on a full disk, cut and healed).

        Raises:
            RecorderBusyError: another recorder took the file after a rotation.
            OSError: the write failed (the next write starts a fresh, full line).
        """
        self.open()
        assert self._fd is not None
        size = os.fstat(self._fd).st_size
        if size == 0:
            self._previous = None  # someone emptied the file: it needs a full line again
        line = self._line(snapshot, self._previous).encode("ascii")
        if self.max_bytes and size and size + len(line) > self.max_bytes:
            self._rotate()
            assert self._fd is not None
            size = 0
            line = self._line(snapshot, None).encode("ascii")
        if self._check_tail and size and os.pread(self._fd, 1, size - 1) != b"\n":
            line = b"\n" + line  # end the cut line, so it alone is unreadable
        self._check_tail = False
        try:
            view = memoryview(line)
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError:
            # Part of the line may be in the file: heal it on the next write, with a full line
            # (the reader skips the cut one and must not resolve `same` against it).
            self._previous = None
            self._check_tail = True
            raise
        self._previous = snapshot

    @staticmethod
    def _line(snapshot: Snapshot, previous: Snapshot | None) -> str:
        # ensure_ascii (the default) escapes lone surrogates from undecodable command lines, so
        # every str survives the trip; compact separators keep lines small.
        return json.dumps(snapshot_to_record(snapshot, previous), separators=(",", ":")) + "\n"

    def _rotate(self) -> None:
        # Renamed while still locked: a second recorder opening the path meanwhile is refused.
        # Renames and unlinks act on the names themselves: a symlink planted as a rotated file
        # is renamed or removed, its target never touched.
        assert self._fd is not None
        self._mode = stat.S_IMODE(os.fstat(self._fd).st_mode)
        if self.keep <= 0:
            self.path.unlink()
        else:
            oldest = rotated_path(self.path, self.keep)
            if os.path.lexists(oldest):
                oldest.unlink()
            for n in range(self.keep - 1, 0, -1):
                src = rotated_path(self.path, n)
                if os.path.lexists(src):
                    os.replace(src, rotated_path(self.path, n + 1))
            os.replace(self.path, rotated_path(self.path, 1))
        self.close()
        self.open()


def rotated_path(path: Path, n: int) -> Path:
    """``path.<n>``: the n-th newest rotated file of a recording."""
    return path.with_name(f"{path.name}.{n}")


def record(
    collector: CollectorProtocol,
    writer: RecordWriter,
    *,
    interval: float,
    count: int | None = None,
    stop: threading.Event | None = None,
    observe: typing.Callable[[Snapshot, None], None] | None = None,
) -> int:
    """Collect and write snapshots every ``interval`` seconds until ``count`` or ``stop``.

    Runs the :class:`~gputui.collect.loop.CollectLoop` the TUI and the exporter run (fixed
    rate, bounded waits). Only snapshots are written: the analysis is reproduced on replay, so
    the loop's analysis step is left empty here. A collection or a write that raises ends the
    recording (raised from here); what was written stays readable. ``observe`` also receives
    each snapshot (the ledger's writer).

    Returns:
        How many snapshots were written.
    """
    stop = stop or threading.Event()

    def write(snapshot: Snapshot, _analysis: None) -> None:
        writer.write(snapshot)

    loop = CollectLoop(collector, lambda _snapshot: None, write, interval=interval, observe=observe)
    if stop.is_set():
        return 0
    # The caller's stop event (set from a signal handler) stops the loop within its slice.
    loop.run(stop.is_set, count=count)
    return loop.delivered


# -- reading ---------------------------------------------------------------------------------

#: Bounds on what a recording may make the reader hold or do.
MAX_FILE_BYTES = 16 * 1024**3  # one file of a recording
MAX_LINE_BYTES = 16 * 1024**2  # one snapshot line (a huge host's is well under 1 MiB)
MAX_FILES = MAX_KEEP + 1  # the file and its rotated files
MAX_SNAPSHOTS = 10_000_000  # the index costs about 30 bytes per snapshot


def valid_time(value: object) -> bool:
    """True for a number that is a showable time (finite, within year 0 .. 9999 of the epoch)."""
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and 0.0 <= value <= MAX_TIME  # also False for NaN
    )


def _record_facts(raw: bytes) -> tuple[float, list[str], list[str]] | None:
    """A line's ``taken_at``, its ``same`` names and its explicit fields; None if unusable."""
    try:
        record = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, too deep, an unconvertible integer
        return None
    if not isinstance(record, dict):
        return None
    body, same, version = record.get("snapshot"), record.get("same", []), record.get("v")
    if not isinstance(body, dict) or not isinstance(same, list) or not isinstance(version, int):
        return None
    if not 1 <= version <= FORMAT_VERSION or set(record) - {"v", "same", "snapshot"}:
        return None
    if not all(isinstance(n, str) for n in same) or "taken_at" in same:
        return None
    taken_at = body.get("taken_at")
    if not isinstance(taken_at, (int, float)) or not valid_time(taken_at):
        return None
    return float(taken_at), same, list(body)


class Recording(Sequence[Snapshot]):
    """A recording's snapshots, oldest first, decoded only when asked for.

    Opening reads each file once, keeping per line only its file, offset, length and time (and
    where its ``same`` fields come from), so a recording of gigabytes costs tens of bytes per
    snapshot. A line that is not a usable record (cut by a killed recorder, corrupt, of a newer
    format) is skipped and counted in :attr:`skipped`, as are the lines that repeat fields of
    it; the rest stay readable. A small cache keeps recently decoded snapshots.
    """

    _CACHE = 32

    def __init__(self, files: Sequence[Path]) -> None:
        self.files = tuple(files)
        self.skipped = 0
        self._fds: list[int] = []
        self._file = array.array("H")
        self._offset = array.array("q")
        self._length = array.array("l")
        self._times = array.array("d")
        self._refs = array.array("l")  # index into _ref_tables; -1: a full line
        self._ref_tables: list[dict[str, int]] = []
        self._order: array.array[int] | None = None  # position -> line, when not in time order
        self._lock = threading.Lock()
        self._lines: OrderedDict[int, dict[str, Any]] = OrderedDict()
        self._snapshots: OrderedDict[int, Snapshot] = OrderedDict()
        try:
            for number, path in enumerate(self.files):
                self._index(number, path)
        except BaseException:
            self.close()
            raise
        times = self._times
        if any(times[i] > times[i + 1] for i in range(len(times) - 1)):
            # Rotated files of an older, unrelated run could interleave: order by time, stably.
            self._order = array.array("l", sorted(range(len(times)), key=times.__getitem__))
            self._times = array.array("d", (times[i] for i in self._order))

    @classmethod
    def open(cls, path: Path) -> Recording:
        """The recording at ``path`` with its rotated files (``FILE.N`` ... ``FILE.1``, FILE).

        Raises:
            RecordingError: unreadable, not a regular file, too large, or holding no snapshot.
        """
        files = []
        n = 1
        while n <= MAX_FILES and os.path.lexists(rotated_path(path, n)):
            files.append(rotated_path(path, n))
            n += 1
        files.reverse()
        files.append(path)
        recording = cls(files)
        if not len(recording):
            recording.close()
            cut = f" ({recording.skipped} unreadable line(s) skipped)" if recording.skipped else ""
            raise RecordingError(f"recording {path} holds no snapshot{cut}")
        return recording

    def _index(self, number: int, path: Path) -> None:
        try:
            fh = open_user_file(path, "recording", MAX_FILE_BYTES)
        except UserFileError as exc:
            raise RecordingError(str(exc)) from None
        self._fds.append(os.dup(fh.fileno()))  # kept for reading lines back (pread)
        explicit: dict[str, int] | None = None  # field -> the line holding it; None: unknown
        offset = 0
        with fh:
            while True:
                try:
                    raw = fh.readline(MAX_LINE_BYTES + 1)
                except OSError as exc:
                    raise RecordingError(
                        f"cannot read recording {path}: {exc.strerror or exc}"
                    ) from None
                if not raw:
                    break
                start = offset
                offset += len(raw)
                if len(raw) > MAX_LINE_BYTES:
                    while raw and not raw.endswith(b"\n"):  # skip the rest of the long line
                        raw = fh.readline(1024 * 1024)
                        offset += len(raw)
                    self.skipped += 1
                    explicit = None
                    continue
                if not raw.endswith(b"\n"):
                    self.skipped += 1  # cut: the recorder was stopped mid-write
                    break
                if not raw.strip():
                    continue
                facts = _record_facts(raw)
                if facts is None or (facts[1] and explicit is None):
                    self.skipped += 1
                    explicit = None  # what the next line repeats may be what was lost here
                    continue
                taken_at, same, body = facts
                assert same == [] or explicit is not None
                refs = {}
                for name in same:
                    if explicit is None or name not in explicit:
                        break
                    refs[name] = explicit[name]
                else:
                    line = len(self._times)
                    if line >= MAX_SNAPSHOTS:
                        raise RecordingError(
                            f"recording {path}: more than {MAX_SNAPSHOTS} snapshots"
                        )
                    self._file.append(number)
                    self._offset.append(start)
                    self._length.append(len(raw))
                    self._times.append(taken_at)
                    self._refs.append(self._intern(refs) if refs else -1)
                    explicit = {**refs, **dict.fromkeys(body, line)}
                    continue
                self.skipped += 1
                explicit = None

    def _intern(self, refs: dict[str, int]) -> int:
        # Consecutive lines usually repeat the same fields of the same earlier line.
        if self._ref_tables and self._ref_tables[-1] == refs:
            return len(self._ref_tables) - 1
        self._ref_tables.append(refs)
        return len(self._ref_tables) - 1

    @property
    def times(self) -> Sequence[float]:
        """``taken_at`` of every snapshot, in order."""
        return self._times

    def __len__(self) -> int:
        return len(self._times)

    @typing.overload
    def __getitem__(self, index: int) -> Snapshot: ...

    @typing.overload
    def __getitem__(self, index: slice) -> Sequence[Snapshot]: ...

    def __getitem__(self, index: int | slice) -> Snapshot | Sequence[Snapshot]:
        """The snapshot at ``index`` (decoded now, or from the cache).

        Raises:
            RecordingError: the line no longer reads back or does not decode.
        """
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        line = index if self._order is None else self._order[index]
        with self._lock:
            cached = self._snapshots.get(line)
            if cached is not None:
                self._snapshots.move_to_end(line)
                return cached
            body = dict(self._line(line)["snapshot"])
            refs = self._refs[line]
            if refs >= 0:
                for name, source in self._ref_tables[refs].items():
                    body[name] = self._line(source)["snapshot"][name]
            where = f"{self.files[self._file[line]]}: snapshot at {_iso(self._times[index])}"
            try:
                snapshot = snapshot_from_record({"v": FORMAT_VERSION, "snapshot": body})
            except (SerializeError, RecursionError) as exc:
                raise RecordingError(f"{where}: {exc}") from None
            self._snapshots[line] = snapshot
            if len(self._snapshots) > self._CACHE:
                self._snapshots.popitem(last=False)
            return snapshot

    def _line(self, line: int) -> dict[str, Any]:
        cached = self._lines.get(line)
        if cached is not None:
            self._lines.move_to_end(line)
            return cached
        number = self._file[line]
        try:
            raw = os.pread(self._fds[number], self._length[line], self._offset[line])
            record = json.loads(raw)
        except (OSError, ValueError, RecursionError) as exc:
            raise RecordingError(
                f"recording {self.files[number]} changed while being read: {exc}"
            ) from None
        if not isinstance(record, dict) or not isinstance(record.get("snapshot"), dict):
            raise RecordingError(f"recording {self.files[number]} changed while being read")
        self._lines[line] = record
        if len(self._lines) > 8:
            self._lines.popitem(last=False)
        return record

    def close(self) -> None:
        """Release the files."""
        fds, self._fds = self._fds, []
        for fd in fds:
            os.close(fd)

    def __del__(self) -> None:
        self.close()


def _read_report(path: Path) -> Snapshot | None:
    """The snapshot of a ``gputui --once --json`` document at ``path``; None if it is not one."""
    try:
        with open_user_file(path, "recording", MAX_FILE_BYTES) as fh:
            head = fh.read(4096)
    except (UserFileError, OSError):
        return None  # Recording.open says why
    first = head.lstrip()[:1]
    if first != b"{" or head.lstrip().startswith(b'{"v":'):
        return None
    try:
        text = read_user_text(path, "report", REPORT_LIMIT)
        doc = json.loads(text)
    except (UserFileError, ValueError, RecursionError):
        return None  # not one document: read it as lines
    if not isinstance(doc, dict) or "v" in doc:
        return None
    try:
        return snapshot_from_report(doc)
    except (SerializeError, KeyError, TypeError, ValueError, RecursionError, OverflowError) as exc:
        raise RecordingError(f"{path}: not a recording nor a report: {exc}") from None


def open_recording(path: Path) -> Sequence[Snapshot]:
    """The snapshots of a recording (read lazily) or of a ``--once --json`` report (one).

    Raises:
        RecordingError: unreadable, not a regular file, too large, or holding no snapshot.
    """
    if not os.path.lexists(path):
        raise RecordingError(f"cannot read recording {path}: No such file or directory")
    report = _read_report(path)
    if report is not None:
        return (report,)
    return Recording.open(path)


def read_recording(path: Path) -> list[Snapshot]:
    """Every snapshot of a recording as a list (see :func:`open_recording`; small files only).

    Raises:
        RecordingError: unreadable, invalid, or empty.
    """
    snapshots = open_recording(path)
    try:
        return list(snapshots)
    finally:
        if isinstance(snapshots, Recording):
            snapshots.close()


_OFFSET = re.compile(r"^\+([0-9]{1,15}(?:\.[0-9]{1,9})?)(ms|s|m|h)?$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_time(text: str, start: float) -> float:
    """A ``--at`` value as seconds since the epoch.

    Accepts ISO 8601 (``2026-11-29T16:36:20Z``; no zone means UTC), seconds since the epoch
    (``1795000000``), or an offset from the recording's start (``+90``, ``+90s``, ``+5m``).

    Raises:
        RecordingError: none of those, or a time no recording can hold (not finite, before
            the epoch or after the year 9999).
    """
    value = text.strip()
    offset = _OFFSET.match(value)
    if offset:
        when = start + float(offset.group(1)) * _UNITS[offset.group(2) or "s"]
    else:
        try:
            when = float(value) if len(value) <= 40 else float("nan")
        except ValueError:
            when = _iso_time(value, text)
    if not valid_time(when):
        raise RecordingError(
            f"--at {_shown(text)}: not a time between 1970 and 9999 (ISO 8601, epoch seconds or "
            "+OFFSET)"
        )
    return when


def _iso_time(value: str, text: str) -> float:
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=dt.timezone.utc)
        return parsed.timestamp()
    except (ValueError, OverflowError):
        raise RecordingError(
            f"--at {_shown(text)}: expected ISO 8601 time, epoch seconds or +OFFSET (e.g. +5m)"
        ) from None


def _shown(text: str) -> str:
    shown = repr(text)
    return shown if len(shown) <= 60 else shown[:59] + "…"


class ReplayCollector:
    """A collector over recorded snapshots: each :meth:`collect` returns one, in order.

    Playing advances one recorded snapshot per :meth:`collect`, so the UI's refresh interval
    sets the playback speed; at the end the last snapshot stays. Paused, :meth:`collect` keeps
    returning the current one. Every method is thread-safe: the UI thread seeks and steps while
    the collector thread collects.

    A :class:`Recording` is read lazily: only the snapshots shown are decoded. One that no
    longer decodes is replaced by its nearest readable neighbour (counted in :attr:`skipped`).

    Args:
        snapshots: The recording, oldest first (non-empty), e.g. a :class:`Recording`.
        source: Where it came from, for the UI's title.
    """

    mode = "replay"
    read_only = True

    def __init__(self, snapshots: Sequence[Snapshot], source: str = "recording") -> None:
        if not len(snapshots):
            raise RecordingError("a replay needs at least one snapshot")
        if isinstance(snapshots, Recording):
            self._snapshots: Sequence[Snapshot] = snapshots
            self._times: Sequence[float] = snapshots.times
            self.skipped = snapshots.skipped
        else:
            self._snapshots = tuple(snapshots)
            self._times = [s.taken_at for s in self._snapshots]
            self.skipped = 0
        self._bad: set[int] = set()
        self._lock = threading.Lock()
        self._position = 0
        self._started = False  # the first collect() returns position 0 without advancing
        self.paused = False
        self.source = source

    @classmethod
    def from_file(cls, path: Path) -> ReplayCollector:
        """Load a recording (see :func:`read_recording`).

        Raises:
            RecordingError: unreadable, invalid or empty.
        """
        return cls(open_recording(path), source=str(path))

    # -- the player's controls ---------------------------------------------------------------

    @property
    def player(self) -> ReplayCollector:
        """Itself: a replay is a collector with the player's controls (:class:`Player`)."""
        return self

    def __len__(self) -> int:
        return len(self._snapshots)

    @property
    def position(self) -> int:
        """Index of the snapshot the next :meth:`collect` returns (while paused) or returned."""
        with self._lock:
            return self._position

    @property
    def start(self) -> float:
        """``taken_at`` of the first snapshot."""
        return self._times[0]

    @property
    def end(self) -> float:
        """``taken_at`` of the last snapshot."""
        return self._times[-1]

    def time_at(self, index: int) -> float:
        """``taken_at`` of the ``index``-th snapshot (without decoding it)."""
        return self._times[index]

    @property
    def at_end(self) -> bool:
        """True once the last snapshot has been reached."""
        with self._lock:
            return self._position == len(self._snapshots) - 1

    @property
    def current(self) -> Snapshot:
        """The snapshot at :attr:`position`."""
        with self._lock:
            return self._get(self._position)

    def snapshot_at(self, index: int) -> Snapshot:
        """The ``index``-th recorded snapshot (does not move the position)."""
        with self._lock:
            return self._get(index)

    def _get(self, index: int) -> Snapshot:
        """Snapshot ``index``, or the nearest readable one (the caller holds the lock).

        Raises:
            RecordingError: no snapshot near it decodes any more.
        """
        last = len(self._snapshots) - 1
        index = min(max(index, 0), last)
        first_error: RecordingError | None = None
        # Nearest first, earlier before later; bounded so a broken recording fails quickly.
        for distance in range(0, 64):
            for candidate in (index - distance, index + distance)[: 1 if distance == 0 else 2]:
                if not 0 <= candidate <= last or candidate in self._bad:
                    continue
                try:
                    return self._snapshots[candidate]
                except RecordingError as exc:
                    self._bad.add(candidate)
                    self.skipped += 1
                    first_error = first_error or exc
        raise first_error or RecordingError("no readable snapshot near this point")

    def pause(self) -> None:
        """Stop advancing (collect keeps returning the current snapshot)."""
        self.paused = True

    def resume(self) -> None:
        """Advance again, one snapshot per collect."""
        self.paused = False

    def step(self, delta: int) -> Snapshot:
        """Move ``delta`` snapshots (negative: back), clamped to the recording; return it."""
        with self._lock:
            self._position = min(max(self._position + delta, 0), len(self._snapshots) - 1)
            self._started = True
            return self._get(self._position)

    def seek(self, when: float) -> Snapshot:
        """Move to the last snapshot taken at or before ``when`` (epoch seconds); return it.

        Raises:
            RecordingError: ``when`` is before the first or after the last snapshot.
        """
        index = self.index_at(when)
        with self._lock:
            self._position = index
            self._started = True
            return self._get(index)

    def index_at(self, when: float) -> int:
        """Index of the last snapshot taken at or before ``when``.

        Raises:
            RecordingError: ``when`` is outside the recording.
        """
        if not valid_time(when) or when < self._times[0] or when > self._times[-1]:
            raise RecordingError(
                f"time {_iso(when)} is outside the recording "
                f"({_iso(self._times[0])} .. {_iso(self._times[-1])})"
            )
        return bisect.bisect_right(self._times, when) - 1

    # -- the collector interface -------------------------------------------------------------

    def collect(self) -> Snapshot:
        """The next recorded snapshot (the current one while paused or at the end)."""
        with self._lock:
            if self._started and not self.paused:
                self._position = min(self._position + 1, len(self._snapshots) - 1)
            self._started = True
            return self._get(self._position)

    def request_health(self) -> None:
        """Nothing to re-run: health checks are played as recorded."""

    def exec_in_container(
        self, container_id: str, argv: Sequence[str], timeout_s: float
    ) -> ExecResult:
        """Refused: the recorded containers are not here to run anything."""
        return ExecResult(tuple(argv), None, error=REPLAY_REASON)

    def interactive_exec_argv(self, container_id: str, argv: Sequence[str]) -> list[str] | None:
        """None: no interactive exec into a recording."""
        return None

    def container_owner(self, container_id: str) -> ContainerOwner | None:
        """The recording itself, which offers nothing: its containers are not here."""
        return ContainerOwner("the recording", ContainerCapabilities())

    def open_container_logs(self, container_id: str, *, tail: int, follow: bool) -> LogReader:
        """Refused: a recording holds no logs."""
        from gputui.collect.docker.logs import LogStreamError

        raise LogStreamError(REPLAY_REASON)

    def container_action(self, container_id: str, action: str) -> str | None:
        """Refused: the recorded containers are not here."""
        return REPLAY_REASON

    def signal_process(self, pid: int, signum: int, start_time: float | None) -> str | None:
        """Refused: a recorded PID may be anyone's process today."""
        return REPLAY_REASON

    def parent_chain(
        self, pid: int, start_time: float | None
    ) -> tuple[tuple[ParentLink, ...], str | None]:
        """None read: a recording's PIDs are not this machine's."""
        return (), "not read: a recording's PIDs are not this machine's"

    def close(self) -> None:
        """Release the recording's files."""
        if isinstance(self._snapshots, Recording):
            self._snapshots.close()


def _iso(ts: float) -> str:
    return timestamps.utc(ts, na="an invalid time") if valid_time(ts) else "an invalid time"
