"""A podman-flavoured engine that is slow, endless or malformed where only podman is asked.

podman's own inspect (``/libpod/containers/{id}/json``) is the one request a podman source
makes beyond Docker's: whatever answers there, the read keeps its deadline and the container
stays listed from the compatible inspect. The served engine is tests/support/fake_engine.py.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gputui.collect.docker.source import DockerSource
from tests.support.fake_engine import (
    GOOD_ID,
    INFO,
    Behaviour,
    FakeEngine,
    container,
    deep_json,
    held_open,
    json_reply,
    oversize,
    trickle,
)

PODMAN_VERSION = {
    "Version": "4.3.1",
    "ApiVersion": "1.41",
    "Components": [{"Name": "Podman Engine", "Version": "4.3.1"}],
}
RUNNING = container(
    name="/trainer",
    State={"Status": "running", "Pid": 0},
    HostConfig={"Runtime": "oci"},
)
LISTED = [{"Id": GOOD_ID, "Names": ["/trainer"], "State": "running"}]


@pytest.fixture
def sock_path() -> Iterator[str]:
    short = Path("/tmp") / f"gputui-podman-{os.getpid()}-{time.monotonic_ns()}.sock"
    yield str(short)
    short.unlink(missing_ok=True)


POD_ID = "b" * 64


def _routes(libpod: Behaviour, pod: Behaviour | None = None) -> dict[str, Any]:
    return {
        "/v4.0.0/libpod/pods/": pod or json_reply({"Name": "trainers"}),
        "/version": json_reply(PODMAN_VERSION),
        "/info": json_reply({**INFO, "Runtimes": {"crun": {}, "runc": {}}}),
        "/events": held_open,
        "/containers/json": json_reply(LISTED),
        f"/containers/{GOOD_ID}/json": json_reply(RUNNING),
        "/v4.0.0/libpod/containers/": libpod,
    }


def test_podman_facts_from_its_own_inspect(sock_path: str) -> None:
    libpod = {"OCIRuntime": "crun", "Config": {"CreateCommand": ["podman", "run",
              "--device", "nvidia.com/gpu=0", "img"]}}  # fmt: skip
    with FakeEngine(sock_path, _routes(json_reply(libpod))) as engine:
        source = DockerSource(engine.url, timeout=3.0, name="podman", product="podman")
        reading = source.read()
        source.close()
    assert reading.status.ok and reading.status.name == "podman"
    assert reading.engine is not None and reading.engine.product == "podman"
    (info,) = reading.containers
    assert (info.name, info.runtime, info.gpu_request, info.gpu_request_via) == (
        "trainer", "crun", ("0",), "cdi"
    )  # fmt: skip
    assert f"GET /v4.0.0/libpod/containers/{GOOD_ID}/json" in engine.requests


@pytest.mark.parametrize(
    "pod",
    [trickle(2.0), oversize, deep_json, json_reply([1]), json_reply({"Name": 7}), None],
    ids=["trickle", "oversize", "deep", "list", "wrong-type", "named"],
)
def test_a_podman_pods_name_and_a_hostile_pod_reply(sock_path: str, pod: Behaviour | None) -> None:
    libpod = json_reply({"OCIRuntime": "runc", "Pod": POD_ID})
    with FakeEngine(sock_path, _routes(libpod, pod)) as engine:
        source = DockerSource(engine.url, timeout=2.0, name="podman", product="podman")
        started = time.monotonic()
        reading = source.read()
        elapsed = time.monotonic() - started
        source.close()
    assert elapsed < 4.0 and reading.status.ok, (elapsed, reading.status)
    (info,) = reading.containers
    assert info.name == "trainer"
    assert info.k8s_pod == ("trainers" if pod is None else None)


@pytest.mark.parametrize(
    "libpod",
    [trickle(2.0), oversize, deep_json, json_reply([1, 2]), json_reply("x"), held_open],
    ids=["trickle", "oversize", "deep", "list", "string", "held-open"],
)
def test_a_hostile_libpod_inspect_costs_the_deadline_and_keeps_the_container(
    sock_path: str, libpod: Behaviour
) -> None:
    with FakeEngine(sock_path, _routes(libpod)) as engine:
        source = DockerSource(engine.url, timeout=2.0, name="podman", product="podman")
        started = time.monotonic()
        reading = source.read()
        elapsed = time.monotonic() - started
        source.close()
    assert elapsed < 4.0, elapsed
    assert reading.status.ok, reading.status
    (info,) = reading.containers
    # The compatible inspect's facts stand; podman's "oci" is the engine's default runtime.
    assert info.name == "trainer" and info.runtime == "runc" and info.gpu_request is None


def test_a_podman_socket_that_is_gone_speaks_podman(tmp_path: Path) -> None:
    source = DockerSource(f"unix://{tmp_path}/podman.sock", name="podman-alice", product="podman")
    status = source.read().status
    source.close()
    assert status.name == "podman-alice" and status.kind == "not_found"
    assert "podman" in (status.error or "") and "Docker" not in (status.error or "")
    assert "podman.socket" in (status.fix or "") and "docker" not in (status.fix or "").lower()


def test_a_stuck_podman_service_delays_neither_docker_nor_the_gpu_data(sock_path: str) -> None:
    from gputui.collect.collector import Collector
    from gputui.collect.linux.proc_reader import ProcSource
    from gputui.collect.standins.scenario import ScenarioSource
    from tests.support.fake_engine import VERSION

    scenario = {"gpus": [{"index": 0, "name": "NVIDIA H200", "processes": []}]}
    docker_sock = sock_path + ".docker"
    docker_routes = {
        "/version": json_reply(VERSION),
        "/info": json_reply(INFO),
        "/events": held_open,
        "/containers/json": json_reply(LISTED),
        f"/containers/{GOOD_ID}/json": json_reply(RUNNING),
    }
    stuck = {**_routes(json_reply({})), "/version": trickle(2.0)}
    try:
        with (
            FakeEngine(sock_path, stuck) as podman_engine,
            FakeEngine(docker_sock, docker_routes) as docker_engine,
        ):
            podman = DockerSource(podman_engine.url, timeout=30.0, name="podman", product="podman")
            docker = DockerSource(docker_engine.url, timeout=5.0)
            collector = Collector(
                ScenarioSource(scenario), ProcSource(), [docker, podman], docker_wait=1.0
            )
            try:
                for _ in range(2):
                    started = time.monotonic()
                    snap = collector.collect()
                    assert time.monotonic() - started < 1.8  # one wait, not one per source
                    assert [g.index for g in snap.gpus] == [0]
                    assert snap.sources["docker"].ok
                    assert [c.info.name for c in snap.containers] == ["trainer"]
                    assert snap.sources["podman"].kind == "slow"
                    assert "podman" in (snap.sources["podman"].error or "")
            finally:
                collector.close()
    finally:
        Path(docker_sock).unlink(missing_ok=True)
