"""Where the fleet's answers come from: a live query API, or answers recorded in a file.

:class:`LiveFleet` asks Prometheus (one instant query for the host table per refresh; one
instant and one range query for a drilled-down host). :class:`RecordedFleet` replays answers
saved by ``gputui fleet --save-answers FILE`` (or written by hand, like a scenario): the fleet
screen and ``--once`` then run without any Prometheus, for screenshots and rendering tests.
"""

from __future__ import annotations

import functools
import json
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from gputui.boundary.json_limits import json_depth
from gputui.boundary.sanitise import safe_text
from gputui.boundary.userfiles import UserFileError, read_user_file, replace_user_file
from gputui.collect.http_client import Cancel
from gputui.fleet import queries
from gputui.fleet.client import MAX_ANSWER_BYTES, FleetError, QueryApi, server_seconds
from gputui.fleet.model import HostDetail, HostRow, detail_from, hosts_from
from gputui.model.records import record
from gputui.recording.codec import MAX_TIME

#: Queries of one refresh in flight at once. Two, not more: on a busy 2-core machine one at a
#: time refreshed 100 hosts in 0.44 s and four at a time in 1.07 s (docs/performance.md).
QUERY_THREADS = 2
#: Seconds a whole refresh may take (each query also has the client's own deadline).
REFRESH_TIMEOUT_S = 10.0
#: Format tag of an answers file.
ANSWERS_FORMAT = "gputui-fleet-answers/1"


@record
class FleetSnapshot:
    """One refresh of the host table.

    Attributes:
        taken_at: When the answer holds (epoch seconds).
        source: The Prometheus URL or answers file, as shown.
        hosts: The hosts, by name.
        query_s: Wall time of the refresh (requests, answers, parsing).
        server_s: Prometheus's own evaluation time, summed over the refresh's queries, when it
            said.
    """

    taken_at: float
    source: str
    hosts: tuple[HostRow, ...]
    query_s: float
    server_s: float | None


class FleetSource(Protocol):
    """What the fleet front-ends read."""

    @property
    def shown(self) -> str:
        """The source as messages and the header show it."""
        ...

    def snapshot(self) -> FleetSnapshot:
        """The host table now.

        Raises:
            FleetError: the query failed; the message says why and how to fix it.
        """
        ...

    def detail(self, host: HostRow) -> HostDetail:
        """One host's GPUs, containers, alerts and checks, with sparklines.

        Raises:
            FleetError: the query failed.
        """
        ...

    def close(self) -> None:
        """Stop the queries in flight at once (from any thread) and refuse later ones."""
        ...


class LiveFleet:
    """The fleet from a Prometheus-compatible query API.

    The queries of a refresh run on daemon threads of its own (not a ``ThreadPoolExecutor``,
    whose workers are joined at interpreter exit), under a :class:`Cancel` of that refresh: a
    refresh that passes its deadline stops its stragglers, and :meth:`close` stops everything
    in flight, so quitting never waits for a query.
    """

    def __init__(
        self,
        api: QueryApi,
        match: str,
        shown: str,
        save: dict[str, Any] | None = None,
        threads: int = QUERY_THREADS,
        timeout: float = REFRESH_TIMEOUT_S,
    ):
        self._api = api
        self._match = match
        self._shown = shown
        self._threads = max(1, threads)
        self._timeout = timeout
        self._lock = threading.Lock()
        self._in_flight: set[Cancel] = set()
        self._closed = False
        #: Answers kept for ``--save-answers`` (None: not kept).
        self.saved = save

    @property
    def shown(self) -> str:
        """The URL, as shown."""
        return self._shown

    def close(self) -> None:
        """Cancel every query in flight (their threads return at once); refuse later refreshes."""
        with self._lock:
            self._closed = True
            cancels = list(self._in_flight)
        for cancel in cancels:
            cancel.cancel()

    def _run(self, calls: list[Callable[[Cancel], Any]], what: str) -> list[Any]:
        """Run ``calls`` a few at a time on daemon threads, within the refresh's deadline.

        Returns:
            Their results, in order.

        Raises:
            FleetError: the first failure, the deadline, or :meth:`close`.
        """
        deadline = time.monotonic() + self._timeout
        cancel = Cancel()
        with self._lock:
            if self._closed:
                raise FleetError("the fleet view is closing")
            self._in_flight.add(cancel)
        results: list[Any] = [None] * len(calls)
        errors: list[FleetError] = []
        done = threading.Semaphore(0)
        pending = iter(range(len(calls)))
        pending_lock = threading.Lock()

        def worker() -> None:
            while not cancel.cancelled:
                with pending_lock:
                    index = next(pending, None)
                if index is None:
                    return
                try:
                    results[index] = calls[index](cancel)
                except FleetError as exc:
                    errors.append(exc)
                    cancel.cancel()  # the first failure is the refresh's: stop the others
                finally:
                    done.release()

        for n in range(min(self._threads, len(calls))):
            threading.Thread(target=worker, name=f"fleet-query-{n}", daemon=True).start()
        try:
            for _ in calls:
                if not done.acquire(timeout=max(0.0, deadline - time.monotonic())):
                    raise FleetError(
                        f"Prometheus at {self._shown} did not answer {what} within "
                        f"{self._timeout:g} s: check that it is up, or scope the fleet with --match"
                    )
                if errors:
                    break
        finally:
            cancel.cancel()  # stragglers of a refresh that failed or ran out of time end now
            with self._lock:
                self._in_flight.discard(cancel)
        if self._closed:
            raise FleetError("the fleet view is closing")
        if errors:
            raise errors[0]
        return results

    def snapshot(self) -> FleetSnapshot:
        """The host table's queries, a few at a time (:func:`queries.host_queries`)."""
        now = time.time()
        started = time.monotonic()
        asked = list(queries.host_queries(self._match).values())
        # Each on its own connection, QUERY_THREADS at a time, so Prometheus evaluates them
        # side by side; the whole refresh has one deadline, and the first failure is its error.
        data = self._run(
            [functools.partial(self._api.query, q, now) for q in asked], "the host table"
        )
        hosts = hosts_from(data, now)
        elapsed = time.monotonic() - started
        times = [server_seconds(d) for d in data]
        server = None if None in times else sum(t for t in times if t is not None)
        if self.saved is not None:
            self.saved["taken_at"] = now
            self.saved["hosts"] = data
        return FleetSnapshot(now, self._shown, tuple(hosts), elapsed, server)

    def detail(self, host: HostRow) -> HostDetail:
        """One instant and one range query, scoped to the host's ``instance``."""
        now = time.time()
        step = queries.SPARK_SECONDS / queries.SPARK_POINTS

        def history(cancel: Cancel) -> Any:
            try:
                return self._api.query_range(
                    queries.host_history(self._match, host.key),
                    now - queries.SPARK_SECONDS,
                    now,
                    step,
                    cancel,
                )
            except FleetError:
                if cancel.cancelled:
                    raise
                return None  # the figures still show; only the sparklines are missing

        data, hist = self._run(
            [
                lambda c: self._api.query(queries.host_detail(self._match, host.key), now, c),
                history,
            ],
            "the host's figures",
        )
        if self.saved is not None:
            self.saved.setdefault("detail", {})[host.key] = data
            self.saved.setdefault("history", {})[host.key] = hist
        return detail_from(data, hist)


class RecordedFleet:
    """The fleet from an answers file (``--answers FILE``): no Prometheus needed."""

    def close(self) -> None:
        """Nothing in flight: answers are read from the file."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._doc = load_answers(path)

    @property
    def shown(self) -> str:
        """The file's name, as shown (its directory says nothing about the fleet)."""
        return safe_text(self._path.name, 120)

    def snapshot(self) -> FleetSnapshot:
        """The recorded host table, at its recorded time."""
        taken = float(self._doc["taken_at"])
        hosts = hosts_from(self._doc.get("hosts"), taken)
        return FleetSnapshot(taken, self.shown, tuple(hosts), 0.0, None)

    def detail(self, host: HostRow) -> HostDetail:
        """The recorded drill-down of the host (empty when none was recorded)."""
        detail = self._doc.get("detail")
        history = self._doc.get("history")
        data = detail.get(host.key) if isinstance(detail, dict) else None
        hist = history.get(host.key) if isinstance(history, dict) else None
        return detail_from(data, hist)


class AnswersFileError(FleetError):
    """An answers file that cannot be read or written: bad user input (exit status 2)."""


#: Largest magnitude of a number in an answers file: the times (epoch seconds) and counts a
#: query API answers are far below it, and every integer up to it is exact as a float.
MAX_ANSWER_NUMBER = 2.0**53


class _BadNumber(ValueError):
    """A number an answers file must not hold (raised from the JSON decoder's hooks)."""


def _number(text: str, value: float) -> float:
    if not math.isfinite(value) or abs(value) > MAX_ANSWER_NUMBER:
        raise _BadNumber(text)
    return value


def _integer(text: str) -> int:
    value = int(text) if len(text) < 20 else None  # longer: beyond 2^53 (and cheap to refuse)
    if value is None or abs(value) > MAX_ANSWER_NUMBER:
        raise _BadNumber(text)
    return value


def _constant(text: str) -> float:
    raise _BadNumber(text)  # NaN, Infinity, -Infinity: Python's extensions, not JSON


def load_answers(path: Path) -> dict[str, Any]:
    """Read an answers file: ``{"format", "taken_at", "hosts", "detail", "history"}``.

    Read through the one user-file reader (regular files only, no FIFO hang, no symlink of
    another user followed, at most :data:`~gputui.fleet.client.MAX_ANSWER_BYTES`). Every number
    in it must be finite and at most :data:`MAX_ANSWER_NUMBER` in magnitude, and ``taken_at`` a
    time between 1970 and 9999.

    Raises:
        AnswersFileError: unreadable, too large, not JSON, a number out of range, or not an
            answers file.
    """
    shown = safe_text(str(path), 120)
    try:
        raw = read_user_file(path, "fleet answers file", MAX_ANSWER_BYTES)
    except UserFileError as exc:
        raise AnswersFileError(str(exc)) from None
    doc: Any = None
    if json_depth(raw) <= 32:
        try:
            doc = json.loads(
                raw,
                parse_float=lambda t: _number(t, float(t)),
                parse_int=_integer,
                parse_constant=_constant,
            )
        except _BadNumber as exc:
            raise AnswersFileError(
                f"{shown} holds the number {safe_text(str(exc), 40)}: numbers in an answers "
                f"file must be finite and at most 2^53"
            ) from None
        except (ValueError, RecursionError):
            doc = None
    if (
        not isinstance(doc, dict)
        or doc.get("format") != ANSWERS_FORMAT
        or not isinstance(doc.get("taken_at"), (int, float))
        or isinstance(doc.get("taken_at"), bool)
    ):
        raise AnswersFileError(
            f"{shown} is not a fleet answers file (format {ANSWERS_FORMAT!r}): write one "
            "with gputui fleet --prometheus URL --once --save-answers FILE"
        )
    if not 0 <= doc["taken_at"] <= MAX_TIME:
        raise AnswersFileError(
            f"{shown}: taken_at {doc['taken_at']!r} is not a time between 1970 and 9999"
        )
    return doc


def save_answers(path: Path, saved: dict[str, Any]) -> None:
    """Write the answers kept by a :class:`LiveFleet` (``--save-answers``).

    Written through the one user-file writer: atomically (a temporary file renamed over
    ``path``), never through a symlink nor into a FIFO, device or directory, a new file
    ``0600``. Only strict JSON is written (no ``NaN``).

    Raises:
        AnswersFileError: the answers hold a number JSON cannot carry, or the file cannot be
            written.
    """
    doc = {"format": ANSWERS_FORMAT, **saved}
    try:
        text = json.dumps(doc, indent=1, sort_keys=True, allow_nan=False) + "\n"
    except ValueError:
        raise AnswersFileError(
            f"cannot write {safe_text(str(path), 120)}: the answers hold a non-finite number"
        ) from None
    try:
        replace_user_file(path, "fleet answers file", text.encode("utf-8"))
    except UserFileError as exc:
        raise AnswersFileError(str(exc)) from None
