"""A lean Docker Engine API client, over gputui's one bounded HTTP client.

The Docker SDK (over ``requests``) only has a per-``recv`` timeout: an engine that trickles one
byte every few seconds keeps a call alive for ever, and a reply that never ends (an endless
chunked body) is read into memory until it runs out. Here every request goes through
:mod:`gputui.collect.http_client`: an overall deadline (connect, headers and body; checked before
each ``recv``, so a trickle hits it too), a size bound on the head and on every body (chunked
decoding included), a nesting bound on every JSON document, and a cap on exec output.

Covers ``unix://`` and ``tcp://`` engines, with TLS from the docker CLI's certificate files.
``ssh://`` engines are left to the Docker SDK (see :mod:`gputui.collect.docker.source`).
"""

from __future__ import annotations

import json
import re
import ssl
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from gputui.collect import http_client
from gputui.collect.docker.endpoint import Endpoint, TlsFiles, unix_socket_path
from gputui.collect.http_client import Exchange, HttpError, HttpTimeout, HttpTooLarge, Target
from gputui.model.records import record

#: Reply size bounds: a list of a few thousand containers, one inspect, the small endpoints.
MAX_LIST_BYTES = 16 << 20
MAX_INSPECT_BYTES = 2 << 20
MAX_SMALL_BYTES = 1 << 20
#: One event is a few hundred bytes (its attributes are the container's labels).
MAX_EVENT_BYTES = 256 << 10
#: The engine's payloads nest about eight levels deep.
MAX_JSON_DEPTH = 64
#: Exec output kept (stdout and stderr together); the rest is cut.
MAX_EXEC_OUTPUT = 1 << 20

#: The container actions gputui makes, and the grace stop and restart give before SIGKILL.
#: Pause and unpause freeze and thaw the container's cgroup (the freezer): no signal is sent.
LIFECYCLE_ACTIONS = ("stop", "start", "restart", "pause", "unpause")
STOP_GRACE_S = 10

#: The podman API version gputui's libpod calls use (podman 4.0 and later serve it).
LIBPOD_API_VERSION = "4.0.0"
_API_VERSION_RE = re.compile(r"^1\.\d{1,3}$")
_READ_SIZE = http_client.READ_SIZE


class EngineError(Exception):
    """The engine could not be asked, or answered in a way gputui cannot use (one line)."""


class EngineSlow(EngineError):
    """The engine did not finish answering before the request's deadline."""


class EngineReplyError(EngineError):
    """The reply was malformed: bad HTTP, too large, not JSON, nested too deep, wrong type."""


class EngineReplyTooLarge(EngineReplyError):
    """The reply was larger than its size bound (a legal but huge payload, such as labels)."""


class EngineStatusError(EngineError):
    """The engine answered with an HTTP error status.

    Attributes:
        status: The HTTP status code.
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class NotFound(EngineStatusError):
    """404: no such container (or exec)."""


def decode_json(body: bytes, what: str) -> Any:
    """Parse a reply body, refusing one nested deeper than :data:`MAX_JSON_DEPTH`.

    Raises:
        EngineReplyError: not JSON, or nested too deep.
    """
    try:
        return http_client.decode_json(body, MAX_JSON_DEPTH)
    except HttpError as exc:
        raise EngineReplyError(f"reply to {what} {exc}") from exc


@record(slots=False)
class ExecOutput:
    """What an exec produced, within its deadline and output cap.

    Attributes:
        stdout: Standard output bytes kept.
        stderr: Standard error bytes kept.
        exit_code: Exit status; None when it had not finished.
        timed_out: The deadline passed before the output ended.
        cut: Output beyond :data:`MAX_EXEC_OUTPUT` was dropped.
    """

    stdout: bytes
    stderr: bytes
    exit_code: int | None
    timed_out: bool
    cut: bool


class RawStream:
    """An open streaming reply (a container's logs): read chunks; :meth:`close` from any thread.

    Attributes:
        content_type: The reply's ``Content-Type`` (the engine names multiplexed and raw
            streams there from API 1.42; older engines leave it to the caller to know).
    """

    def __init__(self, exchange: Exchange, content_type: str) -> None:
        self._exchange = exchange
        self.content_type = content_type[:100]
        self._closed = False

    def read(self) -> bytes:
        """The next bytes of the body (up to 64 KiB), ``b""`` at its end or after :meth:`close`.

        Raises:
            EngineSlow: a stream opened without ``follow`` passed its deadline.
            EngineError: the connection broke.
        """
        if self._closed:
            return b""
        try:
            return self._exchange.read1(_READ_SIZE)
        except HttpTimeout as exc:
            raise EngineSlow("deadline passed") from exc
        except (OSError, ValueError, HttpError) as exc:
            if self._closed:
                return b""
            raise EngineError(f"the logs stream broke: {type(exc).__name__}") from exc

    def close(self) -> None:
        """End the stream; a thread blocked reading it returns (idempotent)."""
        self._closed = True
        self._exchange.shutdown()
        self._exchange.close()


class EventStream:
    """The ``/events`` stream: iterate for event dicts; :meth:`close` ends it from any thread."""

    def __init__(self, exchange: Exchange) -> None:
        self._exchange = exchange
        self._closed = False

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while not self._closed:
            try:
                line = self._exchange.readline(MAX_EVENT_BYTES + 1)
            except (OSError, ValueError, HttpError) as exc:
                raise EngineError(f"events stream ended: {type(exc).__name__}") from exc
            if not line:
                return
            if len(line) > MAX_EVENT_BYTES:
                raise EngineReplyError(f"an event longer than {MAX_EVENT_BYTES} bytes")
            if not line.strip():
                continue
            event = decode_json(line, "GET /events")
            if isinstance(event, dict):
                yield event

    def close(self) -> None:
        """End the stream; a thread blocked reading it returns (idempotent)."""
        self._closed = True
        self._exchange.shutdown()
        self._exchange.close()


class EngineApi:
    """The read-side Engine API calls gputui makes, plus exec, each bounded in time and size.

    Args:
        endpoint: A ``unix://``, ``tcp://``, ``http://`` or ``https://`` endpoint.
        timeout: Seconds each request may take, start to end.

    Raises:
        EngineError: the URL's scheme is not one this client speaks (``ssh://``).
    """

    def __init__(self, endpoint: Endpoint, timeout: float) -> None:
        self.timeout = timeout
        self.api_version: str | None = None
        unix = unix_socket_path(endpoint.base_url)
        self._target = Target(unix_path=unix, host_header="docker")
        if unix is None:
            url = endpoint.base_url
            scheme, _, rest = url.partition("://")
            tls_files = endpoint.tls if isinstance(endpoint.tls, TlsFiles) else None
            if scheme not in ("tcp", "http", "https") or not rest:
                raise EngineError(f"unsupported Docker endpoint {url[:100]!r}")
            if scheme == "https" and tls_files is None:
                tls_files = TlsFiles(None, None, None, verify=True)
            parsed = urllib.parse.urlsplit(f"//{rest}")
            secure = tls_files is not None
            self._target = Target(
                host=parsed.hostname or "localhost",
                port=parsed.port or (2376 if secure else 2375),
                tls=_ssl_context(tls_files) if tls_files is not None else None,
                host_header="docker",
            )

    @staticmethod
    def supports(url: str) -> bool:
        """Whether this client can talk to ``url`` (everything but ``ssh://`` and npipe)."""
        return unix_socket_path(url) is not None or url.startswith(
            ("tcp://", "http://", "https://")
        )

    # --- requests ---------------------------------------------------------------------------

    def _path(self, path: str, query: Mapping[str, str] | None = None) -> str:
        # podman's own API carries its own version (``/v4.0.0/libpod/...``), not the Docker one.
        prefix = f"/v{self.api_version}" if self.api_version and path.startswith("/") else ""
        path = path if path.startswith("/") else f"/{path}"
        suffix = f"?{urllib.parse.urlencode(dict(query))}" if query else ""
        return f"{prefix}{path}{suffix}"

    def _send(self, method: str, path: str, body: Any, deadline: float | None) -> Exchange:
        """Send one request on a fresh connection and read its head, within ``deadline``.

        Raises:
            EngineSlow: the deadline passed (the caller names the request).
            EngineReplyError: a malformed or oversized status line or headers.
            OSError: the engine's socket could not be reached.
        """
        exchange = Exchange(self._target, deadline)
        headers = {"Host": "docker", "User-Agent": "gputui", "Connection": "close"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        what = f"{method} {path.partition('?')[0]}"
        try:
            exchange.send(method, path, headers, data)
        except HttpTimeout as exc:
            raise EngineSlow("deadline passed") from exc
        except HttpError as exc:
            raise EngineReplyError(f"{exc} to {what}") from exc
        return exchange

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        max_bytes: int = MAX_SMALL_BYTES,
        timeout: float | None = None,
    ) -> Any:
        """One API call, its JSON reply decoded; all of it within the deadline.

        Args:
            method: ``GET`` or ``POST``.
            path: The path without the version prefix, e.g. ``/containers/json``.
            query: Query parameters.
            body: A JSON body for ``POST``.
            max_bytes: The largest reply body accepted.
            timeout: Seconds for the whole call; the client's timeout when None.

        Raises:
            EngineSlow: the deadline passed.
            EngineStatusError: an HTTP error status (``NotFound`` for 404).
            EngineReplyError: a malformed or oversized reply.
            OSError: the engine's socket could not be reached.
        """
        what = f"{method} {path}"
        limit = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        try:
            exchange = self._send(method, self._path(path, query), body, deadline)
            try:
                raw = _read_body(exchange, max_bytes, what)
            finally:
                exchange.close()
        except EngineSlow as exc:
            raise EngineSlow(f"the Docker engine did not answer {what} within {limit:g} s") from exc
        response = exchange.response
        assert response is not None
        if response.status >= 400:
            message = _error_message(raw) or response.reason or "error"
            cls = NotFound if response.status == 404 else EngineStatusError
            raise cls(response.status, f"{what}: {response.status} {message}")
        if response.status == 204 or not raw.strip():
            return None
        return decode_json(raw, what)

    def version(self, timeout: float | None = None) -> dict[str, Any]:
        """``GET /version`` (unversioned); remembers the engine's API version for later calls."""
        self.api_version = None
        data = _expect_dict(self.request("GET", "/version", timeout=timeout), "GET /version")
        version = data.get("ApiVersion")
        if isinstance(version, str) and _API_VERSION_RE.match(version):
            self.api_version = version
        return data

    def info(self, timeout: float | None = None) -> dict[str, Any]:
        """``GET /info``."""
        reply = self.request("GET", "/info", max_bytes=MAX_INSPECT_BYTES, timeout=timeout)
        return _expect_dict(reply, "GET /info")

    def containers(
        self, filters: Mapping[str, Sequence[str]], timeout: float | None = None
    ) -> list[Any]:
        """``GET /containers/json?all=1`` with ``filters``."""
        query = {"all": "1"}
        if filters:
            query["filters"] = json.dumps({k: list(v) for k, v in filters.items()})
        reply = self.request(
            "GET", "/containers/json", query=query, max_bytes=MAX_LIST_BYTES, timeout=timeout
        )
        if not isinstance(reply, list):
            raise EngineReplyError("reply to GET /containers/json is not a list")
        return reply

    def inspect(self, container_id: str, timeout: float | None = None) -> dict[str, Any]:
        """``GET /containers/{id}/json`` (within ``timeout`` s; the client's when None)."""
        what = "GET /containers/{id}/json"
        reply = self.request(
            "GET", f"/containers/{container_id}/json", max_bytes=MAX_INSPECT_BYTES, timeout=timeout
        )
        return _expect_dict(reply, what)

    def libpod_inspect(self, container_id: str, timeout: float | None = None) -> dict[str, Any]:
        """The own inspect of podman: ``GET /v4.0.0/libpod/containers/{id}/json`` (podman only).

        It names the OCI runtime and the command the container was created with, which the
        Docker-compatible inspect leaves out; the same size bound.
        """
        what = "GET /libpod/containers/{id}/json"
        reply = self.request(
            "GET",
            f"v{LIBPOD_API_VERSION}/libpod/containers/{container_id}/json",
            max_bytes=MAX_INSPECT_BYTES,
            timeout=timeout,
        )
        return _expect_dict(reply, what)

    def libpod_pod(self, pod_id: str, timeout: float | None = None) -> dict[str, Any]:
        """A podman pod, ``GET /v4.0.0/libpod/pods/{id}/json`` (its name; podman only)."""
        reply = self.request(
            "GET",
            f"v{LIBPOD_API_VERSION}/libpod/pods/{pod_id}/json",
            max_bytes=MAX_INSPECT_BYTES,
            timeout=timeout,
        )
        return _expect_dict(reply, "GET /libpod/pods/{id}/json")

    def events(self, filters: Mapping[str, Sequence[str]]) -> EventStream:
        """Subscribe to ``GET /events``; the reply's headers arrive within the timeout.

        The stream itself has no deadline (an idle engine sends nothing for hours); it ends when
        the engine closes it or :meth:`EventStream.close` is called.
        """
        query = {"filters": json.dumps({k: list(v) for k, v in filters.items()})}
        deadline = time.monotonic() + self.timeout
        try:
            exchange = self._send("GET", self._path("/events", query), None, deadline)
        except EngineSlow as exc:
            raise EngineSlow(
                f"the Docker engine did not answer GET /events within {self.timeout:g} s"
            ) from exc
        assert exchange.response is not None
        status = exchange.response.status
        if status != 200:
            exchange.close()
            raise EngineStatusError(status, f"GET /events: {status}")
        exchange.deadline = None  # subscribed: from now on wait for events as long as it takes
        return EventStream(exchange)

    # --- logs and lifecycle -----------------------------------------------------------------

    def logs(
        self, container_id: str, *, tail: int, follow: bool, timeout: float | None = None
    ) -> RawStream:
        """Open ``GET /containers/{id}/logs`` (stdout, stderr, timestamps, the last ``tail`` lines).

        The reply's headers arrive within ``timeout`` (the client's when None). Without
        ``follow`` the whole body shares that deadline, measured from its headers; with
        ``follow`` the body has none (a quiet container prints nothing for hours) and ends when
        the container stops, the engine closes it or :meth:`RawStream.close` is called.

        Raises:
            EngineSlow: the headers did not arrive in time.
            EngineStatusError: an HTTP error status (``NotFound`` for 404).
            EngineReplyError: a malformed reply.
            OSError: the engine's socket could not be reached.
        """
        what = "GET /containers/{id}/logs"
        query = {
            "stdout": "1",
            "stderr": "1",
            "timestamps": "1",
            "tail": str(max(0, tail)),
            "follow": "1" if follow else "0",
        }
        limit = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        try:
            exchange = self._send(
                "GET", self._path(f"/containers/{container_id}/logs", query), None, deadline
            )
        except EngineSlow as exc:
            raise EngineSlow(f"the Docker engine did not answer {what} within {limit:g} s") from exc
        response = exchange.response
        assert response is not None
        if response.status >= 400:
            try:
                raw = _read_body(exchange, MAX_SMALL_BYTES, what)
            except (EngineError, OSError):
                raw = b""
            finally:
                exchange.close()
            message = _error_message(raw) or response.reason or "error"
            cls = NotFound if response.status == 404 else EngineStatusError
            raise cls(response.status, f"{what}: {response.status} {message}")
        # Following: wait for lines as long as it takes; close() is the way out.
        exchange.deadline = None if follow else time.monotonic() + limit
        return RawStream(exchange, response.getheader("Content-Type") or "")

    def container_action(self, container_id: str, action: str, timeout: float) -> None:
        """``POST /containers/{id}/{stop|start|restart|pause|unpause}``; stop and restart give 10 s.

        A container already in the asked state (304) is not an error.

        Args:
            container_id: The container's full id (the caller validated it).
            action: ``stop``, ``start``, ``restart``, ``pause`` or ``unpause``.
            timeout: Seconds for the whole call: more than the 10 s grace for stop and restart.

        Raises:
            ValueError: an action other than those of :data:`LIFECYCLE_ACTIONS`.
            EngineSlow / EngineStatusError / EngineReplyError / OSError: as :meth:`request`.
        """
        if action not in LIFECYCLE_ACTIONS:
            raise ValueError(f"not a container action: {action[:20]!r}")
        query = {"t": str(STOP_GRACE_S)} if action in ("stop", "restart") else None
        self.request("POST", f"/containers/{container_id}/{action}", query=query, timeout=timeout)

    # --- exec -------------------------------------------------------------------------------

    def exec_create(self, container_id: str, argv: Sequence[str], timeout: float) -> str:
        """``POST /containers/{id}/exec``: the exec's id."""
        body = {"AttachStdout": True, "AttachStderr": True, "Tty": False, "Cmd": list(argv)}
        reply = self.request("POST", f"/containers/{container_id}/exec", body=body, timeout=timeout)
        exec_id = reply.get("Id") if isinstance(reply, dict) else None
        if not isinstance(exec_id, str) or not re.fullmatch(r"[0-9a-f]{64}", exec_id):
            raise EngineReplyError("reply to POST /containers/{id}/exec has no valid exec id")
        return exec_id

    def exec_run(self, exec_id: str, deadline: float, max_output: int) -> ExecOutput:
        """``POST /exec/{id}/start``, reading its output until it ends, the cap or the deadline.

        The connection is closed on return whatever happened, so nothing keeps reading.
        """
        what = "POST /exec/{id}/start"
        exchange = self._send(
            "POST",
            self._path(f"/exec/{exec_id}/start"),
            {"Detach": False, "Tty": False},
            deadline,
        )
        response = exchange.response
        assert response is not None
        try:
            if response.status >= 400:
                raw = _read_body(exchange, MAX_SMALL_BYTES, what)
                raise EngineStatusError(response.status, f"{what}: {_error_message(raw)}")
            return read_multiplexed(exchange.read1, max_output)
        except HttpTimeout as exc:  # the error body did not come in time
            raise EngineSlow(f"the Docker engine did not answer {what} in time") from exc
        except HttpError as exc:
            raise EngineReplyError(f"{exc} to {what}") from exc
        finally:
            exchange.close()

    def exec_exit_code(self, exec_id: str, timeout: float) -> int | None:
        """``GET /exec/{id}/json``: the exit code, None while it still runs."""
        reply = self.request("GET", f"/exec/{exec_id}/json", timeout=timeout)
        if not isinstance(reply, dict) or reply.get("Running"):
            return None
        code = reply.get("ExitCode")
        return (
            code
            if isinstance(code, int) and not isinstance(code, bool) and -1 <= code < 1 << 31
            else None
        )

    def exec_inspect(self, exec_id: str, timeout: float) -> ExecState:
        """``GET /exec/{id}/json``: whether it runs, its PID and its container."""
        return exec_state(self.request("GET", f"/exec/{exec_id}/json", timeout=timeout))


@record
class ExecState:
    """What ``GET /exec/{id}/json`` says of an exec, every field checked.

    Attributes:
        running: The exec's process still runs.
        pid: Its PID as the engine sees it (the host's for a local engine); None when absent
            or out of range.
        container_id: The container it runs in (64 hex digits), None when malformed.
    """

    running: bool
    pid: int | None
    container_id: str | None


#: The kernel never hands out a larger PID (PID_MAX_LIMIT on 64-bit).
_MAX_PID = 1 << 22


def exec_state(reply: Any) -> ExecState:
    """An exec-inspect reply as an :class:`ExecState` (wrong types are absent values)."""
    doc = reply if isinstance(reply, dict) else {}
    pid = doc.get("Pid")
    container = doc.get("ContainerID")
    return ExecState(
        running=doc.get("Running") is True,
        pid=pid if type(pid) is int and 0 < pid <= _MAX_PID else None,
        container_id=(
            container
            if isinstance(container, str) and re.fullmatch(r"[0-9a-f]{64}", container)
            else None
        ),
    )


def read_multiplexed(recv: Callable[[int], bytes], max_output: int) -> ExecOutput:
    """Demultiplex the engine's attach stream (8-byte frame headers) into stdout and stderr.

    Stops at end of stream, at ``max_output`` bytes kept, or when ``recv`` raises
    :class:`EngineSlow` (its deadline): the caller closes the connection either way.

    Args:
        recv: Returns up to n bytes, ``b""`` at end of stream.
        max_output: Bytes of output to keep, stdout and stderr together.
    """
    out = {1: bytearray(), 2: bytearray()}
    pending = bytearray()
    kept = 0
    try:
        while True:
            data = recv(_READ_SIZE)
            if not data:
                break
            pending += data
            while len(pending) >= 8:
                stream, size = pending[0], int.from_bytes(pending[4:8], "big")
                take = min(size, len(pending) - 8)
                room = max_output - kept
                target = out.get(stream, out[1])
                target += pending[8 : 8 + min(take, room)]
                kept += min(take, room)
                if take < size:
                    # The rest of this frame is still on the way: keep its header, shrunk.
                    del pending[8 : 8 + take]
                    pending[4:8] = (size - take).to_bytes(4, "big")
                else:
                    del pending[: 8 + take]
                if kept >= max_output:
                    return ExecOutput(bytes(out[1]), bytes(out[2]), None, False, cut=True)
                if take < size:
                    break
    except (EngineSlow, HttpTimeout):
        return ExecOutput(bytes(out[1]), bytes(out[2]), None, timed_out=True, cut=False)
    return ExecOutput(bytes(out[1]), bytes(out[2]), None, timed_out=False, cut=False)


def _read_body(exchange: Exchange, max_bytes: int, what: str) -> bytes:
    """The whole body, refusing one larger than ``max_bytes`` (chunked or not).

    Raises:
        EngineSlow: the deadline passed.
        EngineReplyError: too large, or malformed.
    """
    try:
        return exchange.read_body(max_bytes)
    except HttpTooLarge as exc:
        raise EngineReplyTooLarge(f"reply to {what} is larger than {max_bytes >> 10} KiB") from exc
    except HttpTimeout as exc:
        raise EngineSlow("deadline passed") from exc
    except HttpError as exc:
        raise EngineReplyError(f"{exc} to {what}") from exc


def _error_message(raw: bytes) -> str:
    """The ``message`` of an engine error body, one line, bounded."""
    try:
        data = decode_json(raw[:MAX_SMALL_BYTES], "error")
    except EngineReplyError:
        return ""
    message = data.get("message") if isinstance(data, dict) else None
    text = " ".join(message.split()) if isinstance(message, str) else ""
    return text[:200]


def _expect_dict(reply: Any, what: str) -> dict[str, Any]:
    if not isinstance(reply, dict):
        raise EngineReplyError(f"reply to {what} is not a JSON object")
    return reply


def _ssl_context(files: TlsFiles) -> ssl.SSLContext:
    """A client TLS context from the docker CLI's ``ca.pem``/``cert.pem``/``key.pem``."""
    context = ssl.create_default_context(cafile=files.ca)
    if not files.verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if files.cert and files.key:
        context.load_cert_chain(files.cert, files.key)
    return context
