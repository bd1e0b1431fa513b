"""A small, bounded client of Prometheus's HTTP query API, over gputui's one HTTP client.

Requests go through :mod:`gputui.collect.http_client`: one deadline over connect, status line,
headers and body (a server trickling its headers hits it too), caps on the head and on the
answer's size, and cancellation from another thread (:class:`~gputui.collect.http_client.Cancel`).
The answer's JSON nesting and number of results are measured before it is decoded, every
number in it is range-checked where it is parsed (a value out of range is dropped), and every
failure becomes :class:`FleetError`: one sentence saying what went wrong and how to fix it.
Credentials (a bearer token or a user and password) come from the environment or the config
file, are sent only as an ``Authorization`` header and appear in no message and no ``repr``.
"""

from __future__ import annotations

import base64
import math
import socket
import ssl
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import field
from typing import Any, Protocol

from gputui.boundary.json_limits import json_shape
from gputui.boundary.sanitise import safe_text
from gputui.collect.http_client import (
    Cancel,
    Exchange,
    HttpCancelled,
    HttpReplyError,
    HttpTimeout,
    HttpTooLarge,
    Target,
    decode_json_unchecked,
    safe_header_value,
)
from gputui.model.records import record

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
#: Depth at which the items of an answer's ``data.result`` list open (counted before decoding).
RESULT_DEPTH = 4
#: Arrays and objects at that depth that are not results (``stats.timings``, ``stats.samples``).
_NOT_RESULTS = 8
#: Largest magnitude of a sample value kept (sums of 100,000 of them stay finite).
MAX_VALUE = 1e300
#: Sample timestamps kept: from the epoch to the year 5138 (epoch seconds).
MAX_TIMESTAMP = 1e11
#: Longest label name or value kept; a series with a longer one is dropped.
MAX_LABEL_CHARS = 4096
#: Most labels on one series.
MAX_LABELS = 64

ENV_TOKEN = "GPUTUI_PROMETHEUS_TOKEN"
ENV_USER = "GPUTUI_PROMETHEUS_USER"
ENV_PASSWORD = "GPUTUI_PROMETHEUS_PASSWORD"

_CREDENTIALS_FIX = (
    f"set {ENV_TOKEN}, or {ENV_USER} and {ENV_PASSWORD}, or token / user and password "
    "in the [fleet] section of the config file"
)


class FleetError(Exception):
    """Prometheus could not be asked or did not answer usefully; the message is the sentence."""


@record
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


@record
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

    def query(self, promql: str, at: float, cancel: Cancel | None = None) -> Any:
        """The ``data`` member of ``/api/v1/query``'s answer (``cancel`` stops it)."""
        ...

    def query_range(
        self, promql: str, start: float, end: float, step: float, cancel: Cancel | None = None
    ) -> Any:
        """The ``data`` member of ``/api/v1/query_range``'s answer (``cancel`` stops it)."""
        ...


class PrometheusClient:
    """The query API of one Prometheus-compatible server over HTTP(S).

    Each call opens its own connection (the fleet asks a handful of times per refresh), so a
    server that hangs costs one deadline, never a stuck connection; a :class:`Cancel` given to
    a call ends it at once from another thread.
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
        host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
        self._target = Target(
            host=endpoint.host,
            port=endpoint.port,
            tls=ssl.create_default_context() if endpoint.scheme == "https" else None,
            host_header=f"{host}:{endpoint.port}",
        )
        #: Seconds Prometheus reported spending on the last answer (``stats``), when known.
        self.last_server_s: float | None = None
        #: Bytes of the last answer's body.
        self.last_bytes = 0

    def query(self, promql: str, at: float, cancel: Cancel | None = None) -> Any:
        """One instant query at ``at`` (epoch seconds); returns the answer's ``data``."""
        return self._ask("/api/v1/query", {"query": promql, "time": f"{at:.3f}"}, cancel)

    def query_range(
        self, promql: str, start: float, end: float, step: float, cancel: Cancel | None = None
    ) -> Any:
        """One range query; returns the answer's ``data``."""
        return self._ask(
            "/api/v1/query_range",
            {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"},
            cancel,
        )

    def _ask(self, path: str, form: dict[str, str], cancel: Cancel | None) -> Any:
        form = {**form, "stats": "all"}
        body = urllib.parse.urlencode(form).encode()
        headers = {
            "Host": self._target.host_header,
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json",
            "User-Agent": "gputui-fleet",
            "Connection": "close",
        }
        credentials = self._auth.header()
        if credentials is not None:
            if not safe_header_value(credentials):
                raise FleetError(
                    "the Prometheus credentials hold a control or non-Latin-1 character: "
                    + _CREDENTIALS_FIX
                )
            headers["Authorization"] = credentials
        where = self.endpoint.shown
        exchange = Exchange(self._target, time.monotonic() + self.timeout, cancel)
        try:
            response = exchange.send("POST", self.endpoint.prefix + path, headers, body)
            raw = exchange.read_body(self.max_bytes)
        except HttpTooLarge:
            raise FleetError(_too_large(where, self.max_bytes)) from None
        except HttpTimeout:
            raise FleetError(
                f"Prometheus at {where} did not answer within {self.timeout:g} s: "
                "check that it is up, or scope the fleet with --match"
            ) from None
        except HttpCancelled:
            raise FleetError(f"the query to Prometheus at {where} was cancelled") from None
        except HttpReplyError as exc:
            raise FleetError(
                f"{where} did not answer like an HTTP server ({safe_text(str(exc), 80)}): "
                "is the URL right?"
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
        except OSError as exc:
            reason = safe_text(getattr(exc, "strerror", None) or type(exc).__name__, 80)
            raise FleetError(
                f"cannot reach Prometheus at {where} ({reason}): "
                "is it running, and is the URL right?"
            ) from None
        finally:
            exchange.close()
        self.last_bytes = len(raw)
        data = _data(response.status, raw, where)
        self.last_server_s = server_seconds(data)
        return data


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
    depth, opened = json_shape(raw, RESULT_DEPTH)
    if depth <= MAX_JSON_DEPTH:
        if opened > MAX_RESULTS + _NOT_RESULTS:
            # Counted before decoding: an answer of 300,000 series near the size cap cost
            # about 850 MB decoded, only to be refused afterwards.
            raise FleetError(_too_many(opened, about=True))
        try:
            doc = decode_json_unchecked(raw)
        except HttpReplyError:
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


def _too_many(count: int, about: bool = False) -> str:
    # Counted before decoding, the number includes the few objects of ``stats``: "about".
    return (
        f"Prometheus returned {'about ' if about else ''}{count} series (more than "
        f"{MAX_RESULTS}): scope the fleet with --match"
    )


def number(value: object, low: float, high: float) -> float | None:
    """``value`` as a float when it is a JSON number (not a bool) within ``[low, high]``.

    Integers are compared before conversion, so one too large for a float is dropped, never an
    ``OverflowError``; NaN fails every comparison and is dropped too.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not low <= value <= high:
        return None
    return float(value)


def server_seconds(data: Any) -> float | None:
    """Prometheus's own time for the query (``stats.timings.evalTotalTime``), when given."""
    stats = data.get("stats") if isinstance(data, dict) else None
    timings = stats.get("timings") if isinstance(stats, dict) else None
    value = timings.get("evalTotalTime") if isinstance(timings, dict) else None
    return number(value, 0.0, 86_400.0)


def server_samples(data: Any) -> tuple[int, int] | None:
    """Samples Prometheus read for the query, and the most it held at once (``stats.samples``).

    Unlike times, these do not depend on how busy the machine was.
    """
    stats = data.get("stats") if isinstance(data, dict) else None
    samples = stats.get("samples") if isinstance(stats, dict) else None
    if not isinstance(samples, dict):
        return None
    total = number(samples.get("totalQueryableSamples"), 0, 2**53)
    peak = number(samples.get("peakSamples"), 0, 2**53)
    if total is not None and peak is not None:
        return int(total), int(peak)
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
            if value is not None:
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
        raise FleetError(_too_many(len(result)))
    return result


def _labels(item: object) -> dict[str, str] | None:
    """The series' label set, itself (not a copy: the answer is decoded once); None if bad."""
    if not isinstance(item, dict):
        return None
    metric = item.get("metric")
    if not isinstance(metric, dict) or len(metric) > MAX_LABELS:
        return None
    for key, value in metric.items():
        if not isinstance(value, str) or len(key) > MAX_LABEL_CHARS:
            return None
        if len(value) > MAX_LABEL_CHARS:
            return None
    return metric


def _value(pair: object) -> float | None:
    """The float of a ``[time, "value"]`` pair; None when malformed or out of range.

    The time must be a number within the epoch and :data:`MAX_TIMESTAMP`; the value a finite
    number of at most :data:`MAX_VALUE` in magnitude (Prometheus writes values as strings).
    """
    if not isinstance(pair, list) or len(pair) != 2:
        return None
    stamp, text = pair
    if number(stamp, 0.0, MAX_TIMESTAMP) is None or not isinstance(text, str) or len(text) > 40:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    if not math.isfinite(value) or abs(value) > MAX_VALUE:
        return None
    return value
