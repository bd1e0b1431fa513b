"""NVML faults mid-run: per-field errors, a GPU falling off the bus, the driver vanishing.

Scenario time series inject each fault for one refresh and clear it the next, through the real
NVML adapter and the Collector (health checks on every refresh), then through ``--once``:
no exception, N/A for the failed fields only, the lost GPU flagged and explained by a failing
``gpu.lost:<i>`` check, the driver outage reported with a fix, and full recovery each time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gputui.collect.collector import Collector
from gputui.collect.linux.proc_reader import ProcSource
from gputui.collect.standins.scenario import ScenarioSource
from gputui.health import runner as health
from gputui.model.snapshot import Snapshot
from gputui.model.status import HealthStatus
from tests.support.gputui_process import NoDocker, gpu, run_gputui, write_scenario

FIELD_FAULTS = {
    "temperature_c": "NotSupported",
    "power_w": "NoPermission",
    "utilization": "Unknown",
    "memory": "Timeout",
}
#: (attribute of GpuSample, scenario error key) pairs checked for N/A.
FIELD_ATTRS = {
    "temperature_c": "temperature_c",
    "power_w": "power_w",
    "utilization_gpu": "utilization",
    "memory_used_bytes": "memory",
}

# Refresh 0 healthy; 1 field faults and GPU 1 lost; 2 recovered; 3 driver gone; 4 back.
STEPS = 5


def _series(at: int, value: Any) -> list[Any]:
    return [value if i == at else None for i in range(STEPS)]


def _scenario(pid: int) -> dict[str, Any]:
    errors = {key: _series(1, err) for key, err in FIELD_FAULTS.items()}
    return {
        "nvml": ["ok", "ok", "ok", "DriverNotLoaded", "ok"],
        "gpus": [
            gpu(0, [pid], errors=errors),
            gpu(1, [], errors={"*": _series(1, "GpuIsLost")}),
        ],
    }


def _check(snap: Snapshot, check_id: str) -> HealthStatus:
    return next(c.status for c in snap.health if c.id == check_id)


def _healthy(snap: Snapshot, pid: int) -> None:
    assert snap.sources["nvml"].ok
    g0, g1 = snap.gpus
    assert not g0.lost and not g1.lost
    assert g0.temperature_c == 50 and g0.power_w == 300.0
    assert g0.utilization_gpu == 50 and g0.memory_used_bytes == 1000 * 1024 * 1024
    assert [p.pid for p in snap.processes] == [pid]
    assert _check(snap, "gpu.lost:1") is HealthStatus.PASS


def test_fault_series_through_collector() -> None:
    pid = 1  # init: always there, a host process
    collector = Collector(
        ScenarioSource(_scenario(pid)), ProcSource(), NoDocker(), mode="scenario",
        health=health.run_checks,
    )  # fmt: skip
    snaps = []
    for _ in range(2 * STEPS):  # twice round: faults come back and clear again
        collector.request_health()
        snaps.append(collector.collect())
    collector.close()
    for cycle in (0, STEPS):
        _healthy(snaps[cycle], pid)
        faulty = snaps[cycle + 1]
        g0, g1 = faulty.gpus
        for attr in FIELD_ATTRS:
            assert getattr(g0, attr) is None, attr
        assert g0.clock_sm_mhz == 1980  # the rest of the GPU still reads
        assert [p.pid for p in faulty.processes] == [pid]
        assert g1.lost and g1.error and "lost" in g1.error
        # Identity kept from before it was lost.
        assert g1.uuid == "GPU-00000001-0000-0000-0000-000000000000"
        lost = next(c for c in faulty.health if c.id == "gpu.lost:1")
        assert lost.status is HealthStatus.FAIL and lost.fix
        _healthy(snaps[cycle + 2], pid)
        gone = snaps[cycle + 3]
        assert not gone.sources["nvml"].ok
        assert gone.sources["nvml"].kind == "DriverNotLoaded"
        assert gone.sources["nvml"].fix
        assert gone.gpus == ()
        assert _check(gone, "nvml.loadable") is HealthStatus.FAIL
        _healthy(snaps[cycle + 4], pid)


def test_health_follows_faults_without_waiting_for_its_interval() -> None:
    """A GPU lost (or NVML gone) between two health runs is explained on that very refresh."""
    collector = Collector(
        ScenarioSource(_scenario(1)), ProcSource(), NoDocker(), mode="scenario",
        health=health.run_checks, health_interval=3600,
    )  # fmt: skip
    try:
        snaps = [collector.collect() for _ in range(STEPS)]
    finally:
        collector.close()
    assert _check(snaps[0], "gpu.lost:1") is HealthStatus.PASS
    assert _check(snaps[1], "gpu.lost:1") is HealthStatus.FAIL
    assert _check(snaps[2], "gpu.lost:1") is HealthStatus.PASS
    assert _check(snaps[3], "nvml.loadable") is HealthStatus.FAIL
    assert _check(snaps[4], "nvml.loadable") is not HealthStatus.FAIL


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_faults_in_once(fmt: str, tmp_path: Path) -> None:
    errors = dict(FIELD_FAULTS)
    scenario = write_scenario(
        tmp_path / "s.json",
        {"gpus": [gpu(0, [1], errors=errors), gpu(1, [], errors={"*": "GpuIsLost"})]},
    )
    args = ["--once", "--scenario", str(scenario)] + (["--json"] if fmt == "json" else [])
    out = run_gputui(*args)
    assert out.returncode == 0, out.stderr.decode()
    if fmt == "text":
        text = out.stdout.decode()
        row0 = next(line for line in text.splitlines() if line.startswith("  0  "))
        assert row0.count("N/A") >= 4
        row1 = next(line for line in text.splitlines() if line.startswith("  1  "))
        assert "LOST" in row1 and "fallen off the bus" in row1
        assert "FAIL  gpu.lost:1" in text
        return
    report = json.loads(out.stdout)
    g0, g1 = report["gpus"]
    assert g0["temperature_c"] is None and g0["power_w"] is None
    assert g0["utilization_gpu"] is None and g0["memory_used_bytes"] is None
    assert g0["clock_sm_mhz"] == 1980
    assert g1["lost"] is True and g1["error"]
    [lost] = [h for h in report["health"] if h["id"] == "gpu.lost:1"]
    assert lost["status"] == "fail" and lost["fix"]


def test_driver_vanished_in_once(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path / "s.json", {"nvml": "DriverNotLoaded", "gpus": [gpu(0)]})
    out = run_gputui("--once", "--json", "--scenario", str(scenario))
    assert out.returncode == 0, out.stderr.decode()
    report = json.loads(out.stdout)
    assert report["sources"]["nvml"]["ok"] is False
    assert report["sources"]["nvml"]["kind"] == "DriverNotLoaded"
    assert report["gpus"] == []
    text = run_gputui("--once", "--scenario", str(scenario)).stdout.decode()
    assert "NVML: ok" not in text
    assert "fix: The NVIDIA kernel module is not loaded" in text
