"""The delivery worker: one thread and one bounded queue per target, never the caller's time.

:meth:`Notifier.submit` (and :meth:`Notifier.observe`, the analysis sink) only filters and
enqueues: a full queue drops the event and counts it, so the collect loop never waits for a
receiver. Each target's thread then deduplicates (the same transition within ``repeat``),
rate-limits (``rate_limit`` per hour), sends, and retries what may succeed later with
exponential backoff (``backoff``, doubled each time). :meth:`Notifier.close` cancels a request
in progress and stops every thread within its timeout; the threads are daemons, never joined
beyond that.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gputui.boundary.sanitise import safe_text
from gputui.boundary.timestamps import utc
from gputui.collect.http_client import Cancel
from gputui.derive.analysis import Analysis
from gputui.notify.config import NotifyTarget, redact
from gputui.notify.events import AnalysisEvents, Event, Status, severity_rank
from gputui.notify.payloads import body, fingerprint, text_line
from gputui.notify.send import Outcome, post_webhook, run_command

#: Events waiting per target; more are dropped (and counted), never waited for.
QUEUE_SIZE = 256
#: The longest delay between two attempts.
MAX_BACKOFF_S = 300.0
#: Log lines kept for ``doctor`` and tests.
RECENT_LINES = 50
_HOUR_S = 3600.0


@dataclass(slots=True)
class TargetStats:
    """What a target's worker did (read from other threads: plain counters).

    Attributes:
        sent: Deliveries that succeeded.
        failed: Events given up on (every attempt failed, or no retry could help).
        retried: Attempts after a first failed one.
        deduplicated: Events not sent because the same transition went out within ``repeat``.
        rate_limited: Events dropped over ``rate_limit`` per hour.
        dropped: Events dropped because the queue was full.
        last: The last outcome, one line (``HTTP 200``...), empty before any.
    """

    sent: int = 0
    failed: int = 0
    retried: int = 0
    deduplicated: int = 0
    rate_limited: int = 0
    dropped: int = 0
    last: str = ""


def command_env(e: Event, host: str) -> dict[str, str]:
    """The ``GPUTUI_EVENT_*`` variables of a command target (sanitised, bounded)."""
    return {
        "GPUTUI_EVENT_KIND": e.kind.value,
        "GPUTUI_EVENT_STATUS": e.status.value,
        "GPUTUI_EVENT_NAME": safe_text(e.name, 256),
        "GPUTUI_EVENT_SUBJECT": safe_text(e.subject, 256),
        "GPUTUI_EVENT_SEVERITY": e.severity,
        "GPUTUI_EVENT_SUMMARY": safe_text(e.summary, 1000),
        "GPUTUI_EVENT_HOST": safe_text(host, 256),
        "GPUTUI_EVENT_STARTS_AT": utc(e.starts_at, ""),
        "GPUTUI_EVENT_FINGERPRINT": fingerprint(e),
    }


class _Lane:
    """One target's queue, thread and bookkeeping."""

    def __init__(self, notifier: Notifier, target: NotifyTarget) -> None:
        self.notifier = notifier
        self.target = target
        self.stats = TargetStats()
        self.queue: queue.Queue[Event] = queue.Queue(QUEUE_SIZE)
        self.cancel = Cancel()
        self._secrets = target.secrets()
        self._sent_at: dict[tuple[str, Status], float] = {}
        self._window: deque[float] = deque()
        self._limited_logged = False
        self.thread = threading.Thread(
            target=self._run, name=f"gputui-notify-{target.name}", daemon=True
        )

    def offer(self, e: Event) -> None:
        try:
            self.queue.put_nowait(e)
        except queue.Full:
            self.stats.dropped += 1
            self.log(f"queue full ({QUEUE_SIZE} waiting): an event was dropped")

    def pending(self) -> int:
        """Events queued or in delivery."""
        with self.queue.mutex:
            return self.queue.unfinished_tasks

    def log(self, message: str) -> None:
        self.notifier.log(redact(f"notify: {self.target.shown}: {message}", self._secrets))

    def _run(self) -> None:
        while not self.notifier.closing.is_set():
            try:
                e = self.queue.get(timeout=0.5)
            except queue.Empty:
                continue
            try:
                self._deliver(e)
            except Exception as exc:  # a bug here must not end the lane
                self.stats.failed += 1
                self.log(f"delivery failed: {type(exc).__name__}")
            finally:
                self.queue.task_done()

    def _deliver(self, e: Event) -> None:
        now = self.notifier.clock()
        target = self.target
        # Drop what went out within ``repeat`` (the same key and status), and the end of
        # something whose start was never sent.
        key = (e.key, e.status)
        last = self._sent_at.get(key)
        if last is not None and now - last < target.repeat_s:
            self.stats.deduplicated += 1
            return
        if e.status is Status.RESOLVED and (e.key, Status.FIRING) not in self._sent_at:
            return
        while self._window and now - self._window[0] >= _HOUR_S:
            self._window.popleft()
        if len(self._window) >= target.rate_limit:
            self.stats.rate_limited += 1
            if not self._limited_logged:
                self._limited_logged = True
                self.log(f"over {target.rate_limit} per hour: dropping events for now")
            return
        self._limited_logged = False
        self._window.append(now)
        self._sent_at[key] = now
        if e.status is Status.FIRING:
            self._sent_at.pop((e.key, Status.RESOLVED), None)
        if len(self._sent_at) > 4 * QUEUE_SIZE:  # bounded: forget what is past ``repeat``
            self._sent_at = {k: t for k, t in self._sent_at.items() if now - t < target.repeat_s}
        self._attempts(e)

    def _attempts(self, e: Event) -> None:
        target = self.target
        host = self.notifier.host
        payload = body(e, host, "json" if target.type == "command" else target.format, target.name)
        for attempt in range(target.retries + 1):
            if attempt:
                self.stats.retried += 1
            outcome = self._once(e, payload)
            self.stats.last = outcome.detail
            if outcome.ok:
                self.stats.sent += 1
                return
            if not outcome.retry or attempt == target.retries:
                break
            delay = min(MAX_BACKOFF_S, target.backoff_s * 2**attempt)
            self.log(f"{outcome.detail}; retry {attempt + 1} of {target.retries} in {delay:g} s")
            if self.notifier.closing.wait(delay):
                break
        self.stats.failed += 1
        self.log(f"{outcome.detail}; given up on: {safe_text(text_line(e, host), 160)}")

    def _once(self, e: Event, payload: bytes) -> Outcome:
        if self.target.type == "command":
            env = command_env(e, self.notifier.host)
            return run_command(self.target, payload, env, self.cancel)
        return post_webhook(self.target, payload, self.cancel)


class Notifier:
    """Delivers events to the ``[[notify]]`` targets, each on its own thread.

    Args:
        targets: The targets (``load_config(...).notify``).
        host: The host name events name (``instance`` in Alertmanager's shape).
        log: Receives one redacted line per problem (the exporter's stderr; the TUI keeps
            them in :attr:`recent` only). Called on the workers' threads.
        clock: Seconds for deduplication and rate limits (``time.monotonic``; tests pass a
            fake one).
    """

    def __init__(
        self,
        targets: Iterable[NotifyTarget],
        host: str,
        *,
        log: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.host = host
        self.clock = clock
        self.closing = threading.Event()
        self.recent: deque[str] = deque(maxlen=RECENT_LINES)
        self._log = log
        self._events = AnalysisEvents()
        self._lanes = [_Lane(self, t) for t in targets]
        for lane in self._lanes:
            lane.thread.start()

    @property
    def targets(self) -> tuple[NotifyTarget, ...]:
        """The targets, in config order."""
        return tuple(lane.target for lane in self._lanes)

    @property
    def stats(self) -> dict[str, TargetStats]:
        """Each target's counters, by name."""
        return {lane.target.name: lane.stats for lane in self._lanes}

    def log(self, line: str) -> None:
        """Keep ``line`` (already redacted) and pass it to the log callable."""
        self.recent.append(line)
        if self._log is not None:
            with contextlib.suppress(Exception):  # a broken log sink must not stop deliveries
                self._log(line)

    def submit(self, events: Iterable[Event]) -> None:
        """Queue each event for the targets that select it; never blocks."""
        if self.closing.is_set():
            return
        for e in events:
            rank = severity_rank(e.severity)
            for lane in self._lanes:
                target = lane.target
                if not target.wants(e.kind.value, rank):
                    continue
                if e.status is Status.RESOLVED and not target.resolved:
                    continue
                lane.offer(e)

    def observe(self, analysis: Analysis) -> None:
        """The analysis sink: the alerts and findings that started or ended, queued."""
        try:
            self.submit(self._events.update(analysis))
        except Exception as exc:  # delivery must never break the analysis it listens to
            self.log(f"notify: events of an analysis failed: {type(exc).__name__}")

    def idle(self) -> bool:
        """True when no event waits or is being delivered."""
        return all(lane.pending() == 0 for lane in self._lanes)

    def close(self, timeout: float = 2.0) -> None:
        """Stop the workers: a request in progress is cancelled; waits at most ``timeout``."""
        self.closing.set()
        for lane in self._lanes:
            lane.cancel.cancel()
        deadline = time.monotonic() + timeout
        for lane in self._lanes:
            lane.thread.join(max(0.0, deadline - time.monotonic()))


def start_notifier(
    targets: Iterable[NotifyTarget],
    host: str,
    *,
    log: Callable[[str], None] | None = None,
) -> Notifier | None:
    """A running :class:`Notifier` for ``targets``; None when there are none (no thread)."""
    targets = tuple(targets)
    return Notifier(targets, host, log=log) if targets else None
