"""What the monitor's Ledger tab shows: one window of the store, grouped, a sparkline per group.

The same sums as ``gputui ledger`` (:func:`gputui.ledger.report.summarise` over
:meth:`gputui.ledger.store.Store.usage`), plus each group's busy GPU-hours per slot (an hour
for today, a day beyond) for its sparkline. Read on a worker thread: a 30-day window is two
queries of a few tens of milliseconds, never run on the UI thread. No Textual here.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import field
from pathlib import Path

from gputui.ledger.quantities import Gap
from gputui.ledger.report import Line, group_key, parse_since, summarise
from gputui.ledger.store import Coverage, Store, StoreError, alive
from gputui.model.records import record
from gputui.model.settings import Prices

#: The windows ``t`` cycles through; ``c`` types any other (``3d``, ``2026-11-01``...).
WINDOWS = ("today", "7d", "30d")
#: What ``b`` groups by, in order (the ledger's ``--by``, host users apart).
GROUPS = ("owner", "container", "project", "image", "gpu")
#: Sparkline slots across a window at most.
MAX_SLOTS = 48


@record
class Board:
    """One window of the ledger, grouped.

    Attributes:
        by: The grouping (:data:`GROUPS`).
        window: The window as asked (``today``, ``7d``, or what was typed).
        since: The window's start, seconds since the epoch.
        until: Its end (the time it was read).
        lines: The groups, biggest reservation first.
        series: Busy GPU-hours per slot, per group key, oldest slot first.
        slot_s: The slots' length (3600 for today, 86400 beyond).
        coverage: What the window's buckets cover.
        gaps: The gaps in the window.
        status: Who writes the store now, one line.
        problem: Why the store cannot be read (missing, damaged, newer), one line; None when
            it was read.
    """

    by: str
    window: str
    since: float
    until: float
    lines: tuple[Line, ...] = ()
    series: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    slot_s: int = 86400
    coverage: Coverage = field(default_factory=lambda: Coverage(0.0, 0.0, 0.0))
    gaps: tuple[Gap, ...] = ()
    status: str = ""
    problem: str | None = None

    @property
    def covered(self) -> float:
        """The share of the window the store covers, 0-1."""
        return min(1.0, self.coverage.wall_s / max(1e-9, self.until - self.since))


def window_start(window: str, now: float) -> float:
    """The start of ``window`` (``today``, ``30d``, a date...).

    Raises:
        ValueError: one line naming the value (:func:`parse_since`'s).
    """
    since = parse_since(window, now)
    if since >= now:
        raise ValueError(f"the window starts in the future: {window}")
    return since


def slot_for(since: float, until: float) -> int:
    """The sparkline's slot: an hour while the window is a day or less, else a day or more."""
    span = until - since
    if span <= 86400:
        return 3600
    days = -(-int(span) // 86400)
    return 86400 * max(1, -(-days // MAX_SLOTS))


def read_board(path: Path, by: str, window: str, prices: Prices, now: float | None = None) -> Board:
    """The Ledger tab's content for one window and grouping.

    Args:
        path: The store.
        by: The grouping (:data:`GROUPS`).
        window: ``today``, ``7d``, ``30d`` or any ``--since`` value.
        prices: The config's prices.
        now: The window's end (now by default).

    Returns:
        The board; a store that cannot be read is a board whose ``problem`` says why.

    Raises:
        ValueError: ``window`` is not a window (one line).
    """
    until = time.time() if now is None else now
    since = window_start(window, until)
    slot = slot_for(since, until)
    try:
        store = Store.open_reader(path)
    except StoreError as exc:
        return Board(by, window, since, until, slot_s=slot, problem=str(exc))
    try:
        rows = store.usage(since, until, until)
        coverage = store.coverage(since, until, until)
        gaps = tuple(store.gaps(since, until))
        slots = store.series(since, until, slot)
        sessions = store.sessions()
    except StoreError as exc:
        return Board(by, window, since, until, slot_s=slot, problem=str(exc))
    finally:
        store.close()
    n = max(1, -(-int(until - since) // slot))
    series: dict[str, list[float]] = {}
    for index, row in slots:
        if 0 <= index < n:
            values = series.setdefault(group_key(row, by), [0.0] * n)
            values[index] += row.amounts.busy_s / 3600
    live = [s for s in sessions if s.ended is None and alive(s.pid)]
    status = (
        f"written by pid {live[-1].pid} ({live[-1].program})" if live else "no gputui writes it now"
    )
    return Board(
        by,
        window,
        since,
        until,
        tuple(summarise(rows, by, prices)),
        {key: tuple(values) for key, values in series.items()},
        slot,
        coverage,
        gaps,
        status,
    )
