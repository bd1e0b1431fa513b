"""``gputui export``: a Prometheus endpoint over the same collector the TUI uses.

The only module importing ``prometheus_client``. Collection runs on its own thread at the
refresh interval, in the :class:`~gputui.collect.loop.CollectLoop` the TUI runs, with the same
:class:`~gputui.derive.analysis.Analyzer`: the findings (``gputui_finding``) and alert states
(``gputui_alert``) are the TUI's. After each collection the exposition text is rendered once
(:class:`SnapshotMetrics`) and a scrape only sends that prebuilt body, so a slow or unreachable
Docker engine can delay the next snapshot but never a scrape. The HTTP side is a small
single-threaded server (:class:`MetricsServer`) with a bounded number of connections, a deadline
for each request and response, and a bounded request size, so slow or flooding clients cannot
take scrapes away. GPU gauges carry dcgm-exporter's names and labels (``gpu``, ``UUID``,
``device``, ``modelName``, ``Hostname``), so dashboards built for it (Grafana 12239) keep
working; container and process gauges carry container labels instead of PIDs. Every label value
passes :func:`gputui.boundary.sanitise.safe_text`. Metric names and labels are documented in
docs/exporter.md.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence

from prometheus_client import generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import CollectorRegistry

from gputui import __version__
from gputui.boundary.sanitise import safe_text
from gputui.derive.analysis import Analysis
from gputui.derive.users import UserTotals, user_label, user_usage
from gputui.ledger.counters import LedgerCounters
from gputui.model.faults import FaultCount
from gputui.model.gauges import GPU_GAUGES, ExportedGauge, GpuGauge
from gputui.model.gpu import MIG_GPM_FIELDS, GpuSample, MigInstance
from gputui.model.mig import mig_device_name
from gputui.model.snapshot import Snapshot
from gputui.model.status import FINDING_RANK, Finding, HealthCheck, HealthStatus

#: Longest label value exported (longer ones end with an ellipsis).
LABEL_LIMIT = 128
#: Containers that get series of their own in the per-container health and idle-reservation
#: gauges; the rest are counted in ``gputui_series_dropped``.
MAX_CONTAINER_SERIES = 64
#: Findings that get series of their own in ``gputui_finding`` (the most severe are kept; the
#: rest are counted in ``gputui_series_dropped``).
MAX_FINDING_SERIES = MAX_CONTAINER_SERIES
#: Users that get series of their own with ``--user-series`` (those with the most GPU memory;
#: the rest are counted in ``gputui_series_dropped``).
MAX_USER_SERIES = MAX_CONTAINER_SERIES

#: The host label of every series: dcgm-exporter's name (its GPU series carry it), so one
#: dashboard or rule groups gputui's and dcgm-exporter's series of a host alike.
HOST_LABEL = "Hostname"
GPU_LABELS = ("gpu", "UUID", "device", "modelName", HOST_LABEL)
CONTAINER_LABELS = (
    "container",
    "container_id",
    "image",
    "compose_project",
    "compose_service",
    "pod",
    "namespace",
)


def _exported_value(gauge: GpuGauge, exported: ExportedGauge, gpu: GpuSample) -> float | None:
    if exported.compute is not None:
        return exported.compute(gpu)
    value: float | None = getattr(gpu, gauge.field)
    if value is None or exported.divisor == 1:
        return value
    return value // exported.divisor


def plain_gpu_gauges(
    gauges: Sequence[GpuGauge] = GPU_GAUGES,
) -> tuple[tuple[str, str, Callable[[GpuSample], float | None]], ...]:
    """The per-GPU gauges of the field table: (name, help, value of a sample or None).

    dcgm-exporter's (``DCGM_FI_*``) come first, then gputui's own, each in the table's order.
    """
    pairs = [(gauge, exported) for gauge in gauges for exported in gauge.exported]
    pairs.sort(key=lambda pair: not pair[1].name.startswith("DCGM_"))  # stable: table order
    return tuple(
        (
            exported.name,
            exported.help,
            functools.partial(_exported_value, gauge, exported),
        )
        for gauge, exported in pairs
    )


#: Every per-GPU gauge read from a sample (see :func:`plain_gpu_gauges`).
GPU_SAMPLE_GAUGES = plain_gpu_gauges()


def _label(value: object) -> str:
    """A label value as it may be exported: inert (no escapes, controls, bidi) and short."""
    return safe_text(None if value is None else str(value), LABEL_LIMIT, na="")


def _gpu_labels(snapshot: Snapshot, gpu: GpuSample) -> list[str]:
    return [
        str(gpu.index),
        _label(gpu.uuid),
        f"nvidia{gpu.index}",
        _label(gpu.name),
        _label(snapshot.host.hostname),
    ]


def _gauge(name: str, doc: str, labels: Sequence[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=list(labels))


#: Counters of dcgm-exporter among the per-GPU series (served untyped: prometheus_client
#: would rename a counter family ``…_total``, and DCGM dashboards query the bare name).
_UNTYPED = frozenset(e.name for g in GPU_GAUGES for e in g.exported if e.counter)
#: The GPM ratios also exported per MIG device (dcgm-exporter's names, MIG labels), by field.
_MIG_PROF = {e.name: g.field for g in GPU_GAUGES if g.field in MIG_GPM_FIELDS for e in g.exported}


def _mig_labels(snapshot: Snapshot, gpu: GpuSample, inst: MigInstance) -> list[str]:
    return [
        *_gpu_labels(snapshot, gpu),
        str(inst.gpu_instance_id if inst.gpu_instance_id is not None else ""),
        _label(inst.profile),
        mig_device_name(gpu.index, inst.index),
        _label(inst.uuid),
    ]


def _add_mig_prof(family: Metric, name: str, snapshot: Snapshot) -> None:
    """GPM ratios of each MIG GPU instance, in the GPU family as dcgm-exporter serves them."""
    field_name = _MIG_PROF.get(name)
    if field_name is None:
        return
    for gpu in snapshot.gpus:
        if gpu.lost:
            continue
        for inst in gpu.mig_instances:
            value = getattr(inst, field_name)
            if inst.index >= 0 and value is not None:
                labels = dict(zip(MIG_LABELS, _mig_labels(snapshot, gpu, inst), strict=True))
                family.add_sample(name, labels, value / 100.0)


def gpu_families(
    snapshot: Snapshot,
    gauges: Sequence[tuple[str, str, Callable[[GpuSample], float | None]]] = GPU_SAMPLE_GAUGES,
) -> list[Metric]:
    """Per-GPU gauges; a value NVML could not read is left out, never reported as 0.

    Args:
        snapshot: The GPUs to export.
        gauges: The gauges read from each sample (:func:`plain_gpu_gauges` of the field table),
            then the XID and lost gauges.
    """
    families: list[Metric] = []
    for name, doc, read in gauges:
        if name in _UNTYPED:
            counter = Metric(name, doc, "unknown")
            for gpu in snapshot.gpus:
                value = None if gpu.lost else read(gpu)
                if value is not None:
                    labels = dict(zip(GPU_LABELS, _gpu_labels(snapshot, gpu), strict=True))
                    counter.add_sample(name, labels, float(value))
            families.append(counter)
            continue
        family = _gauge(name, doc, GPU_LABELS)
        for gpu in snapshot.gpus:
            value = None if gpu.lost else read(gpu)
            if value is not None:
                family.add_metric(_gpu_labels(snapshot, gpu), float(value))
        _add_mig_prof(family, name, snapshot)
        families.append(family)
    # dcgm-exporter's XID gauge is the value of the last XID seen (0: none since we started).
    xid = _gauge("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", GPU_LABELS)
    lost = _gauge("gputui_gpu_lost", "1 when every query of the GPU fails.", GPU_LABELS)
    for gpu in snapshot.gpus:
        events = [e for e in snapshot.xid_events if e.gpu_index == gpu.index]
        last = max(events, key=lambda e: e.at).xid if events else 0
        xid.add_metric(_gpu_labels(snapshot, gpu), float(last))
        lost.add_metric(_gpu_labels(snapshot, gpu), 1.0 if gpu.lost else 0.0)
    return [*families, xid, lost, *mig_families(snapshot)]


#: The labels of a MIG device's series: its GPU's, then dcgm-exporter's GPU instance labels
#: (``GPU_I_ID``, ``GPU_I_PROFILE``), the device's name (``0:1``) and its ``MIG-`` UUID.
MIG_LABELS = (*GPU_LABELS, "GPU_I_ID", "GPU_I_PROFILE", "mig_device", "mig_uuid")


def mig_families(snapshot: Snapshot) -> list[Metric]:
    """Per-MIG-device memory, SMs and processes (families present, empty, without MIG).

    NVML's utilization says nothing per MIG device, so none is exported (never a 0); GPM's
    figures per GPU instance are in the ``DCGM_FI_PROF_*`` families (:func:`gpu_families`).
    """
    used = _gauge("gputui_mig_memory_used_bytes", "Memory in use in a MIG device.", MIG_LABELS)
    total = _gauge("gputui_mig_memory_total_bytes", "Memory of a MIG device.", MIG_LABELS)
    sms = _gauge("gputui_mig_sm_count", "Streaming multiprocessors of a MIG device.", MIG_LABELS)
    procs = _gauge("gputui_mig_processes", "GPU processes on a MIG device.", MIG_LABELS)
    for gpu in snapshot.gpus:
        if gpu.lost or not gpu.mig_instances:
            continue
        counts: dict[tuple[int | None, int | None], int] = {}
        for sample in gpu.processes:
            if sample.mig_gi_id is not None:
                ids = (sample.mig_gi_id, sample.mig_ci_id)
                counts[ids] = counts.get(ids, 0) + 1
        for inst in gpu.mig_instances:
            if inst.index < 0:  # a GPU instance without a compute instance: no device
                continue
            labels = _mig_labels(snapshot, gpu, inst)
            for family, value in (
                (used, inst.memory_used_bytes),
                (total, inst.memory_total_bytes),
                (sms, inst.sm_count),
            ):
                if value is not None:
                    family.add_metric(labels, float(value))
            here = (inst.gpu_instance_id, inst.compute_instance_id)
            procs.add_metric(labels, float(counts.get(here, 0)))
    return [used, total, sms, procs]


def _container_values(snapshot: Snapshot, cid: str | None) -> list[str]:
    usage = snapshot.container(cid) if cid else None
    if usage is None:
        empty = [""] * len(CONTAINER_LABELS)
        if cid is not None:
            empty[1] = _label(cid)
        return empty
    c = usage.info
    return [
        _label(c.name),
        _label(c.id),
        _label(c.image),
        _label(c.compose_project),
        _label(c.compose_service),
        _label(c.k8s_pod),
        _label(c.k8s_namespace),
    ]


def container_families(snapshot: Snapshot, *, pid_labels: bool = False) -> list[Metric]:
    """Per-container and per-process GPU gauges (summed; PIDs only with ``pid_labels``).

    Without PID labels a series is keyed by GPU, process name, user and container, so its
    count stays bounded by what runs rather than by how often it restarts. The idle-reservation
    gauge keeps at most :data:`MAX_CONTAINER_SERIES` containers (:func:`dropped_family` counts
    the rest).
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
        # The user as the user series (and every other surface) name it: one value per user.
        pkey = (*key, _label(p.info.name), _label(user_label(snapshot, p)))
        pkey += (str(p.pid),) if pid_labels else ()
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
    idle = sorted((u for u in snapshot.containers if u.idle_reserved), key=lambda u: u.info.name)
    for usage in idle[:MAX_CONTAINER_SERIES]:
        reserved.add_metric(_container_values(snapshot, usage.info.id), 1.0)
    lost = _gauge(
        "gputui_orphan_gpu_memory_bytes", "GPU memory held by PIDs that do not exist.", ("gpu",)
    )
    for gpu, value in sorted(orphan.items()):
        lost.add_metric([gpu], value)
    return [*out, reserved, lost]


#: Most severe first: when per-container series must be dropped, the least severe go.
_SEVERITY = {
    HealthStatus.FAIL: 0,
    HealthStatus.WARN: 1,
    HealthStatus.INFO: 2,
    HealthStatus.SKIP: 3,
    HealthStatus.PASS: 4,
}
#: Per-container check statuses that get series of their own (findings, not "all is well").
_FINDINGS = (HealthStatus.FAIL, HealthStatus.WARN, HealthStatus.INFO)


def _container_subject(check: HealthCheck) -> str | None:
    """The container a per-container check is about (ids ``container.<check>:<name>``)."""
    if not check.id.startswith("container."):
        return None
    return check.subject if check.subject is not None else check.id.partition(":")[2]


def _kept_container_checks(snapshot: Snapshot) -> tuple[list[HealthCheck], int]:
    """Per-container findings, of :data:`MAX_CONTAINER_SERIES` containers at most.

    The containers with the most severe findings are kept. Returns the checks kept and how
    many containers with findings were left out.
    """
    worst: dict[str, int] = {}
    for check in snapshot.health:
        subject = _container_subject(check)
        if subject is not None and check.status in _FINDINGS:
            worst[subject] = min(worst.get(subject, 9), _SEVERITY[check.status])
    ranked = sorted(worst, key=lambda subject: (worst[subject], subject))
    kept = set(ranked[:MAX_CONTAINER_SERIES])
    checks = [c for c in snapshot.health if c.status in _FINDINGS and _container_subject(c) in kept]
    return checks, len(ranked) - len(kept)


def health_families(snapshot: Snapshot) -> list[Metric]:
    """``gputui_health_status`` and the per-status count of per-container checks.

    Host and GPU checks get one series per status (their number is fixed by the host). A
    per-container check (id ``container.<check>:<name>``) gets its series only while it is a
    finding (fail, warn, info) and only for the :data:`MAX_CONTAINER_SERIES` containers with
    the most severe findings, so containers with generated names cannot grow the series count
    without bound; series of a passing or vanished container are simply no longer exported.
    """
    health = _gauge(
        "gputui_health_status",
        "1 for the current status of each health check.",
        ("check", "status"),
    )
    findings, _ = _kept_container_checks(snapshot)
    shown = [c for c in snapshot.health if _container_subject(c) is None] + findings
    # Two ids may become one label value once cleaned and shortened: the first one is exported
    # (a repeated label set would make Prometheus drop samples of the scrape).
    seen: set[str] = set()
    for check in shown:
        check_id = _label(check.id)
        if check_id in seen:
            continue
        seen.add(check_id)
        for status in HealthStatus:
            health.add_metric([check_id, status.value], 1.0 if check.status is status else 0.0)
    counts = dict.fromkeys(HealthStatus, 0)
    for check in snapshot.health:
        if _container_subject(check) is not None:
            counts[check.status] += 1
    per_status = _gauge(
        "gputui_container_health_checks",
        "Per-container health checks by status (all containers, exported or not).",
        ("status",),
    )
    for status, n in counts.items():
        per_status.add_metric([status.value], float(n))
    return [health, per_status]


def dropped_family(
    snapshot: Snapshot, findings_dropped: int = 0, users_dropped: int | None = None
) -> Metric:
    """``gputui_series_dropped{family}``: containers (or findings) left out of a capped family.

    ``users_dropped`` adds the user families' count (only when they are exported).
    """
    _, health_dropped = _kept_container_checks(snapshot)
    idle = sum(1 for u in snapshot.containers if u.idle_reserved)
    dropped = _gauge(
        "gputui_series_dropped",
        f"Containers left out of a family capped at {MAX_CONTAINER_SERIES} containers.",
        ("family",),
    )
    dropped.add_metric(["gputui_health_status"], float(health_dropped))
    dropped.add_metric(
        ["gputui_container_idle_gpu_reservation"], float(max(0, idle - MAX_CONTAINER_SERIES))
    )
    dropped.add_metric(["gputui_finding"], float(findings_dropped))
    if users_dropped is not None:
        dropped.add_metric(["gputui_user_gpu_memory_used_bytes"], float(users_dropped))
    return dropped


def user_families(snapshot: Snapshot, totals: UserTotals | None = None) -> tuple[list[Metric], int]:
    """Per-user GPU memory, processes and SM (``--user-series``), and how many users were left out.

    A user is the host uid of the processes, named from the host's passwd, or ``uid N
    (container)`` (see :mod:`gputui.derive.users`); at most :data:`MAX_USER_SERIES` users, those
    with the most GPU memory, get series. ``totals`` are the analysis's (the rows the TUI and
    ``--once`` show); None computes them here.
    """
    rows = totals.users if totals is not None else user_usage(snapshot)
    memory = _gauge(
        "gputui_user_gpu_memory_used_bytes",
        "GPU memory held by a user's processes, on every GPU.",
        ("user",),
    )
    count = _gauge("gputui_user_gpu_processes", "GPU processes of a user.", ("user",))
    sm = _gauge("gputui_user_sm_util", "Sum of SM % of a user's processes.", ("user",))
    for row in rows[:MAX_USER_SERIES]:
        label = [_label(row.label)]
        memory.add_metric(label, float(row.gpu_memory_bytes))
        count.add_metric(label, float(row.processes))
        if row.sm_util is not None:
            sm.add_metric(label, float(row.sm_util))
    return [memory, count, sm], max(0, len(rows) - MAX_USER_SERIES)


def finding_family(findings: Iterable[Finding]) -> tuple[Metric, int]:
    """``gputui_finding{kind,subject,severity}``: 1 per finding of the analysis.

    At most :data:`MAX_FINDING_SERIES` findings, the most severe first. Returns the family and
    how many findings were left out.
    """
    family = _gauge(
        "gputui_finding",
        "1 per finding (sharing, memory growth, idle reservation...), as the TUI shows them.",
        ("kind", "subject", "severity"),
    )
    # Most severe first: when findings must be dropped, the least severe go.
    ranked = sorted(
        {
            (FINDING_RANK[f.severity], _label(f.kind), _label(f.subject), _label(f.severity))
            for f in findings
        }
    )
    for _, *values in ranked[:MAX_FINDING_SERIES]:
        family.add_metric(values, 1.0)
    return family, max(0, len(ranked) - MAX_FINDING_SERIES)


def _fault_container(count: FaultCount) -> str:
    if count.container_id is None:
        return ""
    return _label(count.container_name or count.container_id[:12])


def fault_families(snapshot: Snapshot) -> list[Metric]:
    """Kernel-log faults counted since gputui started (the snapshot's ``fault_counts``).

    XIDs by GPU, XID, class and container; OOM kills by container and class. The families are
    there only when the kernel log is read.
    """
    if "kmsg" not in snapshot.sources:
        return []
    xids = CounterMetricFamily(
        "gputui_xid",
        "XID errors in the kernel log, by GPU, XID, class and the container they hit.",
        labels=["gpu", "xid", "class", "container"],
    )
    ooms = CounterMetricFamily(
        "gputui_oom_kills",
        "Processes the kernel killed for memory, by container and class.",
        labels=["container", "class"],
    )
    # Two containers of one name (or ids cut to 12) give one series: summed, never doubled.
    sums: dict[tuple[str, ...], float] = {}
    for count in snapshot.fault_counts:
        key: tuple[str, ...]
        if count.kind == "xid":
            gpu = "" if count.gpu_index is None else str(count.gpu_index)
            xid = "" if count.xid is None else str(count.xid)
            key = ("xid", gpu, xid, _label(count.fault_class), _fault_container(count))
        else:
            key = ("oom", _fault_container(count), _label(count.fault_class))
        sums[key] = sums.get(key, 0.0) + count.count
    for key, value in sums.items():
        (xids if key[0] == "xid" else ooms).add_metric(list(key[1:]), value)
    return [xids, ooms]


def status_families(
    snapshot: Snapshot, analysis: Analysis | None, users_dropped: int | None = None
) -> list[Metric]:
    """Health checks, source status, findings, alerts and an info gauge.

    ``users_dropped``: users left out of the user families, None when those are not exported.
    """
    up = _gauge("gputui_source_up", "1 when the data source answered.", ("source",))
    for name, source in sorted(snapshot.sources.items()):
        up.add_metric([_label(name)], 1.0 if source.ok else 0.0)
    info = _gauge(
        "gputui_info",
        "gputui and NVIDIA versions (value 1).",
        ("version", "Hostname", "driver_version", "cuda_driver_version", "mode"),
    )
    h = snapshot.host
    info.add_metric(
        [
            __version__,
            _label(h.hostname),
            _label(h.driver_version),
            _label(h.cuda_driver_version),
            _label(snapshot.mode),
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
    alerts = analysis.alerts if analysis is not None else None
    active = {
        (_label(a.rule), _label(a.subject), _label(a.severity), _label(a.phase.value))
        for a in (alerts.active if alerts else ())
    }
    for values in sorted(active):  # one series per label set, as for the health checks
        alert.add_metric(list(values), 1.0)
    findings, findings_dropped = finding_family(analysis.findings if analysis else ())
    health, per_status = health_families(snapshot)
    dropped = dropped_family(snapshot, findings_dropped, users_dropped)
    return [health, up, info, taken, alert, findings, per_status, dropped]


class SnapshotMetrics:
    """The last published snapshot and the collector's own state, as exposition text.

    A prometheus_client collector (:meth:`collect`). The collector thread calls
    :meth:`rebuild` after each collection; scrapes call :meth:`exposition`, which only adds the
    age of the last good collection to the prebuilt body, so it never waits for a collection.

    Every series carries the host label (:data:`HOST_LABEL`): the last published snapshot's
    host name, and before the first one ``hostname``.

    Args:
        pid_labels: Add a ``pid`` label to the process gauges (unbounded over time: opt-in).
        interval: The collection interval, exported when given.
        hostname: The host label before the first snapshot; this host's node name when None.
        user_series: Export the per-user gauges (a ``user`` label: opt-in).
    """

    def __init__(
        self,
        *,
        pid_labels: bool = False,
        interval: float | None = None,
        hostname: str | None = None,
        user_series: bool = False,
    ) -> None:
        self.pid_labels = pid_labels
        self.user_series = user_series
        self.interval = interval
        self._latest: tuple[Snapshot, Analysis | None] | None = None
        # gethostname(2) is the UTS node name, what the collector reports too.
        self._host = _label(hostname if hostname is not None else os.uname().nodename)
        self._duration = 0.0
        self._errors = 0
        self._restarts = 0
        self._last_ok_wall: float | None = None
        self._last_ok_mono: float | None = None
        self._started_mono = time.monotonic()
        self._lock = threading.Lock()
        # The body, the host label of its series and when its collection finished (None:
        # none yet), swapped together: a scrape's age line describes the body it follows,
        # even while a newer snapshot is published but not yet rendered.
        self._rendered: tuple[bytes, str, float | None] = (
            b"",
            _escape_label_value(self._host),
            None,
        )
        #: Snapshots published so far (a change means the collector made progress).
        self.publications = 0
        #: The ledger's quantities since the start (``gputui_gpu_seconds_total``...).
        self.ledger = LedgerCounters(interval or 1.0)

    def publish(
        self, snapshot: Snapshot, analysis: Analysis | None = None, duration: float = 0.0
    ) -> None:
        """Make ``snapshot`` (and its findings and alerts) what the next :meth:`rebuild` renders.

        One reference swap; ``analysis`` None exports no finding and no alert.
        """
        self._latest = (snapshot, analysis)
        self._host = _label(snapshot.host.hostname)
        self._duration = duration
        self._last_ok_wall = time.time()
        self._last_ok_mono = time.monotonic()
        self.publications += 1
        try:
            self.ledger.take(snapshot)
        except Exception as exc:  # a bug in the ledger must not stop the other metrics
            self.count_error()
            log_stderr(f"ledger counters failed: {type(exc).__name__}: {exc}")

    def count_error(self) -> None:
        """Count a collection that raised (or a collector thread that died)."""
        with self._lock:
            self._errors += 1

    def count_restart(self) -> None:
        """Count a restart of a collector thread that had died."""
        with self._lock:
            self._restarts += 1

    def describe(self) -> Iterable[Metric]:
        """Nothing up front: families depend on the snapshot (and no collect at register)."""
        return []

    def collect(self) -> Iterable[Metric]:
        """Metric families of the collector's state and of the last published snapshot."""
        latest = self._latest
        errors = CounterMetricFamily("gputui_collect_errors", "Collections that failed.")
        errors.add_metric([], float(self._errors))
        restarts = CounterMetricFamily(
            "gputui_collector_restarts", "Collector threads restarted after they died."
        )
        restarts.add_metric([], float(self._restarts))
        duration = _gauge(
            "gputui_collect_duration_seconds", "How long the last collection took.", ()
        )
        duration.add_metric([], self._duration)
        families: list[Metric] = [errors, restarts, duration]
        if self._last_ok_wall is not None:
            last = _gauge(
                "gputui_last_collect_timestamp_seconds",
                "When the last successful collection finished.",
                (),
            )
            last.add_metric([], self._last_ok_wall)
            families.append(last)
        if self.interval is not None:
            interval = _gauge(
                "gputui_collect_interval_seconds", "The collection interval in effect.", ()
            )
            interval.add_metric([], self.interval)
            families.append(interval)
        if latest is not None:
            snapshot, analysis = latest
            families += gpu_families(snapshot)
            families += container_families(snapshot, pid_labels=self.pid_labels)
            users_dropped = None
            if self.user_series:
                totals = analysis.totals if analysis is not None else None
                users, users_dropped = user_families(snapshot, totals)
                families += users
            families += status_families(snapshot, analysis, users_dropped)
            families += ledger_families(self.ledger)
            families += fault_families(snapshot)
        # One place adds the host label, so no family (today's or a future one) goes without it
        # and series of same-named containers on different hosts never merge.
        return [with_host_label(family, self._host) for family in families]

    def rebuild(self) -> None:
        """Render the exposition body of the current state (on the collector thread)."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self)
        host = _escape_label_value(self._host)  # what collect() labels the body with
        finished = self._last_ok_mono  # the collection this body shows (same thread as publish)
        self._rendered = (generate_latest(registry), host, finished)

    def exposition(self) -> bytes:
        """The prebuilt body plus ``gputui_collect_age_seconds`` (what a scrape sends)."""
        body, host, finished = self._rendered
        since = finished if finished is not None else self._started_mono
        age = max(0.0, time.monotonic() - since)
        return (
            body
            + (
                "# HELP gputui_collect_age_seconds Seconds since the last successful collection "
                "(since the start when there was none).\n"
                "# TYPE gputui_collect_age_seconds gauge\n"
                f'gputui_collect_age_seconds{{{HOST_LABEL}="{host}"}} {age:.3f}\n'
            ).encode()
        )


#: Labels of the ledger counters: the device, then who it is credited to.
LEDGER_LABELS = ("gpu", "UUID", "party", *CONTAINER_LABELS, "user")


def ledger_families(counters: LedgerCounters) -> list[Metric]:
    """``gputui_gpu_seconds_total`` and ``gputui_energy_joules_total`` since the start.

    ``kind`` is ``reserved``, ``occupied`` or ``busy`` (docs/ledger.md); ``part`` of the energy
    is ``idle`` or ``dynamic`` (an estimated split of the GPU's energy counter). ``party`` is
    ``container``, ``user`` (host processes), ``unknown`` or ``unallocated``.
    """
    seconds = CounterMetricFamily(
        "gputui_gpu_seconds",
        "GPU-seconds since the exporter started, by kind (reserved, occupied, busy).",
        labels=("kind", *LEDGER_LABELS),
    )
    energy = CounterMetricFamily(
        "gputui_energy_joules",
        "GPU energy since the exporter started, split by party (idle, dynamic: an estimate).",
        labels=("part", *LEDGER_LABELS),
    )
    for (device, subject), a in sorted(
        counters.totals.items(), key=lambda kv: (kv[0][0].name, kv[0][1].kind, kv[0][1].key)
    ):
        is_container = subject.kind == "container"
        namespace, _, pod = (subject.pod or "").rpartition("/")
        values = (
            _label(device.name),
            _label(device.uuid or ""),
            subject.kind,
            _label(subject.name if is_container else ""),
            _label(subject.key if is_container else ""),
            _label(subject.image or ""),
            _label(subject.project or ""),
            _label(subject.service or ""),
            _label(pod),
            _label(namespace),
            _label(subject.name if subject.kind == "user" else ""),
        )
        for kind, value in (
            ("reserved", a.reserved_s),
            ("occupied", a.occupied_s),
            ("busy", a.busy_s),
        ):
            # Every series from its first interval on, zero included: increase() then counts
            # from the start.
            seconds.add_metric([kind, *values], value)
        energy.add_metric(["idle", *values], a.idle_j)
        energy.add_metric(["dynamic", *values], a.dynamic_j)
    return [seconds, energy]


def with_host_label(family: Metric, host: str) -> Metric:
    """``family`` with the host label added to every sample that lacks it (last label)."""
    family.samples = [
        sample
        if HOST_LABEL in sample.labels
        else sample._replace(labels={**sample.labels, HOST_LABEL: host})
        for sample in family.samples
    ]
    return family


def _escape_label_value(value: str) -> str:
    """A label value as the exposition format writes it between double quotes."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def log_stderr(message: str) -> None:
    """One inert line on stderr (exception texts can carry container strings)."""
    with contextlib.suppress(OSError, ValueError):  # a closed stderr must not end a thread
        print(f"gputui export: {safe_text(message, 500)}", file=sys.stderr, flush=True)
