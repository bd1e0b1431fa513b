"""A hostile Docker engine on a unix socket, for tests: slow, endless, oversized or malformed.

Each connection is served on a daemon thread by a *behaviour*: a function given the request's
method and path and the connected socket, which writes whatever reply it likes. Every loop in
here ends when the server stops (a bounded ``stop`` wait), so no test can hang on it.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Callable
from typing import Any

Behaviour = Callable[["FakeEngine", str, str, socket.socket], None]

VERSION = {"Version": "27.0.0-fake", "ApiVersion": "1.41"}
INFO = {
    "Runtimes": {"runc": {}},
    "DefaultRuntime": "runc",
    "CgroupDriver": "cgroupfs",
    "CgroupVersion": "2",
    "MemTotal": 1 << 30,
}
GOOD_ID = "c0ffee" + "0" * 58


def reply(sock: socket.socket, body: Any, status: str = "200 OK") -> None:
    """A complete JSON reply with a Content-Length."""
    data = json.dumps(body).encode() if not isinstance(body, bytes) else body
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
    )
    sock.sendall(head.encode() + data)


def container(cid: str = GOOD_ID, name: str = "/fake", **extra: Any) -> dict[str, Any]:
    """A minimal inspect payload."""
    payload: dict[str, Any] = {
        "Id": cid,
        "Name": name,
        "State": {"Status": "created", "Pid": 0},
        "Config": {"Image": "busybox", "Env": [], "Labels": {}},
        "HostConfig": {},
    }
    payload.update(extra)
    return payload


class FakeEngine:
    """A threaded HTTP/1.1 server on a unix socket; ``routes`` maps a path prefix to behaviour.

    Attributes:
        path: The socket path (``DOCKER_HOST=unix://<path>``).
        requests: ``"METHOD /path"`` of every request received, in order.
        stop: Set when the server stops; behaviours wait on it instead of sleeping.
    """

    def __init__(
        self, path: str, routes: dict[str, Behaviour], listener: socket.socket | None = None
    ) -> None:
        """Serve ``routes`` on ``path``.

        Args:
            path: The socket's path.
            routes: Path prefix -> behaviour.
            listener: A socket already bound to ``path`` and listening, when another process
                must have called ``listen`` (the kernel gives a client the credentials of the
                process that did: an engine in a PID namespace of its own).
        """
        self.path = path
        self.routes = routes
        self.requests: list[str] = []
        self.stop = threading.Event()
        self._listening = listener is not None
        self._server = listener or socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        """``unix://`` URL of the socket."""
        return f"unix://{self.path}"

    def __enter__(self) -> FakeEngine:
        if not self._listening:
            self._server.bind(self.path)
            self._server.listen(16)
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        with contextlib.suppress(OSError):
            self._server.close()
        with self._lock:
            for conn in self._conns:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
                    conn.close()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            with self._lock:
                self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        data = b""
        # OSError: the engine was stopped (its connections closed) while this one was opening.
        with contextlib.suppress(OSError):
            conn.settimeout(5)
            while b"\r\n\r\n" not in data and len(data) < 65536:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                data += chunk
            request_line = data.split(b"\r\n", 1)[0].decode("latin-1")
            method, target, _ = [*request_line.split(" "), "", ""][:3]
            path = target.split("?", 1)[0]
            if path.startswith("/v1."):
                path = "/" + path.split("/", 2)[2]
            with self._lock:
                self.requests.append(f"{method} {path}")
            for prefix in sorted(self.routes, key=len, reverse=True):
                if path.startswith(prefix):
                    self.routes[prefix](self, method, path, conn)
                    break
            else:
                reply(conn, {"message": "page not found"}, "404 Not Found")
        with contextlib.suppress(OSError):
            conn.close()


# --- behaviours ---------------------------------------------------------------------------


def json_reply(body: Any) -> Behaviour:
    """Answer every request on the route with ``body``."""

    def behaviour(engine: FakeEngine, method: str, path: str, sock: socket.socket) -> None:
        reply(sock, body)

    return behaviour


def trickle(interval: float = 2.0) -> Behaviour:
    """A valid reply sent one byte every ``interval`` seconds (until the server stops)."""

    def behaviour(engine: FakeEngine, method: str, path: str, sock: socket.socket) -> None:
        data = json.dumps(VERSION).encode()
        head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(data)}\r\n\r\n".encode()
        for byte in head + data:
            sock.sendall(bytes([byte]))
            if engine.stop.wait(interval):
                return

    return behaviour


def endless_chunked_list(engine: FakeEngine, method: str, path: str, sock: socket.socket) -> None:
    """``/containers/json`` as a chunked array that never ends."""
    sock.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n[\r\n")
    item = json.dumps({"Id": GOOD_ID, "Names": ["/x" * 200], "State": "running"}).encode() + b","
    chunk = b"%x\r\n%s\r\n" % (len(item) * 64, item * 64)
    while not engine.stop.is_set():
        sock.sendall(chunk)


def oversize(engine: FakeEngine, method: str, path: str, sock: socket.socket) -> None:
    """A reply announcing (and starting to send) one GiB."""
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1073741824\r\n\r\n[")
    block = b" " * 65536
    for _ in range(16384):
        if engine.stop.is_set():
            return
        sock.sendall(block)


def deep_json(engine: FakeEngine, method: str, path: str, sock: socket.socket) -> None:
    """A small reply nested 200 000 levels deep."""
    reply(sock, b"[" * 200_000 + b"]" * 200_000)


def held_open(engine: FakeEngine, method: str, path: str, sock: socket.socket) -> None:
    """An ``/events`` subscription that sends headers and then nothing."""
    sock.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    engine.stop.wait(30)
