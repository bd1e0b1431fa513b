"""The contention evidence chain against real containers (NVML replaced by scenarios only)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker.types

from gputui.collect.collector import Collector
from gputui.collect.docker.source import DockerSource
from gputui.collect.linux.proc_reader import ProcSource
from gputui.collect.standins.scenario import ScenarioSource
from gputui.derive.findings import FindingsEngine
from gputui.model.containers import ContainerInfo
from gputui.model.status import Finding

MIB = 1024 * 1024


def _host_pid(container: Any) -> int:
    container.reload()
    return int(container.attrs["State"]["Pid"])


def _once_json(scenario: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(scenario))
    result = subprocess.run(
        [sys.executable, "-m", "gputui", "--scenario", str(path), "--once", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )
    assert result.returncode == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def test_two_containers_sharing_one_gpu_are_named_with_their_shares(
    run_container: Callable[..., Any], free_run_id: str, tmp_path: Path
) -> None:
    a = run_container(["sleep", "300"], name=f"share-a-{free_run_id}")
    b = run_container(["sleep", "300"], name=f"share-b-{free_run_id}")
    doc = _once_json(
        {
            "gpus": [
                {
                    "index": 0,
                    "memory_total_mib": 80000,
                    "memory_used_mib": 4000,
                    "processes": [
                        {"pid": _host_pid(a), "used_memory_mib": 3000, "sm_util": 70},
                        {"pid": _host_pid(b), "used_memory_mib": 1000, "sm_util": 20},
                    ],
                }
            ]
        },
        tmp_path,
    )
    (shared,) = [f for f in doc["findings"] if f["kind"] == "gpu_shared"]
    assert shared["subject"] == "gpu:0"
    figures = shared["figures"]
    assert figures["parties"] == 2
    assert figures[f"memory_share:share-a-{free_run_id}"] == 0.75
    assert figures[f"memory_share:share-b-{free_run_id}"] == 0.25
    assert figures[f"sm_util:share-a-{free_run_id}"] == 70


def test_created_container_with_gpu_request_and_no_process_is_idle(
    run_container: Callable[..., Any], free_run_id: str, tmp_path: Path
) -> None:
    # The engine records a --gpus request without a GPU (starting it would need the runtime).
    idle = run_container(
        ["sleep", "300"],
        start=False,
        name=f"idle-{free_run_id}",
        device_requests=[docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])],
    )
    doc = _once_json({"gpus": [{"index": 0, "memory_total_mib": 80000}]}, tmp_path)
    (finding,) = [
        f
        for f in doc["findings"]
        if f["kind"] == "idle_reservation" and f["subject"] == f"container:{idle.id}"
    ]
    assert "never started" in finding["summary"]
    (entry,) = [c for c in doc["containers"] if c["id"] == idle.id]
    assert entry["gpu_request"] == "all"


def test_no_idle_verdict_without_gpu_data(
    run_container: Callable[..., Any], free_run_id: str, tmp_path: Path
) -> None:
    """A broken driver must not turn every GPU container into an idle-reservation alarm."""
    created = run_container(
        ["sleep", "300"],
        start=False,
        name=f"idle-created-{free_run_id}",
        device_requests=[docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])],
    )
    running = run_container(
        ["sleep", "300"],
        name=f"idle-running-{free_run_id}",
        environment={"NVIDIA_VISIBLE_DEVICES": "all"},
    )
    ours = {created.id, running.id}

    def idle_verdicts(doc: dict[str, Any]) -> tuple[set[str], set[str]]:
        findings = {
            f["subject"].removeprefix("container:")
            for f in doc["findings"]
            if f["kind"] == "idle_reservation"
        }
        flagged = {c["id"] for c in doc["containers"] if c["idle_reserved"]}
        return findings & ours, flagged & ours

    # With GPU data both are idle (this is what the test would see if the guard were missing).
    ok = _once_json({"gpus": [{"index": 0, "memory_total_mib": 80000}]}, tmp_path)
    assert idle_verdicts(ok) == (ours, {running.id})
    for failure in ("LibraryNotFound", "NoPermission", "DriverNotLoaded"):
        doc = _once_json({"nvml": failure}, tmp_path)
        assert doc["sources"]["nvml"]["ok"] is False
        assert idle_verdicts(doc) == (set(), set()), failure


def _ours(run_id: str) -> DockerSource:
    """This run's containers only: the engine is shared, and others' (many, or slow to
    inspect) must not take the reads' time."""
    return DockerSource(label=f"gputui-test={run_id}")


def _collect_until(
    collector: Collector, engine: FindingsEngine, done: Callable[[list[Finding]], bool]
) -> list[Finding]:
    deadline = time.monotonic() + 30
    found: list[Finding] = []
    while time.monotonic() < deadline:
        found = list(engine.update(collector.collect()))
        if done(found):
            break
        time.sleep(1.0)
    return found


def _container(collector: Collector, cid: str) -> ContainerInfo | None:
    usage = collector.collect().container(cid)
    return usage.info if usage else None


def test_cpu_limited_busy_loop_shows_throttling(
    run_container: Callable[..., Any], free_run_id: str
) -> None:
    busy = run_container(
        ["sh", "-c", "while :; do :; done"], name=f"throttled-{free_run_id}", nano_cpus=100_000_000
    )
    collector = Collector(ScenarioSource({"gpus": []}), ProcSource(), _ours(free_run_id))
    try:
        found = _collect_until(
            collector,
            FindingsEngine(),
            lambda fs: any(f.kind == "cpu_throttled" and busy.id in f.subject for f in fs),
        )
        time.sleep(1.1)  # CPU % needs two samples a host tick apart
        info = _container(collector, busy.id)
    finally:
        collector.close()
    (throttled,) = [f for f in found if f.kind == "cpu_throttled" and busy.id in f.subject]
    assert throttled.figure("cpu_quota_cpus") == 0.1
    ratio = throttled.figure("throttled_ratio")
    assert isinstance(ratio, float)
    assert ratio >= 0.2  # the finding threshold; a busy loop at 0.1 CPU is throttled most periods
    assert info is not None
    assert info.cpu_quota_cpus == 0.1
    assert (info.cpu_throttled_periods or 0) > 0
    assert info.cpu_percent is not None
    assert info.cpu_percent < 20  # held near its 0.1-CPU quota (10 %)


def test_container_over_its_memory_limit_is_oom_killed(
    run_container: Callable[..., Any], free_run_id: str
) -> None:
    # `tail /dev/zero` buffers an endless line: it grows until the kernel kills it.
    hog = run_container(
        ["tail", "/dev/zero"],
        name=f"oom-{free_run_id}",
        mem_limit="32m",
        memswap_limit="32m",
    )
    hog.wait(timeout=60)
    collector = Collector(ScenarioSource({"gpus": []}), ProcSource(), _ours(free_run_id))
    try:
        found = _collect_until(
            collector,
            FindingsEngine(),
            lambda fs: any(f.kind == "oom_killed" and hog.id in f.subject for f in fs),
        )
    finally:
        collector.close()
    (oom,) = [f for f in found if f.kind == "oom_killed" and hog.id in f.subject]
    assert oom.severity == "fail"
    assert oom.figure("exit_code") == 137
