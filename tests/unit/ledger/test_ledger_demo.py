"""The demo's ledger: a week of the demo machine through the real accounting, in its own store.

The week conserves time and energy and credits each owner the demo's evidence names from the
time its container started; the demo monitor's writer seeds it once, then writes the demo's
snapshots after it without a gap, and removes the store when it closes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gputui.collect.collector import Collector
from gputui.collect.standins import demo
from gputui.collect.standins.scenario import ScenarioSource
from gputui.ledger.demo import DAYS, DemoLedger, seed
from gputui.ledger.report import summarise
from gputui.ledger.store import Store
from gputui.model.settings import Prices

END = demo.DEMO_EPOCH


def test_the_demo_week_conserves_time_and_energy_and_credits_owners(tmp_path: Path) -> None:
    path = tmp_path / "demo.sqlite"
    seed(path, END)
    since = END - DAYS * 86400
    store = Store.open_reader(path)
    try:
        rows = store.usage(since, END, END)
        coverage = store.coverage(since, END, END)
        gaps = store.gaps(since, END)
    finally:
        store.close()
    assert gaps == []
    assert coverage.wall_s == pytest.approx(DAYS * 86400, abs=10)
    # Every device's time is somebody's or unallocated; the rows' energy is the counters'.
    assert sum(r.amounts.occupied_s for r in rows) == pytest.approx(coverage.device_s, rel=1e-9)
    assert sum(r.amounts.energy_j for r in rows) == pytest.approx(coverage.energy_j, rel=1e-6)
    owners = {line.key: line for line in summarise(rows, "owner", Prices())}
    started = {c.name: END - c.started_at for c in demo.DEMO_CONTAINERS if c.started_at}
    # Reserved from each container's start: bob's pod 2 days, dave's notebook 9 h, alice's
    # trainer 6 h, carol's vLLM server 50 min (a guess from its bind mounts, as in the tree).
    for person, container in (
        ("bob", "bert"),
        ("dave", "notebook-gpu3"),
        ("alice", "llm-trainer-1"),
        ("carol", "vllm-server"),
    ):
        assert owners[person].reserved_h * 3600 == pytest.approx(started[container], abs=1)
    assert owners["dave"].busy_h == 0 and owners["dave"].waste_h == owners["dave"].reserved_h
    assert owners["alice"].busy_h > 0 and owners["unallocated"].reserved_h == 0


def test_the_demo_monitor_seeds_once_writes_on_and_removes_its_store() -> None:
    clock = demo.demo_clock()
    collector = Collector(
        ScenarioSource(demo.DEMO_SCENARIO, wall=clock),
        demo.DemoProcesses(),
        demo.DemoContainers(),
        mode="demo",
        clock=clock,
    )
    ledger = DemoLedger(1.0)
    try:
        first = collector.collect()
        ledger.observe(first)  # before the tab is shown: only the time is taken
        assert ledger.now() == first.taken_at and not ledger.writing
        path = ledger.ensure(first.taken_at)
        assert ledger.ensure(first.taken_at + 99) == path  # once
        later = [collector.collect() for _ in range(40)]
        for snapshot in later:
            ledger.observe(snapshot)
        assert ledger.writing and ledger.commit()
        store = Store.open_reader(path)
        try:
            rows = store.usage(first.taken_at, later[-1].taken_at + 10, later[-1].taken_at + 10)
            gaps = store.gaps(first.taken_at - 86400, later[-1].taken_at + 10)
            wall = store.coverage(first.taken_at, later[-1].taken_at + 10).wall_s
        finally:
            store.close()
        # The writer's first snapshot follows the seeded history: no gap, 39 s written.
        assert gaps == []
        assert wall == pytest.approx(later[-1].taken_at - later[0].taken_at, abs=0.01)
        assert any(r.subject.name == "llm-trainer-1" for r in rows)
    finally:
        collector.close()
        ledger.close()
    assert not path.exists() and not path.parent.exists()
