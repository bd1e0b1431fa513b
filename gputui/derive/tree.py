"""Snapshot → the ordered groups the container tree shows (pure, no Textual).

Top level, in this order:

1. containers that use a GPU, by GPU memory (largest first), then containers that reserved a
   GPU and sit idle, then containers known only from cgroups without a GPU process (by name);
   the order ``gputui.collect.collector.attribute_containers`` uses, so the tree and the
   report agree on who comes first;
   Containers of one Kubernetes pod (two or more of them featured) are one ``pod`` group in
   the place of its first container, its containers (and their processes) under it: pod →
   containers → processes. A pod of one featured container keeps it at the top, its row
   naming the pod;
2. ``host``: GPU processes outside any container;
3. ``orphans``: GPU memory held by PIDs nobody can find;
4. ``others``: the remaining containers (no GPU asked for, no GPU process), collapsed by default.

Groups 2-4 appear only when non-empty.

:func:`node_markers` turns findings and GPU shares into the short markers tree nodes carry.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from enum import Enum

from gputui.boundary import sanitise
from gputui.derive import units
from gputui.derive.findings import HOST, Share, span_text
from gputui.model.containers import ContainerInfo
from gputui.model.processes import GpuProcess, per_gpu_sm
from gputui.model.records import record
from gputui.model.snapshot import ContainerUsage, Snapshot
from gputui.model.status import Finding, FindingSeverity

HOST_KEY = "host"
ORPHANS_KEY = "orphans"
OTHERS_KEY = "others"


class GroupKind(str, Enum):
    """What a top-level node stands for."""

    CONTAINER = "container"
    POD = "pod"
    HOST = "host"
    ORPHANS = "orphans"
    OTHERS = "others"


@record
class Group:
    """One top-level node of the container tree.

    Attributes:
        key: Stable identity: the container id, or ``host``/``orphans``/``others``.
        kind: What the group stands for.
        usage: The container (CONTAINER kind only); a stub when the engine does not know it.
        processes: Its GPU processes, ordered by PID then GPU (one entry per process and GPU).
        gpu_memory_bytes: Sum of GPU memory over the processes (None when none reported any).
        sm_util: SM % of the processes per GPU (the mean over their GPUs, ``per_gpu_sm``),
            None when none reported one.
        containers: The containers listed under ``others``.
        members: A pod's container groups (POD kind only), in the containers' order.
        pod: A pod's ``(namespace, name)`` (POD kind only).
    """

    key: str
    kind: GroupKind
    usage: ContainerUsage | None = None
    processes: tuple[GpuProcess, ...] = ()
    gpu_memory_bytes: int | None = None
    sm_util: int | None = None
    containers: tuple[ContainerUsage, ...] = ()
    members: tuple[Group, ...] = ()
    pod: tuple[str, str] | None = None


def pod_key(namespace: str | None, pod: str) -> str:
    """A pod group's key: ``pod:<namespace>/<name>``."""
    return f"pod:{namespace or ''}/{pod}"


def _pods(featured: list[Group]) -> list[Group]:
    """Featured groups with each pod of two or more containers as one POD group (in place)."""
    members: dict[tuple[str, str], list[Group]] = {}
    for group in featured:
        info = group.usage.info if group.usage is not None else None
        if info is not None and info.k8s_pod:
            members.setdefault((info.k8s_namespace or "", info.k8s_pod), []).append(group)
    pods = {pod: found for pod, found in members.items() if len(found) > 1}
    if not pods:
        return featured
    out: list[Group] = []
    placed: set[tuple[str, str]] = set()
    for group in featured:
        info = group.usage.info if group.usage is not None else None
        pod = (info.k8s_namespace or "", info.k8s_pod) if info and info.k8s_pod else None
        if pod is None or pod not in pods:
            out.append(group)
            continue
        if pod in placed:
            continue
        placed.add(pod)
        found = tuple(pods[pod])
        memory = [g.gpu_memory_bytes for g in found if g.gpu_memory_bytes is not None]
        processes = tuple(p for g in found for p in g.processes)
        out.append(
            Group(
                key=pod_key(*pod),
                kind=GroupKind.POD,
                gpu_memory_bytes=sum(memory) if memory else None,
                sm_util=per_gpu_sm(processes),
                members=found,
                pod=pod,
            )
        )
    return out


def flat(groups: Iterable[Group]) -> list[Group]:
    """The groups with each pod replaced by its containers (for sorting and filtering)."""
    out: list[Group] = []
    for group in groups:
        out.extend(group.members if group.kind is GroupKind.POD else (group,))
    return out


_DIGITS = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple[tuple[int, int, str], ...]:
    """Sort key ordering names as people count: ``c2`` before ``c10``, case-blind.

    Args:
        name: A container (or any) name.

    Returns:
        One ``(kind, length, text)`` entry per run of digits or non-digits. A digit run compares
        by its length without leading zeros, then by its digits: its value, without parsing a
        number of unbounded size.
    """
    parts: list[tuple[int, int, str]] = []
    for index, part in enumerate(_DIGITS.split(name.lower())):
        if not part:
            continue
        if index % 2:  # split() alternates text / digits: odd positions are the digit runs
            digits = part.lstrip("0") or "0"
            parts.append((0, len(digits), digits))
        else:
            parts.append((1, 0, part))
    return tuple(parts)


def process_key(process: GpuProcess) -> str:
    """Node identity of a process row: a process on two GPUs has two rows."""
    return f"{process.pid}:{process.sample.gpu_index}"


def _totals(processes: tuple[GpuProcess, ...]) -> tuple[int | None, int | None]:
    memory = [p.sample.used_memory_bytes for p in processes]
    known_memory = [m for m in memory if m is not None]
    return (sum(known_memory) if known_memory else None), per_gpu_sm(processes)


def _ordered(processes: list[GpuProcess]) -> tuple[GpuProcess, ...]:
    return tuple(sorted(processes, key=lambda p: (p.pid, p.sample.gpu_index)))


def _stub(container_id: str) -> ContainerUsage:
    # A process names a container the snapshot does not list at all: still show it, by id.
    return ContainerUsage(
        info=ContainerInfo(id=container_id, name=container_id[:12], image="", status="unknown"),
        known_to_engine=False,
    )


def _featured_order(group: Group) -> tuple[int, int, tuple[tuple[int, int, str], ...], str]:
    if group.processes:
        rank = 0
    elif group.usage is not None and group.usage.idle_reserved:
        rank = 1
    else:
        rank = 2
    name = group.usage.info.name if group.usage else group.key
    return rank, -(group.gpu_memory_bytes or 0), natural_key(name), group.key


def build_groups(snapshot: Snapshot) -> tuple[Group, ...]:
    """Group a snapshot's GPU processes under their containers.

    Args:
        snapshot: The refresh to show.

    Returns:
        The top-level groups in display order (see the module docstring).
    """
    by_container: dict[str, list[GpuProcess]] = {}
    host: list[GpuProcess] = []
    orphans: list[GpuProcess] = []
    for process in snapshot.processes:
        if process.container_id is not None:
            by_container.setdefault(process.container_id, []).append(process)
        elif process.on_host:
            host.append(process)
        else:  # gone, or hidden by /proc: where it runs is unknown, so not the host group
            orphans.append(process)

    usages = {usage.info.id: usage for usage in snapshot.containers}
    for container_id in by_container:
        if container_id not in usages:
            usages[container_id] = _stub(container_id)

    featured: list[Group] = []
    others: list[ContainerUsage] = []
    for container_id, usage in usages.items():
        processes = _ordered(by_container.get(container_id, []))
        if processes or usage.idle_reserved or not usage.known_to_engine:
            memory, sm = _totals(processes)
            if usage.pids or processes:
                # Prefer the collector's attribution totals; they are the ones the report shows.
                memory = usage.gpu_memory_bytes if usage.pids else memory
                sm = usage.sm_util if usage.pids else sm
            featured.append(
                Group(
                    key=container_id,
                    kind=GroupKind.CONTAINER,
                    usage=usage,
                    processes=processes,
                    gpu_memory_bytes=memory,
                    sm_util=sm,
                )
            )
        else:
            others.append(usage)

    featured.sort(key=_featured_order)
    groups = _pods(featured)
    if host:
        processes = _ordered(host)
        memory, sm = _totals(processes)
        groups.append(Group(HOST_KEY, GroupKind.HOST, None, processes, memory, sm))
    if orphans:
        processes = _ordered(orphans)
        memory, sm = _totals(processes)
        groups.append(Group(ORPHANS_KEY, GroupKind.ORPHANS, None, processes, memory, sm))
    if others:
        others.sort(key=lambda u: (not u.info.running, natural_key(u.info.name), u.info.id))
        groups.append(Group(OTHERS_KEY, GroupKind.OTHERS, containers=tuple(others)))
    return tuple(groups)


# -- markers ---------------------------------------------------------------------------------


@record
class Marker:
    """A flag on a tree node: ``shared GPU 1: 75%``, ``idle 12m``, ``OOM-killed``.

    Attributes:
        kind: The finding kind it comes from (``gpu_shared`` for sharing).
        text: The whole flag (already safe: built from numbers and GPU indexes only), for the
            selected row's line and the Evidence view.
        severity: The finding's: info, warn or fail.
        badge: The short form every row shows whatever the terminal's width (``IDLE``,
            ``SHARED``, ``THR 45%``; see :data:`BADGES`).
    """

    kind: str
    text: str
    severity: FindingSeverity
    badge: str = ""


#: What each badge of the tree means (the help screen's legend), in the order rows show them.
BADGES: tuple[tuple[str, str], ...] = (
    ("IDLE", "reserved a GPU and runs nothing on it, or sits idle on it"),
    ("SHARED", "shares a GPU (or MIG device) with another container or the host"),
    ("THR n%", "CPU-throttled: n % of its CPU periods hit the --cpus quota"),
    ("OOM", "killed for memory (OOM) since it started"),
    ("XID n", "the kernel log names it in XID error n (class and fix in the Evidence view)"),
    ("OOMK", "the kernel log shows one of its processes OOM-killed (last 24 h)"),
    ("MEM n%", "its memory use is n % of its memory limit"),
    ("LEAK", "GPU memory grows steadily (full in the time the flag's text says)"),
    ("RST n", "restarted n times"),
    ("MPS", "an MPS client (its SM % may be credited to the MPS server)"),
    ("CGROUP", "known from cgroups only, not to Docker"),
    ("INSPECT?", "its inspect reply was over the size cap: labels and GPU request unknown"),
    ("DOCKER?", "seen in cgroups while Docker is unreachable: whether Docker knows it, unknown"),
    ("STALE", "Docker is unreachable: its last known state"),
)


#: Markers keyed by the node they belong on: ``container:<id>``, ``pid:<pid>``, ``host``,
#: ``orphans``.
Markers = Mapping[str, tuple[Marker, ...]]


def _number(finding: Finding, name: str) -> float | None:
    value = finding.figure(name)
    return float(value) if isinstance(value, (int, float)) else None


def finding_marker(finding: Finding) -> Marker | None:
    """The marker of one finding (None for kinds shown elsewhere, such as sharing)."""
    kind, severity = finding.kind, finding.severity
    if kind == "idle_reservation":
        idle = _number(finding, "idle_seconds") or 0.0
        sm = _number(finding, "sm_util") or 0.0
        busy = (_number(finding, "gpu_processes") or 0) > 0
        mig = finding.figure("mig_devices")
        reserved = f"reserved MIG {sanitise.safe_text(str(mig), 24)}" if mig else "reserved GPU"
        text = f"idle at {sm:.0f}% SM" if busy else f"idle: {reserved}, no GPU process"
        if idle > 0:
            text += f" for {units.duration(idle)}"
        return Marker(kind, text, severity, "IDLE")
    if kind == "memory_growth":
        rate = _number(finding, "rate_mib_per_min") or 0.0
        fill = _number(finding, "time_to_fill_s")
        tail = f", full in {units.duration(fill)}" if fill else ""
        return Marker(kind, f"GPU mem +{rate:.0f} MiB/min{tail}", severity, "LEAK")
    if kind == "cpu_throttled":
        # The finding's own whole percentage and window, so the marker cannot round differently.
        percent = _number(finding, "throttled_percent")
        if percent is None:
            percent = (_number(finding, "throttled_ratio") or 0.0) * 100
        window = _number(finding, "window_s")
        tail = f" over {span_text(window)}" if window is not None else ""
        return Marker(kind, f"CPU throttled {percent:.0f}%{tail}", severity, f"THR {percent:.0f}%")
    if kind == "memory_pressure":
        used = _number(finding, "memory_used_bytes")
        limit = _number(finding, "memory_limit_bytes")
        share = units.pct(units.ratio(used, limit))
        return Marker(kind, f"mem {share} of limit", severity, f"MEM {share}")
    if kind == "oom_killed":
        return Marker(kind, "OOM-killed", severity, "OOM")
    if kind == "kernel_fault":
        if finding.figure("fault") == "oom":
            return Marker(kind, "OOM kill (kernel log)", severity, "OOMK")
        xid = finding.figure("xid")
        cls = finding.figure("class")
        return Marker(kind, f"XID {xid} ({cls})", severity, f"XID {xid}")
    if kind == "restarting":
        count = _number(finding, "restart_count") or 0
        return Marker(kind, f"restarts {count:.0f}", severity, f"RST {count:.0f}")
    return None


def _share_node(party: str) -> str:
    if party == HOST:
        return HOST_KEY
    if party == "unknown":
        return ORPHANS_KEY
    return f"container:{party}"


def node_markers(findings: Iterable[Finding], shares: Mapping[int, tuple[Share, ...]]) -> Markers:
    """Markers for every node a finding or a shared GPU concerns.

    Args:
        findings: From :class:`gputui.derive.findings.FindingsEngine`.
        shares: From :func:`gputui.derive.findings.gpu_shares` (GPUs with one party are skipped).

    Returns:
        Markers by node subject, sharing first, in GPU order.
    """
    out: dict[str, list[Marker]] = {}
    for gpu, parties in sorted(shares.items()):
        if len(parties) < 2:
            continue
        for share in parties:
            text = f"shared GPU {gpu}: {share.memory_share * 100:.0f}%"
            out.setdefault(_share_node(share.party), []).append(
                Marker("gpu_shared", text, FindingSeverity.INFO, "SHARED")
            )
    for finding in findings:
        if finding.kind == "gpu_shared" and finding.subject.startswith("mig:"):
            # A shared MIG device marks each of its parties, as a shared GPU does.
            device = finding.subject.removeprefix("mig:")
            for name, value in finding.figures:
                if name.startswith("party:") and isinstance(value, (int, float)):
                    text = f"shared MIG {device}: {value * 100:.0f}%"
                    out.setdefault(_share_node(name.removeprefix("party:")), []).append(
                        Marker("gpu_shared", text, FindingSeverity.INFO, "SHARED")
                    )
            continue
        marker = finding_marker(finding)
        if marker is not None:
            out.setdefault(finding.subject, []).append(marker)
    return {key: tuple(markers) for key, markers in out.items()}
