"""Regressions found on the H200 lab, and the real snapshot recorded there.

``tests/fixtures/h200-lab-once.json`` is ``gputui --once --json`` from the H200 lab: two containers
holding GPU memory (trainer-a 12 GiB, trainer-b 3 GiB), one host process (2 GiB) and an idle
container with GPU device nodes; nvidia-smi --query-compute-apps reported the same PIDs and MiB.
The host process's script path was shortened to /opt/lab/ (the rest is as recorded).
"""

from __future__ import annotations

import json

from gputui.collect.docker.parse import parse_inspect
from gputui.collect.sources import HealthInputs
from gputui.health.runner import run_checks
from gputui.model.containers import ContainerReading, EngineInfo
from gputui.model.gpu import GpuReading
from gputui.model.processes import Visibility
from gputui.model.status import HealthStatus, SourceStatus
from tests.support.paths import FIXTURES

FIXTURE = FIXTURES / "h200-lab-once.json"
MIB = 1024 * 1024


def test_recorded_h200_snapshot_attributes_every_gpu_process() -> None:
    doc = json.loads(FIXTURE.read_text())
    assert doc["sources"]["nvml"]["ok"] is True
    assert doc["host"]["driver_version"] == "580.159.04"
    # nvidia-smi --query-compute-apps=pid,used_memory on the same machine, same moment.
    smi = {656: 13002, 733: 3786, 774: 2762}
    got = {p["pid"]: p["gpu_memory_bytes"] // MIB for p in doc["processes"]}
    assert got == smi
    by_pid = {p["pid"]: p for p in doc["processes"]}
    assert by_pid[656]["container"]["name"] == "trainer-a"
    assert by_pid[733]["container"]["name"] == "trainer-b"
    assert by_pid[656]["container_pid"] == 1
    assert by_pid[774]["container"] is None
    containers = {c["name"]: c for c in doc["containers"]}
    assert containers["trainer-a"]["gpu_memory_bytes"] == 13002 * MIB
    assert containers["idle-res"]["idle_reserved"] is True
    gpu = doc["gpus"][0]
    assert gpu["memory_used_bytes"] <= gpu["memory_total_bytes"]
    assert sum(p["gpu_memory_bytes"] for p in doc["processes"]) <= gpu["memory_used_bytes"]
    statuses = {h["id"]: h["status"] for h in doc["health"]}
    # The lab passes GPUs with --device: no nvidia runtime, no CDI in the engine.
    assert statuses["docker.nvidia_runtime"] == "warn"
    assert statuses["cdi.specs"] == "info"


def test_device_nodes_with_ctl_and_uvm_are_not_flagged_as_missing() -> None:
    # Seen on the lab: --device /dev/nvidia0 /dev/nvidiactl /dev/nvidia-uvm was reported as
    # "passed without nvidiactl, nvidia-uvm" because only numbered nodes were recorded.
    devices = [
        {"PathOnHost": p, "PathInContainer": p, "CgroupPermissions": "rwm"}
        for p in ("/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
    ]
    info = parse_inspect(
        {
            "Id": "a" * 64,
            "Name": "/idle-res",
            "Config": {"Image": "lab-host:latest", "Env": ["NVIDIA_VISIBLE_DEVICES=all"]},
            "State": {"Status": "running", "Pid": 813},
            "HostConfig": {"Runtime": "runc", "Devices": devices},
        }
    )
    assert info.gpu_request == ("0",)
    assert info.gpu_request_via == "devices"
    assert "/dev/nvidiactl" in info.gpu_device_paths
    engine = EngineInfo(runtimes=("runc",), default_runtime="runc", cgroup_driver="cgroupfs")
    checks = run_checks(
        HealthInputs(
            GpuReading(status=SourceStatus("nvml", ok=True)),
            ContainerReading(SourceStatus("docker", ok=True), (info,), engine),
            (),
            Visibility(True, False),
        )
    )
    visible = next(c for c in checks if c.id == "container.gpu_visible:idle-res")
    assert visible.status is HealthStatus.INFO, visible
    only_gpu = parse_inspect(
        {
            "Id": "b" * 64,
            "Name": "/half",
            "Config": {"Image": "x"},
            "State": {"Status": "running"},
            "HostConfig": {"Devices": devices[:1]},
        }
    )
    checks = run_checks(
        HealthInputs(
            GpuReading(status=SourceStatus("nvml", ok=True)),
            ContainerReading(SourceStatus("docker", ok=True), (only_gpu,), engine),
            (),
            Visibility(True, False),
        )
    )
    half = next(c for c in checks if c.id == "container.gpu_visible:half")
    assert half.status is HealthStatus.WARN
    assert "nvidiactl" in half.summary
