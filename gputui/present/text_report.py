"""``--once`` as plain text: the GPUs, processes, containers, users and health in aligned tables.

Untrusted strings pass through ``safe_text`` so a hostile name cannot inject terminal escapes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from gputui import __version__
from gputui.boundary import sanitise
from gputui.derive import units
from gputui.derive.activity import Activity, activity_estimates
from gputui.derive.alerts import AlertState
from gputui.derive.users import (
    UserTotals,
    UserUsage,
    gpu_list,
    place_of,
    user_label,
    user_totals,
)
from gputui.model.containers import Owner
from gputui.model.gpu import GpuSample
from gputui.model.mig import mig_device_name
from gputui.model.processes import GpuProcess
from gputui.model.snapshot import HostStats, Snapshot
from gputui.model.status import (
    FINDING_RANK,
    STATUS_RANK,
    Finding,
    HealthCheck,
    HealthStatus,
    SourceStatus,
)

if TYPE_CHECKING:  # `gputui free` builds these; the report only reads them
    from gputui.derive.free import FreeAnswer, GpuChoice
from gputui.present.json_report import _source_label, iso, mig_of, mig_util


def free_explanation(
    answer: FreeAnswer, wanted: int, enough: bool, chosen: Sequence[GpuChoice] = ()
) -> list[str]:
    """Lines for stderr: how many GPUs qualified and why each other GPU was left out.

    Args:
        answer: The verdict.
        wanted: How many GPUs were asked for (``-n``, or 1).
        enough: Whether that many qualified.
        chosen: What is printed (a MIG device is named when it is).
    """
    usable = answer.usable
    shown = ", ".join(f"{g.index} ({units.size(g.free_memory_bytes)} free)" for g in usable)
    total = len(answer.gpus)
    if enough:
        head = f"gputui free: {len(usable)} of {total} GPUs qualify" + (
            f": {shown}" if usable else ""
        )
    else:
        head = f"gputui free: {len(usable)} of {total} GPUs qualify, {wanted} asked for" + (
            f": {shown}" if usable else ""
        )
    lines = [head]
    mig = [m for m in chosen if m.mig_device is not None]
    if mig:
        m = mig[0]
        lines.append(
            f"gputui free: MIG device {m.mig_device} ({sanitise.safe_text(m.name, 60)}, "
            f"{units.size(m.free_memory_bytes)} free) qualifies: printed its UUID"
        )
    elif answer.usable_mig and not enough and wanted > 1:
        lines.append(
            f"gputui free: {len(answer.usable_mig)} MIG device(s) qualify, but a CUDA process "
            "uses one MIG device: they count only for -n 1"
        )
    for g in answer.excluded:
        # The texts name containers and quote NVML errors: sanitised where they are made, and
        # once more here at the output boundary.
        why = "; ".join(sanitise.safe_text(e.text, 300) for e in g.exclusions)
        lines.append(f"  GPU {g.index}: {why}")
    for m in answer.mig:
        if m.usable and m in chosen:
            continue
        why = "; ".join(sanitise.safe_text(e.text, 300) for e in m.exclusions) or (
            f"qualifies ({units.size(m.free_memory_bytes)} free)"
        )
        lines.append(f"  MIG device {m.mig_device}: {why}")
    return lines


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


def _source_line(name: str, s: SourceStatus | None) -> str:
    if s is None:
        return f"{name}: n/a"
    if s.ok:
        # ok with a note: the source answered, but not everything it holds could be read.
        return f"{name}: ok; {sanitise.safe_text(s.error, 200)}" if s.error else f"{name}: ok"
    return f"{name}: {sanitise.safe_text(s.error, 160)}"


def format_checks(checks: Iterable[HealthCheck], statuses: set[HealthStatus]) -> list[str]:
    """Health checks with the given statuses, worst first, each with its fix indented."""
    lines = []
    chosen = sorted(
        (c for c in checks if c.status in statuses), key=lambda c: STATUS_RANK[c.status]
    )
    for c in chosen:
        # Summaries and fixes quote what containers and images say about themselves (env values
        # such as NVIDIA_DRIVER_CAPABILITIES, runtime names): untrusted, like any label.
        summary = sanitise.safe_text(c.summary, 400)
        lines.append(f"{c.status.value.upper():<5} {sanitise.safe_text(c.id, 120)}: {summary}")
        if c.fix:
            for fix_line in c.fix.splitlines():
                lines.append(
                    f"      fix: {sanitise.safe_text(fix_line, 400)}"
                    if fix_line == c.fix.splitlines()[0]
                    else f"           {sanitise.safe_text(fix_line, 400)}"
                )
    return lines


def host_line(h: HostStats | None) -> str | None:
    """``Host: CPU 38% of 224 (load 71.2 69.8 66.1)  MEM 812GiB/2.0TiB  SWAP 0B/0B``."""
    if h is None:
        return None
    load = "" if h.load_avg is None else " (load " + " ".join(f"{v:.2f}" for v in h.load_avg) + ")"
    return (
        f"Host: CPU {units.pct(h.cpu_percent)} of {h.cpu_count or '?'}{load}  "
        f"MEM {units.size(h.memory_used_bytes)}/{units.size(h.memory_total_bytes)}  "
        f"SWAP {units.size(h.swap_used_bytes)}/{units.size(h.swap_total_bytes)}"
    )


def _usage_table(title: str, usages: Iterable[UserUsage]) -> list[str]:
    """The rows of the Users or Owners section, indented."""
    rows = [[title, "GPU-MEM", "SM", "PROCS", "GPUS", "WHERE"]]
    for u in usages:
        rows.append(
            [
                sanitise.safe_text(u.label, 48),
                units.size(u.gpu_memory_bytes),
                units.pct(u.sm_util),
                str(u.processes),
                gpu_list(u.gpu_indexes),
                sanitise.safe_text(", ".join(u.containers) or "-", 60),
            ]
        )
    return ["  " + r for r in _table(rows, right=(1, 2, 3))]


def _users_text(totals: UserTotals) -> list[str]:
    """The ``Users`` section (and ``Compose projects`` when any project uses GPUs)."""
    users = totals.users
    if not users:
        return []
    lines = ["", "Users"]
    lines += _usage_table("USER", users)
    if totals.owners:
        # The person behind each container (a label, the rootless engine, the compose
        # directory, --user, bind mounts), host processes by their user: the Users tab's table.
        lines += ["", "Owners"]
        lines += _usage_table("OWNER", totals.owners)
    projects = totals.projects
    if projects:
        lines += ["", "Compose projects"]
        rows = [["PROJECT", "GPU-MEM", "SM", "PROCS", "GPUS", "CONTAINERS", "USERS"]]
        for p in projects:
            rows.append(
                [
                    sanitise.safe_text(p.project, 40),
                    units.size(p.gpu_memory_bytes),
                    units.pct(p.sm_util),
                    str(p.processes),
                    gpu_list(p.gpu_indexes),
                    sanitise.safe_text(", ".join(p.containers) or "-", 60),
                    sanitise.safe_text(", ".join(p.users) or "-", 40),
                ]
            )
        lines += ["  " + r for r in _table(rows, right=(1, 2, 3))]
    return lines


#: How many characters of an owner's name the OWNER column shows (the tree's column is 12 cells).
OWNER_CHARS = 20


def owner_cell(owner: Owner | None) -> str:
    """The OWNER cell of a container: ``alice``, ``alice?`` for a low-confidence guess, ``-``.

    The name comes from a label or the host's user database: untrusted text, bounded. What
    named the owner is in ``--json`` (``containers[].owner``) and the monitor's Evidence view.
    """
    if owner is None or not owner.name:
        return "-"
    guess = "?" if owner.confidence == "low" else ""
    return sanitise.safe_text(owner.name, OWNER_CHARS) + guess


def _mig_rows(g: GpuSample) -> list[list[str]]:
    """The MIG devices of a GPU as rows under it (utilization: NVML has none per device)."""
    rows = []
    for m in g.mig_instances:
        if m.index < 0:
            rows.append(
                [f" GI {m.gpu_instance_id}", "no compute instance", "", "", "", "", "", "", ""]
            )
            continue
        used = units.size(m.memory_used_bytes)
        sm = f"{m.sm_count} SM" if m.sm_count is not None else ""
        rows.append(
            [
                f" {mig_device_name(g.index, m.index)}",
                sanitise.safe_text(f"MIG {m.profile or '?'} GI {m.gpu_instance_id}", 24),
                units.pct(mig_util(m), na="n/a"),
                f"{used}/{units.size(m.memory_total_bytes)}",
                units.pct(units.ratio(m.memory_used_bytes, m.memory_total_bytes)),
                "",
                "",
                sm,
                "",
            ]
        )
    return rows


def _mbps(value: float | None) -> str:
    return sanitise.NA if value is None else f"{value / 2**20:.0f}"


def _gpm_text(snapshot: Snapshot, activity: tuple[Activity, ...] | None = None) -> list[str]:
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
        energy = units.energy(None if g.total_energy_mj is None else g.total_energy_mj / 1e3, na="")
        if g.gpm_sm_active is None:
            note = sanitise.safe_text(g.gpm_note, 60)
            rows.append([str(g.index), units.pct(g.utilization_gpu), "-", "", "", "", "", ""])
            rows[-1] += [energy, note]
        else:
            rows.append(
                [
                    str(g.index),
                    units.pct(g.utilization_gpu),
                    units.pct(g.gpm_sm_active),
                    units.pct(g.gpm_sm_occupancy),
                    units.pct(g.gpm_tensor_active),
                    units.pct(g.gpm_fp32_active),
                    units.pct(g.gpm_dram_active),
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
                        units.pct(m.gpm_graphics_active),
                        units.pct(m.gpm_sm_active),
                        units.pct(m.gpm_sm_occupancy),
                        units.pct(m.gpm_tensor_active),
                        "",
                        units.pct(m.gpm_dram_active),
                        "",
                        "",
                        "",
                    ]
                )
    lines += ["  " + r for r in _table(rows, right=(1, 2, 3, 4, 5, 6, 7, 8))]
    estimates = activity_estimates(snapshot) if activity is None else activity
    if estimates:
        lines += ["", "GPU activity by party (SM act: the party's part of its device's)"]
        rows = [["DEVICE", "PARTY", "SM ACT", "TENSOR", "HOW"]]
        for a in estimates:
            rows.append(
                [
                    a.device,
                    sanitise.safe_text(a.label, 40),
                    f"{a.sm_active:.1f}%",
                    "" if a.tensor_active is None else f"{a.tensor_active:.1f}%",
                    "exact (alone on it)" if a.exact else f"estimate ({a.share:.0%} of SM time)",
                ]
            )
        lines += ["  " + r for r in _table(rows, right=(2, 3))]
    return lines


def _process_gpu(snapshot: Snapshot, p: GpuProcess) -> str:
    """``0``, or ``0:1`` for a process on MIG device 1 of GPU 0; ``+M`` marks an MPS client."""
    mig = mig_of(snapshot, p)
    text = (
        str(p.sample.gpu_index) if mig is None else mig_device_name(p.sample.gpu_index, mig.index)
    )
    return text + ("+M" if p.sample.mps else "")


def snapshot_to_text(
    snapshot: Snapshot,
    findings: Iterable[Finding] = (),
    alerts: AlertState | None = None,
    totals: UserTotals | None = None,
    activity: tuple[Activity, ...] | None = None,
) -> str:
    """A readable report of one snapshot: GPUs, GPU processes, containers, problems.

    ``findings``, ``alerts`` and ``totals`` are the snapshot's ``Analysis``; pending and firing
    alerts get a section of their own; ``totals`` None computes the users and projects here;
    ``activity`` None computes the GPU activity by party here (a narrowed analysis brings the
    whole snapshot's).
    """
    h = snapshot.host
    # NVML, then each container source in the collector's order (Docker alone, as wired today).
    engines = [key for key in snapshot.sources if key not in ("nvml", "procs")]
    keys = ["nvml", *(engines or ["docker"])]
    marker = {"demo": "  [DEMO: simulated machine]", "scenario": "  [SCENARIO: NVML replaced]"}
    lines = [
        f"gputui {__version__}  {sanitise.safe_text(h.hostname, 60)}  {iso(snapshot.taken_at)}  "
        # Versions come from the driver, a scenario or a recording: untrusted text like any.
        f"driver {sanitise.safe_text(h.driver_version or None, 40)}  "
        f"CUDA {sanitise.safe_text(h.cuda_driver_version or None, 40)}"
        + marker.get(snapshot.mode, ""),
        "  ".join(_source_line(_source_label(key), snapshot.sources.get(key)) for key in keys),
    ]
    host = host_line(snapshot.host_stats)
    if host:
        lines.append(host)
    for key in keys:
        s = snapshot.sources.get(key)
        if s is not None and not s.ok and s.fix:
            lines.append(f"  fix: {sanitise.safe_text(s.fix, 400)}")
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
                    sanitise.safe_text(g.name, 24),
                    "LOST",
                    "",
                    "",
                    "",
                    "",
                    "",
                    sanitise.safe_text(g.error, 60),
                ]
            )
            continue
        used = units.size(g.memory_used_bytes)
        rows.append(
            [
                str(g.index),
                sanitise.safe_text(g.name, 24),
                units.pct(g.utilization_gpu),
                f"{used}/{units.size(g.memory_total_bytes)}",
                units.pct(units.ratio(g.memory_used_bytes, g.memory_total_bytes)),
                units.temp(g.temperature_c),
                f"{units.watts(g.power_w)}/{units.watts(g.power_limit_w)}",
                units.mhz(g.clock_sm_mhz),
                units.throttle(g.throttle_reasons),
            ]
        )
        rows += _mig_rows(g)
    lines += (
        ["  " + r for r in _table(rows, right=(2, 3, 4, 5, 6, 7))]
        if snapshot.gpus
        else ["  (no GPUs)"]
    )
    lines += _gpm_text(snapshot, activity)
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
                units.size(p.sample.used_memory_bytes),
                units.pct(p.sample.sm_util),
                units.pct(p.info.cpu_percent),
                units.size(p.info.rss_bytes),
                sanitise.safe_text(user_label(snapshot, p), 32),
                sanitise.safe_text(where, 32),
                sanitise.safe_text(p.info.command, 60)
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
    # OWNER shows once some container's owner is known, as the tree's column does; it follows
    # NAME so that the two answers of "whose is it" fit an 80-column terminal together.
    owners = any(u.info.owner is not None and u.info.owner.name for u in snapshot.containers)
    head = ["NAME", "OWNER", "IMAGE"] if owners else ["NAME", "IMAGE"]
    rows = [[*head, "STATUS", "GPU REQ", "GPU-MEM", "GPU PIDS", "SERVICE/POD"]]
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
                sanitise.safe_text(c.name, 32),
                *([owner_cell(c.owner)] if owners else []),
                sanitise.safe_text(c.image, 40, na="-") or "-",
                sanitise.safe_text(status, 40),
                # NVIDIA_VISIBLE_DEVICES is an env value an image sets: untrusted text.
                "?"
                if c.inspect_problem
                else sanitise.safe_text(units.gpu_request(c.gpu_request), 40),
                units.size(u.gpu_memory_bytes) if u.pids else "-",
                ",".join(str(p) for p in u.pids) or "-",
                sanitise.safe_text(group, 40),
            ]
        )
    lines += (
        ["  " + r for r in _table(rows, right=(5,) if owners else (4,))]
        if snapshot.containers
        else ["  (no containers)"]
    )
    orphans = snapshot.orphan_processes
    if orphans:
        total = sum(p.sample.used_memory_bytes or 0 for p in orphans)
        lines.append(
            f"  {units.size(total)} of GPU memory held by PIDs that do not exist here: "
            + ", ".join(str(p.pid) for p in orphans)
        )
    lines += _users_text(totals if totals is not None else user_totals(snapshot))
    found = list(findings)
    if found:
        lines += ["", "Findings"]
        for f in sorted(found, key=lambda f: FINDING_RANK[f.severity]):
            lines.append(f"  {f.severity.upper():<5} {sanitise.safe_text(f.summary, 400)}")
    active = alerts.active if alerts is not None else ()
    if active:
        # A rule with a `for` duration is pending until its condition has held that long.
        lines += ["", "Alerts"]
        for a in active:
            lines.append(
                f"  {a.phase.value.upper():<7} {sanitise.safe_text(a.severity, 12):<8} "
                f"{sanitise.safe_text(a.rule, 60)}: {sanitise.safe_text(a.message, 400)}"
            )
    problems = format_checks(snapshot.health, {HealthStatus.FAIL, HealthStatus.WARN})
    if problems:
        lines += ["", "Health (failing and warning checks; `gputui doctor` lists all)"]
        lines += ["  " + line for line in problems]
    return "\n".join(lines) + "\n"
