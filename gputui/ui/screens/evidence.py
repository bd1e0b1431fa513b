"""The evidence view (``e``): everything about one container that says why its job is slow.

One screen assembles what is otherwise spread over tabs and tools: the container's findings, its
GPU processes, its GPUs and who else uses them, CPU use against its quota and how often the
scheduler throttled it, memory against its limit, OOM kills and restarts, and sparklines of its
GPU memory, CPU and memory. It follows the live refreshes while open.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, Static

from gputui.boundary import sanitise, timestamps
from gputui.collect.xid_catalog import HARDWARE_CLASSES
from gputui.derive import units
from gputui.derive.activity import activity_estimates
from gputui.derive.analysis import Analysis
from gputui.derive.fault_findings import faults_of
from gputui.derive.findings import FindingRules, Throttling
from gputui.derive.history import UNITS, HistoryReader, container_key, coverage_label
from gputui.model.gpu import GpuSample
from gputui.model.snapshot import ContainerUsage, Snapshot
from gputui.ui.styles import MUTED, severity_style
from gputui.ui.widgets.crumbs import Breadcrumbs
from gputui.ui.widgets.hanging import HangingStatic
from gputui.ui.widgets.history import SeriesRow
from gputui.ui.widgets.tree_labels import HIDDEN_TEXT

Part = str | tuple[str, str]

#: Kernel-log lines shown per container (the newest).
MAX_FAULT_LINES = 8


def _section(title: str) -> list[Part]:
    return ["\n", (title, "bold $accent"), "\n"]


def _fact(label: str, *value: Part) -> list[Part]:
    return [("  " + label.ljust(12), "$text-muted"), *value, "\n"]


def title_content(usage: ContainerUsage, gone: bool) -> Content:
    """``Evidence  trainer  running  nvcr.io/…  3f2a1b4c5d6e  lab/trainer``."""
    info = usage.info
    parts: list[Part] = [
        ("Evidence  ", "$text-muted"),
        (sanitise.safe_text(info.name, 60), "bold"),
        "  ",
        (sanitise.safe_text(info.status, 12), "" if info.running else "bold $text-warning"),
        "  ",
        (sanitise.safe_text(info.image, 60, na=""), "$text-muted"),
        "  ",
        (info.short_id, "$text-muted"),
    ]
    if info.compose_service:
        project = sanitise.safe_text(info.compose_project, 24, na="")
        service = sanitise.safe_text(info.compose_service, 24)
        parts += ["  ", (f"{project}/{service}" if project else service, "italic")]
    if gone:
        gone_text = " GONE: no longer listed; last known facts "
        parts += ["  ", (gone_text, "bold reverse $text-warning")]
    return Content.assemble(*parts)


def _findings(usage: ContainerUsage, analysis: Analysis) -> list[Part]:
    parts = _section("Findings")
    findings = analysis.findings_for(usage.info.id, usage.pids)
    if not findings:
        quiet = "none: no sharing, growth, idling, throttling, memory pressure, OOM or restarts"
        return [*parts, ("  " + quiet, "$text-muted"), "\n"]
    for finding in findings:
        style = severity_style(finding.severity)
        summary = sanitise.safe_text(finding.summary, 300)
        parts += [("  " + finding.severity.ljust(5), style), " ", summary, "\n"]
    return parts


def _processes(usage: ContainerUsage, snapshot: Snapshot) -> list[Part]:
    parts = _section("GPU processes")
    mine = [p for p in snapshot.processes if p.container_id == usage.info.id]
    if not mine:
        none = "  none (no process of this container holds GPU memory)"
        return [*parts, (none, "$text-muted"), "\n"]
    for process in sorted(mine, key=lambda p: (p.pid, p.sample.gpu_index)):
        info, sample = process.info, process.sample
        parts += [
            ("  PID ", "$text-muted"),
            (str(process.pid).ljust(8), "bold"),
            ("GPU ", "$text-muted"),
            str(sample.gpu_index).ljust(3),
            (units.size(sample.used_memory_bytes).rjust(10), "bold"),
            ("  SM ", "$text-muted"),
            units.pct(sample.sm_util).rjust(4),
            ("  CPU ", "$text-muted"),
            units.pct(info.cpu_percent).rjust(5),
            "  ",
            (HIDDEN_TEXT, MUTED)
            if info.proc_hidden
            else sanitise.safe_text(info.command or info.name, 100, na="?"),
            "\n",
        ]
    return parts


def _gpu_indexes(usage: ContainerUsage) -> list[int]:
    indexes = set(usage.gpu_indexes)
    request = usage.info.gpu_request
    if isinstance(request, tuple):
        indexes |= {int(r) for r in request if r.isdigit()}
    return sorted(indexes)


def _gpus(usage: ContainerUsage, analysis: Analysis) -> list[Part]:
    parts = _section("GPUs")
    by_index: dict[int, GpuSample] = {g.index: g for g in analysis.snapshot.gpus}
    indexes = _gpu_indexes(usage)
    if not indexes:
        request = units.gpu_request(usage.info.gpu_request)
        return [*parts, (f"  none in use (GPU request: {request})", "$text-muted"), "\n"]
    for index in indexes:
        gpu = by_index.get(index)
        parts += [("  GPU ", "$text-muted"), (str(index), "bold")]
        if gpu is not None:
            parts += [
                ("  util ", "$text-muted"),
                units.pct(gpu.utilization_gpu),
                ("  mem ", "$text-muted"),
                f"{units.size(gpu.memory_used_bytes)}/{units.size(gpu.memory_total_bytes)}",
                ("  throttle ", "$text-muted"),
                units.throttle(gpu.throttle_reasons),
            ]
            if gpu.gpm_sm_active is not None:
                # util says a kernel ran; GPM says how much of the GPU worked.
                parts += [
                    ("  SM act ", "$text-muted"),
                    units.pct(gpu.gpm_sm_active),
                    ("  tensor ", "$text-muted"),
                    units.pct(gpu.gpm_tensor_active),
                    ("  DRAM bw ", "$text-muted"),
                    units.pct(gpu.gpm_dram_active),
                ]
        shares = analysis.shares.get(index, ())
        if len(shares) >= 2:
            parts += ["\n", ("    shared: ", "bold $text-warning")]
            for n, share in enumerate(shares):
                label = sanitise.safe_text(share.label, 40)
                me = share.party == usage.info.id
                sm = "" if share.sm_util is None else f" SM {share.sm_util}%"
                size = units.size(share.memory_bytes)
                memory = f"{share.memory_share * 100:.0f}% of memory ({size})"
                parts += [
                    (" · " if n else "", "$text-muted"),
                    (label + (" (this)" if me else ""), "bold" if me else ""),
                    f" {memory}{sm}",
                ]
        elif not usage.gpu_data:
            # No process list from NVML: nobody can tell who else is on the GPU.
            parts += [("  sharing unknown (NVML gave no GPU processes)", "$text-muted")]
        else:
            parts += [("  not shared", "$text-success")]
        parts.append("\n")
    return parts + _activity(usage, analysis)


def _activity(usage: ContainerUsage, analysis: Analysis) -> list[Part]:
    """The container's part of each device's SM activity (GPM): exact alone, else estimated."""
    parts: list[Part] = []
    estimates = analysis.activity
    for a in activity_estimates(analysis.snapshot) if estimates is None else estimates:
        if a.party != usage.info.id:
            continue
        what = "MIG device" if ":" in a.device else "GPU"
        tensor = "" if a.tensor_active is None else f", tensor {a.tensor_active:.1f}%"
        parts += [
            ("  SM activity on ", "$text-muted"),
            (f"{what} {a.device}", "bold"),
            f"  {a.sm_active:.1f}% of it{tensor}",
            (
                "  exact: alone on it"
                if a.exact
                else f"  estimate: {a.share:.0%} of its processes' SM time",
                "$text-muted",
            ),
            "\n",
        ]
    return parts


def _cpu(usage: ContainerUsage, throttling: Throttling | None, throttle_ratio: float) -> list[Part]:
    info = usage.info
    parts = _section("CPU")
    used = info.cpu_percent
    if info.cpu_quota_cpus:
        of_quota = units.ratio(used, info.cpu_quota_cpus * 100)
        level = "bold $text-warning" if (of_quota or 0) >= 90 else ""
        parts += _fact(
            "use",
            units.pct(used),
            (f"  of a {info.cpu_quota_cpus:g}-CPU quota: ", "$text-muted"),
            (units.pct(of_quota), level),
        )
    else:
        parts += _fact("use", units.pct(used), ("  (100% = one core; no CPU quota)", "$text-muted"))
    if info.cpu_periods is None or info.cpu_throttled_periods is None:
        parts += _fact("throttling", ("not known (cgroup cpu.stat not readable)", "$text-muted"))
    elif throttling is None:
        parts += _fact("throttling", ("known after the next refresh", "$text-muted"))
    else:
        # The findings engine's figure: the finding and the tree marker print the same one.
        level = "bold $text-warning" if throttling.ratio >= throttle_ratio else ""
        parts += _fact(
            "throttled",
            (throttling.text().removeprefix("throttled "), level),
            (f"  ({throttling.throttled} of {throttling.periods} periods)", "$text-muted"),
        )
    if info.cpu_throttled_seconds is not None:
        parts += _fact("time", f"{info.cpu_throttled_seconds:.1f} s throttled in total")
    return parts


def _memory(usage: ContainerUsage, snapshot: Snapshot) -> list[Part]:
    info = usage.info
    parts = _section("Memory")
    used, limit = info.memory_used_bytes, info.memory_limit_bytes
    host = snapshot.host_stats.memory_total_bytes if snapshot.host_stats else None
    if host is None and snapshot.engine is not None:
        host = snapshot.engine.host_memory_bytes
    if used is None:
        limit_text = "" if limit is None else f" (limit {units.size(limit)})"
        parts += _fact("use", (f"not known{limit_text}", "$text-muted"))
    elif limit is not None and (host is None or limit < host):
        share = units.ratio(used, limit)
        level = "bold $text-error" if (share or 0) >= 90 else ""
        text = f"{units.size(used)} of its {units.size(limit)} limit ({units.pct(share)})"
        parts += _fact("use", (text, level))
    else:
        parts += _fact("use", units.size(used), ("  (no memory limit)", "$text-muted"))
    oom = info.oom_killed
    parts += _fact(
        "OOM-killed",
        (
            "yes" if oom else "no" if oom is not None else sanitise.NA,
            "bold $text-error" if oom else "",
        ),
    )
    restarts = info.restart_count
    restart_style = "bold $text-warning" if restarts else ""
    parts += _fact("restarts", (sanitise.NA if restarts is None else str(restarts), restart_style))
    return parts


def _kernel_faults(usage: ContainerUsage, snapshot: Snapshot) -> list[Part]:
    faults = faults_of(snapshot, usage.info.id)
    if not faults:
        return []
    parts = _section("Kernel log")
    for fault in faults[-MAX_FAULT_LINES:]:
        hardware = fault.fault_class in HARDWARE_CLASSES
        what = f"XID {fault.xid}" if fault.kind == "xid" else "OOM kill"
        how = "candidate: no PID in the line" if fault.attribution == "candidates" else ""
        parts += [
            ("  " + timestamps.utc(fault.at) + "  ", "$text-muted"),
            (what, "bold $text-error" if hardware else "bold $text-warning"),
            "  ",
            sanitise.safe_text(f"{fault.fault_class}: {fault.fix}", 160),
            (f"  ({how})" if how else "", "$text-muted"),
            "\n",
            ("    " + sanitise.safe_text(fault.raw, 300), "$text-muted"),
            "\n",
        ]
    return parts


#: How each owner confidence reads (``none``: nothing named the owner).
_CONFIDENCE_STYLE = {"high": "bold", "medium": "", "low": "$text-warning", "none": "$text-warning"}


def _owner(usage: ContainerUsage) -> list[Part]:
    owner = usage.info.owner
    if owner is None:
        return []
    parts = _section("Owner")
    name = sanitise.safe_text(owner.name, 64) if owner.name else "unknown"
    confidence = sanitise.safe_text(owner.confidence, 8)
    sure = f"  ({confidence} confidence)" if owner.confidence != "none" else ""
    parts += _fact(
        "owner", (name, _CONFIDENCE_STYLE.get(owner.confidence, "")), (sure, "$text-muted")
    )
    parts += _fact("evidence", sanitise.safe_text(owner.evidence, 200))
    if owner.hint:
        parts += _fact("to be sure", (sanitise.safe_text(owner.hint, 200), "$text-muted"))
    return parts


def evidence_content(usage: ContainerUsage, analysis: Analysis) -> Content:
    """The text sections of the evidence view (untrusted text through ``safe_text``).

    Args:
        usage: The container (its last known state when it is gone).
        analysis: The latest snapshot's analysis: findings, shares, GPUs, processes.

    Returns:
        Findings, owner, kernel log, GPU processes, GPUs, CPU and memory sections.
    """
    snapshot = analysis.snapshot
    problem: list[Part] = []
    if usage.info.inspect_problem:
        # A stub from the list reply: say what is missing before anything built on it.
        text = "  Docker: " + sanitise.safe_text(usage.info.inspect_problem, 200)
        problem = [*_section("Engine description"), (text, "bold $text-warning"), "\n"]
    return Content.assemble(
        *problem,
        *_findings(usage, analysis),
        *_owner(usage),
        *_kernel_faults(usage, snapshot),
        *_processes(usage, snapshot),
        *_gpus(usage, analysis),
        *_cpu(usage, analysis.throttling.get(usage.info.id), FindingRules().throttle_ratio),
        *_memory(usage, snapshot),
    )


class EvidenceScreen(Screen[None]):
    """One container's evidence, refreshed with every snapshot while open.

    Args:
        container_id: The container to show.
        history: The app's ring buffers (the container's series).
        window: Seconds of history the sparklines show.
        analysis: The latest analysis, shown at once.
        crumbs: Where it was opened from: the tab, the container, ``Evidence``.
    """

    BINDINGS = [
        Binding("escape,e,q", "close", "Close"),
        Binding("j", "scroll_down", "Down", show=False),
        Binding("k", "scroll_up", "Up", show=False),
    ]

    DEFAULT_CSS = """
    EvidenceScreen #ev-title { height: 1; padding: 0 1; background: $panel; }
    EvidenceScreen #ev-scroll { padding: 0 1; }
    EvidenceScreen #ev-history-title { height: 1; margin-top: 1; color: $accent; text-style: bold; }
    """

    def __init__(
        self,
        container_id: str,
        history: HistoryReader,
        window: float,
        analysis: Analysis,
        crumbs: Sequence[str] = (),
    ) -> None:
        super().__init__()
        #: Where it was opened from: the tab, the container, ``Evidence`` (one line on top).
        self.crumbs = Breadcrumbs(crumbs, id="ev-crumbs")
        self.container_id = container_id
        self.history = history
        self.window = window
        self.analysis = analysis
        self.usage: ContainerUsage | None = None
        self.title_line = Static("", id="ev-title")
        self.body = HangingStatic(id="ev-body")
        self.history_title = Static("", id="ev-history-title")
        self.rows = {
            "gpu_mem": SeriesRow("GPU memory", UNITS[("container", "gpu_mem")]),
            "cpu": SeriesRow("CPU %", UNITS[("container", "cpu")]),
            "mem": SeriesRow("memory", UNITS[("container", "mem")]),
        }
        self._shown: tuple[str, str] | None = None

    def compose(self) -> ComposeResult:
        """Path, title, the sections, the sparklines, footer."""
        yield self.crumbs
        yield self.title_line
        with VerticalScroll(id="ev-scroll"):
            yield self.body
            yield self.history_title
            yield from self.rows.values()
        yield Footer()

    def on_mount(self) -> None:
        """Show the analysis the screen was opened with."""
        self.show(self.analysis, self.window)

    def show(self, analysis: Analysis, window: float) -> None:
        """Refresh for a new snapshot (or history window)."""
        self.window = window
        current = analysis.snapshot.container(self.container_id)
        gone = current is None
        if not gone:
            self.analysis, self.usage = analysis, current
        # A container that left keeps the facts of the last snapshot that listed it.
        usage, analysis = self.usage, self.analysis
        if usage is None:
            self.title_line.update(Content.styled("This container is no longer listed.", "bold"))
            return
        title, body = title_content(usage, gone), evidence_content(usage, analysis)
        # Content equality ignores styles; the plain text changes whenever a fact does.
        if self._shown != (title.plain, body.plain):
            self._shown = (title.plain, body.plain)
            self.title_line.update(title)
            self.body.update(body)
        self._sparks(usage, analysis.snapshot)

    def _sparks(self, usage: ContainerUsage, snapshot: Snapshot) -> None:
        cid = usage.info.id
        gpu_total = [
            g.memory_total_bytes
            for g in snapshot.gpus
            if g.index in usage.gpu_indexes and g.memory_total_bytes is not None
        ]
        cpu_top = usage.info.cpu_quota_cpus * 100 if usage.info.cpu_quota_cpus else None
        limit = usage.info.memory_limit_bytes
        scales = {
            "gpu_mem": float(sum(gpu_total)) if gpu_total else None,
            "cpu": cpu_top,
            "mem": float(limit) if limit else None,
        }
        keys = {metric: container_key(cid, metric) for metric in self.rows}
        covered = self.history.covered(keys.values(), self.window)
        label = coverage_label(covered, self.window)
        self.history_title.update(f"History  ·  {label}  (w: change window)")
        for metric, row in self.rows.items():
            row.show_timed(self.history, keys[metric], self.window, scales[metric])

    def action_close(self) -> None:
        """Back to the monitor."""
        self.dismiss(None)
