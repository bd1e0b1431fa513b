"""The inspect screen (``i``): a container's configuration and every one of its processes.

The top half is what ``docker inspect`` says that matters day to day: the image, the command, when
it was created and started, its restart policy, networks, mounts (type, source → destination,
ro/rw), labels and the *names* of its environment variables (their values are never read: the
engine's reply is parsed to names and dropped). The bottom half is ``top`` in the container:
every process of its cgroup, not only those on a GPU, with the host PID, the PID inside the
container, user, CPU %, RSS and command, refreshed every :data:`PROCESS_REFRESH_S` seconds.

Both are fetched through the collector (its container source, on a thread of their own): the
UI thread only draws what came back. Everything drawn goes through ``safe_text``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, Static

from gputui.boundary import sanitise, timestamps
from gputui.derive import units
from gputui.model.containers import ContainerDetails, ContainerProcesses
from gputui.model.snapshot import ContainerUsage
from gputui.ui.widgets.crumbs import Breadcrumbs
from gputui.ui.widgets.hanging import HangingStatic

Part = str | tuple[str, str]

#: Seconds between two reads of the container's processes while the screen is open.
PROCESS_REFRESH_S = 2.0
#: Characters of a command shown (the screen scrolls; longer ones end with …).
COMMAND_CHARS = 200


def _section(title: str, note: str = "") -> list[Part]:
    parts: list[Part] = ["\n", (title, "bold $accent")]
    if note:
        parts += ["  ", (note, "$text-muted")]
    return [*parts, "\n"]


def _fact(label: str, *value: Part) -> list[Part]:
    return [("  " + label.ljust(12), "$text-muted"), *value, "\n"]


def _count(details: ContainerDetails, which: str, shown: int) -> str:
    """``3``, ``3 of 12`` when some were left out, ``none``."""
    left = dict(details.more).get(which, 0)
    if not shown and not left:
        return "none"
    return f"{shown} of {shown + left}" if left else str(shown)


def _more(details: ContainerDetails, which: str) -> list[Part]:
    left = dict(details.more).get(which, 0)
    return [(f"  … and {left} more", "$text-muted"), "\n"] if left else []


def details_content(details: ContainerDetails | None, engine: str) -> Content:
    """The configuration half: facts, mounts, labels and environment names.

    Args:
        details: What the engine said; None while it is being asked.
        engine: The source's name, for what it does not describe.
    """
    if details is None:
        return Content.styled("Asking the engine…", "$text-muted")
    if details.error is not None:
        return Content.assemble(
            ("Inspect: ", "bold $text-warning"), sanitise.safe_text(details.error, 300)
        )
    command = sanitise.safe_text(" ".join(details.command), COMMAND_CHARS, na="")
    networks = ", ".join(sanitise.safe_text(n, 60) for n in details.networks)
    parts: list[Part] = _section("Container")
    parts += _fact("image", sanitise.safe_text(details.image, 120, na="?"))
    parts += _fact("command", command or ("?", "$text-muted"))
    parts += _fact("created", timestamps.local(details.created_at, "?"))
    parts += _fact("started", timestamps.local(details.started_at, "never"))
    if "restart policy" not in details.unknown:
        parts += _fact("restart", sanitise.safe_text(details.restart_policy, 40, na="no"))
    if "networks" not in details.unknown:
        parts += _fact("networks", networks or ("none", "$text-muted"))
    if details.unknown:
        what = ", ".join(details.unknown)
        parts += _fact("", (f"{engine} does not describe: {what}", "$text-muted"))
    parts += _section("Mounts", _count(details, "mounts", len(details.mounts)))
    for mount in details.mounts:
        source = sanitise.safe_text(mount.source, 100, na="") or "-"
        parts += [
            ("  " + sanitise.safe_text(mount.kind, 8).ljust(8), "$text-muted"),
            source,
            (" → ", "$text-muted"),
            (sanitise.safe_text(mount.destination, 100), "bold"),
            "  ",
            ("ro", "bold $text-warning") if mount.read_only else ("rw", "$text-muted"),
            "\n",
        ]
    parts += _more(details, "mounts")
    parts += _section("Labels", _count(details, "labels", len(details.labels)))
    for key, value in details.labels:
        parts += [
            ("  " + sanitise.safe_text(key, 60), "$text-muted"),
            " = ",
            sanitise.safe_text(value, 120, na=""),
            "\n",
        ]
    parts += _more(details, "labels")
    count = _count(details, "env", len(details.env_names))
    parts += _section("Environment", f"{count} · names only: values are never read or shown")
    if details.env_names:
        parts += ["  ", "  ".join(sanitise.safe_text(n, 60) for n in details.env_names), "\n"]
    else:
        parts += [("  none", "$text-muted"), "\n"]
    parts += _more(details, "env")
    return Content.assemble(*parts)


def processes_content(read: ContainerProcesses | None) -> Content:
    """The ``top`` half: a header line and one line per process (host PID order)."""
    parts: list[Part] = []
    if read is None:
        return Content.assemble(*_section("Processes"), ("  reading /proc…", "$text-muted"))
    if read.error is not None:
        parts += _section("Processes")
        return Content.assemble(*parts, ("  " + sanitise.safe_text(read.error, 300), "$text-muted"))
    shown = len(read.processes)
    count = f"{shown} of {read.total}" if read.total > shown else str(shown)
    parts += _section("Processes", f"{count} · every {PROCESS_REFRESH_S:g} s")
    header = f"  {'PID':>8} {'CPID':>6} {'USER':<10} {'CPU%':>6} {'RSS':>9} S COMMAND"
    parts += [(header, "bold"), "\n"]
    for process in read.processes:
        cpid = str(process.container_pid) if process.container_pid is not None else "?"
        user = sanitise.safe_text(process.user, 10)
        parts += [
            f"  {process.pid:>8} ",
            (f"{cpid:>6} ", "$text-muted"),
            f"{user:<10} ",
            f"{units.pct(process.cpu_percent):>6} ",
            f"{units.size(process.rss_bytes):>9} ",
            (f"{sanitise.safe_text(process.state, 1, na='?')} ", "$text-muted"),
            sanitise.safe_text(process.command, COMMAND_CHARS, na="?"),
            "\n",
        ]
    if read.total > shown:
        parts += [(f"  … and {read.total - shown} more", "$text-muted"), "\n"]
    return Content.assemble(*parts)


class InspectScreen(Screen[None]):
    """One container's inspect facts and live process list, fetched off the UI thread.

    Args:
        usage: The container, as the monitor shows it (its title line).
        engine: The name of the source that lists it.
        fetch_details: Asks the engine for the facts (blocking: run on a thread).
        fetch_processes: Reads the container's processes (blocking: run on a thread).
        crumbs: Where it was opened from: the tab, the container, ``Inspect``.
    """

    BINDINGS = [
        Binding("escape,i,q", "close", "Close"),
        Binding("j", "scroll_down", "Down", show=False),
        Binding("k", "scroll_up", "Up", show=False),
    ]

    DEFAULT_CSS = """
    InspectScreen #in-title { height: 1; padding: 0 1; background: $panel; }
    InspectScreen #in-scroll { padding: 0 1; }
    """

    def __init__(
        self,
        usage: ContainerUsage,
        engine: str,
        fetch_details: Callable[[], ContainerDetails],
        fetch_processes: Callable[[], ContainerProcesses],
        crumbs: Sequence[str] = (),
    ) -> None:
        super().__init__()
        self.crumbs = Breadcrumbs(crumbs, id="in-crumbs")
        self.usage = usage
        self.engine = engine
        self._fetch_details = fetch_details
        self._fetch_processes = fetch_processes
        self.details: ContainerDetails | None = None
        self.processes: ContainerProcesses | None = None
        self.title_line = Static(self._title(), id="in-title")
        self.details_body = HangingStatic(details_content(None, engine), id="in-details")
        self.processes_body = HangingStatic(processes_content(None), id="in-processes")
        #: Set while a process read is on its thread: the timer never starts a second one.
        self._reading = False
        self._gone = threading.Event()

    def _title(self) -> Content:
        info = self.usage.info
        return Content.assemble(
            ("Inspect  ", "$text-muted"),
            (sanitise.safe_text(info.name, 60), "bold"),
            "  ",
            sanitise.safe_text(info.status, 12),
            "  ",
            (sanitise.safe_text(info.image, 60, na=""), "$text-muted"),
            "  ",
            (info.short_id, "$text-muted"),
            "  ",
            (sanitise.safe_text(self.engine, 30), "italic"),
        )

    def compose(self) -> ComposeResult:
        """Path, title, configuration, processes, footer."""
        yield self.crumbs
        yield self.title_line
        with VerticalScroll(id="in-scroll"):
            yield self.details_body
            yield self.processes_body
        yield Footer()

    def on_mount(self) -> None:
        """Ask for the facts once and for the processes now, then every few seconds."""
        self._start(self._details_thread, "gputui-inspect")
        self._read_processes()
        self.set_interval(PROCESS_REFRESH_S, self._read_processes)

    def on_unmount(self) -> None:
        """Results arriving after closing are dropped."""
        self._gone.set()

    def _start(self, target: Callable[[], None], name: str) -> None:
        threading.Thread(target=target, name=name, daemon=True).start()

    def _read_processes(self) -> None:
        if self._reading or self._gone.is_set():
            return
        self._reading = True
        self._start(self._processes_thread, "gputui-top")

    def _deliver(self, apply: Callable[[], None]) -> None:
        """From a thread: run ``apply`` on the UI thread, unless the screen or the app closed."""
        if self._gone.is_set():
            return
        with contextlib.suppress(RuntimeError):  # the app closed meanwhile
            self.app.call_from_thread(apply)

    def _details_thread(self) -> None:
        try:
            details = self._fetch_details()
        except Exception as exc:  # the sources report failures as data; this one did not
            details = ContainerDetails(self.usage.info.id, error=type(exc).__name__)
        self._deliver(lambda: self.show_details(details))

    def _processes_thread(self) -> None:
        try:
            read = self._fetch_processes()
        except Exception as exc:  # as above
            read = ContainerProcesses(error=type(exc).__name__)
        self._deliver(lambda: self.show_processes(read))

    def show_details(self, details: ContainerDetails) -> None:
        """Draw the facts the engine gave (on the UI thread)."""
        self.details = details
        self.details_body.update(details_content(details, self.engine))

    def show_processes(self, read: ContainerProcesses) -> None:
        """Draw the latest process list (on the UI thread)."""
        self._reading = False
        self.processes = read
        self.processes_body.update(processes_content(read))

    def action_close(self) -> None:
        """Back to the monitor."""
        self.dismiss(None)
