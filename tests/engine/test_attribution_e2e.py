"""End to end: real containers, a scenario naming their real PIDs, ``gputui --once --json``.

Only NVML is replaced (by the scenario file); /proc, cgroups and the Docker engine are real, so
this is the whole attribution path a user relies on: host PID -> cgroup -> container -> name.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

MIB = 1024 * 1024


def _gputui(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def _host_pids(container: Any) -> list[int]:
    """Host PIDs of a container's processes, from the engine (``docker top``)."""
    top = container.top()
    column = top["Titles"].index("PID")
    return sorted(int(row[column]) for row in top["Processes"])


def _vanished_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
def host_process() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    yield proc
    proc.kill()
    proc.wait()


def test_once_json_attributes_real_container_processes(
    run_container: Callable[..., Any],
    host_process: subprocess.Popen[bytes],
    free_run_id: str,
    tmp_path: Path,
) -> None:
    trainer = run_container(
        ["sleep", "300"],
        name=f"trainer-a-{free_run_id}",
        labels={
            "com.docker.compose.project": "llm",
            "com.docker.compose.service": "trainer",
        },
    )
    # Two processes: PID 1 (sh) and a child with a different in-container PID.
    infer = run_container(
        ["sh", "-c", "sleep 300 & wait"],
        name=f"infer-{free_run_id}",
        labels={"io.kubernetes.pod.name": "bert-7d9c", "io.kubernetes.pod.namespace": "serving"},
        environment={"NVIDIA_VISIBLE_DEVICES": "0", "API_TOKEN": "s3cr3t-value"},
    )
    stopped = run_container(["true"], name=f"done-{free_run_id}")
    stopped.wait(timeout=30)
    deadline = time.monotonic() + 10
    while len(_host_pids(infer)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    trainer_pid = _host_pids(trainer)[0]
    infer_sh, infer_child = _host_pids(infer)
    gone = _vanished_pid()
    scenario = {
        "nvml": "ok",
        "gpus": [
            {
                "index": 0,
                "name": "NVIDIA H200",
                "memory_total_mib": 143771,
                "memory_used_mib": 5000,
                "utilization_gpu": 90,
                "processes": [
                    {"pid": trainer_pid, "used_memory_mib": 1000, "sm_util": 60},
                    {"pid": infer_child, "used_memory_mib": 2000, "sm_util": 20},
                    {"pid": host_process.pid, "used_memory_mib": 300},
                    {"pid": gone, "used_memory_mib": 700},
                ],
            },
            {
                "index": 1,
                "name": "NVIDIA H200",
                "memory_total_mib": 143771,
                "memory_used_mib": 500,
                "processes": [{"pid": infer_sh, "used_memory_mib": 500}],
            },
        ],
    }
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(scenario))

    result = _gputui("--scenario", str(path), "--once", "--json")
    assert result.returncode == 0, result.stderr
    assert "s3cr3t-value" not in result.stdout  # container environment values never exported
    doc = json.loads(result.stdout)
    assert doc["sources"]["docker"]["ok"] is True
    assert doc["mode"] == "scenario"
    procs = {(p["pid"], p["gpu_index"]): p for p in doc["processes"]}
    assert len(procs) == 5

    t = procs[(trainer_pid, 0)]
    assert t["container"]["id"] == trainer.id
    assert t["container"]["name"] == f"trainer-a-{free_run_id}"
    assert t["container"]["image"] == "gputui-test:latest"
    assert t["container_pid"] == 1
    assert t["gpu_memory_bytes"] == 1000 * MIB
    assert t["sm_util"] == 60
    assert t["command"] == "sleep 300"

    child = procs[(infer_child, 0)]
    assert child["container"]["id"] == infer.id
    assert child["container_pid"] not in (None, 1, infer_child)  # its own PID namespace
    assert procs[(infer_sh, 1)]["container_pid"] == 1

    host = procs[(host_process.pid, 0)]
    assert host["container"] is None
    assert host["container_pid"] is None
    assert "time.sleep(300)" in host["command"]

    orphan = procs[(gone, 0)]
    assert orphan["exists"] is False
    assert orphan["command"] is None
    assert orphan["container"] is None
    assert doc["orphan_gpu_memory_bytes"] == 700 * MIB

    containers = {c["id"]: c for c in doc["containers"]}
    assert containers[trainer.id]["gpu_memory_bytes"] == 1000 * MIB
    assert containers[trainer.id]["compose_service"] == "trainer"
    assert containers[infer.id]["gpu_memory_bytes"] == 2500 * MIB
    assert containers[infer.id]["pids"] == sorted([infer_sh, infer_child])
    assert containers[infer.id]["gpu_indexes"] == [0, 1]
    assert containers[infer.id]["k8s_pod"] == "bert-7d9c"
    assert containers[infer.id]["gpu_request"] == ["0"]
    assert containers[stopped.id]["status"] == "exited"
    assert containers[stopped.id]["gpu_memory_bytes"] == 0
    assert containers[stopped.id]["name"] == f"done-{free_run_id}"

    text = _gputui("--scenario", str(path), "--once")
    assert text.returncode == 0
    assert f"trainer-a-{free_run_id}" in text.stdout
    assert "(host)" in text.stdout
    assert "700MiB of GPU memory held by PIDs that do not exist here" in text.stdout


def test_unreachable_engine_is_reported_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps({"gpus": [{"index": 0, "processes": [{"pid": os.getpid()}]}]}))
    result = _gputui(
        "--scenario",
        str(path),
        "--once",
        "--json",
        env={"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"},
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    docker = doc["sources"]["docker"]
    assert docker["ok"] is False
    assert docker["error"]
    assert "\n" not in docker["error"]
    assert docker["fix"]
    assert doc["processes"][0]["container"] is None
    assert doc["processes"][0]["pid"] == os.getpid()
