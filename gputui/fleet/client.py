"""A small, bounded client of Prometheus's HTTP query API (stdlib ``http.client`` only).

Every request has a deadline (connect and the whole answer), the answer's size, JSON nesting
and number of results are capped, and every failure becomes :class:`FleetError`: one sentence
saying what went wrong and how to fix it. Credentials (a bearer token or a user and password)
come from the environment or the config file, are sent only as an ``Authorization`` header and
appear in no message and no ``repr``.
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from gputui.collect.docker.engine_api import json_depth
from gputui.derive.fmt import safe_text

#: Seconds to wait for one answer, connect included.
DEFAULT_TIMEOUT_S = 10.0
#: The largest answer read (a 500-host table is about 1 MiB).
MAX_ANSWER_BYTES = 32 * 1024 * 1024
#: Deepest JSON nesting accepted (a Prometheus answer nests 5 levels).
MAX_JSON_DEPTH = 32
#: Most series taken from one answer; more means the fleet must be scoped with --match.
MAX_RESULTS = 100_000
#: Most points taken from one range series.
MAX_POINTS = 11_000

ENV_TOKEN = "GPUTUI_PROMETHEUS_TOKEN"
ENV_USER = "GPUTUI_PROMETHEUS_USER"
ENV_PASSWORD = "GPUTUI_PROMETHEUS_PASSWORD"

_CREDENTIALS_FIX = (
    f"set {ENV_TOKEN}, or {ENV_USER} and {ENV_PASSWORD}, or token / user and password "
    "in the [fleet] section of the config file"
)


class FleetError(Exception):
    """Prometheus could not be asked or did not answer usefully; the message is the sentence."""


@dataclass(frozen=True, slots=True)
class Auth:
    """Credentials for the query API; never part of a message or a ``repr``.

    Attributes:
        token: A bearer token.
        user: A basic-auth user (with ``password``).
        password: The basic-auth password.
    """

    token: str | None = field(default=None, repr=False)
    user: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)

    def header(self) -> str | None:
        """The ``Authorization`` header's value, or None without credentials."""
        if self.token:
            return f"Bearer {self.token}"
        if self.user is not None:
            raw = f"{self.user}:{self.password or ''}".encode()
            return "Basic " + base64.b64encode(raw).decode("ascii")
        return None


def auth_from(
    env: Mapping[str, str], token: str | None, user: str | None, password: str | None
) -> Auth:
    """Credentials from the environment, else from the config file's ``[fleet]`` values.

    Args:
        env: The process environment.
        token: The config file's token, if any.
        user: The config file's user, if any.
        password: The config file's password, if any.
    """
    if env.get(ENV_TOKEN):
        return Auth(token=env[ENV_TOKEN])
    if env.get(ENV_USER):
        return Auth(user=env[ENV_USER], password=env.get(ENV_PASSWORD, ""))
    if token:
        return Auth(token=token)
    if user:
        return Auth(user=user, password=password or "")
    return Auth()


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A validated base URL of a query API.

    Attributes:
        scheme: ``http`` or ``https``.
        host: Host name or address (IPv6 without brackets).
        port: TCP port.
        prefix: Path before ``/api/v1`` (``""`` or ``/prometheus``), without a trailing slash.
    """

    scheme: str
    host: str
    port: int
    prefix: str

    @property
    def shown(self) -> str:
        """The URL as messages show it (no credentials ever: the URL cannot hold any)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return safe_text(f"{self.scheme}://{host}:{self.port}{self.prefix}", 200)


def parse_url(text: str) -> Endpoint:
    """Validate the ``--prometheus`` URL.

    Raises:
        FleetError: not http(s), no host, a bad port, a query or fragment, or credentials in it.
    """
    shown = safe_text(text, 100)
    try:
        parts = urllib.parse.urlsplit(text.strip())
        port = parts.port
    except ValueError:
        raise FleetError(f"{shown!r} is not a URL: give one like http://prometheus:9090") from None
    if parts.scheme not in ("http", "https"):
        raise FleetError(
            f"{shown!r} is not an http:// or https:// URL: give one like http://prometheus:9090"
        )
    if parts.username is not None or parts.password is not None:
        raise FleetError(f"credentials do not belong in the URL: {_CREDENTIALS_FIX}")
    if not parts.hostname:
        raise FleetError(f"{shown!r} names no host: give one like http://prometheus:9090")
    if parts.query or parts.fragment:
        raise FleetError(f"{shown!r} has a query or fragment: give the server's base URL only")
    prefix = parts.path.rstrip("/")
    if prefix.endswith("/api/v1"):
        prefix = prefix[: -len("/api/v1")]
    default = 443 if parts.scheme == "https" else 80
    return Endpoint(parts.scheme, parts.hostname, port or default, prefix)


class QueryApi(Protocol):
    """What the fleet needs of a query API: an instant and a range query, raw ``data``."""

    def query(self, promql: str, at: float) -> Any:
        """The ``data`` member of ``/api/v1/query``'s answer."""
        ...

    def query_range(self, promql: str, start: float, end: float, step: float) -> Any:
        """The ``data`` member of ``/api/v1/query_range``'s answer."""
        ...


class PrometheusClient:
    """The query API of one Prometheus-compatible server over HTTP(S).

    Each call opens its own connection (the fleet asks a handful of times per refresh), so a
    server that hangs costs one deadline, never a stuck connection.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        auth: Auth | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_bytes: int = MAX_ANSWER_BYTES,
    ) -> None:
        self.endpoint = endpoint
        self._auth = auth or Auth()
        self.timeout = timeout
        self.max_bytes = max_bytes
        #: Seconds Prometheus reported spending on the last answer (``stats``), when known.
        self.last_server_s: float | None = None
        #: Bytes of the last answer's body.
        self.last_bytes = 0

    def query(self, promql: str, at: float) -> Any:
        """One instant query at ``at`` (epoch seconds); returns the answer's ``data``."""
        return self._ask("/api/v1/query", {"query": promql, "time": f"{at:.3f}"})

    def query_range(self, promql: str, start: float, end: float, step: float) -> Any:
        """One range query; returns the answer's ``data``."""
        return self._ask(
            "/api/v1/query_range",
            {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"},
        )

    def _ask(self, path: str, form: dict[str, str]) -> Any:
        form = {**form, "stats": "all"}
        body = urllib.parse.urlencode(form).encode()
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json",
            "User-Agent": "gputui-fleet",
        }
        header = self._auth.header()
        if header is not None:
            headers["Authorization"] = header
        where = self.endpoint.shown
        deadline = time.monotonic() + self.timeout
        conn = self._connection()
        try:
            conn.request("POST", self.endpoint.prefix + path, body=body, headers=headers)
            response = conn.getresponse()
            raw = _read_bounded(conn, response, deadline, self.max_bytes, where)
        except FleetError:
            raise
        except TimeoutError:
            raise FleetError(
                f"Prometheus at {where} did not answer within {self.timeout:g} s: "
                "check that it is up, or scope the fleet with --match"
            ) from None
        except ssl.SSLError as exc:
            raise FleetError(
                f"TLS with {where} failed ({safe_text(exc.reason or str(exc), 80)}): "
                "check the URL's scheme and the server's certificate"
            ) from None
        except ConnectionRefusedError:
            raise FleetError(
                f"cannot reach Prometheus at {where} (connection refused): "
                "is it running, and is the URL right?"
            ) from None
        except socket.gaierror:
            raise FleetError(
                f"cannot resolve the host of {where}: check the URL's host name"
            ) from None
        except (OSError, http.client.HTTPException) as exc:
            reason = safe_text(getattr(exc, "strerror", None) or type(exc).__name__, 80)
            raise FleetError(
                f"cannot reach Prometheus at {where} ({reason}): "
                "is it running, and is the URL right?"
            ) from None
        finally:
            conn.close()
        self.last_bytes = len(raw)
        data = _data(response.status, raw, where)
        self.last_server_s = server_seconds(data)
        return data

    def _connection(self) -> http.client.HTTPConnection:
        e = self.endpoint
        if e.scheme == "https":
            return http.client.HTTPSConnection(
                e.host, e.port, timeout=self.timeout, context=ssl.create_default_context()
            )
        return http.client.HTTPConnection(e.host, e.port, timeout=self.timeout)


def _read_bounded(
    conn: http.client.HTTPConnection,
    response: http.client.HTTPResponse,
    deadline: float,
    max_bytes: int,
    where: str,
) -> bytes:
    """The body, read in slices each waiting only until ``deadline``, at most ``max_bytes``."""
    length = response.getheader("Content-Length")
    if length is not None and length.isdigit() and int(length) > max_bytes:
        raise FleetError(_too_large(where, max_bytes))
    chunks: list[bytes] = []
    total = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        if conn.sock is not None:
            conn.sock.settimeout(left)
        chunk = response.read1(65536)
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > max_bytes:
            raise FleetError(_too_large(where, max_bytes))
        chunks.append(chunk)


def _too_large(where: str, max_bytes: int) -> str:
    return (
        f"Prometheus at {where} answered more than {max_bytes // (1024 * 1024)} MiB: "
        "scope the fleet with --match"
    )


def _data(status: int, raw: bytes, where: str) -> Any:
    """The ``data`` of a successful answer; a :class:`FleetError` for every other one."""
    if status in (401, 403):
        raise FleetError(
            f"Prometheus at {where} refused the request (HTTP {status}, credentials needed "
            f"or wrong): {_CREDENTIALS_FIX}"
        )
    if status == 404:
        raise FleetError(
            f"no Prometheus query API at {where} (HTTP 404): give the server's base URL, "
            "like http://prometheus:9090"
        )
    doc: Any = None
    if json_depth(raw) <= MAX_JSON_DEPTH:
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError):
            doc = None
    if not isinstance(doc, dict):
        if status >= 400:
            raise FleetError(
                f"Prometheus at {where} answered HTTP {status}: check the server's log"
            )
        raise FleetError(
            f"{where} did not answer like a Prometheus query API (no JSON): give the "
            "server's base URL, like http://prometheus:9090"
        )
    if doc.get("status") != "success":
        error = safe_text(str(doc.get("error", "")), 200)
        kind = safe_text(str(doc.get("errorType", "")), 40)
        if kind == "bad_data" or status in (400, 422):
            raise FleetError(
                f"Prometheus at {where} refused the query ({error}): check --match, "
                'a label selector like cluster="a"'
            )
        raise FleetError(
            f"Prometheus at {where} could not run the query ({kind or status}: {error}): "
            "check the server's log, or scope the fleet with --match"
        )
    data = doc.get("data")
    if not isinstance(data, dict):
        raise FleetError(f"{where} answered without data: is it a Prometheus query API?")
    return data


def server_seconds(data: Any) -> float | None:
    """Prometheus's own time for the query (``stats.timings.evalTotalTime``), when given."""
    stats = data.get("stats") if isinstance(data, dict) else None
    timings = stats.get("timings") if isinstance(stats, dict) else None
    value = timings.get("evalTotalTime") if isinstance(timings, dict) else None
    return float(value) if isinstance(value, (int, float)) else None


def server_samples(data: Any) -> tuple[int, int] | None:
    """Samples Prometheus read for the query, and the most it held at once (``stats.samples``).

    Unlike times, these do not depend on how busy the machine was.
    """
    stats = data.get("stats") if isinstance(data, dict) else None
    samples = stats.get("samples") if isinstance(stats, dict) else None
    if not isinstance(samples, dict):
        return None
    total, peak = samples.get("totalQueryableSamples"), samples.get("peakSamples")
    if isinstance(total, int) and isinstance(peak, int):
        return total, peak
    return None


def instant_vector(data: Any) -> list[tuple[dict[str, str], float]]:
    """The (labels, value) of an instant query's vector answer, bounded and type-checked.

    Samples with a malformed label set or value are skipped; label values are kept raw here
    and pass ``safe_text`` when the model is built.

    Raises:
        FleetError: more than :data:`MAX_RESULTS` series.
    """
    result = _results(data, "vector")
    out: list[tuple[dict[str, str], float]] = []
    for item in result:
        labels = _labels(item)
        value = _value(item.get("value") if isinstance(item, dict) else None)
        if labels is not None and value is not None:
            out.append((labels, value))
    return out


def range_matrix(data: Any) -> list[tuple[dict[str, str], list[tuple[float, float]]]]:
    """The (labels, [(time, value)…]) of a range query's matrix answer, bounded."""
    result = _results(data, "matrix")
    out: list[tuple[dict[str, str], list[tuple[float, float]]]] = []
    for item in result:
        labels = _labels(item)
        values = item.get("values") if isinstance(item, dict) else None
        if labels is None or not isinstance(values, list):
            continue
        points: list[tuple[float, float]] = []
        for pair in values[-MAX_POINTS:]:
            value = _value(pair)
            if value is not None and isinstance(pair, list):
                points.append((float(pair[0]), value))
        out.append((labels, points))
    return out


def _results(data: Any, kind: str) -> list[Any]:
    """The ``result`` list of an answer of ``resultType`` ``kind`` (else empty), bounded.

    Raises:
        FleetError: more than :data:`MAX_RESULTS` series.
    """
    if not isinstance(data, dict) or data.get("resultType") != kind:
        return []
    result = data.get("result")
    if not isinstance(result, list):
        return []
    if len(result) > MAX_RESULTS:
        raise FleetError(
            f"Prometheus returned {len(result)} series (more than {MAX_RESULTS}): "
            "scope the fleet with --match"
        )
    return result


def _labels(item: object) -> dict[str, str] | None:
    if not isinstance(item, dict):
        return None
    metric = item.get("metric")
    if not isinstance(metric, dict) or len(metric) > 64:
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in metric.items()):
        return None
    return {str(k): str(v) for k, v in metric.items()}


def _value(pair: object) -> float | None:
    """The float of a ``[time, "value"]`` pair; None when malformed or not finite."""
    if not isinstance(pair, list) or len(pair) != 2:
        return None
    stamp, text = pair
    if not isinstance(stamp, (int, float)) or not isinstance(text, str) or len(text) > 40:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    if value != value or value in (float("inf"), float("-inf")):
        return None
    return value
