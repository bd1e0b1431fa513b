"""docker.* checks and the per-container GPU wiring checks, on model objects (no engine)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from gputui.model.containers import EngineInfo
from gputui.model.status import HealthCheck, HealthStatus, SourceStatus
from tests.support.health import (
    cid,
    container,
    containers_reading,
    engine,
    gpu_process,
    inputs,
    make_roots,
    run,
)

S = HealthStatus
WITH_NVIDIA = ("io.containerd.runc.v2", "nvidia", "runc")


# --- docker.engine ------------------------------------------------------------------------------


def test_engine_pass(tmp_path: Path) -> None:
    check = run(inputs(), make_roots(tmp_path))["docker.engine"]
    assert check.status is S.PASS
    assert check.summary == "Docker 28.2.2 at unix:///var/run/docker.sock"
    assert "context: default" in check.details
    assert "API version: 1.50" in check.details


@pytest.mark.parametrize(
    ("kind", "summary_part", "fix_part"),
    [
        ("permission", "Permission denied", "usermod -aG docker"),
        ("unreachable", "No Docker engine answers", "systemctl start docker"),
        ("not_found", "No Docker socket", "DOCKER_HOST"),
        ("error", "Docker engine unavailable", "docker info"),
    ],
)
def test_engine_fail_kinds(tmp_path: Path, kind: str, summary_part: str, fix_part: str) -> None:
    reading = containers_reading(ok=False, kind=kind, error="PermissionError(13)")
    check = run(inputs(docker=reading), make_roots(tmp_path))["docker.engine"]
    assert check.status is S.FAIL
    assert summary_part in check.summary
    assert check.fix is not None
    assert fix_part in check.fix
    assert "error: PermissionError(13)" in check.details


def test_engine_fail_prefers_the_sources_fix(tmp_path: Path) -> None:
    reading = containers_reading(ok=False, kind="permission", error="x", fix="source's own fix")
    check = run(inputs(docker=reading), make_roots(tmp_path))["docker.engine"]
    assert check.fix == "source's own fix"


# --- docker.nvidia_runtime ------------------------------------------------------------------------


def _runtime_check(
    tmp_path: Path, daemon_json: str | None = None, **engine_changes: object
) -> HealthCheck:
    roots = make_roots(tmp_path)
    if daemon_json is not None:
        Path(roots.daemon_json).write_text(daemon_json)
    reading = containers_reading(engine_info=engine(**engine_changes))
    return run(inputs(docker=reading), roots)["docker.nvidia_runtime"]


def test_nvidia_runtime_missing_warns_with_configure_fix(tmp_path: Path) -> None:
    check = _runtime_check(tmp_path)
    assert check.status is S.WARN
    assert check.summary == "Docker has no nvidia runtime registered"
    assert check.fix is not None
    assert "sudo nvidia-ctk runtime configure --runtime=docker" in check.fix
    assert "--set-as-default" in check.fix
    assert "sudo systemctl restart docker" in check.fix
    assert any("could not select device driver" in d for d in check.details)
    assert any(d.endswith("daemon.json: absent") for d in check.details)


def test_nvidia_runtime_in_daemon_json_but_not_loaded(tmp_path: Path) -> None:
    config = {"runtimes": {"nvidia": {"path": "nvidia-container-runtime", "args": []}}}
    check = _runtime_check(tmp_path, json.dumps(config))
    assert check.status is S.WARN
    assert "dockerd was not restarted" in check.summary
    assert check.fix == "sudo systemctl restart docker"
    assert "daemon.json runtimes: nvidia" in check.details


def test_nvidia_runtime_present_not_default(tmp_path: Path) -> None:
    check = _runtime_check(tmp_path, runtimes=WITH_NVIDIA)
    assert check.status is S.PASS
    assert "default: runc" in check.summary


def test_nvidia_runtime_present_and_default(tmp_path: Path) -> None:
    config = {
        "runtimes": {"nvidia": {"path": "nvidia-container-runtime"}},
        "default-runtime": "nvidia",
    }
    check = _runtime_check(
        tmp_path, json.dumps(config), runtimes=WITH_NVIDIA, default_runtime="nvidia"
    )
    assert check.status is S.PASS
    assert check.summary == "nvidia runtime registered and the default"
    assert "daemon.json default-runtime: nvidia" in check.details


def test_nvidia_runtime_invalid_daemon_json_warns(tmp_path: Path) -> None:
    check = _runtime_check(tmp_path, '{"runtimes": {', runtimes=WITH_NVIDIA)
    assert check.status is S.WARN
    assert "invalid JSON" in check.summary
    assert any(d.startswith("invalid JSON in ") for d in check.details)
    assert check.fix is not None
    assert "refuse to start" in check.fix


def test_nvidia_runtime_unreadable_daemon_json(tmp_path: Path) -> None:
    roots = make_roots(tmp_path)
    Path(roots.daemon_json).mkdir()  # reading a directory fails like an unreadable file
    check = run(inputs(), roots)["docker.nvidia_runtime"]
    assert check.status is S.WARN
    assert any(roots.daemon_json in d and "absent" not in d for d in check.details)


def test_nvidia_runtime_skip_reports_daemon_json(tmp_path: Path) -> None:
    roots = make_roots(tmp_path)
    Path(roots.daemon_json).write_text('{"default-runtime": "nvidia", "runtimes": {"nvidia": {}}}')
    check = run(inputs(docker=containers_reading(ok=False, kind="unreachable")), roots)[
        "docker.nvidia_runtime"
    ]
    assert check.status is S.SKIP
    assert "daemon.json default-runtime: nvidia" in check.details


# --- container.gpu_visible ------------------------------------------------------------------------


def _visible(
    tmp_path: Path, engine_changes: dict[str, object] | None = None, **changes: object
) -> HealthCheck:
    c = container("job", **changes)
    reading = containers_reading(c, engine_info=engine(**(engine_changes or {})))
    return run(inputs(docker=reading), make_roots(tmp_path))["container.gpu_visible:job"]


def test_gpu_visible_env_only_under_runc_fails(tmp_path: Path) -> None:
    check = _visible(tmp_path, gpu_request="all", gpu_request_via="env", runtime="runc")
    assert check.status is S.FAIL
    assert check.summary == "GPUs requested (NVIDIA_VISIBLE_DEVICES) but not injected"
    assert check.fix is not None
    assert "--gpus all" in check.fix
    assert check.subject == "job"


def test_gpu_visible_env_with_nvidia_default_runtime_passes(tmp_path: Path) -> None:
    check = _visible(
        tmp_path,
        {"runtimes": WITH_NVIDIA, "default_runtime": "nvidia"},
        gpu_request="all",
        gpu_request_via="env",
        runtime=None,
    )
    assert check.status is S.PASS


def test_gpu_visible_device_requests_without_any_injector_warns(tmp_path: Path) -> None:
    check = _visible(
        tmp_path, {"cdi_spec_dirs": ()}, gpu_request="all", gpu_request_via="device_requests"
    )
    assert check.status is S.WARN
    assert check.fix is not None
    assert "nvidia-ctk runtime configure" in check.fix


def test_gpu_visible_device_requests_with_runtime_passes(tmp_path: Path) -> None:
    check = _visible(
        tmp_path,
        {"runtimes": WITH_NVIDIA, "cdi_spec_dirs": ()},
        gpu_request=("0", "1"),
        gpu_request_via="device_requests",
    )
    assert check.status is S.PASS
    assert "requested GPUs: 0,1 via device_requests" in check.details


def test_gpu_visible_cdi_while_cdi_disabled_warns(tmp_path: Path) -> None:
    check = _visible(tmp_path, {"cdi_spec_dirs": ()}, gpu_request="all", gpu_request_via="cdi")
    assert check.status is S.WARN
    assert "CDI is disabled" in check.summary


def test_gpu_visible_unknown_runtime_fails(tmp_path: Path) -> None:
    check = _visible(tmp_path, gpu_request="all", gpu_request_via="runtime", runtime="nvidia")
    assert check.status is S.FAIL
    assert "'nvidia' is not registered" in check.summary


def test_gpu_visible_raw_devices(tmp_path: Path) -> None:
    partial = _visible(
        tmp_path,
        gpu_request=("0",),
        gpu_request_via="devices",
        gpu_device_paths=("/dev/nvidia0",),
    )
    assert partial.status is S.WARN
    assert "nvidiactl, nvidia-uvm" in partial.summary
    full = _visible(
        tmp_path,
        gpu_request=("0",),
        gpu_request_via="devices",
        gpu_device_paths=("/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"),
    )
    assert full.status is S.INFO


def test_gpu_visible_processes_prove_visibility(tmp_path: Path) -> None:
    c = container("job", gpu_request="all", gpu_request_via="env", runtime="runc")
    checks = run(
        inputs(docker=containers_reading(c), processes=[gpu_process(100, 0, cid("job"))]),
        make_roots(tmp_path),
    )
    assert checks["container.gpu_visible:job"].status is S.PASS


def test_gpu_visible_no_row_without_request(tmp_path: Path) -> None:
    checks = run(inputs(docker=containers_reading(container("web"))), make_roots(tmp_path))
    assert "container.gpu_visible:web" not in checks


# --- container.gpu_unrequested --------------------------------------------------------------------


def test_gpu_unrequested_warns(tmp_path: Path) -> None:
    c = container("sneaky", gpu_device_paths=())
    procs = [gpu_process(10, 1, cid("sneaky")), gpu_process(11, 2, cid("sneaky"))]
    check = run(inputs(docker=containers_reading(c), processes=procs), make_roots(tmp_path))[
        "container.gpu_unrequested:sneaky"
    ]
    assert check.status is S.WARN
    assert check.summary == "Uses GPU(s) 1, 2 without requesting any"
    assert "GPU processes (host PIDs): 10, 11" in check.details
    assert check.fix is not None
    assert "device=1,2" in check.fix


def test_gpu_unrequested_pass_when_requested(tmp_path: Path) -> None:
    c = container("fine", gpu_request="all", gpu_request_via="device_requests")
    checks = run(
        inputs(docker=containers_reading(c), processes=[gpu_process(10, 0, cid("fine"))]),
        make_roots(tmp_path),
    )
    assert checks["container.gpu_unrequested:fine"].status is S.PASS
    idle = run(inputs(docker=containers_reading(c)), make_roots(tmp_path))
    assert "container.gpu_unrequested:fine" not in idle


# --- container.utility_cap ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("caps", "status"),
    [
        (None, S.PASS),
        ((), S.PASS),
        (("compute", "utility"), S.PASS),
        (("all",), S.PASS),
        (("compute",), S.WARN),
        (("graphics", "video"), S.WARN),
    ],
)
def test_utility_cap(tmp_path: Path, caps: tuple[str, ...] | None, status: HealthStatus) -> None:
    c = container(
        "app", gpu_request="all", gpu_request_via="device_requests", nvidia_capabilities=caps
    )
    check = run(inputs(docker=containers_reading(c)), make_roots(tmp_path))[
        "container.utility_cap:app"
    ]
    assert check.status is status
    if status is S.WARN:
        assert check.fix is not None
        assert "NVIDIA_DRIVER_CAPABILITIES=" in check.fix
        assert "utility" in check.fix
        assert "nvidia-smi" in check.summary


def test_utility_cap_ignores_non_gpu_containers(tmp_path: Path) -> None:
    c = container("app", nvidia_capabilities=("compute",))
    assert "container.utility_cap:app" not in run(
        inputs(docker=containers_reading(c)), make_roots(tmp_path)
    )


# --- container.runtime ----------------------------------------------------------------------------


def test_container_runtime(tmp_path: Path) -> None:
    gone = container("legacy", status="exited", runtime="nvidia")
    ok = container("fine", runtime="nvidia")
    plain = container("plain", runtime="runc")
    missing = run(inputs(docker=containers_reading(gone, plain)), make_roots(tmp_path))
    assert missing["container.runtime:legacy"].status is S.FAIL
    assert missing["container.runtime:legacy"].fix is not None
    assert "nvidia-ctk runtime configure" in (missing["container.runtime:legacy"].fix or "")
    assert "container.runtime:plain" not in missing
    present = run(
        inputs(docker=containers_reading(ok, engine_info=engine(runtimes=WITH_NVIDIA))),
        make_roots(tmp_path),
    )
    assert present["container.runtime:fine"].status is S.PASS


# --- engines.sources: the kubelet's pod-resources answer --------------------------------------


def _sources_check(tmp_path: Path, kubelet: SourceStatus | None) -> HealthCheck:
    containerd = EngineInfo(cgroup_driver="cgroupfs", product="containerd", pod_resources=kubelet)
    base = inputs()
    with_sources = dataclasses.replace(
        base,
        container_sources={"containerd": SourceStatus("containerd", ok=True)},
        engines={"containerd": containerd},
    )
    return run(with_sources, make_roots(tmp_path))["engines.sources"]


def test_a_kubelet_that_answers_is_a_detail_of_its_engine(tmp_path: Path) -> None:
    check = _sources_check(tmp_path, SourceStatus("kubelet", ok=True))
    assert check.status is S.PASS
    assert "containerd: kubelet pod-resources (GPU allocations): answers" in check.details
    assert _sources_check(tmp_path, None).details == ("containerd (containerd): answers",)


@pytest.mark.parametrize(
    ("error", "kind", "fix_part"),
    [
        ("/sock: grpcio is not installed", "missing_dependency", "gputui[kubernetes]"),
        ("/sock: no answer within 1 s", "timeout", "GPUTUI_POD_RESOURCES=off"),
    ],
)
def test_a_kubelet_not_read_warns_with_how_to_fix_it(
    tmp_path: Path, error: str, kind: str, fix_part: str
) -> None:
    from gputui.collect.kubelet.pod_resources import PodResourcesClient

    status = PodResourcesClient("/sock")._status(False, error.partition(": ")[2], kind)
    check = _sources_check(tmp_path, status)
    assert check.status is S.WARN
    assert check.summary == f"containerd: the kubelet's GPU allocations are not read: {error}"
    assert fix_part in (check.fix or "")
