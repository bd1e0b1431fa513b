"""The fleet's query client and command line against small real HTTP servers on loopback.

Each server answers as a misbehaving or protected query API would (401, 404, HTML, a huge or
deeply nested body, silence); the client must turn every case into one sentence with the fix,
within its deadline, and never show a credential.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from gputui.fleet import client as client_module
from gputui.fleet.client import (
    Auth,
    FleetError,
    PrometheusClient,
    auth_from,
    instant_vector,
    parse_url,
)
from gputui.fleet.model import hosts_from
from gputui.fleet.queries import FIELD, host_queries, validate_match
from gputui.fleet.report import to_text
from gputui.fleet.source import FleetSnapshot
from tests.support.net import QuietHTTPServer

TOKEN = "s3cret-token-value"
Answer = Callable[[BaseHTTPRequestHandler], None]


def _ok(handler: BaseHTTPRequestHandler, doc: object) -> None:
    body = json.dumps(doc).encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def _empty_vector(handler: BaseHTTPRequestHandler) -> None:
    _ok(handler, {"status": "success", "data": {"resultType": "vector", "result": []}})


class _Server:
    """A query API on loopback whose answer is set per test; it records what it was sent."""

    def __init__(self) -> None:
        self.answer: Answer = _empty_vector
        self.seen: list[tuple[str, dict[str, str], bytes]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                outer.seen.append((self.path, dict(self.headers.items()), self.rfile.read(length)))
                outer.answer(self)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.httpd = QuietHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server()
    yield s
    s.close()


def _client(url: str, auth: Auth | None = None, timeout: float = 5.0) -> PrometheusClient:
    return PrometheusClient(parse_url(url), auth, timeout=timeout)


# -- URL and selectors ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://prom:9090", "http://prom:9090"),
        ("https://thanos.example/", "https://thanos.example:443"),
        ("http://mimir:8080/prometheus/api/v1", "http://mimir:8080/prometheus"),
        ("http://[::1]:9090", "http://[::1]:9090"),
    ],
)
def test_good_urls(url: str, shown: str) -> None:
    assert parse_url(url).shown == shown


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("ftp://prom:9090", "not an http:// or https:// URL"),
        ("prom:9090", "not an http:// or https:// URL"),
        ("http://", "names no host"),
        ("http://prom:99999", "is not a URL"),
        ("http://prom:9090/?x=1", "query or fragment"),
        ("http://admin:hunter2@prom:9090", "credentials do not belong in the URL"),
    ],
)
def test_bad_urls_are_one_sentence(url: str, words: str) -> None:
    with pytest.raises(FleetError, match=words) as caught:
        parse_url(url)
    assert "hunter2" not in str(caught.value) and "\n" not in str(caught.value)


def test_match_selectors() -> None:
    assert validate_match(['cluster="a"', "{rack=~'r1|r2'}"]) == "cluster=\"a\",rack=~'r1|r2'"
    for bad in ('cluster="a"} or vector(1) #', "cluster", 'a="b" c="d"', "up", '="x"'):
        with pytest.raises(FleetError, match="is not a label selector"):
            validate_match([bad])
    assert 'up{cluster="a"}' in host_queries('cluster="a"')["up"]
    assert "(up)" in host_queries("")["up"]  # no empty braces without a selector
    assert all("cluster" in q for q in host_queries('cluster="a"').values())
    assert len(host_queries("")) == 18 and not any(" or " in q for q in host_queries("").values())


# -- answers ---------------------------------------------------------------------------------


def test_query_is_a_post_with_the_bearer_token(server: _Server) -> None:
    server.answer = _empty_vector
    client = _client(server.url, Auth(token=TOKEN))
    assert client.query("up", 1000.0)["result"] == []
    path, headers, body = server.seen[0]
    assert path == "/api/v1/query"
    assert headers["Authorization"] == f"Bearer {TOKEN}"
    assert b"query=up" in body and b"time=1000.000" in body


def test_basic_auth_from_the_environment(server: _Server) -> None:
    auth = auth_from(
        {"GPUTUI_PROMETHEUS_USER": "ops", "GPUTUI_PROMETHEUS_PASSWORD": "pw"}, None, None, None
    )
    _client(server.url, auth).query("up", 1.0)
    expected = "Basic " + base64.b64encode(b"ops:pw").decode()
    assert server.seen[0][1]["Authorization"] == expected
    assert TOKEN not in repr(Auth(token=TOKEN)) and "pw" not in repr(auth)
    # The environment wins over the config file.
    assert auth_from({"GPUTUI_PROMETHEUS_TOKEN": "env"}, "file", None, None).token == "env"
    assert auth_from({}, "file", None, None).token == "file"


def _status(code: int, body: bytes = b"", content_type: str = "text/html") -> Answer:
    def answer(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(code)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    return answer


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (_status(401, b"Unauthorized"), "HTTP 401, credentials needed or wrong"),
        (_status(403), "GPUTUI_PROMETHEUS_TOKEN"),
        (_status(404, b"404 page not found"), "no Prometheus query API"),
        (_status(200, b"<html>Grafana</html>"), "did not answer like a Prometheus query API"),
        (_status(502, b"<html>bad gateway</html>"), "answered HTTP 502"),
        (
            _status(
                400,
                json.dumps(
                    {"status": "error", "errorType": "bad_data", "error": "parse error"}
                ).encode(),
                "application/json",
            ),
            "refused the query \\(parse error\\): check --match",
        ),
        (
            _status(
                503,
                json.dumps(
                    {"status": "error", "errorType": "timeout", "error": "query timed out"}
                ).encode(),
                "application/json",
            ),
            "could not run the query \\(timeout: query timed out\\)",
        ),
        (_status(200, b"[" * 100 + b"]" * 100, "application/json"), "no JSON"),
    ],
)
def test_failures_are_one_sentence_with_the_fix(
    server: _Server, answer: Answer, words: str
) -> None:
    server.answer = answer
    with pytest.raises(FleetError, match=words) as caught:
        _client(server.url, Auth(token=TOKEN)).query("up", 1.0)
    message = str(caught.value)
    assert TOKEN not in message and "\n" not in message and len(message) < 400
    assert ": " in message  # what went wrong, then the fix


def test_an_answer_over_the_size_cap_is_refused(
    server: _Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = {"status": "success", "data": {"resultType": "vector", "result": [], "pad": "x" * 5000}}
    server.answer = lambda handler: _ok(handler, big)
    client = PrometheusClient(parse_url(server.url), max_bytes=4096)
    with pytest.raises(FleetError, match="answered more than 0 MiB: scope the fleet with --match"):
        client.query("up", 1.0)


def test_too_many_series_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_module, "MAX_RESULTS", 3)
    result = [{"metric": {"instance": str(i)}, "value": [1, "1"]} for i in range(4)]
    with pytest.raises(FleetError, match=r"returned 4 series .* --match"):
        instant_vector({"resultType": "vector", "result": result})


def test_malformed_samples_are_skipped() -> None:
    result: list[Any] = [
        {"metric": {"instance": "a"}, "value": [1, "NaN"]},
        {"metric": {"instance": "b"}, "value": [1, "+Inf"]},
        {"metric": {"instance": 3}, "value": [1, "1"]},
        {"metric": {"instance": "c"}, "value": [1, 7]},
        {"metric": {"instance": "d"}, "value": [1, "2.5"]},
        "junk",
    ]
    assert instant_vector({"resultType": "vector", "result": result}) == [({"instance": "d"}, 2.5)]


def test_a_silent_server_costs_one_deadline(server: _Server) -> None:
    release = threading.Event()

    def silent(handler: BaseHTTPRequestHandler) -> None:
        release.wait(10)

    server.answer = silent
    started = time.monotonic()
    try:
        with pytest.raises(FleetError, match=r"did not answer within 0\.5 s"):
            _client(server.url, timeout=0.5).query("up", 1.0)
    finally:
        release.set()
    assert time.monotonic() - started < 3


def test_a_slow_trickle_is_bounded_by_the_whole_deadline(server: _Server) -> None:
    def trickle(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", "100000")
        handler.end_headers()
        for _ in range(40):  # a byte every 0.1 s: each read is quick, the whole is not
            try:
                handler.wfile.write(b" ")
                handler.wfile.flush()
            except OSError:
                return
            time.sleep(0.1)

    server.answer = trickle
    started = time.monotonic()
    with pytest.raises(FleetError, match="did not answer within 1 s"):
        _client(server.url, timeout=1.0).query("up", 1.0)
    assert time.monotonic() - started < 3


def test_connection_refused() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(FleetError, match="connection refused\\): is it running"):
        _client(f"http://127.0.0.1:{port}").query("up", 1.0)


# -- model -----------------------------------------------------------------------------------


def test_hostile_label_values_are_inert_in_the_report() -> None:
    evil = "\x1b]0;owned\x07gpu\x1b[31m-node\u202e\n"
    result = [
        {"metric": {"instance": evil, "job": "j", FIELD: "up"}, "value": [1, "1"]},
        {"metric": {"instance": evil, FIELD: "gpus"}, "value": [1, "1"]},
        {"metric": {"instance": evil, "Hostname": evil, FIELD: "name"}, "value": [1, "1"]},
        {"metric": {"instance": evil, FIELD: "age"}, "value": [1, "1"]},
        {"metric": {"instance": evil, "container": evil, FIELD: "top"}, "value": [1, "1e9"]},
    ]
    rows = hosts_from({"resultType": "vector", "result": result}, 2.0)
    text = to_text(FleetSnapshot(2.0, "x", tuple(rows), 0.0, None))
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert "gpu-node" in text
    assert rows[0].key == evil  # the raw value only scopes the drill-down's queries


def test_counts_from_outside_are_bounded() -> None:
    result = [
        {"metric": {"instance": "a", FIELD: "gpus"}, "value": [1, "1e300"]},
        {"metric": {"instance": "a", FIELD: "up"}, "value": [1, "1"]},
        {"metric": {"instance": "a", FIELD: "util"}, "value": [1, "-5"]},
    ]
    (row,) = hosts_from({"resultType": "vector", "result": result}, 2.0)
    assert row.gpus == 1_000_000 and row.util_pct == 0.0


# -- the command line ------------------------------------------------------------------------


def _fleet(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputui", "fleet", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "XDG_CONFIG_HOME": "/nonexistent", **(env or {})},
    )


def test_cli_bad_input_is_one_line_and_exit_2() -> None:
    for args, words in (
        ((), "no Prometheus to ask: give --prometheus URL"),
        (("--prometheus", "ftp://x", "--once"), "not an http:// or https:// URL"),
        (("--prometheus", "http://u:hunter2@x", "--once"), "credentials do not belong"),
        (("--prometheus", "http://x", "--match", "up", "--once"), "not a label selector"),
        (("--prometheus", "http://x", "--interval", "nan"), "must be at least 1"),
        (("--prometheus", "http://x", "--host", "a"), "--host needs --once or --json"),
    ):
        done = _fleet(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert words in done.stderr and done.stderr.count("\n") == 1, done.stderr
        assert "hunter2" not in done.stderr and "Traceback" not in done.stderr


def test_cli_prometheus_down_is_one_line_and_exit_1() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    done = _fleet("--prometheus", f"http://127.0.0.1:{port}", "--json", "--timeout", "2")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("gputui: error: cannot reach Prometheus at http://127.0.0.1:")
    assert done.stderr.count("\n") == 1


def test_cli_credentials_from_env_are_sent_and_never_shown(server: _Server) -> None:
    server.answer = _status(401, b"no")
    done = _fleet("--prometheus", server.url, "--once", env={"GPUTUI_PROMETHEUS_TOKEN": TOKEN})
    assert done.returncode == 1
    assert "credentials needed or wrong" in done.stderr and TOKEN not in done.stderr
    assert server.seen[0][1]["Authorization"] == f"Bearer {TOKEN}"


def test_cli_credentials_from_the_config_file(server: _Server, tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'[fleet]\nprometheus = "{server.url}"\ntoken = "{TOKEN}"\n')
    done = _fleet("--config", str(config), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["hosts"] == []
    assert server.seen[0][1]["Authorization"] == f"Bearer {TOKEN}"
    bad = tmp_path / "bad.toml"
    bad.write_text("[fleet]\ntoken = 5\n")
    done = _fleet("--config", str(bad), "--json", "--prometheus", server.url)
    assert done.returncode == 2 and "fleet.token must be a string" in done.stderr


def test_cli_empty_fleet_says_what_to_check(server: _Server) -> None:
    done = _fleet("--prometheus", server.url, "--once")
    assert done.returncode == 0
    assert "no GPU hosts in Prometheus: check that it scrapes gputui export" in done.stdout


def test_cli_screen_needs_a_terminal(server: _Server) -> None:
    done = _fleet("--prometheus", server.url)
    assert done.returncode == 2
    assert "the fleet view needs a terminal" in done.stderr and done.stderr.count("\n") == 1
    assert server.seen == []  # refused before asking anything


def _sample(value: float, **labels: str) -> dict[str, Any]:
    field = labels.pop("field")
    return {"metric": {**labels, FIELD: field}, "value": [1, str(value)]}


def test_down_and_never_seen_targets_of_a_gpu_job_are_hosts() -> None:
    result = [
        _sample(1, instance="a:9400", job="gpu", field="up"),
        _sample(8, instance="a:9400", job="gpu", Hostname="node-a", field="seen"),
        _sample(8, instance="a:9400", field="gpus"),
        _sample(0, instance="b:9400", job="gpu", field="up"),  # down, GPUs seen before
        _sample(4, instance="b:9400", job="gpu", Hostname="node-b", field="seen"),
        _sample(0, instance="c:9400", job="gpu", field="up"),  # down since it was added
        _sample(1, instance="prom:9090", job="prometheus", field="up"),  # no GPUs: not a host
        _sample(0, instance="node:9100", job="node", field="up"),  # down, but not a GPU job
    ]
    rows = {r.host: r for r in hosts_from([{"resultType": "vector", "result": result}], 2.0)}
    assert set(rows) == {"node-a", "node-b", "c:9400"}
    assert (rows["node-a"].up, rows["node-a"].gpus) == (True, 8)
    assert (rows["node-b"].up, rows["node-b"].gpus, rows["node-b"].down) == (False, 4, True)
    assert (rows["c:9400"].up, rows["c:9400"].gpus) == (False, 0)


def test_https_to_a_plain_http_server_is_one_sentence(server: _Server) -> None:
    url = server.url.replace("http://", "https://")
    words = r"TLS with https://127\.0\.0\.1:\d+ failed \(.+\): check the URL"
    with pytest.raises(FleetError, match=words):
        _client(url, timeout=3).query("up", 1.0)


def test_a_refresh_has_one_deadline_for_all_its_queries(server: _Server) -> None:
    from gputui.fleet.source import LiveFleet

    release = threading.Event()

    def slow(handler: BaseHTTPRequestHandler) -> None:
        release.wait(0.4)  # each query alone is within the client's deadline
        _empty_vector(handler)

    server.answer = slow
    endpoint = parse_url(server.url)
    fleet = LiveFleet(PrometheusClient(endpoint, timeout=5), "", endpoint.shown, timeout=1.0)
    started = time.monotonic()
    try:
        with pytest.raises(FleetError, match=r"did not answer the host table within 1 s"):
            fleet.snapshot()
    finally:
        release.set()
    assert time.monotonic() - started < 2.5
