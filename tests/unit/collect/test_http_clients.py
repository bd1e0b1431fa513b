"""Every HTTP client gputui has, against the same hostile servers on 127.0.0.1.

:data:`CLIENTS` lists each module that makes requests through the one bounded client
(:mod:`gputui.collect.http_client`), with a driver that makes one request the way gputui does
and parses the answer as gputui would. The hostile-server tests are parametrised over that list,
and the AST test below fails when a module builds requests without being in it, or opens a
connection by itself (``http.client``, ``urllib.request``, a client library,
``socket.create_connection``, ``socket.socket(...)``) without being in :data:`EXEMPT` with its
reason. A new client therefore cannot skip these tests.
"""

from __future__ import annotations

import ast
import math
import os
import resource
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from gputui.collect import http_client
from gputui.collect.docker.endpoint import Endpoint as DockerEndpoint
from gputui.collect.docker.engine_api import EngineApi, EngineError
from gputui.collect.http_client import Cancel, Exchange, HttpCancelled, HttpTimeout, Target
from gputui.fleet.client import (
    FleetError,
    PrometheusClient,
    instant_vector,
    parse_url,
    range_matrix,
    server_samples,
    server_seconds,
)
from gputui.notify.config import NotifyTarget
from gputui.notify.send import post_webhook
from tests.support.hostile_http import (
    Behaviour,
    HostileServer,
    endless_body,
    huge_headers,
    json_answer,
    malformed_status,
    many_headers,
    silent,
    slow_headers,
    trickle_body,
)
from tests.support.paths import REPO

PACKAGE = REPO / "gputui"
#: Seconds each request may take in these tests.
TIMEOUT = 1.0
#: What a call may take beyond its deadline on a loaded machine before the test calls it a hang
#: (without the bounded client these calls never return).
SLACK = 3.0


@dataclass(frozen=True)
class Driver:
    """One client: how gputui asks with it, what it raises, and what it says when it gives up.

    Attributes:
        call: Makes one request to ``http://127.0.0.1:PORT`` within ``timeout`` and returns what
            gputui would make of the answer.
        error: The one exception class the client raises for every failure.
        slow: What its message says when the deadline passed.
        too_large: What it says when the body is over its cap.
    """

    call: Callable[[int, float], Any]
    error: type[Exception]
    slow: str
    too_large: str


def _docker(port: int, timeout: float) -> Any:
    api = EngineApi(DockerEndpoint(f"tcp://127.0.0.1:{port}", False, None, True), timeout)
    return api.version()


def _podman(port: int, timeout: float) -> Any:
    # podman's own inspect (runtime, CDI request): a second request per podman container.
    api = EngineApi(DockerEndpoint(f"tcp://127.0.0.1:{port}", False, None, True), timeout)
    return api.libpod_inspect("a" * 64)


def _podman_pod(port: int, timeout: float) -> Any:
    # A podman pod's name: asked once per pod.
    api = EngineApi(DockerEndpoint(f"tcp://127.0.0.1:{port}", False, None, True), timeout)
    return api.libpod_pod("b" * 64)


def _prometheus(port: int, timeout: float) -> Any:
    client = PrometheusClient(parse_url(f"http://127.0.0.1:{port}"), timeout=timeout)
    data = client.query("up", 1.0)
    return {
        "vector": instant_vector(data),
        "matrix": range_matrix(data),
        "server_s": server_seconds(data),
        "samples": server_samples(data),
    }


class DeliveryFailed(Exception):
    """A webhook delivery's outcome when it failed (post_webhook returns, never raises)."""


def _webhook(port: int, timeout: float) -> Any:
    target = NotifyTarget("hook", "webhook", url=f"http://127.0.0.1:{port}/hook", timeout_s=timeout)
    outcome = post_webhook(target, b'{"text": "x"}')
    if not outcome.ok:
        raise DeliveryFailed(outcome.detail)
    return outcome.detail


#: Every module that makes requests through the bounded client, and its driver.
CLIENTS: dict[str, Driver] = {
    "collect/docker/engine_api.py": Driver(_docker, EngineError, "did not answer", "larger than"),
    "collect/docker/engine_api.py::libpod": Driver(
        _podman, EngineError, "did not answer", "larger than"
    ),
    "collect/docker/engine_api.py::libpod-pod": Driver(
        _podman_pod, EngineError, "did not answer", "larger than"
    ),
    "fleet/client.py": Driver(_prometheus, FleetError, "did not answer", "answered more than"),
    "notify/send.py": Driver(_webhook, DeliveryFailed, "did not answer", "answered more than"),
}

#: Modules that open sockets or load an HTTP library without the bounded client, and why.
EXEMPT: dict[str, str] = {
    "collect/http_client.py": "the bounded client itself",
    "collect/docker/endpoint.py": (
        "connect-only probes of a local engine's unix socket (0.5 s timeout, nothing sent "
        "or read): to notice a restarted engine during the back-off, and to ask the kernel "
        "who listens (SO_PEERCRED: the engine's PID namespace)"
    ),
    "collect/docker/source.py": (
        "the Docker SDK, only for ssh:// engines the bounded client cannot reach; each SDK call "
        "runs on a daemon thread given up at its deadline"
    ),
    "exporter/server.py": "the exporter's HTTP server: it listens, never connects",
    "serve/server.py": "`gputui serve`: binds once to check the address (a server, never connects)",
}

_CLIENT_LIBRARIES = {"http.client", "urllib.request", "requests", "urllib3", "httpx", "aiohttp"}
_CLIENT_LIBRARIES |= {"docker", "websocket", "websockets", "textual_serve"}
_SOCKET_CALLS = {"create_connection", "socket", "socketpair", "fromfd"}


def _opens_connections(tree: ast.AST) -> list[str]:
    """What in a module could open a connection by itself."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if _is_client_library(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if _is_client_library(node.module):
                found.append(node.module)
            if node.module == "socket":
                found += [f"socket.{a.name}" for a in node.names if a.name in _SOCKET_CALLS]
            if node.module in ("http", "urllib"):
                found += [
                    f"{node.module}.{a.name}" for a in node.names if a.name in ("client", "request")
                ]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "socket"
            and node.func.attr in _SOCKET_CALLS
        ):
            found.append(f"socket.{node.func.attr}()")
    return found


def _is_client_library(name: str) -> bool:
    return any(name == lib or name.startswith(lib + ".") for lib in _CLIENT_LIBRARIES)


def _builds_requests(tree: ast.AST) -> bool:
    """Whether a module uses the bounded client's request machinery (not just its helpers)."""
    names = {"Exchange", "connect", "Target"}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module == "gputui.collect.http_client"
            and any(a.name in names for a in node.names)
        ):
            return True
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "http_client"
            and node.attr in names
        ):
            return True
    return False


def _modules() -> Iterator[tuple[str, ast.AST]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield str(path.relative_to(PACKAGE)), ast.parse(path.read_text(), filename=str(path))


def test_no_module_opens_a_connection_by_itself() -> None:
    offenders = {
        name: found
        for name, tree in _modules()
        if (found := _opens_connections(tree)) and name not in EXEMPT
    }
    assert not offenders, (
        "connections outside the bounded client (gputui/collect/http_client.py): use it, or "
        f"add the module to EXEMPT with the reason: {offenders}"
    )
    stale = sorted(set(EXEMPT) - {name for name, tree in _modules() if _opens_connections(tree)})
    assert not stale, f"EXEMPT names modules that open nothing: {stale}"


def test_every_client_is_driven_by_the_hostile_tests() -> None:
    users = {name for name, tree in _modules() if _builds_requests(tree)}
    modules = {key.partition("::")[0] for key in CLIENTS}  # a module may have several calls
    assert users == modules, (
        "every module making requests through the bounded client needs a driver in CLIENTS "
        f"(missing: {sorted(users - modules)}, stale: {sorted(modules - users)})"
    )


def test_the_check_sees_what_it_looks_for() -> None:
    source = (
        "import http.client\nfrom urllib import request\nimport socket\n"
        "socket.create_connection(('a', 1))\nsocket.socket()\nimport docker\n"
    )
    found = sorted(_opens_connections(ast.parse(source)))
    assert found == [
        "docker",
        "http.client",
        "socket.create_connection()",
        "socket.socket()",
        "urllib.request",
    ]
    assert _builds_requests(ast.parse("from gputui.collect.http_client import Exchange\n"))
    assert not _builds_requests(ast.parse("from gputui.collect.http_client import Cancel\n"))


# -- the hostile servers, for every client ------------------------------------------------------


def _bounded(call: Callable[[], Any], limit: float) -> tuple[str, Any, float]:
    """Run ``call`` on a daemon thread: ("ok", result) or ("raised", exc), and the seconds.

    A call that does not return within ``limit`` is a failed test, not a hung one.
    """
    outcome: list[tuple[str, Any]] = []

    def run() -> None:
        try:
            outcome.append(("ok", call()))
        except BaseException as exc:
            outcome.append(("raised", exc))

    started = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit)
    elapsed = time.monotonic() - started
    assert outcome, f"the call did not return within {limit:g} s"
    return outcome[0][0], outcome[0][1], elapsed


def _fails_with(
    driver: Driver, behaviour: Behaviour, limit: float, timeout: float = TIMEOUT
) -> tuple[Exception, float]:
    with HostileServer(behaviour) as server:
        kind, value, elapsed = _bounded(lambda: driver.call(server.port, timeout), limit)
    assert kind == "raised", f"no error: {value!r}"
    assert isinstance(value, driver.error), repr(value)
    message = str(value)
    assert message and "\n" not in message
    return value, elapsed


PARAMS = pytest.mark.parametrize("client", sorted(CLIENTS))


@PARAMS
@pytest.mark.parametrize(
    "behaviour", [silent, slow_headers, trickle_body], ids=lambda b: b.__name__
)
def test_a_slow_server_costs_one_deadline(client: str, behaviour: Behaviour) -> None:
    driver = CLIENTS[client]
    error, elapsed = _fails_with(driver, behaviour, TIMEOUT + SLACK + 10)
    assert driver.slow in str(error)
    assert elapsed < TIMEOUT + SLACK, elapsed


@PARAMS
def test_an_endless_body_is_cut_at_the_cap(client: str) -> None:
    driver = CLIENTS[client]
    # A deadline long enough to read past the largest cap (32 MiB) on a loaded machine.
    error, _ = _fails_with(driver, endless_body, 40, timeout=30)
    assert driver.too_large in str(error)


@PARAMS
@pytest.mark.parametrize(
    ("behaviour", "words"),
    [
        (huge_headers, "headers longer than 65536 bytes"),
        (many_headers, "malformed HTTP reply"),
        (malformed_status, "malformed HTTP reply"),
    ],
    ids=["huge-headers", "many-headers", "malformed-status"],
)
def test_a_malformed_head_is_refused(client: str, behaviour: Behaviour, words: str) -> None:
    error, elapsed = _fails_with(CLIENTS[client], behaviour, 10)
    assert words in str(error)
    assert elapsed < TIMEOUT + SLACK


def test_huge_headers_are_refused_after_the_head_cap_not_after_reading_them() -> None:
    read: list[int] = []

    def counting(server: HostileServer, sock: socket.socket, body: bytes) -> None:
        sock.sendall(b"HTTP/1.1 200 OK\r\n")
        line = b"X-Big: " + b"b" * 60_000 + b"\r\n"
        sent = 0
        for _ in range(90):
            try:
                sock.sendall(line)
            except OSError:
                break
            sent += len(line)
        read.append(sent)

    with HostileServer(counting) as server:
        target = Target(host="127.0.0.1", port=server.port)
        exchange = Exchange(target, time.monotonic() + 5)
        with pytest.raises(http_client.HttpReplyError, match="longer than 65536"):
            exchange.send("GET", "/", {"Host": "x"})
        exchange.close()
        server.stop.wait(0.2)
    # The socket was closed after 64 KiB: the server could not push its 5.4 MB of head (at
    # most the kernel's socket buffers took more).
    assert not read or read[0] < 90 * 60_000


_NON_FINITE = [
    b'{"status": "success", "ApiVersion": NaN, "data": {"resultType": "vector", "result": '
    b'[{"metric": {"instance": "a"}, "value": [NaN, "1"]}], "stats": {"timings": '
    b'{"evalTotalTime": Infinity}}}}',
    b'{"status": "success", "ApiVersion": 1e999, "data": {"resultType": "vector", "result": '
    b'[{"metric": {"instance": "a"}, "value": [1e999, "1e999"]}], "stats": {"timings": '
    b'{"evalTotalTime": -1e999}, "samples": {"totalQueryableSamples": 1e999, "peakSamples": 1}}}}',
    b'{"status": "success", "ApiVersion": 1, "data": {"resultType": "matrix", "result": '
    b'[{"metric": {"instance": "a"}, "values": [[' + b"9" * 400 + b', "1"], [1, "NaN"], '
    b'[1, "-Inf"], [2, "3"]]}], "stats": {"timings": {"evalTotalTime": ' + b"9" * 400 + b"}}}}",
]
_WRONG_TYPES: list[Any] = [
    [],
    "text",
    {"status": "success", "data": []},
    {"status": "success", "ApiVersion": 5, "data": {"resultType": "vector", "result": {}}},
    {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [
                {"metric": {"a": 1}, "value": [1, "2"]},
                {"metric": {"instance": "b"}, "value": [{}, "1"]},
                {"metric": [], "value": "x"},
                {"metric": {"instance": "c"}, "value": [True, "1"]},
                {"metric": {"instance": "d"}, "value": [1, 2]},
                7,
            ],
            "stats": {"timings": {"evalTotalTime": "1"}, "samples": {"peakSamples": [1]}},
        },
    },
    {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [{"metric": {"instance": "a"}, "values": [[1, "1"], "x", [1], {"a": 1}]}],
        },
    },
]


def _finite_everywhere(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite_everywhere(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return all(_finite_everywhere(v) for v in value)
    return True


@PARAMS
@pytest.mark.parametrize("body", _NON_FINITE + _WRONG_TYPES, ids=lambda b: str(b)[:30])
def test_odd_numbers_and_types_are_a_value_or_one_error(client: str, body: Any) -> None:
    driver = CLIENTS[client]
    with HostileServer(json_answer(body)) as server:
        kind, value, _ = _bounded(lambda: driver.call(server.port, 10), 20)
    if kind == "raised":
        assert isinstance(value, driver.error), repr(value)
        assert "\n" not in str(value)
    else:
        assert _finite_everywhere(value), value


def test_prometheus_drops_out_of_range_numbers() -> None:
    with HostileServer(json_answer(_NON_FINITE[2])) as server:
        result = _prometheus(server.port, 10)
    assert result["matrix"] == [({"instance": "a"}, [(2.0, 3.0)])]
    assert result["server_s"] is None


# -- cancelling --------------------------------------------------------------------------------


@pytest.mark.parametrize("behaviour", [silent, slow_headers], ids=lambda b: b.__name__)
def test_a_cancel_from_another_thread_ends_a_blocked_request_at_once(behaviour: Behaviour) -> None:
    cancel = Cancel()
    with HostileServer(behaviour) as server:
        client = PrometheusClient(parse_url(server.url), timeout=30)
        started: list[float] = []

        def ask() -> Any:
            started.append(time.monotonic())
            return client.query("up", 1.0, cancel)

        thread_result: list[tuple[str, Any, float]] = []
        worker = threading.Thread(
            target=lambda: thread_result.append(_bounded(ask, 10)), daemon=True
        )
        worker.start()
        # Wait until the server holds the request, then cancel from this thread.
        deadline = time.monotonic() + 5
        while not server.requests and time.monotonic() < deadline:
            server.stop.wait(0.01)
        assert server.requests
        cancel.cancel()
        cancelled_at = time.monotonic()
        worker.join(10)
    kind, value, _ = thread_result[0]
    assert kind == "raised"
    assert isinstance(value, FleetError)
    assert "cancelled" in str(value)
    # At once: far inside the 30 s deadline.
    assert time.monotonic() - cancelled_at < SLACK


def test_a_cancelled_exchange_refuses_to_start_and_a_connect_in_progress_ends() -> None:
    cancel = Cancel()
    cancel.cancel()
    with pytest.raises(HttpCancelled):
        Exchange(Target(host="127.0.0.1", port=9), time.monotonic() + 5, cancel).send(
            "GET", "/", {"Host": "x"}
        )
    # A listener whose backlog is full: a further connect waits (SYN dropped) until cancelled.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(4):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
            fillers.append(filler)
        cancel = Cancel()
        timer = threading.Timer(0.3, cancel.cancel)
        timer.start()
        started = time.monotonic()
        with pytest.raises((HttpCancelled, HttpTimeout)) as caught:
            http_client.connect(Target(host="127.0.0.1", port=port), started + 10, cancel)
        assert caught.type is HttpCancelled
        assert time.monotonic() - started < SLACK
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


def test_a_socket_numbered_above_select_s_limit_still_waits_and_times_out() -> None:
    # The /proc and cgroup readers keep thousands of descriptors open on a busy host, so a
    # request's socket is numbered above 1023, which select(2) cannot wait on.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 1200
    if soft != resource.RLIM_INFINITY and soft < wanted:
        if hard != resource.RLIM_INFINITY and hard < wanted:
            pytest.skip(f"the hard descriptor limit ({hard}) is below {wanted}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    fillers = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    listener = socket.socket()
    backlog: list[socket.socket] = []
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        for _ in range(4):  # a full backlog: the next connect stays in progress
            queued = socket.socket()
            queued.setblocking(False)
            queued.connect_ex(("127.0.0.1", port))
            backlog.append(queued)
        assert backlog[-1].fileno() >= 1024
        started = time.monotonic()
        with pytest.raises(HttpTimeout):
            http_client.connect(Target(host="127.0.0.1", port=port), started + 0.3)
        assert 0.25 <= time.monotonic() - started < SLACK
    finally:
        for queued in backlog:
            queued.close()
        listener.close()
        for fd in fillers:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
