"""The metrics endpoint's HTTP server: one prebuilt body, bounded in every direction.

A single-threaded selectors loop instead of a thread per connection (``http.server``,
prometheus-client's own server): idle or half-sent connections, bursts and oversized requests
cost a bounded number of descriptors and no threads, and a scrape never waits for another
client. Connections close after each response. Used by :mod:`gputui.exporter.run`.
"""

from __future__ import annotations

import contextlib
import errno
import selectors
import socket
import threading
import time
from collections.abc import Callable

from gputui.model.records import record

#: The Prometheus text format every Prometheus version reads (what generate_latest writes).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@record
class HttpLimits:
    """What one client may cost the metrics server.

    Attributes:
        max_connections: Connections open at once. A new one beyond it closes the connection
            that has waited longest for its request (with a 503); when every connection is
            already being answered, the new one gets the 503.
        request_deadline_s: Time from accepting a connection to the end of its request head
            (not reset by each byte, so dribbling a request does not hold a connection).
        response_deadline_s: Time a client has to take the whole response.
        max_request_bytes: Longest request head; a longer one is answered 431.
        backlog: Listen backlog (the kernel caps it at ``net.core.somaxconn``).
    """

    max_connections: int = 64
    request_deadline_s: float = 5.0
    response_deadline_s: float = 10.0
    max_request_bytes: int = 8192
    backlog: int = 512


_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
_METRICS_PATHS = (b"/metrics", b"/")
#: Connections accepted per wake-up of the server loop, so a flood cannot starve the others.
_ACCEPT_BATCH = 256
#: How long accepting pauses when the process is out of file descriptors and none can be freed.
_ACCEPT_PAUSE_S = 0.1


def _response(status: int, body: bytes, *, head_only: bool = False, extra: str = "") -> bytes:
    ctype = CONTENT_TYPE if status == 200 else "text/plain; charset=utf-8"
    head = (
        f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {ctype}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\nCache-Control: no-store\r\n"
        f"{extra}\r\n"
    ).encode()
    return head if head_only else head + body


_BUSY = _response(503, b"too many connections\n", extra="Retry-After: 1\r\n")


class _Conn:
    """One client connection: reading its request head, then writing the response."""

    __slots__ = ("deadline", "inbuf", "out", "sock")

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock = sock
        self.deadline = deadline
        self.inbuf = bytearray()
        self.out: memoryview | None = None


class MetricsServer:
    """A single-threaded HTTP/1.1 server of one prebuilt body, bounded in every direction.

    Connections are closed after each response (``Connection: close``). Nothing a client does
    makes the loop wait: sockets are non-blocking and every connection has a deadline.

    Args:
        host: Address to listen on.
        port: Port (0: any free one, see :attr:`port`).
        body: Returns the current exposition body; called once per scrape, must not block.
        limits: Connection, size and time limits.
        log: Receives one line per unexpected error (already made inert by the caller).

    Raises:
        OSError: the address cannot be listened on.
    """

    def __init__(
        self,
        host: str,
        port: int,
        body: Callable[[], bytes],
        limits: HttpLimits,
        log: Callable[[str], None],
    ) -> None:
        self._body = body
        self._log = log
        self._limits = limits
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        self._listener = socket.socket(family, kind, proto)
        try:
            self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._listener.bind(address)
            self._listener.listen(limits.backlog)
            self._listener.setblocking(False)
        except OSError:
            self._listener.close()
            raise
        self.port: int = self._listener.getsockname()[1]
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listener, selectors.EVENT_READ, None)
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._conns: dict[socket.socket, _Conn] = {}
        self._paused_until: float | None = None
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="gputui-export-http", daemon=True)

    def start(self) -> None:
        """Serve on a daemon thread."""
        self._thread.start()

    def close(self, timeout: float = 1.0) -> None:
        """Stop serving and close every socket (waits at most ``timeout`` for the loop)."""
        self._closing = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        self._thread.join(timeout)

    def _run(self) -> None:
        try:
            while not self._closing:
                try:
                    self._step()
                except Exception as exc:  # a bug must not end the endpoint: log, go on
                    self._log(f"metrics server: {type(exc).__name__}: {exc}")
                    time.sleep(0.05)
        finally:
            for conn in list(self._conns.values()):
                self._drop(conn)
            self._sel.close()
            for sock in (self._listener, self._wake_r, self._wake_w):
                sock.close()

    def _step(self) -> None:
        now = time.monotonic()
        if self._paused_until is not None and now >= self._paused_until:
            self._paused_until = None
            self._sel.register(self._listener, selectors.EVENT_READ, None)
        deadlines = [c.deadline for c in self._conns.values()]
        if self._paused_until is not None:
            deadlines.append(self._paused_until)
        timeout = min([1.0, *(d - now for d in deadlines)])
        for key, _ in self._sel.select(max(0.0, timeout)):
            if key.data is None:
                self._accept()
            elif key.data == "wake":
                with contextlib.suppress(OSError):
                    self._wake_r.recv(64)
            elif key.data.out is None:
                self._read(key.data)
            else:
                self._write(key.data)
        now = time.monotonic()
        for conn in [c for c in self._conns.values() if c.deadline <= now]:
            if conn.out is None:  # the request never came in time
                self._forget(conn)
                self._refuse(conn.sock, _response(408, b"request timeout\n"))
            else:  # the client does not take its response
                self._drop(conn)

    def _accept(self) -> None:
        for _ in range(_ACCEPT_BATCH):
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    # Out of descriptors: free one held by a client that sent nothing yet,
                    # else leave the connection in the backlog for a moment (no busy loop).
                    if self._evict_oldest_reader():
                        continue
                    self._sel.unregister(self._listener)
                    self._paused_until = time.monotonic() + _ACCEPT_PAUSE_S
                    return
                if exc.errno == errno.ECONNABORTED:
                    continue
                raise
            sock.setblocking(False)
            if len(self._conns) >= self._limits.max_connections and not self._evict_oldest_reader():
                self._refuse(sock, _BUSY)
                continue
            conn = _Conn(sock, time.monotonic() + self._limits.request_deadline_s)
            self._conns[sock] = conn
            self._sel.register(sock, selectors.EVENT_READ, conn)
            self._read(conn)  # a scraper's request is usually there already

    def _evict_oldest_reader(self) -> bool:
        """Close the connection that has waited longest for its request (a 503 first)."""
        for conn in self._conns.values():  # insertion order: the oldest first
            if conn.out is None:
                self._forget(conn)
                self._refuse(conn.sock, _BUSY)
                return True
        return False

    def _read(self, conn: _Conn) -> None:
        try:
            chunk = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(conn)
            return
        if not chunk:
            self._drop(conn)
            return
        conn.inbuf += chunk
        end = conn.inbuf.find(b"\r\n\r\n")
        if end < 0:
            end = conn.inbuf.find(b"\n\n")
        limit = self._limits.max_request_bytes
        if end < 0 and len(conn.inbuf) <= limit:
            return
        if end < 0 or end > limit:
            self._answer(conn, _response(431, b"request too large\n"))
            return
        self._answer(conn, self._handle(bytes(conn.inbuf[:end])))

    def _handle(self, head: bytes) -> bytes:
        """The response to one request head."""
        parts = head.split(b"\n", 1)[0].rstrip(b"\r").split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            return _response(400, b"bad request\n")
        method, target = parts[0], parts[1]
        if method not in (b"GET", b"HEAD"):
            return _response(405, b"only GET and HEAD\n", extra="Allow: GET, HEAD\r\n")
        if target.split(b"?", 1)[0] not in _METRICS_PATHS:
            return _response(404, b"not found: metrics are at /metrics\n")
        try:
            body = self._body()
        except Exception as exc:  # a bug: an answer, not a hung scrape
            self._log(f"metrics server: {type(exc).__name__}: {exc}")
            return _response(500, b"internal error\n")
        return _response(200, body, head_only=method == b"HEAD")

    def _answer(self, conn: _Conn, response: bytes) -> None:
        conn.out = memoryview(response)
        conn.inbuf = bytearray()
        conn.deadline = time.monotonic() + self._limits.response_deadline_s
        self._sel.modify(conn.sock, selectors.EVENT_WRITE, conn)
        self._write(conn)

    def _write(self, conn: _Conn) -> None:
        assert conn.out is not None
        try:
            sent = conn.sock.send(conn.out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(conn)
            return
        conn.out = conn.out[sent:]
        if not conn.out:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_WR)
            self._drop(conn)

    @staticmethod
    def _refuse(sock: socket.socket, response: bytes) -> None:
        """Best-effort short answer, then close (a fresh socket's buffer takes it at once)."""
        with contextlib.suppress(OSError):
            sock.send(response)
        sock.close()

    def _forget(self, conn: _Conn) -> None:
        """Stop tracking ``conn`` (its socket is closed or about to be)."""
        self._conns.pop(conn.sock, None)
        with contextlib.suppress(KeyError, ValueError):
            self._sel.unregister(conn.sock)

    def _drop(self, conn: _Conn) -> None:
        self._forget(conn)
        conn.sock.close()
