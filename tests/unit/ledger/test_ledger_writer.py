"""The ledger's writer on the collect loop: after each delivery, never on a replay's jump.

And bounded when its store keeps failing; only a live host's snapshots by default.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from gputui.collect.loop import CollectLoop
from gputui.ledger.writer import MAX_PENDING_BUCKETS, LedgerWriter, writer_for
from gputui.model.gpu import GpuSample
from gputui.model.snapshot import HostInfo, Snapshot
from gputui.recording.player import ReplayCollector

T0 = 1_800_000_000.0


def snap(i: int) -> Snapshot:
    gpu = GpuSample(0, "GPU-0", "H200", utilization_gpu=50, total_energy_mj=i * 100_000)
    return Snapshot(T0 + i, "live", HostInfo("h"), gpus=(gpu,))


def test_the_observer_sees_each_delivered_snapshot_after_delivery_but_no_jump() -> None:
    order: list[str] = []
    player = ReplayCollector([snap(i) for i in range(10)])
    loop: CollectLoop[None] = CollectLoop(
        player,
        lambda s: None,
        lambda s, a: order.append(f"deliver {s.taken_at - T0:.0f}"),
        interval=3600.0,
        observe=lambda s, a: order.append(f"observe {s.taken_at - T0:.0f}"),
    )
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 5
        while len(order) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        player.pause()
        player.step(5)
        loop.jump()  # a replay that moved: shown, but no new interval for the ledger
        while len(order) < 3:
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        loop.stop()
        thread.join(5)
    assert order == ["deliver 0", "observe 0", "deliver 5"]


def test_a_store_that_keeps_failing_holds_at_most_an_hour_then_records_the_gap(
    tmp_path: Path,
) -> None:
    clock = [T0]
    writer = LedgerWriter(tmp_path / "l.sqlite", "test", interval_s=1.0, clock=lambda: clock[0])
    assert writer.start()
    assert writer.store is not None
    writer.store.conn.close()  # from here every write fails, as a store gone bad would
    for i in range(2 * MAX_PENDING_BUCKETS * 10):
        clock[0] = T0 + i
        writer.observe(snap(i))
    assert writer.writing and writer.error is not None
    assert "cannot write" in writer.status and "kept in memory" in writer.status
    assert len(writer._coverage) <= MAX_PENDING_BUCKETS + 1
    dropped = [g for g in writer._gaps if g.reason.startswith("not written")]
    assert len(dropped) >= MAX_PENDING_BUCKETS - 10


def test_only_a_live_host_writes_unless_a_store_is_named(tmp_path: Path) -> None:
    store = tmp_path / "l.sqlite"

    def writes(mode: str, explicit: bool, env: dict[str, str], write: bool = True) -> bool:
        found = writer_for(
            "tui", mode=mode, interval_s=1.0, store=store, explicit=explicit, write=write, env=env
        )
        return found is not None

    assert writes("live", False, {})
    assert not writes("demo", False, {}) and not writes("scenario", False, {})
    assert writes("scenario", True, {})
    assert not writes("live", False, {"GPUTUI_LEDGER": "off"})
    assert not writes("live", False, {}, write=False)
