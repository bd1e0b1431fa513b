"""Builders shared by the health-check tests (no tests here).

Every builder returns a healthy default that the tests then break in one place, so each test shows
exactly which fact turns a check from pass to warn/fail.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from gputui.collect.sources import HealthInputs
from gputui.health.context import HealthRoots
from gputui.health.runner import run_checks
from gputui.model.containers import ContainerInfo, ContainerReading, EngineInfo
from gputui.model.gpu import GpuProcessSample, GpuReading, GpuSample, XidEvent
from gputui.model.processes import GpuProcess, ProcessInfo, Visibility
from gputui.model.status import HealthCheck, SourceStatus

DRIVER = "580.159.04"
CTK_OUTPUT = (
    "NVIDIA Container Toolkit CLI version 1.20.0\n"
    "commit: d34b3040b4f5f1c9b6a3e8d8c1a8b1f0e8e9b2c1\n"
)
CLI_OUTPUT = "cli-version: 1.20.0\nlib-version: 1.20.0\nbuild date: 2025-10-01T00:00+00:00\n"


def gpu(index: int = 0, **changes: Any) -> GpuSample:
    """A healthy H200-like GPU sample."""
    sample = GpuSample(
        index=index,
        uuid=f"GPU-{index:08d}",
        name="NVIDIA H200",
        temperature_c=40,
        power_w=120.0,
        power_limit_w=700.0,
        throttle_reasons=0,
        ecc_mode_current=True,
        ecc_mode_pending=True,
        ecc_uncorrected_volatile=0,
        remapped_rows_pending=False,
        remapped_rows_failure=False,
        persistence_mode=True,
        mig_mode_current=False,
        mig_mode_pending=False,
    )
    return replace(sample, **changes)


def gpu_reading(
    *gpus: GpuSample,
    ok: bool = True,
    kind: str | None = None,
    error: str | None = None,
    fix: str | None = None,
    driver: str | None = DRIVER,
    cuda: str | None = "13.0",
    xids: Sequence[XidEvent] = (),
    binding: Sequence[str] = (),
) -> GpuReading:
    """An NVML reading: one healthy GPU unless GPUs are given; a failed init when ``ok=False``."""
    if not ok:
        return GpuReading(status=SourceStatus("nvml", ok=False, error=error, kind=kind, fix=fix))
    return GpuReading(
        status=SourceStatus("nvml", ok=True),
        driver_version=driver,
        cuda_driver_version=cuda,
        nvml_version=f"13.{driver}" if driver else None,
        gpus=gpus or (gpu(0),),
        xid_events=tuple(xids),
        binding_problems=tuple(binding),
    )


def engine(**changes: Any) -> EngineInfo:
    """A Docker 28 engine on cgroup v2 with the cgroupfs driver and no nvidia runtime."""
    info = EngineInfo(
        endpoint="unix:///var/run/docker.sock",
        context="default",
        server_version="28.2.2",
        api_version="1.50",
        runtimes=("io.containerd.runc.v2", "runc"),
        default_runtime="runc",
        cgroup_driver="cgroupfs",
        cgroup_version="2",
        cdi_spec_dirs=("/etc/cdi", "/var/run/cdi"),
    )
    return replace(info, **changes)


def cid(name: str) -> str:
    """A stable 64-hex container id for a name."""
    return hashlib.sha256(name.encode()).hexdigest()


def container(name: str = "trainer", **changes: Any) -> ContainerInfo:
    """A running container with no GPU request."""
    info = ContainerInfo(
        id=cid(name), name=name, image="busybox:latest", status="running", pid=4242
    )
    return replace(info, **changes)


def containers_reading(
    *containers: ContainerInfo,
    ok: bool = True,
    engine_info: EngineInfo | None = None,
    kind: str | None = None,
    error: str | None = None,
    fix: str | None = None,
) -> ContainerReading:
    """A Docker reading; unreachable (no engine facts) when ``ok=False``."""
    if not ok:
        return ContainerReading(
            status=SourceStatus("docker", ok=False, error=error, kind=kind, fix=fix)
        )
    return ContainerReading(
        status=SourceStatus("docker", ok=True),
        containers=containers,
        engine=engine_info if engine_info is not None else engine(),
    )


def gpu_process(pid: int, gpu_index: int = 0, container_id: str | None = None) -> GpuProcess:
    """A GPU process (optionally inside a container)."""
    return GpuProcess(
        sample=GpuProcessSample(pid=pid, gpu_index=gpu_index, used_memory_bytes=1 << 30),
        info=ProcessInfo(pid=pid, command="python train.py", container_id=container_id),
        container_id=container_id,
    )


HOST_VISIBILITY = Visibility(host_pid_namespace=True, private_cgroup_namespace=False)


def inputs(
    gpu_source: GpuReading | None = None,
    docker: ContainerReading | None = None,
    processes: Sequence[GpuProcess] = (),
    visibility: Visibility = HOST_VISIBILITY,
) -> HealthInputs:
    """Health inputs with healthy defaults."""
    return HealthInputs(
        gpu=gpu_source if gpu_source is not None else gpu_reading(),
        containers=docker if docker is not None else containers_reading(),
        processes=tuple(processes),
        visibility=visibility,
    )


def make_roots(tmp_path: Path) -> HealthRoots:
    """Empty prepared directories for /proc, /sys, /etc/docker, the CDI dirs, /dev and podman's
    hooks.d; ``tmp_path`` is the root of the paths a CDI spec, hook or containers.conf names."""
    for sub in (
        "proc", "sys/fs/cgroup", "etc/docker", "etc/cdi", "run/cdi", "dev/char",
        "etc/containers/containers.conf.d", "usr/share/containers/oci/hooks.d",
        "etc/containers/oci/hooks.d",
    ):  # fmt: skip
        (tmp_path / sub).mkdir(parents=True, exist_ok=True)
    (tmp_path / "sys/fs/cgroup/cgroup.controllers").write_text("cpu memory pids\n")
    return HealthRoots(
        proc=str(tmp_path / "proc"),
        sys=str(tmp_path / "sys"),
        daemon_json=str(tmp_path / "etc/docker/daemon.json"),
        cdi_dirs=(str(tmp_path / "etc/cdi"), str(tmp_path / "run/cdi")),
        dev=str(tmp_path / "dev"),
        containers_conf=(
            str(tmp_path / "usr/share/containers/containers.conf"),
            str(tmp_path / "etc/containers/containers.conf"),
            str(tmp_path / "etc/containers/containers.conf.d"),
        ),
        hooks_dirs=(
            str(tmp_path / "usr/share/containers/oci/hooks.d"),
            str(tmp_path / "etc/containers/oci/hooks.d"),
        ),
        host=str(tmp_path),
    )


def fake_which(tools: Mapping[str, str]) -> Callable[[str], str | None]:
    """A ``which`` that knows only ``tools`` (name → output of ``--version``)."""
    return lambda name: f"/usr/bin/{name}" if name in tools else None


def fake_run_version(tools: Mapping[str, str | None]) -> Callable[[Sequence[str]], str | None]:
    """A ``run_version`` that answers ``--version`` for the tools given (None = it failed)."""

    def run(argv: Sequence[str]) -> str | None:
        assert list(argv[1:]) == ["--version"], argv
        return tools.get(Path(argv[0]).name)

    return run


def official_bindings(name: str) -> str | None:
    """Only nvidia-ml-py installed."""
    return {"nvidia-ml-py": "13.615.71"}.get(name)


def run(
    health_inputs: HealthInputs,
    roots: HealthRoots,
    tools: Mapping[str, str | None] | None = None,
    dists: Callable[[str], str | None] = official_bindings,
) -> dict[str, HealthCheck]:
    """Run every check; results by id (ids are unique within one pass)."""
    tool_map: Mapping[str, str | None] = tools if tools is not None else {"nvidia-ctk": CTK_OUTPUT}
    checks = run_checks(
        health_inputs,
        roots=roots,
        which=fake_which(dict.fromkeys(tool_map, "")),
        run_version=fake_run_version(tool_map),
        dist_version=dists,
    )
    by_id = {c.id: c for c in checks}
    assert len(by_id) == len(checks), "check ids must be unique within a pass"
    return by_id


# --- podman ----------------------------------------------------------------------------------

LIB = "/usr/lib/x86_64-linux-gnu"
HOOK_FILE = "usr/share/containers/oci/hooks.d/oci-nvidia-hook.json"


def podman_inputs(
    *containers: ContainerInfo, gpus: int = 2, docker_too: bool = False
) -> HealthInputs:
    """What a host with a rootful podman engine (and optionally Docker) hands the checks."""
    podman = engine(
        endpoint="unix:///run/podman/podman.sock",
        server_version="4.3.1",
        runtimes=("crun", "runc"),
        cdi_spec_dirs=None,
        product="podman",
    )
    sources = {"podman": SourceStatus("podman", ok=True)}
    engines = {"podman": podman}
    if docker_too:
        sources = {"docker": SourceStatus("docker", ok=True), **sources}
        engines = {"docker": engine(), **engines}
        reading = containers_reading(*containers)
    else:
        reading = ContainerReading(SourceStatus("podman", ok=True), tuple(containers), podman)
    base = inputs(gpu_reading(*(gpu(i) for i in range(gpus))), reading)
    return HealthInputs(
        gpu=base.gpu,
        containers=reading,
        processes=(),
        visibility=base.visibility,
        container_sources=sources,
        engines=engines,
        owners={c.id: "podman" for c in containers},
    )


def spec_yaml(gpus: int = 2, driver: str = DRIVER, *, uuids: bool = False) -> str:
    """A CDI spec in the shape ``nvidia-ctk cdi generate`` writes (YAML, index names)."""
    devices = "".join(
        f'- containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia{i}\n  name: "{i}"\n'
        + (
            f"- containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia{i}\n"
            f"  name: GPU-{i:08d}\n"
            if uuids
            else ""
        )
        for i in range(gpus)
    )
    every = "".join(f"    - path: /dev/nvidia{i}\n" for i in range(gpus))
    return (
        "---\n"
        "cdiVersion: 0.5.0\n"
        "containerEdits:\n"
        "  deviceNodes:\n"
        "  - path: /dev/nvidiactl\n"
        "  - path: /dev/nvidia-uvm\n"
        "  env:\n"
        "  - NVIDIA_VISIBLE_DEVICES=void\n"
        "  hooks:\n"
        "  - args:\n"
        "    - nvidia-cdi-hook\n"
        "    - create-symlinks\n"
        "    - --link\n"
        f"    - libcuda.so.1::{LIB}/libcuda.so\n"
        "    hookName: createContainer\n"
        "    path: /usr/bin/nvidia-cdi-hook\n"
        "  mounts:\n"
        f"  - containerPath: {LIB}/libcuda.so.{driver}\n"
        f"    hostPath: {LIB}/libcuda.so.{driver}\n"
        "    options:\n"
        "    - ro\n"
        "    - nosuid\n"
        "    - nodev\n"
        "    - bind\n"
        "devices:\n"
        f"{devices}"
        f"- containerEdits:\n    deviceNodes:\n{every}  name: all\n"
        "kind: nvidia.com/gpu\n"
    )


def host_files(root: Path, gpus: int = 2, driver: str = DRIVER) -> None:
    """The device nodes, library and hook program a spec names, as regular files under root."""
    for name in ("nvidiactl", "nvidia-uvm", *(f"nvidia{i}" for i in range(gpus))):
        (root / "dev" / name).write_text("")
    (root / LIB.lstrip("/")).mkdir(parents=True, exist_ok=True)
    (root / LIB.lstrip("/") / f"libcuda.so.{driver}").write_text("")
    (root / "usr/bin").mkdir(parents=True, exist_ok=True)
    (root / "usr/bin/nvidia-cdi-hook").write_text("")


def write_hook(root: Path, program: str = "/usr/bin/nvidia-container-toolkit") -> Path:
    hook = {
        "version": "1.0.0",
        "hook": {"path": program, "args": ["nvidia-container-toolkit", "prestart"]},
        "when": {"always": True, "commands": [".*"]},
        "stages": ["prestart"],
    }
    path = root / HOOK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(hook))
    return path
