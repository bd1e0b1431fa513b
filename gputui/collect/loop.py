"""The collect loop every front-end runs: collect, analyse, deliver, wait; pause, wake, stop.

No Textual here: the TUI's worker, the exporter's thread and ``gputui record`` all call
:meth:`CollectLoop.run`, which returns when stopped. The analysis step is a plain callable
(the front-ends pass ``Analyzer.analyse``), so this module stays below ``gputui.derive`` in the
import layers.

Waits are cut into slices of at most :data:`SLICE_S`: a stop (or a Textual worker's
cancellation) is honoured within that, and no single wait ever gets near
``threading.TIMEOUT_MAX``, however long the interval asked for.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

from gputui.boundary.startup_trace import mark
from gputui.collect.gc_policy import MonitorGc
from gputui.collect.sources import CollectorProtocol, ContainerOwner, Player
from gputui.model.containers import ContainerDetails, ContainerProcesses, ExecResult
from gputui.model.snapshot import Snapshot

if TYPE_CHECKING:
    from gputui.collect.docker.logs import LogReader
    from gputui.collect.linux.parent_chain import ParentLink

A = TypeVar("A")

#: Longest single wait: how quickly a stop or a cancellation is noticed.
SLICE_S = 0.5
#: Longest interval honoured (a longer, infinite or NaN one is capped to this).
MAX_INTERVAL_S = 86400.0


def bounded_wait(seconds: float) -> float:
    """``seconds`` within [0, :data:`MAX_INTERVAL_S`]; NaN and infinity count as the longest."""
    if not math.isfinite(seconds):
        return 0.0 if seconds == -math.inf else MAX_INTERVAL_S
    return min(max(0.0, seconds), MAX_INTERVAL_S)


class CollectLoop(Generic[A]):
    """Collects, analyses and delivers one snapshot per interval until stopped.

    Fixed-rate: the time a collection takes is taken off the following wait. A replay that
    stepped or sought (:meth:`jump`) delivers the player's current snapshot next, instead of
    collecting (which would advance past it).

    Args:
        collector: Where snapshots come from.
        analyse: What each snapshot means (``Analyzer.analyse``); runs on the loop's thread.
        deliver: Receives ``(snapshot, analysis)``; runs on the loop's thread.
        interval: Seconds between collections (bounded by :func:`bounded_wait`).
        on_error: Receives an exception raised by a collection, the analysis or the delivery;
            the loop then goes on (counted in :attr:`errors`). None: the exception ends
            :meth:`run` (raised from it), as does one raised by ``on_error`` itself.
        observe: Also receives ``(snapshot, analysis)``, after ``deliver`` (the ledger's
            writer); it must not raise.
        tune_gc: Apply the long-lived monitor's garbage-collector policy
            (:class:`~gputui.collect.gc_policy.MonitorGc`) between refreshes of :meth:`run`.
            Process-wide, so it lives here, where the long-running front-ends run, and not in
            the collector: a one-shot, which never runs this loop, keeps the defaults.
    """

    def __init__(
        self,
        collector: CollectorProtocol,
        analyse: Callable[[Snapshot], A],
        deliver: Callable[[Snapshot, A], None],
        *,
        interval: float,
        on_error: Callable[[Exception], None] | None = None,
        observe: Callable[[Snapshot, A], None] | None = None,
        tune_gc: bool = True,
    ) -> None:
        self.collector = collector
        self._gc = MonitorGc() if tune_gc else None
        self._observe = observe
        self._analyse = analyse
        self._deliver = deliver
        self._on_error = on_error
        self._interval = bounded_wait(interval)
        #: Collections, analyses or deliveries that raised.
        self.errors = 0
        #: Snapshots delivered so far.
        self.delivered = 0
        #: ``time.monotonic()`` when the latest collection started (0.0: none yet).
        self.last_started = 0.0
        self._stop = threading.Event()
        # Public so a caller that must hold collection around something of its own (a suspended
        # terminal) can clear and set it; pause() and resume() are the usual way.
        self.go = threading.Event()  # set while running, clear while paused
        self.go.set()
        self.woken = threading.Event()  # cuts the current wait short
        self._jump = threading.Event()

    @property
    def interval(self) -> float:
        """Seconds between collections."""
        return self._interval

    @interval.setter
    def interval(self, seconds: float) -> None:
        self._interval = bounded_wait(seconds)
        self.woken.set()  # the new interval applies to the wait in progress

    @property
    def stopped(self) -> bool:
        """True once :meth:`stop` was called."""
        return self._stop.is_set()

    @property
    def paused(self) -> bool:
        """True while paused."""
        return not self.go.is_set()

    def pause(self) -> None:
        """Collect nothing until :meth:`resume` (a collection in progress still delivers)."""
        self.go.clear()

    def resume(self) -> None:
        """Collect again, at once."""
        self.go.set()
        self.woken.set()

    def wake(self) -> None:
        """End the current wait: collect now."""
        self.woken.set()

    def jump(self) -> None:
        """A replay moved: deliver the player's current snapshot now, without advancing."""
        self._jump.set()
        self.woken.set()

    def stop(self) -> None:
        """End :meth:`run` (within :data:`SLICE_S`, or after a collection in progress)."""
        self._stop.set()
        self.go.set()
        self.woken.set()

    def run(self, cancelled: Callable[[], bool] = lambda: False, count: int | None = None) -> None:
        """Loop until :meth:`stop`, ``cancelled()`` or ``count`` deliveries (blocking).

        Args:
            cancelled: Checked at least every :data:`SLICE_S` (a Textual worker's flag).
            count: Stop after this many deliveries in this call (None: never).
        """
        done = 0
        while not self._ended(cancelled):
            if not self.go.wait(SLICE_S):
                continue
            started = time.monotonic()
            if self.once():
                done += 1
            if count is not None and done >= count:
                return
            if self._gc is not None:
                self._gc.after_refresh()  # between two refreshes: a due sweep delays no data
            self._sleep(self._interval - (time.monotonic() - started), cancelled)

    def once(self) -> bool:
        """One collection, analysis and delivery; False when it failed or the loop stopped.

        Raises:
            Exception: what the step raised, when there is no ``on_error`` (or it raised).
        """
        self.last_started = time.monotonic()
        # A wake asked for before this collection is answered by it; one during it ends the
        # following wait.
        self.woken.clear()
        try:
            player = self.collector.player if self._jump.is_set() else None
            self._jump.clear()
            # Stepped or sought: show where the player landed, not the snapshot after it.
            snapshot = player.current if player is not None else self.collector.collect()
            mark("loop-collected")
            analysis = self._analyse(snapshot)
            mark("loop-analysed")
            if self._stop.is_set():
                return False  # stopped during a slow collection: deliver nothing more
            self._deliver(snapshot, analysis)
            if self._observe is not None and player is None:
                self._observe(snapshot, analysis)  # a replayed step is no new interval
        except Exception as exc:
            self.errors += 1
            if self._on_error is None:
                raise
            self._on_error(exc)
            return False
        self.delivered += 1
        return True

    def _ended(self, cancelled: Callable[[], bool]) -> bool:
        return self._stop.is_set() or cancelled()

    def _sleep(self, seconds: float, cancelled: Callable[[], bool]) -> None:
        """Wait ``seconds`` in slices, ending early on a wake, a stop or a cancellation."""
        deadline = time.monotonic() + bounded_wait(seconds)
        while not self._ended(cancelled):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if self.woken.wait(min(left, SLICE_S)):
                self.woken.clear()
                return


class Prefetched:
    """A collector whose first collection starts at once, on its own thread.

    The TUI builds one right after the command line is read, so NVML's start, the Docker
    connection and the first health checks overlap the Textual import and the first paint
    instead of following them; the loop's first :meth:`collect` then takes that snapshot.
    Everything else is the wrapped collector's.

    Args:
        collector: The collector to run ahead.
    """

    def __init__(self, collector: CollectorProtocol) -> None:
        self.inner = collector
        self.mode = collector.mode
        self._first: Snapshot | None = None
        self._error: Exception | None = None
        self._done = threading.Event()
        self._taken = False
        threading.Thread(target=self._run_first, name="gputui-first-collect", daemon=True).start()

    def _run_first(self) -> None:
        try:
            self._first = self.inner.collect()
        except Exception as exc:  # re-raised by collect(), on the loop's thread
            self._error = exc
        finally:
            self._done.set()

    @property
    def player(self) -> Player | None:
        """The wrapped collector's replay controls."""
        return self.inner.player

    def first(self) -> Snapshot | None:
        """The first snapshot, waiting for it, without taking it; None when it failed.

        The loop's first :meth:`collect` still takes it (and raises the failure).
        """
        self._done.wait()
        return self._first

    def collect(self) -> Snapshot:
        """The prefetched snapshot the first time (waiting for it), then a fresh collection."""
        if not self._taken:
            self._taken = True
            self._done.wait()  # the collector's own deadlines bound the first collection
            if self._error is not None:
                raise self._error
            assert self._first is not None
            first, self._first = self._first, None
            return first
        return self.inner.collect()

    def request_health(self) -> None:
        """Pass on."""
        self.inner.request_health()

    def exec_in_container(
        self, container_id: str, argv: Sequence[str], timeout_s: float
    ) -> ExecResult:
        """Pass on."""
        return self.inner.exec_in_container(container_id, argv, timeout_s)

    def interactive_exec_argv(self, container_id: str, argv: Sequence[str]) -> list[str] | None:
        """Pass on."""
        return self.inner.interactive_exec_argv(container_id, argv)

    def container_owner(self, container_id: str) -> ContainerOwner | None:
        """Pass on."""
        return self.inner.container_owner(container_id)

    def open_container_logs(self, container_id: str, *, tail: int, follow: bool) -> LogReader:
        """Pass on."""
        return self.inner.open_container_logs(container_id, tail=tail, follow=follow)

    def container_action(self, container_id: str, action: str) -> str | None:
        """Pass on."""
        return self.inner.container_action(container_id, action)

    def container_details(self, container_id: str) -> ContainerDetails:
        """Pass on."""
        return self.inner.container_details(container_id)

    def container_processes(self, container_id: str) -> ContainerProcesses:
        """Pass on."""
        return self.inner.container_processes(container_id)

    def signal_process(self, pid: int, signum: int, start_time: float | None) -> str | None:
        """Pass on."""
        return self.inner.signal_process(pid, signum, start_time)

    def parent_chain(
        self, pid: int, start_time: float | None
    ) -> tuple[tuple[ParentLink, ...], str | None]:
        """Pass on."""
        return self.inner.parent_chain(pid, start_time)

    def close(self) -> None:
        """Close the wrapped collector (a first collection still running is not waited for)."""
        self.inner.close()
