"""Reading recordings: a lazily indexed sequence of snapshots over the rotated files."""

from __future__ import annotations

import array
import json
import os
import threading
import typing
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gputui.boundary import timestamps
from gputui.boundary.userfiles import (
    REPORT_LIMIT,
    UserFileError,
    open_user_file,
    read_user_text,
)
from gputui.model.snapshot import Snapshot
from gputui.recording.codec import (
    FORMAT_VERSION,
    MAX_TIME,
    SerializeError,
    snapshot_from_record,
    snapshot_from_report,
)

if TYPE_CHECKING:
    pass
from gputui.recording.writer import MAX_KEEP, RecordingError, rotated_path

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
            where = f"{self.files[self._file[line]]}: snapshot at {shown_time(self._times[index])}"
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


def shown_time(ts: float) -> str:
    """A recording's moment in UTC for messages, or ``an invalid time``."""
    return timestamps.utc(ts, na="an invalid time") if valid_time(ts) else "an invalid time"
