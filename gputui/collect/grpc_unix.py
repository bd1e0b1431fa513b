"""The one gRPC client of gputui: unary calls to a peer on a unix socket, bounded.

gputui speaks gRPC to two local peers, each through a client of its own that writes and reads
the messages by hand (:mod:`~gputui.collect.kubelet.protowire`): the kubelet's pod-resources API
(:mod:`gputui.collect.kubelet.pod_resources`) and containerd's CRI
(:mod:`gputui.collect.containerd.cri`). The plumbing under both is here, and only here is
``grpc`` imported (tests/unit/test_layering.py):

* **Optional**: gRPC is ``grpcio``, the extra ``pip install 'gputui[kubernetes]'``, imported only
  when a call is made; without it a call fails with kind ``missing_dependency``, and
  :func:`installed` answers without importing it.
* **One channel a client**, made at its first call, under the client's lock; no retries and no
  HTTP proxy (the peer is a local socket).
* **A deadline on every call**, over connect, request and reply.
* **Size caps**: a reply at most the client's ``max_reply_bytes`` (grpcio refuses a larger one
  before it is read whole), a request at most its ``max_send_bytes``.
* **Cancellable from any thread**: :meth:`UnixGrpcClient.close` cancels every call in flight,
  and every call after it fails.

Every failure is one :class:`GrpcFailure` with a ``kind``; each caller words it its own way.
"""

from __future__ import annotations

import functools
import importlib.util
import threading
from typing import Any

#: The longest ``details`` (and message) kept from a failure, after its whitespace is folded.
MAX_DETAIL_CHARS = 1000


@functools.cache
def installed() -> bool:
    """Whether grpcio can be imported (looked up once, without importing it)."""
    try:
        return importlib.util.find_spec("grpc") is not None
    except (ImportError, ValueError):
        return False


def _grpc() -> Any:
    """The ``grpc`` module, or None when grpcio is not installed."""
    try:
        import grpc  # optional extra: only a call to a gRPC peer needs it
    except ImportError:
        return None
    return grpc


def _one_line(value: object) -> str:
    return " ".join(str(value or "").split())[:MAX_DETAIL_CHARS]


class GrpcFailure(Exception):
    """A call that gave no reply; ``str()`` of it is one line.

    Attributes:
        kind: ``missing_dependency`` (grpcio is not installed), ``closed`` (the client was
            closed before the call), ``cancelled`` (closed during it), ``timeout`` (the
            deadline passed), ``too_large`` (the reply, or the request, is over its cap),
            ``unavailable`` (nothing answers on the socket), ``not_found``, ``unimplemented``
            (the peer serves no such method), ``malformed`` (the reply is not bytes) or
            ``error`` (any other status or exception).
        code: The gRPC status's name (``PERMISSION_DENIED``), or the exception's type name where
            the failure has no status; empty for the kinds this module raises itself.
        details: The peer's own words, one line (empty when it said nothing); None when the
            failure carried no details at all (not a gRPC error): then ``str()`` is the
            exception's own words, one line (empty when it had none).
    """

    def __init__(self, message: str, kind: str, code: str = "", details: str | None = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.code = code
        self.details = details


#: gRPC status names whose failure has a kind of its own; every other status is ``error``.
_KINDS = {
    "DEADLINE_EXCEEDED": "timeout",
    "RESOURCE_EXHAUSTED": "too_large",
    "UNAVAILABLE": "unavailable",
    "NOT_FOUND": "not_found",
    "UNIMPLEMENTED": "unimplemented",
    "CANCELLED": "cancelled",
}


def _failure(grpc: Any, exc: Exception) -> GrpcFailure:
    """What a call's exception (a ``grpc.RpcError``, or a cancel from close()) means."""
    code = exc.code() if isinstance(exc, grpc.RpcError) and hasattr(exc, "code") else None
    said = getattr(exc, "details", None)
    details = _one_line(said()) if callable(said) else None
    if code is not None:
        name = str(code.name)
        kind = _KINDS.get(name, "error")
    else:
        name = type(exc).__name__
        kind = "cancelled" if isinstance(exc, grpc.FutureCancelledError) else "error"
    if details is None:  # not the peer's words: the exception's own, as they are
        return GrpcFailure(_one_line(exc), kind, name, None)
    return GrpcFailure(f"{name}: {details}" if details else name, kind, name, details)


class UnixGrpcClient:
    """Unary gRPC calls, bytes in and bytes out, to the peer on one unix socket.

    Calls may run on several threads at once; :meth:`close` cancels every one in flight.

    Args:
        path: The socket.
        max_reply_bytes: The largest reply read (grpcio refuses a larger one).
        max_send_bytes: The largest request sent.
    """

    def __init__(self, path: str, *, max_reply_bytes: int, max_send_bytes: int) -> None:
        self.path = path
        self.max_reply_bytes = max_reply_bytes
        self.max_send_bytes = max_send_bytes
        self._lock = threading.Lock()
        self._channel: Any = None
        self._calls: set[Any] = set()
        self._closed = False

    def call(self, method: str, request: bytes, timeout_s: float) -> bytes:
        """Send ``request`` to ``method`` (``/package.Service/Method``) and wait for the reply.

        Args:
            method: The method's full name.
            request: The request message, encoded.
            timeout_s: Seconds for the whole call: connecting, the request and the reply.

        Returns:
            The reply message, still encoded.

        Raises:
            GrpcFailure: no reply, with the failure's kind.
        """
        grpc = _grpc()
        if grpc is None:
            raise GrpcFailure("grpcio is not installed", "missing_dependency")
        call: Any = None
        try:
            with self._lock:
                if self._closed:
                    raise GrpcFailure("the client is closed", "closed")
                if self._channel is None:
                    self._channel = grpc.insecure_channel(
                        f"unix://{self.path}",
                        options=[
                            ("grpc.max_receive_message_length", self.max_reply_bytes),
                            ("grpc.max_send_message_length", self.max_send_bytes),
                            ("grpc.enable_retries", 0),
                            ("grpc.enable_http_proxy", 0),
                        ],
                    )
                rpc = self._channel.unary_unary(method)
                # Bytes in, bytes out (no generated code); registered under the lock, so a
                # close() that takes it next cancels this call.
                call = rpc.future(request, timeout=max(timeout_s, 0.001))
                self._calls.add(call)
            reply = call.result()
        except GrpcFailure:
            raise
        except Exception as exc:  # grpc.RpcError, or a cancel from close()
            raise _failure(grpc, exc) from None
        finally:
            with self._lock:
                self._calls.discard(call)
        if not isinstance(reply, bytes):
            raise GrpcFailure("the reply is not bytes", "malformed")
        return reply

    def close(self) -> None:
        """Cancel every call in flight (from any thread) and close the channel."""
        with self._lock:
            self._closed = True
            calls, channel = list(self._calls), self._channel
            self._channel = None
        for call in calls:
            call.cancel()
        if channel is not None:
            channel.close()
