"""The Faults view (``F``): every XID error and OOM kill the kernel log attributed, newest first.

Each fault says when, on which GPU (or MIG device), what it means and whom it concerns: the
container and process it was attributed to, or the candidates on that GPU when the line named no
PID; its class and fix (an application XID says the GPU is fine), and the kernel's own line. It
follows the live refreshes while open.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, Static

from gputui.boundary import sanitise, timestamps
from gputui.collect.xid_catalog import HARDWARE_CLASSES
from gputui.model.faults import KernelFault
from gputui.model.snapshot import Snapshot

Part = str | tuple[str, str]

#: Faults listed at most (the newest).
MAX_SHOWN = 200

#: How each attribution reads.
ATTRIBUTION_TEXT = {
    "process": "the process named in the line",
    "recent_process": "the process named in the line (exited since)",
    "pid_only": "a PID gputui never saw",
    "cgroup": "the killed memory cgroup",
    "candidates": "no PID in the line: candidates on that GPU",
    "none": "not attributed",
}


def _who(fault: KernelFault) -> list[Part]:
    if fault.container_id is not None:
        name = fault.container_name or fault.container_id[:12]
        return [("container ", "$text-muted"), (sanitise.safe_text(name, 60), "bold")]
    if fault.candidates:
        names = [
            sanitise.safe_text(c.container_name or (c.container_id or "host")[:12], 30)
            + f" (PID {c.pid})"
            for c in fault.candidates[:6]
        ]
        more = f" +{len(fault.candidates) - 6}" if len(fault.candidates) > 6 else ""
        return [("candidates ", "$text-muted"), ", ".join(names) + more]
    if fault.pid is not None:
        return [("host or unknown process", "$text-muted")]
    return [("nobody named", "$text-muted")]


def faults_content(snapshot: Snapshot) -> Content:
    """The view's text: one block per fault, newest first (untrusted text through safe_text)."""
    source = snapshot.sources.get("kmsg")
    if source is None:
        return Content.styled(
            "The kernel log is not read (a scenario, the demo or --kernel-log off).", "$text-muted"
        )
    parts: list[Part] = []
    if not source.ok:
        parts += [
            ("Cannot read the kernel log: ", "bold $text-warning"),
            sanitise.safe_text(source.error, 200),
            "\n",
            ("  " + sanitise.safe_text(source.fix, 400), "$text-muted"),
            "\n\n",
        ]
    faults = list(reversed(snapshot.kernel_faults))[:MAX_SHOWN]
    if not faults:
        parts.append(
            ("No XID errors or OOM kills in the kernel log since the last hour.", "$text-muted")
        )
        return Content.assemble(*parts)
    for fault in faults:
        hardware = fault.fault_class in HARDWARE_CLASSES
        what = f"XID {fault.xid}" if fault.kind == "xid" else "OOM kill"
        where = (
            f"GPU {fault.mig_device or fault.gpu_index}"
            if fault.gpu_index is not None
            else ("" if fault.kind == "oom" else f"PCI {fault.pci_bus_id or '?'}")
        )
        process = ""
        if fault.pid is not None:
            process = (
                f"PID {fault.pid} {sanitise.safe_text(fault.process_name, 24, na='')}".rstrip()
            )
        parts += [
            (timestamps.utc(fault.at) + "  ", "$text-muted"),
            (what.ljust(9), "bold $text-error" if hardware else "bold $text-warning"),
            where.ljust(9),
            (fault.fault_class.ljust(13), "bold" if hardware else ""),
            *_who(fault),
            ("  " + process if process else "", ""),
            ("  (injected)" if fault.injected else "", "$text-muted"),
            "\n",
            ("    " + sanitise.safe_text(fault.meaning, 120) + ": ", "$text-muted"),
            sanitise.safe_text(fault.fix, 200),
            "\n",
            ("    " + ATTRIBUTION_TEXT.get(fault.attribution, fault.attribution), "$text-muted"),
            "\n",
            ("    " + sanitise.safe_text(fault.raw, 300), "$text-muted italic"),
            "\n",
        ]
    return Content.assemble(*parts)


class FaultsScreen(Screen[None]):
    """The kernel-log faults, refreshed with every snapshot while open.

    Args:
        snapshot: The latest snapshot, shown at once.
    """

    BINDINGS = [
        Binding("escape,F,q", "close", "Close"),
        Binding("j", "scroll_down", "Down", show=False),
        Binding("k", "scroll_up", "Up", show=False),
    ]

    DEFAULT_CSS = """
    FaultsScreen #faults-title { height: 1; padding: 0 1; background: $panel; }
    FaultsScreen #faults-scroll { padding: 0 1; }
    """

    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__()
        self.snapshot = snapshot
        self.title_line = Static("", id="faults-title")
        self.body = Static("", id="faults-body")
        self._shown: str | None = None

    def compose(self) -> ComposeResult:
        """Title, the faults, footer."""
        yield self.title_line
        with VerticalScroll(id="faults-scroll"):
            yield self.body
        yield Footer()

    def on_mount(self) -> None:
        """Show the snapshot the screen was opened with."""
        self.show(self.snapshot)

    def show(self, snapshot: Snapshot) -> None:
        """Refresh for a new snapshot."""
        self.snapshot = snapshot
        count = len(snapshot.kernel_faults)
        title = Content.assemble(
            ("Faults  ", "bold"),
            (f"{count} from the kernel log (XID errors, OOM kills), newest first", "$text-muted"),
        )
        body = faults_content(snapshot)
        if self._shown != body.plain:
            self._shown = body.plain
            self.title_line.update(title)
            self.body.update(body)

    def action_close(self) -> None:
        """Back to the monitor."""
        self.dismiss(None)
