"""``gputui record``'s writer: snapshots as JSON lines, rotated by size, one writer per file."""

from __future__ import annotations

import fcntl
import json
import os
import stat
import threading
import typing
from pathlib import Path
from typing import TYPE_CHECKING

from gputui.boundary.userfiles import (
    UserFileError,
    open_user_append,
)
from gputui.collect.loop import CollectLoop
from gputui.collect.sources import CollectorProtocol
from gputui.model.snapshot import Snapshot
from gputui.recording.codec import (
    snapshot_to_record,
)

if TYPE_CHECKING:
    pass


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
    its mode, and so does the file a rotation starts (see :mod:`gputui.boundary.userfiles`). A file
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
            # every user are in it), a planted symlink is refused (see gputui.boundary.userfiles).
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
