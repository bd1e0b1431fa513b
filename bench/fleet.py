"""``python -m bench.run fleet``: the fleet view's refresh against a Prometheus holding a big fleet.

A synthetic fleet (default 500 hosts x 8 GPUs x 20 containers) is served as 500 real scrape
targets: one asyncio server listening on 500 loopback ports, each answering the exposition a
``gputui export`` host would (the DCGM gauges, per-container GPU memory and SM, idle
reservations, 10 health checks x 5 statuses, sources, collection age, ``Hostname``). Debian's
``prometheus`` scrapes them every ``--scrape`` seconds; once every target is up and every GPU
series is in, the fleet's host table is refreshed ``--refreshes`` times through the real client
(:class:`gputui.fleet.source.LiveFleet`), and one host's drill-down is timed.

Reported: the refresh's wall time in the client (the host table's 18 queries, 4 at a time, their
answers, parsing: what the screen waits for), Prometheus's own evaluation time summed over the
queries (``stats.timings.evalTotalTime``), the samples it read (``stats.samples``: independent
of how busy the machine is), the answers' size, the drill-down's time, and
the machine's load average (the figures mean little on a loaded machine). Figures only; nothing
passes or fails.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from bench import common
from tests.support.prometheus import Prometheus, start_prometheus

CHECKS = (
    "nvml.init",
    "nvml.driver",
    "gpu.ecc",
    "gpu.xid",
    "gpu.throttle",
    "docker.engine",
    "docker.runtime",
    "host.cdi",
    "host.toolkit",
    "host.devices",
)
STATUSES = ("fail", "warn", "info", "pass", "skip")


def exposition(host: int, gpus: int, containers: int) -> bytes:
    """One synthetic ``gputui export`` host's exposition text."""
    name = f"gpu-node-{host:04d}"
    lines: list[str] = []

    def gauge(metric: str, labels: str, value: float) -> None:
        lines.append(f'{metric}{{{labels},Hostname="{name}"}} {value:g}')

    for g in range(gpus):
        labels = (
            f'gpu="{g}",UUID="GPU-{host:04d}{g:04d}-0000-0000-0000-000000000000",'
            f'device="nvidia{g}",modelName="NVIDIA H200"'
        )
        util = (host * 7 + g * 13) % 101
        used = (host * 997 + g * 7919) % 140000
        gauge("DCGM_FI_DEV_GPU_UTIL", labels, util)
        gauge("DCGM_FI_DEV_FB_USED", labels, used)
        gauge("DCGM_FI_DEV_FB_FREE", labels, 143771 - used)
        gauge("DCGM_FI_DEV_POWER_USAGE", labels, 80 + util * 6)
        gauge("DCGM_FI_DEV_GPU_TEMP", labels, 30 + util // 3)
    for c in range(containers):
        labels = (
            f'container="job-{host:04d}-{c:02d}",container_id="{host:032d}{c:032d}",'
            f'image="registry.lab/train:{c}",compose_project="",compose_service="",pod="",'
            f'namespace="",gpu="{c % gpus}"'
        )
        gauge("gputui_container_gpu_memory_bytes", labels, (c + 1) * 1024**3)
        gauge("gputui_container_sm_util", labels, (c * 11) % 100)
        gauge("gputui_container_gpu_processes", labels, 1)
    idle = (
        f'container="idle-{host:04d}",container_id="{host:064d}",image="jupyter",'
        'compose_project="",compose_service="",pod="",namespace=""'
    )
    gauge("gputui_container_idle_gpu_reservation", idle, 1 if host % 5 == 0 else 0)
    for check in CHECKS:
        current = "fail" if (host % 97 == 0 and check == "gpu.xid") else "pass"
        for status in STATUSES:
            gauge("gputui_health_status", f'check="{check}",status="{status}"', status == current)
    for source in ("nvml", "docker"):
        gauge("gputui_source_up", f'source="{source}"', 1)
    gauge("gputui_collect_age_seconds", 'x=""', 0.5)
    gauge("gputui_info", 'version="0.1.0",mode="live"', 1)
    return ("\n".join(lines) + "\n").encode()


class FleetTargets:
    """One asyncio server answering ``GET /metrics`` on one loopback port per host."""

    def __init__(self, bodies: list[bytes]) -> None:
        self.bodies = bodies
        self.ports: list[int] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(60):
            raise RuntimeError("the synthetic targets did not start")

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._listen())
        self._ready.set()
        self._loop.run_forever()

    async def _listen(self) -> None:
        for body in self.bodies:
            head = (
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            ).encode()
            answer = head + body

            async def serve(
                reader: asyncio.StreamReader, writer: asyncio.StreamWriter, answer: bytes = answer
            ) -> None:
                try:
                    await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
                    writer.write(answer)
                    await writer.drain()
                except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError):
                    pass
                finally:
                    writer.close()

            server = await asyncio.start_server(serve, "127.0.0.1", 0, backlog=64)
            self.ports.append(server.sockets[0].getsockname()[1])

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)


def _scalar(prometheus: Prometheus, promql: str) -> float:
    result = prometheus.query(promql, timeout_s=10)
    return float(result[0]["value"][1]) if result else 0.0


def _head_series(url: str) -> float:
    """Series in Prometheus's head block (its TSDB status: no query over every series)."""
    try:
        with urllib.request.urlopen(f"{url}/api/v1/status/tsdb", timeout=30) as response:
            doc: Any = json.load(response)
        return float(doc["data"]["headStats"]["numSeries"])
    except (OSError, KeyError, TypeError, ValueError):
        return float("nan")


def cmd_fleet(args: argparse.Namespace) -> dict[str, Any]:
    """Run the fleet benchmark; print and return its figures."""
    from gputui.fleet.client import PrometheusClient, parse_url, server_samples
    from gputui.fleet.queries import host_queries
    from gputui.fleet.source import LiveFleet

    binary = shutil.which(args.prometheus_bin)
    if binary is None:
        raise SystemExit(f"no {args.prometheus_bin} binary (apt-get install prometheus)")
    common.log(f"building {args.hosts} hosts' expositions")
    bodies = [exposition(h, args.fleet_gpus, args.fleet_containers) for h in range(args.hosts)]
    series_per_host = bodies[0].count(b"\n")
    targets = FleetTargets(bodies)
    targets.start()
    tmp = Path(tempfile.mkdtemp(prefix="gputui-bench-fleet-"))
    lines = "".join(f"      - 127.0.0.1:{p}\n" for p in targets.ports)
    # The tests' launcher (tests.support.prometheus: no pytest in it).
    prometheus = start_prometheus(
        binary,
        tmp,
        f"global:\n  scrape_interval: {args.scrape:g}s\n  scrape_timeout: {args.scrape:g}s\n"
        f"scrape_configs:\n  - job_name: gputui\n    static_configs:\n    - targets:\n{lines}",
    )
    url = prometheus.url
    try:
        gpus = args.hosts * args.fleet_gpus
        deadline = time.monotonic() + args.ready_timeout
        up = fb = 0.0
        while time.monotonic() < deadline:
            try:
                up = _scalar(prometheus, "count(up == 1)")
                fb = _scalar(prometheus, "count(DCGM_FI_DEV_FB_USED)")
            except OSError:
                pass
            if up >= args.hosts and fb >= gpus:
                break
            time.sleep(1)
        else:
            raise SystemExit(f"Prometheus never had the fleet: {up:.0f} targets up, {fb:.0f} GPUs")
        time.sleep(args.scrape)  # one more scrape: every series has two samples
        series = _head_series(url)
        endpoint = parse_url(url)
        client = PrometheusClient(endpoint, timeout=30)
        fleet = LiveFleet(client, "", endpoint.shown, threads=args.query_threads)
        walls: list[float] = []
        servers: list[float] = []
        hosts = 0
        for _ in range(args.refreshes):
            snapshot = fleet.snapshot()
            walls.append(snapshot.query_s)
            servers.append(snapshot.server_s if snapshot.server_s is not None else float("nan"))
            hosts = len(snapshot.hosts)
        # Once more, one query at a time: each answer's bytes and samples, and Prometheus's
        # evaluation time without the refresh's queries competing with one another.
        answer_bytes = 0
        samples = peak = 0
        serial: list[float] = []
        for _ in range(3):
            serial.append(0.0)
            for promql in host_queries("").values():
                data = client.query(promql, time.time())
                serial[-1] += client.last_server_s or 0.0
                read = server_samples(data)
                if len(serial) == 1:
                    answer_bytes += client.last_bytes
                    if read is not None:
                        samples, peak = samples + read[0], max(peak, read[1])
        drill: list[float] = []
        for row in snapshot.hosts[: args.refreshes]:
            started = time.monotonic()
            fleet.detail(row)
            drill.append(time.monotonic() - started)
    finally:
        prometheus.stop(grace_s=20)
        targets.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    result = {
        "hosts": args.hosts,
        "gpus_per_host": args.fleet_gpus,
        "containers_per_host": args.fleet_containers,
        "series_per_host": series_per_host,
        "series_in_prometheus": series,
        "load_average_1m": os.getloadavg()[0],
        "hosts_in_table": hosts,
        "refreshes": args.refreshes,
        "query_threads": args.query_threads,
        "refresh_s_median": common.median(walls),
        "refresh_s_p95": common.pct(walls, 95),
        "prometheus_eval_s_median": common.median(servers),
        "prometheus_eval_s_p95": common.pct(servers, 95),
        "prometheus_eval_s_one_at_a_time_min": min(serial),
        "answer_bytes": answer_bytes,
        "prometheus_samples_read": samples,
        "prometheus_samples_per_host": samples / max(args.hosts, 1),
        "prometheus_peak_samples": peak,
        "drill_down_s_median": common.median(drill),
    }
    common.emit(
        "fleet",
        common.table(
            ("figure", "value"),
            list(result.items()),
        ),
    )
    common.save_json(args.out, "fleet", result)
    return result


def add_parser(sub: Any) -> None:
    """The ``fleet`` subcommand's options."""
    q = sub.add_parser("fleet", help="gputui fleet's refresh over a Prometheus with 500 hosts")
    q.add_argument("--hosts", type=int, default=500)
    q.add_argument("--fleet-gpus", type=int, default=8, help="GPUs per host")
    q.add_argument("--fleet-containers", type=int, default=20, help="containers per host")
    q.add_argument("--refreshes", type=int, default=10)
    q.add_argument("--scrape", type=float, default=5.0, help="scrape interval, seconds")
    q.add_argument("--ready-timeout", type=float, default=120.0)
    q.add_argument("--prometheus-bin", default="prometheus")
    q.add_argument("--query-threads", type=int, default=2, help="queries of a refresh at once")
