"""MPS: the daemon found in /proc, MPS clients from NVML, containers and the daemon's pipes.

The /proc the scan reads is a prepared directory; the containers of the pipe-directory checks
are real (their mounts, IPC mode and environment come from the engine's inspect).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gputui.collect.docker.parse import parse_inspect
from gputui.collect.standins.scenario import ScenarioSource
from gputui.health.mig_mps import scan_mps
from gputui.model.gpu import GpuProcessSample
from gputui.model.processes import GpuProcess, ProcessInfo
from gputui.model.status import HealthStatus
from tests.support.health import (
    container,
    containers_reading,
    gpu,
    gpu_reading,
    inputs,
    make_roots,
    run,
)


def _proc_entry(proc: Path, pid: int, comm: str, argv: list[str], env: dict[str, str]) -> None:
    d = proc / str(pid)
    d.mkdir(parents=True)
    (d / "comm").write_text(comm[:15] + "\n")
    (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    (d / "environ").write_bytes(b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items()))


def _mps_host(proc: Path, pipe: str | None) -> None:
    env = {"SECRET_TOKEN": "hunter2"}
    if pipe is not None:
        env["CUDA_MPS_PIPE_DIRECTORY"] = pipe
    _proc_entry(
        proc, 4100, "nvidia-cuda-mps-control", ["/usr/bin/nvidia-cuda-mps-control", "-d"], env
    )
    _proc_entry(proc, 4200, "nvidia-cuda-mps-server", ["nvidia-cuda-mps-server"], {})
    _proc_entry(proc, 4300, "python3", ["python3", "train.py"], {"CUDA_MPS_PIPE_DIRECTORY": "/x"})


def _client(pid: int, container_id: str | None = None) -> GpuProcess:
    sample = GpuProcessSample(pid=pid, gpu_index=0, used_memory_bytes=1 << 30, kind="M+C", mps=True)
    return GpuProcess(sample, ProcessInfo(pid, name="python3"), container_id)


def test_the_scan_tells_the_daemon_from_the_server_and_reads_only_the_pipe_directory(
    tmp_path: Path,
) -> None:
    roots = make_roots(tmp_path)
    _mps_host(Path(roots.proc), "/run/nvidia-mps")
    found = scan_mps(roots.proc)
    assert (found.control, found.server, found.pipe_directory) == (
        (4100,),
        (4200,),
        "/run/nvidia-mps",
    )

    checks = run(inputs(processes=[_client(5000)]), roots)
    daemon = checks["mps.daemon"]
    assert daemon.status is HealthStatus.INFO
    assert "1 client process" in daemon.summary
    text = "\n".join(daemon.details)
    assert "control daemon PID 4100" in text and "server PID 4200" in text
    assert "pipe directory /run/nvidia-mps" in text
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" in text  # what MPS changes is explained
    assert "hunter2" not in text and "SECRET_TOKEN" not in text


def test_a_daemon_without_the_variable_uses_the_default_pipe_directory(tmp_path: Path) -> None:
    roots = make_roots(tmp_path)
    _mps_host(Path(roots.proc), None)
    assert scan_mps(roots.proc).pipe_directory == "/tmp/nvidia-mps"


def test_no_mps_is_a_skip_and_clients_without_a_visible_daemon_warn(tmp_path: Path) -> None:
    roots = make_roots(tmp_path)
    assert run(inputs(), roots)["mps.daemon"].status is HealthStatus.SKIP
    lonely = run(inputs(processes=[_client(5000)]), roots)["mps.daemon"]
    assert lonely.status is HealthStatus.WARN
    assert lonely.fix is not None and "--pid=host" in lonely.fix


def test_containers_get_the_daemons_pipes_only_when_mounted_with_host_ipc(
    run_container: Callable[..., Any], free_run_id: str, tmp_path: Path
) -> None:
    pipes = tmp_path / "mps-pipes"
    pipes.mkdir()
    roots = make_roots(tmp_path / "root")
    _mps_host(Path(roots.proc), str(pipes))
    good = run_container(
        ["sleep", "300"],
        name=f"mps-good-{free_run_id}",
        environment={
            "CUDA_MPS_PIPE_DIRECTORY": "/mps",
            "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "25",
            "NVIDIA_VISIBLE_DEVICES": "0",
        },
        volumes={str(pipes): {"bind": "/mps", "mode": "rw"}},
        ipc_mode="host",
    )
    bad = run_container(
        ["sleep", "300"],
        name=f"mps-bad-{free_run_id}",
        environment={"NVIDIA_VISIBLE_DEVICES": "0"},
    )
    infos = [parse_inspect(c.attrs) for c in (good, bad)]
    assert (infos[0].mps_pipe_directory, infos[0].mps_thread_percentage) == ("/mps", 25)
    assert infos[0].mps_pipe_source == str(pipes) and infos[0].ipc_mode == "host"
    assert infos[1].mps_pipe_source is None and infos[1].mps_pipe_directory is None

    checks = run(
        inputs(
            gpu_reading(gpu(0)),
            containers_reading(*infos),
            processes=[_client(5000, infos[0].id)],
        ),
        roots,
    )
    ok = checks[f"container.mps:mps-good-{free_run_id}"]
    assert ok.status is HealthStatus.PASS, ok
    assert "25% of SMs" in ok.summary
    flagged = checks[f"container.mps:mps-bad-{free_run_id}"]
    assert flagged.status is HealthStatus.WARN
    assert "/tmp/nvidia-mps is not mounted from the host" in flagged.summary
    assert "IPC" in flagged.summary
    assert flagged.fix is not None and f"-v {pipes}:/tmp/nvidia-mps --ipc=host" in flagged.fix


def test_a_gpu_container_on_a_host_without_mps_gets_no_mps_check(tmp_path: Path) -> None:
    box = container("plain", gpu_request=("0",), gpu_request_via="device_requests")
    checks = run(inputs(gpu_reading(gpu(0)), containers_reading(box)), make_roots(tmp_path))
    assert "container.mps:plain" not in checks
    asking = replace(box, name="asking", mps_thread_percentage=50)
    warned = run(inputs(gpu_reading(gpu(0)), containers_reading(asking)), make_roots(tmp_path))
    assert warned["container.mps:asking"].status is HealthStatus.WARN
    assert "no MPS daemon" in warned["container.mps:asking"].summary


def test_mps_clients_in_a_scenario_are_listed_as_m_plus_c() -> None:
    source = ScenarioSource(
        {
            "gpus": [
                {
                    "index": 0,
                    "processes": [
                        {"pid": 11, "used_memory_mib": 100, "type": "M+C"},
                        {"pid": 12, "used_memory_mib": 50},
                    ],
                }
            ]
        }
    )
    procs = {p.pid: p for p in source.read().gpus[0].processes}
    assert (procs[11].kind, procs[11].mps) == ("M+C", True)
    assert (procs[12].kind, procs[12].mps) == ("C", False)
    source.close()


def test_the_proc_scan_runs_only_when_something_points_at_mps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    roots = make_roots(tmp_path / "root")
    _mps_host(Path(roots.proc), None)
    pipes = tmp_path / "pipes"
    pipes.mkdir()
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(pipes))
    # A daemon in /proc but no client, no server on the GPUs, no control pipe: not scanned.
    assert run(inputs(), roots)["mps.daemon"].status is HealthStatus.SKIP
    # Its control pipe is what a daemon without clients leaves to find it by.
    (pipes / "control").touch()
    found = run(inputs(), roots)["mps.daemon"]
    assert found.status is HealthStatus.INFO
    assert "control daemon PID 4100" in found.details
