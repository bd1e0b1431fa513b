"""podman's facts its compatible API hides, and containerd's bundles read from real files."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from gputui.collect.containerd.bundles import (
    MAX_CONFIG_BYTES,
    ContainerdBundles,
    parse_bundle,
)
from gputui.collect.docker import parse as dp
from gputui.collect.engines import CONTAINERD_TASKS
from gputui.model.containers import ContainerInfo

PODMAN_VERSION = {
    "Version": "4.3.1",
    "ApiVersion": "1.41",
    "Components": [{"Name": "Podman Engine", "Version": "4.3.1"}, {"Name": "Conmon"}],
}


def test_podman_is_told_from_its_version() -> None:
    assert dp.parse_engine({}, PODMAN_VERSION, None, None, "1.41").product == "podman"
    docker = {"Version": "27", "Components": [{"Name": "Engine"}, {"Name": "containerd"}]}
    assert dp.parse_engine({}, docker, None, None, "1.41").product == "docker"
    for odd in ({"Components": "Podman"}, {"Components": [1, None, ["Podman"]]}, {}):
        assert dp.parse_engine({}, odd, None, None, None).product == "docker"


@pytest.mark.parametrize(
    ("command", "wanted"),
    [
        (["podman", "run", "--device", "nvidia.com/gpu=0", "img"], ("0",)),
        (["podman", "run", "--device=nvidia.com/gpu=all", "img"], "all"),
        (
            ["podman", "run", "--gpus", "nvidia.com/gpu=1,nvidia.com/gpu=GPU-ab", "i"],
            ("1", "GPU-ab"),
        ),
        (["podman", "run", "--device", "/dev/fuse", "img", "--device"], None),
        (["podman", "run", "img", "sh", "-c", "--device nvidia.com/gpu=0"], None),
        ("--device nvidia.com/gpu=0", None),
        ([1, None, {"x": 1}], None),
        (["--device"] * 10_000, None),
    ],
)
def test_a_cdi_request_is_read_from_the_create_command(command: Any, wanted: Any) -> None:
    assert dp.cdi_request_from_command(command) == wanted


def test_podman_facts_name_the_runtime_and_the_cdi_request() -> None:
    info = ContainerInfo("a" * 64, "trainer", "img", "running", runtime="oci")
    libpod = {
        "OCIRuntime": "crun",
        "Config": {"CreateCommand": ["podman", "run", "--device", "nvidia.com/gpu=0", "img"]},
    }
    got = dp.podman_facts(info, libpod, "runc")
    assert (got.runtime, got.gpu_request, got.gpu_request_via) == ("crun", ("0",), "cdi")
    # podman's own inspect unread (slow, oversized): "oci" is the engine's default, never kept.
    assert dp.podman_facts(info, {}, "runc").runtime == "runc"
    assert dp.podman_facts(info, {}, None).runtime is None
    # A --gpus request (device_requests) stands.
    asked = ContainerInfo("a" * 64, "t", "i", "running", gpu_request="all",
                          gpu_request_via="device_requests")  # fmt: skip
    assert dp.podman_facts(asked, libpod, "runc").gpu_request == "all"


def _bundle(root: Path, namespace: str, task_id: str, spec: Any, pid: int | None) -> Path:
    folder = root / CONTAINERD_TASKS / namespace / task_id
    folder.mkdir(parents=True)
    data = spec if isinstance(spec, bytes) else json.dumps(spec).encode()
    (folder / "config.json").write_bytes(data)
    if pid is not None:
        (folder / "init.pid").write_text(str(pid))
    return folder


CRI_SPEC = {
    "process": {"env": ["PATH=/bin", "SECRET=hunter2", "NVIDIA_VISIBLE_DEVICES=GPU-1234"]},
    "linux": {"cgroupsPath": "/kubepods/burstable/podx/c1"},
    "annotations": {
        "io.kubernetes.cri.container-type": "container",
        "io.kubernetes.cri.container-name": "trainer",
        "io.kubernetes.cri.sandbox-name": "train-7d9c",
        "io.kubernetes.cri.sandbox-namespace": "ml",
        "io.kubernetes.cri.image-name": "nvcr.io/nvidia/pytorch:24.01",
    },
}


def test_cri_names_pods_and_gpu_requests_come_from_the_bundle() -> None:
    info = parse_bundle("k8s.io", "c" * 64, CRI_SPEC)
    assert (info.name, info.k8s_pod, info.k8s_namespace) == ("trainer", "train-7d9c", "ml")
    assert info.image == "nvcr.io/nvidia/pytorch:24.01"
    assert (info.gpu_request, info.gpu_request_via) == (("GPU-1234",), "env")
    assert "hunter2" not in repr(info)
    sandbox = parse_bundle("k8s.io", "s" * 64, {"annotations": {
        "io.kubernetes.cri.container-type": "sandbox",
        "io.kubernetes.cri.sandbox-name": "train-7d9c",
        "io.kubernetes.cri.sandbox-namespace": "ml"}})  # fmt: skip
    assert (sandbox.name, sandbox.k8s_pod) == ("POD", "train-7d9c")
    assert parse_bundle("default", "my-job", {}).name == "my-job"
    odd: Any
    for odd in (
        [],
        {"annotations": []},
        {"process": {"env": "x"}},
        {"annotations": {"io.kubernetes.cri.sandbox-name": 5}},
    ):
        assert parse_bundle("ns", "id", odd).name == "id"


def test_the_device_plugins_volume_mounts_name_the_gpus() -> None:
    """``NVIDIA_VISIBLE_DEVICES`` is a directory; each GPU is a mount below it, by id."""
    spec = {
        "process": {"env": ["NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices"]},
        "mounts": [
            {"destination": "/proc"},
            {"destination": "/var/run/nvidia-container-devices/GPU-a", "source": "/dev/null"},
            {"destination": "/var/run/nvidia-container-devices/GPU-b"},
            {"destination": "/var/run/nvidia-container-devices/GPU-b"},
            {"destination": "/var/run/nvidia-container-devices/x/y"},
            {"destination": 7},
        ],
    }
    info = parse_bundle("k8s.io", "c" * 64, spec)
    assert (info.gpu_request, info.gpu_request_via) == (("GPU-a", "GPU-b"), "env")
    spec["mounts"] = []
    assert parse_bundle("k8s.io", "c" * 64, spec).gpu_request is None


def test_the_bundles_source_lists_running_tasks_and_survives_hostile_files(
    tmp_path: Path,
) -> None:
    state = tmp_path / "containerd"
    _bundle(state, "k8s.io", "c" * 64, CRI_SPEC, os.getpid())
    _bundle(state, "tests", "named-job", {}, os.getpid())
    _bundle(state, "tests", "exited-job", {}, 2**22)  # its PID is gone
    _bundle(state, "moby", "d" * 64, {}, os.getpid())  # Docker's own: Docker names them
    _bundle(state, "tests", "huge", b" " * (MAX_CONFIG_BYTES + 10), os.getpid())
    _bundle(state, "tests", "deep", b"[" * 100_000 + b"]" * 100_000, os.getpid())
    _bundle(state, "tests", "junk", b"\xff{not json", os.getpid())
    fifo = _bundle(state, "tests", "fifo", {}, os.getpid())
    (fifo / "config.json").unlink()
    os.mkfifo(fifo / "config.json")  # a FIFO must not block the read
    (state / CONTAINERD_TASKS / "tests" / "stray-file").write_text("")
    source = ContainerdBundles(state, name="containerd", cgroup_root=tmp_path / "no-cgroups")
    reading = source.read()
    by_id = {c.id: c for c in reading.containers}
    assert "d" * 64 not in by_id
    assert by_id["c" * 64].name == "trainer" and by_id["c" * 64].pid == os.getpid()
    assert by_id["named-job"].status == "running"
    assert by_id["exited-job"].status == "exited" and by_id["exited-job"].pid is None
    for bad in ("huge", "deep", "junk", "fifo"):
        assert by_id[bad].inspect_problem, bad
        assert by_id[bad].name == bad
    assert reading.status.ok and reading.status.kind == "partial"
    assert "\n" not in (reading.status.error or "")
    assert source.capabilities().exec is False
    # Unchanged bundles are not parsed again; a removed task is gone from the next read.
    (state / CONTAINERD_TASKS / "tests" / "named-job" / "config.json").unlink()
    assert "named-job" not in {c.id for c in source.read().containers}
    source.close()


def test_no_containerd_state_is_a_status_naming_the_place(tmp_path: Path) -> None:
    reading = ContainerdBundles(tmp_path / "none", name="k3s").read()
    assert reading.status.ok is False and reading.status.name == "k3s"
    assert reading.status.kind == "not_found" and "--engine containerd=" in (
        reading.status.fix or ""
    )
