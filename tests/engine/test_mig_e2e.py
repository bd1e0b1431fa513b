"""MIG end to end: a GPU split into three MIG devices, real containers on two, an idle third.

NVML is a scenario (MIG devices, their processes naming the containers' real host PIDs); the
Docker engine, /proc and cgroups are real. ``--once --json``, the exporter and the health checks
must tell the same story: who runs on which MIG device, which reservation is idle, per device.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import FIXTURES

MIB = 1024 * 1024
FIXTURE = FIXTURES / "mig-three-instances.json"
UUID_1 = "MIG-22222222-2222-5222-8222-222222222222"


def _gputui(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ},
    )


def _host_pid(container: Any) -> int:
    top = container.top()
    column = top["Titles"].index("PID")
    return min(int(row[column]) for row in top["Processes"])


def _scenario(tmp_path: Path, pid_a: int, pid_b: int) -> Path:
    """The fixture's MIG GPU with the two containers' PIDs on MIG devices 0:0 and 0:1."""
    data = json.loads(FIXTURE.read_text())
    instances = data["gpus"][0]["mig_instances"]
    instances[0]["processes"] = [{"pid": pid_a, "used_memory_mib": 19000}]
    instances[1]["processes"] = [{"pid": pid_b, "used_memory_mib": 9000}]
    path = tmp_path / "mig.json"
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def mig_containers(run_container: Callable[..., Any], free_run_id: str) -> tuple[Any, Any, Any]:
    """Three containers, each asking for one MIG device, in the three ways a user writes it."""
    a = run_container(
        ["sleep", "300"],
        name=f"mig-a-{free_run_id}",
        environment={"NVIDIA_VISIBLE_DEVICES": "0:0"},
    )
    b = run_container(
        ["sleep", "300"],
        name=f"mig-b-{free_run_id}",
        environment={"NVIDIA_VISIBLE_DEVICES": UUID_1},
    )
    idle = run_container(
        ["sleep", "300"],
        name=f"mig-idle-{free_run_id}",
        environment={"NVIDIA_VISIBLE_DEVICES": "0:2"},
    )
    return a, b, idle


def test_once_json_exporter_and_health_agree_per_mig_device(
    mig_containers: tuple[Any, Any, Any], free_run_id: str, tmp_path: Path
) -> None:
    a, b, idle = mig_containers
    path = _scenario(tmp_path, _host_pid(a), _host_pid(b))

    result = _gputui("--scenario", str(path), "--once", "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    gpu = doc["gpus"][0]
    assert gpu["mig_mode_current"] is True and gpu["utilization_gpu"] is None
    devices = {m["device"]: m for m in gpu["mig_instances"] if m["device"]}
    assert sorted(devices) == ["0:0", "0:1", "0:2"]
    assert devices["0:2"]["profile"] == "1g.18gb" and devices["0:2"]["sm_count"] == 16
    assert devices["0:1"]["uuid"] == UUID_1
    assert devices["0:0"]["utilization_gpu"] is None
    assert "not supported on MIG" in devices["0:0"]["utilization_na_reason"]
    assert [m["gpu_instance_id"] for m in gpu["mig_instances"] if m["device"] is None] == [5]

    procs = {p["pid"]: p for p in doc["processes"]}
    assert procs[_host_pid(a)]["mig_device"] == "0:0"
    assert procs[_host_pid(a)]["container"]["id"] == a.id
    assert procs[_host_pid(b)]["mig_device"] == "0:1"
    assert procs[_host_pid(b)]["mig_uuid"] == UUID_1
    assert procs[_host_pid(b)]["gpu_instance_id"] == 2
    assert procs[_host_pid(b)]["sm_util"] is None  # not measured on MIG: unknown, never 0

    mine = {c["name"]: c for c in doc["containers"] if c["name"].endswith(free_run_id)}
    assert mine[f"mig-a-{free_run_id}"]["mig_devices"] == ["0:0"]
    assert mine[f"mig-b-{free_run_id}"]["mig_devices"] == ["0:1"]
    assert mine[f"mig-idle-{free_run_id}"]["idle_reserved"] is True
    assert mine[f"mig-idle-{free_run_id}"]["gpu_request"] == ["0:2"]

    # Findings per MIG device: the idle reservation names its device, not the whole GPU; two
    # containers on two MIG devices of one GPU do not share it.
    idle_findings = [
        f
        for f in doc["findings"]
        if f["kind"] == "idle_reservation" and f["subject"] == f"container:{idle.id}"
    ]
    assert len(idle_findings) == 1
    assert "MIG device 0:2 (1g.18gb)" in idle_findings[0]["summary"]
    assert not [f for f in doc["findings"] if f["kind"] == "gpu_shared"]

    health = {h["id"]: h for h in doc["health"]}
    assert health["gpu.mig_layout:0"]["status"] == "warn"
    assert "-gi 5 -cci" in health["gpu.mig_layout:0"]["fix"]
    assert health[f"container.mig_device:mig-b-{free_run_id}"]["status"] == "pass"
    assert health["gpu.mig:1"]["status"] == "warn"  # mode pending a reset
    assert "nvidia-smi -r -i 1" in health["gpu.mig:1"]["fix"]

    exported = _gputui("export", "--once", "--scenario", str(path))
    assert exported.returncode == 0, exported.stderr
    lines = exported.stdout.splitlines()

    def series(name: str, device: str) -> float:
        hits = [ln for ln in lines if ln.startswith(name + "{") and f'mig_device="{device}"' in ln]
        assert len(hits) == 1, (name, device, hits)
        assert 'GPU_I_PROFILE="' in hits[0] and 'GPU_I_ID="' in hits[0]
        return float(hits[0].rsplit(" ", 1)[1])

    assert series("gputui_mig_processes", "0:0") == 1
    assert series("gputui_mig_processes", "0:1") == 1
    assert series("gputui_mig_processes", "0:2") == 0
    assert series("gputui_mig_memory_total_bytes", "0:2") == 16896 * MIB
    assert series("gputui_mig_memory_used_bytes", "0:0") == devices["0:0"]["memory_used_bytes"]
    idle_series = [
        ln
        for ln in lines
        if ln.startswith("gputui_container_idle_gpu_reservation{")
        and f'container="mig-idle-{free_run_id}"' in ln
    ]
    assert len(idle_series) == 1 and idle_series[0].endswith(" 1.0")
    assert not any(ln.startswith("DCGM_FI_DEV_GPU_UTIL{") and 'gpu="0"' in ln for ln in lines)


def test_two_containers_on_one_mig_device_share_it_and_are_marked(
    run_container: Callable[..., Any], free_run_id: str, tmp_path: Path
) -> None:
    a = run_container(["sleep", "300"], name=f"mig-s1-{free_run_id}")
    b = run_container(["sleep", "300"], name=f"mig-s2-{free_run_id}")
    data = json.loads(FIXTURE.read_text())
    data["gpus"][0]["mig_instances"][2]["processes"] = [
        {"pid": _host_pid(a), "used_memory_mib": 3000},
        {"pid": _host_pid(b), "used_memory_mib": 1000},
    ]
    path = tmp_path / "shared.json"
    path.write_text(json.dumps(data))
    doc = json.loads(_gputui("--scenario", str(path), "--once", "--json").stdout)
    shared = [f for f in doc["findings"] if f["kind"] == "gpu_shared"]
    assert [f["subject"] for f in shared] == ["mig:0:2"]
    assert "MIG device 0:2 (1g.18gb) shared by 2 parties" in shared[0]["summary"]
    assert "75%" in shared[0]["summary"] and "25%" in shared[0]["summary"]


def test_mig_layout_is_read_on_the_medium_cadence_and_disabled_mig_costs_one_call() -> None:
    from gputui.collect.nvml.source import NvmlSource
    from gputui.collect.standins.scenario import ScenarioNvml

    data = json.loads(FIXTURE.read_text())
    nv = ScenarioNvml(data)
    calls: dict[str, int] = {}
    for name in dir(nv):
        fn = getattr(nv, name)
        if name.startswith("nvmlDevice") and callable(fn):

            def counted(*args: Any, _fn: Any = fn, _name: str = name, **kw: Any) -> Any:
                calls[_name] = calls.get(_name, 0) + 1
                return _fn(*args, **kw)

            counted.__name__ = name
            setattr(nv, name, counted)
    clock = [0.0]
    source = NvmlSource(
        nv, background=False, clock=lambda: clock[0], slow_interval=60.0, medium_interval=5.0
    )
    first = source.read()
    assert [m.profile for m in first.gpus[0].mig_instances] == [
        "3g.71gb",
        "2g.35gb",
        "1g.18gb",
        None,
    ]
    after_first = dict(calls)
    clock[0] = 1.0
    second = source.read()
    assert second.gpus[0].mig_instances[0].memory_used_bytes == 20000 * MIB
    delta = {k: v - after_first.get(k, 0) for k, v in calls.items() if v != after_first.get(k, 0)}
    # Within the medium interval, no layout call is made again: only memory and process lists.
    for layout_call in (
        "nvmlDeviceGetMigMode",
        "nvmlDeviceGetMaxMigDeviceCount",
        "nvmlDeviceGetMigDeviceHandleByIndex",
        "nvmlDeviceGetGpuInstanceId",
        "nvmlDeviceGetAttributes",
        "nvmlDeviceGetGpuInstanceById",
    ):
        assert layout_call not in delta, layout_call
    # GPU 1 has MIG disabled: its MIG mode is read once per medium tick and nothing else of MIG.
    clock[0] = 6.0
    before = dict(calls)
    source.read()
    assert calls["nvmlDeviceGetMigMode"] - before["nvmlDeviceGetMigMode"] == 2  # both GPUs
    # Max count, handles, ids, attributes: GPU 0's layout only (3 devices, 1 empty GI probe run).
    assert calls["nvmlDeviceGetMaxMigDeviceCount"] - before["nvmlDeviceGetMaxMigDeviceCount"] == 1
