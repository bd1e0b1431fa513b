"""An engine in a PID namespace of its own: its PIDs are turned into host PIDs, never taken as such.

Real PID namespaces (``unshare --pid --fork``) and the real ``/proc``. The "engine" is a process
that is PID 1 of a new namespace and called ``listen`` on the socket gputui connects to (the
kernel gives a client the credentials of the process that did); its container's process is its
child, PID 2 there. A sibling namespace has a PID 2 of its own, which must not be taken.
Docker under systemd in a podman container is this case (``docs/runtimes.md``).
"""

from __future__ import annotations

import os
import select
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gputui.collect.docker.endpoint import socket_peer_pid
from gputui.collect.docker.source import DockerSource
from gputui.collect.linux.engine_pids import EnginePids
from tests.support.fake_engine import INFO, VERSION, FakeEngine, container, held_open, json_reply
from tests.support.processes import stop_process

CID = "5e1f" + "0123456789abcdef" * 3 + "0123456789ab"
#: PID 1 of the new namespace: listens on the socket handed to it (when there is one),
#: starts a sleep (its PID 2), prints both host PIDs and the sleep's PID in the namespace, and
#: waits for its stdin to close.
_INIT = """
import os, signal, socket, subprocess, sys
if os.environ["LISTEN_FD"]:
    socket.socket(fileno=int(os.environ["LISTEN_FD"])).listen(16)
child = subprocess.Popen(["sleep", "300"])
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # a killed child is reaped, not left a zombie
# /proc is the host's: "self" and the children file speak host PIDs.
with open("/proc/self/status") as fh:
    me = next(line.split()[1] for line in fh if line.startswith("NSpid:"))
with open(f"/proc/{me}/task/{me}/children") as fh:
    (host_child,) = fh.read().split()
print(me, host_child, child.pid, flush=True)
sys.stdin.read()
"""


@dataclass
class Namespace:
    """One ``unshare --pid`` tree: its init's and its sleep's host PIDs, the sleep's PID in it."""

    proc: subprocess.Popen[bytes]
    init: int
    sleep: int
    sleep_in_ns: int


def _need_unshare() -> None:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("CI runs as root with util-linux's unshare (a PID namespace per engine)")
        pytest.skip("needs root and unshare for a PID namespace")


def _start(listener: socket.socket | None) -> Namespace:
    fds = (listener.fileno(),) if listener else ()
    proc = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--kill-child", sys.executable, "-c", _INIT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "LISTEN_FD": str(fds[0]) if fds else ""},
        pass_fds=fds,
    )
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 20)
    if not ready:
        stop_process(proc, 5)
        raise AssertionError("the namespace's init did not start within 20 s")
    init, sleep, sleep_in_ns = (int(f) for f in proc.stdout.readline().split())
    return Namespace(proc, init, sleep, sleep_in_ns)


def _stop(ns: Namespace) -> None:
    assert ns.proc.stdin is not None
    ns.proc.stdin.close()
    stop_process(ns.proc, 5)


@pytest.fixture
def sock_path() -> Iterator[str]:
    path = Path("/tmp") / f"gputui-pidns-{os.getpid()}-{time.monotonic_ns()}.sock"
    yield str(path)
    path.unlink(missing_ok=True)


@pytest.fixture
def engine_ns(sock_path: str) -> Iterator[tuple[Namespace, Namespace, socket.socket]]:
    """A namespace whose init listens on ``sock_path``, and a sibling namespace."""
    _need_unshare()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(sock_path)
    sibling = _start(None)
    try:
        engine = _start(listener)
    except BaseException:
        _stop(sibling)
        listener.close()
        raise
    try:
        yield engine, sibling, listener
    finally:
        _stop(engine)
        _stop(sibling)


def test_the_socket_names_its_listener_in_another_namespace_by_its_host_pid(
    engine_ns: tuple[Namespace, Namespace, socket.socket], sock_path: str
) -> None:
    engine, _, _ = engine_ns
    assert socket_peer_pid(f"unix://{sock_path}", 1.0) == engine.init
    assert socket_peer_pid(f"unix://{sock_path}.missing", 1.0) is None
    assert socket_peer_pid("tcp://127.0.0.1:2375", 1.0) is None  # no local listener to ask


def test_an_engine_pid_is_the_host_pid_of_its_namespace_not_the_siblings(
    engine_ns: tuple[Namespace, Namespace, socket.socket],
) -> None:
    engine, sibling, _ = engine_ns
    # Both sleeps are PID 2 of their namespace: only the engine's is its PID 2.
    assert engine.sleep_in_ns == sibling.sleep_in_ns == 2
    pids = EnginePids("/proc", engine.init)
    assert pids.depth == 1
    assert pids.host_pid(2, CID) == engine.sleep
    assert pids.host_pid(1, CID) == engine.init
    assert pids.host_pid(77, CID) is None  # no such PID in the engine's namespace


def test_an_engine_in_gputuis_namespace_or_of_unknown_namespace_names_host_pids() -> None:
    here = EnginePids("/proc", os.getpid())
    assert here.depth == 0
    assert here.host_pid(12345, CID) == 12345
    unknown = EnginePids("/proc", None)
    assert unknown.depth == 0
    assert unknown.host_pid(12345, CID) == 12345


def test_a_process_gone_since_the_scan_is_not_answered(
    engine_ns: tuple[Namespace, Namespace, socket.socket],
) -> None:
    engine, _, _ = engine_ns
    pids = EnginePids("/proc", engine.init)
    assert pids.host_pid(2, CID) == engine.sleep
    os.kill(engine.sleep, 9)  # gone: the kept scan's answer is checked again, not trusted
    deadline = time.monotonic() + 10
    while Path(f"/proc/{engine.sleep}").exists():
        assert time.monotonic() < deadline, "the killed sleep was not reaped within 10 s"
        time.sleep(0.05)
    assert pids.host_pid(2, CID) is None


def test_the_docker_source_keeps_host_pids_for_an_engine_in_its_own_namespace(
    engine_ns: tuple[Namespace, Namespace, socket.socket], sock_path: str
) -> None:
    """``State.Pid`` of an engine inside a container is that container's PID: before, it was
    kept as a host PID (``/proc/2`` here is a kernel thread, or another process)."""
    engine, _, listener = engine_ns
    other = "0fa1" + CID[4:]
    running = {"Status": "running", "Running": True, "Pid": engine.sleep_in_ns}
    routes = {
        "/version": json_reply(VERSION),
        "/info": json_reply(INFO),
        "/events": held_open,
        "/containers/json": json_reply(
            [
                {"Id": CID, "Names": ["/in-ns"], "State": "running"},
                {"Id": other, "Names": ["/not-in-ns"], "State": "running"},
            ]
        ),
        f"/containers/{CID}/json": json_reply(container(CID, "/in-ns", State=running)),
        f"/containers/{other}/json": json_reply(
            container(other, "/not-in-ns", State={**running, "Pid": 77})
        ),
    }
    with FakeEngine(sock_path, routes, listener=listener) as fake:
        docker = DockerSource(base_url=fake.url, timeout=5.0)
        try:
            reading = docker.read()
            assert reading.status.ok, reading.status
            pids = {c.name: c.pid for c in reading.containers}
            processes = docker.processes(other)
        finally:
            docker.close()
    assert pids == {"in-ns": engine.sleep, "not-in-ns": None}
    assert processes.error is not None
    assert "PID namespace of its own" in processes.error
