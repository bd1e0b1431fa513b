"""Findings from kernel-log faults: XID errors and OOM kills, on the container they hit.

The tree, the reports and the exporter show them where the fault landed.

A fault marks the container (and the process) it was attributed to for :data:`RECENT_S`; one
attributed only as a candidate (the line named no PID) marks nothing: the Evidence view lists
it, with the other candidates. A hardware class (memory, bus, NVLink) is a ``fail``; every other
XID and an OOM kill a ``warn``.
"""

from __future__ import annotations

from collections.abc import Iterable

from gputui.boundary import sanitise, timestamps
from gputui.collect.xid_catalog import HARDWARE_CLASSES
from gputui.model.faults import KernelFault
from gputui.model.snapshot import Snapshot
from gputui.model.status import Finding, FindingSeverity

__all__ = ["RECENT_S", "fault_findings", "faults_of"]

#: Seconds a fault keeps marking its container and process.
RECENT_S = 24 * 3600.0


def faults_of(snapshot: Snapshot, container_id: str) -> tuple[KernelFault, ...]:
    """The faults attributed to a container or naming it among the candidates, oldest first."""
    return tuple(
        f
        for f in snapshot.kernel_faults
        if f.container_id == container_id
        or any(c.container_id == container_id for c in f.candidates)
    )


def _summary(fault: KernelFault, count: int) -> str:
    when = timestamps.utc(fault.at)
    times = f" ({count} times)" if count > 1 else ""
    if fault.kind == "oom":
        name = sanitise.safe_text(fault.process_name, 32, na="a process")
        return f"OOM kill of {name} (PID {fault.pid}) at {when}{times}: {fault.fix}"
    where = f"GPU {fault.mig_device or fault.gpu_index}" if fault.gpu_index is not None else "GPU ?"
    return (
        f"XID {fault.xid} on {where} at {when}{times}: {fault.meaning} "
        f"({fault.fault_class}): {fault.fix}"
    )


def fault_findings(snapshot: Snapshot, recent_s: float = RECENT_S) -> tuple[Finding, ...]:
    """One finding per container and per process with faults in the last ``recent_s``."""
    since = snapshot.taken_at - recent_s
    # Only rows the snapshot shows: a container it lists, a GPU process it lists. A line naming
    # a PID that runs no GPU work (or a container gone since) stays in kernel_faults and the
    # Evidence view, not in the findings.
    containers = {u.info.id for u in snapshot.containers}
    gpu_pids = {p.pid for p in snapshot.processes}
    groups: dict[tuple[str, str, int | None], list[KernelFault]] = {}
    for fault in snapshot.kernel_faults:
        if fault.at < since or fault.attribution == "candidates":
            continue
        subjects: Iterable[str] = ()
        if fault.container_id in containers:
            subjects = (f"container:{fault.container_id}",)
        if fault.pid in gpu_pids and fault.attribution in ("process", "recent_process"):
            subjects = (*subjects, f"pid:{fault.pid}")
        for subject in subjects:
            groups.setdefault((subject, fault.kind, fault.xid), []).append(fault)
    out = []
    for (subject, kind, xid), faults in groups.items():
        latest = max(faults, key=lambda f: f.at)
        hardware = latest.fault_class in HARDWARE_CLASSES
        out.append(
            Finding(
                "kernel_fault",
                subject,
                FindingSeverity.FAIL if hardware else FindingSeverity.WARN,
                _summary(latest, len(faults)),
                (
                    ("fault", kind),
                    ("xid", -1 if xid is None else xid),
                    ("class", latest.fault_class),
                    ("count", len(faults)),
                    ("latest_at", latest.at),
                ),
            )
        )
    return tuple(out)
