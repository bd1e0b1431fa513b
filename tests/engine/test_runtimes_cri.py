"""A CRI runtime's containers through the CRI API itself (``--engine crio=``), for real.

CRI-O is not packaged for Debian 12, so the CRI source is driven against containerd's CRI plugin
(tests/support/runtimes.py's private containerd), which serves the same ``runtime.v1`` API a
kubelet (and CRI-O) speaks: a real pod made as a kubelet makes one, listed with
``ListPodSandbox`` / ``ListContainers``, its processes attributed by their real cgroups to the
listed container through the normal join. The truth is the CRI's own answer to the calls that
made the pod (its ids, metadata, labels) and ``/proc``. Where a CRI-O socket exists, the same
source is read from CRI-O itself.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gputui.collect.criapi.source import CriSource
from gputui.collect.docker.logs import LogLine, LogReader
from gputui.collect.engines import CRIO_SOCKETS
from gputui.model.settings import Settings
from gputui.wiring.compose import build_collector
from tests.support.protobuf import msg
from tests.support.runtimes import (
    CRI_NAMESPACE,
    PREFIX,
    RUNTIME_IMAGE,
    Containerd,
    CriClient,
    containerd,
    runtime_image,
    wait_until,
)

__all__ = ["containerd", "runtime_image"]

#: PID 1 is ``sh``, which says hello on its log first; its child ``sleep`` is another process.
COMMAND = ("sh", "-c", "echo gputui-hello; sleep 900 & wait")
#: One core kept busy by the shell itself (no fork per turn).
BUSY_LOOP = ("sh", "-c", "while :; do :; done")


def _scenario(tmp_path: Path, pids: list[int]) -> Path:
    path = tmp_path / "scenario.json"
    processes = [{"pid": pid, "used_memory_mib": 100 + i} for i, pid in enumerate(pids)]
    gpu = {"index": 0, "name": "NVIDIA H200", "memory_total_mib": 143771,
           "memory_used_mib": 1000, "processes": processes}  # fmt: skip
    path.write_text(json.dumps({"nvml": "ok", "gpus": [gpu]}))
    return path


def _once(scenario: Path, *engines: str) -> dict[str, Any]:
    argv = [sys.executable, "-m", "gputui", "--scenario", str(scenario), "--once", "--json"]
    for engine in engines:
        argv += ["--engine", engine]
    result = subprocess.run(
        argv, capture_output=True, text=True, timeout=120, env=dict(os.environ), check=False
    )
    assert result.returncode == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def _row(doc: dict[str, Any], container_id: str) -> dict[str, Any]:
    found = [c for c in doc["containers"] + doc.get("other_containers", [])
             if c["id"] == container_id]  # fmt: skip
    assert len(found) == 1, [c["id"] for c in doc["containers"]]
    row: dict[str, Any] = found[0]
    return row


def _read_all(reader: LogReader, deadline_s: float = 20) -> list[LogLine]:
    lines: list[LogLine] = []
    deadline = time.monotonic() + deadline_s
    try:
        while time.monotonic() < deadline:
            got = reader.read()
            if got is None:
                break
            lines += got
    finally:
        reader.close()
    return lines


def test_a_pod_is_named_and_attributed_through_the_cri_api(
    containerd: Containerd, tmp_path: Path
) -> None:
    """`--engine crio=unix://<containerd's socket>`: names, pod, namespace, image, state and
    creation time from the CRI's lists; the pod's processes (by their real cgroups) joined to
    the listed container; x and l through the CRI; a terminal and the lifecycle keys refused."""
    cri = CriClient(containerd.sock)
    before = time.time()
    try:
        pod = cri.run_pod(containerd, f"{PREFIX}-crio-0", "ml", "burstable", COMMAND)
    finally:
        cri.close()
    after = time.time()
    init = containerd.task_pid(CRI_NAMESPACE, pod.container_id)
    sandbox_pid = containerd.task_pid(CRI_NAMESPACE, pod.sandbox_id)
    wait_until(lambda: bool(_children(init)), "the pod's container did not start its child", 30)
    (child,) = _children(init)
    scenario = _scenario(tmp_path, [init, child, sandbox_pid])
    engine = f"crio=unix://{containerd.sock}"

    doc = _once(scenario, engine)
    assert [k for k in doc["sources"] if k != "nvml"] == ["crio"]
    assert doc["sources"]["crio"]["ok"] is True, doc["sources"]["crio"]
    row = _row(doc, pod.container_id)
    assert row["source"] == "crio"
    assert row["name"] == pod.container_name
    assert (row["k8s_pod"], row["k8s_namespace"]) == (pod.name, pod.namespace)
    assert row["image"] == RUNTIME_IMAGE
    assert row["status"] == "running"
    sandbox = _row(doc, pod.sandbox_id)
    assert (sandbox["name"], sandbox["k8s_pod"], sandbox["source"]) == ("POD", pod.name, "crio")
    # The processes are found by their own cgroup (/kubepods/burstable/pod<uid>/<id>) and
    # joined to the container the CRI listed, by its id.
    procs = {p["pid"]: p for p in doc["processes"]}
    for pid in (init, child):
        assert procs[pid]["container"]["id"] == pod.container_id, procs[pid]
        assert procs[pid]["container"]["name"] == pod.container_name
        assert procs[pid]["container"]["known_to_engine"] is True
    assert procs[sandbox_pid]["container"]["id"] == pod.sandbox_id
    # What answers on the socket is asked of it (Version): containerd's CRI plugin here.
    (sources,) = [h for h in doc["health"] if h["id"] == "engines.sources"]
    assert sources["status"] == "pass", sources
    assert any(
        line.startswith(f"crio (containerd at unix://{containerd.sock}")
        and line.endswith("answers")
        for line in sources["details"]
    ), sources
    assert [h for h in doc["health"] if h["status"] == "fail"] == []

    collector = build_collector(Settings(scenario=scenario, engines=(engine,)))
    try:
        collector.collect()
        owner = collector.container_owner(pod.container_id)
        assert owner is not None and owner.source == "crio"
        assert owner.capabilities.exec and owner.capabilities.logs
        details = collector.container_details(pod.container_id)
        assert details.error is None and details.image == RUNTIME_IMAGE, details
        assert details.created_at is not None and before - 1 < details.created_at < after + 1
        assert ("io.kubernetes.pod.uid", pod.uid) in details.labels
        # x: ExecSync, in the pod's container.
        both = collector.exec_in_container(
            pod.container_id, ["sh", "-c", "echo out; echo err >&2; exit 5"], 10
        )
        assert (both.exit_code, both.stdout, both.stderr, both.error) == (5, "out\n", "err\n", None)
        sandbox_exec = collector.exec_in_container(pod.sandbox_id, ["true"], 5)
        assert sandbox_exec.error is not None and "sandbox" in sandbox_exec.error
        # l: the CRI log file ContainerStatus names.
        lines = _read_all(collector.open_container_logs(pod.container_id, tail=10, follow=False))
        assert [line.text for line in lines] == ["gputui-hello"], lines
        # A terminal and the lifecycle keys are the kubelet's.
        assert collector.interactive_exec_argv(pod.container_id, ["sh"]) is None
        assert "kubectl exec -it" in owner.capabilities.why("interactive_exec")
        stop = collector.container_action(pod.container_id, "stop")
        assert stop is not None and "crio does not offer container stop" in stop, stop
        assert "kubectl delete pod" in stop
        # A container the kubelet (here: the test) stops is listed exited.
        stopper = CriClient(containerd.sock)
        try:
            stopper.call("StopContainer", msg((1, pod.container_id), (2, 0)))
        finally:
            stopper.close()
        snapshot = collector.collect()
        status = {u.info.id: u.info.status for u in snapshot.containers}
        assert status[pod.container_id] == "exited", status
    finally:
        collector.close()


def test_crio_itself_when_it_runs_here() -> None:
    """CRI-O's own socket, read by the same source (skipped where CRI-O does not run)."""
    found = [p for p in CRIO_SOCKETS if Path(p).exists() and stat.S_ISSOCK(os.stat(p).st_mode)]
    if not found:
        pytest.skip("CRI-O is not packaged for Debian 12 (no socket at /var/run/crio/crio.sock)")
    source = CriSource(f"unix://{found[0]}")
    try:
        reading = source.read()
    finally:
        source.close()
    assert reading.status.ok, reading.status
    assert reading.engine is not None and reading.engine.product == "cri-o"
    assert all(c.k8s_pod for c in reading.containers)


def test_a_pods_cpu_and_memory_come_from_the_cri_stats(containerd: Containerd) -> None:
    """`ListContainerStats` through the CRI source: a container spinning one core reads up to
    100 % between two reads (CPU time over the runtime's clock), an idle one about 0 %, and
    the working-set memory is the cgroup's (the runtime's own figure, as the kubelet reads)."""
    cri = CriClient(containerd.sock)
    try:
        busy = cri.run_pod(containerd, f"{PREFIX}-crio-busy", "ml", "burstable", BUSY_LOOP)
        idle = cri.run_pod(containerd, f"{PREFIX}-crio-idle", "ml", "burstable", COMMAND)
    finally:
        cri.close()
    source = CriSource(f"unix://{containerd.sock}", timeout=10.0)
    try:
        first = {c.id: c for c in source.read().containers}
        time.sleep(2.0)
        reading = source.read()
    finally:
        source.close()
    assert reading.status.ok, reading.status
    got = {c.id: c for c in reading.containers}
    spinning, resting = got[busy.container_id], got[idle.container_id]
    # One core's worth of spinning, less what a loaded test machine leaves it.
    assert spinning.cpu_percent is not None and 25 <= spinning.cpu_percent <= 130, spinning
    assert resting.cpu_percent is not None and resting.cpu_percent < 10, resting
    for info in (spinning, resting):
        assert info.memory_used_bytes is not None and 0 < info.memory_used_bytes < 1 << 30, info
    # The first read has no earlier figure: the runtime's own rate where it gives one, else
    # unknown, never a made-up 0.
    earliest = first[busy.container_id].cpu_percent
    assert earliest is None or earliest > 0, earliest
    # A pod's sandbox (the pause process) is no container of the stats: nothing is invented.
    assert got[busy.sandbox_id].cpu_percent is None
