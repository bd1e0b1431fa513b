"""``gputui export`` under hostile conditions: slow and flooding clients, hostile strings, many
generated containers, a collector that stalls, dies or never answers, and SIGTERM.

Each test bounds its own time: every socket has a timeout and every loop a deadline.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gputui.derive.alerts import AlertRule
from gputui.exporter.families import MAX_CONTAINER_SERIES
from gputui.exporter.run import render_once, serve
from gputui.exporter.server import HttpLimits
from gputui.model.containers import ContainerInfo
from gputui.model.gpu import GpuProcessSample, GpuSample
from gputui.model.processes import GpuProcess, ProcessInfo
from gputui.model.snapshot import ContainerUsage, HostInfo, Snapshot
from gputui.model.status import HealthCheck, HealthStatus, SourceStatus
from tests.support.net import free_port

MIB = 1024 * 1024
#: What must never reach a terminal or a log viewer from a metric: ESC, BEL, NUL, CR, C1 CSI,
#: the right-to-left override, a zero-width space, and a line separator.
RAW = ("\x1b", "\x07", "\x00", "\r", "\x9b", "\u202e", "\u200b", "\u2028")
EVIL = "\x1b]0;owned\x07\x1b[31mred\x00nul\rcr\u202eevil\u200bzw\u2028sep"


def samples(text: bytes) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text.decode()):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def assert_inert(text: str) -> None:
    for raw in RAW:
        assert raw not in text, f"raw {raw!r} in the exposition"


def http_get(port: int, path: str = "/metrics", timeout: float = 3.0) -> tuple[int, bytes]:
    """One request on its own connection; (status, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        data = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/") else 0
    return status, body


def machine(t: float = 1000.0) -> Snapshot:
    cid = "c" * 64
    trainer = ContainerInfo(cid, "trainer", "pytorch:25", "running")
    procs = (GpuProcess(GpuProcessSample(11, 0, 100 * MIB), ProcessInfo(11, name="python"), cid),)
    return Snapshot(
        taken_at=t,
        mode="scenario",
        host=HostInfo("node-7"),
        sources={"nvml": SourceStatus("nvml", True)},
        gpus=(GpuSample(0, "GPU-a", "H200", utilization_gpu=5, processes=(procs[0].sample,)),),
        processes=procs,
        containers=(ContainerUsage(trainer, 100 * MIB, (11,), (0,)),),
    )


class Steady:
    """A collector that answers at once, numbering its snapshots (taken_at = 1000 + n)."""

    def __init__(self) -> None:
        self.calls = 0

    def collect(self) -> Snapshot:
        self.calls += 1
        return machine(1000.0 + self.calls)

    def close(self) -> None:
        pass


@contextlib.contextmanager
def serving(collector: Any, **kwargs: Any) -> Iterator[tuple[int, list[str]]]:
    """``serve`` on a thread on a free loopback port; (port, announced lines)."""
    stop, lines = threading.Event(), list[str]()
    kwargs.setdefault("interval", 0.1)
    thread = threading.Thread(
        target=serve,
        kwargs={
            "collector": collector,
            "host": "127.0.0.1",
            "port": 0,
            "stop": stop,
            "announce": lines.append,
            **kwargs,
        },
        daemon=True,
    )
    thread.start()
    deadline = time.monotonic() + 10
    while not lines and time.monotonic() < deadline:
        time.sleep(0.01)
    assert lines, "serve never announced its address"
    found = re.search(r":(\d+)/metrics", lines[0])
    assert found is not None
    try:
        yield int(found.group(1)), lines
    finally:
        stop.set()
        thread.join(5)
        assert not thread.is_alive(), "serve did not return within 5 s of stop"


def wait_for(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


# -- connections --------------------------------------------------------------------------------


def test_slowloris_under_a_low_fd_limit_does_not_block_a_scrape(tmp_path: Path) -> None:
    """300 half-sent requests against an exporter limited to 128 descriptors: scrapes still work."""
    port = free_port()
    script = textwrap.dedent(
        f"""
        import resource, runpy, sys
        resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))
        sys.argv = ["gputui", "export", "--demo", "--listen", "127.0.0.1:{port}"]
        runpy.run_module("gputui", run_name="__main__", alter_sys=True)
        """
    )
    log = tmp_path / "export.log"
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stderr=log.open("wb"),
        env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path)},
    )
    idle: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()
            with contextlib.suppress(OSError):
                status, body = http_get(port, timeout=1)
                # Serving GPU figures (a loaded machine answered before its first collection).
                if status == 200 and "DCGM_FI_DEV_GPU_UTIL" in samples(body):
                    break
            time.sleep(0.1)
        for _ in range(300):
            sock = socket.socket()
            sock.settimeout(0.2)
            try:
                sock.connect(("127.0.0.1", port))
                sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # never finished
            except OSError:
                sock.close()  # a refused or backlogged connect is fine: it holds nothing
                continue
            idle.append(sock)
        assert len(idle) > 128, "the flood never got past the exporter's descriptor limit"
        for _ in range(3):
            started = time.monotonic()
            status, body = http_get(port, timeout=3)
            assert status == 200
            assert time.monotonic() - started < 2
            assert "DCGM_FI_DEV_GPU_UTIL" in samples(body)
    finally:
        for sock in idle:
            sock.close()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_a_client_must_send_its_request_within_the_deadline() -> None:
    limits = HttpLimits(request_deadline_s=0.5)
    with serving(Steady(), limits=limits) as (port, _):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(b"GET /metrics HTTP/1.1\r\n")
            started = time.monotonic()
            with contextlib.suppress(ConnectionResetError):
                while sock.recv(4096):  # a 408 and then the end, or just the end
                    pass
            assert time.monotonic() - started < 2
        # Dribbling a byte at a time does not extend the deadline.
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            started = time.monotonic()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                for byte in b"GET /metrics HTTP/1.1\r\nX-Slow: " + b"a" * 100:
                    sock.sendall(bytes([byte]))
                    time.sleep(0.05)
                    if time.monotonic() - started > 3:
                        break
            assert time.monotonic() - started < 2


def test_an_oversized_request_is_refused() -> None:
    with serving(Steady()) as (port, _):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                sock.sendall(b"GET /metrics HTTP/1.1\r\nX-Big: " + b"a" * 65536)
            data = b""
            with contextlib.suppress(ConnectionResetError):
                while chunk := sock.recv(4096):
                    data += chunk
        assert data.startswith(b"HTTP/1.1 431") or data == b""
        assert b"DCGM" not in data
        status, _ = http_get(port)
        assert status == 200


def test_other_paths_and_methods() -> None:
    with serving(Steady()) as (port, _):
        assert http_get(port, "/nope")[0] == 404
        assert http_get(port, "/metrics?x=1")[0] == 200
        with socket.create_connection(("127.0.0.1", port), timeout=3) as sock:
            sock.sendall(b"POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            assert sock.recv(64).startswith(b"HTTP/1.1 405")
        with socket.create_connection(("127.0.0.1", port), timeout=3) as sock:
            sock.sendall(b"\x16\x03\x01garbage\r\n\r\n")  # a TLS hello, say
            assert sock.recv(64).startswith(b"HTTP/1.1 400")


def test_a_burst_of_connections_is_answered_or_refused_fast() -> None:
    """400 simultaneous scrapes: each gets a complete 200 or a 503 within 5 s, none hangs."""
    limits = HttpLimits(max_connections=16)
    with serving(Steady(), limits=limits) as (port, _):
        wait_for(lambda: b"DCGM" in http_get(port)[1])
        sel = selectors.DefaultSelector()
        got: dict[socket.socket, bytes] = {}
        for _ in range(400):
            sock = socket.socket()
            sock.setblocking(False)
            sock.connect_ex(("127.0.0.1", port))
            sel.register(sock, selectors.EVENT_WRITE)
            got[sock] = b""
        request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
        done: set[socket.socket] = set()
        deadline = time.monotonic() + 5
        while len(done) < len(got) and time.monotonic() < deadline:
            for key, mask in sel.select(0.1):
                assert isinstance(key.fileobj, socket.socket)
                sock = key.fileobj
                try:
                    if mask & selectors.EVENT_WRITE:
                        sock.send(request)
                        sel.modify(sock, selectors.EVENT_READ)
                        continue
                    chunk = sock.recv(65536)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:  # reset or refused: an answer too, a fast one
                    chunk = b""
                got[sock] += chunk
                if not chunk:
                    sel.unregister(sock)
                    done.add(sock)
        elapsed = time.monotonic() - (deadline - 5)
        statuses = [data[9:12] for data in got.values()]
        for sock in got:
            sock.close()
        sel.close()
        assert len(done) == 400, f"{400 - len(done)} connections still open after {elapsed:.1f}s"
        assert set(statuses) <= {b"200", b"503"}, set(statuses)
        assert statuses.count(b"200") > 0
        for data in got.values():
            head, _, body = data.partition(b"\r\n\r\n")
            length = re.search(rb"Content-Length: (\d+)", head)
            assert length is not None and int(length.group(1)) == len(body)
        assert http_get(port)[0] == 200  # and the server is still fine afterwards


# -- hostile strings ----------------------------------------------------------------------------


def hostile_machine() -> Snapshot:
    cid = "e" * 64
    evil = ContainerInfo(
        cid,
        "evil" + EVIL,
        "img" + EVIL,
        "running",
        compose_project=EVIL,
        compose_service=EVIL,
        k8s_pod=EVIL,
        k8s_namespace=EVIL,
        gpu_request="all",
    )
    idle = replace(evil, id="f" * 64, name="idle" + EVIL)
    procs = (
        GpuProcess(
            GpuProcessSample(7, 0, 10 * MIB, sm_util=3),
            ProcessInfo(7, name=EVIL, user=EVIL, container_id=cid),
            cid,
        ),
    )
    return Snapshot(
        taken_at=5.0,
        mode="scenario",
        host=HostInfo(EVIL, driver_version=EVIL, cuda_driver_version=EVIL),
        sources={EVIL: SourceStatus(EVIL, True)},
        gpus=(GpuSample(0, EVIL, EVIL, utilization_gpu=1, processes=(procs[0].sample,)),),
        processes=procs,
        containers=(ContainerUsage(evil, 10 * MIB, (7,), (0,)), ContainerUsage(idle)),
        health=(
            HealthCheck(EVIL, HealthStatus.WARN, EVIL),
            HealthCheck("container.runtime:" + EVIL, HealthStatus.FAIL, EVIL, subject=EVIL),
        ),
    )


def test_hostile_strings_never_reach_the_exposition_raw() -> None:
    rules = [AlertRule("r" + EVIL, "gpu_util", threshold=0.0)]
    for pid_labels in (False, True):
        text = render_once(hostile_machine(), pid_labels=pid_labels, rules=rules).decode()
        assert_inert(text)
        got = samples(text.encode())
        (labels, _), *_ = got["gputui_container_gpu_memory_bytes"]
        assert labels["container"].startswith("evil")
        assert "owned" not in labels["container"]  # the OSC sequence is gone, not just escaped
        assert labels["compose_project"] == "red?nul?cr?evil?zw sep"
        for values in got.values():
            for sample_labels, _ in values:
                assert all(len(v) <= 128 for v in sample_labels.values())
    with serving(Stuck(hostile_machine())) as (port, _):
        wait_for(lambda: b"gputui_info" in http_get(port)[1])
        status, body = http_get(port)
        assert status == 200
        assert_inert(body.decode())


def test_values_that_clean_up_alike_make_no_duplicate_series() -> None:
    """Two check ids equal once cleaned and cut to 128 characters are exported once."""
    long = "n" * 300
    snapshot = replace(
        machine(),
        health=(
            HealthCheck("container.runtime:" + long + "a", HealthStatus.FAIL, "s"),
            HealthCheck("container.runtime:" + long + "b", HealthStatus.WARN, "s"),
            HealthCheck("host\x1b[1m.x", HealthStatus.WARN, "s"),
            HealthCheck("host.x", HealthStatus.PASS, "s"),
        ),
    )
    text = render_once(snapshot).decode()
    lines = [line for line in text.splitlines() if line.startswith("gputui_health_status{")]
    assert len(lines) == len(set(lines)) == 2 * 5
    assert all(len(s[0]["check"]) <= 128 for s in samples(text.encode())["gputui_health_status"])


def test_hostile_labels_and_process_names_from_real_containers(
    run_container: Callable[..., Any], free_run_id: str, tmp_path: Path
) -> None:
    """Compose/Kubernetes labels and a process that renames itself to an OSC sequence."""
    labels = {
        "com.docker.compose.project": "p" + EVIL,
        "com.docker.compose.service": "s\x1b[2J\x07",
        "io.kubernetes.pod.name": "pod\u202eevil",
        "io.kubernetes.pod.namespace": "ns\r\x9bx",
    }
    # The shell renames itself (its comm) and stays: that is the GPU process NVML will name.
    rename = r"printf '\033]0;pwn\007\r' > /proc/$$/comm; while :; do sleep 1; done"
    container = run_container(["sh", "-c", rename], name=f"evil-{free_run_id}", labels=labels)
    top = container.top()
    column = top["Titles"].index("PID")
    cmd_column = top["Titles"].index("CMD")
    (pid,) = [int(r[column]) for r in top["Processes"] if "while" in r[cmd_column]]
    comm = Path(f"/proc/{pid}/comm")
    wait_for(lambda: comm.read_bytes().startswith(b"\x1b]0;pwn"), timeout=5)
    scenario = {
        "driver_version": "580.1\x1b[5m",
        "gpus": [
            {
                "index": 0,
                "uuid": "GPU-57d57e22-be4b-9496-673e-11cc7638ed19",  # scenarios hold NVML forms
                "name": "NVIDIA\u202e H200\x00",
                "memory_total_mib": 1000,
                "memory_used_mib": 100,
                "processes": [{"pid": pid, "used_memory_mib": 100, "sm_util": 5}],
            }
        ],
    }
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(scenario))
    result = subprocess.run(
        [sys.executable, "-m", "gputui", "export", "--once", "--scenario", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path)},
    )
    assert result.returncode == 0, result.stderr
    assert_inert(result.stdout)
    got = samples(result.stdout.encode())
    (mem,) = [
        s for s in got["gputui_process_gpu_memory_bytes"] if s[0]["container"].startswith("evil-")
    ]
    assert mem[0]["container"] == f"evil-{free_run_id}"
    assert mem[0]["compose_project"].startswith("p")
    assert mem[0]["pod"] == "pod?evil"
    assert mem[0]["namespace"] == "ns??x"
    assert "pwn" not in mem[0]["process"]  # the OSC sequence was removed whole
    (fb,) = got["DCGM_FI_DEV_FB_USED"]
    assert fb[0]["modelName"] == "NVIDIA? H200?"


# -- cardinality --------------------------------------------------------------------------------


def many_containers(n: int, prefix: str = "gen") -> Snapshot:
    """``n`` running containers with generated names, each asking for GPUs and using none."""
    containers, checks = [], []
    for i in range(n):
        name = f"{prefix}-{i:05d}-{'x' * 20}"
        info = ContainerInfo(f"{i:064x}", name, "cuda:12", "running", gpu_request="all")
        containers.append(ContainerUsage(info))
        for check, status in (
            ("container.gpu_visible", HealthStatus.FAIL if i % 2 else HealthStatus.WARN),
            ("container.runtime", HealthStatus.PASS),
            ("container.utility_cap", HealthStatus.PASS),
            ("container.cuda", HealthStatus.SKIP),
        ):
            checks.append(HealthCheck(f"{check}:{name}", status, "s", subject=name))
    return replace(
        machine(),
        containers=tuple(containers),
        health=(HealthCheck("docker.nvidia_runtime", HealthStatus.PASS, "ok"), *checks),
    )


def series(text: bytes) -> int:
    return sum(len(v) for v in samples(text).values())


def test_generated_container_names_keep_the_series_count_bounded() -> None:
    small, big = render_once(many_containers(200)), render_once(many_containers(2000))
    assert series(small) == series(big)
    got = samples(big)
    per_container = {
        s[0]["check"].split(":", 1)[1]
        for s in got["gputui_health_status"]
        if s[0]["check"].startswith("container.")
    }
    assert len(per_container) == MAX_CONTAINER_SERIES
    # Only the findings: passing and skipped per-container checks have no series of their own.
    assert all(s[0]["check"].startswith("container.gpu_visible") for s in got[
        "gputui_health_status"] if s[0]["check"].startswith("container."))  # fmt: skip
    # Failures go first: with 1000 failing containers, every kept one is a failing one.
    for labels, value in got["gputui_health_status"]:
        if labels["check"].startswith("container.") and labels["status"] == "fail":
            assert value == 1
    dropped = {s[0]["family"]: s[1] for s in got["gputui_series_dropped"]}
    assert dropped["gputui_health_status"] == 2000 - MAX_CONTAINER_SERIES
    assert dropped["gputui_container_idle_gpu_reservation"] == 2000 - MAX_CONTAINER_SERIES
    assert len(got["gputui_container_idle_gpu_reservation"]) == MAX_CONTAINER_SERIES
    # Every check is still counted, by status.
    counts = {s[0]["status"]: s[1] for s in got["gputui_container_health_checks"]}
    assert counts == {"fail": 1000, "warn": 1000, "info": 0, "pass": 4000, "skip": 2000}
    # Host checks keep one series per status, as documented.
    host = [s for s in got["gputui_health_status"] if s[0]["check"] == "docker.nvidia_runtime"]
    assert len(host) == 5
    # Nothing is dropped when everything fits.
    few = samples(render_once(many_containers(3)))
    assert {s[0]["family"]: s[1] for s in few["gputui_series_dropped"]}["gputui_health_status"] == 0


def test_series_of_vanished_containers_are_dropped() -> None:
    class Changing(Steady):
        def collect(self) -> Snapshot:
            self.calls += 1
            return many_containers(3, prefix="old" if self.calls < 3 else "new")

    source = Changing()
    with serving(source) as (port, _):
        wait_for(lambda: source.calls >= 5)
        body = http_get(port)[1].decode()
    assert "new-00001" in body
    assert "old-" not in body


# -- the collector ------------------------------------------------------------------------------


class Stuck:
    """Answers ``first`` once, then blocks in collect (an engine that hangs) until released."""

    def __init__(self, first: Snapshot | None = None) -> None:
        self.first = first or machine()
        self.calls = 0
        self.release = threading.Event()

    def collect(self) -> Snapshot:
        self.calls += 1
        if self.calls > 1:
            self.release.wait(30)
        return self.first

    def close(self) -> None:
        self.release.set()


def value(body: bytes, name: str) -> float:
    ((_, got),) = samples(body)[name]
    return got


def test_a_huge_interval_neither_kills_the_collector_nor_hides_staleness() -> None:
    source = Steady()
    with serving(source, interval=1e10) as (port, lines):
        wait_for(lambda: source.calls >= 1)
        time.sleep(0.3)
        alive = [t for t in threading.enumerate() if t.name == "gputui-export-collector"]
        assert alive and alive[0].is_alive()
        body = http_get(port)[1]
        assert value(body, "gputui_collect_interval_seconds") == 3600
        assert "3600" in lines[0]
        assert value(body, "gputui_collect_errors_total") == 0
        age = value(body, "gputui_collect_age_seconds")
        time.sleep(0.5)
        assert value(http_get(port)[1], "gputui_collect_age_seconds") >= age + 0.4
        started = time.monotonic()
    assert time.monotonic() - started < 2  # the long wait ends with stop


def test_a_stalled_collection_shows_in_the_age_gauge() -> None:
    stuck = Stuck()
    with serving(stuck, interval=0.1) as (port, _):
        wait_for(lambda: stuck.calls >= 2)
        first = http_get(port)[1]
        time.sleep(1.2)
        later = http_get(port)[1]
    assert value(later, "gputui_collect_age_seconds") >= 1.0
    assert value(later, "gputui_last_collect_timestamp_seconds") == value(
        first, "gputui_last_collect_timestamp_seconds"
    )
    assert value(later, "gputui_snapshot_timestamp_seconds") == 1000.0


class Dying(Steady):
    """Kills its thread on the 2nd and 3rd collection (not an Exception: nothing catches it)."""

    def collect(self) -> Snapshot:
        self.calls += 1
        if self.calls in (2, 3):
            raise SystemExit("collector thread ends")
        return machine(1000.0 + self.calls)


def test_a_dead_collector_thread_is_restarted_and_counted(
    capfd: pytest.CaptureFixture[str],
) -> None:
    source = Dying()
    with serving(source, interval=0.1) as (port, _):
        wait_for(lambda: source.calls >= 6)
        wait_for(lambda: value(http_get(port)[1], "gputui_snapshot_timestamp_seconds") >= 1005)
        body = http_get(port)[1]
    assert value(body, "gputui_collector_restarts_total") == 2
    assert value(body, "gputui_collect_errors_total") == 2
    assert "collector thread ended" in capfd.readouterr().err


class Raising(Steady):
    def collect(self) -> Snapshot:
        self.calls += 1
        raise RuntimeError("boom\x1b]0;x\x07")


def test_failed_collections_are_counted_and_logged_inert(capfd: pytest.CaptureFixture[str]) -> None:
    source = Raising()
    with serving(source, interval=0.1) as (port, _):
        wait_for(lambda: source.calls >= 3)
        time.sleep(0.05)
        body = http_get(port)[1]
    assert value(body, "gputui_collect_errors_total") >= 2
    err = capfd.readouterr().err
    assert "boom" in err
    assert_inert(err)


# -- shutdown -----------------------------------------------------------------------------------

BLOCKING = """
import signal, sys, threading
from gputui.exporter.run import serve

class Forever:
    def collect(self):
        threading.Event().wait()  # a read that never returns
    def close(self):
        threading.Event().wait()  # and a close that waits for it

stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
serve(Forever(), host="127.0.0.1", port=0, interval=1.0, stop=stop,
      announce=lambda line: print(line, file=sys.stderr, flush=True))
"""


def test_sigterm_stops_promptly_with_a_source_that_blocks_forever(tmp_path: Path) -> None:
    log = tmp_path / "export.log"
    proc = subprocess.Popen([sys.executable, "-c", BLOCKING], stderr=log.open("wb"))
    try:
        wait_for(lambda: "serving" in log.read_text(), timeout=20)
        time.sleep(0.3)  # the collection is blocked by now
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        # The exporter's own deadlines add up to 1.3 s (watchdog tick, loop join, close join);
        # the rest is the interpreter's exit, which on a loaded two-core runner took 1.2 s.
        # Without the deadlines the process never exits and the wait above fails.
        assert time.monotonic() - started < 4.0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
