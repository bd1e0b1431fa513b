"""Recordings: ``gputui record`` writes snapshots as JSON lines, ``gputui replay`` plays them back.

A recording is a text file of one JSON object per line (:mod:`gputui.serialize` records), rotated
by size into ``FILE.1`` (newest) ... ``FILE.<keep>`` (oldest). Each file stands alone: its first
line is always a full snapshot. :class:`ReplayCollector` has the collector's interface, so the
TUI and ``--once`` run on a recording exactly as on a live machine, and adds the controls a
player needs (pause, step, seek). The format is documented in docs/record-replay.md.
"""

from __future__ import annotations

import bisect
import datetime as dt
import json
import os
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from gputui.model import ExecResult, Snapshot
from gputui.serialize import (
    SerializeError,
    snapshot_from_record,
    snapshot_from_report,
    snapshot_to_record,
)

#: Why actions are refused while replaying (shown by the UI like the read-only reason).
REPLAY_REASON = "replay: a recording cannot be acted on (no exec, no signals)"


class RecordingError(ValueError):
    """An unreadable or invalid recording, or a time outside it; the message is one line."""


class _Collecting(Protocol):
    def collect(self) -> Snapshot: ...


# -- writing ---------------------------------------------------------------------------------


class RecordWriter:
    """Appends snapshots to ``path`` as compact JSON lines, rotating by size.

    Args:
        path: The recording; appended to when it exists.
        max_bytes: Rotate before a line would make the file larger than this (0: never rotate).
        keep: How many rotated files (``path.1`` ... ``path.<keep>``) to keep.
    """

    def __init__(self, path: Path, *, max_bytes: int = 0, keep: int = 3) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.keep = keep
        self._previous: Snapshot | None = None  # None: the next line must be a full snapshot

    def write(self, snapshot: Snapshot) -> None:
        """Append one snapshot (one ``write`` call, so a crash leaves at most a partial line)."""
        size = self.path.stat().st_size if self.path.exists() else 0
        if self._previous is None or size == 0:
            self._previous = None  # appending to someone's file: start with a full line
        line = self._line(snapshot, self._previous)
        if self.max_bytes and size and size + len(line) > self.max_bytes:
            self._rotate()
            line = self._line(snapshot, None)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(line)
        self._previous = snapshot

    @staticmethod
    def _line(snapshot: Snapshot, previous: Snapshot | None) -> str:
        # ensure_ascii (the default) escapes lone surrogates from undecodable command lines, so
        # every str survives the trip; compact separators keep lines small.
        return json.dumps(snapshot_to_record(snapshot, previous), separators=(",", ":")) + "\n"

    def _rotate(self) -> None:
        if self.keep <= 0:
            self.path.unlink()
            return
        oldest = rotated_path(self.path, self.keep)
        if oldest.exists():
            oldest.unlink()
        for n in range(self.keep - 1, 0, -1):
            src = rotated_path(self.path, n)
            if src.exists():
                os.replace(src, rotated_path(self.path, n + 1))
        os.replace(self.path, rotated_path(self.path, 1))


def rotated_path(path: Path, n: int) -> Path:
    """``path.<n>``: the n-th newest rotated file of a recording."""
    return path.with_name(f"{path.name}.{n}")


def record(
    collector: _Collecting,
    writer: RecordWriter,
    *,
    interval: float,
    count: int | None = None,
    stop: threading.Event | None = None,
    monotonic: Callable[[], float] | None = None,
) -> int:
    """Collect and write snapshots every ``interval`` seconds until ``count`` or ``stop``.

    Returns:
        How many snapshots were written.
    """
    import time

    stop = stop or threading.Event()
    clock = monotonic or time.monotonic
    written = 0
    while not stop.is_set() and (count is None or written < count):
        started = clock()
        writer.write(collector.collect())
        written += 1
        if count is not None and written >= count:
            break
        # Fixed-rate, not fixed-delay: a slow collect eats into the wait, not the rate.
        stop.wait(max(0.0, interval - (clock() - started)))
    return written


# -- reading ---------------------------------------------------------------------------------


def _read_file(path: Path) -> list[Snapshot]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RecordingError(f"cannot read recording {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError:
        raise RecordingError(f"recording {path} is not UTF-8 text") from None
    stripped = text.lstrip()
    if stripped.startswith("{") and "\n{" not in stripped.rstrip():
        # One JSON document: maybe a `gputui --once --json` report rather than a recording.
        try:
            doc = json.loads(stripped)
        except json.JSONDecodeError:
            doc = None
        if isinstance(doc, dict) and "v" not in doc:
            try:
                return [snapshot_from_report(doc)]
            except (SerializeError, KeyError, TypeError, ValueError) as exc:
                raise RecordingError(f"{path}: not a recording nor a report: {exc}") from None
    snapshots: list[Snapshot] = []
    lines = text.split("\n")
    previous: Snapshot | None = None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if number == len(lines) and not text.endswith("\n"):
            break  # a partial last line: the recorder was stopped mid-write
        try:
            previous = snapshot_from_record(json.loads(line), previous)
        except json.JSONDecodeError as exc:
            raise RecordingError(f"{path}:{number}: not JSON: {exc.msg}") from None
        except SerializeError as exc:
            raise RecordingError(f"{path}:{number}: {exc}") from None
        snapshots.append(previous)
    return snapshots


def read_recording(path: Path) -> list[Snapshot]:
    """Every snapshot of a recording, oldest first, rotated files (``FILE.N`` ... ``FILE.1``) too.

    A ``gputui --once --json`` report is read as a one-snapshot recording.

    Raises:
        RecordingError: unreadable, invalid, or empty.
    """
    if not path.exists():
        raise RecordingError(f"cannot read recording {path}: No such file or directory")
    files = []
    n = 1
    while rotated_path(path, n).exists():
        files.append(rotated_path(path, n))
        n += 1
    files.reverse()
    files.append(path)
    snapshots = [s for f in files for s in _read_file(f)]
    if not snapshots:
        raise RecordingError(f"recording {path} holds no snapshot")
    # Rotated files of an older, unrelated run could interleave: order by time, stably.
    snapshots.sort(key=lambda s: s.taken_at)
    return snapshots


_OFFSET = re.compile(r"^\+(\d+(?:\.\d+)?)(ms|s|m|h)?$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_time(text: str, start: float) -> float:
    """A ``--at`` value as seconds since the epoch.

    Accepts ISO 8601 (``2026-11-29T16:36:20Z``; no zone means UTC), seconds since the epoch
    (``1795000000``), or an offset from the recording's start (``+90``, ``+90s``, ``+5m``).

    Raises:
        RecordingError: none of those.
    """
    value = text.strip()
    offset = _OFFSET.match(value)
    if offset:
        return start + float(offset.group(1)) * _UNITS[offset.group(2) or "s"]
    try:
        return float(value)
    except ValueError:
        pass
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise RecordingError(
            f"--at {text!r}: expected ISO 8601 time, epoch seconds or +OFFSET (e.g. +5m)"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.timezone.utc)
    return parsed.timestamp()


class ReplayCollector:
    """A collector over recorded snapshots: each :meth:`collect` returns one, in order.

    Playing advances one recorded snapshot per :meth:`collect`, so the UI's refresh interval
    sets the playback speed; at the end the last snapshot stays. Paused, :meth:`collect` keeps
    returning the current one. Every method is thread-safe: the UI thread seeks and steps while
    the collector thread collects.

    Args:
        snapshots: The recording, oldest first (non-empty).
        source: Where it came from, for the UI's title.
    """

    mode = "replay"
    read_only = True

    def __init__(self, snapshots: Sequence[Snapshot], source: str = "recording") -> None:
        if not snapshots:
            raise RecordingError("a replay needs at least one snapshot")
        self._snapshots = tuple(snapshots)
        self._times = [s.taken_at for s in self._snapshots]
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
        return cls(read_recording(path), source=str(path))

    # -- the player's controls ---------------------------------------------------------------

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

    @property
    def at_end(self) -> bool:
        """True once the last snapshot has been reached."""
        with self._lock:
            return self._position == len(self._snapshots) - 1

    @property
    def current(self) -> Snapshot:
        """The snapshot at :attr:`position`."""
        with self._lock:
            return self._snapshots[self._position]

    def snapshot_at(self, index: int) -> Snapshot:
        """The ``index``-th recorded snapshot (does not move the position)."""
        return self._snapshots[index]

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
            return self._snapshots[self._position]

    def seek(self, when: float) -> Snapshot:
        """Move to the last snapshot taken at or before ``when`` (epoch seconds); return it.

        Raises:
            RecordingError: ``when`` is before the first or after the last snapshot.
        """
        index = self.index_at(when)
        with self._lock:
            self._position = index
            self._started = True
            return self._snapshots[index]

    def index_at(self, when: float) -> int:
        """Index of the last snapshot taken at or before ``when``.

        Raises:
            RecordingError: ``when`` is outside the recording.
        """
        if when < self._times[0] or when > self._times[-1]:
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
            return self._snapshots[self._position]

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

    def signal_process(self, pid: int, signum: int, start_time: float | None) -> str | None:
        """Refused: a recorded PID may be anyone's process today."""
        return REPLAY_REASON

    def close(self) -> None:
        """Nothing to release."""


def _iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
