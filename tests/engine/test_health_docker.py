"""Health checks fed by ``DockerSource().read()`` against the real engine (started by .ci/run).

The engine CI runs has only ``runc`` (no nvidia runtime, no toolkit, no GPU), which is exactly
the setup where GPU containers are misconfigured: the checks must say so.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gputui.collect.docker.source import DockerSource
from gputui.model.containers import ContainerReading
from gputui.model.status import HealthCheck, HealthStatus
from tests.support.health import gpu_reading, inputs, make_roots, run

pytestmark = pytest.mark.docker

S = HealthStatus


@pytest.fixture
def source(docker_engine: Any) -> Iterator[DockerSource]:
    src = DockerSource()
    yield src
    src.close()


def read_until(
    source: DockerSource, ready: Callable[[ContainerReading], bool], timeout: float = 10.0
) -> ContainerReading:
    """Read until ``ready`` holds (the source learns of new containers through events)."""
    deadline = time.monotonic() + timeout
    while True:
        reading = source.read()
        if ready(reading) or time.monotonic() > deadline:
            return reading
        time.sleep(0.05)


def has(*names: str) -> Callable[[ContainerReading], bool]:
    return lambda reading: set(names) <= {c.name for c in reading.containers}


def health(reading: ContainerReading, tmp_path: Path) -> dict[str, HealthCheck]:
    return run(inputs(docker=reading), make_roots(tmp_path))


def test_engine_passes_and_runtime_verdict_matches_the_engine(
    source: DockerSource, tmp_path: Path
) -> None:
    reading = source.read()
    assert reading.status.ok, reading.status
    assert reading.engine is not None
    checks = health(reading, tmp_path)
    engine = checks["docker.engine"]
    assert engine.status is S.PASS
    assert reading.engine.server_version is not None
    assert reading.engine.server_version in engine.summary
    runtime = checks["docker.nvidia_runtime"]
    if "nvidia" in reading.engine.runtimes:  # a developer machine with the toolkit configured
        assert runtime.status is S.PASS
    else:  # CI: runc only
        assert runtime.status is S.WARN
        assert runtime.fix is not None
        assert "sudo nvidia-ctk runtime configure --runtime=docker" in runtime.fix
        assert "sudo systemctl restart docker" in runtime.fix
    assert checks["cgroup.driver"].summary.endswith(f"driver {reading.engine.cgroup_driver}")


def test_env_only_gpu_request_under_runc_is_not_injected(
    source: DockerSource, run_container: Any, free_run_id: str, tmp_path: Path
) -> None:
    engine = source.read().engine
    assert engine is not None
    if engine.default_runtime == "nvidia":
        pytest.skip("the engine's default runtime is nvidia: env-only requests are injected here")
    env_only = f"gputui-health-env-{free_run_id}"
    no_utility = f"gputui-health-caps-{free_run_id}"
    run_container(["sleep", "600"], name=env_only, environment={"NVIDIA_VISIBLE_DEVICES": "all"})
    run_container(
        ["sleep", "600"],
        name=no_utility,
        environment={"NVIDIA_VISIBLE_DEVICES": "0", "NVIDIA_DRIVER_CAPABILITIES": "compute"},
    )
    reading = read_until(source, has(env_only, no_utility))
    checks = health(reading, tmp_path)

    visible = checks[f"container.gpu_visible:{env_only}"]
    assert visible.status is S.FAIL
    assert visible.summary == "GPUs requested (NVIDIA_VISIBLE_DEVICES) but not injected"
    assert visible.fix is not None
    assert "--gpus all" in visible.fix
    assert checks[f"container.utility_cap:{env_only}"].status is S.PASS  # default capabilities

    utility = checks[f"container.utility_cap:{no_utility}"]
    assert utility.status is S.WARN
    assert utility.fix is not None
    assert "NVIDIA_DRIVER_CAPABILITIES=compute,utility" in utility.fix
    assert "NVIDIA_DRIVER_CAPABILITIES=compute" in utility.details


def test_image_cuda_requirement_from_a_real_container(
    source: DockerSource, run_container: Any, free_run_id: str, tmp_path: Path
) -> None:
    # Created, never started: the CUDA check still judges it (that is why such a container
    # would not start under the toolkit), the running-only checks leave it alone.
    name = f"gputui-health-cuda-{free_run_id}"
    run_container(
        ["true"],
        start=False,
        name=name,
        environment={
            "NVIDIA_VISIBLE_DEVICES": "all",
            "CUDA_VERSION": "13.1.0",
            "NVIDIA_REQUIRE_CUDA": "cuda>=13.1 brand=tesla,driver>=535,driver<536",
        },
    )
    reading = read_until(source, has(name))
    checks = run(
        inputs(gpu_reading(cuda="13.0", driver="580.159.04"), reading), make_roots(tmp_path)
    )
    cuda = checks[f"container.cuda:{name}"]
    assert cuda.status is S.FAIL
    assert cuda.summary == "Image needs CUDA 13.1, driver supports only 13.0"
    assert f"container.gpu_visible:{name}" not in checks
