"""A recording made on the H200 lab (``gputui record --count 6``), replayed.

Two containers (share-a 6 GiB, share-b 2 GiB) and a host process (1 GiB) shared the GPU; an idle
container reserved it. nvidia-smi --query-compute-apps on the machine at the same moment:
650 -> 6858 MiB, 735 -> 2762 MiB, 775 -> 1738 MiB. The host script's path was shortened to
/opt/lab/ (the rest is as recorded).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gputui.derive.findings import FindingsEngine
from gputui.recording.player import ReplayCollector
from gputui.recording.reader import read_recording
from tests.support.paths import FIXTURES

RECORDING = FIXTURES / "h200-lab-recording.jsonl"
MIB = 1024 * 1024


def test_recording_replays_the_real_attribution_and_findings() -> None:
    snapshots = read_recording(RECORDING)
    assert len(snapshots) == 6
    engine = FindingsEngine()
    for snapshot in snapshots:
        found = engine.update(snapshot)
        memory = {p.pid: p.sample.used_memory_bytes for p in snapshot.processes}
        assert memory == {650: 6858 * MIB, 735: 2762 * MIB, 775: 1738 * MIB}
        names = {
            p.pid: (snapshot.container(p.container_id).info.name if p.container_id else None)  # type: ignore[union-attr]
            for p in snapshot.processes
        }
        assert names == {650: "share-a", 735: "share-b", 775: None}
    shared = [f for f in found if f.kind == "gpu_shared"]
    assert len(shared) == 1
    assert shared[0].figure("parties") == 3
    idle = [f for f in found if f.kind == "idle_reservation"]
    assert [f.summary.split(":")[0] for f in idle] == ["idle-res"]
    assert snapshots[0].host.driver_version == "580.159.04"


def test_replay_collector_steps_through_the_recording() -> None:
    player = ReplayCollector(read_recording(RECORDING))
    first = player.collect()
    assert player.position == 0
    times = [first.taken_at] + [player.collect().taken_at for _ in range(5)]
    assert times == sorted(times)
    assert len(set(times)) == 6


async def test_h200_recording_in_the_tui(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Pilot test: the TUI on the recorded machine shows both containers and the host process
    # with the memory nvidia-smi reported, and steps through the recording.
    from gputui.model.settings import Settings
    from gputui.ui.app import GpuTuiApp

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))  # no user alert rules
    player = ReplayCollector(read_recording(RECORDING), source=str(RECORDING))
    app = GpuTuiApp(player, Settings(interval=60.0, read_only=True))
    async with app.run_test(size=(160, 50)) as pilot:
        for _ in range(200):
            if app.main.snapshot is not None:
                break
            await pilot.pause(0.02)
        snapshot = app.main.snapshot
        assert snapshot is not None
        assert "REPLAY" in app.main.header.text
        tree = app.query_one("ContainerTree")
        labels = [str(node.label) for node in tree.root.children]  # type: ignore[attr-defined]
        assert any(label.startswith("share-a") and "6.7GiB" in label for label in labels), labels
        assert any(label.startswith("share-b") for label in labels), labels
        assert any(label.startswith("host") and "1.7GiB" in label for label in labels), labels
        await pilot.press("full_stop")
        for _ in range(100):
            if player.position == 1:
                break
            await pilot.pause(0.02)
        assert player.position == 1
