"""Query answers → frozen rows: the fleet's hosts, and one host's GPUs and containers.

Every label value passes :func:`gputui.boundary.sanitise.safe_text` here, before anything shows it;
the raw ``instance`` is kept apart (``key``) only to scope the drill-down's queries.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import field
from enum import Enum

from gputui.boundary.sanitise import safe_text
from gputui.fleet.client import instant_vector, range_matrix
from gputui.fleet.queries import FIELD, GPU_SERIES
from gputui.model.records import record

#: Longest label value shown.
LABEL_LIMIT = 128
#: Largest count taken from an answer (GPUs, containers, checks per host).
MAX_COUNT = 1_000_000
#: Hosts in one fleet, GPUs and containers in one drill-down.
MAX_HOSTS = 20_000
MAX_GPUS = 1_024
MAX_CONTAINERS = 4_096
MIB = 1024 * 1024


def _label(value: str | None) -> str:
    return safe_text(value, LABEL_LIMIT, na="")


def _count(value: float | None) -> int:
    if value is None:
        return 0
    return int(min(max(value, 0.0), MAX_COUNT))


def _finite(value: float | None, low: float = 0.0, high: float = 1e15) -> float | None:
    if value is None or math.isnan(value):
        return None
    return min(max(value, low), high)


class Kind(Enum):
    """What a host's series come from."""

    GPUTUI = "gputui"  # gputui export: containers, health, alerts
    DCGM = "dcgm"  # dcgm-exporter (or anything with only the DCGM_FI_* names)


#: A container of one host, as its series name it: (namespace, pod, container), raw. The first
#: two are empty for a container that is no Kubernetes pod's (and in an older exporter's series).
ContainerKey = tuple[str, str, str]


def container_key(labels: dict[str, str]) -> ContainerKey:
    """The (namespace, pod, container) labels of a series, each ``""`` where absent."""
    return (labels.get("namespace", ""), labels.get("pod", ""), labels.get("container", ""))


def pod_name(namespace: str, pod: str) -> str:
    """``namespace/pod``, ``pod`` without a namespace, ``""`` for no pod (shown values)."""
    if not pod:
        return ""
    return f"{namespace}/{pod}" if namespace else pod


@record
class TopContainer:
    """A container named in the host table, with the GPU memory its processes hold.

    Attributes:
        name: The ``container`` label (for a pod's container, its Kubernetes name), sanitised.
        memory_bytes: GPU memory its processes hold.
        pod: The ``pod`` label, sanitised; ``""`` for a container that is no pod's.
        namespace: The ``namespace`` label, sanitised; ``""`` when none.
    """

    name: str
    memory_bytes: float
    pod: str = ""
    namespace: str = ""

    @property
    def shown(self) -> str:
        """``pod/container`` for a pod's container, else the container's name."""
        return f"{self.pod}/{self.name}" if self.pod else self.name


@record
class HostRow:
    """One host of the fleet, as its series allow.

    Attributes:
        key: The raw ``instance`` label; only for queries, never displayed.
        instance: The ``instance`` label, sanitised.
        host: The name shown: the ``Hostname`` label, else ``instance``.
        job: The scrape job.
        kind: gputui's exporter or plain dcgm-exporter.
        up: The last scrape succeeded; None when Prometheus no longer has an ``up`` series.
        scrape_age_s: Seconds since Prometheus last scraped the target.
        collect_age_s: Seconds since gputui last collected (gputui hosts).
        gpus: GPUs answering now; when down, the count last seen.
        util_pct: Mean GPU utilisation.
        mem_used_mib: Framebuffer used, summed.
        mem_total_mib: Framebuffer used + free, summed.
        power_w: Power draw, summed.
        temp_max_c: The hottest GPU.
        containers: Containers holding GPU memory (None: the series cannot say).
        top: The containers holding the most GPU memory.
        idle_reservations: Containers reserving GPUs and running nothing on them.
        alerts: Firing alerts (gputui's and Prometheus's own rules naming the instance).
        failing: Health checks failing.
        warning: Health checks warning.
        sources_down: gputui sources (NVML, Docker) not answering.
    """

    key: str
    instance: str
    host: str
    job: str
    kind: Kind
    up: bool | None
    scrape_age_s: float | None
    collect_age_s: float | None
    gpus: int
    util_pct: float | None
    mem_used_mib: float | None
    mem_total_mib: float | None
    power_w: float | None
    temp_max_c: float | None
    containers: int | None
    top: tuple[TopContainer, ...]
    idle_reservations: int | None
    alerts: int
    failing: int
    warning: int
    sources_down: int

    @property
    def down(self) -> bool:
        """The target does not answer its scrapes (or Prometheus lost it)."""
        return self.up is not True

    @property
    def problems(self) -> int:
        """Alerts, failing checks and silent sources together, for sorting."""
        return self.alerts + self.failing + self.sources_down + (1 if self.down else 0)


def hosts_from(data: object, now: float) -> list[HostRow]:
    """The host table from the answers to :func:`gputui.fleet.queries.host_queries`.

    A host is an ``instance`` that has (or had, within the look-back) GPU series; a target
    that is down is included when its job scrapes GPU hosts, so a host that never answered
    is shown as down too.

    Args:
        data: The answers' ``data`` members, in a list (or one ``data``).
        now: The query's time (epoch seconds), for ages.
    """
    answers = data if isinstance(data, list) else [data]
    fields: dict[str, dict[str, float]] = defaultdict(dict)
    jobs: dict[str, str] = {}
    names: dict[str, str] = {}
    tops: dict[str, list[TopContainer]] = defaultdict(list)
    samples = [sample for answer in answers[:64] for sample in instant_vector(answer)]
    for labels, value in samples:
        which = labels.get(FIELD, "")
        instance = labels.get("instance")
        if instance is None:
            continue
        if "job" in labels:
            jobs.setdefault(instance, labels["job"])
        if which in ("seen", "name") and labels.get("Hostname"):
            names.setdefault(instance, labels["Hostname"])
        if which == "name":
            continue
        if which == "seen":
            # One series per Hostname the target's GPUs had: their counts add up.
            fields[instance]["seen"] = fields[instance].get("seen", 0.0) + value
        elif which == "checks":
            status = "fail" if labels.get("status") == "fail" else "warn"
            fields[instance][status] = fields[instance].get(status, 0.0) + value
        elif which == "top":
            namespace, pod, container = container_key(labels)
            top = TopContainer(_label(container), max(value, 0.0), _label(pod), _label(namespace))
            tops[instance].append(top)
        elif which:
            fields[instance][which] = value
    gpu_jobs = {jobs.get(i) for i, f in fields.items() if "seen" in f or "gpus" in f}
    rows: list[HostRow] = []
    for instance, f in fields.items():
        is_gpu = "seen" in f or "gpus" in f or "age" in f or "gputui" in f
        if not is_gpu and not (f.get("up") == 0 and jobs.get(instance) in gpu_jobs):
            continue
        rows.append(_row(instance, f, jobs, names, tops.get(instance, []), now))
        if len(rows) >= MAX_HOSTS:
            break
    rows.sort(key=lambda r: (r.host, r.instance))
    return rows


def _row(
    instance: str,
    f: dict[str, float],
    jobs: dict[str, str],
    names: dict[str, str],
    top: list[TopContainer],
    now: float,
) -> HostRow:
    kind = Kind.GPUTUI if "age" in f or "gputui" in f else Kind.DCGM
    up = None if "up" not in f else f["up"] == 1
    scrape = f.get("scrape")
    used, free = _finite(f.get("mem_used")), _finite(f.get("mem_free"))
    gpus = _count(f.get("gpus")) if up else _count(f.get("seen", f.get("gpus")))
    gputui = kind is Kind.GPUTUI
    return HostRow(
        key=instance,
        instance=_label(instance),
        host=_label(names.get(instance) or instance),
        job=_label(jobs.get(instance, "")),
        kind=kind,
        up=up,
        scrape_age_s=None if scrape is None else _finite(now - scrape),
        collect_age_s=_finite(f.get("age")),
        gpus=gpus,
        util_pct=_finite(f.get("util"), high=100.0),
        mem_used_mib=used,
        mem_total_mib=None if used is None or free is None else used + free,
        power_w=_finite(f.get("power")),
        temp_max_c=_finite(f.get("temp"), low=-273.0, high=1000.0),
        containers=_count(f.get("containers")) if gputui else None,
        top=tuple(sorted(top, key=lambda t: (-t.memory_bytes, t.name, t.namespace, t.pod))),
        idle_reservations=_count(f.get("idle")) if gputui else None,
        alerts=_count(f.get("alerts")) + _count(f.get("rules")),
        failing=_count(f.get("fail")),
        warning=_count(f.get("warn")),
        sources_down=_count(f.get("sources_down")),
    )


# -- one host ---------------------------------------------------------------------------------


@record
class GpuRow:
    """One GPU of a drilled-down host."""

    gpu: str
    uuid: str
    model: str
    util_pct: float | None
    mem_used_mib: float | None
    mem_total_mib: float | None
    power_w: float | None
    temp_c: float | None
    util_history: tuple[float, ...] = ()
    mem_history: tuple[float, ...] = ()


@record
class ContainerRow:
    """One container of a drilled-down host (gputui hosts only).

    A container is its (namespace, pod, container) labels: two pods' containers of one name are
    two rows. ``pod`` and ``namespace`` are ``""`` for a container that is no pod's.
    """

    name: str
    image: str
    gpus: tuple[str, ...]
    memory_bytes: float
    sm_util: float | None
    idle_reservation: bool
    memory_history: tuple[float, ...] = ()
    pod: str = ""
    namespace: str = ""

    @property
    def pod_shown(self) -> str:
        """``namespace/pod``, or ``""`` for a container that is no pod's."""
        return pod_name(self.namespace, self.pod)


@record
class HostDetail:
    """What one host's series say: its GPUs, containers, firing alerts and failing checks."""

    gpus: tuple[GpuRow, ...]
    containers: tuple[ContainerRow, ...]
    alerts: tuple[str, ...]
    checks: tuple[tuple[str, str], ...] = field(default=())  # (check id, fail | warn)


def _gpu_key(labels: dict[str, str]) -> str:
    return labels.get("gpu", "") or labels.get("UUID", "")


def detail_from(data: object, history: object | None) -> HostDetail:
    """One host from the answers of ``host_detail`` and ``host_history`` (None: no history).

    Args:
        data: The instant answer's ``data``.
        history: The range answer's ``data``, or None.
    """
    gpu_figures: dict[str, dict[str, float]] = defaultdict(dict)
    gpu_labels: dict[str, dict[str, str]] = {}
    mem: dict[ContainerKey, float] = defaultdict(float)
    sm: dict[ContainerKey, float] = {}
    gpus_of: dict[ContainerKey, set[str]] = defaultdict(set)
    images: dict[ContainerKey, str] = {}
    idle: set[ContainerKey] = set()
    alerts: set[str] = set()
    checks: set[tuple[str, str]] = set()
    for labels, value in instant_vector(data):
        name = labels.get("__name__", "")
        key = container_key(labels)
        container = key[2]
        if name in GPU_SERIES:
            gpu = _gpu_key(labels)
            gpu_labels.setdefault(gpu, labels)
            gpu_figures[gpu][name] = value
        elif name == "gputui_container_gpu_memory_bytes" and container:
            mem[key] += max(value, 0.0)
            gpus_of[key].add(_label(labels.get("gpu")))
            images.setdefault(key, labels.get("image", ""))
        elif name == "gputui_container_sm_util" and container:
            sm[key] = sm.get(key, 0.0) + max(value, 0.0)
        elif name == "gputui_container_idle_gpu_reservation" and container and value == 1:
            idle.add(key)
            images.setdefault(key, labels.get("image", ""))
        elif "check" in labels and "status" in labels:
            checks.add((_label(labels["check"]), _label(labels["status"])))
        elif "rule" in labels:
            alerts.add(_label(f"{labels['rule']} {labels.get('subject', '')}".strip()))
        elif "alertname" in labels:
            alerts.add(_label(labels["alertname"]))
    util_hist, mem_hist, cont_hist = _histories(history)
    gpus = [
        _gpu_row(key, gpu_labels[key], figures, util_hist.get(key, ()), mem_hist.get(key, ()))
        for key, figures in list(gpu_figures.items())[:MAX_GPUS]
    ]
    gpus.sort(key=lambda g: (len(g.gpu), g.gpu))
    containers = [
        ContainerRow(
            name=_label(c[2]),
            image=_label(images.get(c, "")),
            gpus=tuple(sorted(gpus_of.get(c, set()), key=lambda g: (len(g), g))),
            memory_bytes=mem.get(c, 0.0),
            sm_util=sm.get(c),
            idle_reservation=c in idle,
            memory_history=cont_hist.get(c, ()),
            pod=_label(c[1]),
            namespace=_label(c[0]),
        )
        for c in sorted(set(mem) | idle)[:MAX_CONTAINERS]
    ]
    containers.sort(key=lambda c: (-c.memory_bytes, c.name, c.namespace, c.pod))
    order = {"fail": 0, "warn": 1}
    return HostDetail(
        gpus=tuple(gpus),
        containers=tuple(containers),
        alerts=tuple(sorted(alerts)),
        checks=tuple(sorted(checks, key=lambda c: (order.get(c[1], 2), c[0]))),
    )


def _gpu_row(
    key: str,
    labels: dict[str, str],
    figures: dict[str, float],
    util_history: tuple[float, ...],
    mem_history: tuple[float, ...],
) -> GpuRow:
    used = _finite(figures.get("DCGM_FI_DEV_FB_USED"))
    free = _finite(figures.get("DCGM_FI_DEV_FB_FREE"))
    return GpuRow(
        gpu=_label(key),
        uuid=_label(labels.get("UUID")),
        model=_label(labels.get("modelName")),
        util_pct=_finite(figures.get("DCGM_FI_DEV_GPU_UTIL"), high=100.0),
        mem_used_mib=used,
        mem_total_mib=None if used is None or free is None else used + free,
        power_w=_finite(figures.get("DCGM_FI_DEV_POWER_USAGE")),
        temp_c=_finite(figures.get("DCGM_FI_DEV_GPU_TEMP"), low=-273.0, high=1000.0),
        util_history=util_history,
        mem_history=mem_history,
    )


Histories = dict[str, tuple[float, ...]]
ContainerHistories = dict[ContainerKey, tuple[float, ...]]


def _histories(history: object | None) -> tuple[Histories, Histories, ContainerHistories]:
    util: Histories = {}
    mem: Histories = {}
    containers: ContainerHistories = {}
    if history is None:
        return util, mem, containers
    gpu_targets = {"util": util, "mem": mem}
    for labels, points in range_matrix(history):
        which = labels.get(FIELD, "")
        values = tuple(v for _, v in points)
        if which in gpu_targets:
            gpu_targets[which][_gpu_key(labels)] = values
        elif which == "container_mem":
            containers[container_key(labels)] = values
    return util, mem, containers


def filtered(rows: Iterable[HostRow], text: str) -> list[HostRow]:
    """Hosts whose name, instance, job or top containers contain ``text`` (case-insensitive).

    A top container matches by its name, its pod's or its namespace's, or ``pod/container``.
    """
    needle = text.strip().lower()
    if not needle:
        return list(rows)
    return [
        r
        for r in rows
        if needle in r.host.lower()
        or needle in r.instance.lower()
        or needle in r.job.lower()
        or any(
            needle in t.name.lower()
            or needle in t.pod.lower()
            or needle in t.namespace.lower()
            or needle in t.shown.lower()
            for t in r.top
        )
    ]


#: Sort orders of the host table, as the ``s`` key cycles them: (name, key, biggest first).
SORTS: Sequence[tuple[str, Callable[[HostRow], tuple[float | str, ...]], bool]] = (
    ("host", lambda r: (r.host, r.instance), False),
    ("problems", lambda r: (r.problems, r.warning), True),
    ("util", lambda r: (r.util_pct if r.util_pct is not None else -1.0,), True),
    ("memory", lambda r: (r.mem_used_mib if r.mem_used_mib is not None else -1.0,), True),
    ("power", lambda r: (r.power_w if r.power_w is not None else -1.0,), True),
    ("temp", lambda r: (r.temp_max_c if r.temp_max_c is not None else -300.0,), True),
    ("idle", lambda r: (r.idle_reservations or 0,), True),
    ("gpus", lambda r: (r.gpus,), True),
)
SORT_NAMES = tuple(name for name, _, _ in SORTS)


def sorted_rows(rows: Iterable[HostRow], sort: str, reverse: bool = False) -> list[HostRow]:
    """Hosts in a :data:`SORTS` order (host name breaks ties); ``reverse`` flips it.

    Raises:
        ValueError: an unknown sort name.
    """
    for name, key, biggest_first in SORTS:
        if name == sort:
            by_name = sorted(rows, key=lambda r: (r.host, r.instance))
            return sorted(by_name, key=key, reverse=biggest_first != reverse)
    raise ValueError(f"unknown sort {sort!r}: one of {', '.join(SORT_NAMES)}")
