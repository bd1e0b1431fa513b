"""The one bounded HTTP/1.1 client of gputui (standard library only).

Every connection gputui opens to a server goes through here: the Docker Engine API
(:mod:`gputui.collect.docker.engine_api`) and Prometheus's query API
(:mod:`gputui.fleet.client`). ``http.client`` alone only has a per-``recv`` timeout, so a server
that trickles its status line, headers or body one byte at a time keeps a call alive for ever,
and a reply that never ends is read until memory runs out. Here:

* **One deadline** covers the whole exchange: name resolution, connect, TLS handshake, sending
  the request, the status line, the headers and the body. It is checked before every wait, and
  every wait is given only the time left, so a trickle hits it as surely as silence.
* **Size caps before decoding**: the status line and headers together at most
  :data:`MAX_HEAD_BYTES` (and :data:`MAX_HEADERS` fields), the body at most the caller's cap
  (a too-large ``Content-Length`` is refused before any of the body is read, chunked bodies
  are counted as they come), and a JSON body's nesting is measured before it is parsed.
* **Cancellable from any thread**: :meth:`Cancel.cancel` shuts every socket of its requests
  (a blocked read returns at once) and wakes a connect or a name lookup in progress; the
  request then raises :class:`HttpCancelled`.
* The only threads it starts (name lookups, which the OS gives no timeout) are daemon threads,
  never joined: an abandoned lookup cannot hold the process at exit.
"""

from __future__ import annotations

import contextlib
import errno
import http.client
import io
import json
import math
import os
import select
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from typing import Any

from gputui.boundary.json_limits import finite_float, json_depth, no_constant
from gputui.model.records import record

#: The status line and every header together; a server sending more is refused.
MAX_HEAD_BYTES = 64 << 10
#: Header fields accepted in one reply.
MAX_HEADERS = 100
#: Bytes asked of the socket per read.
READ_SIZE = 64 << 10


class HttpError(Exception):
    """A request failed: the server could not be reached or answered unusably (one line)."""


class HttpTimeout(HttpError):
    """The deadline passed before the exchange was over."""


class HttpCancelled(HttpError):
    """:meth:`Cancel.cancel` was called while (or before) the request ran."""


class HttpReplyError(HttpError):
    """The reply was malformed or too large (status line, headers or body)."""


class HttpTooLarge(HttpReplyError):
    """The body is larger than the caller's cap.

    Attributes:
        limit: The cap, in bytes.
    """

    def __init__(self, limit: int) -> None:
        super().__init__(f"reply larger than {limit} bytes")
        self.limit = limit


class Cancel:
    """A cancellation shared by any number of requests; :meth:`cancel` is final.

    Requests given this object register their socket while they run; :meth:`cancel`, from any
    thread, shuts those sockets down (a blocked read wakes with end of stream, a connect in
    progress is aborted) and wakes name lookups in progress. Every later request given it fails
    at once. It holds no file descriptor of its own.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._events: set[threading.Event] = set()
        self.cancelled = False

    def cancel(self) -> None:
        """Stop every request using this object, now and later (idempotent, any thread)."""
        with self._lock:
            self.cancelled = True
            sockets, events = list(self._sockets), list(self._events)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for event in events:
            event.set()

    def check(self) -> None:
        """Raise :class:`HttpCancelled` if cancelled."""
        if self.cancelled:
            raise HttpCancelled("request cancelled")

    @contextlib.contextmanager
    def watching(self, item: socket.socket | threading.Event) -> Iterator[None]:
        """Shut ``item`` down (a socket) or set it (an event) if cancelled meanwhile.

        Raises:
            HttpCancelled: already cancelled.
        """
        store: set[Any] = self._sockets if isinstance(item, socket.socket) else self._events
        with self._lock:
            self.check()
            store.add(item)
        try:
            yield
        finally:
            with self._lock:
                store.discard(item)


@record(slots=False)
class Target:
    """Where requests go: a unix socket, or a TCP host and port (with TLS when ``tls``).

    Attributes:
        unix_path: The socket path, for a local server (the Docker engine).
        host: Host name or address (TCP).
        port: TCP port.
        tls: The client TLS context; None for plain HTTP.
        host_header: The ``Host`` header's value.
    """

    unix_path: str | None = None
    host: str = "localhost"
    port: int = 80
    tls: ssl.SSLContext | None = None
    host_header: str = "localhost"


def _remaining(deadline: float | None, cancel: Cancel | None) -> float | None:
    if cancel is not None:
        cancel.check()
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise HttpTimeout("deadline passed")
    return left


def _wait(sock: socket.socket, write: bool, deadline: float | None, cancel: Cancel | None) -> None:
    """Wait until ``sock`` is readable (or writable), the deadline or a cancel.

    A cancel shuts the socket down, which ends the wait (Linux aborts a connect in progress).
    """
    left = _remaining(deadline, cancel)
    # poll, not select: select(2) cannot wait on a descriptor numbered 1024 or above, and the
    # /proc and cgroup readers keep thousands open on a busy host, so a new socket's is.
    poller = select.poll()
    poller.register(sock, select.POLLOUT if write else select.POLLIN)
    ready = poller.poll(None if left is None else math.ceil(left * 1000))
    _remaining(deadline, cancel)
    if not ready:
        raise HttpTimeout("deadline passed")


def _resolve(
    host: str, port: int, deadline: float | None, cancel: Cancel | None
) -> list[tuple[Any, ...]]:
    """``getaddrinfo`` within the deadline.

    It has no timeout of its own, so it runs on a daemon thread that is left behind (never
    joined) when the deadline or a cancel comes first.
    """
    import ipaddress  # a TCP target's only: the local engine's unix socket has no host

    with contextlib.suppress(ValueError):
        ipaddress.ip_address(host)
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
    done = threading.Event()
    result: list[Any] = []

    def lookup() -> None:
        try:
            result.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as exc:
            result.append(exc)
        done.set()

    threading.Thread(target=lookup, name="http-resolve", daemon=True).start()
    with contextlib.ExitStack() as stack:
        if cancel is not None:
            stack.enter_context(cancel.watching(done))
        done.wait(_remaining(deadline, cancel))
    _remaining(deadline, cancel)
    if not result:
        raise HttpTimeout("deadline passed")
    if isinstance(result[0], OSError):
        raise result[0]
    return list(result[0])


def connect(target: Target, deadline: float | None, cancel: Cancel | None = None) -> socket.socket:
    """A connected (and, with TLS, handshaken) socket to ``target`` within the deadline.

    Raises:
        HttpTimeout: the deadline passed.
        HttpCancelled: cancelled.
        OSError: refused, unreachable, no such name (``socket.gaierror``), TLS failure
            (``ssl.SSLError``).
    """
    if target.unix_path is not None:
        addresses: list[tuple[Any, ...]] = [
            (socket.AF_UNIX, socket.SOCK_STREAM, 0, "", target.unix_path)
        ]
    else:
        addresses = _resolve(target.host, target.port, deadline, cancel)
    error: OSError | None = None
    for family, kind, proto, _, address in addresses:
        sock = socket.socket(family, kind, proto)
        try:
            with contextlib.ExitStack() as stack:
                if cancel is not None:
                    stack.enter_context(cancel.watching(sock))
                return _connect_one(target, sock, address, deadline, cancel)
        except (HttpTimeout, HttpCancelled):
            sock.close()
            raise
        except OSError as exc:
            sock.close()
            error = exc
    raise error or OSError("no address to connect to")


def _connect_one(
    target: Target,
    sock: socket.socket,
    address: Any,
    deadline: float | None,
    cancel: Cancel | None,
) -> socket.socket:
    """Connect ``sock`` to ``address`` (and shake hands), each wait given only the time left."""
    sock.setblocking(False)
    code = sock.connect_ex(address)
    if code not in (0, errno.EINPROGRESS):
        raise OSError(code, os.strerror(code))
    if code:
        _wait(sock, True, deadline, cancel)
        code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code:
            raise OSError(code, os.strerror(code))
    if target.tls is not None:
        sock = _handshake(target, sock, deadline, cancel)
    sock.setblocking(True)
    return sock


def _handshake(
    target: Target, sock: socket.socket, deadline: float | None, cancel: Cancel | None
) -> socket.socket:
    """The TLS handshake on a non-blocking socket, each wait given only the time left."""
    assert target.tls is not None
    tls = target.tls.wrap_socket(sock, server_hostname=target.host, do_handshake_on_connect=False)
    try:
        while True:
            try:
                tls.do_handshake()
                return tls
            except ssl.SSLWantReadError:
                _wait(tls, False, deadline, cancel)
            except ssl.SSLWantWriteError:
                _wait(tls, True, deadline, cancel)
    except BaseException:
        tls.close()
        raise


class _DeadlineReader(io.RawIOBase):
    """A socket's read side: each ``recv`` waits only until the deadline.

    While the head is read, at most :data:`MAX_HEAD_BYTES` are taken from the socket.
    """

    def __init__(self, exchange: Exchange) -> None:
        self._x = exchange

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        x = self._x
        size = len(buffer)
        if x.head_budget is not None:
            if x.head_budget <= 0:
                raise HttpReplyError(f"status line and headers longer than {MAX_HEAD_BYTES} bytes")
            size = min(size, x.head_budget)
        left = _remaining(x.deadline, x.cancel)
        x.sock.settimeout(left)
        try:
            count = x.sock.recv_into(buffer, size)
        except TimeoutError as exc:
            raise HttpTimeout("deadline passed") from exc
        except OSError:
            if x.cancel is not None:
                x.cancel.check()
            raise
        if x.cancel is not None:
            x.cancel.check()  # a cancel's shutdown reads as end of stream: say what it was
        if x.head_budget is not None:
            x.head_budget -= count
        return count


class _DeadlineSocket:
    """What :mod:`http.client` needs of a socket, with the exchange's deadline on every wait."""

    def __init__(self, exchange: Exchange) -> None:
        self._x = exchange

    def sendall(self, data: bytes) -> None:
        x = self._x
        view = memoryview(data)
        while view:
            x.sock.settimeout(_remaining(x.deadline, x.cancel))
            try:
                sent = x.sock.send(view[: 1 << 16])
            except TimeoutError as exc:
                raise HttpTimeout("deadline passed") from exc
            view = view[sent:]

    def makefile(self, mode: str, *args: Any, **kwargs: Any) -> io.BufferedReader:
        return io.BufferedReader(_DeadlineReader(self._x), READ_SIZE)

    def close(self) -> None:
        # http.client "closes" the connection as soon as a Connection: close reply's headers
        # are read, while the body is still to come: the socket is closed by Exchange.close().
        pass


class _Connection(http.client.HTTPConnection):
    def __init__(self, exchange: Exchange) -> None:
        super().__init__(exchange.target.host_header)
        self._x = exchange

    def connect(self) -> None:
        self._x.open_socket()
        self.sock = _DeadlineSocket(self._x)


class Exchange:
    """One request on a fresh connection (no keep-alive state to go stale), under one deadline.

    Args:
        target: Where to connect.
        deadline: ``time.monotonic()`` value by which the exchange must be over; None: no
            deadline (only for streams that are meant to stay open, after their headers).
        cancel: A :class:`Cancel` that can stop this request from another thread.

    Attributes:
        response: The reply, once :meth:`send` returned.
        deadline: Can be moved after the headers (a followed stream waits as long as it takes).
    """

    def __init__(
        self, target: Target, deadline: float | None, cancel: Cancel | None = None
    ) -> None:
        self.target = target
        self.deadline = deadline
        self.cancel = cancel
        self.head_budget: int | None = None
        self._sock: socket.socket | None = None
        self.response: http.client.HTTPResponse | None = None
        self._conn = _Connection(self)
        self._closed = False
        self._watch: contextlib.ExitStack = contextlib.ExitStack()

    @property
    def sock(self) -> socket.socket:
        """The connected socket."""
        if self._sock is None:
            raise OSError("not connected")
        return self._sock

    def open_socket(self) -> None:
        """Connect (called by ``http.client``)."""
        sock = connect(self.target, self.deadline, self.cancel)
        self._sock = sock
        if self.cancel is not None:
            self._watch.enter_context(self.cancel.watching(sock))

    def send(
        self, method: str, path: str, headers: dict[str, str], body: bytes | None = None
    ) -> http.client.HTTPResponse:
        """Send the request and read the status line and headers, within the deadline.

        Raises:
            HttpTimeout / HttpCancelled: as named.
            HttpReplyError: a malformed status line or headers, or more than the caps.
            OSError: the server could not be reached or broke the connection.
        """
        try:
            self._conn.request(method, path, body=body, headers=headers)
            self.head_budget = MAX_HEAD_BYTES
            response = self._conn.getresponse()
            self.head_budget = None
            if len(response.headers) > MAX_HEADERS:
                raise HttpReplyError(f"more than {MAX_HEADERS} header fields")
        except http.client.HTTPException as exc:
            self.close()
            raise HttpReplyError(f"malformed HTTP reply ({type(exc).__name__})") from exc
        except BaseException:
            self.close()
            raise
        self.response = response
        return response

    def read_body(self, max_bytes: int) -> bytes:
        """The whole body (chunked or not), refusing one larger than ``max_bytes``.

        Raises:
            HttpTooLarge: more than ``max_bytes`` (said by ``Content-Length`` or counted).
            HttpTimeout / HttpCancelled / HttpReplyError / OSError: as :meth:`send`.
        """
        response = self.response
        assert response is not None
        if response.length is not None and response.length > max_bytes:
            raise HttpTooLarge(max_bytes)
        parts: list[bytes] = []
        size = 0
        try:
            while chunk := response.read(READ_SIZE):
                size += len(chunk)
                if size > max_bytes:
                    raise HttpTooLarge(max_bytes)
                parts.append(chunk)
        except http.client.HTTPException as exc:
            raise HttpReplyError(f"malformed HTTP reply ({type(exc).__name__})") from exc
        return b"".join(parts)

    def read1(self, size: int = READ_SIZE) -> bytes:
        """The next bytes of the body (at most ``size``), ``b""`` at its end.

        Raises:
            HttpTimeout / HttpCancelled / HttpReplyError / OSError: as :meth:`send`.
        """
        assert self.response is not None
        try:
            return self.response.read1(size)
        except http.client.HTTPException as exc:
            raise HttpReplyError(f"malformed HTTP reply ({type(exc).__name__})") from exc

    def readline(self, limit: int) -> bytes:
        """The next line of the body (at most ``limit`` bytes), ``b""`` at its end.

        Raises:
            HttpTimeout / HttpCancelled / HttpReplyError / OSError: as :meth:`send`.
        """
        assert self.response is not None
        try:
            return self.response.readline(limit)
        except http.client.HTTPException as exc:
            raise HttpReplyError(f"malformed HTTP reply ({type(exc).__name__})") from exc

    def shutdown(self) -> None:
        """Wake a reader blocked on this exchange (from another thread): it sees end of stream."""
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        """Close the connection and its socket for good (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._watch.close()
        with contextlib.suppress(Exception):
            self._conn.close()
        if self._sock is not None:
            self._sock.close()


def decode_json(body: bytes, max_depth: int) -> Any:
    """Parse a JSON body, refusing one nested deeper than ``max_depth`` before parsing it.

    ``NaN`` and infinities (which ``json`` would accept) and numbers beyond a float's range
    become ``None``, so a non-finite number can only reach a caller as an absent value.

    Raises:
        HttpReplyError: not JSON (or not UTF-8), or nested too deep; the message says which.
    """
    if json_depth(body) > max_depth:
        raise HttpReplyError(f"nests deeper than {max_depth} levels")
    return decode_json_unchecked(body)


def decode_json_unchecked(body: bytes) -> Any:
    """Parse a JSON body whose depth the caller has already measured (:func:`json_shape`).

    Raises:
        HttpReplyError: not JSON.
    """
    try:
        return json.loads(body, parse_constant=no_constant, parse_float=finite_float)
    except (ValueError, RecursionError) as exc:  # ValueError covers UnicodeDecodeError too
        raise HttpReplyError(f"is not valid JSON ({type(exc).__name__})") from exc


def safe_header_value(value: str) -> bool:
    """Whether ``value`` can be sent as a header value (visible Latin-1, spaces, tabs)."""
    return all(ch == "\t" or " " <= ch <= "~" or "\xa0" <= ch <= "\xff" for ch in value)
