"""Which engines a host shows (real sockets and directories in a made-up /run) and --engine."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gputui.collect.engines import (
    CONTAINERD_TASKS,
    EngineSpec,
    EngineSpecError,
    discover,
    parse_engine_spec,
    select,
)


@pytest.fixture
def run_root(tmp_path: Path) -> Path:
    root = tmp_path / "run"
    (root / "user").mkdir(parents=True)
    return root


def _listen(path: Path) -> socket.socket:
    """A real unix socket at ``path`` (discovery only stats it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    return sock


def test_every_engine_of_the_host_is_found_docker_first(run_root: Path, tmp_path: Path) -> None:
    var_run = tmp_path / "var-run"
    uid = os.getuid()
    held = [
        _listen(var_run / "docker.sock"),
        _listen(run_root / "podman" / "podman.sock"),
        _listen(run_root / "user" / str(uid) / "podman" / "podman.sock"),
        _listen(run_root / "user" / "4000001" / "docker.sock"),
    ]
    (run_root / "containerd" / CONTAINERD_TASKS / "k8s.io").mkdir(parents=True)
    (run_root / "k3s" / "containerd" / CONTAINERD_TASKS).mkdir(parents=True)
    # Not sockets: a regular file where a socket would be is no engine.
    (run_root / "user" / "4000002").mkdir()
    (run_root / "user" / "4000002" / "docker.sock").write_text("")
    try:
        found = discover({}, run_root=run_root, var_run=var_run)
    finally:
        for sock in held:
            sock.close()
    import pwd

    me = pwd.getpwuid(uid).pw_name
    assert [(s.name, s.kind) for s in found] == [
        ("docker", "docker"),
        ("podman", "podman"),
        (f"podman-{me}", "podman"),
        ("docker-4000001", "docker"),
        ("containerd", "containerd"),
        ("k3s", "containerd"),
    ]
    assert found[0].address is None  # the Docker CLI's endpoint: DOCKER_HOST or the context
    assert found[1].address == f"unix://{run_root}/podman/podman.sock"
    assert found[4].address == str(run_root / "containerd")


def test_a_node_without_docker_reads_only_its_containerd(run_root: Path, tmp_path: Path) -> None:
    (run_root / "containerd" / CONTAINERD_TASKS).mkdir(parents=True)
    found = discover({}, run_root=run_root, var_run=tmp_path / "none")
    assert found == [EngineSpec("containerd", "containerd", str(run_root / "containerd"))]
    # Nothing at all: the Docker endpoint stays, so its status says there is no engine.
    (run_root / "containerd" / CONTAINERD_TASKS).rmdir()
    assert discover({}, run_root=run_root, var_run=tmp_path / "none") == [
        EngineSpec("docker", "docker", None)
    ]


def test_a_podman_socket_that_is_docker_host_is_read_once(run_root: Path) -> None:
    path = run_root / "podman" / "podman.sock"
    sock = _listen(path)
    try:
        found = discover({"DOCKER_HOST": f"unix://{path}"}, run_root=run_root)
    finally:
        sock.close()
    assert found == [EngineSpec("docker", "docker", None)]
    # DOCKER_HOST names an engine that is not there: still read (its status says so).
    path.unlink()
    (run_root / "containerd" / CONTAINERD_TASKS).mkdir(parents=True)
    found = discover({"DOCKER_HOST": f"unix://{run_root}/gone.sock"}, run_root=run_root)
    assert [s.name for s in found] == ["docker", "containerd"]


def test_engine_values_restrict_and_add() -> None:
    found = [
        EngineSpec("docker", "docker", None),
        EngineSpec("podman", "podman", "unix:///run/podman/podman.sock"),
        EngineSpec("containerd", "containerd", "/run/containerd"),
    ]
    assert [s.name for s in select([], found)] == ["docker", "podman", "containerd"]
    assert [s.name for s in select(["podman"], found)] == ["podman"]
    added = select(["docker", "podman=/tmp/p.sock"], found)
    assert [(s.name, s.address) for s in added] == [
        ("docker", None),
        ("podman", "unix:///tmp/p.sock"),
    ]
    both = select(["auto", "podman=unix:///tmp/p.sock"], found)
    assert [s.name for s in both] == ["docker", "podman", "containerd", "podman-2"]
    assert all(s.explicit for s in added)
    # A kind nothing was found of is still read at its usual place: its status says why not.
    assert select(["containerd"], found[:1]) == [
        EngineSpec("containerd", "containerd", "/run/containerd", explicit=True)
    ]


def test_crio_is_found_by_its_socket_and_containerd_never_through_its_cri(
    run_root: Path, tmp_path: Path
) -> None:
    var_run = tmp_path / "var-run"
    (run_root / "containerd" / CONTAINERD_TASKS).mkdir(parents=True)
    containerd = _listen(run_root / "containerd" / "containerd.sock")
    # A regular file where CRI-O's socket would be is no engine.
    (var_run / "crio").mkdir(parents=True)
    (var_run / "crio" / "crio.sock").write_text("")
    try:
        assert [s.kind for s in discover({}, run_root=run_root, var_run=var_run)] == ["containerd"]
        crio = _listen(run_root / "crio" / "crio.sock")  # /run/crio/crio.sock, the other name
        try:
            found = discover({}, run_root=run_root, var_run=var_run)
        finally:
            crio.close()
    finally:
        containerd.close()
    assert found == [
        EngineSpec("containerd", "containerd", str(run_root / "containerd")),
        EngineSpec("crio", "crio", f"unix://{run_root}/crio/crio.sock"),
    ]
    assert parse_engine_spec("crio") == ("crio", None)
    assert parse_engine_spec("crio=/run/containerd//containerd.sock") == (
        "crio",
        "unix:///run/containerd/containerd.sock",
    )
    assert parse_engine_spec("CRIO=unix:///var/run/crio/crio.sock") == (
        "crio",
        "unix:///var/run/crio/crio.sock",
    )
    # Named but not found: read at its usual socket, so its status says it is not there.
    assert select(["crio"], found[:1]) == [
        EngineSpec("crio", "crio", "unix:///var/run/crio/crio.sock", explicit=True)
    ]


@pytest.mark.parametrize(
    "text",
    [
        "rkt",
        "crio=relative.sock",
        "docker=",
        "containerd=relative/dir",
        "podman=ftp://x",
        "podman=" + "x" * 400,
        "",
    ],
)
def test_a_bad_engine_value_is_one_error(text: str) -> None:
    with pytest.raises(EngineSpecError) as caught:
        parse_engine_spec(text)
    assert "\n" not in str(caught.value)


def test_a_bad_engine_flag_is_one_line_and_exit_2() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gputui", "--once", "--engine", "rkt"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "unknown engine 'rkt'" in result.stderr


def test_the_config_files_engines_are_checked_like_the_flag(tmp_path: Path) -> None:
    from gputui.config.file import parse_config
    from gputui.config.values import ConfigError

    path = tmp_path / "config.toml"
    good = '[engines]\nuse = ["docker", "podman=unix:///run/podman/podman.sock"]\n'
    assert parse_config(good, path).engines == ("docker", "podman=unix:///run/podman/podman.sock")
    assert parse_config("", path).engines == ()
    for bad in ('[engines]\nuse = ["rkt"]\n', "[engines]\nuse = 3\n", "[engines]\nother = 1\n"):
        with pytest.raises(ConfigError) as caught:
            parse_config(bad, path)
        assert "\n" not in str(caught.value) and "[engines]" in str(caught.value)


def test_the_config_files_engines_are_read_and_the_flag_wins(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'[engines]\nuse = ["containerd={tmp_path}/ctd"]\n')
    scenario = tmp_path / "s.json"
    scenario.write_text('{"nvml": "ok", "gpus": []}')

    def sources(*extra: str) -> list[str]:
        result = subprocess.run(
            [sys.executable, "-m", "gputui", "--once", "--json", "--scenario", str(scenario),
             "--config", str(config), *extra],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        import json

        return [name for name in json.loads(result.stdout)["sources"] if name != "nvml"]

    assert sources() == ["containerd"]
    assert sources("--engine", f"podman=unix://{tmp_path}/p.sock") == ["podman"]


class _Engine:
    """A container source answering from a list of readings (the last one repeated)."""

    def __init__(self, name: str, readings: list[object]) -> None:
        self.name = name
        self._readings = readings

    def read(self) -> object:
        return self._readings.pop(0) if len(self._readings) > 1 else self._readings[0]

    def capabilities(self) -> object:
        from gputui.collect.sources import ContainerCapabilities

        return ContainerCapabilities()

    def slow_status(self, waited_s: float) -> object:
        from gputui.model.status import SourceStatus

        return SourceStatus(self.name, False, "slow", "slow")

    def close(self) -> None:
        pass


def test_each_container_is_judged_against_its_own_engine_even_while_it_is_away() -> None:
    from gputui.collect.collector import Collector
    from gputui.collect.linux.proc_reader import ProcSource
    from gputui.collect.standins.scenario import ScenarioSource
    from gputui.health.runner import run_checks
    from gputui.model.containers import ContainerInfo, ContainerReading, EngineInfo
    from gputui.model.status import HealthStatus, SourceStatus

    docker = ContainerReading(
        SourceStatus("docker", ok=True), (), EngineInfo(runtimes=("runc",), product="docker")
    )
    boxed = ContainerInfo("a" * 64, "boxed", "img", "exited", runtime="crun")
    podman_ok = ContainerReading(
        SourceStatus("podman", ok=True),
        (boxed,),
        EngineInfo(runtimes=("crun", "runc"), product="podman"),
    )
    podman_down = ContainerReading(SourceStatus("podman", False, "gone", "unreachable"))
    scenario = {"gpus": [{"index": 0, "name": "NVIDIA H200", "processes": []}]}
    collector = Collector(
        ScenarioSource(scenario),
        ProcSource(),
        [_Engine("docker", [docker]), _Engine("podman", [podman_ok, podman_down])],  # type: ignore[list-item]
        health=run_checks,
    )
    try:
        for _ in range(2):  # podman answers, then is away (its containers kept)
            snap = collector.collect()
            checks = {c.id: c for c in snap.health}
            assert "boxed" in {c.info.name for c in snap.containers}
            runtime = checks["container.runtime:boxed"]
            assert runtime.status is HealthStatus.PASS, runtime
            assert {u.info.name: u.source for u in snap.containers} == {"boxed": "podman"}
    finally:
        collector.close()
