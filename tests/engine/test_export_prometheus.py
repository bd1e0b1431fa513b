"""End to end: a real Prometheus scrapes ``gputui export`` running against real containers.

NVML is replaced by a scenario naming the containers' real host PIDs; /proc, cgroups and the
Docker engine are real, and so is Prometheus (Debian's ``prometheus`` package, installed by
.ci/run), started here on loopback with a temporary config scraping every second. The answer is
read back through Prometheus's HTTP query API, as a dashboard would.

Without a ``prometheus`` binary the test skips, except in CI (``CI`` set), where it fails.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.net import free_port
from tests.support.paths import REPO
from tests.support.processes import stop_process
from tests.support.prometheus import start_prometheus

MIB = 1024 * 1024


def host_pids(container: Any) -> list[int]:
    top = container.top()
    column = top["Titles"].index("PID")
    return sorted(int(row[column]) for row in top["Processes"])


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in reversed(started):
        stop_process(proc)


def test_prometheus_sees_container_gpu_memory_with_labels(
    prometheus_bin: str,
    run_container: Callable[..., Any],
    free_run_id: str,
    tmp_path: Path,
    processes: list[subprocess.Popen[bytes]],
) -> None:
    trainer = run_container(
        ["sleep", "300"],
        name=f"trainer-{free_run_id}",
        labels={"com.docker.compose.project": "llm", "com.docker.compose.service": "trainer"},
    )
    infer = run_container(
        ["sleep", "300"],
        name=f"infer-{free_run_id}",
        labels={"io.kubernetes.pod.name": "bert-7d9c", "io.kubernetes.pod.namespace": "serving"},
    )
    (trainer_pid,) = host_pids(trainer)
    (infer_pid,) = host_pids(infer)
    scenario = {
        "gpus": [
            {
                "index": 0,
                "uuid": "GPU-57d57e22-be4b-9496-673e-11cc7638ed19",
                "name": "NVIDIA H200",
                "memory_total_mib": 143771,
                "memory_used_mib": 5000,
                "utilization_gpu": 90,
                "processes": [
                    {"pid": trainer_pid, "used_memory_mib": 1000, "sm_util": 60},
                    {"pid": infer_pid, "used_memory_mib": 2000, "sm_util": 20},
                ],
            }
        ]
    }
    scenario_path = tmp_path / "scenario.json"
    scenario_path.write_text(json.dumps(scenario))

    export_port = free_port()
    exporter = subprocess.Popen(
        [
            sys.executable, "-m", "gputui", "export", "--scenario", str(scenario_path),
            "--listen", f"127.0.0.1:{export_port}", "--interval", "0.5",
        ],
        stderr=(tmp_path / "export.log").open("wb"),
        env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "xdg")},
    )  # fmt: skip
    processes.append(exporter)
    prometheus = start_prometheus(
        prometheus_bin,
        tmp_path,
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n"
        "  - job_name: gputui\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{export_port}']\n",
    )
    processes.append(prometheus.process)
    query = prometheus.query

    series: list[dict[str, Any]] = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert exporter.poll() is None, (tmp_path / "export.log").read_text()
        try:
            series = query(f'gputui_container_gpu_memory_bytes{{container=~".*-{free_run_id}"}}')
        except OSError:  # Prometheus not listening yet
            series = []
        if len(series) == 2:
            break
        time.sleep(0.5)
    log = prometheus.log_tail()
    assert len(series) == 2, f"no container series in Prometheus; its log ends:\n{log}"

    by_name = {s["metric"]["container"]: s for s in series}
    t = by_name[f"trainer-{free_run_id}"]["metric"]
    assert t["container_id"] == trainer.id
    assert t["image"] == "gputui-test:latest"
    assert t["compose_project"] == "llm"
    assert t["compose_service"] == "trainer"
    assert t["gpu"] == "0"
    assert t["job"] == "gputui"
    assert "pid" not in t and "pod" not in t  # empty labels are absent in Prometheus
    assert float(by_name[f"trainer-{free_run_id}"]["value"][1]) == 1000 * MIB
    i = by_name[f"infer-{free_run_id}"]["metric"]
    assert (i["pod"], i["namespace"], i["container_id"]) == ("bert-7d9c", "serving", infer.id)
    assert float(by_name[f"infer-{free_run_id}"]["value"][1]) == 2000 * MIB

    sm = query(f'gputui_container_sm_util{{container="trainer-{free_run_id}"}}')
    assert float(sm[0]["value"][1]) == 60
    (fb,) = query('DCGM_FI_DEV_FB_USED{gpu="0"}')
    assert fb["metric"]["UUID"] == "GPU-57d57e22-be4b-9496-673e-11cc7638ed19"
    assert fb["metric"]["modelName"] == "NVIDIA H200"
    assert float(fb["value"][1]) == 5000
    (docker_up,) = query('gputui_source_up{source="docker"}')
    assert docker_up["value"][1] == "1"
    # The per-container sum equals what the processes hold (no double counting across series).
    total = query(f'sum(gputui_process_gpu_memory_bytes{{container=~".*-{free_run_id}"}})')
    assert float(total[0]["value"][1]) == 3000 * MIB

    exporter.send_signal(signal.SIGTERM)
    assert exporter.wait(timeout=15) == 0  # a clean shutdown on SIGTERM
    assert "serving http://127.0.0.1:" in (tmp_path / "export.log").read_text()


def exporter_on_host(
    hostname: str, scenario: Path, port: int, log: Path
) -> subprocess.Popen[bytes]:
    """``gputui export`` in a UTS namespace of its own named ``hostname``: another host, as
    Prometheus sees it (same engine and containers, its own host name)."""
    as_host = (
        "import runpy, socket, sys\n"
        "socket.sethostname(sys.argv[1])\n"
        "sys.argv = ['gputui', *sys.argv[2:]]\n"
        "runpy.run_module('gputui', run_name='__main__', alter_sys=True)\n"
    )
    return subprocess.Popen(
        [
            "unshare", "--uts", sys.executable, "-c", as_host, hostname,
            "export", "--scenario", str(scenario), "--listen", f"127.0.0.1:{port}",
            "--interval", "0.5",
        ],
        stderr=log.open("wb"),
        env={**os.environ, "XDG_CONFIG_HOME": str(log.parent / "xdg")},
    )  # fmt: skip


def test_same_named_containers_of_two_hosts_stay_apart(
    prometheus_bin: str,
    run_container: Callable[..., Any],
    free_run_id: str,
    tmp_path: Path,
    processes: list[subprocess.Popen[bytes]],
) -> None:
    """Two exporters whose hosts run a container of the same name: the dashboard's per-container
    query gives one series per host, each with its own value, and every series names its host."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("CI runs as root with util-linux's unshare (a UTS namespace per host)")
        pytest.skip("needs root and unshare for a UTS namespace per exporter")
    worker = run_container(["sleep", "300"], name=f"worker-{free_run_id}")
    (pid,) = host_pids(worker)
    ports, hosts = [free_port(), free_port()], [f"gpu-a-{free_run_id}", f"gpu-b-{free_run_id}"]
    for host, port, used in zip(hosts, ports, (1000, 3000), strict=True):
        scenario = tmp_path / f"{host}.json"
        gpu = {
            "index": 0,
            "uuid": "GPU-00000001-0000-0000-0000-000000000000",
            "name": "NVIDIA H200",
        }
        gpu["memory_total_mib"] = 143771
        gpu["processes"] = [{"pid": pid, "used_memory_mib": used, "sm_util": 10}]
        scenario.write_text(json.dumps({"gpus": [gpu]}))
        processes.append(exporter_on_host(host, scenario, port, tmp_path / f"{host}.log"))
    targets = ", ".join(f"'127.0.0.1:{port}'" for port in ports)
    prometheus = start_prometheus(
        prometheus_bin,
        tmp_path,
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: gputui\n"
        f"    static_configs:\n      - targets: [{targets}]\n",
    )
    processes.append(prometheus.process)
    query = prometheus.query

    # The dashboard's "GPU memory by host and container" panel, every variable on "All".
    dashboard = json.loads((REPO / "contrib" / "grafana-gputui-containers.json").read_text())
    (panel,) = [p for p in dashboard["panels"] if p["title"] == "GPU memory by host and container"]
    expr = panel["targets"][0]["expr"]
    for variable in ("$Hostname", "$instance", "$container"):
        expr = expr.replace(variable, ".*")
    expr = expr.replace('container=~".*"', f'container="worker-{free_run_id}"')
    series: list[dict[str, Any]] = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        for proc in processes[:2]:
            assert proc.poll() is None, [p.read_text() for p in tmp_path.glob("*.log")]
        try:
            series = query(expr)
        except OSError:  # Prometheus not listening yet
            series = []
        if len(series) == 2:
            break
        time.sleep(0.5)
    log = prometheus.log_tail()
    assert len(series) == 2, f"expected one series per host, got {series}; Prometheus:\n{log}"
    by_host = {s["metric"]["Hostname"]: float(s["value"][1]) for s in series}
    assert by_host == {hosts[0]: 1000 * MIB, hosts[1]: 3000 * MIB}
    assert {s["metric"]["container"] for s in series} == {f"worker-{free_run_id}"}
    # Every series of both exporters names its host, the target's collector series too.
    for host, port in zip(hosts, ports, strict=True):
        # Prometheus's own series of a target (up, scrape_*) are not the exporter's.
        mine = f'instance="127.0.0.1:{port}", __name__!~"up|scrape_.*"'
        unlabelled = query(f'count({{{mine}, Hostname!="{host}"}})')
        assert unlabelled == [], unlabelled
        assert query(f'gputui_collect_age_seconds{{Hostname="{host}"}}')
