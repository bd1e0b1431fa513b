"""``--once`` output: the snapshot as JSON (the contract schema) or as a plain-text report.

No Textual or Rich here: ``gputui --once`` must start fast and work with ``TERM=dumb``.
Untrusted strings (container names, images, command lines) pass through ``fmt.safe_text`` so a
hostile name cannot inject terminal escapes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from gputui import __version__, timestamps
from gputui.derive import fmt
from gputui.derive.activity import Activity, activity_estimates
from gputui.derive.alerts import Alert, AlertState
from gputui.derive.users import (
    ProjectUsage,
    UserTotals,
    UserUsage,
    gpu_list,
    place_of,
    user_label,
    user_totals,
)
from gputui.model import (
    FINDING_RANK,
    GPU_GAUGES,
    MIG_GPM_FIELDS,
    MIG_UTILIZATION_NA,
    STATUS_RANK,
    ContainerInfo,
    ContainerUsage,
    FaultCount,
    Finding,
    GpuGauge,
    GpuProcess,
    GpuSample,
    HealthCheck,
    HealthStatus,
    HostStats,
    KernelFault,
    MigInstance,
    Snapshot,
    SourceStatus,
    mig_device_name,
    mig_instance_of,
)
from gputui.process_fields import process_to_json

if TYPE_CHECKING:  # `gputui free` builds these; the report only reads them
    from gputui.derive.free import FreeAnswer, GpuChoice


def iso(ts: float | None) -> str | None:
    """Seconds since the epoch as ISO 8601 UTC with a ``Z``; None when there is no such time.

    NaN, infinities and years past 9999 (a hand-edited recording) have no time to show.
    """
    text = timestamps.utc(ts, na="")
    return text or None


def _status(s: SourceStatus) -> dict[str, Any]:
    return {"ok": s.ok, "error": s.error, "kind": s.kind, "fix": s.fix}


def _mig_instances(g: GpuSample) -> list[dict[str, Any]]:
    return [
        {
            "index": m.index,
            "device": mig_device_name(g.index, m.index) if m.index >= 0 else None,
            "uuid": m.uuid,
            "gpu_instance_id": m.gpu_instance_id,
            "compute_instance_id": m.compute_instance_id,
            "profile": m.profile,
            "sm_count": m.sm_count,
            "slices": m.slices,
            "memory_used_bytes": m.memory_used_bytes,
            "memory_total_bytes": m.memory_total_bytes,
            # NVML's utilization has no per-MIG-device figure; GPM's graphics activity of the
            # GPU instance is the same measure ("a kernel was running"), where GPM works.
            "utilization_gpu": _mig_util(m),
            "utilization_na_reason": MIG_UTILIZATION_NA if _mig_util(m) is None else None,
            **{key: getattr(m, key) for key in MIG_GPM_FIELDS},
        }
        for m in g.mig_instances
    ]


def _mig_util(m: MigInstance) -> int | None:
    return None if m.gpm_graphics_active is None else round(m.gpm_graphics_active)


def activity_to_json(a: Activity) -> dict[str, Any]:
    """One party's part of a device's GPM activity (the JSON schema's ``gpu_activity``)."""
    return {
        "device": a.device,
        "party": a.party,
        "label": a.label,
        "sm_share": round(a.share, 4),
        "sm_active": round(a.sm_active, 2),
        "tensor_active": None if a.tensor_active is None else round(a.tensor_active, 2),
        "estimate": not a.exact,
    }


def _mig_of(snapshot: Snapshot, p: GpuProcess) -> MigInstance | None:
    if p.sample.mig_gi_id is None:
        return None
    gpu = next((g for g in snapshot.gpus if g.index == p.sample.gpu_index), None)
    return None if gpu is None else mig_instance_of(gpu, p.sample)


def _throttle_names(g: GpuSample) -> list[str] | None:
    return None if g.throttle_reasons is None else fmt.throttle(g.throttle_reasons).split(", ")


#: Keys the JSON adds right after a gauge's own: readings of the gauge for people.
_AFTER_GAUGE: dict[str, tuple[str, Callable[[GpuSample], Any]]] = {
    "throttle_reasons": ("throttle_reason_names", _throttle_names),
}


def gpu_to_json(g: GpuSample, gauges: Sequence[GpuGauge] = GPU_GAUGES) -> dict[str, Any]:
    """One GPU in the JSON schema's ``gpus[]`` shape, in :class:`GpuSample`'s field order.

    Every gauge of ``gauges`` appears under its ``json_key``; of the other fields, the identity
    and state ones appear as they are, the MIG instances as a list, the processes not at all
    (they are the report's ``processes``).
    """
    by_field = {gauge.field: gauge for gauge in gauges}
    out: dict[str, Any] = {}
    for f in dataclasses.fields(g):
        gauge = by_field.get(f.name)
        if gauge is not None:
            out[gauge.json_key] = getattr(g, f.name)
            after = _AFTER_GAUGE.get(f.name)
            if after is not None:
                out[after[0]] = after[1](g)
        elif f.name == "mig_instances":
            out["mig_instances"] = _mig_instances(g)
        elif f.name != "processes":
            out[f.name] = getattr(g, f.name)
    return out


def _process(snapshot: Snapshot, p: GpuProcess) -> dict[str, Any]:
    return process_to_json(snapshot, p)


def _request(value: str | tuple[str, ...] | None) -> str | list[str] | None:
    return list(value) if isinstance(value, tuple) else value


def _container(u: ContainerUsage) -> dict[str, Any]:
    c: ContainerInfo = u.info
    return {
        "id": c.id,
        "name": c.name,
        "image": c.image or None,
        "status": c.status,
        "gpu_memory_bytes": u.gpu_memory_bytes,
        "pids": list(u.pids),
        "gpu_indexes": list(u.gpu_indexes),
        "mig_devices": list(u.mig_devices),
        "sm_util": u.sm_util,
        "gpu_request": _request(c.gpu_request),
        "gpu_request_via": c.gpu_request_via,
        "idle_reserved": u.idle_reserved,
        "runtime": c.runtime,
        "compose_project": c.compose_project,
        "compose_service": c.compose_service,
        "k8s_pod": c.k8s_pod,
        "k8s_namespace": c.k8s_namespace,
        "cpu_percent": c.cpu_percent,
        "memory_used_bytes": c.memory_used_bytes,
        "memory_limit_bytes": c.memory_limit_bytes,
        "stats_sampled_at": iso(c.stats_sampled_at),  # as cpu_rss_sampled_at, for CPU/memory
        "started_at": iso(c.started_at),
        "restart_count": c.restart_count,
        "oom_killed": c.oom_killed,
        "exit_code": c.exit_code,
        "mps_pipe_directory": c.mps_pipe_directory,
        "mps_thread_percentage": c.mps_thread_percentage,
        # Set when the engine's description was over the size cap: the container is shown from
        # the list reply, and what only inspect tells (GPU request, runtime) is unknown.
        "inspect_problem": c.inspect_problem,
    }


def check_to_json(h: HealthCheck) -> dict[str, Any]:
    """One health check in the JSON schema's ``health`` shape."""
    return {
        "id": h.id,
        "status": h.status.value,
        "summary": h.summary,
        "details": list(h.details),
        "fix": h.fix,
        "docs": h.docs,
        "subject": h.subject,
    }


def finding_to_json(f: Finding) -> dict[str, Any]:
    """One finding in the JSON schema's ``findings`` shape."""
    return {
        "kind": f.kind,
        "subject": f.subject,
        "severity": str(f.severity),
        "summary": f.summary,
        "figures": dict(f.figures),
    }


def alert_to_json(a: Alert) -> dict[str, Any]:
    """One pending or firing alert in the JSON schema's ``alerts`` shape."""
    return {
        "rule": a.rule,
        "subject": a.subject,
        "severity": str(a.severity),
        "state": a.phase.value,
        "value": a.value,
        "bound": a.bound,
        "since": iso(a.since),
        "firing_since": iso(a.firing_since),
        "message": a.message,
    }


def _host_stats(h: HostStats | None) -> dict[str, Any] | None:
    if h is None:
        return None
    return {
        "cpu_percent": h.cpu_percent,
        "cpu_count": h.cpu_count,
        "load_avg": None if h.load_avg is None else list(h.load_avg),
        "memory_used_bytes": h.memory_used_bytes,
        "memory_total_bytes": h.memory_total_bytes,
        "swap_used_bytes": h.swap_used_bytes,
        "swap_total_bytes": h.swap_total_bytes,
    }


def user_to_json(u: UserUsage) -> dict[str, Any]:
    """One user in the JSON schema's ``users`` shape."""
    return {
        "key": u.key,
        "user": u.label,
        "kind": u.kind,
        "gpu_memory_bytes": u.gpu_memory_bytes,
        "sm_util": u.sm_util,
        "processes": u.processes,
        "gpu_indexes": list(u.gpu_indexes),
        "containers": list(u.containers),
    }


def project_to_json(p: ProjectUsage) -> dict[str, Any]:
    """One compose project in the JSON schema's ``compose_projects`` shape."""
    return {
        "project": p.project,
        "gpu_memory_bytes": p.gpu_memory_bytes,
        "sm_util": p.sm_util,
        "processes": p.processes,
        "gpu_indexes": list(p.gpu_indexes),
        "containers": list(p.containers),
        "users": list(p.users),
    }


def _choice_to_json(g: GpuChoice) -> dict[str, Any]:
    return {
        "index": g.index,
        "uuid": g.uuid,
        "name": g.name,
        "usable": g.usable,
        "free_memory_bytes": g.free_memory_bytes,
        "memory_total_bytes": g.total_memory_bytes,
        "utilization_gpu": g.utilization_gpu,
        "excluded_because": [
            {"code": e.code, "text": e.text, "container": e.container} for e in g.exclusions
        ],
    }


def free_to_json(
    snapshot: Snapshot,
    answer: FreeAnswer,
    chosen: Sequence[GpuChoice],
    *,
    asked: int | None,
    enough: bool,
    devices: str | None = None,
) -> dict[str, Any]:
    """``gputui free --json`` (docs/json-schema.md, "gputui free").

    Args:
        snapshot: The refresh judged.
        answer: The verdict on every GPU.
        chosen: The GPUs picked (empty when too few qualify).
        asked: ``-n``, None when not given.
        enough: Whether at least ``-n`` (or one) GPU qualified.
        devices: What the plain output prints (indexes, or UUIDs with ``--uuid``); the
            indexes of ``chosen`` when None.
    """
    return {
        "version": __version__,
        "taken_at": iso(snapshot.taken_at),
        "mode": snapshot.mode,
        "hostname": snapshot.host.hostname,
        "asked": {"count": asked},
        "enough": enough,
        "selected": [g.index for g in chosen],
        "cuda_visible_devices": devices
        if devices is not None
        else ",".join(str(g.index) for g in chosen),
        "gpus": [_choice_to_json(g) for g in answer.gpus],
        "caveats": list(answer.caveats),
    }


def free_explanation(answer: FreeAnswer, wanted: int, enough: bool) -> list[str]:
    """Lines for stderr: how many GPUs qualified and why each other GPU was left out.

    Args:
        answer: The verdict.
        wanted: How many GPUs were asked for (``-n``, or 1).
        enough: Whether that many qualified.
    """
    usable = answer.usable
    shown = ", ".join(f"{g.index} ({fmt.size(g.free_memory_bytes)} free)" for g in usable)
    total = len(answer.gpus)
    if enough:
        head = f"gputui free: {len(usable)} of {total} GPUs qualify: {shown}"
    else:
        head = f"gputui free: {len(usable)} of {total} GPUs qualify, {wanted} asked for" + (
            f": {shown}" if usable else ""
        )
    lines = [head]
    for g in answer.excluded:
        # The texts name containers and quote NVML errors: sanitised where they are made, and
        # once more here at the output boundary.
        why = "; ".join(fmt.safe_text(e.text, 300) for e in g.exclusions)
        lines.append(f"  GPU {g.index}: {why}")
    return lines


def snapshot_to_json(
    snapshot: Snapshot,
    findings: Iterable[Finding] = (),
    alerts: AlertState | None = None,
    totals: UserTotals | None = None,
) -> dict[str, Any]:
    """The snapshot in the documented JSON schema (docs/json-schema.md).

    ``findings``, ``alerts`` and ``totals`` are the snapshot's ``Analysis`` (what the TUI
    shows); the ``alerts`` key lists its pending and firing alerts (none when ``alerts`` is
    None); ``totals`` None computes the users and projects here.
    """
    engine = snapshot.engine
    totals = totals if totals is not None else user_totals(snapshot)
    return {
        "version": __version__,
        "taken_at": iso(snapshot.taken_at),
        "mode": snapshot.mode,
        "host": {
            "hostname": snapshot.host.hostname,
            "driver_version": snapshot.host.driver_version,
            "cuda_driver_version": snapshot.host.cuda_driver_version,
            "nvml_version": snapshot.host.nvml_version,
        },
        "sources": {name: _status(s) for name, s in snapshot.sources.items()},
        "visibility": {
            "host_pid_namespace": snapshot.visibility.host_pid_namespace,
            "private_cgroup_namespace": snapshot.visibility.private_cgroup_namespace,
        },
        "engine": None
        if engine is None
        else {
            "endpoint": engine.endpoint,
            "context": engine.context,
            "server_version": engine.server_version,
            "api_version": engine.api_version,
            "runtimes": list(engine.runtimes),
            "default_runtime": engine.default_runtime,
            "cgroup_driver": engine.cgroup_driver,
            "cgroup_version": engine.cgroup_version,
            "cdi_spec_dirs": None if engine.cdi_spec_dirs is None else list(engine.cdi_spec_dirs),
        },
        "gpus": [gpu_to_json(g) for g in snapshot.gpus],
        "processes": [_process(snapshot, p) for p in snapshot.processes],
        "containers": [_container(u) for u in snapshot.containers if u.known_to_engine],
        "other_containers": [_container(u) for u in snapshot.containers if not u.known_to_engine],
        "orphan_gpu_memory_bytes": sum(
            p.sample.used_memory_bytes or 0 for p in snapshot.orphan_processes
        ),
        "health": [check_to_json(h) for h in snapshot.health],
        "findings": [finding_to_json(f) for f in findings],
        "alerts": [alert_to_json(a) for a in (alerts.active if alerts is not None else ())],
        "host_stats": _host_stats(snapshot.host_stats),
        "users": [user_to_json(u) for u in totals.users],
        "compose_projects": [project_to_json(p) for p in totals.projects],
        "gpu_activity": [activity_to_json(a) for a in activity_estimates(snapshot)],
        "xid_events": [
            {"gpu_index": e.gpu_index, "xid": e.xid, "at": iso(e.at)} for e in snapshot.xid_events
        ],
        "kernel_faults": [fault_to_json(f) for f in snapshot.kernel_faults],
        "fault_counts": [fault_count_to_json(c) for c in snapshot.fault_counts],
    }


def fault_to_json(f: KernelFault) -> dict[str, Any]:
    """One kernel-log fault in the JSON schema's ``kernel_faults[]`` shape."""
    return {
        "kind": f.kind,
        "at": iso(f.at),
        "seq": f.seq,
        "xid": f.xid,
        "class": f.fault_class,
        "meaning": f.meaning,
        "fix": f.fix,
        "pci_bus_id": f.pci_bus_id,
        "gpu_index": f.gpu_index,
        "mig_device": f.mig_device,
        "gpu_instance": f.gpu_instance,
        "compute_instance": f.compute_instance,
        "pid": f.pid,
        "process_name": f.process_name,
        "container": None
        if f.container_id is None
        else {"id": f.container_id, "name": f.container_name},
        "attribution": f.attribution,
        "candidates": [
            {
                "pid": c.pid,
                "process_name": c.process_name,
                "container": None
                if c.container_id is None
                else {"id": c.container_id, "name": c.container_name},
            }
            for c in f.candidates
        ],
        "injected": f.injected,
        "raw": fmt.safe_text(f.raw, 1024, na=""),
    }


def fault_count_to_json(c: FaultCount) -> dict[str, Any]:
    """One counter in the JSON schema's ``fault_counts[]`` shape."""
    return {
        "kind": c.kind,
        "gpu_index": c.gpu_index,
        "xid": c.xid,
        "class": c.fault_class,
        "container": None
        if c.container_id is None
        else {"id": c.container_id, "name": c.container_name},
        "count": c.count,
    }


# -- plain text ----------------------------------------------------------------------------


def _table(rows: list[list[str]], right: Iterable[int] = ()) -> list[str]:
    """Left/right-aligned columns separated by two spaces."""
    if not rows:
        return []
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    right_set = set(right)
    out = []
    for row in rows:
        cells = [
            cell.rjust(widths[i]) if i in right_set else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        out.append("  ".join(cells).rstrip())
    return out


def _source_label(key: str) -> str:
    """How the text report names a source (a recording's names are outside text)."""
    return {"nvml": "NVML", "docker": "Docker"}.get(key) or fmt.safe_text(key, 20)


def _source_line(name: str, s: SourceStatus | None) -> str:
    if s is None:
        return f"{name}: n/a"
    if s.ok:
        # ok with a note: the source answered, but not everything it holds could be read.
        return f"{name}: ok; {fmt.safe_text(s.error, 200)}" if s.error else f"{name}: ok"
    return f"{name}: {fmt.safe_text(s.error, 160)}"


def format_checks(checks: Iterable[HealthCheck], statuses: set[HealthStatus]) -> list[str]:
    """Health checks with the given statuses, worst first, each with its fix indented."""
    lines = []
    chosen = sorted(
        (c for c in checks if c.status in statuses), key=lambda c: STATUS_RANK[c.status]
    )
    for c in chosen:
        # Summaries and fixes quote what containers and images say about themselves (env values
        # such as NVIDIA_DRIVER_CAPABILITIES, runtime names): untrusted, like any label.
        summary = fmt.safe_text(c.summary, 400)
        lines.append(f"{c.status.value.upper():<5} {fmt.safe_text(c.id, 120)}: {summary}")
        if c.fix:
            for fix_line in c.fix.splitlines():
                lines.append(
                    f"      fix: {fmt.safe_text(fix_line, 400)}"
                    if fix_line == c.fix.splitlines()[0]
                    else f"           {fmt.safe_text(fix_line, 400)}"
                )
    return lines


def host_line(h: HostStats | None) -> str | None:
    """``Host: CPU 38% of 224 (load 71.2 69.8 66.1)  MEM 812GiB/2.0TiB  SWAP 0B/0B``."""
    if h is None:
        return None
    load = "" if h.load_avg is None else " (load " + " ".join(f"{v:.2f}" for v in h.load_avg) + ")"
    return (
        f"Host: CPU {fmt.pct(h.cpu_percent)} of {h.cpu_count or '?'}{load}  "
        f"MEM {fmt.size(h.memory_used_bytes)}/{fmt.size(h.memory_total_bytes)}  "
        f"SWAP {fmt.size(h.swap_used_bytes)}/{fmt.size(h.swap_total_bytes)}"
    )


def _users_text(totals: UserTotals) -> list[str]:
    """The ``Users`` section (and ``Compose projects`` when any project uses GPUs)."""
    users = totals.users
    if not users:
        return []
    lines = ["", "Users"]
    rows = [["USER", "GPU-MEM", "SM", "PROCS", "GPUS", "WHERE"]]
    for u in users:
        rows.append(
            [
                fmt.safe_text(u.label, 48),
                fmt.size(u.gpu_memory_bytes),
                fmt.pct(u.sm_util),
                str(u.processes),
                gpu_list(u.gpu_indexes),
                fmt.safe_text(", ".join(u.containers) or "-", 60),
            ]
        )
    lines += ["  " + r for r in _table(rows, right=(1, 2, 3))]
    projects = totals.projects
    if projects:
        lines += ["", "Compose projects"]
        rows = [["PROJECT", "GPU-MEM", "SM", "PROCS", "GPUS", "CONTAINERS", "USERS"]]
        for p in projects:
            rows.append(
                [
                    fmt.safe_text(p.project, 40),
                    fmt.size(p.gpu_memory_bytes),
                    fmt.pct(p.sm_util),
                    str(p.processes),
                    gpu_list(p.gpu_indexes),
                    fmt.safe_text(", ".join(p.containers) or "-", 60),
                    fmt.safe_text(", ".join(p.users) or "-", 40),
                ]
            )
        lines += ["  " + r for r in _table(rows, right=(1, 2, 3))]
    return lines


def _mig_rows(g: GpuSample) -> list[list[str]]:
    """The MIG devices of a GPU as rows under it (utilization: NVML has none per device)."""
    rows = []
    for m in g.mig_instances:
        if m.index < 0:
            rows.append(
                [f" GI {m.gpu_instance_id}", "no compute instance", "", "", "", "", "", "", ""]
            )
            continue
        used = fmt.size(m.memory_used_bytes)
        sm = f"{m.sm_count} SM" if m.sm_count is not None else ""
        rows.append(
            [
                f" {mig_device_name(g.index, m.index)}",
                fmt.safe_text(f"MIG {m.profile or '?'} GI {m.gpu_instance_id}", 24),
                fmt.pct(_mig_util(m), na="n/a"),
                f"{used}/{fmt.size(m.memory_total_bytes)}",
                fmt.pct(fmt.ratio(m.memory_used_bytes, m.memory_total_bytes)),
                "",
                "",
                sm,
                "",
            ]
        )
    return rows


def _mbps(value: float | None) -> str:
    return fmt.NA if value is None else f"{value / 2**20:.0f}"


def _gpm_text(snapshot: Snapshot) -> list[str]:
    """The ``GPU activity`` section: NVML GPM figures next to util, and energy."""
    gpus = [g for g in snapshot.gpus if not g.lost]
    if not any(g.gpm_note is not None or g.gpm_sm_active is not None for g in gpus):
        return []  # a recording or source without GPM at all: nothing to add
    lines = [
        "",
        "GPU activity (util = a kernel was running; SM act = share of SMs working; NVML GPM)",
    ]
    header = ["#", "UTIL", "SM ACT", "OCCUP", "TENSOR", "FP32", "DRAM BW", "PCIe RX/TX MiB/s"]
    rows = [[*header, "ENERGY", ""]]
    for g in gpus:
        energy = fmt.energy(None if g.total_energy_mj is None else g.total_energy_mj / 1e3, na="")
        if g.gpm_sm_active is None:
            note = fmt.safe_text(g.gpm_note, 60)
            rows.append([str(g.index), fmt.pct(g.utilization_gpu), "-", "", "", "", "", ""])
            rows[-1] += [energy, note]
        else:
            rows.append(
                [
                    str(g.index),
                    fmt.pct(g.utilization_gpu),
                    fmt.pct(g.gpm_sm_active),
                    fmt.pct(g.gpm_sm_occupancy),
                    fmt.pct(g.gpm_tensor_active),
                    fmt.pct(g.gpm_fp32_active),
                    fmt.pct(g.gpm_dram_active),
                    f"{_mbps(g.gpm_pcie_rx_bytes_per_s)}/{_mbps(g.gpm_pcie_tx_bytes_per_s)}",
                    energy,
                    "",
                ]
            )
        for m in g.mig_instances:
            if m.index >= 0 and m.gpm_sm_active is not None:
                rows.append(
                    [
                        f" {mig_device_name(g.index, m.index)}",
                        fmt.pct(m.gpm_graphics_active),
                        fmt.pct(m.gpm_sm_active),
                        fmt.pct(m.gpm_sm_occupancy),
                        fmt.pct(m.gpm_tensor_active),
                        "",
                        fmt.pct(m.gpm_dram_active),
                        "",
                        "",
                        "",
                    ]
                )
    lines += ["  " + r for r in _table(rows, right=(1, 2, 3, 4, 5, 6, 7, 8))]
    estimates = activity_estimates(snapshot)
    if estimates:
        lines += ["", "GPU activity by party (SM act: the party's part of its device's)"]
        rows = [["DEVICE", "PARTY", "SM ACT", "TENSOR", "HOW"]]
        for a in estimates:
            rows.append(
                [
                    a.device,
                    fmt.safe_text(a.label, 40),
                    f"{a.sm_active:.1f}%",
                    "" if a.tensor_active is None else f"{a.tensor_active:.1f}%",
                    "exact (alone on it)" if a.exact else f"estimate ({a.share:.0%} of SM time)",
                ]
            )
        lines += ["  " + r for r in _table(rows, right=(2, 3))]
    return lines


def _process_gpu(snapshot: Snapshot, p: GpuProcess) -> str:
    """``0``, or ``0:1`` for a process on MIG device 1 of GPU 0; ``+M`` marks an MPS client."""
    mig = _mig_of(snapshot, p)
    text = (
        str(p.sample.gpu_index) if mig is None else mig_device_name(p.sample.gpu_index, mig.index)
    )
    return text + ("+M" if p.sample.mps else "")


def snapshot_to_text(
    snapshot: Snapshot,
    findings: Iterable[Finding] = (),
    alerts: AlertState | None = None,
    totals: UserTotals | None = None,
) -> str:
    """A readable report of one snapshot: GPUs, GPU processes, containers, problems.

    ``findings``, ``alerts`` and ``totals`` are the snapshot's ``Analysis``; pending and firing
    alerts get a section of their own; ``totals`` None computes the users and projects here.
    """
    h = snapshot.host
    # NVML, then each container source in the collector's order (Docker alone, as wired today).
    engines = [key for key in snapshot.sources if key not in ("nvml", "procs")]
    keys = ["nvml", *(engines or ["docker"])]
    marker = {"demo": "  [DEMO: simulated machine]", "scenario": "  [SCENARIO: NVML replaced]"}
    lines = [
        f"gputui {__version__}  {fmt.safe_text(h.hostname, 60)}  {iso(snapshot.taken_at)}  "
        # Versions come from the driver, a scenario or a recording: untrusted text like any.
        f"driver {fmt.safe_text(h.driver_version or None, 40)}  "
        f"CUDA {fmt.safe_text(h.cuda_driver_version or None, 40)}" + marker.get(snapshot.mode, ""),
        "  ".join(_source_line(_source_label(key), snapshot.sources.get(key)) for key in keys),
    ]
    host = host_line(snapshot.host_stats)
    if host:
        lines.append(host)
    for key in keys:
        s = snapshot.sources.get(key)
        if s is not None and not s.ok and s.fix:
            lines.append(f"  fix: {fmt.safe_text(s.fix, 400)}")
    if snapshot.visibility.host_pid_namespace is False:
        lines.append(
            "  note: gputui is not in the host PID namespace, so NVML's host PIDs cannot be "
            "resolved: run it on the host or with --pid=host"
        )
    lines.append("")
    lines.append("GPUs")
    rows = [["#", "NAME", "UTIL", "MEMORY", "MEM%", "TEMP", "POWER", "SM CLOCK", "THROTTLE"]]
    for g in snapshot.gpus:
        if g.lost:
            rows.append(
                [
                    str(g.index),
                    fmt.safe_text(g.name, 24),
                    "LOST",
                    "",
                    "",
                    "",
                    "",
                    "",
                    fmt.safe_text(g.error, 60),
                ]
            )
            continue
        used = fmt.size(g.memory_used_bytes)
        rows.append(
            [
                str(g.index),
                fmt.safe_text(g.name, 24),
                fmt.pct(g.utilization_gpu),
                f"{used}/{fmt.size(g.memory_total_bytes)}",
                fmt.pct(fmt.ratio(g.memory_used_bytes, g.memory_total_bytes)),
                fmt.temp(g.temperature_c),
                f"{fmt.watts(g.power_w)}/{fmt.watts(g.power_limit_w)}",
                fmt.mhz(g.clock_sm_mhz),
                fmt.throttle(g.throttle_reasons),
            ]
        )
        rows += _mig_rows(g)
    lines += (
        ["  " + r for r in _table(rows, right=(2, 3, 4, 5, 6, 7))]
        if snapshot.gpus
        else ["  (no GPUs)"]
    )
    lines += _gpm_text(snapshot)
    lines.append("")
    lines.append("GPU processes")
    rows = [["PID", "CPID", "GPU", "GPU-MEM", "SM", "CPU", "RSS", "USER", "CONTAINER", "COMMAND"]]
    for p in sorted(
        snapshot.processes, key=lambda p: (p.sample.gpu_index, -(p.sample.used_memory_bytes or 0))
    ):
        # One rule for where a process runs: "(host)" only when /proc showed it in no
        # container; gone or hidden by /proc is "unknown".
        where = place_of(snapshot, p)
        where = "(host)" if p.on_host else where
        rows.append(
            [
                str(p.pid),
                str(p.info.container_pid) if p.container_id and p.info.container_pid else "-",
                _process_gpu(snapshot, p),
                fmt.size(p.sample.used_memory_bytes),
                fmt.pct(p.sample.sm_util),
                fmt.pct(p.info.cpu_percent),
                fmt.size(p.info.rss_bytes),
                fmt.safe_text(user_label(snapshot, p), 32),
                fmt.safe_text(where, 32),
                fmt.safe_text(p.info.command, 60)
                if p.info.exists
                else "(no such process: GPU memory nobody can find)",
            ]
        )
    lines += (
        ["  " + r for r in _table(rows, right=(0, 1, 3, 4, 5, 6))]
        if snapshot.processes
        else ["  (no GPU processes)"]
    )
    lines.append("")
    lines.append("Containers")
    rows = [["NAME", "IMAGE", "STATUS", "GPU REQ", "GPU-MEM", "GPU PIDS", "SERVICE/POD"]]
    for u in snapshot.containers:
        c = u.info
        status = c.status + (" (idle GPU reservation)" if u.idle_reserved else "")
        if u.not_in_engine:
            listed = " or ".join(_source_label(key) for key in engines) or "any engine"
            # A report read back has no cgroup_runtime: its processes still name the runtime.
            runtime = u.cgroup_runtime or next(
                (p.info.runtime for p in snapshot.processes if p.container_id == c.id), None
            )
            status = f"not in {listed} ({runtime or 'cgroup only'})"
        elif c.inspect_problem:
            status = f"{c.status} (inspect over cap)"
        elif not u.known_to_engine:
            status = "Docker unreachable: unknown"
        group = (
            f"{c.compose_project}/{c.compose_service}"
            if c.compose_service
            else (f"{c.k8s_namespace}/{c.k8s_pod}" if c.k8s_pod else "-")
        )
        rows.append(
            [
                fmt.safe_text(c.name, 32),
                fmt.safe_text(c.image, 40, na="-") or "-",
                fmt.safe_text(status, 40),
                # NVIDIA_VISIBLE_DEVICES is an env value an image sets: untrusted text.
                "?" if c.inspect_problem else fmt.safe_text(fmt.gpu_request(c.gpu_request), 40),
                fmt.size(u.gpu_memory_bytes) if u.pids else "-",
                ",".join(str(p) for p in u.pids) or "-",
                fmt.safe_text(group, 40),
            ]
        )
    lines += (
        ["  " + r for r in _table(rows, right=(4,))]
        if snapshot.containers
        else ["  (no containers)"]
    )
    orphans = snapshot.orphan_processes
    if orphans:
        total = sum(p.sample.used_memory_bytes or 0 for p in orphans)
        lines.append(
            f"  {fmt.size(total)} of GPU memory held by PIDs that do not exist here: "
            + ", ".join(str(p.pid) for p in orphans)
        )
    lines += _users_text(totals if totals is not None else user_totals(snapshot))
    found = list(findings)
    if found:
        lines += ["", "Findings"]
        for f in sorted(found, key=lambda f: FINDING_RANK[f.severity]):
            lines.append(f"  {f.severity.upper():<5} {fmt.safe_text(f.summary, 400)}")
    active = alerts.active if alerts is not None else ()
    if active:
        # A rule with a `for` duration is pending until its condition has held that long.
        lines += ["", "Alerts"]
        for a in active:
            lines.append(
                f"  {a.phase.value.upper():<7} {fmt.safe_text(a.severity, 12):<8} "
                f"{fmt.safe_text(a.rule, 60)}: {fmt.safe_text(a.message, 400)}"
            )
    problems = format_checks(snapshot.health, {HealthStatus.FAIL, HealthStatus.WARN})
    if problems:
        lines += ["", "Health (failing and warning checks; `gputui doctor` lists all)"]
        lines += ["  " + line for line in problems]
    return "\n".join(lines) + "\n"
