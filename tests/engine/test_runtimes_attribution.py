"""Every runtime at once, for real: which container a GPU process is in, and its figures.

Each test starts one real runtime (tests/runtimes.py), runs a container of two processes in it,
names their real host PIDs as GPU processes through a scenario file (NVML is the one faked
boundary) and reads ``gputui --once --json``. The truth is each runtime's own answer: ``podman
top``, ``docker inspect``, ``ctr task ls`` and the container's own ``ps``. A container's CPU and
memory are either its own cgroup's or unknown: a rootless engine on cgroup v1 gives its
containers no cgroup, and the session cgroup they sit in is not theirs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from gputui.collect.linux.cgroup_usage import CgroupSampler
from gputui.model.containers import ContainerInfo, EngineInfo
from tests.support.runtimes import (
    CRI_NAMESPACE,
    CTR_NAMESPACE,
    PREFIX,
    Containerd,
    CriClient,
    Podman,
    RootlessDocker,
    containerd,
    get_unix,
    rootful_podman,
    rootless_docker,
    rootless_podman,
    runtime_image,
    wait_until,
)

__all__ = ["containerd", "rootful_podman", "rootless_docker", "rootless_podman", "runtime_image"]

MIB = 1024 * 1024
#: The container's command: PID 1 is ``sh``, its child ``sleep`` has another in-container PID.
COMMAND = ("sh", "-c", "sleep 900 & wait")
SLEEP = "sleep 900"


def _gputui_json(scenario: Path, docker_host: str) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-m", "gputui", "--scenario", str(scenario), "--once", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "DOCKER_HOST": docker_host},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def _scenario(tmp_path: Path, pids: list[int]) -> Path:
    path = tmp_path / "scenario.json"
    processes = [{"pid": pid, "used_memory_mib": 100 + i} for i, pid in enumerate(pids)]
    path.write_text(
        json.dumps(
            {
                "nvml": "ok",
                "gpus": [
                    {
                        "index": 0,
                        "name": "NVIDIA H200",
                        "memory_total_mib": 143771,
                        "memory_used_mib": 1000,
                        "processes": processes,
                    }
                ],
            }
        )
    )
    return path


def _no_engine(tmp_path: Path) -> str:
    return f"unix://{tmp_path}/no-engine.sock"


def _processes(doc: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {p["pid"]: p for p in doc["processes"]}


def _two_pids(top: list[tuple[int, int]]) -> tuple[tuple[int, int], tuple[int, int]]:
    """(init, child) as (host PID, in-container PID), the init being in-container PID 1."""
    assert len(top) == 2, top
    init = next(p for p in top if p[1] == 1)
    child = next(p for p in top if p[1] != 1)
    return init, child


def _cgroup_line(pid: int, controller: str) -> str:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path
    raise AssertionError(f"no {controller} line for {pid}")


def _assert_attributed(
    proc: dict[str, Any], container_id: str, container_pid: int, runtime: str
) -> None:
    assert proc["exists"] is True
    assert proc["container"] is not None, proc
    assert proc["container"]["id"] == container_id
    assert proc["container_pid"] == container_pid
    assert proc["runtime"] == runtime


def _podman_top(podman: Podman, name: str) -> list[tuple[int, int]]:
    wait_until(lambda: len(podman.top(name)) == 2, f"{name} did not start its two processes", 30)
    return podman.top(name)


def test_rootful_podman_by_cgroup_and_through_its_api_service(
    rootful_podman: Podman, tmp_path: Path
) -> None:
    name = f"{PREFIX}-{uuid.uuid4().hex[:8]}"
    container_id = rootful_podman.run_container(name, *COMMAND)
    (init, init_ctr), (child, child_ctr) = _two_pids(_podman_top(rootful_podman, name))
    inspect = json.loads(rootful_podman("inspect", name))[0]
    assert inspect["Id"] == container_id and inspect["State"]["Pid"] == init
    scenario = _scenario(tmp_path, [init, child])

    # No engine to ask: the cgroup alone (``/libpod_parent/libpod-<id>``) places both.
    alone = _processes(_gputui_json(scenario, _no_engine(tmp_path)))
    _assert_attributed(alone[init], container_id, init_ctr, "podman")
    _assert_attributed(alone[child], container_id, child_ctr, "podman")
    assert alone[child]["container"]["known_to_engine"] is False

    # podman's Docker-compatible API service lists it by name.
    sock = rootful_podman.service()
    answer = get_unix(sock, "/containers/json", timeout=30)
    assert answer is not None and answer[0] == 200
    listed = {c["Id"]: c["Names"] for c in json.loads(answer[1])}
    assert listed[container_id] == [f"/{name}"]

    # Its CPU and memory are its own cgroup's (``/libpod_parent/libpod-<id>``).
    sampled = _sample_twice(container_id, init, "cgroupfs")
    memory_dir = Path("/sys/fs/cgroup/memory") / _cgroup_line(init, "memory").lstrip("/")
    assert container_id in memory_dir.name
    peak = int((memory_dir / "memory.max_usage_in_bytes").read_text())
    assert sampled.memory_used_bytes is not None
    assert 0 < sampled.memory_used_bytes <= peak
    assert sampled.cpu_percent is not None and sampled.cpu_percent >= 0


def test_rootless_podman_by_conmon_and_no_session_figures(
    rootless_podman: Podman, tmp_path: Path
) -> None:
    name = f"{PREFIX}-{uuid.uuid4().hex[:8]}"
    container_id = rootless_podman.run_container(name, *COMMAND)
    (init, init_ctr), (child, child_ctr) = _two_pids(_podman_top(rootless_podman, name))
    # cgroup v1: no cgroup of its own, the process sits where its user's session does.
    assert container_id not in Path(f"/proc/{child}/cgroup").read_text()
    scenario = _scenario(tmp_path, [init, child])

    alone = _processes(_gputui_json(scenario, _no_engine(tmp_path)))
    _assert_attributed(alone[init], container_id, init_ctr, "podman")
    _assert_attributed(alone[child], container_id, child_ctr, "podman")

    # Its State.Pid's cgroup is the session's, whose figures are every process's of the
    # session (200 % CPU, the session's memory): CPU and memory are unknown instead.
    inspect = json.loads(rootless_podman("inspect", name))[0]
    assert inspect["State"]["Pid"] == init
    _assert_no_figures(_sample_twice(container_id, init, "cgroupfs"))
    sock = rootless_podman.service()
    answer = get_unix(sock, "/containers/json", timeout=30)
    assert answer is not None and container_id in {c["Id"] for c in json.loads(answer[1])}


def test_rootless_docker_by_its_shim_and_no_session_figures(
    rootless_docker: RootlessDocker, tmp_path: Path
) -> None:
    name = f"{PREFIX}-{uuid.uuid4().hex[:8]}"
    container_id = rootless_docker(
        "run", "-d", "--name", name, "--network", "none", "gputui-rt:latest", *COMMAND
    ).strip()
    init = int(rootless_docker("inspect", "--format", "{{.State.Pid}}", name))
    # ``docker top`` needs the container's cgroup, which a rootless engine on cgroup v1 does not
    # make: the child is the init's, its in-container PID the container's own ``ps``'s.
    wait_until(lambda: bool(_children(init)), f"{name} did not start its child", 30)
    (child,) = _children(init)
    in_ctr = _ps(rootless_docker("exec", name, "ps", "-o", "pid,args"))
    assert container_id not in Path(f"/proc/{child}/cgroup").read_text()
    scenario = _scenario(tmp_path, [init, child])

    alone = _processes(_gputui_json(scenario, _no_engine(tmp_path)))
    _assert_attributed(alone[init], container_id, 1, "docker")
    _assert_attributed(alone[child], container_id, in_ctr[SLEEP], "docker")

    # ``CgroupDriver`` is ``none``: the only cgroup in sight is the session's, not the
    # container's.
    assert rootless_docker("info", "--format", "{{.CgroupDriver}}").strip() == "none"
    _assert_no_figures(_sample_twice(container_id, init, "none"))


def test_ctr_container_with_a_named_id(containerd: Containerd, tmp_path: Path) -> None:
    name = f"{PREFIX}-{uuid.uuid4().hex[:8]}"
    containerd.ctr(CTR_NAMESPACE, "run", "-d", "docker.io/library/gputui-rt:latest", name, *COMMAND)
    init = containerd.task_pid(CTR_NAMESPACE, name)
    wait_until(lambda: bool(_children(init)), f"{name} did not start its child", 30)
    (child,) = _children(init)
    in_ctr = containerd.in_container_ps(CTR_NAMESPACE, name)
    # Its cgroup is ``/<namespace>/<id>``: no rule can tell that from any other path.
    assert _cgroup_line(child, "memory") == f"/{CTR_NAMESPACE}/{name}"
    scenario = _scenario(tmp_path, [init, child])

    procs = _processes(_gputui_json(scenario, _no_engine(tmp_path)))
    _assert_attributed(procs[init], name, 1, "containerd")
    _assert_attributed(procs[child], name, in_ctr[SLEEP], "containerd")


def test_cri_pod_like_a_kubelet(containerd: Containerd, tmp_path: Path) -> None:
    cri = CriClient(containerd.sock)
    try:
        pod = cri.run_pod(containerd, f"{PREFIX}-trainer-0", "ml", "burstable", COMMAND)
    finally:
        cri.close()
    init = containerd.task_pid(CRI_NAMESPACE, pod.container_id)
    sandbox = containerd.task_pid(CRI_NAMESPACE, pod.sandbox_id)
    wait_until(lambda: bool(_children(init)), "the pod's container did not start its child", 30)
    (child,) = _children(init)
    in_ctr = containerd.in_container_ps(CRI_NAMESPACE, pod.container_id)
    assert _cgroup_line(child, "memory") == f"{pod.cgroup_parent}/{pod.container_id}"
    scenario = _scenario(tmp_path, [init, child, sandbox])

    procs = _processes(_gputui_json(scenario, _no_engine(tmp_path)))
    # The pod's containers share its PID namespace (the CRI default): PID 1 is the sandbox's.
    _assert_attributed(procs[init], pod.container_id, in_ctr[" ".join(COMMAND)], "kubernetes")
    assert in_ctr[" ".join(COMMAND)] != 1
    _assert_attributed(procs[child], pod.container_id, in_ctr[SLEEP], "kubernetes")
    assert procs[child]["pod_uid"] == pod.uid
    # The pod's shim names the sandbox (``-id <sandbox>``): the container keeps its own id, and
    # the sandbox's process is the sandbox's.
    _assert_attributed(procs[sandbox], pod.sandbox_id, 1, "kubernetes")


def _host_cpu() -> str:
    return Path("/proc/stat").read_text().splitlines()[0]


def _sample_twice(container_id: str, pid: int, driver: str) -> ContainerInfo:
    """The container's CPU % and memory as gputui's cgroup sampler reads them (two samples)."""
    sampler = CgroupSampler(Path("/sys/fs/cgroup"), Path("/proc"))
    info = ContainerInfo(
        id=container_id, name=container_id[:12], image="", status="running", pid=pid
    )
    engine = EngineInfo(cgroup_driver=driver, cgroup_version="1", host_memory_bytes=1 << 40)
    sampler.sample([info], engine)
    before = _host_cpu()
    wait_until(lambda: _host_cpu() != before, "the host's CPU counters did not move", 10)
    (sampled,) = sampler.sample([info], engine)
    sampler.clear()
    return sampled


def _assert_no_figures(sampled: ContainerInfo) -> None:
    assert sampled.cpu_percent is None
    assert sampled.memory_used_bytes is None
    assert sampled.memory_limit_bytes is None


def _children(pid: int) -> list[int]:
    """Child PIDs of a process (``/proc/<pid>/task/<pid>/children``)."""
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(p) for p in text.split()]


def _ps(out: str) -> dict[str, int]:
    """In-container PID per command from busybox ``ps -o pid,args`` output."""
    found: dict[str, int] = {}
    for line in out.splitlines()[1:]:
        pid, _, args = line.strip().partition(" ")
        if pid.isdigit():
            found.setdefault(args.strip(), int(pid))
    return found


@pytest.fixture(autouse=True)
def _linux_only() -> None:
    if not Path("/proc/self/cgroup").exists():
        pytest.skip("needs Linux /proc and cgroups")
