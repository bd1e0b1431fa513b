"""A hostile HTTP server on 127.0.0.1 for the client tests: slow, endless, oversized, malformed.

Each connection is served on a daemon thread: the request's head (and its body, by
``Content-Length``) is read, then the server's *behaviour* writes whatever reply it likes to the
socket. Every wait in here ends when the server stops (``stop`` is an Event the behaviours wait
on instead of sleeping), so no test can hang on it.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Callable
from typing import Any

Behaviour = Callable[["HostileServer", socket.socket, bytes], None]


class HostileServer:
    """A TCP server on loopback whose every reply is ``behaviour``.

    Attributes:
        port: The listening port.
        stop: Set when the server stops.
        requests: The request heads received (bytes), in order.
    """

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.stop = threading.Event()
        self.requests: list[bytes] = []
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = int(self._listener.getsockname()[1])
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> HostileServer:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            for conn in self._conns:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
                conn.close()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        data = b""
        try:
            while b"\r\n\r\n" not in data and len(data) < 1 << 20:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            while len(body) < length:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                body += chunk
            self.requests.append(head)
            self.behaviour(self, conn, body)
        except OSError:
            return


def json_reply(sock: socket.socket, body: Any, status: str = "200 OK") -> None:
    """A complete JSON reply with a Content-Length."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
    )
    sock.sendall(head.encode() + data)


def drip(server: HostileServer, sock: socket.socket, data: bytes, every: float) -> None:
    """Send ``data`` one byte every ``every`` seconds until it is sent or the server stops."""
    for byte in data:
        if server.stop.wait(every):
            return
        sock.sendall(bytes((byte,)))


# -- behaviours --------------------------------------------------------------------------------


def silent(server: HostileServer, sock: socket.socket, body: bytes) -> None:
    """Read the request, answer nothing."""
    server.stop.wait(30)


def slow_headers(server: HostileServer, sock: socket.socket, body: bytes) -> None:
    """The status line, then endless header bytes one at a time, 20 a second."""
    sock.sendall(b"HTTP/1.1 200 OK\r\n")
    drip(server, sock, b"X-Slow: " + b"a" * 100_000, 0.05)


def trickle_body(server: HostileServer, sock: socket.socket, body: bytes) -> None:
    """A complete head announcing 100,000 bytes, then the body one byte every 0.05 s."""
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\nConnection: close\r\n\r\n")
    drip(server, sock, b" " * 100_000, 0.05)


def endless_body(server: HostileServer, sock: socket.socket, body: bytes) -> None:
    """A chunked body that never ends (64 KiB chunks of a JSON list's items)."""
    sock.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"[" + b"1," * 32_000
    frame = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    while not server.stop.is_set():
        sock.sendall(frame)


def huge_headers(server: HostileServer, sock: socket.socket, body: bytes) -> None:
    """2,000 header fields of 1 KiB each (2 MiB of head)."""
    sock.sendall(b"HTTP/1.1 200 OK\r\n")
    line = b"X-Big: " + b"b" * 1024 + b"\r\n"
    for _ in range(2_000):
        if server.stop.is_set():
            return
        sock.sendall(line)
    sock.sendall(b"Content-Length: 2\r\n\r\n{}")


def many_headers(server: HostileServer, sock: socket.socket, body: bytes) -> None:
    """500 tiny header fields (within the head's byte cap, over the count cap)."""
    sock.sendall(b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 500 + b"Content-Length: 2\r\n\r\n{}")


def malformed_status(server: HostileServer, sock: socket.socket, body: bytes) -> None:
    """A status line that is not HTTP."""
    sock.sendall(b"HTTX/1.1 two hundred OK\r\nContent-Length: 2\r\n\r\n{}")


def json_answer(answer: Any) -> Behaviour:
    """A behaviour answering ``answer`` (JSON, or raw bytes) with 200, whatever was asked."""

    def behave(server: HostileServer, sock: socket.socket, body: bytes) -> None:
        json_reply(sock, answer)

    return behave
