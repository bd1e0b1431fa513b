"""End to end: ``gputui fleet`` over a real Prometheus scraping real ``gputui export`` processes.

The lab: Debian's ``prometheus`` on loopback scraping, every second, four ``gputui export``
instances (different scenarios; host names and a ``cluster`` label set by the scrape config, as
a fleet's Prometheus would) and one plain dcgm-exporter-style target (only ``DCGM_FI_*`` series,
served by a small HTTP server here). One exporter's scenario names the host PID of a real
container, so its container figures come through the real attribution path.

``gputui fleet --once --json`` runs as a subprocess (the real command line); the fleet screen
runs under Textual's Pilot against the same Prometheus.

A second, smaller lab has Kubernetes pods' containers: a ``gputui export`` reading two real
containers with dockershim's pod labels, and a CRI node's exposition where two pods' containers
are both ``server``; the fleet must keep them apart and name them by pod.

Without a ``prometheus`` binary the tests skip, except in CI (``CI`` set), where they fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.support.net import free_port
from tests.support.processes import stop_process
from tests.support.prometheus import start_prometheus

SCRAPE_S = 1.0
DCGM_BODY = (
    "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
    'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-dc0",device="nvidia0",modelName="NVIDIA A100",'
    'Hostname="dcgm-node"} 40\n'
    'DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-dc1",device="nvidia1",modelName="NVIDIA A100",'
    'Hostname="dcgm-node"} 20\n'
    "# TYPE DCGM_FI_DEV_FB_USED gauge\n"
    'DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-dc0",device="nvidia0",modelName="NVIDIA A100",'
    'Hostname="dcgm-node"} 1000\n'
    'DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-dc1",device="nvidia1",modelName="NVIDIA A100",'
    'Hostname="dcgm-node"} 3000\n'
    "# TYPE DCGM_FI_DEV_FB_FREE gauge\n"
    'DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-dc0",device="nvidia0",modelName="NVIDIA A100",'
    'Hostname="dcgm-node"} 80000\n'
    'DCGM_FI_DEV_FB_FREE{gpu="1",UUID="GPU-dc1",device="nvidia1",modelName="NVIDIA A100",'
    'Hostname="dcgm-node"} 78000\n'
    "# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n"
    'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-dc0",device="nvidia0",modelName="NVIDIA A100",'
    'Hostname="dcgm-node"} 150.5\n'
    'DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-dc1",device="nvidia1",modelName="NVIDIA A100",'
    'Hostname="dcgm-node"} 99.5\n'
    "# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n"
    'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-dc0",device="nvidia0",modelName="NVIDIA A100",'
    'Hostname="dcgm-node"} 61\n'
    'DCGM_FI_DEV_GPU_TEMP{gpu="1",UUID="GPU-dc1",device="nvidia1",modelName="NVIDIA A100",'
    'Hostname="dcgm-node"} 66\n'
)


def _gpu(index: int, util: int, used: int, total: int, power: int, temp: int) -> dict[str, Any]:
    return {
        "index": index,
        "uuid": f"GPU-{index:08d}-0000-0000-0000-000000000000",
        "name": "NVIDIA H200",
        "memory_total_mib": total,
        "memory_used_mib": used,
        "utilization_gpu": util,
        "power_w": power,
        "temperature_c": temp,
    }


#: host name → (cluster, scenario). node-a's GPU 0 also holds the lab container's process.
SCENARIOS: dict[str, tuple[str, dict[str, Any]]] = {
    "node-a": (
        "a",
        {"gpus": [_gpu(0, 90, 5000, 143771, 500, 70), _gpu(1, 30, 1000, 143771, 100, 55)]},
    ),
    "node-b": (
        "a",
        {"gpus": [_gpu(i, 10 * (i + 1), 2000, 81559, 200, 40 + i) for i in range(4)]},
    ),
    "node-c": ("b", {"gpus": [_gpu(0, 0, 0, 24576, 30, 35)]}),
    "node-d": ("b", {"gpus": [_gpu(0, 50, 100, 24576, 60, 45)]}),
}


class _DcgmHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = DCGM_BODY.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return


@dataclass
class Lab:
    """The running lab: Prometheus's URL, the exporters by host name, the container."""

    url: str
    exporters: dict[str, subprocess.Popen[bytes]]
    container_name: str
    container_mib: int = 1000
    logs: Path = field(default_factory=Path)


def fleet_json(url: str, *args: str) -> dict[str, Any]:
    """``gputui fleet --prometheus URL --json ARGS`` as a subprocess; its document."""
    done = subprocess.run(
        [sys.executable, "-m", "gputui", "fleet", "--prometheus", url, "--json", *args],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def hosts_by_name(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {h["host"]: h for h in doc["hosts"]}


@pytest.fixture(scope="module")
def lab(
    prometheus_bin: str,
    docker_engine: Any,
    test_image: str,
    free_run_id: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Lab]:
    tmp = tmp_path_factory.mktemp("fleet-lab")
    name = f"fleet-trainer-{free_run_id}"
    # A label value of its own: ``run_container``'s cleanup after a test of this module removes
    # every container labelled with the bare run id, and this one lives for the whole module.
    container = docker_engine.containers.run(
        test_image,
        ["sleep", "600"],
        name=name,
        labels={"gputui-test": f"{free_run_id}-fleet-lab"},
        detach=True,
        network_mode="none",
    )
    started: list[subprocess.Popen[bytes]] = []
    dcgm = ThreadingHTTPServer(("127.0.0.1", 0), _DcgmHandler)
    threading.Thread(target=dcgm.serve_forever, daemon=True).start()
    try:
        top = container.top()
        (pid,) = [int(row[top["Titles"].index("PID")]) for row in top["Processes"]]
        exporters: dict[str, subprocess.Popen[bytes]] = {}
        targets: list[tuple[str, str, int]] = []
        for host, (cluster, scenario) in SCENARIOS.items():
            if host == "node-a":
                scenario = json.loads(json.dumps(scenario))
                scenario["gpus"][0]["processes"] = [{"pid": pid, "used_memory_mib": 1000}]
            path = tmp / f"{host}.json"
            path.write_text(json.dumps(scenario))
            port = free_port()
            proc = subprocess.Popen(
                [
                    sys.executable, "-m", "gputui", "export", "--scenario", str(path),
                    "--listen", f"127.0.0.1:{port}", "--interval", "1",
                ],
                stderr=(tmp / f"{host}.log").open("wb"),
                env={**os.environ, "XDG_CONFIG_HOME": str(tmp / "xdg")},
            )  # fmt: skip
            started.append(proc)
            exporters[host] = proc
            targets.append((host, cluster, port))
        targets.append(("", "b", int(dcgm.server_address[1])))
        statics = "".join(
            f"      - targets: ['127.0.0.1:{port}']\n"
            f"        labels: {{cluster: '{cluster}'{f', Hostname: {host!r}' if host else ''}}}\n"
            for host, cluster, port in targets
        )
        prometheus = start_prometheus(
            prometheus_bin,
            tmp,
            f"global:\n  scrape_interval: {SCRAPE_S:g}s\n  scrape_timeout: {SCRAPE_S:g}s\n"
            "scrape_configs:\n"
            "  - job_name: gpu\n"
            f"    static_configs:\n{statics}",
        )
        started.append(prometheus.process)
        deadline = time.monotonic() + 120
        ready = False
        while time.monotonic() < deadline and not ready:
            for host, proc in exporters.items():
                assert proc.poll() is None, (tmp / f"{host}.log").read_text()
            try:
                # By name: under load the first collections may see the container only in
                # the cgroups (named docker-<id>) before the engine answers.
                mem = prometheus.query(f'gputui_container_gpu_memory_bytes{{container="{name}"}}')
                ups = prometheus.query("up == 1")
                ready = len(ups) == len(targets) and len(mem) == 1
            except OSError:  # Prometheus not listening yet
                ready = False
            if not ready:
                time.sleep(0.5)
        log = prometheus.log_tail()
        assert ready, f"the lab never came up; Prometheus's log ends:\n{log}"
        # Two more scrapes, so every target's series (also the slower ones) are in.
        time.sleep(2 * SCRAPE_S)
        yield Lab(prometheus.url, exporters, name, logs=tmp)
    finally:
        for proc in reversed(started):
            stop_process(proc)
        dcgm.shutdown()
        container.remove(force=True)


def test_fleet_json_figures_equal_the_scenarios(lab: Lab) -> None:
    hosts = hosts_by_name(fleet_json(lab.url))
    assert {"node-a", "node-b", "node-c", "node-d", "dcgm-node"} <= set(hosts)
    for host, (_, scenario) in SCENARIOS.items():
        row = hosts[host]
        gpus = scenario["gpus"]
        assert row["kind"] == "gputui"
        assert row["up"] is True and row["scrape_age_s"] < 10
        assert row["gpus"] == len(gpus)
        assert row["util_pct"] == pytest.approx(sum(g["utilization_gpu"] for g in gpus) / len(gpus))
        assert row["memory_used_mib"] == sum(g["memory_used_mib"] for g in gpus)
        assert row["memory_total_mib"] == sum(g["memory_total_mib"] for g in gpus)
        assert row["power_w"] == pytest.approx(sum(g["power_w"] for g in gpus))
        assert row["temp_max_c"] == max(g["temperature_c"] for g in gpus)
        assert row["checks_failing"] >= 0 and row["sources_down"] == 0
    a = hosts["node-a"]
    assert a["containers"] == 1
    assert a["top_containers"] == [  # a container that is no pod's: pod and namespace null
        {
            "name": lab.container_name,
            "pod": None,
            "namespace": None,
            "gpu_memory_bytes": 1000 * 1024 * 1024,
        }
    ]
    assert hosts["node-c"]["containers"] == 0 and hosts["node-c"]["top_containers"] == []
    dcgm = hosts["dcgm-node"]
    assert dcgm["kind"] == "dcgm" and dcgm["up"] is True
    assert (dcgm["gpus"], dcgm["util_pct"], dcgm["memory_used_mib"]) == (2, 30.0, 4000)
    assert (dcgm["memory_total_mib"], dcgm["power_w"], dcgm["temp_max_c"]) == (162000, 250.0, 66)
    assert dcgm["containers"] is None and dcgm["idle_reservations"] is None


def test_fleet_host_drill_down_names_gpus_and_containers(lab: Lab) -> None:
    doc = fleet_json(lab.url, "--host", "node-a")
    assert doc["host"]["host"] == "node-a"
    assert [(g["gpu"], g["util_pct"], g["memory_used_mib"]) for g in doc["gpus"]] == [
        ("0", 90.0, 5000),
        ("1", 30.0, 1000),
    ]
    # The exporters read the real engine: a parallel test's idle GPU reservation can show up
    # on node-a with no memory. The containers using GPU memory are the lab's one.
    using = [c for c in doc["containers"] if c["gpu_memory_bytes"]]
    assert [(c["name"], c["gpus"], c["gpu_memory_bytes"]) for c in using] == [
        (lab.container_name, ["0"], 1000 * 1024 * 1024)
    ]
    dcgm = fleet_json(lab.url, "--host", "dcgm-node")
    assert [g["model"] for g in dcgm["gpus"]] == ["NVIDIA A100", "NVIDIA A100"]
    assert dcgm["containers"] == []


def test_match_scopes_the_fleet(lab: Lab) -> None:
    a = hosts_by_name(fleet_json(lab.url, "--match", 'cluster="a"'))
    assert set(a) == {"node-a", "node-b"}
    b = hosts_by_name(
        fleet_json(lab.url, "--match", "cluster='b'", "--match", 'Hostname!="node-d"')
    )
    assert set(b) == {"node-c", "dcgm-node"}


def test_text_report_lists_every_host(lab: Lab) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gputui", "fleet", "--prometheus", lab.url, "--once"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode()
    assert text.splitlines()[1].split()[:3] == ["HOST", "STATE", "GPUS"]
    for host in ("node-a", "node-b", "node-c", "node-d", "dcgm-node"):
        assert host in text
    assert lab.container_name in text and "(dcgm)" in text


def test_stopped_exporter_shows_down_within_two_scrape_intervals(lab: Lab) -> None:
    from gputui.fleet.client import PrometheusClient, parse_url
    from gputui.fleet.source import LiveFleet

    endpoint = parse_url(lab.url)
    fleet = LiveFleet(PrometheusClient(endpoint), 'Hostname="node-d"', endpoint.shown)
    assert [r.up for r in fleet.snapshot().hosts] == [True]
    stop_process(lab.exporters["node-d"])
    stopped = time.time()
    seen_down: float | None = None
    while time.time() - stopped < 30:
        snapshot = fleet.snapshot()
        if [r.up for r in snapshot.hosts] == [False]:
            seen_down = snapshot.taken_at - stopped  # when the answer holds, not when it came
            break
        time.sleep(0.1)
    assert seen_down is not None, "node-d never shown as down"
    # Prometheus marks it down at its next scrape, at most one interval after the stop.
    assert seen_down <= 2 * SCRAPE_S, seen_down
    row = hosts_by_name(fleet_json(lab.url))["node-d"]  # and the command line says so too
    assert row["up"] is False
    assert row["gpus"] == 1  # remembered from the look-back, though its series went stale
    assert row["util_pct"] is None


def test_save_answers_replays_the_same_fleet(lab: Lab, tmp_path: Path) -> None:
    saved = tmp_path / "answers.json"
    live = fleet_json(lab.url, "--save-answers", str(saved))
    done = subprocess.run(
        [sys.executable, "-m", "gputui", "fleet", "--answers", str(saved), "--json"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    replayed = json.loads(done.stdout)
    assert replayed["hosts"] == live["hosts"]


async def test_fleet_screen_over_the_live_prometheus(lab: Lab) -> None:
    from textual.widgets import DataTable

    from gputui.fleet.client import PrometheusClient, parse_url
    from gputui.fleet.command import FleetOptions
    from gputui.fleet.source import LiveFleet
    from gputui.ui.fleet_app import FleetApp, FleetScreen, HostScreen

    endpoint = parse_url(lab.url)
    source = LiveFleet(PrometheusClient(endpoint), 'cluster="a"', endpoint.shown)
    app = FleetApp(source, FleetOptions(), interval=3600)
    async with app.run_test(size=(160, 50)) as pilot:
        deadline = time.monotonic() + 20
        while app.refreshes < 1:
            assert time.monotonic() < deadline, "no refresh from Prometheus"
            await pilot.pause(0.05)
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        assert [r.host for r in screen.shown] == ["node-a", "node-b"]  # --match scoped
        assert screen.query_one("#hosts", DataTable).row_count == 2
        await pilot.press("enter")  # node-a
        while app.refreshes < 2:
            assert time.monotonic() < deadline, "no drill-down from Prometheus"
            await pilot.pause(0.05)
        await pilot.pause()
        host = app.screen
        assert isinstance(host, HostScreen) and host.detail is not None
        assert [g.util_pct for g in host.detail.gpus] == [90.0, 30.0]
        using = [c for c in host.detail.containers if c.memory_bytes]  # as above
        assert [c.name for c in using] == [lab.container_name]
        assert host.detail.gpus[0].util_history  # the range query answered


# -- Kubernetes pods' containers ---------------------------------------------------------------

MIB = 1024 * 1024
#: A CRI node's containers as ``gputui export`` labels them (``container`` is the Kubernetes
#: container name, so two pods' ``server`` share it): (pod, namespace, GPU, MiB).
CRI_SERVERS = (("web-a", "shop", "0", 3000), ("web-b", "shop", "1", 1000))


def _cri_body() -> str:
    """An exposition of a CRI node: two GPUs, and a ``server`` container in each of two pods."""
    gpu = (
        'gpu="{0}",UUID="GPU-cri{0}",device="nvidia{0}",modelName="NVIDIA H200",Hostname="node-cri"'
    )
    lines = [
        "# TYPE gputui_collect_age_seconds gauge",
        'gputui_collect_age_seconds{Hostname="node-cri"} 0.5',
        "# TYPE DCGM_FI_DEV_FB_USED gauge",
        *(f"DCGM_FI_DEV_FB_USED{{{gpu.format(g)}}} {mib}" for _, _, g, mib in CRI_SERVERS),
        "# TYPE DCGM_FI_DEV_FB_FREE gauge",
        *(f"DCGM_FI_DEV_FB_FREE{{{gpu.format(g)}}} 100000" for _, _, g, _ in CRI_SERVERS),
        "# TYPE gputui_container_gpu_memory_bytes gauge",
        *(
            f'gputui_container_gpu_memory_bytes{{container="server",container_id="{pod}-id",'
            f'image="shop/server:1",pod="{pod}",namespace="{ns}",gpu="{g}"}} {mib * MIB}'
            for pod, ns, g, mib in CRI_SERVERS
        ),
    ]
    return "\n".join(lines) + "\n"


class _CriHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = _cri_body().encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return


def _dockershim_pod(
    run_container: Callable[..., Any], pod: str, namespace: str, uid: str
) -> tuple[Any, int]:
    """A container as dockershim made them: ``k8s_<container>_<pod>_<ns>_<uid>_0``, its labels."""
    container = run_container(
        ["sleep", "600"],
        name=f"k8s_server_{pod}_{namespace}_{uid}_0",
        network_mode="none",
        labels={
            "io.kubernetes.pod.name": pod,
            "io.kubernetes.pod.namespace": namespace,
            "io.kubernetes.pod.uid": uid,
            "io.kubernetes.container.name": "server",
            "io.kubernetes.docker.type": "container",
        },
    )
    top = container.top()
    (pid,) = [int(row[top["Titles"].index("PID")]) for row in top["Processes"]]
    return container, pid


def test_fleet_names_kubernetes_pods_containers_apart(
    prometheus_bin: str,
    run_container: Callable[..., Any],
    free_run_id: str,
    tmp_path: Path,
) -> None:
    """Two pods' ``server`` containers: each its own row, named by pod, with its own memory.

    node-k8s is a real ``gputui export`` reading the real engine, whose containers carry the
    dockershim labels; node-cri serves what ``gputui export`` writes for CRI containers, where
    both containers' ``container`` label is ``server``.
    """
    pods = {f"infer-a-{free_run_id}": 3000, f"infer-b-{free_run_id}": 1000}
    processes = []
    for i, (pod, mib) in enumerate(pods.items()):
        _, pid = _dockershim_pod(run_container, pod, "serving", f"uid{i}-{free_run_id}")
        processes.append({"pid": pid, "used_memory_mib": mib})
    scenario = {"gpus": [{**_gpu(0, 50, 4000, 143771, 300, 50), "processes": processes}]}
    path = tmp_path / "node-k8s.json"
    path.write_text(json.dumps(scenario))
    port = free_port()
    cri = ThreadingHTTPServer(("127.0.0.1", 0), _CriHandler)
    threading.Thread(target=cri.serve_forever, daemon=True).start()
    started: list[subprocess.Popen[bytes]] = []
    try:
        started.append(
            subprocess.Popen(
                [
                    sys.executable, "-m", "gputui", "export", "--scenario", str(path),
                    "--listen", f"127.0.0.1:{port}", "--interval", "1",
                ],
                stderr=(tmp_path / "export.log").open("wb"),
                env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "xdg")},
            )
        )  # fmt: skip
        prometheus = start_prometheus(
            prometheus_bin,
            tmp_path,
            f"global:\n  scrape_interval: {SCRAPE_S:g}s\n  scrape_timeout: {SCRAPE_S:g}s\n"
            "scrape_configs:\n"
            "  - job_name: k8s\n"
            "    static_configs:\n"
            f"      - targets: ['127.0.0.1:{port}']\n"
            "        labels: {Hostname: 'node-k8s'}\n"
            f"      - targets: ['127.0.0.1:{cri.server_address[1]}']\n",
        )
        started.append(prometheus.process)
        wanted = f'gputui_container_gpu_memory_bytes{{pod=~"infer-[ab]-{free_run_id}"}}'
        deadline = time.monotonic() + 120
        ready = False
        while time.monotonic() < deadline and not ready:
            assert started[0].poll() is None, (tmp_path / "export.log").read_text()
            try:
                ready = len(prometheus.query(wanted)) == 2
                ready = ready and len(prometheus.query('up{job="k8s"} == 1')) == 2
            except OSError:  # Prometheus not listening yet
                ready = False
            if not ready:
                time.sleep(0.5)
        assert ready, f"no pod series in Prometheus; its log ends:\n{prometheus.log_tail()}"
        time.sleep(2 * SCRAPE_S)  # every target's series in

        hosts = hosts_by_name(fleet_json(prometheus.url))
        k8s, cri_host = hosts["node-k8s"], hosts["node-cri"]
        assert k8s["containers"] == 2 and cri_host["containers"] == 2
        assert [
            (t["namespace"], t["pod"], t["gpu_memory_bytes"]) for t in k8s["top_containers"]
        ] == [("serving", pod, mib * MIB) for pod, mib in pods.items()]
        assert [
            (t["name"], t["namespace"], t["pod"], t["gpu_memory_bytes"])
            for t in cri_host["top_containers"]
        ] == [("server", ns, pod, mib * MIB) for pod, ns, _, mib in CRI_SERVERS]

        k8s_detail = fleet_json(prometheus.url, "--host", "node-k8s")
        using = [c for c in k8s_detail["containers"] if c["gpu_memory_bytes"]]  # see above
        assert [(c["namespace"], c["pod"], c["gpus"], c["gpu_memory_bytes"]) for c in using] == [
            ("serving", pod, ["0"], mib * MIB) for pod, mib in pods.items()
        ]
        # The shim's Docker names (k8s_server_infer-…) are shown by the pod spec's name.
        assert [c["name"] for c in using] == ["server"] * len(pods)
        cri_detail = fleet_json(prometheus.url, "--host", "node-cri")
        assert [
            (c["name"], c["namespace"], c["pod"], c["gpus"], c["gpu_memory_bytes"])
            for c in cri_detail["containers"]
        ] == [("server", ns, pod, [g], mib * MIB) for pod, ns, g, mib in CRI_SERVERS]

        done = subprocess.run(
            [sys.executable, "-m", "gputui", "fleet", "--prometheus", prometheus.url, "--once"],
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        text = done.stdout.decode()
        assert "web-a/server 2.9GiB, web-b/server 1000MiB" in text
        for pod in pods:
            assert f"{pod}/server " in text  # pod/container, as the CRI node shows it
    finally:
        for proc in reversed(started):
            stop_process(proc)
        cri.shutdown()
