"""``gputui export``: metric families from a snapshot, scrape safety, and the command line."""

from __future__ import annotations

import ast
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import replace

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gputui.derive.alerts import AlertRule
from gputui.exporter.run import parse_listen, render_once, serve
from gputui.model.containers import ContainerInfo
from gputui.model.gpu import GpuProcessSample, GpuSample, XidEvent
from gputui.model.processes import GpuProcess, ProcessInfo
from gputui.model.snapshot import ContainerUsage, HostInfo, Snapshot
from gputui.model.status import HealthCheck, HealthStatus, SourceStatus
from tests.support.paths import REPO

MIB = 1024 * 1024
CID = "c" * 64
IDLE = "d" * 64


def machine(t: float = 1000.0, util: int = 97) -> Snapshot:
    trainer = ContainerInfo(
        CID, "trainer", "pytorch:25", "running", compose_project="llm", compose_service="train"
    )
    idle = ContainerInfo(IDLE, "idle", "cuda:12", "running", gpu_request="all")

    def in_trainer(pid: int) -> ProcessInfo:
        return ProcessInfo(pid, name="python", user="root", container_id=CID)

    procs = (
        GpuProcess(GpuProcessSample(11, 0, 1000 * MIB, sm_util=40), in_trainer(11), CID),
        GpuProcess(GpuProcessSample(12, 0, 500 * MIB, sm_util=20), in_trainer(12), CID),
        GpuProcess(GpuProcessSample(20, 0, 300 * MIB), ProcessInfo(20, name="jupyter", user="al")),
        GpuProcess(GpuProcessSample(30, 0, 700 * MIB), ProcessInfo(30, exists=False)),
    )
    gpus = (
        GpuSample(
            0,
            "GPU-aaaa",
            "NVIDIA H200",
            utilization_gpu=util,
            memory_used_bytes=3000 * MIB,
            memory_total_bytes=143771 * MIB,
            temperature_c=62,
            power_w=683.5,
            fan_percent=None,
            processes=tuple(p.sample for p in procs),
        ),
        GpuSample(1, "GPU-bbbb", "NVIDIA H200", lost=True, error="GpuIsLost"),
    )
    return Snapshot(
        taken_at=t,
        mode="scenario",
        host=HostInfo("node-7", driver_version="580.159.04"),
        sources={"nvml": SourceStatus("nvml", True), "docker": SourceStatus("docker", False)},
        gpus=gpus,
        processes=procs,
        containers=(
            ContainerUsage(trainer, 1500 * MIB, (11, 12), (0,), 60),
            ContainerUsage(idle),
        ),
        health=(HealthCheck("docker.nvidia_runtime", HealthStatus.WARN, "no nvidia runtime"),),
        xid_events=(XidEvent(0, 13, 900.0), XidEvent(0, 79, 950.0)),
    )


def samples(text: bytes) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text.decode()):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def test_gpu_gauges_use_dcgm_names_and_labels() -> None:
    got = samples(render_once(machine()))
    (labels, value), *_ = got["DCGM_FI_DEV_GPU_UTIL"]
    assert labels == {
        "gpu": "0",
        "UUID": "GPU-aaaa",
        "device": "nvidia0",
        "modelName": "NVIDIA H200",
        "Hostname": "node-7",
    }
    assert value == 97
    assert got["DCGM_FI_DEV_FB_USED"][0][1] == 3000  # MiB, like dcgm-exporter
    assert got["DCGM_FI_DEV_FB_FREE"][0][1] == 143771 - 3000
    assert got["DCGM_FI_DEV_POWER_USAGE"][0][1] == 683.5
    assert got["DCGM_FI_DEV_XID_ERRORS"][0][1] == 79  # the last one
    assert "DCGM_FI_DEV_FAN_SPEED" not in got  # N/A is no sample, never 0
    # The lost GPU has no gauges but is reported lost.
    assert len(got["DCGM_FI_DEV_GPU_UTIL"]) == 1
    assert {s[0]["gpu"]: s[1] for s in got["gputui_gpu_lost"]} == {"0": 0.0, "1": 1.0}


def test_container_and_process_gauges_carry_container_labels_not_pids() -> None:
    got = samples(render_once(machine()))
    (labels, value), = got["gputui_container_gpu_memory_bytes"]  # fmt: skip
    assert labels == {
        "container": "trainer",
        "container_id": CID,
        "image": "pytorch:25",
        "compose_project": "llm",
        "compose_service": "train",
        "pod": "",
        "namespace": "",
        "gpu": "0",
        "Hostname": "node-7",
    }
    assert value == 1500 * MIB
    assert got["gputui_container_sm_util"][0][1] == 60
    assert got["gputui_container_gpu_processes"][0][1] == 2
    procs = {
        (s[0]["container"], s[0]["process"]): s[1] for s in got["gputui_process_gpu_memory_bytes"]
    }
    assert procs == {("trainer", "python"): 1500 * MIB, ("", "jupyter"): 300 * MIB}
    assert all("pid" not in s[0] for s in got["gputui_process_gpu_memory_bytes"])
    orphan = [({"gpu": "0", "Hostname": "node-7"}, 700 * MIB)]
    assert got["gputui_orphan_gpu_memory_bytes"] == orphan
    assert got["gputui_container_idle_gpu_reservation"][0][0]["container"] == "idle"


def test_pid_labels_on_request() -> None:
    got = samples(render_once(machine(), pid_labels=True))
    pids = {s[0]["pid"]: s[1] for s in got["gputui_process_gpu_memory_bytes"]}
    assert pids == {"11": 1000 * MIB, "12": 500 * MIB, "20": 300 * MIB}


def test_health_sources_alerts_and_info() -> None:
    rules = [AlertRule("hot", "gpu_util", threshold=90.0)]
    got = samples(render_once(machine(), rules=rules))
    health = {s[0]["status"]: s[1] for s in got["gputui_health_status"]}
    assert health == {"fail": 0, "warn": 1, "info": 0, "pass": 0, "skip": 0}
    assert {s[0]["source"]: s[1] for s in got["gputui_source_up"]} == {"nvml": 1, "docker": 0}
    alert = {"rule": "hot", "subject": "gpu0", "severity": "warning", "state": "firing"}
    assert got["gputui_alert"] == [({**alert, "Hostname": "node-7"}, 1.0)]
    assert got["gputui_info"][0][0]["driver_version"] == "580.159.04"
    assert got["gputui_snapshot_timestamp_seconds"][0][1] == 1000.0


def every_sample(text: bytes) -> list[tuple[str, dict[str, str]]]:
    return [
        (s.name, s.labels)
        for family in text_string_to_metric_families(text.decode())
        for s in family.samples
    ]


def test_every_series_carries_the_host_label() -> None:
    """Fleets tell hosts apart by ``Hostname`` on every series, as dcgm-exporter's GPU series."""
    rules = [AlertRule("hot", "gpu_util", threshold=90.0)]
    got = every_sample(render_once(machine(), rules=rules))
    names = {name for name, _ in got}
    # Series of every kind: GPU, container, process, status, the collector's own, the age.
    assert {
        "DCGM_FI_DEV_GPU_UTIL",
        "gputui_container_gpu_memory_bytes",
        "gputui_process_gpu_memory_bytes",
        "gputui_container_idle_gpu_reservation",
        "gputui_orphan_gpu_memory_bytes",
        "gputui_health_status",
        "gputui_alert",
        "gputui_series_dropped",
        "gputui_collect_errors_total",
        "gputui_collect_age_seconds",
        "gputui_info",
    } <= names
    assert [name for name, labels in got if labels.get("Hostname") != "node-7"] == []


def test_host_label_before_the_first_snapshot_and_when_hostile() -> None:
    """Before any snapshot the node name; a hostile host name stays one inert label value."""
    from gputui.exporter.families import SnapshotMetrics

    metrics = SnapshotMetrics(interval=1.0)
    metrics.rebuild()
    before = every_sample(metrics.exposition())
    assert {n for n, _ in before} >= {"gputui_collect_errors_total", "gputui_collect_age_seconds"}
    assert {labels["Hostname"] for _, labels in before} == {os.uname().nodename}

    hostile = 'a"b\\c\nd\x1b]0;pwned\x07'
    snapshot = machine()
    metrics.publish(replace(snapshot, host=replace(snapshot.host, hostname=hostile)))
    # Published, not rendered yet (a scrape in between): one host in the whole answer.
    between = every_sample(metrics.exposition())
    assert {labels["Hostname"] for _, labels in between} == {os.uname().nodename}
    metrics.rebuild()
    after = every_sample(metrics.exposition())
    hosts = {labels["Hostname"] for _, labels in after}
    assert len(hosts) == 1, hosts
    (host,) = hosts
    assert host.startswith('a"b\\c d') and "\x1b" not in host and "\x07" not in host


def test_parse_listen() -> None:
    assert parse_listen("127.0.0.1:9400") == ("127.0.0.1", 9400)
    assert parse_listen(":9400") == ("0.0.0.0", 9400)
    assert parse_listen("[::1]:0") == ("::1", 0)
    for bad in ("9400", "host:port", "::1:9400", "[nope]:1", "h:70000"):
        with pytest.raises(ValueError, match="--listen"):
            parse_listen(bad)


class Stuck:
    """Answers once, then blocks in collect until released (a Docker engine that hangs)."""

    def __init__(self) -> None:
        self.calls = 0
        self.release = threading.Event()
        self.closed = False

    def collect(self) -> Snapshot:
        self.calls += 1
        if self.calls > 1:
            self.release.wait(30)
        return machine(t=1000.0 + self.calls, util=50 + self.calls)

    def close(self) -> None:
        self.closed = True


def test_scrapes_never_wait_for_a_stuck_collection() -> None:
    stuck, stop, lines = Stuck(), threading.Event(), list[str]()
    thread = threading.Thread(
        target=serve,
        kwargs={
            "collector": stuck,
            "host": "127.0.0.1",
            "port": 0,
            "interval": 0.1,
            "stop": stop,
            "announce": lines.append,
        },
    )
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while (not lines or stuck.calls < 2) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert stuck.calls == 2  # the second collection is stuck now
        port = re.search(r":(\d+)/metrics", lines[0])
        assert port is not None
        for _ in range(3):
            started = time.monotonic()
            with urllib.request.urlopen(
                f"http://127.0.0.1:{port.group(1)}/metrics", timeout=5
            ) as r:
                body = r.read()
            assert time.monotonic() - started < 2
            assert samples(body)["DCGM_FI_DEV_GPU_UTIL"][0][1] == 51  # the last good snapshot
    finally:
        stuck.release.set()
        stop.set()
        thread.join(10)
    assert stuck.closed


def gputui(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "XDG_CONFIG_HOME": "/nonexistent"},
    )


def test_export_once_prints_the_exposition() -> None:
    result = gputui("export", "--demo", "--once")
    assert result.returncode == 0, result.stderr
    got = samples(result.stdout.encode())
    assert len(got["gputui_gpu_lost"]) == 4  # every demo GPU (a MIG one measures no util %)
    assert "DCGM_FI_DEV_GPU_UTIL" in got
    assert "gputui_container_gpu_memory_bytes" in got


@pytest.fixture
def busy_port() -> object:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    yield sock.getsockname()[1]
    sock.close()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["export", "--listen", "9400"], "expected HOST:PORT"),
        (["export", "--listen", "::1:9400"], "in brackets"),
        (["export", "--interval", "0"], "at least 0.1"),
        (["export", "--demo", "--scenario", "x.json"], "cannot be combined"),
        (["export", "--scenario", "/nonexistent/s.json"], "cannot read scenario file"),
        (["export", "--demo", "--listen", "127.0.0.1:{busy}"], "cannot listen on"),
        (["export", "--bogus"], "unrecognized arguments"),
    ],
)
def test_bad_arguments_one_line_exit_2(args: list[str], needle: str, busy_port: int) -> None:
    result = gputui(*(a.replace("{busy}", str(busy_port)) for a in args))
    assert result.returncode == 2, result.stdout
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert needle in lines[0]


def test_only_export_imports_prometheus_client() -> None:
    package = REPO / "gputui"
    importers = []
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(n.split(".")[0] == "prometheus_client" for n in names):
                importers.append(str(path.relative_to(package)))
    assert sorted(set(importers)) == ["exporter/families.py"]
    code = (
        "import sys, gputui.cli.main, gputui.recording.player, gputui.config.file\n"
        "assert 'prometheus_client' not in sys.modules"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_the_age_line_describes_the_body_it_follows() -> None:
    """Published but not rendered yet: the age is still that of the body a scrape gets.

    A loaded run scraped a body without any GPU series whose age said 0.04 s: the age came from
    the newest publication while the body was still the one rendered before the first.
    """
    from gputui.exporter.families import SnapshotMetrics

    def age(body: bytes) -> float:
        (value,) = [
            s.value
            for family in text_string_to_metric_families(body.decode())
            for s in family.samples
            if s.name == "gputui_collect_age_seconds"
        ]
        return float(value)

    metrics = SnapshotMetrics(interval=1.0)
    metrics.rebuild()
    time.sleep(0.3)
    metrics.publish(machine())
    between = metrics.exposition()
    assert "DCGM_FI_DEV_GPU_UTIL" not in between.decode()
    assert age(between) >= 0.3  # since the start: the body has no collection yet
    metrics.rebuild()
    after = metrics.exposition()
    assert "DCGM_FI_DEV_GPU_UTIL" in after.decode()
    assert age(after) < 0.3  # the published collection, now in the body
