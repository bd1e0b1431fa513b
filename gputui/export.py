"""``gputui export``: a Prometheus endpoint over the same collector the TUI uses.

The only module importing ``prometheus_client``. Collection runs on its own thread at the
refresh interval and publishes each snapshot; a scrape only turns the last published snapshot
into metric families (:class:`SnapshotMetrics`), so a slow or unreachable Docker engine can
delay the next snapshot but never a scrape. GPU gauges carry dcgm-exporter's names and labels
(``gpu``, ``UUID``, ``device``, ``modelName``, ``Hostname``), so dashboards built for it (Grafana
12239) keep working; container and process gauges carry container labels instead of PIDs.
Metric names and labels are documented in docs/exporter.md.
"""

from __future__ import annotations

import ipaddress
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from prometheus_client import generate_latest, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import CollectorRegistry

from gputui import __version__
from gputui.derive.alerts import AlertEngine, AlertRule, AlertState
from gputui.model import GpuSample, HealthStatus, Snapshot

_MIB = 1024 * 1024

GPU_LABELS = ("gpu", "UUID", "device", "modelName", "Hostname")
CONTAINER_LABELS = (
    "container",
    "container_id",
    "image",
    "compose_project",
    "compose_service",
    "pod",
    "namespace",
)

#: dcgm-exporter name, help, and how to read the value from a GpuSample (None: no sample).
DCGM_GAUGES: tuple[tuple[str, str, Callable[[GpuSample], float | None]], ...] = (
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", lambda g: g.utilization_gpu),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", lambda g: g.utilization_memory),
    (
        "DCGM_FI_DEV_FB_USED",
        "Framebuffer memory used (in MiB).",
        lambda g: None if g.memory_used_bytes is None else g.memory_used_bytes // _MIB,
    ),
    (
        "DCGM_FI_DEV_FB_FREE",
        "Framebuffer memory free (in MiB).",
        lambda g: (
            None
            if g.memory_used_bytes is None or g.memory_total_bytes is None
            else max(0, g.memory_total_bytes - g.memory_used_bytes) // _MIB
        ),
    ),
    ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", lambda g: g.temperature_c),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", lambda g: g.power_w),
    ("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", lambda g: g.clock_sm_mhz),
    ("DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", lambda g: g.clock_mem_mhz),
    ("DCGM_FI_DEV_ENC_UTIL", "Encoder utilization (in %).", lambda g: g.encoder_util),
    ("DCGM_FI_DEV_DEC_UTIL", "Decoder utilization (in %).", lambda g: g.decoder_util),
    ("DCGM_FI_DEV_FAN_SPEED", "Fan speed (in %).", lambda g: g.fan_percent),
    (
        "DCGM_FI_DEV_PCIE_TX_THROUGHPUT",
        "PCIe TX throughput (in KB/s).",
        lambda g: g.pcie_tx_kbps,
    ),
    (
        "DCGM_FI_DEV_PCIE_RX_THROUGHPUT",
        "PCIe RX throughput (in KB/s).",
        lambda g: g.pcie_rx_kbps,
    ),
    (
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "Uncorrected (double-bit) volatile ECC errors.",
        lambda g: g.ecc_uncorrected_volatile,
    ),
)

#: gputui's own per-GPU gauges (facts dcgm-exporter's default set does not carry).
GPUTUI_GPU_GAUGES: tuple[tuple[str, str, Callable[[GpuSample], float | None]], ...] = (
    ("gputui_gpu_power_limit_watts", "Enforced power limit.", lambda g: g.power_limit_w),
    ("gputui_gpu_memory_total_bytes", "GPU memory.", lambda g: g.memory_total_bytes),
    ("gputui_gpu_memory_used_bytes", "GPU memory in use.", lambda g: g.memory_used_bytes),
    (
        "gputui_gpu_throttle_reasons",
        "NVML clock-event reason bitmask.",
        lambda g: g.throttle_reasons,
    ),
    ("gputui_gpu_pstate", "Performance state (0 = P0).", lambda g: g.pstate),
)


def _gpu_labels(snapshot: Snapshot, gpu: GpuSample) -> list[str]:
    return [
        str(gpu.index),
        gpu.uuid or "",
        f"nvidia{gpu.index}",
        gpu.name or "",
        snapshot.host.hostname,
    ]


def _gauge(name: str, doc: str, labels: Sequence[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=list(labels))


def gpu_families(snapshot: Snapshot) -> list[Metric]:
    """Per-GPU gauges; a value NVML could not read is left out, never reported as 0."""
    families: list[Metric] = []
    for name, doc, read in DCGM_GAUGES + GPUTUI_GPU_GAUGES:
        family = _gauge(name, doc, GPU_LABELS)
        for gpu in snapshot.gpus:
            value = None if gpu.lost else read(gpu)
            if value is not None:
                family.add_metric(_gpu_labels(snapshot, gpu), float(value))
        families.append(family)
    # dcgm-exporter's XID gauge is the value of the last XID seen (0: none since we started).
    xid = _gauge("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", GPU_LABELS)
    lost = _gauge("gputui_gpu_lost", "1 when every query of the GPU fails.", GPU_LABELS)
    for gpu in snapshot.gpus:
        events = [e for e in snapshot.xid_events if e.gpu_index == gpu.index]
        last = max(events, key=lambda e: e.at).xid if events else 0
        xid.add_metric(_gpu_labels(snapshot, gpu), float(last))
        lost.add_metric(_gpu_labels(snapshot, gpu), 1.0 if gpu.lost else 0.0)
    return [*families, xid, lost]


def _container_values(snapshot: Snapshot, cid: str | None) -> list[str]:
    usage = snapshot.container(cid) if cid else None
    if usage is None:
        return [""] * len(CONTAINER_LABELS) if cid is None else ["", cid, "", "", "", "", ""]
    c = usage.info
    return [
        c.name,
        c.id,
        c.image,
        c.compose_project or "",
        c.compose_service or "",
        c.k8s_pod or "",
        c.k8s_namespace or "",
    ]


def container_families(snapshot: Snapshot, *, pid_labels: bool = False) -> list[Metric]:
    """Per-container and per-process GPU gauges (summed; PIDs only with ``pid_labels``).

    Without PID labels a series is keyed by GPU, process name, user and container, so its
    count stays bounded by what runs rather than by how often it restarts.
    """
    labels = (*CONTAINER_LABELS, "gpu")
    mem: dict[tuple[str, ...], float] = {}
    sm: dict[tuple[str, ...], float] = {}
    count: dict[tuple[str, ...], float] = {}
    proc_labels = (*labels, "process", "user", *(("pid",) if pid_labels else ()))
    pmem: dict[tuple[str, ...], float] = {}
    psm: dict[tuple[str, ...], float] = {}
    orphan: dict[str, float] = {}
    for p in snapshot.processes:
        gpu = str(p.sample.gpu_index)
        used = float(p.sample.used_memory_bytes or 0)
        if not p.info.exists:
            orphan[gpu] = orphan.get(gpu, 0.0) + used
            continue
        key = (*_container_values(snapshot, p.container_id), gpu)
        pkey = (*key, p.info.name or "", p.info.user or "", *((str(p.pid),) if pid_labels else ()))
        pmem[pkey] = pmem.get(pkey, 0.0) + used
        if p.sample.sm_util is not None:
            psm[pkey] = psm.get(pkey, 0.0) + p.sample.sm_util
        if p.container_id is None:
            continue
        mem[key] = mem.get(key, 0.0) + used
        count[key] = count.get(key, 0.0) + 1
        if p.sample.sm_util is not None:
            sm[key] = sm.get(key, 0.0) + p.sample.sm_util
    out: list[Metric] = []
    for name, doc, values, names in (
        (
            "gputui_container_gpu_memory_bytes",
            "GPU memory held by a container's processes.",
            mem,
            labels,
        ),
        ("gputui_container_sm_util", "Sum of SM % of a container's processes.", sm, labels),
        ("gputui_container_gpu_processes", "GPU processes of a container.", count, labels),
        ("gputui_process_gpu_memory_bytes", "GPU memory of processes, by name.", pmem, proc_labels),
        ("gputui_process_sm_util", "Sum of SM % of processes, by name.", psm, proc_labels),
    ):
        family = _gauge(name, doc, names)
        for key, value in sorted(values.items()):
            family.add_metric(list(key), value)
        out.append(family)
    reserved = _gauge(
        "gputui_container_idle_gpu_reservation",
        "1 for a running container that asked for GPUs but runs no GPU process.",
        CONTAINER_LABELS,
    )
    for usage in snapshot.containers:
        if usage.idle_reserved:
            reserved.add_metric(_container_values(snapshot, usage.info.id), 1.0)
    lost = _gauge(
        "gputui_orphan_gpu_memory_bytes", "GPU memory held by PIDs that do not exist.", ("gpu",)
    )
    for gpu, value in sorted(orphan.items()):
        lost.add_metric([gpu], value)
    return [*out, reserved, lost]


def status_families(snapshot: Snapshot, alerts: AlertState | None) -> list[Metric]:
    """Health checks, source status, alerts and an info gauge."""
    health = _gauge(
        "gputui_health_status",
        "1 for the current status of each health check.",
        ("check", "status"),
    )
    for check in snapshot.health:
        for status in HealthStatus:
            health.add_metric([check.id, status.value], 1.0 if check.status is status else 0.0)
    up = _gauge("gputui_source_up", "1 when the data source answered.", ("source",))
    for name, source in sorted(snapshot.sources.items()):
        up.add_metric([name], 1.0 if source.ok else 0.0)
    info = _gauge(
        "gputui_info",
        "gputui and NVIDIA versions (value 1).",
        ("version", "Hostname", "driver_version", "cuda_driver_version", "mode"),
    )
    h = snapshot.host
    info.add_metric(
        [
            __version__,
            h.hostname,
            h.driver_version or "",
            h.cuda_driver_version or "",
            snapshot.mode,
        ],
        1.0,
    )
    taken = _gauge("gputui_snapshot_timestamp_seconds", "When the exported snapshot was taken.", ())
    taken.add_metric([], snapshot.taken_at)
    alert = _gauge(
        "gputui_alert",
        "1 per pending or firing gputui alert rule.",
        ("rule", "subject", "severity", "state"),
    )
    for a in alerts.active if alerts else ():
        alert.add_metric([a.rule, a.subject, a.severity, a.phase.value], 1.0)
    return [health, up, info, taken, alert]


class SnapshotMetrics:
    """A prometheus_client collector serving the last published snapshot.

    Args:
        pid_labels: Add a ``pid`` label to the process gauges (unbounded over time: opt-in).
    """

    def __init__(self, *, pid_labels: bool = False) -> None:
        self.pid_labels = pid_labels
        self._latest: tuple[Snapshot, AlertState | None] | None = None
        self._duration = 0.0
        self._errors = 0

    def publish(
        self, snapshot: Snapshot, alerts: AlertState | None = None, duration: float = 0.0
    ) -> None:
        """Make ``snapshot`` what scrapes see (one reference swap: no lock needed to read it)."""
        self._latest = (snapshot, alerts)
        self._duration = duration

    def count_error(self) -> None:
        """Count a collection that raised."""
        self._errors += 1

    def describe(self) -> Iterable[Metric]:
        """Nothing up front: families depend on the snapshot (and no collect at register)."""
        return []

    def collect(self) -> Iterable[Metric]:
        """Metric families of the last published snapshot."""
        latest = self._latest
        errors = CounterMetricFamily("gputui_collect_errors", "Collections that failed.")
        errors.add_metric([], float(self._errors))
        duration = _gauge(
            "gputui_collect_duration_seconds", "How long the last collection took.", ()
        )
        duration.add_metric([], self._duration)
        families: list[Metric] = [errors, duration]
        if latest is not None:
            snapshot, alerts = latest
            families += gpu_families(snapshot)
            families += container_families(snapshot, pid_labels=self.pid_labels)
            families += status_families(snapshot, alerts)
        return families


class _Collecting(Protocol):
    def collect(self) -> Snapshot: ...
    def close(self) -> None: ...


def collect_loop(
    collector: _Collecting,
    metrics: SnapshotMetrics,
    *,
    interval: float,
    stop: threading.Event,
    engine: AlertEngine | None = None,
) -> None:
    """Collect every ``interval`` seconds and publish, until ``stop`` is set (runs on a thread)."""
    while not stop.is_set():
        started = time.monotonic()
        try:
            snapshot = collector.collect()
            alerts = engine.update(snapshot) if engine is not None else None
            metrics.publish(snapshot, alerts, time.monotonic() - started)
        except Exception as exc:  # a bug in one refresh must not end the exporter
            metrics.count_error()
            print(f"gputui export: collection failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        stop.wait(max(0.0, interval - (time.monotonic() - started)))


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[IPv6]:PORT`` or ``:PORT`` (all interfaces) as (host, port).

    Raises:
        ValueError: with a one-line message.
    """
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"--listen {text!r}: expected HOST:PORT with a port 0-65535")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"--listen {text!r}: {host!r} is not an IPv6 address") from None
    elif ":" in host:
        raise ValueError(f"--listen {text!r}: write an IPv6 address in brackets, e.g. [::1]:9400")
    return host or "0.0.0.0", int(port_text)


def render_once(
    snapshot: Snapshot, *, pid_labels: bool = False, rules: Iterable[AlertRule] = ()
) -> bytes:
    """The exposition text of one snapshot (``gputui export --once``)."""
    metrics = SnapshotMetrics(pid_labels=pid_labels)
    metrics.publish(snapshot, AlertEngine(rules).update(snapshot))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    return generate_latest(registry)


def serve(
    collector: _Collecting,
    *,
    host: str,
    port: int,
    interval: float,
    pid_labels: bool = False,
    rules: Iterable[AlertRule] = (),
    stop: threading.Event,
    announce: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
) -> None:
    """Serve ``/metrics`` until ``stop`` is set; close the collector at the end.

    Raises:
        OSError: the address cannot be listened on (in use, not local...).
    """
    metrics = SnapshotMetrics(pid_labels=pid_labels)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    server, server_thread = start_http_server(port, addr=host, registry=registry)
    loop = threading.Thread(
        target=collect_loop,
        args=(collector, metrics),
        kwargs={"interval": interval, "stop": stop, "engine": AlertEngine(rules)},
        name="gputui-export-collector",
        daemon=True,
    )
    loop.start()
    bound = server.server_address[1]
    shown = f"[{host}]" if ":" in host else host
    announce(f"gputui export: serving http://{shown}:{bound}/metrics every {interval:g}s")
    try:
        stop.wait()
    finally:
        server.shutdown()
        server.server_close()
        server_thread.join(timeout=5)
        loop.join(timeout=max(5.0, interval * 2))
        collector.close()
