"""What the views show under ``--only``, ``--user`` and ``--pid`` (nvitop's filters).

A :class:`~gputui.model.settings.ViewScope` narrows an analysed snapshot for the views (the TUI,
``--once`` and ``--json``); it never narrows what is judged: the analysis runs on the whole
snapshot first, so alerts, notifications, the idle policy and the ledger see every GPU and
process (a container whose processes a ``--user`` hides is not "idle" to the policy). Pure: no
I/O.

The narrowed snapshot keeps the shape of every snapshot (the JSON contract holds):

* ``--only``: the GPUs with those indexes, the processes on them, and the containers with a
  process there, or with no GPU process anywhere and a GPU request naming one of them (an idle
  reservation of a shown GPU); XID events and kernel faults of other GPUs are left out.
* ``--user`` / ``--pid``: every GPU, and only the processes of those users (user names, or uids
  as text) or with those host PIDs; a container is shown with its shown processes only.
* A shown container's figures (memory, PIDs, GPUs, SM %, MIG devices) are summed over its shown
  processes. Findings and alerts are shown when their subject is shown (a GPU, a MIG device, a
  container, a PID); those about the host stay. GPU shares stay the whole GPU's (a user's share
  of a GPU is not 100 % because the others are hidden). Health checks are never narrowed: they
  are about the machine's GPU runtime.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from gputui.derive.activity import Activity, activity_estimates
from gputui.derive.alerts import AlertState
from gputui.derive.findings import party_of
from gputui.derive.tree import build_groups, node_markers
from gputui.derive.users import user_totals
from gputui.model.gpu import GpuSample
from gputui.model.mig import mig_device_name, mig_instance_of, mig_request
from gputui.model.processes import GpuProcess, per_gpu_sm
from gputui.model.settings import ViewScope
from gputui.model.snapshot import ContainerUsage, Snapshot
from gputui.model.status import Finding

if TYPE_CHECKING:  # the Analyzer applies the scope: analysis imports this module
    from gputui.derive.analysis import Analysis

__all__ = ["scope_analysis", "scope_snapshot", "unknown_gpus"]


def unknown_gpus(snapshot: Snapshot, scope: ViewScope) -> tuple[int, ...]:
    """The ``--only`` indexes no GPU of ``snapshot`` has, in the order given."""
    if scope.gpus is None:
        return ()
    have = {g.index for g in snapshot.gpus}
    return tuple(dict.fromkeys(i for i in scope.gpus if i not in have))


def _process_shown(process: GpuProcess, scope: ViewScope) -> bool:
    if scope.gpus is not None and process.sample.gpu_index not in scope.gpus:
        return False
    if scope.pids is not None and process.pid not in scope.pids:
        return False
    if scope.users is not None:
        # Processes without a user (a PID nobody can find, one /proc hides) are nobody's.
        return process.info.user is not None and process.info.user in scope.users
    return True


def _requests_shown_gpu(usage: ContainerUsage, gpus: Iterable[GpuSample]) -> bool:
    request = usage.info.gpu_request
    if request is None:
        return False
    if isinstance(request, str):
        return request == "all"
    shown = tuple(gpus)
    for token in request:
        mig = mig_request(token, shown)
        if mig is not None:
            return True
        lowered = token.strip().lower()
        if any(lowered in (str(g.index), (g.uuid or "").lower()) for g in shown):
            return True
    return False


def _narrowed(
    usage: ContainerUsage, processes: list[GpuProcess], gpus: dict[int, GpuSample]
) -> ContainerUsage:
    mig: set[str] = set()
    for p in processes:
        gpu = gpus.get(p.sample.gpu_index)
        inst = mig_instance_of(gpu, p.sample) if gpu is not None else None
        if inst is not None and gpu is not None:
            mig.add(mig_device_name(gpu.index, inst.index))
    return replace(
        usage,
        gpu_memory_bytes=sum(max(0, p.sample.used_memory_bytes or 0) for p in processes),
        pids=tuple(sorted({p.pid for p in processes})),
        gpu_indexes=tuple(sorted({p.sample.gpu_index for p in processes})),
        sm_util=per_gpu_sm(processes),
        mig_devices=tuple(sorted(mig)),
    )


def scope_snapshot(snapshot: Snapshot, scope: ViewScope) -> Snapshot:
    """The part of ``snapshot`` a view under ``scope`` shows (the snapshot itself when none).

    Args:
        snapshot: One refresh, whole.
        scope: The GPUs, users and PIDs asked for.

    Returns:
        A snapshot of the same shape holding only what is shown (see the module docstring).
    """
    if not scope.narrows:
        return snapshot
    only = None if scope.gpus is None else frozenset(scope.gpus)
    gpus = snapshot.gpus if only is None else tuple(g for g in snapshot.gpus if g.index in only)
    processes = tuple(p for p in snapshot.processes if _process_shown(p, scope))
    by_gpu = {g.index: g for g in snapshot.gpus}
    by_container: dict[str, list[GpuProcess]] = {}
    for p in processes:
        if p.container_id is not None:
            by_container.setdefault(p.container_id, []).append(p)
    rows = Counter(p.container_id for p in snapshot.processes if p.container_id is not None)
    containers = []
    for usage in snapshot.containers:
        shown = by_container.get(usage.info.id)
        if shown:
            whole = len(shown) == rows[usage.info.id]
            containers.append(usage if whole else _narrowed(usage, shown, by_gpu))
        elif scope.narrows_processes:
            continue  # a container is shown for its processes of those users or PIDs
        elif only is not None and not usage.pids and _requests_shown_gpu(usage, gpus):
            containers.append(usage)  # its reservation of a shown GPU
    return replace(
        snapshot,
        gpus=gpus,
        processes=processes,
        containers=tuple(containers),
        xid_events=tuple(e for e in snapshot.xid_events if only is None or e.gpu_index in only),
        kernel_faults=tuple(
            f
            for f in snapshot.kernel_faults
            if only is None or f.gpu_index is None or f.gpu_index in only
        ),
        fault_counts=tuple(
            c
            for c in snapshot.fault_counts
            if only is None or c.gpu_index is None or c.gpu_index in only
        ),
    )


class _Shown:
    """Which subjects of findings and alerts a narrowed snapshot still shows."""

    def __init__(self, whole: Snapshot, shown: Snapshot, scope: ViewScope) -> None:
        self.gpus = {g.index for g in shown.gpus}
        self.containers = {u.info.id for u in shown.containers}
        self.container_names = {u.info.name for u in shown.containers}
        self.pids = {p.pid for p in shown.processes}
        self.every_pid = {p.pid for p in whole.processes}
        self.by_process = scope.narrows_processes

    def finding(self, finding: Finding) -> bool:
        kind, _, rest = finding.subject.partition(":")
        if kind == "gpu":
            return rest.isdigit() and int(rest) in self.gpus
        if kind == "mig":
            gpu = rest.partition(":")[0]
            return gpu.isdigit() and int(gpu) in self.gpus
        if kind == "container":
            return rest in self.containers
        if kind == "pid":
            pid = rest.partition(":")[0]
            if not pid.isdigit():
                return not self.by_process
            # A PID no GPU process has any more (a fault's) is shown unless processes are chosen.
            return int(pid) in self.pids or (int(pid) not in self.every_pid and not self.by_process)
        return True

    def alert(self, subject: str) -> bool:
        if subject.startswith("gpu") and subject[3:].isdigit():
            return int(subject[3:]) in self.gpus
        if subject.startswith("container "):
            return subject.removeprefix("container ") in self.container_names
        return True


def scope_analysis(analysis: Analysis, scope: ViewScope) -> Analysis:
    """``analysis`` as a view under ``scope`` shows it (itself when the scope narrows nothing).

    The snapshot is narrowed (:func:`scope_snapshot`); findings, alerts, groups, markers and the
    user totals follow it; the GPU shares keep the whole GPUs' figures, only of shown GPUs.
    """
    if not scope.narrows:
        return analysis
    whole = analysis.snapshot
    shown = scope_snapshot(whole, scope)
    keep = _Shown(whole, shown, scope)
    findings = tuple(f for f in analysis.findings if keep.finding(f))
    alerts = analysis.alerts
    if alerts is not None:
        alerts = AlertState(
            alerts.at,
            tuple(a for a in alerts.active if keep.alert(a.subject)),
            tuple(a for a in alerts.history if keep.alert(a.subject)),
        )
    shares = {i: s for i, s in analysis.shares.items() if i in keep.gpus}
    return replace(
        analysis,
        snapshot=shown,
        findings=findings,
        alerts=alerts,
        shares=shares,
        markers=node_markers(findings, shares),
        started=tuple(a for a in analysis.started if keep.alert(a.subject)),
        groups=build_groups(shown),
        totals=user_totals(shown) if analysis.totals is not None else None,
        activity=_activity(whole, shown),
    )


def _activity(whole: Snapshot, shown: Snapshot) -> tuple[Activity, ...]:
    """The whole snapshot's activity estimates of the parties shown on each device."""
    gpus = {g.index: g for g in shown.gpus}
    pairs = set()
    for p in shown.processes:
        gpu = gpus.get(p.sample.gpu_index)
        if gpu is None:
            continue
        inst = mig_instance_of(gpu, p.sample)
        device = str(gpu.index) if inst is None else mig_device_name(gpu.index, inst.index)
        pairs.add((device, party_of(shown, p)[0]))
    return tuple(a for a in activity_estimates(whole) if (a.device, a.party) in pairs)
