"""Shared fixtures: a real Docker engine, a tiny offline test image, labelled test containers.

Docker tests never touch containers they did not create: every container started through
``run_container`` carries the label ``gputui-test=<run id>`` and only those are removed.
Without an engine the docker tests skip, except in CI (``CI`` set) or with
``GPUTUI_REQUIRE_DOCKER=1``, where they fail: a CI run must not pass by skipping them.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from tests.support.images import NoBusybox, ensure_busybox_image

#: Hypothesis's settings for every property test, registered and loaded once, here: this file is
#: imported before any test module, so each ``settings(...)`` / ``@settings(...)`` a test makes
#: inherits them. No deadline: on a loaded CI machine (parallel workers, a busy engine) one
#: example can take longer than Hypothesis's default 200 ms without anything being wrong, and
#: a deadline failure then is noise, not a finding.
HYPOTHESIS_PROFILE = "gputui"
settings.register_profile(HYPOTHESIS_PROFILE, deadline=None)
settings.load_profile(HYPOTHESIS_PROFILE)

TEST_IMAGE = "gputui-test:latest"
TEST_LABEL = "gputui-test"


def _docker_required() -> bool:
    return bool(os.environ.get("CI")) or os.environ.get("GPUTUI_REQUIRE_DOCKER") == "1"


def _no_docker(reason: str) -> None:
    if _docker_required():
        pytest.fail(f"Docker engine required (CI / GPUTUI_REQUIRE_DOCKER=1) but {reason}")
    pytest.skip(f"no Docker engine: {reason}")


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[Any]:
    """A connected ``docker.DockerClient``; skips (or fails in CI) when no engine answers."""
    try:
        import docker
    except ImportError as exc:  # pragma: no cover - docker is a hard dependency
        _no_docker(f"the docker SDK is not installed ({exc})")
    try:
        client = docker.from_env(timeout=10)
        client.ping()
    except Exception as exc:  # any failure means "no usable engine" here
        _no_docker(f"{type(exc).__name__}: {exc}")
    yield client
    client.close()


@pytest.fixture(scope="session")
def test_image(docker_engine: Any) -> str:
    """``gputui-test:latest``: busybox-static plus a fake ``/usr/bin/nvidia-smi`` (no registry).

    Needs a static busybox on this machine (Debian: ``apt-get install busybox-static``); built
    by :mod:`tests.support.images`, which the benchmarks share.
    """
    try:
        return ensure_busybox_image(docker_engine, TEST_IMAGE)
    except NoBusybox as exc:
        _no_docker(f"cannot build the test image: {exc}")
        raise AssertionError("unreachable") from exc


@pytest.fixture(scope="session")
def free_run_id() -> str:
    """A label value unique to this test session (for ``gputui-test=<run id>``)."""
    return f"{os.getpid()}-{uuid.uuid4().hex[:8]}"


#: Parallel test workers share one engine. A test whose containers ask for GPUs holds this lock
#: shared while they exist; a test whose answer depends on no other container reserving GPUs
#: (``sole_gpu_reservations``) holds it alone.
GPU_RESERVATIONS_LOCK = os.path.join(
    tempfile.gettempdir(), f"gputui-tests-gpu-reservations-{os.getuid()}.lock"
)

#: Seconds a test waits for that lock before failing.
GPU_RESERVATIONS_WAIT_S = 300.0


def _lock_gpu_reservations(mode: int) -> int:
    fd = os.open(GPU_RESERVATIONS_LOCK, os.O_CREAT | os.O_RDWR, 0o600)
    deadline = time.monotonic() + GPU_RESERVATIONS_WAIT_S
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                pytest.fail("other tests kept GPU-reserving containers for 300 s")
            time.sleep(0.05)


def _reserves_gpus(kwargs: dict[str, Any]) -> bool:
    if kwargs.get("device_requests"):
        return True
    environment = kwargs.get("environment") or {}
    if isinstance(environment, dict):
        return "NVIDIA_VISIBLE_DEVICES" in environment
    return any(str(e).startswith("NVIDIA_VISIBLE_DEVICES=") for e in environment)


@pytest.fixture
def sole_gpu_reservations(request: pytest.FixtureRequest) -> Iterator[None]:
    """While the test runs, no other test's container on the engine reserves GPUs.

    Request it before ``run_container`` (so the test's own containers are removed first).
    """
    fd = _lock_gpu_reservations(fcntl.LOCK_EX)
    request.node.gputui_sole_gpu_reservations = True
    try:
        yield
    finally:
        os.close(fd)


@pytest.fixture
def run_container(
    docker_engine: Any, test_image: str, free_run_id: str, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Any]]:
    """Factory: ``run_container(command=None, *, start=True, **create_kwargs) -> Container``.

    Containers are created from the test image with the session's label (extra labels merge in)
    and no network unless the test names one, and removed, forcefully, at the end of the test:
    only containers with this run's label.
    A container asking for GPUs takes :data:`GPU_RESERVATIONS_LOCK` shared until then.
    """
    held: list[int] = []

    def factory(command: Any = None, *, start: bool = True, **kwargs: Any) -> Any:
        sole = getattr(request.node, "gputui_sole_gpu_reservations", False)
        if not held and not sole and _reserves_gpus(kwargs):
            held.append(_lock_gpu_reservations(fcntl.LOCK_SH))
        labels = {**kwargs.pop("labels", {}), TEST_LABEL: free_run_id}
        kwargs.setdefault("image", test_image)
        # No network unless a test asks for one: the engine's default bridge is missing on some
        # machines, and no test needs one.
        kwargs.setdefault("network_mode", "none")
        container = docker_engine.containers.create(command=command, labels=labels, **kwargs)
        if start:
            container.start()
            container.reload()
        return container

    yield factory
    mine = docker_engine.containers.list(
        all=True, sparse=True, filters={"label": f"{TEST_LABEL}={free_run_id}"}
    )
    for container in mine:
        # already gone (a test removed it): nothing to do
        with contextlib.suppress(Exception):
            container.remove(force=True)
    for fd in held:
        os.close(fd)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses the engine with ``docker`` (``-m "not docker"`` skips them)."""
    for item in items:
        if "docker_engine" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.docker)


@pytest.fixture(scope="session")
def prometheus_bin() -> str:
    """Debian's prometheus binary: CI installs it, elsewhere its tests skip without it."""
    found = shutil.which("prometheus")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("CI needs the prometheus binary (.ci/run installs Debian's prometheus)")
        pytest.skip("no prometheus binary (apt-get install prometheus)")
    return found


def pytest_configure(config: pytest.Config) -> None:
    """Keep the user's own ledger store out of the tests, even outside a test's own scope.

    A live-mode monitor, exporter or recorder writes ``$XDG_STATE_HOME/gputui/``; what runs at
    collection or in a session fixture writes a directory of the run's own.
    """
    os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="gputui-test-state-")


@pytest.fixture(autouse=True)
def _state_home_per_test(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Give each test (and the processes it starts) a state directory of its own.

    One directory for the whole run let two workers' monitors meet on one ledger store, and
    the second found it locked by the first. The directory is only named here: the store
    makes it when a writer first opens it, so a test that writes nothing finds its
    ``tmp_path`` as empty as before.
    """
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / ".state"))
