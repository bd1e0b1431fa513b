"""Recordings: ``gputui record`` writes snapshots as JSON lines, ``gputui replay`` plays them back.

A recording is a text file of one JSON object per line (:mod:`gputui.recording.codec`
records), rotated
by size into ``FILE.1`` (newest) ... ``FILE.<keep>`` (oldest). Each file stands alone: its first
line is always a full snapshot. :class:`ReplayCollector` implements the one collector protocol
(:class:`~gputui.collect.sources.CollectorProtocol`), so the TUI and ``--once`` run on a recording
exactly as on a live machine, and offers the controls a player needs (pause, step, seek) as its
:attr:`~ReplayCollector.player`. A recording holds snapshots only: findings and alerts are
reproduced on replay by the same ``Analyzer`` (its engines take the time from the snapshots). The
format is documented in docs/record-replay.md.
"""

from __future__ import annotations

import bisect
import datetime as dt
import re
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gputui.collect.sources import ContainerCapabilities, ContainerOwner
from gputui.model.containers import ContainerDetails, ContainerProcesses, ExecResult
from gputui.model.snapshot import Snapshot

if TYPE_CHECKING:
    from gputui.collect.docker.logs import LogReader
    from gputui.collect.linux.parent_chain import ParentLink
from gputui.recording.reader import open_recording, shown_time, valid_time
from gputui.recording.writer import RecordingError

#: Why actions are refused while replaying (shown by the UI like the read-only reason).
REPLAY_REASON = "replay: a recording cannot be acted on (no exec, no signals)"


_OFFSET = re.compile(r"^\+([0-9]{1,15}(?:\.[0-9]{1,9})?)(ms|s|m|h)?$")
#: ``03:00``, ``today 14:30``, ``yesterday 03:00:15``: a time of a day, local as people say it.
_DAY_TIME = re.compile(
    r"^(?:(today|yesterday)\s+)?([01]?[0-9]|2[0-3]):([0-5][0-9])(?::([0-5][0-9]))?$"
)
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_time(text: str, start: float, now: float | None = None) -> float:
    """A ``--at`` value as seconds since the epoch.

    Accepts ISO 8601 (``2026-11-29T16:36:20Z``; no zone means UTC), seconds since the epoch
    (``1795000000``), an offset from the recording's start (``+90``, ``+90s``, ``+5m``), or a
    local time of today or yesterday (``03:00``, ``today 14:30``, ``yesterday 03:00``).

    Args:
        text: The value.
        start: The recording's first snapshot (offsets count from it).
        now: The wall clock (what ``today`` means); now by default.

    Raises:
        RecordingError: none of those, or a time no recording can hold (not finite, before
            the epoch or after the year 9999).
    """
    value = text.strip()
    offset = _OFFSET.match(value)
    day_time = _DAY_TIME.match(value.lower())
    if day_time:
        day = dt.datetime.fromtimestamp(time.time() if now is None else now).astimezone()
        if day_time.group(1) == "yesterday":
            day -= dt.timedelta(days=1)
        hour, minute, second = (int(day_time.group(i) or 0) for i in (2, 3, 4))
        when = day.replace(hour=hour, minute=minute, second=second, microsecond=0).timestamp()
    elif offset:
        when = start + float(offset.group(1)) * _UNITS[offset.group(2) or "s"]
    else:
        try:
            when = float(value) if len(value) <= 40 else float("nan")
        except ValueError:
            when = _iso_time(value, text)
    if not valid_time(when):
        raise RecordingError(
            f"--at {_shown(text)}: not a time between 1970 and 9999 (ISO 8601, epoch seconds, "
            "+OFFSET or yesterday 03:00)"
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
            f"--at {_shown(text)}: expected ISO 8601 time, epoch seconds, +OFFSET (e.g. +5m) "
            "or a local time (03:00, yesterday 03:00)"
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
        times = getattr(snapshots, "times", None)
        if isinstance(times, Sequence):
            # A lazily decoded sequence (a recording's files, a ledger store's timeline) knows
            # its times without decoding a snapshot.
            self._snapshots: Sequence[Snapshot] = snapshots
            self._times: Sequence[float] = times
            self.skipped = int(getattr(snapshots, "skipped", 0))
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
                f"time {shown_time(when)} is outside the recording "
                f"({shown_time(self._times[0])} .. {shown_time(self._times[-1])})"
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

    def container_details(self, container_id: str) -> ContainerDetails:
        """Refused: the recorded containers are not here to inspect."""
        return ContainerDetails(container_id, error=REPLAY_REASON)

    def container_processes(self, container_id: str) -> ContainerProcesses:
        """Refused: a recording's PIDs are not this machine's."""
        return ContainerProcesses(error=REPLAY_REASON)

    def signal_process(self, pid: int, signum: int, start_time: float | None) -> str | None:
        """Refused: a recorded PID may be anyone's process today."""
        return REPLAY_REASON

    def parent_chain(
        self, pid: int, start_time: float | None
    ) -> tuple[tuple[ParentLink, ...], str | None]:
        """None read: a recording's PIDs are not this machine's."""
        return (), "not read: a recording's PIDs are not this machine's"

    def close(self) -> None:
        """Release the recording's files (or the store a timeline is read from)."""
        close = getattr(self._snapshots, "close", None)
        if callable(close):
            close()
