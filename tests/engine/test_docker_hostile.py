"""The Docker adapter against a slow, endless, oversized or malformed engine, and real abuse.

The hostile engines are served by the test itself on a unix socket (tests/fake_engine.py); the
real-engine tests use containers created from the offline test image (tests/conftest.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gputui.boundary.json_limits import json_depth
from gputui.collect.collector import Collector
from gputui.collect.docker import parse as dp
from gputui.collect.docker.endpoint import resolve_endpoint
from gputui.collect.docker.engine_api import MAX_EXEC_OUTPUT, EngineApi
from gputui.collect.docker.source import DockerSource
from gputui.collect.linux.proc_reader import ProcSource
from gputui.collect.standins.scenario import ScenarioSource
from tests.support.fake_engine import (
    GOOD_ID,
    INFO,
    VERSION,
    FakeEngine,
    container,
    deep_json,
    endless_chunked_list,
    held_open,
    json_reply,
    oversize,
    trickle,
)

TEST_LABEL = "gputui-test"


def _peak_rss_reset() -> bool:
    """Reset the process's peak RSS (VmHWM) so a later peak is this test's own."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return False
    return True


def _peak_rss_bytes() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/self/status")


@pytest.fixture
def sock_path(tmp_path: Path) -> Iterator[str]:
    # unix socket paths are limited to ~107 bytes: pytest's tmp_path can be longer
    short = Path("/tmp") / f"gputui-fake-{os.getpid()}-{time.monotonic_ns()}.sock"
    yield str(short)
    short.unlink(missing_ok=True)


def _routes(**overrides: Any) -> dict[str, Any]:
    routes = {
        "/version": json_reply(VERSION),
        "/info": json_reply(INFO),
        "/events": held_open,
        "/containers/json": json_reply([]),
    }
    routes.update(overrides)
    return routes


# --- slow and endless engines ---------------------------------------------------------------


def test_trickling_engine_hits_the_read_deadline(sock_path: str) -> None:
    with FakeEngine(sock_path, _routes(**{"/version": trickle(2.0)})) as engine:
        src = DockerSource(base_url=engine.url, timeout=1.0)
        started = time.monotonic()
        reading = src.read()
        elapsed = time.monotonic() - started
        assert elapsed < 2.0, elapsed
        assert reading.status.ok is False
        assert reading.status.kind == "slow"
        assert "did not answer" in (reading.status.error or "")
        assert reading.status.fix
        # The next refresh does not start a second stuck read: it is inside the back-off.
        started = time.monotonic()
        assert src.read().status.kind == "slow"
        assert time.monotonic() - started < 0.5
        src.close()


def test_endless_chunked_list_is_cut_with_bounded_memory(sock_path: str) -> None:
    measured = _peak_rss_reset()
    before = _peak_rss_bytes()
    with FakeEngine(sock_path, _routes(**{"/containers/json": endless_chunked_list})) as engine:
        src = DockerSource(base_url=engine.url, timeout=5.0)
        started = time.monotonic()
        reading = src.read()
        assert time.monotonic() - started < 6
        src.close()
    assert reading.status.ok is False
    assert "larger than" in (reading.status.error or "")
    if measured:
        assert _peak_rss_bytes() - before < 200 << 20


def test_oversize_reply_is_refused_before_reading_it(sock_path: str) -> None:
    with FakeEngine(sock_path, _routes(**{"/info": oversize})) as engine:
        src = DockerSource(base_url=engine.url, timeout=2.0)
        started = time.monotonic()
        reading = src.read()
        assert time.monotonic() - started < 1.5
        src.close()
    assert (reading.status.ok, reading.status.kind) == (False, "error")
    assert "larger than" in (reading.status.error or "")


def test_deeply_nested_reply_is_refused(sock_path: str) -> None:
    with FakeEngine(sock_path, _routes(**{"/info": deep_json})) as engine:
        reading = DockerSource(base_url=engine.url, timeout=2.0).read()
    assert reading.status.ok is False
    assert "nests deeper" in (reading.status.error or "")
    assert json_depth(b'{"a": [1, {"b": "[[[["}]}') == 3


def _reader_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "gputui-docker-read"}


def test_collector_returns_gpu_data_while_docker_hangs(sock_path: str) -> None:
    scenario = {"gpus": [{"index": 0, "name": "NVIDIA H200", "processes": []}]}
    earlier = _reader_threads()  # other tests' collectors' readers, still running or ending
    with FakeEngine(sock_path, _routes(**{"/version": trickle(2.0)})) as engine:
        docker = DockerSource(base_url=engine.url, timeout=30.0)  # its own deadline is far off
        collector = Collector(ScenarioSource(scenario), ProcSource(), docker, docker_wait=1.0)
        for _ in range(2):
            started = time.monotonic()
            snap = collector.collect()
            assert time.monotonic() - started < 1.8
            assert [g.index for g in snap.gpus] == [0]
            assert snap.sources["docker"].ok is False
            assert snap.sources["docker"].kind == "slow"
        readers = _reader_threads() - earlier
        assert len(readers) == 1, "a second read was started while one was stuck"
        assert all(t.daemon for t in readers)
        started = time.monotonic()
        collector.close()
        assert time.monotonic() - started < 1.5


def test_every_refresh_reads_the_engine_on_one_long_lived_thread(sock_path: str) -> None:
    scenario = {"gpus": [{"index": 0, "name": "NVIDIA H200", "processes": []}]}
    earlier = _reader_threads()  # an earlier test's reader may still be ending
    with FakeEngine(sock_path, _routes()) as engine:
        docker = DockerSource(base_url=engine.url, timeout=5.0)
        collector = Collector(ScenarioSource(scenario), ProcSource(), docker)
        seen: set[threading.Thread] = set()
        try:
            for _ in range(5):
                assert collector.collect().sources["docker"].ok
                seen |= _reader_threads() - earlier
        finally:
            collector.close()
        assert len(seen) == 1, "a thread was started per read"
        (reader,) = seen
        reader.join(5.0)
        assert not reader.is_alive(), "closing the collector did not end its reader thread"


def test_an_idle_reader_thread_ends_and_the_next_read_starts_one(
    sock_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("gputui.collect.collector.READER_IDLE_S", 0.2)
    scenario = {"gpus": [{"index": 0, "name": "NVIDIA H200", "processes": []}]}
    earlier = _reader_threads()
    with FakeEngine(sock_path, _routes()) as engine:
        docker = DockerSource(base_url=engine.url, timeout=5.0)
        collector = Collector(ScenarioSource(scenario), ProcSource(), docker)
        try:
            assert collector.collect().sources["docker"].ok
            (first,) = _reader_threads() - earlier
            first.join(5.0)
            assert not first.is_alive(), "an idle reader thread did not end"
            assert collector.collect().sources["docker"].ok  # a new thread reads
            (second,) = _reader_threads() - earlier
            assert second is not first
        finally:
            collector.close()


# --- malformed payloads and ids -------------------------------------------------------------

BAD_VALUES: list[Any] = [None, "text", 7, -1, 10**30, 1.5, True, [], {}, [1, 2], {"a": 1}]


@pytest.mark.parametrize("value", BAD_VALUES)
@pytest.mark.parametrize(
    "field",
    [
        ("Config",), ("State",), ("HostConfig",), ("Name",), ("Image",), ("RestartCount",),
        ("Config", "Env"), ("Config", "Labels"), ("Config", "Image"), ("State", "Pid"),
        ("State", "Status"), ("State", "ExitCode"), ("State", "StartedAt"),
        ("State", "OOMKilled"), ("HostConfig", "Devices"), ("HostConfig", "DeviceRequests"),
        ("HostConfig", "NanoCpus"), ("HostConfig", "CpuQuota"), ("HostConfig", "Runtime"),
        ("HostConfig", "CgroupParent"),
    ],
)  # fmt: skip
def test_parse_inspect_survives_any_field_type(field: tuple[str, ...], value: Any) -> None:
    payload = container(
        Config={"Image": "img", "Env": ["NVIDIA_VISIBLE_DEVICES=0"], "Labels": {}},
        State={"Status": "running", "Pid": 42, "StartedAt": "2025-01-01T00:00:00Z"},
        HostConfig={"DeviceRequests": [{"Count": 1, "Capabilities": [["gpu"]]}]},
    )
    target = payload
    for key in field[:-1]:
        target = target[key]
    target[field[-1]] = value
    info = dp.parse_inspect(payload)
    assert info.id == GOOD_ID
    assert isinstance(info.name, str)
    assert info.pid is None or 0 < info.pid < 1 << 22
    assert dp.cgroup_parent(payload) in (None, "text")


@pytest.mark.parametrize(
    "requests",
    [
        [{"Count": 4611686018427387904, "Capabilities": [["gpu"]]}],
        [{"Count": 10**40, "Capabilities": [["gpu"]]}],
        [{"Count": 10_000_000, "Driver": "nvidia"}],
        [{"DeviceIDs": [str(i) for i in range(100_000)], "Capabilities": [["gpu"]]}],
    ],
)
def test_huge_gpu_requests_stay_small(requests: list[dict[str, Any]]) -> None:
    started = time.monotonic()
    info = dp.parse_inspect(container(HostConfig={"DeviceRequests": requests}))
    assert time.monotonic() - started < 0.5
    assert info.gpu_request is not None
    assert len(info.gpu_request) <= dp.MAX_GPU_IDS
    if isinstance(info.gpu_request, str):
        assert info.gpu_request.startswith("count=")


def test_malformed_and_wrong_id_payloads_from_an_engine(sock_path: str) -> None:
    other = "ab" * 32
    bad_list = [
        {"Id": "--privileged", "Names": ["/evil"], "State": "running"},
        {"Id": GOOD_ID.upper(), "State": "running"},
        {"Id": 12345},
        "not an object",
        None,
        {"Id": GOOD_ID, "Names": "notalist", "State": ["running"]},
        {"Id": other, "Names": ["/other"], "State": "running"},
    ]
    hostile = container(
        GOOD_ID,
        Config="a string where an object belongs",
        State=None,
        HostConfig={"DeviceRequests": [{"Count": 4611686018427387904, "Capabilities": [["gpu"]]}]},
        RestartCount=10**40,
    )
    routes = _routes(
        **{
            "/info": json_reply({**INFO, "Runtimes": "runc", "CgroupVersion": 2, "MemTotal": "x"}),
            "/containers/json": json_reply(bad_list),
            f"/containers/{GOOD_ID}/json": json_reply(hostile),
            # a payload describing another container than the one asked for is not used
            f"/containers/{other}/json": json_reply(container("--privileged")),
        }
    )
    with FakeEngine(sock_path, routes) as engine:
        src = DockerSource(base_url=engine.url, timeout=2.0)
        reading = src.read()
        src.close()
    assert reading.status.ok, reading.status
    assert [c.id for c in reading.containers] == [GOOD_ID]
    info = reading.containers[0]
    assert info.gpu_request == "count=4611686018427387904"
    assert info.restart_count is None
    assert info.status == "unknown"
    assert reading.engine is not None
    assert reading.engine.runtimes == ()
    assert reading.engine.host_memory_bytes is None
    inspected = [r for r in engine.requests if r.startswith("GET /containers/") and "json" in r]
    assert all("privileged" not in r and GOOD_ID.upper() not in r for r in inspected)


def test_exec_and_interactive_refuse_malformed_ids() -> None:
    src = DockerSource(base_url="unix:///nonexistent.sock")
    for cid in ("--privileged", "abc", "AB" * 32, "ab" * 32 + "\n"):
        result = src.exec(cid, ["nvidia-smi"], 1)
        assert result.error is not None
        assert "not a container id" in result.error
        assert src.interactive_exec_argv(cid, ["sh"]) is None
    assert src.api_calls == 0


def test_nvml_unknown_error_is_explained() -> None:
    message = dp.exec_error(["nvidia-smi"], 255, "Failed to initialize NVML: Unknown Error\n")
    assert message is not None
    assert "daemon-reload" in message
    assert "native.cgroupdriver=cgroupfs" in message
    assert "nvidia-ctk cdi generate" in message
    assert "restart the container" in message


# --- endpoint resolution ----------------------------------------------------------------------


def _write_context(config_dir: Path, name: str, host: str) -> None:
    digest = hashlib.sha256(name.encode()).hexdigest()
    meta = config_dir / "contexts" / "meta" / digest / "meta.json"
    meta.parent.mkdir(parents=True)
    meta.write_text(json.dumps({"Name": name, "Endpoints": {"docker": {"Host": host}}}))


def test_context_found_from_any_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "cfg"
    _write_context(config, "gpu-box", "unix:///run/gpu-box.sock")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    # DOCKER_CONFIG with contexts but no config.json, the context named by DOCKER_CONTEXT
    monkeypatch.setenv("DOCKER_CONFIG", str(config))
    monkeypatch.setenv("DOCKER_CONTEXT", "gpu-box")
    endpoint = resolve_endpoint(None)
    assert (endpoint.base_url, endpoint.context) == ("unix:///run/gpu-box.sock", "gpu-box")
    # currentContext of ~/.docker/config.json, with DOCKER_CONFIG unset
    monkeypatch.delenv("DOCKER_CONTEXT")
    monkeypatch.delenv("DOCKER_CONFIG")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    _write_context(tmp_path / "home" / ".docker", "remote", "tcp://10.1.2.3:2375")
    (tmp_path / "home" / ".docker" / "config.json").write_text('{"currentContext": "remote"}')
    endpoint = resolve_endpoint(None)
    assert (endpoint.base_url, endpoint.context) == ("tcp://10.1.2.3:2375", "remote")
    # DOCKER_HOST wins over every context, as in the docker CLI
    monkeypatch.setenv("DOCKER_HOST", "unix:///run/other.sock")
    assert resolve_endpoint(None).base_url == "unix:///run/other.sock"


def test_missing_context_is_a_status(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    monkeypatch.setenv("DOCKER_CONTEXT", "nope")
    reading = DockerSource().read()
    assert (reading.status.ok, reading.status.kind) == (False, "not_found")
    assert "docker context ls" in (reading.status.fix or "")


# --- real engine ------------------------------------------------------------------------------


@pytest.fixture
def source(docker_engine: Any, free_run_id: str) -> Iterator[DockerSource]:
    src = DockerSource(label=f"{TEST_LABEL}={free_run_id}")
    yield src
    src.close()


@pytest.mark.parametrize("count", [4611686018427387904, 10_000_000])
def test_huge_gpus_count_on_created_container(
    source: DockerSource, run_container: Any, count: int
) -> None:
    import docker

    request = docker.types.DeviceRequest(count=count, capabilities=[["gpu"]])
    ct = run_container(["sleep", "300"], start=False, device_requests=[request])
    started = time.monotonic()
    reading = source.read()
    assert time.monotonic() - started < 3
    info = next(c for c in reading.containers if c.id == ct.id)
    assert info.gpu_request == f"count={count}"


def test_context_of_a_config_dir_reaches_the_real_engine(
    docker_engine: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not os.path.exists("/var/run/docker.sock"):
        pytest.skip("the engine does not listen on the default unix socket")
    _write_context(tmp_path / "cfg", "local-gpu", "unix:///var/run/docker.sock")
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "cfg"))
    monkeypatch.setenv("DOCKER_CONTEXT", "local-gpu")
    src = DockerSource(label="gputui-test=none")
    try:
        reading = src.read()
        assert reading.status.ok, reading.status
        assert reading.engine is not None
        assert reading.engine.context == "local-gpu"
    finally:
        src.close()


def _threads_settle(expected: int, timeout: float = 2.0) -> int:
    deadline = time.monotonic() + timeout
    while threading.active_count() > expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return threading.active_count()


def test_exec_output_is_capped(source: DockerSource, run_container: Any) -> None:
    ct = run_container(["sleep", "300"])
    assert source.read().status.ok
    threads = threading.active_count()
    started = time.monotonic()
    result = source.exec(ct.id, ["yes"], timeout_s=5)
    assert time.monotonic() - started < 5.5
    assert len(result.stdout) + len(result.stderr) <= MAX_EXEC_OUTPUT
    assert len(result.stdout) > MAX_EXEC_OUTPUT // 2
    assert result.error is not None
    assert "cut" in result.error
    assert result.output_cut_bytes == MAX_EXEC_OUTPUT
    assert _threads_settle(threads) <= threads


def test_exec_endless_slow_output_stops_at_the_deadline(
    source: DockerSource, run_container: Any
) -> None:
    ct = run_container(["sleep", "300"])
    assert source.read().status.ok
    threads = threading.active_count()
    started = time.monotonic()
    result = source.exec(ct.id, ["sh", "-c", "while :; do echo tick; sleep 0.1; done"], 1.0)
    elapsed = time.monotonic() - started
    assert 0.9 < elapsed < 1.6, elapsed
    assert result.timed_out
    assert result.exit_code is None
    assert "tick" in result.stdout
    assert _threads_settle(threads) <= threads


def test_exec_nvml_unknown_error_real(source: DockerSource, run_container: Any) -> None:
    ct = run_container(["sleep", "300"])
    script = "echo 'Failed to initialize NVML: Unknown Error'; exit 255"
    result = source.exec(ct.id, ["sh", "-c", script], timeout_s=10)
    assert result.exit_code == 255
    assert result.error is not None
    assert "daemon-reload" in result.error


def test_sdk_adapter_reads_and_execs(
    docker_engine: Any, run_container: Any, free_run_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The path ``ssh://`` engines take (the SDK, bounded), exercised on the local engine."""
    monkeypatch.setattr(EngineApi, "supports", staticmethod(lambda url: False))
    ct = run_container(["sleep", "300"])
    src = DockerSource(label=f"{TEST_LABEL}={free_run_id}")
    try:
        reading = src.read()
        assert reading.status.ok, reading.status
        assert any(c.id == ct.id for c in reading.containers)
        result = src.exec(ct.id, ["sh", "-c", "echo out; echo err >&2; exit 4"], timeout_s=10)
        assert (result.exit_code, result.stdout, result.stderr) == (4, "out\n", "err\n")
    finally:
        src.close()
