"""The selected container's panel under the tree on tall terminals (lazydocker's panels).

At 160x50 and more the tree leaves tens of rows empty: this pane takes the bottom of the
Containers tab and shows, for the container under the cursor, its live figures (CPU against its
quota, memory against its limit, GPU memory, SM %, its GPU processes), its key evidence lines
(the findings about it) and the last lines of its logs, following.

Its logs are read on a daemon thread of their own through the collector (the logs machinery of
``l``: the same reader, the same bounds), into a ring of :data:`LOG_LINES` lines; the UI thread
only draws the ring's end, each line through ``safe_text``, a few times a second while lines
come. Moving the cursor closes the old stream (from the UI thread: a reader may be closed from
any thread) and opens the new container's. The pane is imported and mounted only when first
shown (:meth:`gputui.ui.screens.main.MainScreen.fit_pane`).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.content import Content

from gputui.boundary import sanitise
from gputui.derive import units
from gputui.derive.analysis import Analysis
from gputui.model.snapshot import ContainerUsage, Snapshot
from gputui.ui.styles import severity_style
from gputui.ui.widgets.repaint import ContentLines

if TYPE_CHECKING:
    # The logs reader's module loads with the first stream (the demo never opens one).
    from gputui.collect.docker.logs import LogLine, LogReader

Part = str | tuple[str, str]

#: Log lines kept per container (the pane shows the end of them).
LOG_LINES = 200
#: Lines asked for when a container's logs are opened.
LOG_TAIL = 50
#: Seconds between two redraws of the log lines while new ones come.
LOG_REDRAW_S = 0.25
#: GPU processes and findings listed (the rest are counted).
MAX_PROCESSES = 6
MAX_FINDINGS = 3
#: Rows of the pane: its title, figures, processes and findings; the logs beside them.
PANE_ROWS = 14

#: Opens the logs of a container (its id, whether it runs); None: no logs to show, and why.
LogOpener = Callable[[ContainerUsage], "tuple[Callable[[], LogReader] | None, str]"]


class LogTail:
    """One container's logs, followed on a daemon thread into a bounded ring.

    Args:
        opener: Opens the stream (blocking: called on the thread).
    """

    def __init__(self, opener: Callable[[], LogReader]) -> None:
        self._opener = opener
        self._lock = threading.Lock()
        self.lines: deque[LogLine] = deque(maxlen=LOG_LINES)
        #: Lines arrived since the UI last drew (set by the thread, cleared by the UI).
        self.changed = False
        self.opened = False
        self.ended: str | None = None
        self._closing = False
        self._reader: LogReader | None = None
        self.thread = threading.Thread(target=self._run, name="gputui-pane-logs", daemon=True)

    def start(self) -> None:
        """Open and follow, on the thread."""
        self.thread.start()

    def close(self) -> None:
        """End the stream (idempotent, from any thread): the thread returns."""
        with self._lock:
            self._closing = True
            reader = self._reader
        if reader is not None:
            reader.close()

    def snapshot(self, count: int) -> list[LogLine]:
        """The last ``count`` lines (and the UI has now seen them)."""
        with self._lock:
            self.changed = False
            return list(self.lines)[-count:] if count > 0 else []

    def _run(self) -> None:
        from gputui.collect.docker.logs import LogStreamError

        try:
            reader = self._opener()
        except LogStreamError as exc:
            self._end(str(exc))
            return
        except Exception as exc:  # a source must refuse with LogStreamError; say it anyway
            self._end(type(exc).__name__)
            return
        with self._lock:
            closing, self._reader = self._closing, reader
            self.opened, self.changed = True, True
        if closing:
            reader.close()
            return
        error = "the stream ended"
        try:
            while (lines := reader.read()) is not None:
                with self._lock:
                    if self._closing:
                        break
                    self.lines.extend(lines)
                    self.changed = True
        except LogStreamError as exc:
            error = str(exc)
        finally:
            reader.close()
        self._end(error)

    def _end(self, why: str) -> None:
        with self._lock:
            self.ended = why
            self.changed = True


def _bar(used: float | None, total: float | None, width: int = 12) -> str:
    return units.bar(units.ratio(used, total), width)


def stats_content(
    usage: ContainerUsage | None, snapshot: Snapshot | None, analysis: Analysis | None
) -> Content:
    """The figures half: name, CPU, memory, GPU memory, SM, GPU processes, findings."""
    if usage is None or snapshot is None:
        return Content.styled("Select a container: its figures and logs show here.", "$text-muted")
    info = usage.info
    status = units.container_status(info.status, info.exit_code)
    parts: list[Part] = [
        (sanitise.safe_text(info.name, 50), "bold"),
        "  ",
        (sanitise.safe_text(status, 24), "" if info.running else "bold $text-warning"),
        "  ",
        (sanitise.safe_text(info.image, 50, na=""), "$text-muted"),
        "\n",
    ]
    quota = info.cpu_quota_cpus
    cpu_note = f" of {quota:g} CPUs" if quota else ""
    parts += [("CPU     ", "$text-muted"), units.pct(info.cpu_percent).rjust(6), cpu_note, "\n"]
    limit = info.memory_limit_bytes
    parts += [
        ("memory  ", "$text-muted"),
        units.size(info.memory_used_bytes).rjust(8),
        f" / {units.size(limit)}  " if limit else "  ",
        (_bar(info.memory_used_bytes, limit) if limit else "", "$accent"),
        "\n",
    ]
    gpus = ", ".join(str(i) for i in usage.gpu_indexes) or "none"
    parts += [
        ("GPU mem ", "$text-muted"),
        units.size(usage.gpu_memory_bytes).rjust(8),
        ("   SM ", "$text-muted"),
        units.pct(usage.sm_util),
        ("   GPUs ", "$text-muted"),
        gpus,
        "\n",
    ]
    mine = [p for p in snapshot.processes if p.container_id == info.id]
    if mine:
        for process in mine[:MAX_PROCESSES]:
            command = sanitise.safe_text(process.info.command or process.info.name, 60, na="?")
            parts += [
                ("  PID ", "$text-muted"),
                str(process.pid).ljust(8),
                ("GPU ", "$text-muted"),
                str(process.sample.gpu_index).ljust(2),
                units.size(process.sample.used_memory_bytes).rjust(9),
                ("  SM ", "$text-muted"),
                units.pct(process.sample.sm_util).rjust(4),
                "  ",
                (command, "$text-muted"),
                "\n",
            ]
        if len(mine) > MAX_PROCESSES:
            parts += [(f"  … and {len(mine) - MAX_PROCESSES} more", "$text-muted"), "\n"]
    else:
        parts += [("  no GPU process", "$text-muted"), "\n"]
    findings = analysis.findings_for(info.id, usage.pids) if analysis is not None else ()
    for finding in findings[:MAX_FINDINGS]:
        summary = sanitise.safe_text(finding.summary, 200)
        parts += [(finding.severity.upper().ljust(5), severity_style(finding.severity)), " "]
        parts += [summary, "\n"]
    if len(findings) > MAX_FINDINGS:
        parts += [(f"… {len(findings) - MAX_FINDINGS} more findings (e)", "$text-muted"), "\n"]
    return Content.assemble(*parts)


def logs_content(title: str, lines: list[LogLine], note: str, width: int) -> Content:
    """The logs half: a title line, then the last lines, each cut to ``width``."""
    parts: list[Part] = [(title, "bold $accent")]
    if note:
        parts += ["  ", (note, "$text-muted")]
    for line in lines:
        mark = ("▌", "bold $text-error") if line.stream == "stderr" else " "
        parts += ["\n", mark, sanitise.safe_text(line.text, max(10, width - 1), na="")]
    return Content.assemble(*parts)


class SelectionPane(Horizontal):
    """The selected container's figures and evidence (left) and its last log lines (right).

    Args:
        logs_for: For a container, how to open its logs (None and why not, when none).
    """

    DEFAULT_CSS = f"""
    SelectionPane {{
        height: {PANE_ROWS};
        border-top: solid $panel-lighten-1;
        background: $surface;
    }}
    SelectionPane #pane-stats {{
        width: 1fr;
        padding: 0 1;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }}
    SelectionPane #pane-logs {{
        width: 1fr;
        padding: 0 1;
        border-left: solid $panel-lighten-1;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }}
    """

    def __init__(self, logs_for: LogOpener, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.logs_for = logs_for
        self.stats = ContentLines(id="pane-stats")
        self.logs = ContentLines(id="pane-logs")
        self.container_id: str | None = None
        self.tail: LogTail | None = None
        self._logs_note = ""
        self._running = False

    def compose(self) -> ComposeResult:
        """Figures beside logs."""
        yield self.stats
        yield self.logs

    def on_mount(self) -> None:
        """Redraw the log lines a few times a second, only when some came."""
        self.set_interval(LOG_REDRAW_S, self._redraw_logs)

    def on_unmount(self) -> None:
        """Close the stream: its thread returns."""
        self._close()

    def show(
        self, usage: ContainerUsage | None, snapshot: Snapshot | None, analysis: Analysis | None
    ) -> None:
        """Show the selection's figures; a new container (or one started) gets its logs."""
        self.stats.update(stats_content(usage, snapshot, analysis))
        cid = usage.info.id if usage is not None else None
        running = usage is not None and usage.info.running
        if cid == self.container_id and running == self._running:
            return
        self._close()
        self.container_id, self._running = cid, running
        if usage is None:
            self._logs_note = ""
            self.logs.update(Content(""))
            return
        opener, why = self.logs_for(usage)
        self._logs_note = why
        if opener is not None:
            self.tail = LogTail(opener)
            self.tail.start()
        self._draw_logs()

    def _close(self) -> None:
        if self.tail is not None:
            self.tail.close()
            self.tail = None

    def _redraw_logs(self) -> None:
        if self.tail is not None and self.tail.changed:
            self._draw_logs()

    def _draw_logs(self) -> None:
        rows = max(1, PANE_ROWS - 2)
        width = max(20, self.logs.content_region.width or 60)
        tail = self.tail
        if tail is None:
            self.logs.update(logs_content("Logs", [], self._logs_note, width))
            return
        lines = tail.snapshot(rows)
        if tail.ended is not None and not lines:
            note = sanitise.safe_text(tail.ended, 120)
        elif not tail.opened:
            note = "opening…"
        elif not lines:
            note = "following · no output yet" if self._running else "no output"
        else:
            note = "following" if self._running and tail.ended is None else ""
        self.logs.update(logs_content("Logs", lines, note, width))
