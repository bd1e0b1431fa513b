"""DockerSource against the real engine (started by .ci/run in CI)."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gputui.collect.docker.source import DockerSource, docker_cli_available
from gputui.collect.linux.cgroup_usage import early_cgroup_cpu
from gputui.model.containers import ContainerInfo, ContainerReading
from tests.support.docker_stats import engine_cpu_percent, engine_memory

TEST_LABEL = "gputui-test"  # the label tests/conftest.py puts on every test container

pytestmark = pytest.mark.docker


@pytest.fixture
def source(docker_engine: Any, free_run_id: str) -> Iterator[DockerSource]:
    # Only this run's containers: API-call counts must not depend on other users of the engine.
    src = DockerSource(label=f"{TEST_LABEL}={free_run_id}")
    yield src
    src.close()


def find(reading: ContainerReading, container_id: str) -> ContainerInfo | None:
    return next((c for c in reading.containers if c.id == container_id), None)


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
    """Poll until ``predicate()`` is truthy (events arrive asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def test_engine_info(source: DockerSource) -> None:
    reading = source.read()
    assert reading.status.ok, reading.status
    engine = reading.engine
    assert engine is not None
    assert engine.server_version
    assert engine.api_version
    assert "runc" in engine.runtimes
    assert engine.default_runtime
    assert engine.cgroup_driver in ("cgroupfs", "systemd")
    assert engine.cgroup_version in ("1", "2")
    assert engine.host_memory_bytes
    assert engine.host_memory_bytes > 0
    assert engine.endpoint


def test_containers_appear_with_labels(source: DockerSource, run_container: Any) -> None:
    labels = {
        "com.docker.compose.project": "ml",
        "com.docker.compose.service": "trainer",
        "io.kubernetes.pod.name": "trainer-0",
        "io.kubernetes.pod.namespace": "research",
    }
    ct = run_container(["sleep", "300"], labels=labels, name=f"gputui-labels-{os.getpid()}")
    info = find(source.read(), ct.id)
    assert info is not None
    assert info.name == f"gputui-labels-{os.getpid()}"
    assert info.image == "gputui-test:latest"
    assert info.status == "running"
    assert info.pid
    assert info.pid > 0
    assert info.started_at
    assert abs(info.started_at - time.time()) < 120
    assert (info.compose_project, info.compose_service) == ("ml", "trainer")
    assert (info.k8s_pod, info.k8s_namespace) == ("trainer-0", "research")
    assert info.gpu_request is None


def test_stopped_container_shows_exit_code(source: DockerSource, run_container: Any) -> None:
    ct = run_container(["sh", "-c", "exit 3"])
    ct.wait(timeout=30)
    info = wait_for(lambda: (i := find(source.read(), ct.id)) and i.status == "exited" and i)
    assert info, "container never showed as exited"
    assert info.exit_code == 3
    assert not info.running
    assert info.cpu_percent is None


def test_gpu_device_request_on_created_container(source: DockerSource, run_container: Any) -> None:
    import docker

    # Creating needs no GPU; starting would fail without the NVIDIA runtime, so don't.
    request = docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])
    ct = run_container(["sleep", "300"], start=False, device_requests=[request])
    info = find(source.read(), ct.id)
    assert info is not None
    assert info.status == "created"
    assert (info.gpu_request, info.gpu_request_via) == ("all", "device_requests")


def test_visible_devices_env_and_no_secret(source: DockerSource, run_container: Any) -> None:
    env = ["NVIDIA_VISIBLE_DEVICES=0,1", "SECRET=hunter2", "NVIDIA_DRIVER_CAPABILITIES=utility"]
    ct = run_container(["sleep", "300"], environment=env)
    reading = source.read()
    info = find(reading, ct.id)
    assert info is not None
    assert (info.gpu_request, info.gpu_request_via) == (("0", "1"), "env")
    assert info.nvidia_capabilities == ("utility",)
    text = repr(reading) + repr(vars(source))
    assert "hunter2" not in text
    assert "SECRET" not in text


def test_events_add_and_remove_without_relist(source: DockerSource, run_container: Any) -> None:
    assert source.read().status.ok
    before = source.api_calls
    ct = run_container(["sleep", "300"])
    # create and start arrive as events; the next read inspects the new id, no list
    info = wait_for(lambda: find(source.read(), ct.id))
    assert info is not None
    assert info.status == "running"
    assert source.api_calls == before + 1, "expected exactly one inspect, no full list"
    ct.remove(force=True)
    assert wait_for(lambda: find(source.read(), ct.id) is None)


def test_unchanged_set_makes_no_api_calls(source: DockerSource, run_container: Any) -> None:
    run_container(["sleep", "300"])
    run_container(["sh", "-c", "exit 0"], start=False)
    source.read()
    time.sleep(0.3)  # let any trailing events of the setup land
    source.read()
    calls = source.api_calls
    for _ in range(5):
        assert source.read().status.ok
    assert source.api_calls == calls


def test_cpu_and_memory_of_busy_container(
    source: DockerSource, run_container: Any, docker_engine: Any
) -> None:
    # On a shared machine a spinning container may get far less than a core, so the figure is
    # compared with the engine's own (docker stats' formula over a window inside ours), not with
    # a fixed share of a core.
    ct = run_container(["sh", "-c", "while :; do :; done"], mem_limit="64m")
    source.read()
    time.sleep(0.3)
    source.read()  # our window starts here
    stats = docker_engine.api.stats(ct.id, stream=False)  # two engine samples ~1 s apart
    info = find(source.read(), ct.id)  # ...and ends here, around the engine's window
    assert info is not None
    engine = engine_cpu_percent(stats)
    assert engine is not None and engine > 0, stats.get("cpu_stats")
    assert info.cpu_percent is not None
    assert abs(info.cpu_percent - engine) <= 20 + 0.3 * engine, (info.cpu_percent, engine)
    assert info.memory_used_bytes is not None
    assert info.memory_used_bytes > 0
    assert info.memory_limit_bytes == 64 * 1024 * 1024


def test_a_one_shot_measures_cpu_from_its_start_up_sample(
    run_container: Any, docker_engine: Any, free_run_id: str
) -> None:
    # The start-up walk finds the engine's real cgroup layout (v1 or v2, either driver), and
    # the one-shot's first read takes the container's CPU % over the window since then.
    ct = run_container(["sh", "-c", "while :; do :; done"])
    start = early_cgroup_cpu()
    assert start is not None
    assert any(ct.id in str(path) for path in start.usage_ns), sorted(map(str, start.usage_ns))
    stats = docker_engine.api.stats(ct.id, stream=False)  # the engine's window, ~1 s, inside ours
    src = DockerSource(label=f"{TEST_LABEL}={free_run_id}", cpu_settle_s=0.1, cpu_start=start)
    try:
        info = find(src.read(), ct.id)
    finally:
        src.close()
    assert info is not None and info.cpu_percent is not None
    engine = engine_cpu_percent(stats)
    assert engine is not None and engine > 0, stats.get("cpu_stats")
    assert abs(info.cpu_percent - engine) <= 20 + 0.3 * engine, (info.cpu_percent, engine)


def test_memory_matches_docker_stats(
    source: DockerSource, run_container: Any, docker_engine: Any
) -> None:
    """Same number as the engine's stats API (one slow call, tests only)."""
    ct = run_container(["sleep", "300"], mem_limit="32m")
    info = find(source.read(), ct.id)
    assert info is not None
    used, limit = engine_memory(docker_engine.api.stats(ct.id, stream=False))
    assert limit == info.memory_limit_bytes
    assert used is not None
    assert info.memory_used_bytes is not None
    assert abs(used - info.memory_used_bytes) < 512 * 1024  # sampled at different moments


def test_exec_fake_nvidia_smi(source: DockerSource, run_container: Any) -> None:
    ct = run_container(["sleep", "300"])
    result = source.exec(ct.id, ["nvidia-smi"], timeout_s=10)
    assert result.exit_code == 0, result
    assert result.error is None
    assert "NVIDIA-SMI" in result.stdout
    assert "NSpid" in result.stdout
    assert result.argv == ("nvidia-smi",)
    assert not result.timed_out


def test_exec_keeps_stderr_and_exit_code(source: DockerSource, run_container: Any) -> None:
    ct = run_container(["sleep", "300"])
    result = source.exec(ct.id, ["sh", "-c", "echo out; echo err >&2; exit 5"], timeout_s=10)
    assert (result.exit_code, result.stdout, result.stderr) == (5, "out\n", "err\n")
    assert result.error is None


def test_exec_missing_binary(source: DockerSource, run_container: Any) -> None:
    ct = run_container(["sleep", "300"])
    result = source.exec(ct.id, ["/opt/none/nvidia-smi"], timeout_s=10)
    assert result.error is not None
    assert "started without --gpus" in result.error


def test_exec_in_stopped_container(source: DockerSource, run_container: Any) -> None:
    ct = run_container(["sh", "-c", "exit 0"])
    ct.wait(timeout=30)
    result = source.exec(ct.id, ["nvidia-smi"], timeout_s=10)
    assert result.exit_code is None
    assert result.error is not None
    assert "not running" in result.error
    assert "exited" in result.error


def test_exec_unknown_container(source: DockerSource) -> None:
    result = source.exec("0" * 64, ["nvidia-smi"], timeout_s=10)
    assert result.error is not None
    assert "no such container" in result.error


def test_exec_timeout(source: DockerSource, run_container: Any) -> None:
    ct = run_container(["sleep", "300"])
    started = time.monotonic()
    result = source.exec(ct.id, ["sleep", "5"], timeout_s=1)
    assert time.monotonic() - started < 3
    assert result.timed_out
    assert result.exit_code is None
    assert result.error is not None
    assert "gputui stopped it in the container" in result.error  # a local engine: stopped


def test_close_is_prompt_and_idempotent(docker_engine: Any) -> None:
    src = DockerSource()
    assert src.read().status.ok
    started = time.monotonic()
    src.close()
    src.close()
    assert time.monotonic() - started < 2.5


def test_unreachable_engine_is_a_status() -> None:
    now = [1000.0]
    src = DockerSource(base_url="unix:///nonexistent.sock", clock=lambda: now[0])
    reading = src.read()
    assert not reading.status.ok
    assert reading.status.kind in ("not_found", "unreachable")
    assert reading.status.error
    assert "\n" not in reading.status.error
    assert reading.status.fix
    assert "DOCKER_HOST" in reading.status.fix
    assert reading.containers == ()
    # back-off: no reconnect attempt on the next refresh
    calls = src.api_calls
    assert src.read().status == reading.status
    assert src.api_calls == calls
    now[0] += 60
    src.read()
    assert src.api_calls == calls + 1
    result = src.exec("0" * 64, ["nvidia-smi"], 1)
    assert result.error is not None
    assert "unreachable" in result.error
    src.close()


def test_unreachable_tcp_engine() -> None:
    src = DockerSource(base_url="tcp://127.0.0.1:1", timeout=1)
    reading = src.read()
    assert (reading.status.ok, reading.status.kind) == (False, "unreachable")
    src.close()


def test_socket_permission_denied_real(docker_engine: Any) -> None:
    """Read as user nobody (forked child) from the root:docker 0660 socket: a real EACCES."""
    socket_path = "/var/run/docker.sock"
    if os.geteuid() != 0 or not os.path.exists(socket_path):
        pytest.skip("needs root (to drop to nobody) and the default socket")
    if os.stat(socket_path).st_mode & 0o006:
        pytest.skip("the socket is world-accessible: no permission error to provoke")
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: drop privileges, read once, report, exit without pytest's cleanup
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            status = DockerSource(base_url=f"unix://{socket_path}").read().status
            os.write(write_fd, f"{status.ok}|{status.kind}|{status.fix}".encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        report = pipe.read()
    os.waitpid(pid, 0)
    ok, kind, fix = report.split("|")
    assert (ok, kind) == ("False", "permission")
    assert "docker group" in fix


def test_interactive_exec_argv(docker_engine: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.delenv("DOCKER_CONTEXT", raising=False)
    cid = "ab" * 32
    src = DockerSource(base_url="tcp://10.0.0.5:2375")
    assert src.interactive_exec_argv(cid, ["nvidia-smi", "-l", "1"]) == [
        "docker", "-H", "tcp://10.0.0.5:2375", "exec", "-it", cid, "nvidia-smi", "-l", "1",
    ]  # fmt: skip
    monkeypatch.setenv("DOCKER_CONFIG", "/nonexistent-dir")  # no config: the default context
    assert DockerSource().interactive_exec_argv(cid, ["sh"]) == [
        "docker", "exec", "-it", cid, "sh",
    ]  # fmt: skip
    # An id that is not 64 lowercase hex digits never reaches an argv (it could be a flag).
    assert src.interactive_exec_argv("--privileged", ["sh"]) is None
    assert src.interactive_exec_argv(cid.upper(), ["sh"]) is None
    assert isinstance(docker_cli_available(), bool)


def test_events_stream_drop_resyncs(source: DockerSource, run_container: Any) -> None:
    """A dropped events stream is reconnected and followed by one full list."""
    assert source.read().status.ok
    stream = wait_for(lambda: source._events_stream)
    assert stream is not None
    stream.close()  # what a daemon-side disconnect looks like to the events thread
    ct = run_container(["sleep", "300"])  # may happen while no stream listens
    info = wait_for(lambda: find(source.read(), ct.id))
    assert info is not None
    assert wait_for(lambda: source._events_stream not in (None, stream))
    calls_before_resync = source.api_calls
    source.read()  # the reconnect asked for one full list
    assert source.api_calls - calls_before_resync <= 2
    calls = source.api_calls
    source.read()
    assert source.api_calls == calls


class SocketProxy:
    """A unix socket forwarding to the engine's, which a test can take down and bring back."""

    def __init__(self, path: str, target: str) -> None:
        self.path, self.target = path, target
        self._server: socket.socket | None = None
        self._conns: list[socket.socket] = []

    def start(self) -> None:
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(self.path)
        server.listen(16)
        self._server = server
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
                conn.close()
        self._conns.clear()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(self.target)
            self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def test_engine_goes_away_and_comes_back(
    docker_engine: Any, run_container: Any, tmp_path: Any
) -> None:
    # The engine the tests' containers run on (DOCKER_HOST, as docker_engine connects).
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    target = host.removeprefix("unix://")
    if not host.startswith("unix://") or not os.path.exists(target):
        pytest.skip("the engine does not listen on a local unix socket")
    ct = run_container(["sleep", "300"])
    proxy = SocketProxy(str(tmp_path / "docker.sock"), target)
    proxy.start()
    now = [0.0]
    src = DockerSource(base_url=f"unix://{proxy.path}", clock=lambda: now[0])
    try:
        assert find(src.read(), ct.id) is not None
        proxy.stop()
        # the events thread sees the stream end; the next read lists, fails, and reports
        down = wait_for(lambda: (r := src.read()) and not r.status.ok and r)
        assert down, "the engine going away was never reported"
        assert down.status.kind in ("not_found", "unreachable")
        assert down.containers == ()
        proxy.start()
        # Still inside the back-off, but the local socket accepts again: reconnect at once
        # (a restarted engine must not stay "unreachable" for the whole back-off).
        back = src.read()
        assert back.status.ok, back.status
        assert find(back, ct.id) is not None
        assert back.engine is not None
    finally:
        src.close()
        proxy.stop()


def test_unreachable_engine_is_one_readable_sentence(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not ``[Errno 2] No such file or directory``: what is wrong, and where."""
    missing = tmp_path / "missing.sock"
    not_a_socket = tmp_path / "plain-file"
    not_a_socket.write_text("")
    listener = socket.socket(socket.AF_INET)
    listener.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
    port = listener.getsockname()[1]
    cases = {
        f"unix://{missing}": f"no Docker socket at {missing}",
        f"unix://{not_a_socket}": f"nothing accepts connections at {not_a_socket}",
        f"tcp://127.0.0.1:{port}": f"nothing accepts connections at tcp://127.0.0.1:{port}",
    }
    try:
        for url, sentence in cases.items():
            monkeypatch.setenv("DOCKER_HOST", url)
            source = DockerSource()
            status = source.read().status
            source.close()
            assert not status.ok
            assert status.error == sentence
            assert status.fix
    finally:
        listener.close()


def test_a_dockershim_pods_container_is_named_by_its_pod_spec(
    source: DockerSource, run_container: Any, free_run_id: str
) -> None:
    """A container as the kubelet's Docker shim makes it (``k8s_<ctr>_<pod>_<ns>_<uid>_<n>``,
    the ``io.kubernetes.*`` labels) is ``server`` in pod ``ns/pod``, as the CRI sources name
    one; a full list afterwards finds nothing stale (the list's name is the inspect's)."""
    pod = f"infer-{free_run_id[-8:]}"
    labels = {
        "io.kubernetes.container.name": "server",
        "io.kubernetes.pod.name": pod,
        "io.kubernetes.pod.namespace": "serving",
    }
    name = f"k8s_server_{pod}_serving_0123-uid_0"
    ct = run_container(["sleep", "300"], name=name, labels=labels)
    plain = run_container(["sleep", "300"], name=f"k8s_plain_{free_run_id[-8:]}")
    info = wait_for(lambda: find(source.read(), ct.id))
    assert (info.name, info.k8s_pod, info.k8s_namespace) == ("server", pod, "serving")
    assert info.qualified_name == f"serving/{pod}/server"
    # A k8s_ name without the kubelet's labels is nobody's pod: the engine's name stands.
    other = wait_for(lambda: find(source.read(), plain.id))
    assert other.name == plain.name and other.k8s_pod is None
    source._need_resync = True  # the next read lists every container again
    calls = source.api_calls
    assert source.read().status.ok
    assert source.api_calls == calls + 1, "a full list, and no inspect of an unchanged container"
