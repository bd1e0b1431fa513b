"""The demo's ledger: a simulated week of the demo machine, in a temporary store of its own.

``--demo`` is not this host, so it never writes the host's store. Its Ledger tab reads a store
of its own instead, made when the tab is first shown (on the tab's worker thread): a week of
hours, each the accounting of one cycle of the demo machine (:data:`CYCLE` snapshots through
the real :class:`~gputui.ledger.quantities.Accountant`) scaled to the hour, each subject
credited from the time its container or process started (before that its device's time is
unallocated), up to the snapshot the monitor shows; then the demo's own snapshots, written by a
:class:`LedgerWriter` as a monitor writes the host's. The store lives in a temporary directory
removed when the demo ends.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path

from gputui.collect.collector import Collector
from gputui.collect.standins import demo
from gputui.collect.standins.scenario import ScenarioSource
from gputui.ledger.quantities import UNALLOCATED, Accountant, Amounts, Device, Interval, Subject
from gputui.ledger.store import Store
from gputui.ledger.writer import LedgerWriter
from gputui.model.snapshot import Snapshot

#: Snapshots of the demo machine accounted once (its GPU figures repeat every 120).
CYCLE = 121
#: How far back the simulated history goes.
DAYS = 7
#: What the Ledger tab says instead of a store's path.
LABEL = "the demo's ledger: a simulated week of the demo machine (a temporary store)"

_HOUR = 3600


def _cycle() -> tuple[dict[tuple[Device, Subject], Amounts], float, int]:
    """One cycle's amounts per (device, subject), the wall seconds they cover, the devices."""
    clock = demo.demo_clock()
    collector = Collector(
        ScenarioSource(demo.DEMO_SCENARIO, wall=clock),
        demo.DemoProcesses(),
        demo.DemoContainers(),
        mode="demo",
        clock=clock,
    )
    accountant = Accountant(1.0)
    sums: dict[tuple[Device, Subject], Amounts] = {}
    wall, devices = 0.0, 0
    try:
        for _ in range(CYCLE):
            step = accountant.take(collector.collect())
            if not isinstance(step, Interval):
                continue
            wall += step.wall_s
            devices = len(step.devices)
            for key, amounts in step.rows.items():
                sums.setdefault(key, Amounts()).add(amounts)
    finally:
        collector.close()
    return sums, wall, devices


def _started(subject: Subject) -> float | None:
    """When the demo's subject started using its device (None: before the week)."""
    if subject.kind == "container":
        info = next((c for c in demo.DEMO_CONTAINERS if c.id == subject.key), None)
        if info is not None:
            return info.started_at
    owned = [
        demo.process_start(pid, cid)
        for pid, cid, _, user, _, _, _ in demo.PROCESSES
        if (subject.kind == "container" and cid == subject.key)
        or (subject.kind == "user" and cid is None and user == subject.key)
    ]
    return min(owned) if owned else None


def _scaled(amounts: Amounts, factor: float) -> Amounts:
    return Amounts(
        amounts.reserved_s * factor,
        amounts.occupied_s * factor,
        amounts.busy_s * factor,
        amounts.mem_gib_s * factor,
        amounts.mem_peak_bytes,
        amounts.idle_j * factor,
        amounts.dynamic_j * factor,
    )


def seed(path: Path, end: float, days: int = DAYS) -> None:
    """Write ``days`` of simulated hours ending at ``end`` into a new store at ``path``.

    Args:
        path: The store (made here).
        end: The end of the history (the demo's latest snapshot).
        days: How far back it goes.
    """
    sums, wall, devices = _cycle()
    starts = {subject: _started(subject) for _, subject in sums}
    rows: dict[tuple[int, Device, Subject], Amounts] = {}
    coverage: dict[int, tuple[float, float, float]] = {}
    # Whole clock hours, between a part-hour at each end: a window of ``days`` ending at
    # ``end`` (the Ledger tab's 7 d) and each hour of today are covered to their edges.
    first = -(-int(end - days * 86400) // 10) * 10  # on a 10 s bucket
    edges = [first, *range(first // _HOUR * _HOUR + _HOUR, int(end), _HOUR), end]
    for start, until in itertools.pairwise(edges):
        t, length = int(start), until - start
        if length <= 0:
            continue
        energy = 0.0
        for (device, subject), amounts in sums.items():
            begun = starts[subject]
            # The share of this hour after the subject started; before, nobody held its time.
            share = 1.0 if begun is None else max(0.0, min(1.0, (t + length - begun) / length))
            mine = _scaled(amounts, share * length / wall)
            if share < 1.0:
                rest = _scaled(amounts, (1.0 - share) * length / wall)
                idle = rows.setdefault((t, device, UNALLOCATED), Amounts())
                idle.add(Amounts(occupied_s=rest.occupied_s, idle_j=rest.idle_j))
                energy += rest.idle_j
            if share > 0.0:
                rows.setdefault((t, device, subject), Amounts()).add(mine)
                energy += mine.energy_j
        coverage[t] = (length, devices * length, energy)
    store = Store.open_writer(path, "demo")
    try:
        store.write(rows, coverage, [], end, float(first))
    finally:
        store.close()


class DemoLedger(LedgerWriter):
    """The demo monitor's ledger: seeded on first use, then fed the demo's snapshots.

    Until :meth:`ensure` has seeded the store (the Ledger tab's first read), a snapshot is
    dropped: a demo that never shows the tab costs nothing.

    Args:
        interval_s: The demo's refresh interval.
        idle_power_w: ``[ledger] idle_power_w``.
    """

    def __init__(self, interval_s: float, idle_power_w: Mapping[str, float] | None = None) -> None:
        self._dir: Path | None = None
        self._lock = threading.Lock()
        self._seeded = False
        self._now = demo.DEMO_EPOCH
        super().__init__(
            Path(),
            "demo",
            interval_s=interval_s,
            idle_power_w=idle_power_w,
            clock=self.now,
        )

    def now(self) -> float:
        """The demo's time: its latest snapshot's (what its commits are timed by)."""
        return self._now

    def ensure(self, end: float) -> Path:
        """The store, seeded on the first call with a history up to ``end``.

        Called on the Ledger tab's worker thread, never the UI's.
        """
        with self._lock:
            if not self._seeded:
                self._dir = Path(tempfile.mkdtemp(prefix="gputui-demo-ledger-"))
                self.path = self._dir / "ledger.sqlite"
                seed(self.path, end)
                self._seeded = True
            return self.path

    def start(self) -> bool:
        """Open the seeded store; the seed is this writer's own past, so no gap follows it."""
        started = super().start()
        self._resumed_from = None
        return started

    def observe(self, snapshot: Snapshot, _analysis: object = None) -> None:
        """Take in one of the demo's snapshots (dropped until the store is seeded)."""
        self._now = max(self._now, snapshot.taken_at)
        with self._lock:
            if not self._seeded:
                return
        super().observe(snapshot, _analysis)

    def close(self) -> None:
        """Commit, close, and remove the temporary store."""
        with self._lock:
            super().close()
            if self._dir is not None:
                shutil.rmtree(self._dir, ignore_errors=True)
                self._dir = None
