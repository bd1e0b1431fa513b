"""The process drill-down (``Enter`` on a process): one GPU process, everything about it.

nvitop's process screen is the habit: the process's GPU memory and SM % over time, its container
and the PID it has there, user, start time and how long it has run, the parents that started it,
and its full command line, with the signal keys of the monitor. The screen follows the process by
identity (PID and start time) through the refreshes; when it exits the last figures stay, marked
so. The parent chain is read from ``/proc`` on a worker thread, never on the UI's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, Label, Static
from textual.worker import Worker, WorkerState

from gputui.boundary import sanitise, timestamps
from gputui.collect.linux.parent_chain import EXITED_NOTE, ParentLink
from gputui.derive import units
from gputui.derive.freshness import age_text
from gputui.derive.history import coverage_label, resample, value_summary
from gputui.derive.process_history import (
    UNITS,
    ProcessHistoryReader,
    ProcessKey,
    identity_of,
    totals,
)
from gputui.model.processes import GpuProcess
from gputui.model.snapshot import ContainerUsage, Snapshot
from gputui.ui.action_table import ACTIONS
from gputui.ui.styles import MUTED
from gputui.ui.widgets.crumbs import Breadcrumbs
from gputui.ui.widgets.hanging import HangingStatic
from gputui.ui.widgets.spark import Spark
from gputui.ui.widgets.tree_labels import HIDDEN_TEXT, since

#: Reads a process's parents: ``(pid, start_time) -> (parents nearest first, note)``; blocking.
ChainReader = Callable[[int, float | None], tuple[tuple[ParentLink, ...], str | None]]

#: Seconds (of snapshot time) between two reads of the parent chain while the screen is open.
CHAIN_REFRESH_S = 5.0

#: Characters of the command line shown (it wraps); one argument alone may be 128 KiB.
COMMAND_LIMIT = 8192

#: Characters of one parent's command line (one line each).
PARENT_LIMIT = 160

#: The signal rows of the action table this screen offers (by binding name).
SIGNAL_ROWS = ("sigterm", "sigint", "sigkill", "signal-menu")

Part = str | tuple[str, str]


def _section(title: str) -> list[Part]:
    return ["\n", (title, "bold $accent"), "\n"]


def _fact(label: str, *value: Part) -> list[Part]:
    return [("  " + label.ljust(11), MUTED), *value, "\n"]


def title_content(process: GpuProcess, exited_at: float | None, confirmed: bool = False) -> Content:
    """``Process 611  python3  root`` and, once it has gone, a marker saying so.

    Args:
        process: The newest record of the process.
        exited_at: When it was last listed, once no snapshot lists it any more.
        confirmed: ``/proc`` says it has exited (``EXITED``); else it may only have freed its
            GPU memory (``GONE from the GPUs``).
    """
    info = process.info
    name = HIDDEN_TEXT if info.proc_hidden else sanitise.safe_text(info.name, 40, na="?")
    parts: list[Part] = [
        ("Process  ", MUTED),
        (str(process.pid), "bold"),
        "  ",
        (name, "bold"),
        "  ",
        (sanitise.safe_text(info.user, 32, na=""), MUTED),
    ]
    if exited_at is not None:
        when = timestamps.local(exited_at, date=False)
        state = "EXITED" if confirmed else "GONE from the GPUs"
        marker = f" {state}: last seen {when}; last known figures "
        parts += ["  ", (marker, "bold reverse $text-warning")]
    return Content.assemble(*parts)


def _container_part(process: GpuProcess, usage: ContainerUsage | None) -> list[Part]:
    info = process.info
    cid = process.container_id
    if cid is None:
        if not info.exists:
            return _fact("container", ("unknown: the PID is not visible to gputui", MUTED))
        return _fact("container", ("none: a host process", MUTED))
    if usage is None or not usage.known_to_engine:
        runtime = sanitise.safe_text(info.runtime, 20, na="another runtime")
        text = f"{cid[:12]}  (from its cgroup; not a Docker container: {runtime})"
        parts = _fact("container", text)
    else:
        c = usage.info
        parts = _fact(
            "container",
            (sanitise.safe_text(c.name, 60), "bold"),
            "  ",
            (sanitise.safe_text(c.status, 12), "" if c.running else "bold $text-warning"),
            "  ",
            (c.short_id, MUTED),
            "  ",
            (sanitise.safe_text(c.image, 60, na=""), MUTED),
        )
        if c.compose_service:
            project = sanitise.safe_text(c.compose_project, 24, na="")
            service = sanitise.safe_text(c.compose_service, 24)
            parts += _fact("compose", f"{project}/{service}" if project else service)
    if info.pod_uid:
        parts += _fact("pod", sanitise.safe_text(info.pod_uid, 40))
    return parts


def _pids(process: GpuProcess) -> list[Part]:
    inner = process.info.container_pid
    if process.container_id is None or inner is None:
        return _fact("PID", (str(process.pid), "bold"), ("  (host)", MUTED))
    return _fact(
        "PID",
        (str(process.pid), "bold"),
        ("  on the host,  ", MUTED),
        (str(inner), "bold"),
        ("  in its container", MUTED),
    )


def _times(process: GpuProcess, now: float, exited_at: float | None) -> list[Part]:
    start = process.info.start_time
    if start is None:
        return _fact("started", (sanitise.NA, MUTED))
    end = now if exited_at is None else exited_at
    ran = since(start, end)
    tail = f"  (ran at least {ran})" if exited_at is not None else f"  (running for {ran})"
    return _fact("started", timestamps.local(start), (tail, MUTED))


def _gpus(rows: tuple[GpuProcess, ...], snapshot: Snapshot) -> list[Part]:
    parts = _section("GPUs")
    by_index = {g.index: g for g in snapshot.gpus}
    for row in sorted(rows, key=lambda p: p.sample.gpu_index):
        sample = row.sample
        gpu = by_index.get(sample.gpu_index)
        total = None if gpu is None else gpu.memory_total_bytes
        share = units.ratio(sample.used_memory_bytes, total)
        parts += [
            ("  GPU ", MUTED),
            (str(sample.gpu_index).ljust(3), "bold"),
            (units.size(sample.used_memory_bytes).rjust(10), "bold"),
            (f"  {units.pct(share)} of its memory" if share is not None else "", MUTED),
            ("  SM ", MUTED),
            units.pct(sample.sm_util),
            ("  type ", MUTED),
            sanitise.safe_text(sample.kind, 4),
        ]
        if sample.mig_gi_id is not None:
            parts += [("  MIG GI ", MUTED), str(sample.mig_gi_id)]
            if sample.mig_ci_id is not None:
                parts += [(" CI ", MUTED), str(sample.mig_ci_id)]
        parts.append("\n")
    return parts


def _chain(
    exited_at: float | None, links: tuple[ParentLink, ...] | None, note: str | None
) -> list[Part]:
    parts = _section("Parents")
    if note is not None and note.startswith(EXITED_NOTE) and exited_at is None:
        # Still listed, yet /proc has no process of that PID and start time.
        note = "not found in /proc: no process with this PID and start time here"
    if links is None:
        return [*parts, ("  " + (note or "reading /proc…"), MUTED), "\n"]
    if not links:
        return [*parts, ("  " + (note or "none: it is the first process"), MUTED), "\n"]
    for link in links:
        command = sanitise.safe_text(link.command or f"[{link.name}]", PARENT_LIMIT)
        parts += [("  ↑ ", MUTED), (str(link.pid).rjust(7), "bold"), "  ", command, "\n"]
    if note:
        parts += [("  " + note, MUTED), "\n"]
    return parts


def command_content(process: GpuProcess) -> Content:
    """The full command line, sanitised (it wraps on screen), or why it is not known."""
    info = process.info
    if info.proc_hidden:
        return Content.styled(HIDDEN_TEXT, MUTED)
    if info.command is None:
        why = "not readable (permission)" if info.access_denied else "unknown"
        return Content.styled(why, MUTED)
    return Content(sanitise.safe_text(info.command, COMMAND_LIMIT))


def detail_content(
    rows: tuple[GpuProcess, ...],
    snapshot: Snapshot,
    exited_at: float | None,
    chain: tuple[tuple[ParentLink, ...] | None, str | None],
) -> Content:
    """The text sections of the drill-down (every outside string through ``safe_text``).

    Args:
        rows: The process's rows of the snapshot (one per GPU it uses), at least one.
        snapshot: The snapshot they come from (the last that listed the process once it exited).
        exited_at: When the process was last seen, once it has gone; None while it runs.
        chain: Its parents (None until read) and a note on them.

    Returns:
        Process, GPUs and parents sections, and the command line's title.
    """
    process = rows[0]
    info = process.info
    usage = None if process.container_id is None else snapshot.container(process.container_id)
    total = totals(rows).get(identity_of(process))
    parts: list[Part] = _section("Process")
    parts += _pids(process)
    parts += _container_part(process, usage)
    parts += _fact("user", sanitise.safe_text(info.user, 32))
    parts += _times(process, snapshot.taken_at, exited_at)
    # Beyond a few hundred GPU processes CPU/RSS are read in turn: say how old this pair is.
    age = age_text(snapshot.taken_at, info.sampled_at)
    parts += _fact(
        "CPU",
        units.pct(info.cpu_percent),
        ("  RSS ", MUTED),
        units.size(info.rss_bytes),
        (f"  CPU/RSS read {age} ago" if age else "", MUTED),
    )
    if total is not None:
        parts += _fact(
            "GPU total",
            (units.size(total.memory_bytes), "bold"),
            ("  SM ", MUTED),
            units.pct(total.sm_util),
        )
    if info.access_denied:
        parts += _fact("note", ("some facts are not readable (permission)", MUTED))
    parts += _gpus(rows, snapshot)
    parts += _chain(exited_at, *chain)
    parts += _section("Command line")
    return Content.assemble(*parts[:-1])  # the command line follows in its own widget


class ProcessSeries(Horizontal):
    """``label  ▁▂▃▅▇  now  min …  max …``: one metric of the process on a time axis.

    Args:
        name: The row's label.
        unit: ``B`` (bytes) or ``%``.
    """

    DEFAULT_CSS = """
    ProcessSeries { height: 1; }
    ProcessSeries .name { width: 14; color: $text-muted; }
    ProcessSeries Spark { width: 1fr; }
    ProcessSeries .value { width: 34; padding-left: 1; }
    """

    def __init__(self, name: str, unit: str) -> None:
        super().__init__()
        self.unit = unit
        self.spark = Spark()
        self.value = Label("", classes="value")
        self.name_label = Label(name, classes="name")
        self.values: tuple[float, ...] = ()
        self._args: tuple[ProcessHistoryReader, ProcessKey, str, float, float | None] | None = None

    def compose(self) -> ComposeResult:
        """Name, sparkline, numbers."""
        yield self.name_label
        yield self.spark
        yield self.value

    def show(
        self,
        history: ProcessHistoryReader,
        key: ProcessKey,
        metric: str,
        window: float,
        high: float | None,
    ) -> None:
        """Draw the metric over the last ``window`` seconds, placed by time.

        Args:
            history: The per-process buffers.
            key: The process.
            metric: ``mem`` or ``sm``.
            window: Seconds the sparkline's width stands for.
            high: The top of the scale (default: the data's maximum).
        """
        self._args = (history, key, metric, window, high)
        times, values = history.timed(key, metric, window)
        end, cells = history.last_time, self.spark.size.width
        drawn = values if end is None or cells <= 0 else resample(times, values, end, window, cells)
        top = high if high else max(values, default=1.0)
        self.spark.set_scale(0.0, top or 1.0)
        if drawn != self.spark.data:
            self.spark.data = drawn
        if values != self.values or not self.value.content:
            self.values = values
            self.value.update(value_summary(values, self.unit))

    def on_resize(self) -> None:
        """Place the samples again for the new width."""
        if self._args is not None:
            self.show(*self._args)


class ProcessDetailScreen(Screen[None]):
    """One process, followed by identity through the refreshes while open.

    Args:
        process: The process row it was opened on.
        snapshot: The snapshot that row comes from.
        history: The app's per-process buffers.
        window: Seconds of history the sparklines show.
        chain_reader: Reads the parent chain (on a worker); None when it cannot be read.
        chain_off: Why the parent chain is not read (shown when ``chain_reader`` is None).
        crumbs: Where it was opened from: the tab, the container, ``PID 1234``.
    """

    BINDINGS = [
        Binding("escape,q", "close", "Back"),
        Binding("j,down", "scroll_down", "Down", show=False),
        Binding("k,up", "scroll_up", "Up", show=False),
    ]

    DEFAULT_CSS = """
    ProcessDetailScreen #pd-title { height: 1; padding: 0 1; background: $panel; }
    ProcessDetailScreen #pd-scroll { padding: 0 1; }
    ProcessDetailScreen #pd-history-title { height: 1; color: $accent; text-style: bold; }
    ProcessDetailScreen #pd-command { padding: 0 0 0 2; }
    ProcessDetailScreen #pd-keys { height: 1; padding: 0 1; color: $text-muted; }
    """

    def __init__(
        self,
        process: GpuProcess,
        snapshot: Snapshot,
        history: ProcessHistoryReader,
        window: float,
        chain_reader: ChainReader | None,
        chain_off: str | None = None,
        crumbs: Sequence[str] = (),
    ) -> None:
        super().__init__()
        #: Where it was opened from: the tab, the container, ``PID 1234`` (one line on top).
        self.crumbs = Breadcrumbs(crumbs, id="pd-crumbs")
        self.key: ProcessKey = identity_of(process)
        self.pid = process.pid
        self.history = history
        self.window = window
        self.snapshot = snapshot
        self.rows: tuple[GpuProcess, ...] = self._rows(snapshot) or (process,)
        #: When the process was last seen, once it is gone from the snapshots.
        self.exited_at: float | None = None
        #: ``/proc`` confirmed it exited (not only freed its GPU memory).
        self.exit_confirmed = False
        self._exit_checked = False
        self._last_listed = snapshot.taken_at
        info = process.info
        if info.proc_hidden:
            chain_reader, chain_off = None, f"not readable: {HIDDEN_TEXT}"
        elif not info.exists:
            chain_reader, chain_off = None, "not readable: the PID is not visible to gputui"
        self.chain_reader = chain_reader
        #: The parents read last (None: not read yet, or not readable) and a note on them.
        self.chain: tuple[ParentLink, ...] | None = None
        self.chain_note: str | None = chain_off if chain_reader is None else None
        self._chain_at: float | None = None
        self._chain_worker: Worker[tuple[tuple[ParentLink, ...], str | None]] | None = None
        self.title_line = Static("", id="pd-title")
        self.body = HangingStatic(id="pd-body")
        self.command = Static("", id="pd-command")
        self.history_title = Static("", id="pd-history-title")
        self.series = {
            "mem": ProcessSeries("GPU memory", UNITS["mem"]),
            "sm": ProcessSeries("SM %", UNITS["sm"]),
        }
        self.keys_line = Static("", id="pd-keys")
        self._shown: tuple[str, str, str] | None = None

    def compose(self) -> ComposeResult:
        """Path, title, the sparklines, the sections, the command line, the key hints, footer."""
        yield self.crumbs
        yield self.title_line
        with VerticalScroll(id="pd-scroll"):
            yield self.history_title
            yield from self.series.values()
            yield self.body
            yield self.command
        yield self.keys_line
        yield Footer()

    def on_mount(self) -> None:
        """Show what the screen was opened with and start reading the parents."""
        self.show(self.snapshot, self.window)

    def on_screen_resume(self) -> None:
        """Back from a dialog or the help: key hints may have changed (a keymap, read-only)."""
        self._show_keys()

    # ------------------------------------------------------------------------- refresh

    def _rows(self, snapshot: Snapshot) -> tuple[GpuProcess, ...]:
        return tuple(p for p in snapshot.processes if identity_of(p) == self.key)

    @property
    def process(self) -> GpuProcess:
        """The newest record of the process (the last one listed, once it has exited)."""
        return self.rows[0]

    def target(self) -> GpuProcess | None:
        """The process the signal keys act on; None once ``/proc`` says it has exited.

        One that only left the GPUs may still run: the signal path checks its start time, so a
        PID reused meanwhile is never hit.
        """
        return None if self.exit_confirmed else self.process

    def container(self) -> ContainerUsage | None:
        """The process's container in the newest snapshot that listed the process."""
        cid = self.process.container_id
        return None if cid is None else self.snapshot.container(cid)

    def show(self, snapshot: Snapshot, window: float) -> None:
        """Refresh for a new snapshot (or a new history window).

        Args:
            snapshot: The newest snapshot; a process missing from it has exited (its last
                known figures stay).
            window: Seconds of history the sparklines show.
        """
        self.window = window
        rows = self._rows(snapshot)
        if rows:
            self.rows, self.snapshot, self.exited_at = rows, snapshot, None
            self._last_listed = snapshot.taken_at
            self._exit_checked = self.exit_confirmed = False
        elif self.exited_at is None and snapshot.taken_at > self._last_listed:
            nvml = snapshot.sources.get("nvml")
            if nvml is None or nvml.ok:
                # Without a process list from NVML nobody can tell it left: nothing changes.
                self.exited_at = self._last_listed
        self._maybe_read_chain(snapshot.taken_at)
        self._render_text()
        self._sparks()
        self._show_keys()

    def set_window(self, window: float) -> None:
        """Show another history window (``w``), the facts unchanged."""
        self.window = window
        self._sparks()

    def _render_text(self) -> None:
        title = title_content(self.process, self.exited_at, self.exit_confirmed)
        body = detail_content(
            self.rows, self.snapshot, self.exited_at, (self.chain, self.chain_note)
        )
        command = command_content(self.process)
        # Content equality ignores styles; the plain text changes whenever a fact does.
        if self._shown != (title.plain, body.plain, command.plain):
            self._shown = (title.plain, body.plain, command.plain)
            self.title_line.update(title)
            self.body.update(body)
            self.command.update(command)

    def _sparks(self) -> None:
        used = {p.sample.gpu_index for p in self.rows}
        memory = [
            g.memory_total_bytes
            for g in self.snapshot.gpus
            if g.index in used and g.memory_total_bytes is not None
        ]
        scales = {"mem": float(sum(memory)) if memory else None, "sm": 100.0 * max(1, len(used))}
        covered = max(self.history.covered(self.key, self.window), 0.0)
        label = coverage_label(covered, self.window)
        self.history_title.update(f"History  ·  {label}  (w: change window)")
        for metric, row in self.series.items():
            row.show(self.history, self.key, metric, self.window, scales[metric])

    def _show_keys(self) -> None:
        """The signal keys as bound now (none under ``--read-only``: the app hides them).

        Only while this screen is the one shown: under a dialog (the signal's confirmation, the
        help) no key of this screen is active, which is not read-only; the line is redrawn when
        the screen comes back (``on_screen_resume``).
        """
        if not self.is_attached or self.app.screen is not self:
            return
        names = {f"gputui.{name}" for name in SIGNAL_ROWS}
        labels = {row.binding_id: row.label for row in ACTIONS if row.name in SIGNAL_ROWS}
        keys: list[Part] = []
        for key, active in self.active_bindings.items():
            if active.binding.id in names and active.enabled:
                keys += [(key, "bold"), f" {labels[active.binding.id]}  "]
        if self.exit_confirmed:
            keys = [("the process has exited: no signals  ", MUTED)]
        elif not keys:
            keys = [("signals are off (read-only)  ", MUTED)]
        hint = Content.assemble(*keys, ("w", "bold"), " history window")
        self.keys_line.update(hint)

    # ----------------------------------------------------------------- parent chain

    def _maybe_read_chain(self, now: float) -> None:
        reader = self.chain_reader
        if reader is None or self._exit_checked:
            return
        if self._chain_worker is not None and self._chain_worker.state in (
            WorkerState.PENDING,
            WorkerState.RUNNING,
        ):
            return  # one read at a time: a slow /proc never piles threads up
        gone = self.exited_at is not None
        if not gone and self._chain_at is not None and now - self._chain_at < CHAIN_REFRESH_S:
            return
        # Once it has left the snapshots, one more read says whether it exited.
        self._exit_checked = gone
        self._chain_at = now
        pid, start = self.pid, self.process.info.start_time
        self._chain_worker = self.run_worker(
            lambda: reader(pid, start),
            name="parent-chain",
            group="parent-chain",
            thread=True,
            exit_on_error=False,
        )

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The parent chain was read: show it (a failed read says why)."""
        worker = event.worker
        if worker is not self._chain_worker:
            return
        if event.state is WorkerState.SUCCESS and worker.result is not None:
            links, note = worker.result
            if note is not None and note.startswith(EXITED_NOTE):
                # Keep the parents read while it ran; the title says it exited.
                self.exit_confirmed = self.exited_at is not None or self.exit_confirmed
                if self.chain is None:
                    self.chain_note = note
                self._show_keys()
            else:
                self.chain, self.chain_note = links, note
        elif event.state is WorkerState.ERROR:
            error = worker.error
            self.chain = None
            self.chain_note = f"not readable: {type(error).__name__}"
        else:
            return
        self._render_text()

    # ------------------------------------------------------------------------- actions

    def action_close(self) -> None:
        """Back to the monitor."""
        self.dismiss(None)
