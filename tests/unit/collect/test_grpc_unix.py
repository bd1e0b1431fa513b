"""The one gRPC client (unary calls over a unix socket) against a real, hostile gRPC server.

The peer is grpcio's server on a unix socket (tests/support/cri_peer.py, serving whatever
methods a test names): slow, oversized, refusing, absent, and cancelled from another thread.
What each caller makes of a failure is tested with it (test_cri.py, test_pod_resources.py).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gputui.collect import grpc_unix
from gputui.collect.grpc_unix import GrpcFailure, UnixGrpcClient
from tests.support.cri_peer import StartPeer, cri_server, cri_servers
from tests.support.kubelet import grpc_module

grpc = grpc_module()
SERVICE = "/runtime.v1.RuntimeService/"


@pytest.fixture
def peer(tmp_path: Path) -> Iterator[StartPeer]:
    """A gRPC server on a unix socket answering each method as a test says."""
    with cri_servers(tmp_path) as start:
        yield start


@contextlib.contextmanager
def _client(path: str, *, reply: int = 1 << 20, send: int = 1 << 20) -> Iterator[UnixGrpcClient]:
    client = UnixGrpcClient(path, max_reply_bytes=reply, max_send_bytes=send)
    try:
        yield client
    finally:
        client.close()


def _failure(call: Callable[[], object]) -> GrpcFailure:
    with pytest.raises(GrpcFailure) as caught:
        call()
    return caught.value


def test_a_call_sends_the_bytes_and_returns_the_reply_from_threads_at_once(
    tmp_path: Path,
) -> None:
    asked: list[bytes] = []

    def echo(request: bytes, _c: Any) -> bytes:
        asked.append(request)
        time.sleep(0.2)  # the calls overlap on the one channel
        return b"re:" + request

    sock = tmp_path / "later.sock"
    replies: dict[int, bytes] = {}
    # A client made before its peer listens works once it does.
    with _client(str(sock)) as client, cri_server(sock, {"Echo": echo}):

        def ask(n: int) -> None:
            replies[n] = client.call(SERVICE + "Echo", b"%d" % n, 5)

        threads = [threading.Thread(target=ask, args=(n,)) for n in range(4)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(5)
        assert time.monotonic() - started < 0.75  # at once, not one after another
    assert replies == {n: b"re:%d" % n for n in range(4)}
    assert sorted(asked) == [b"0", b"1", b"2", b"3"]


def test_a_slow_peer_is_left_at_the_deadline(
    peer: StartPeer,
) -> None:
    def slow(_r: bytes, _c: Any) -> bytes:
        time.sleep(5)
        return b"late"

    with _client(peer({"Slow": slow})) as client:
        started = time.monotonic()
        failure = _failure(lambda: client.call(SERVICE + "Slow", b"", 0.3))
        assert time.monotonic() - started < 1.3
        # A deadline of nothing (or less) is still a deadline, not a call without one.
        started = time.monotonic()
        assert _failure(lambda: client.call(SERVICE + "Slow", b"", -1)).kind == "timeout"
        assert time.monotonic() - started < 1.0
    assert (failure.kind, failure.code) == ("timeout", "DEADLINE_EXCEEDED")


def test_an_oversized_reply_or_request_is_refused_at_its_cap(
    peer: StartPeer,
) -> None:
    sock = peer({"Huge": lambda _r, _c: b"x" * (64 << 10), "Small": lambda _r, _c: b"ok"})
    with _client(sock, reply=16 << 10, send=1024) as client:
        huge = _failure(lambda: client.call(SERVICE + "Huge", b"", 5))
        assert (huge.kind, huge.code) == ("too_large", "RESOURCE_EXHAUSTED")
        big = _failure(lambda: client.call(SERVICE + "Small", b"r" * 4096, 5))
        assert big.kind == "too_large"
        assert client.call(SERVICE + "Small", b"r" * 1000, 5) == b"ok"  # under both caps
    with _client(sock, reply=128 << 10) as roomy:
        assert len(roomy.call(SERVICE + "Huge", b"", 5)) == 64 << 10


def test_every_call_in_flight_is_cancelled_by_close_from_another_thread(
    peer: StartPeer,
) -> None:
    entered, held = threading.Semaphore(0), threading.Event()

    def hold(_r: bytes, _c: Any) -> bytes:
        entered.release()
        held.wait(10)  # until the test is over: only close() can end the calls
        return b"late"

    client = UnixGrpcClient(peer({"Slow": hold}), max_reply_bytes=1024, max_send_bytes=1024)
    failures: list[GrpcFailure] = []

    def run() -> None:
        try:
            client.call(SERVICE + "Slow", b"", 30)
        except GrpcFailure as exc:
            failures.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    try:
        for thread in threads:
            thread.start()
        assert all(entered.acquire(timeout=5) for _ in threads)
        closer = threading.Thread(target=client.close)
        started = time.monotonic()
        closer.start()
        for thread in (closer, *threads):
            thread.join(5)
        assert time.monotonic() - started < 1.0
    finally:
        held.set()
    assert [f.kind for f in failures] == ["cancelled"] * 3, failures
    after = _failure(lambda: client.call(SERVICE + "Slow", b"", 1))
    assert after.kind == "closed" and str(after) == "the client is closed"
    client.close()  # twice: nothing left to cancel


def test_a_refusing_peer_an_unknown_method_and_no_peer_are_told_apart(
    peer: StartPeer, tmp_path: Path
) -> None:
    def refuse(_r: bytes, context: Any) -> bytes:
        context.abort(grpc.StatusCode.PERMISSION_DENIED, "not for you\nsecond\tline")
        return b""

    def flood(_r: bytes, context: Any) -> bytes:
        context.abort(grpc.StatusCode.NOT_FOUND, "no such thing " * 400)
        return b""

    with _client(peer({"Refuse": refuse, "Flood": flood})) as client:
        denied = _failure(lambda: client.call(SERVICE + "Refuse", b"", 5))
        assert (denied.kind, denied.code) == ("error", "PERMISSION_DENIED")
        assert denied.details == "not for you second line"
        assert str(denied) == "PERMISSION_DENIED: not for you second line"
        flooded = _failure(lambda: client.call(SERVICE + "Flood", b"", 5))
        assert flooded.kind == "not_found"
        assert flooded.details is not None
        assert len(flooded.details) == grpc_unix.MAX_DETAIL_CHARS and "\n" not in str(flooded)
        unknown = _failure(lambda: client.call(SERVICE + "NoSuchMethod", b"", 5))
        assert unknown.kind == "unimplemented"
    with _client(str(tmp_path / "no-such.sock")) as gone:
        absent = _failure(lambda: gone.call(SERVICE + "Refuse", b"", 1))
        assert (absent.kind, absent.code) == ("unavailable", "UNAVAILABLE")


def test_without_grpcio_a_call_says_so_and_installed_answers_without_importing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert grpc_unix.installed()
    monkeypatch.setitem(sys.modules, "grpc", None)  # import grpc now raises ImportError
    grpc_unix.installed.cache_clear()
    try:
        assert not grpc_unix.installed()
        # Made without grpcio: only a call needs it.
        client = UnixGrpcClient("/nonexistent.sock", max_reply_bytes=1024, max_send_bytes=1024)
        missing = _failure(lambda: client.call(SERVICE + "Any", b"", 1))
    finally:
        grpc_unix.installed.cache_clear()
    assert missing.kind == "missing_dependency" and "grpcio" in str(missing)
    client.close()
