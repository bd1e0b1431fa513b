"""Owners, the person and not UID 0: a lab of real containers started different ways.

Each container's owner comes back right or "unknown", and none wrong at high confidence. The
evidence is real: labels on real containers, directories and bind-mount sources owned by a
real unprivileged user of this host, a real ``--user``, and a real rootless Docker engine run
by its own user.
"""

from __future__ import annotations

import os
import pwd
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gputui.collect.docker.source import DockerSource, _rootless_uid
from gputui.collect.owners import HostLookup, OwnerFacts, OwnerResolver
from gputui.model.containers import ContainerInfo, EngineInfo, Owner
from tests.support.runtimes import PREFIX, RootlessDocker, rootless_docker, runtime_image

__all__ = ["rootless_docker", "runtime_image"]

TEST_LABEL = "gputui-test"  # the label tests/conftest.py puts on every test container
CONFIGURED = "org.example.owner"
#: A user every Debian host has, with a name and no login: the owner of the lab's files.
NOBODY = pwd.getpwnam("nobody")


@pytest.fixture
def source(docker_engine: Any, free_run_id: str) -> Iterator[DockerSource]:
    src = DockerSource(label=f"{TEST_LABEL}={free_run_id}", owner_labels=[CONFIGURED])
    yield src
    src.close()


def _owned_dir(tmp_path: Path, name: str, uid: int = NOBODY.pw_uid) -> Path:
    path = tmp_path / name
    path.mkdir()
    os.chown(path, uid, uid)
    return path


def _owner_of(source: DockerSource, container_id: str) -> Owner:
    deadline = time.monotonic() + 15
    while True:
        info = next((c for c in source.read().containers if c.id == container_id), None)
        if info is not None or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert isinstance(info, ContainerInfo), "the engine never listed the container"
    assert info.owner is not None
    return info.owner


@pytest.mark.docker
def test_each_owner_right_or_unknown_never_wrong_at_high_confidence(
    source: DockerSource, run_container: Any, tmp_path: Path
) -> None:
    if os.geteuid() != 0:
        pytest.skip("the lab hands files to another user, which needs root")
    project = _owned_dir(tmp_path, "project")
    data = _owned_dir(tmp_path, "data")
    root_dir = _owned_dir(tmp_path, "rootdata", uid=0)
    sleep = ["sleep", "300"]
    lab: dict[str, tuple[dict[str, Any], Owner]] = {
        "configured-label": (
            {"labels": {CONFIGURED: "carol", "gputui.owner": "dave"}},
            Owner("carol", "high", f"label {CONFIGURED}"),
        ),
        "gputui-label": ({"labels": {"gputui.owner": "dave"}}, Owner("dave", "high", "")),
        # A label beats every other fact: the bind mount is nobody's, the owner is carol.
        "label-beats-mount": (
            {
                "labels": {CONFIGURED: "carol"},
                "volumes": {str(data): {"bind": "/data", "mode": "ro"}},
            },
            Owner("carol", "high", ""),
        ),
        "compose-dir": (
            {
                "labels": {
                    "com.docker.compose.project": "ml",
                    "com.docker.compose.project.working_dir": str(project),
                }
            },
            Owner("nobody", "medium", ""),
        ),
        "numeric-user": (
            {"user": f"{NOBODY.pw_uid}:{NOBODY.pw_gid}"},
            Owner("nobody", "medium", ""),
        ),
        "bind-mount": (
            {"volumes": {str(data): {"bind": "/data", "mode": "ro"}}},
            Owner("nobody", "low", ""),
        ),
        # Root's files and the system's own paths name nobody.
        "root-mounts": (
            {
                "volumes": {
                    str(root_dir): {"bind": "/data", "mode": "ro"},
                    "/etc": {"bind": "/host-etc", "mode": "ro"},
                }
            },
            Owner(None, "none", ""),
        ),
        "nothing": ({}, Owner(None, "none", "")),
    }
    made = {}
    for case, (kwargs, _) in lab.items():
        name = f"gputui-owner-{case}-{uuid.uuid4().hex[:6]}"
        made[case] = run_container(sleep, name=name, network_mode="none", **kwargs)
    for case, (_, want) in lab.items():
        got = _owner_of(source, made[case].id)
        assert (got.name, got.confidence) == (want.name, want.confidence), (case, got)
        if want.evidence:
            assert got.evidence == want.evidence, (case, got)
        if got.confidence != "high":
            # Short of a label, the owner is a guess: it says how to make it certain.
            assert got.hint is not None and CONFIGURED in got.hint, (case, got)
    assert "project" in _owner_of(source, made["compose-dir"].id).evidence
    assert str(data) in _owner_of(source, made["bind-mount"].id).evidence


@pytest.mark.docker
def test_a_user_name_the_host_also_has_is_a_low_confidence_owner(
    source: DockerSource, run_container: Any
) -> None:
    # Created, not started: the test image has no /etc/passwd to run "nobody" with, and an
    # engine describes a created container all the same.
    ct = run_container(["true"], start=False, user="nobody", network_mode="none")
    assert _owner_of(source, ct.id) == Owner(
        "nobody",
        "low",
        "runs as --user nobody, a user of this host too",
        f"name the owner with a label: docker run --label {CONFIGURED}=<user>",
    )
    unknown = run_container(["true"], start=False, user="no-such-user-here", network_mode="none")
    assert _owner_of(source, unknown.id).confidence == "none"


def test_a_rootless_engine_needs_its_own_word_as_well_as_a_users_socket(tmp_path: Path) -> None:
    sock_path = tmp_path / "engine.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(sock_path))
        os.chown(sock_path, NOBODY.pw_uid, NOBODY.pw_gid)
        url = f"unix://{sock_path}"
        assert _rootless_uid(EngineInfo(rootless=True), url) == NOBODY.pw_uid
        # A user's socket in front of a rootful engine (a proxy, a forwarded socket): its
        # containers are not that user's.
        assert _rootless_uid(EngineInfo(rootless=False), url) is None
        os.chown(sock_path, 0, 0)
        assert _rootless_uid(EngineInfo(rootless=True), url) is None
    assert _rootless_uid(EngineInfo(rootless=True), "tcp://127.0.0.1:2375") is None


def test_rootless_docker_containers_are_its_users(rootless_docker: RootlessDocker) -> None:
    name = f"{PREFIX}-{uuid.uuid4().hex[:8]}"
    container_id = rootless_docker(
        "run", "-d", "--name", name, "--network", "none", "gputui-rt:latest", "sleep", "300"
    ).strip()
    src = DockerSource(base_url=rootless_docker.host)
    try:
        reading = src.read()
        assert reading.engine is not None and reading.engine.rootless
        owner = _owner_of(src, container_id)
    finally:
        src.close()
    user = pwd.getpwuid(rootless_docker.sock.stat().st_uid).pw_name
    assert user != "root"
    assert (owner.name, owner.confidence) == (user, "high")
    assert "rootless engine" in owner.evidence


class _Hung(HostLookup):
    def path_uid(self, path: str) -> int | None:
        time.sleep(30)  # a hung network mount
        return None


def test_a_hung_lookup_costs_one_deadline_then_pauses_the_lookups() -> None:
    resolver = OwnerResolver(("gputui.owner",), lookup=_Hung(), deadline_s=0.2)
    facts = OwnerFacts(bind_sources=("/mnt/nfs/alice",))
    started = time.monotonic()
    first = resolver.resolve(facts)
    assert time.monotonic() - started < 1.0
    assert first.name is None and "took over 0.2 s" in first.evidence
    started = time.monotonic()
    again = [resolver.resolve(facts) for _ in range(50)]
    assert time.monotonic() - started < 0.5  # not 50 deadlines
    assert all("paused" in o.evidence for o in again)
    # A label needs no lookup: it is read even while they are paused.
    labelled = resolver.resolve(OwnerFacts(labels=(("gputui.owner", "erin"),)))
    assert labelled.name == "erin"
