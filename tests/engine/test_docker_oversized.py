"""Over a size cap is visible, never invisible: a container whose engine description is huge.

Docker accepts label sets of megabytes (Kubernetes annotations, generated labels), so any user
who can start a container can make its inspect reply larger than the 2 MiB gputui reads. Such a
container must stay on screen as a named stub, say what is unknown, keep its processes and not
be asked for again on every refresh. Real engine, real containers; NVML from a scenario file.
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

from gputui.collect.docker.engine_api import MAX_EVENT_BYTES, MAX_INSPECT_BYTES
from gputui.collect.docker.source import (
    OVERSIZED_INSPECT,
    OVERSIZED_MIN_BACKOFF_S,
    DockerSource,
)
from gputui.model.containers import ContainerInfo, ContainerReading

pytestmark = pytest.mark.docker

TEST_LABEL = "gputui-test"
MIB = 1024 * 1024


def _labels(total_bytes: int) -> dict[str, str]:
    """Legal labels adding up to more than ``total_bytes`` (1,000-character values)."""
    count = total_bytes // 1000 + 50
    return {f"io.example.annotation/{i:05d}": "a" * 1000 for i in range(count)}


def _find(reading: ContainerReading, container_id: str) -> ContainerInfo | None:
    return next((c for c in reading.containers if c.id == container_id), None)


class _Clock:
    """A hand-moved monotonic clock for the source's back-offs."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def huge(run_container: Callable[..., Any], free_run_id: str) -> Any:
    labels = {"com.docker.compose.project": "annotated", "com.docker.compose.service": "worker"}
    labels.update(_labels(MAX_INSPECT_BYTES))
    return run_container(["sleep", "300"], labels=labels, name=f"gputui-huge-{free_run_id}")


def test_the_engine_describes_it_in_more_than_the_cap(huge: Any) -> None:
    # The premise, from the real engine: its inspect reply is over what gputui reads.
    out = subprocess.run(
        ["docker", "inspect", huge.id], capture_output=True, timeout=60, check=True
    ).stdout
    assert len(out) > MAX_INSPECT_BYTES


@pytest.fixture
def clocked(docker_engine: Any, free_run_id: str) -> Iterator[tuple[DockerSource, _Clock]]:
    clock = _Clock()
    src = DockerSource(label=f"{TEST_LABEL}={free_run_id}", clock=clock, timeout=20.0)
    yield src, clock
    src.close()


def test_oversized_container_is_a_named_stub_with_a_status(
    huge: Any, free_run_id: str, clocked: tuple[DockerSource, _Clock]
) -> None:
    source, _ = clocked
    reading = source.read()
    info = _find(reading, huge.id)
    assert info is not None, "the container vanished from the monitor"
    assert info.name == f"gputui-huge-{free_run_id}"
    assert info.image == "gputui-test:latest"
    assert info.status == "running"
    assert (info.compose_project, info.compose_service) == ("annotated", "worker")
    assert info.inspect_problem == OVERSIZED_INSPECT
    assert "2 MiB" in OVERSIZED_INSPECT and "GPU request unknown" in OVERSIZED_INSPECT
    # The source answered, but says that not everything could be read, and names whom.
    assert reading.status.ok
    assert reading.status.kind == "partial"
    assert reading.status.error and info.name in reading.status.error


def test_oversized_container_is_not_asked_for_every_refresh(
    huge: Any, clocked: tuple[DockerSource, _Clock]
) -> None:
    source, clock = clocked
    assert _find(source.read(), huge.id) is not None
    source.read()  # the events stream may still resync once
    calls = source.api_calls
    for _ in range(3):
        clock.now += 1.0
        assert _find(source.read(), huge.id) is not None
    assert source.api_calls == calls  # no inspect per refresh: the stub waits its back-off
    clock.now += OVERSIZED_MIN_BACKOFF_S + 1
    info = _find(source.read(), huge.id)
    assert source.api_calls > calls  # tried again once the back-off passed
    assert info is not None and info.inspect_problem == OVERSIZED_INSPECT
    calls = source.api_calls
    clock.now += OVERSIZED_MIN_BACKOFF_S + 1  # the back-off doubled: not due yet
    source.read()
    assert source.api_calls == calls


def test_event_over_the_cap_still_shows_the_change(
    run_container: Callable[..., Any], free_run_id: str, clocked: tuple[DockerSource, _Clock]
) -> None:
    # Events carry the container's labels: over MAX_EVENT_BYTES, the stream is dropped and the
    # next read lists again; the change must still show.
    source, _ = clocked
    labels = _labels(MAX_EVENT_BYTES)
    ct = run_container(["sleep", "300"], labels=labels, name=f"gputui-loud-{free_run_id}")
    info = _find(source.read(), ct.id)
    assert info is not None and info.status == "running" and info.inspect_problem is None
    ct.kill()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        info = _find(source.read(), ct.id)
        if info is not None and info.status == "exited":
            break
        time.sleep(0.1)
    assert info is not None and info.status == "exited"


def _gputui(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ},
    )


def test_once_keeps_its_processes_and_says_what_is_unknown(
    huge: Any, free_run_id: str, tmp_path: Path
) -> None:
    top = huge.top()
    pid = int(top["Processes"][0][top["Titles"].index("PID")])
    scenario = {
        "nvml": "ok",
        "gpus": [
            {
                "index": 0,
                "name": "NVIDIA H200",
                "memory_total_mib": 143771,
                "memory_used_mib": 1000,
                "processes": [{"pid": pid, "used_memory_mib": 1000}],
            }
        ],
    }
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(scenario))
    name = f"gputui-huge-{free_run_id}"

    result = _gputui("--scenario", str(path), "--once", "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    (proc,) = doc["processes"]
    assert proc["container"] is not None and proc["container"]["name"] == name
    container = next(c for c in doc["containers"] if c["name"] == name)
    assert container["inspect_problem"] == OVERSIZED_INSPECT
    docker = doc["sources"]["docker"]
    assert docker["ok"] is True and docker["kind"] == "partial" and name in docker["error"]

    text = _gputui("--scenario", str(path), "--once")
    assert text.returncode == 0, text.stderr
    assert "Docker: ok; " in text.stdout and OVERSIZED_INSPECT in text.stdout
    assert "(inspect over cap)" in text.stdout
