"""A scenario read at the live monitor's cadences: the lanes on their own threads."""

from __future__ import annotations

import threading
import time
from typing import Any

from gputui.collect.standins.scenario import ScenarioSource


def _scenario() -> dict[str, Any]:
    return {
        "gpus": [
            {
                "index": 0,
                "name": "NVIDIA H200",
                "memory_total_mib": 143771,
                "memory_used_mib": 20000,
                "gpm_sm_active": [40.0, 60.0],
                "processes": [{"pid": 4242, "used_memory_mib": 1000, "sm_util": [30, 50]}],
            }
        ]
    }


def _lanes() -> set[str]:
    return {t.name for t in threading.enumerate() if t.name.startswith("gputui-nvml-")}


def _poll(check: Any, seconds: float = 10.0) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    return check()


def test_live_cadences_read_the_lanes_on_their_threads_and_stop_them() -> None:
    before = _lanes()
    source = ScenarioSource(_scenario(), live_cadences=True)
    try:
        first = source.read()
        assert first.status.ok and first.gpus[0].processes[0].pid == 4242
        assert _lanes() - before == {"gputui-nvml-slow", "gputui-nvml-gpm"}

        def figures() -> tuple[int, float] | None:
            gpu = source.read().gpus[0]
            sm, active = gpu.processes[0].sm_util, gpu.gpm_sm_active
            return (sm, active) if sm is not None and active is not None else None

        # The slow lane's per-process utilization and the GPM lane's pair arrive from their
        # threads; the reads themselves never wait for them.
        found = _poll(figures)
        assert found is not None and found[0] in (30, 50) and 0 <= found[1] <= 100
    finally:
        source.close()
    assert _poll(lambda: not (_lanes() - before))


def test_default_scenario_reads_everything_inline() -> None:
    before = _lanes()
    source = ScenarioSource(_scenario())
    try:
        reading = source.read()
        assert reading.gpus[0].processes[0].sm_util == 30  # this read's step, not a lane's
        assert _lanes() == before
    finally:
        source.close()
