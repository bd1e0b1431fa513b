"""``gputui fleet`` against a hostile Prometheus on 127.0.0.1: the real CLI and the real screen.

A Prometheus that trickles its headers or just hangs must cost ``--once`` one ``--timeout`` and
the screen nothing at ``q``; numbers out of range in an answer (timestamps too large for a
float, NaN, infinities, values whose sums overflow) and bad credentials must give figures or one
sentence, never a traceback, in ``--once``, ``--json`` and ``--host``.
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import socket
import struct
import subprocess
import sys
import termios
import time
import urllib.parse
from typing import Any

import pytest

from gputui.collect import http_client
from gputui.fleet.client import MAX_RESULTS, FleetError, PrometheusClient, parse_url
from gputui.fleet.queries import FIELD
from tests.support.hostile_http import Behaviour, HostileServer, json_reply, silent, slow_headers
from tests.support.paths import REPO

ROOT = REPO
INSTANCE = "gpu-1:9400"
#: Seconds beyond the deadline a loaded machine may take before a test calls it a hang.
SLACK = 8.0


def _fleet(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputui", "fleet", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
        env={**os.environ, "XDG_CONFIG_HOME": "/nonexistent", **(env or {})},
    )


# -- a deadline for --once, and q in the screen ------------------------------------------------


@pytest.mark.parametrize("behaviour", [silent, slow_headers], ids=lambda b: b.__name__)
def test_once_keeps_its_timeout_against_a_hanging_prometheus(behaviour: Behaviour) -> None:
    with HostileServer(behaviour) as server:
        started = time.monotonic()
        try:
            result = _fleet("--prometheus", server.url, "--once", "--timeout", "2")
        except subprocess.TimeoutExpired:
            pytest.fail("gputui fleet --once did not return within 120 s")
        elapsed = time.monotonic() - started
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "did not answer" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert elapsed < 2 + SLACK, elapsed


def _pump(fd: int, seconds: float) -> bytes:
    got = b""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            try:
                got += os.read(fd, 65536)
            except OSError:
                break
    return got


@pytest.mark.parametrize("behaviour", [silent, slow_headers], ids=lambda b: b.__name__)
def test_q_quits_the_screen_at_once_while_a_query_hangs(behaviour: Behaviour) -> None:
    with HostileServer(behaviour) as server:
        pid, fd = pty.fork()
        if pid == 0:  # the child: the fleet screen, with a query deadline far off
            os.chdir(ROOT)
            env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
            env["XDG_CONFIG_HOME"] = "/nonexistent"
            argv = [sys.executable, "-m", "gputui", "fleet", "--prometheus", server.url]
            os.execve(sys.executable, [*argv, "--timeout", "60"], env)
        try:
            import fcntl

            fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))
            seen = b""
            deadline = time.monotonic() + 30
            # Drawn, and the refresh's queries are held by the server.
            while (not server.requests or b"fleet" not in seen) and time.monotonic() < deadline:
                seen += _pump(fd, 0.2)
            assert server.requests, "no query reached the server"
            os.write(fd, b"q")
            pressed = time.monotonic()
            status = None
            while status is None and time.monotonic() < pressed + 20:
                _pump(fd, 0.1)
                done, code = os.waitpid(pid, os.WNOHANG)
                if done:
                    status = code
            assert status is not None, "q did not quit within 20 s"
            quit_s = time.monotonic() - pressed
            pid = 0
        finally:
            if pid:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0
    # Far inside the 60 s query deadline (and the 10 s refresh deadline): nothing was waited on.
    assert quit_s < SLACK, quit_s


# -- numbers and headers out of range -----------------------------------------------------------


def _fake_prometheus(
    *, eval_time: Any = 0.001, memory: str = "1e9", stamp: Any = 1.0, detail_stamp: Any = 1.0
) -> Behaviour:
    """A Prometheus answering the fleet's queries with one host, with the given numbers.

    ``stamp`` is the sample time of the host table's answers, ``detail_stamp`` that of the
    drill-down's (its instant and its range answer).
    """

    def behave(server: HostileServer, sock: socket.socket, body: bytes) -> None:
        form = urllib.parse.parse_qs(body.decode())
        query = form.get("query", [""])[0]
        stats = {"timings": {"evalTotalTime": eval_time}}
        base: dict[str, Any] = {"instance": INSTANCE, "job": "gpu"}
        if "start" in form:  # the drill-down's range query
            result: list[Any] = [
                {
                    "metric": {**base, FIELD: "util", "gpu": "0"},
                    "values": [[detail_stamp, "5"], [2, "7"]],
                }
            ]
            data = {"resultType": "matrix", "result": result, "stats": stats}
        elif FIELD in query:  # a host table query: its field's one series
            field = query.rsplit(f'"{FIELD}", "', 1)[1].split('"', 1)[0]
            value = {"up": "1", "scrape": "1.5"}.get(field, "1")
            result = [{"metric": {**base, FIELD: field}, "value": [stamp, value]}]
            data = {"resultType": "vector", "result": result, "stats": stats}
        else:  # the drill-down's instant query
            gpu = {**base, "gpu": "0", "UUID": "GPU-0", "modelName": "H200"}
            result = [
                {
                    "metric": {**gpu, "__name__": "DCGM_FI_DEV_GPU_UTIL"},
                    "value": [detail_stamp, "5"],
                }
            ]
            for i in range(2):
                name = "gputui_container_gpu_memory_bytes"
                labels = {**base, "__name__": name, "container": "big", "gpu": str(i)}
                result.append({"metric": labels, "value": [1, memory]})
            data = {"resultType": "vector", "result": result, "stats": stats}
        raw = json.dumps({"status": "success", "data": data}).encode()
        # json.dumps writes a huge int in full and NaN as NaN: what a hostile server sends.
        json_reply(sock, raw)

    return behave


def _no_constants(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


HOSTILE: dict[str, dict[str, Any]] = {
    "eval-time-too-large-for-a-float": {"eval_time": 10**400},
    "eval-time-nan": {"eval_time": float("nan")},
    "eval-time-infinite": {"eval_time": float("inf")},
    "host-table-time-too-large-for-a-float": {"stamp": 10**400},
    "host-table-time-nan": {"stamp": float("nan")},
    "detail-time-too-large-for-a-float": {"detail_stamp": 10**400},
    "detail-time-nan": {"detail_stamp": float("nan")},
    "detail-time-infinite": {"detail_stamp": float("-inf")},
    "memory-sum-overflows": {"memory": "1.7e308"},
}


@pytest.mark.parametrize("hostile", sorted(HOSTILE))
@pytest.mark.parametrize(
    "mode",
    [("--once",), ("--json",), ("--once", "--host", INSTANCE), ("--json", "--host", INSTANCE)],
    ids=["once", "json", "host", "host-json"],
)
def test_numbers_out_of_range_are_dropped_never_a_traceback(
    hostile: str, mode: tuple[str, ...]
) -> None:
    with HostileServer(_fake_prometheus(**HOSTILE[hostile])) as server:
        result = _fleet("--prometheus", server.url, "--timeout", "20", *mode)
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    if "host-table" in hostile and "--host" in mode:
        # Every host-table sample was dropped: no such host, said in one sentence.
        assert result.returncode == 1
        assert "no host" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
        return
    assert result.returncode == 0, result.stderr
    if "--json" in mode:
        doc = json.loads(result.stdout, parse_constant=_no_constants)
        assert doc
    assert "nan" not in result.stdout.lower()
    assert "inf" not in result.stdout.lower()


def test_a_credential_that_cannot_be_a_header_is_one_sentence() -> None:
    with HostileServer(_fake_prometheus()) as server:
        for token in ("abc\r\nX-Injected: 1", "caf\u00e9\u2603", "del\x7fchar"):
            result = _fleet(
                "--prometheus", server.url, "--once", env={"GPUTUI_PROMETHEUS_TOKEN": token}
            )
            assert result.returncode == 1, result.stderr
            assert "Traceback" not in result.stderr
            assert "credentials hold a control or non-Latin-1 character" in result.stderr
            assert token not in result.stderr
            assert len(result.stderr.strip().splitlines()) == 1
        assert not server.requests  # refused before anything was sent


# -- series counted before decoding -------------------------------------------------------------


def test_an_answer_with_too_many_series_is_refused_before_it_is_decoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    decoded: list[int] = []
    real = http_client.decode_json_unchecked

    def counting(body: bytes) -> Any:
        decoded.append(len(body))
        return real(body)

    monkeypatch.setattr("gputui.fleet.client.decode_json_unchecked", counting)
    item = b'{"metric":{"instance":"a"},"value":[1,"1"]}'
    count = MAX_RESULTS + 100
    body = (
        b'{"status":"success","data":{"resultType":"vector","result":['
        + b",".join([item] * count)
        + b'],"stats":{"timings":{"evalTotalTime":0.1}}}}'
    )
    with HostileServer(lambda server, sock, _: json_reply(sock, body)) as server:
        client = PrometheusClient(parse_url(server.url), timeout=20)
        with pytest.raises(FleetError, match=r"returned about 1001\d\d series \(more than"):
            client.query("up", 1.0)
        assert decoded == []
        # Just under the count it is decoded (once).
        small = body.replace(b",".join([item] * 150), b"", 1).replace(b"[,", b"[", 1)
        with HostileServer(lambda server, sock, _: json_reply(sock, small)) as second:
            data = PrometheusClient(parse_url(second.url), timeout=20).query("up", 1.0)
    assert len(data["result"]) == count - 150
    assert decoded == [len(small)]
