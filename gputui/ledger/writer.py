"""Feeding the store from a collect loop: what the TUI, ``export``, ``record`` and ``daemon`` run.

:class:`LedgerWriter` takes every delivered snapshot (on the loop's thread, after the
front-end's own delivery), turns it into increments and commits them at least every
:data:`COMMIT_EVERY_S` seconds (and on close): a ``kill -9`` loses at most that much, and the
next writer records the time nobody wrote as a gap. It never raises into the loop: a store it
cannot open or write is a :attr:`LedgerWriter.status` line, the monitor goes on.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from gputui.ledger.quantities import Accountant, Amounts, Device, Gap, Interval, Subject
from gputui.ledger.store import (
    TIERS,
    LifecycleEvent,
    Store,
    StoreBusyError,
    StoreError,
    bucket,
    default_store_path,
)

if TYPE_CHECKING:
    from gputui.ledger.timeline import LifecycleWatch, TimelineEncoder
from gputui.model.snapshot import Snapshot

#: Longest time between commits (the most a crash loses).
COMMIT_EVERY_S = 30.0
#: Drop the oldest uncommitted bucket beyond this many (a store that keeps failing, a full
#: disk): memory stays bounded and the dropped time is a gap once a write succeeds.
MAX_PENDING_BUCKETS = 360
#: Timeline snapshots and lifecycle events kept while the store cannot be written (an hour of
#: snapshots); past that the pending timeline is dropped whole (its deltas need their bases).
MAX_PENDING_TIMELINE = 360
MAX_PENDING_EVENTS = 10_000
#: How often old buckets are pruned from the finer tiers.
PRUNE_EVERY_S = 3600.0

_FINEST = TIERS[0][1]


class LedgerWriter:
    """Writes each snapshot's increments into the store when this process holds its lock.

    Args:
        path: The store.
        program: Who writes, for the sessions table (``daemon``, ``tui``, ``export``...).
        interval_s: The collection interval (gaps are measured against it).
        idle_power_w: Idle power per GPU model (see :class:`~gputui.ledger.quantities.Accountant`).
        commit_every_s: Longest time between commits.
        clock: Wall-clock time (commits are timed by it).
    """

    def __init__(
        self,
        path: Path,
        program: str,
        *,
        interval_s: float,
        idle_power_w: Mapping[str, float] | None = None,
        commit_every_s: float = COMMIT_EVERY_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = path
        self.program = program
        self.accountant = Accountant(interval_s, idle_power_w)
        self.commit_every_s = commit_every_s
        self._clock = clock
        self.store: Store | None = None
        #: For people: writing, read-only (who writes), or why nothing is written.
        self.status = "ledger: not started"
        #: True while this process writes the store.
        self.writing = False
        #: The last write error (None after a successful commit).
        self.error: str | None = None
        self._rows: dict[tuple[int, Device, Subject], Amounts] = {}
        self._coverage: dict[int, list[float]] = {}
        self._gaps: list[Gap] = []
        self._last_end: float | None = None
        self._last_commit = clock()
        self._last_prune = 0.0
        self._resumed_from: float | None = None
        self._first = True
        self._first_at: float | None = None
        self._started = False
        # Made on the first snapshot (the loop's thread): the recording codec they use is not
        # loaded at the monitor's start.
        self._encoder: TimelineEncoder | None = None
        self._watch: LifecycleWatch | None = None
        self._timeline: list[tuple[float, bool, bytes]] = []
        self._events: list[LifecycleEvent] = []

    def start(self) -> bool:
        """Open the store for writing; False (and :attr:`status` says why) when it cannot.

        :meth:`observe` calls it on its first snapshot (so the monitor's UI thread never opens
        the store); a front-end that must know at once (``daemon``) calls it first.
        """
        self._started = True
        try:
            self.store = Store.open_writer(self.path, self.program)
        except StoreBusyError as exc:
            self.status = f"ledger read-only: {exc}"
            return False
        except StoreError as exc:
            self.status = f"ledger off: {exc}"
            return False
        self._resumed_from = self.store.last_written()
        self.writing = True
        self.status = f"ledger: writing {self.path}"
        return True

    def observe(self, snapshot: Snapshot, _analysis: object = None) -> None:
        """Take in one delivered snapshot (the loop's hook: never raises)."""
        if not self._started:
            self.start()
        if not self.writing:
            return
        try:
            self._observe(snapshot)
        except Exception as exc:  # a bug here must not stop the monitor
            self.error = f"{type(exc).__name__}: {exc}"
            self.status = f"ledger failing: {self.error}"

    def _observe(self, snapshot: Snapshot) -> None:
        if self._encoder is None or self._watch is None:
            from gputui.ledger.timeline import LifecycleWatch, TimelineEncoder

            self._encoder, self._watch = TimelineEncoder(), LifecycleWatch()
        if self._first:
            self._first = False
            self._first_at = snapshot.taken_at
            # Everything since the last commit of any writer is credited to nobody (a writer
            # killed before it committed, or nothing running): a gap, however short.
            start = self._resumed_from
            if start is not None and snapshot.taken_at > start:
                self._gaps.append(Gap(start, snapshot.taken_at, "nothing was writing"))
        kept = self._encoder.take(snapshot)
        if kept is not None:
            if len(self._timeline) >= MAX_PENDING_TIMELINE:
                self._timeline.clear()  # all of it: a delta without its base is unreadable
                self._encoder.restart()
                kept = self._encoder.take(snapshot)
            if kept is not None:
                self._timeline.append(kept)
        self._events.extend(self._watch.take(snapshot))
        del self._events[:-MAX_PENDING_EVENTS]
        step = self.accountant.take(snapshot)
        if isinstance(step, Gap):
            self._gaps.append(step)
            self._last_end = step.end
        elif isinstance(step, Interval):
            self._add(step)
        if self._clock() - self._last_commit >= self.commit_every_s:
            self.commit()

    def _add(self, step: Interval) -> None:
        start = bucket(step.end, _FINEST)
        for (device, subject), amounts in step.rows.items():
            key = (start, device, subject)
            into = self._rows.get(key)
            if into is None:
                self._rows[key] = amounts
            else:
                into.add(amounts)
        cover = self._coverage.setdefault(start, [0.0, 0.0, 0.0])
        cover[0] += step.wall_s
        cover[1] += step.wall_s * len(step.devices)
        cover[2] += step.energy_j
        self._last_end = step.end
        if len(self._coverage) > MAX_PENDING_BUCKETS:
            oldest = min(self._coverage)
            del self._coverage[oldest]
            for key in [k for k in self._rows if k[0] == oldest]:
                del self._rows[key]
            self._gaps.append(
                Gap(oldest, oldest + _FINEST, f"not written: {self.error or 'store failing'}")
            )

    def commit(self) -> bool:
        """Write what is pending; False (kept for the next try) when the write failed."""
        self._last_commit = self._clock()
        if self.store is None:
            return False
        coverage = {k: (v[0], v[1], v[2]) for k, v in self._coverage.items()}
        try:
            self.store.write(
                self._rows,
                coverage,
                self._gaps,
                self._last_end,
                self._first_at,
                self._timeline,
                self._events,
            )
            if self._clock() - self._last_prune >= PRUNE_EVERY_S:
                self._last_prune = self._clock()
                self.store.prune(self._last_prune)
        except Exception as exc:  # sqlite3.Error, OSError: a full disk, a store gone bad
            self.error = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            self.status = f"ledger: cannot write {self.path}: {self.error} (kept in memory)"
            return False
        self._rows = {}
        self._coverage = {}
        self._gaps = []
        self._timeline = []
        self._events = []
        if self.error is not None:
            self.error = None
            self.status = f"ledger: writing {self.path}"
        return True

    def close(self) -> None:
        """Commit what is pending and release the store."""
        self._started = True  # a late snapshot after closing opens nothing
        if self.store is None:
            return
        if self.writing:
            self.commit()
        self.store.close()
        self.store = None
        self.writing = False


#: ``GPUTUI_LEDGER=off`` keeps every front-end but ``daemon`` from writing the ledger.
ENV_SWITCH = "GPUTUI_LEDGER"


def writer_for(
    program: str,
    *,
    mode: str,
    interval_s: float,
    store: Path | None,
    explicit: bool,
    write: bool = True,
    idle_power_w: Mapping[str, float] | None = None,
    env: Mapping[str, str] | None = None,
) -> LedgerWriter | None:
    """The writer a long-running front-end attaches to its loop, or None.

    Only a live host's snapshots go into a store by default: a demo or a scenario is not this
    host, so it writes only into a store named on the command line (``explicit``).

    Args:
        program: ``tui``, ``export``, ``record``.
        mode: The snapshots' mode (``live``, ``scenario``, ``demo``).
        interval_s: The collection interval.
        store: The store (None: the default path).
        explicit: ``store`` was named on the command line.
        write: ``[ledger] write`` of the config file.
        idle_power_w: ``[ledger] idle_power_w``.
        env: The environment (``GPUTUI_LEDGER=off``).
    """
    env = os.environ if env is None else env
    if not write or env.get(ENV_SWITCH, "").strip().lower() in ("off", "0", "no", "false"):
        return None
    if mode != "live" and not explicit:
        return None
    return LedgerWriter(
        store if store is not None else default_store_path(env),
        program,
        interval_s=interval_s,
        idle_power_w=idle_power_w,
    )


def announcing(
    writer: LedgerWriter, say: Callable[[str], None]
) -> Callable[[Snapshot, object], None]:
    """``writer.observe`` that also says each change of the writer's status.

    Once per change, not per snapshot: a monitor that cannot write the ledger says so and why,
    and goes on.
    """
    said = [""]

    def observe(snapshot: Snapshot, analysis: object = None) -> None:
        writer.observe(snapshot, analysis)
        if writer.status != said[0]:
            said[0] = writer.status
            say(writer.status)

    return observe
