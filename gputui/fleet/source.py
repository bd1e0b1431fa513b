"""Where the fleet's answers come from: a live query API, or answers recorded in a file.

:class:`LiveFleet` asks Prometheus (one instant query for the host table per refresh; one
instant and one range query for a drilled-down host). :class:`RecordedFleet` replays answers
saved by ``gputui fleet --save-answers FILE`` (or written by hand, like a scenario): the fleet
screen and ``--once`` then run without any Prometheus, for screenshots and rendering tests.
"""

from __future__ import annotations

import json
import math
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from gputui.collect.docker.engine_api import json_depth
from gputui.derive.fmt import safe_text
from gputui.fleet import queries
from gputui.fleet.client import MAX_ANSWER_BYTES, FleetError, QueryApi, server_seconds
from gputui.fleet.model import HostDetail, HostRow, detail_from, hosts_from
from gputui.serialize import MAX_TIME
from gputui.userfiles import UserFileError, read_user_file, replace_user_file

#: Queries of one refresh in flight at once. Two, not more: on a busy 2-core machine one at a
#: time refreshed 100 hosts in 0.44 s and four at a time in 1.07 s (docs/performance.md).
QUERY_THREADS = 2
#: Seconds a whole refresh may take (each query also has the client's own deadline).
REFRESH_TIMEOUT_S = 10.0
#: Format tag of an answers file.
ANSWERS_FORMAT = "gputui-fleet-answers/1"


@dataclass(frozen=True, slots=True)
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


class LiveFleet:
    """The fleet from a Prometheus-compatible query API."""

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
        self._pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix="fleet-query")
        self._timeout = timeout
        #: Answers kept for ``--save-answers`` (None: not kept).
        self.saved = save

    @property
    def shown(self) -> str:
        """The URL, as shown."""
        return self._shown

    def snapshot(self) -> FleetSnapshot:
        """The host table's queries, a few at a time (:func:`queries.host_queries`)."""
        now = time.time()
        started = time.monotonic()
        asked = list(queries.host_queries(self._match).values())
        # Each on its own connection, QUERY_THREADS at a time, so Prometheus evaluates them
        # side by side; each has the client's deadline, and the first failure is the
        # refresh's error.
        futures = [self._pool.submit(self._api.query, promql, now) for promql in asked]
        data: list[Any] = []
        try:
            for future in futures:
                data.append(
                    future.result(timeout=max(0.0, started + self._timeout - time.monotonic()))
                )
        except FuturesTimeout:
            raise FleetError(
                f"Prometheus at {self._shown} did not answer the host table within "
                f"{self._timeout:g} s: check that it is up, or scope the fleet with --match"
            ) from None
        finally:
            for future in futures:
                future.cancel()  # the ones not started yet; a running one ends at its deadline
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
        data = self._api.query(queries.host_detail(self._match, host.key), now)
        step = queries.SPARK_SECONDS / queries.SPARK_POINTS
        history: Any = None
        try:
            history = self._api.query_range(
                queries.host_history(self._match, host.key),
                now - queries.SPARK_SECONDS,
                now,
                step,
            )
        except FleetError:
            history = None  # the figures still show; only the sparklines are missing
        if self.saved is not None:
            self.saved.setdefault("detail", {})[host.key] = data
            self.saved.setdefault("history", {})[host.key] = history
        return detail_from(data, history)


class RecordedFleet:
    """The fleet from an answers file (``--answers FILE``): no Prometheus needed."""

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
