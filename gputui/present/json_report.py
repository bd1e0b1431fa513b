"""``--once`` output: the snapshot as JSON (the contract schema) or as a plain-text report.

No Textual or Rich here: ``gputui --once`` must start fast and work with ``TERM=dumb``.
Untrusted strings (container names, images, command lines) pass through ``sanitise.safe_text`` so a
hostile name cannot inject terminal escapes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from gputui import __version__
from gputui.boundary import sanitise, timestamps
from gputui.derive import units
from gputui.derive.activity import Activity, activity_estimates
from gputui.derive.alerts import Alert, AlertState
from gputui.derive.users import (
    ProjectUsage,
    UserTotals,
    UserUsage,
    user_totals,
)
from gputui.model.containers import ContainerInfo, Owner
from gputui.model.faults import FaultCount, KernelFault
from gputui.model.gauges import GPU_GAUGES, GpuGauge
from gputui.model.gpu import MIG_GPM_FIELDS, MIG_UTILIZATION_NA, GpuSample, MigInstance
from gputui.model.mig import mig_device_name, mig_instance_of
from gputui.model.process_fields import process_to_json
from gputui.model.processes import GpuProcess
from gputui.model.snapshot import ContainerUsage, HostStats, Snapshot
from gputui.model.status import (
    Finding,
    HealthCheck,
    SourceStatus,
)

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
            "utilization_gpu": mig_util(m),
            "utilization_na_reason": MIG_UTILIZATION_NA if mig_util(m) is None else None,
            **{key: getattr(m, key) for key in MIG_GPM_FIELDS},
        }
        for m in g.mig_instances
    ]


def mig_util(m: MigInstance) -> int | None:
    """A MIG instance's utilisation: its GPM graphics activity, rounded; None when unknown."""
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


def mig_of(snapshot: Snapshot, p: GpuProcess) -> MigInstance | None:
    """The MIG instance a process runs in, or None outside MIG."""
    if p.sample.mig_gi_id is None:
        return None
    gpu = next((g for g in snapshot.gpus if g.index == p.sample.gpu_index), None)
    return None if gpu is None else mig_instance_of(gpu, p.sample)


def _throttle_names(g: GpuSample) -> list[str] | None:
    return None if g.throttle_reasons is None else units.throttle(g.throttle_reasons).split(", ")


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


def _owner(owner: Owner | None) -> dict[str, Any] | None:
    if owner is None:
        return None
    return {
        "name": owner.name,
        "confidence": owner.confidence,
        "evidence": owner.evidence,
        "hint": owner.hint,
    }


def _container(u: ContainerUsage) -> dict[str, Any]:
    c: ContainerInfo = u.info
    return {
        "id": c.id,
        "name": c.name,
        "image": c.image or None,
        "status": c.status,
        # The container source that lists it (docker, podman, containerd...), None if none.
        "source": u.source,
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
        "owner": _owner(c.owner),
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
    mig = {} if g.mig_device is None else {"device": g.mig_device}
    return {
        **mig,
        "index": g.index,
        "uuid": g.uuid,
        "name": g.name,
        "usable": g.usable,
        "free_memory_bytes": g.free_memory_bytes,
        "memory_total_bytes": g.total_memory_bytes,
        "utilization_gpu": g.utilization_gpu,
        "busy_percent": None if g.busy_percent is None else round(g.busy_percent, 1),
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
        chosen: The GPUs picked (empty when too few qualify), or the one MIG device.
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
        "selected": [g.index for g in chosen if g.mig_device is None],
        "selected_mig_devices": [g.mig_device for g in chosen if g.mig_device is not None],
        "cuda_visible_devices": devices
        if devices is not None
        else ",".join(str(g.index) if g.mig_device is None else g.uuid or "" for g in chosen),
        "gpus": [_choice_to_json(g) for g in answer.gpus],
        "mig_devices": [_choice_to_json(m) for m in answer.mig],
        "caveats": list(answer.caveats),
    }


def snapshot_to_json(
    snapshot: Snapshot,
    findings: Iterable[Finding] = (),
    alerts: AlertState | None = None,
    totals: UserTotals | None = None,
    activity: tuple[Activity, ...] | None = None,
) -> dict[str, Any]:
    """The snapshot in the documented JSON schema (docs/json-schema.md).

    ``findings``, ``alerts`` and ``totals`` are the snapshot's ``Analysis`` (what the TUI
    shows); the ``alerts`` key lists its pending and firing alerts (none when ``alerts`` is
    None); ``totals`` None computes the users and projects here; ``activity`` None computes
    ``gpu_activity`` here (a narrowed analysis brings the whole snapshot's).
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
        "gpu_activity": [
            activity_to_json(a)
            for a in (activity_estimates(snapshot) if activity is None else activity)
        ],
        "xid_events": [
            {"gpu_index": e.gpu_index, "xid": e.xid, "at": iso(e.at)} for e in snapshot.xid_events
        ],
        "kernel_faults": [fault_to_json(f) for f in snapshot.kernel_faults],
        "fault_counts": [fault_count_to_json(c) for c in snapshot.fault_counts],
    }


def _container_ref(container_id: str | None, name: str | None) -> dict[str, Any] | None:
    """A fault's container as the schema names one: ``{"id", "name"}``, null when none."""
    return None if container_id is None else {"id": container_id, "name": name}


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
        "container": _container_ref(f.container_id, f.container_name),
        "attribution": f.attribution,
        "candidates": [
            {
                "pid": c.pid,
                "process_name": c.process_name,
                "container": _container_ref(c.container_id, c.container_name),
            }
            for c in f.candidates
        ],
        "injected": f.injected,
        "raw": sanitise.safe_text(f.raw, 1024, na=""),
    }


def fault_count_to_json(c: FaultCount) -> dict[str, Any]:
    """One counter in the JSON schema's ``fault_counts[]`` shape."""
    return {
        "kind": c.kind,
        "gpu_index": c.gpu_index,
        "xid": c.xid,
        "class": c.fault_class,
        "container": _container_ref(c.container_id, c.container_name),
        "count": c.count,
    }


def _source_label(key: str) -> str:
    """How the text report names a source (a recording's names are outside text)."""
    return {"nvml": "NVML", "docker": "Docker"}.get(key) or sanitise.safe_text(key, 20)
