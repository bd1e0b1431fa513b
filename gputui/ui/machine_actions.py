"""The actions that reach into the machine: nvidia-smi in a container, signals to a process.

Everything goes through the collector (:class:`~gputui.collect.sources.CollectorProtocol`),
which routes a container's actions to the engine that lists it; before acting, a key asks that
engine's capabilities, and says which engine lacks what when it does.

A collaborator of the app, not a part of it: it is handed what it acts with (the app to show
screens and toasts on, the collector, the settings, the monitor screen whose selection it acts
on, and a way to hold collecting while the terminal belongs to another program) and owns the
state of its own runs. Every action here is a write action in the action table: gone with
``--read-only``, and refused with a reason when reached anyway.

The screens these actions open (the confirmation, nvidia-smi's modal, the logs) are imported when
an action first opens one: a session that never uses them does not load them.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from functools import partial
from typing import TYPE_CHECKING

from textual.app import App, SuspendNotSupported
from textual.content import Content
from textual.notifications import SeverityLevel

from gputui.boundary import sanitise
from gputui.collect.engines import connect_hint
from gputui.collect.sources import Capability, CollectorProtocol, refusal
from gputui.model.containers import ExecResult
from gputui.model.processes import GpuProcess
from gputui.model.records import record
from gputui.model.settings import Settings
from gputui.model.snapshot import ContainerUsage
from gputui.ui.crash import redact
from gputui.ui.messages import ExecFinished

if TYPE_CHECKING:
    from gputui.ui.screens.exec_modal import ExecRun
    from gputui.ui.screens.main import MainScreen

#: Why a write action did nothing when reached anyway (keys and palette entries are hidden).
READ_ONLY_REFUSAL = (
    "Read-only mode: exec, shells, signals and container stop/start/restart/pause are off."
)

#: The shells tried, in order, each with a probe that runs the binary itself and exits 0.
SHELLS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("bash", ("bash", "--version")),
    ("sh", ("sh", "-c", "exit 0")),
)
#: Seconds one shell probe may take.
SHELL_PROBE_S = 5.0
#: docker CLI statuses that mean the CLI (not the shell) failed: its message stays on screen.
_CLI_FAILURES = (125, 126, 127)

#: The container actions: verb in a sentence, past tense, and what the dialog adds.
LIFECYCLE: dict[str, tuple[str, str, str]] = {
    "stop": ("Stop", "stopped", "docker stop: SIGTERM, then SIGKILL after 10 s."),
    "start": ("Start", "started", "docker start: its GPU processes start again."),
    "restart": ("Restart", "restarted", "docker restart: SIGTERM, SIGKILL after 10 s, start."),
    "pause": (
        "Pause",
        "paused",
        "docker pause: its processes are frozen (no signal); P again unpauses.",
    ),
    "unpause": ("Unpause", "unpaused", "docker unpause: its processes run on."),
}

#: What a container's status reads from the moment an action is confirmed until the engine
#: reports the outcome (Docker's stop waits up to 10 s for the container to exit).
PENDING_STATUS = {
    "stop": "stopping…",
    "start": "starting…",
    "restart": "restarting…",
    "pause": "pausing…",
    "unpause": "unpausing…",
}


#: How many processes a signal's confirmation names, one a line (the rest are counted).
LISTED_TARGETS = 12


@record
class SignalTargets:
    """The processes one signal goes to, and those left out.

    Attributes:
        processes: The processes to signal (each pinned by its start time when sent).
        skipped: Why each process left out cannot be signalled (gone, hidden).
        what: What they are, for people (``PID 611``, ``the tagged processes``).
    """

    processes: tuple[GpuProcess, ...]
    skipped: tuple[str, ...]
    what: str

    def summary(self) -> str:
        """One line naming the targets (the signal menu's title)."""
        if len(self.processes) == 1:
            process = self.processes[0]
            command = sanitise.safe_text(process.info.command or process.info.name, 50)
            return f"PID {process.pid} ({command})"
        return f"{len(self.processes)} processes: {self.what}"

    def listing(self, name: str) -> Content:
        """The confirmation's body: every process (up to :data:`LISTED_TARGETS`), then skips."""
        count = len(self.processes)
        parts: list[str | tuple[str, str]] = [
            f"Send {name} to ",
            (f"{count} process{'es' if count != 1 else ''}", "bold"),
            f" ({self.what})?",
        ]
        width = max(len(str(p.pid)) for p in self.processes)
        for process in self.processes[:LISTED_TARGETS]:
            command = sanitise.safe_text(process.info.command or process.info.name, 70)
            parts += ["\n", ("PID ", "$text-muted"), (str(process.pid).rjust(width), "bold")]
            parts += ["  ", (command, "$text-muted")]
        if count > LISTED_TARGETS:
            parts += ["\n", (f"… and {count - LISTED_TARGETS} more", "$text-muted")]
        for why in self.skipped[:LISTED_TARGETS]:
            parts += ["\n", ("not sent: ", "$text-warning"), sanitise.safe_text(why, 120)]
        return Content.assemble(*parts)


def _pids(pids: Sequence[int]) -> str:
    """``PID 611`` or ``PIDs 611, 612, 613`` (at most 20 named)."""
    if len(pids) == 1:
        return f"PID {pids[0]}"
    named = ", ".join(str(pid) for pid in pids[:20])
    more = f" and {len(pids) - 20} more" if len(pids) > 20 else ""
    return f"PIDs {named}{more}"


class MachineActions:
    """exec / interactive exec / signals on the monitor's selection, for one app."""

    def __init__(
        self,
        app: App[None],
        collector: CollectorProtocol,
        settings: Settings,
        main: MainScreen,
        hold_collection: Callable[[], AbstractContextManager[None]],
    ) -> None:
        """Wire the actions to the app they run in.

        Args:
            app: Shows the screens and toasts; receives :class:`ExecFinished`.
            collector: Runs the execs and sends the signals.
            settings: ``read_only`` and the exec timeout.
            main: The monitor screen whose selection the actions act on.
            hold_collection: A context manager that stops collecting while it is entered.
        """
        self.app = app
        self.collector = collector
        self.settings = settings
        self.main = main
        self.hold_collection = hold_collection
        #: Runs a command on the real terminal (replaced in tests).
        self.interactive_runner: Callable[[Sequence[str]], int] = _run_interactive
        #: Container id -> the nvidia-smi run still going there.
        self.exec_runs: dict[str, ExecRun] = {}
        #: Runs a shell on the real terminal (replaced in tests).
        self.shell_runner: Callable[[Sequence[str]], int] = run_shell
        #: Container ids with a shell probe, stop, start or restart under way.
        self.busy: set[str] = set()

    def refused(self) -> bool:
        """True (after saying so) in read-only mode: a write action invoked directly refuses."""
        read_only = self.settings.read_only or getattr(self.collector, "read_only", False) is True
        if read_only:
            self.app.notify(READ_ONLY_REFUSAL, severity="warning")
        return read_only

    def explain_refused_key(self) -> None:
        """A write key pressed under ``--read-only`` (its binding is gone): say why, on the monitor.

        Only on the monitor: elsewhere (a dialog, the filter input) the key means something else.
        """
        if self.settings.read_only and self.app.screen is self.main:
            self.app.notify(READ_ONLY_REFUSAL, severity="warning")

    # ---------------------------------------------------------------------- nvidia-smi

    def exec_smi(self) -> None:
        """Run nvidia-smi in the selected container, captured, in a modal; one at a time each.

        A second ``x`` while the container's run goes on starts nothing: it says so and shows
        that run (every run holds a thread until the collector's timeout, so repeated presses
        must not pile them up).
        """
        if self.refused():
            return
        container, _ = self.main.selection()
        if container is None:
            self.app.notify("Select a running container first.", severity="warning")
            return
        if not self._offers(container, "exec"):
            return
        if not container.info.running:
            self.app.notify("Select a running container first.", severity="warning")
            return
        from gputui.ui.screens.exec_modal import ExecRun, ExecScreen

        cid = container.info.id
        running = self.exec_runs.get(cid)
        if running is not None:
            self.app.notify(
                f"nvidia-smi is already running in {running.container}; "
                "its result shows here when it ends.",
                severity="warning",
            )
            screen = self.app.screen
            if not (isinstance(screen, ExecScreen) and screen.exec_run is running):
                self.app.push_screen(ExecScreen(running))
            return
        run = ExecRun(cid, sanitise.safe_text(container.info.name, 60), self.settings.exec_timeout)
        self.exec_runs[cid] = run
        self.app.push_screen(ExecScreen(run))
        # A daemon thread, not a Textual thread worker: those run in asyncio's default executor,
        # which Textual's exit waits for, so q during a silent nvidia-smi would hang until the
        # collector's timeout. The dict of runs keeps it to one per container.
        thread = threading.Thread(
            target=self._exec_thread, args=(run,), name="gputui-exec", daemon=True
        )
        thread.start()

    def _exec_thread(self, run: ExecRun) -> None:
        try:
            result = self.collector.exec_in_container(
                run.container_id, ["nvidia-smi"], run.timeout_s
            )
        except Exception as error:  # the collector reports failures as data; this one did not
            text = f"exec failed: {type(error).__name__}: {redact(str(error), 300)}"
            result = ExecResult(("nvidia-smi",), None, error=text)
        self.app.post_message(ExecFinished(run, result))  # thread-safe, never blocks

    def exec_done(self, run: ExecRun, result: ExecResult) -> None:
        """On the UI thread: record the result, show it where the run is on screen."""
        from gputui.ui.screens.exec_modal import ExecScreen  # loaded: the run came from it

        run.result = result
        if self.exec_runs.get(run.container_id) is run:
            del self.exec_runs[run.container_id]
        shown = False
        for screen in self.app.screen_stack:
            if isinstance(screen, ExecScreen) and screen.exec_run is run:
                screen.show_result(result)
                shown = True
        if not shown:  # the modal was closed meanwhile: say how it ended
            code = "none" if result.exit_code is None else str(result.exit_code)
            text = f"nvidia-smi in {run.container} ended: exit {code}"
            self.app.notify(text, severity="information" if result.exit_code == 0 else "warning")

    def exec_interactive(self) -> None:
        """Run nvidia-smi on the real terminal with the TUI suspended."""
        if self.refused():
            return
        container, _ = self.main.selection()
        if container is None:
            self.app.notify("Select a running container first.", severity="warning")
            return
        if not self._offers(container, "interactive_exec"):
            return
        if not container.info.running:
            self.app.notify("Select a running container first.", severity="warning")
            return
        argv = self.collector.interactive_exec_argv(container.info.id, ["nvidia-smi"])
        if argv is None:
            name = sanitise.safe_text(container.info.name, 60)
            self.app.notify(f"No command runs nvidia-smi on this terminal in {name}; use x.")
            return
        # No collecting while the terminal belongs to someone else.
        with self.hold_collection():
            try:
                with self.app.suspend():
                    self.interactive_runner(argv)
            except SuspendNotSupported:
                self.app.notify(
                    "This terminal cannot be suspended here; x shows nvidia-smi's output."
                )

    # ------------------------------------------------------------------------- signals

    def _process_refusal(self, process: GpuProcess) -> str | None:
        """Why one process cannot be signalled (hidden, gone), None when it can."""
        if process.info.proc_hidden:
            return f"PID {process.pid} is hidden by /proc (hidepid): gputui cannot check it."
        if not process.info.exists:
            return f"PID {process.pid} is gone or hidden from gputui: nothing to signal."
        return None

    def _namespace_refusal(self) -> str | None:
        """Why no signal can go anywhere now (outside the host's PID namespace), or None."""
        snapshot = self.main.snapshot
        host_pids = snapshot.visibility.host_pid_namespace if snapshot is not None else None
        if host_pids is False:
            return (
                "Signals are off: gputui is not in the host's PID namespace, so the PIDs NVML "
                "reports are not PIDs it can signal (run it on the host or with --pid=host)."
            )
        if host_pids is not True:
            return "Signals are off: gputui cannot tell whether it shares the host's PID namespace."
        return None

    def signal_targets(
        self, chosen: GpuProcess | None = None
    ) -> tuple[SignalTargets | None, str | None]:
        """What a signal key acts on now, or why it cannot act.

        The drill-down's process when ``chosen`` is given; else the tagged processes (Space)
        when there are any; else the process under the cursor; else, on a container's row, the
        GPU processes of that container. Processes that cannot be signalled (gone, hidden) are
        left out and named; signals need gputui in the host's PID namespace: elsewhere the PIDs
        NVML reports name other processes (or none) in gputui's namespace.

        Args:
            chosen: The process to signal instead of the monitor's selection (the drill-down's).

        Returns:
            (the targets, None), or (None, one sentence saying why nothing can be signalled).
        """
        candidates: list[GpuProcess]
        if chosen is not None:
            candidates, what = [chosen], f"PID {chosen.pid}"
        elif tagged := self.main.tagged_processes():
            candidates = tagged
            what = "the tagged process" if len(tagged) == 1 else "the tagged processes"
        else:
            container, process = self.main.selection()
            if process is not None:
                candidates, what = [process], f"PID {process.pid}"
            elif container is not None:
                name = sanitise.safe_text(container.info.name, 60)
                candidates = self.main.container_processes(container)
                if not candidates:
                    return None, (
                        f"Container {name} has no GPU process to signal "
                        "(D stops the container, if its engine offers it)."
                    )
                what = f"the GPU processes of {name}"
            else:
                return None, (
                    "Select a process first: signals go to the process under the cursor, "
                    "the tagged processes (Space) or a container's GPU processes."
                )
        ok: list[GpuProcess] = []
        skipped: list[str] = []
        for candidate in candidates:
            why = self._process_refusal(candidate)
            if why is None:
                ok.append(candidate)
            else:
                skipped.append(why)
        if not ok:
            if len(candidates) == 1:
                return None, skipped[0]
            return None, f"None of {what} can be signalled: {skipped[0]}"
        why = self._namespace_refusal()
        if why is not None:
            return None, why
        return SignalTargets(tuple(ok), tuple(skipped), what), None

    def signal_refusal(self, chosen: GpuProcess | None = None) -> str | None:
        """Why a signal key cannot act on the selection now, None when it can.

        Args:
            chosen: The process to signal instead of the monitor's selection (the drill-down's).
        """
        return self.signal_targets(chosen)[1]

    def signal(self, signum: int, chosen: GpuProcess | None = None) -> None:
        """Confirm, then send ``signum`` to the targets of :meth:`signal_targets` (or say why not).

        Args:
            signum: The signal.
            chosen: The process to signal instead of the monitor's selection (the drill-down's).
        """
        if self.refused():
            return
        targets, why = self.signal_targets(chosen)
        if targets is None:
            self.app.notify(why or "Nothing to signal.", severity="warning")
            return
        self.confirm_signal(signum, targets)

    def signal_menu(self, chosen: GpuProcess | None = None) -> None:
        """F9: pick a signal from a list, then confirm as the signal keys do (or say why not).

        Args:
            chosen: The process to signal instead of the monitor's selection (the drill-down's).
        """
        if self.refused():
            return
        targets, why = self.signal_targets(chosen)
        if targets is None:
            self.app.notify(why or "Nothing to signal.", severity="warning")
            return
        from gputui.ui.screens.signal_menu import SignalMenuScreen

        def picked(signum: int | None) -> None:
            if signum is not None and not self.settings.read_only:
                self.confirm_signal(signum, targets)

        self.app.push_screen(SignalMenuScreen(targets.summary()), picked)

    def confirm_signal(self, signum: int, targets: SignalTargets) -> None:
        """Ask (naming every process), then send on a worker thread.

        Each process is signalled only if it is still the one that started at the start time
        seen here (:func:`gputui.collect.linux.signals.send_signal` checks it).
        """
        name = signal.Signals(signum).name
        from gputui.ui.screens.confirm import ConfirmScreen

        processes = targets.processes
        if len(processes) == 1 and not targets.skipped:
            process = processes[0]
            command = sanitise.safe_text(process.info.command or process.info.name, 80)
            body = Content.assemble(
                f"Send {name} to PID ",
                (str(process.pid), "bold"),
                "?\n",
                (command, "$text-muted"),
            )
            title = f"{name} process {process.pid}"
        else:
            body = targets.listing(name)
            title = f"{name} {len(processes)} process{'es' if len(processes) != 1 else ''}"
        pinned = tuple((p.pid, p.info.start_time) for p in processes)

        def answered(yes: bool | None) -> None:
            if not yes or self.settings.read_only:
                return
            snapshot = self.main.snapshot  # refreshed while the question was open
            if snapshot is None or snapshot.visibility.host_pid_namespace is not True:
                self.app.notify("Signals are off: the host's PID namespace is no longer visible.")
                return
            self.app.run_worker(
                partial(self._send_signals, pinned, signum),
                group="signal",
                thread=True,
                exit_on_error=False,
            )

        self.app.push_screen(ConfirmScreen(title, body), answered)

    def _send_signals(self, pinned: Sequence[tuple[int, float | None]], signum: int) -> None:
        """On a worker thread: send the signal to each process, report the outcome as a toast."""
        name = signal.Signals(signum).name
        sent: list[int] = []
        failed: list[str] = []
        for pid, start_time in pinned:
            try:
                error = self.collector.signal_process(pid, signum, start_time)
            except Exception as exc:  # the collector reports refusals as text; this one did not
                error = f"{type(exc).__name__}: {redact(str(exc), 200)}"
            if error is None:
                sent.append(pid)
            else:
                failed.append(f"PID {pid}: {sanitise.safe_text(error, 200)}")
        severity: SeverityLevel = "information"
        if len(pinned) == 1:
            pid = pinned[0][0]
            if sent:
                text = f"Sent {name} to PID {pid}."
            else:
                reason = failed[0].split(": ", 1)[1]
                text, severity = f"{name} to PID {pid} failed: {reason}", "error"
        elif not failed:
            text = f"Sent {name} to {len(sent)} processes: {_pids(sent)}."
        else:
            done = f"sent to {_pids(sent)}; " if sent else ""
            text, severity = f"{name}: {done}failed: {'; '.join(failed)}", "error"
        self.app.call_from_thread(self.app.notify, text, severity=severity)

    # ------------------------------------------------------------------------ containers

    def _offers(self, container: ContainerUsage, *capabilities: Capability) -> bool:
        """Whether the engine that lists ``container`` offers every one; if not, says so.

        A container seen only in cgroups (no connected engine lists it) is nobody's to act on;
        one whose engine lacks a capability is named with the engine.
        """
        owner = self.collector.container_owner(container.info.id)
        if owner is None:
            self.app.notify(unlisted(container), severity="warning")
            return False
        for capability in capabilities:
            if not owner.capabilities.offers(capability):
                text = refusal(owner.source, capability, owner.capabilities.why(capability))
                self.app.notify(f"{sanitise.safe_text(text, 200)}.", severity="warning")
                return False
        return True

    def _selected(self, *needs: Capability, running: bool = False) -> ContainerUsage | None:
        """The selected container if its engine offers ``needs``, else None after saying why."""
        container, _ = self.main.selection()
        if container is None:
            self.app.notify(
                "Select a container (or one of its processes) first.", severity="warning"
            )
            return None
        if not self._offers(container, *needs):
            return None
        if running and not container.info.running:
            name = sanitise.safe_text(container.info.name, 60)
            status = sanitise.safe_text(container.info.status, 20)
            self.app.notify(f"Container {name} is {status}: it needs to run.", severity="warning")
            return None
        return container

    def logs(self) -> None:
        """The selected container's logs on their own screen (read-only mode too: it reads)."""
        if self.settings.hide_sensitive:  # the action table hides it; this holds regardless
            return
        container = self._selected("logs")
        if container is None:
            return
        info = container.info
        name = sanitise.safe_text(info.name, 60)
        subtitle = f"{sanitise.safe_text(info.image, 60)} · {sanitise.safe_text(info.status, 20)}"
        from gputui.collect.docker.logs import DEFAULT_TAIL
        from gputui.ui.screens.logs import LogsScreen

        opener = partial(
            self.collector.open_container_logs, info.id, tail=DEFAULT_TAIL, follow=info.running
        )
        crumbs = self.main.crumbs(container, "Logs")
        self.app.push_screen(LogsScreen(name, subtitle, opener, follow=info.running, crumbs=crumbs))

    def inspect(self) -> None:
        """The selected container's inspect facts and processes on their own screen.

        Reads only (read-only mode too); the screen asks the collector on threads of its own.
        """
        container = self._selected("inspect")
        if container is None:
            return
        owner = self.collector.container_owner(container.info.id)
        from gputui.ui.screens.inspect import InspectScreen

        cid = container.info.id
        screen = InspectScreen(
            container,
            owner.source if owner is not None else "?",
            partial(self.collector.container_details, cid),
            partial(self.collector.container_processes, cid),
            crumbs=self.main.crumbs(container, "Inspect"),
        )
        self.app.push_screen(screen)

    def shell(self) -> None:
        """A shell in the selected container on the real terminal: bash, else sh.

        The shells are probed first with a short captured exec of the binary itself (on a
        thread), so a container without any gets a sentence instead of the CLI's error.
        """
        if self.refused():
            return
        container = self._selected("exec", "interactive_exec", running=True)
        if container is None:
            return
        cid, name = container.info.id, sanitise.safe_text(container.info.name, 60)
        if cid in self.busy:
            self.app.notify(f"{name}: an action is already under way.", severity="warning")
            return
        if self.collector.interactive_exec_argv(cid, ["sh"]) is None:
            self.app.notify(f"No command runs a shell on this terminal in {name}.")
            return
        self.busy.add(cid)
        self.app.notify(f"Looking for a shell in {name}…", timeout=2)
        threading.Thread(
            target=self._probe_shell, args=(cid, name), name="gputui-shell-probe", daemon=True
        ).start()

    def _probe_shell(self, cid: str, name: str) -> None:
        """On a thread: the first shell whose probe exits 0, handed to the UI thread."""
        found: str | None = None
        reason = ""
        for shell, probe in SHELLS:
            try:
                result = self.collector.exec_in_container(cid, probe, SHELL_PROBE_S)
            except Exception as error:  # the collector reports failures as data
                reason = f"{type(error).__name__}: {redact(str(error), 200)}"
                break
            if result.exit_code == 0:
                found = shell
                break
            reason = result.error or f"{shell} exited {result.exit_code}"
            if result.timed_out or "not running" in reason or "no such container" in reason:
                break
        with contextlib.suppress(RuntimeError):  # the app closed meanwhile
            self.app.call_from_thread(self._shell_found, cid, name, found, reason)

    def _shell_found(self, cid: str, name: str, shell: str | None, reason: str) -> None:
        """On the UI thread: suspend and run the shell, or say why there is none."""
        self.busy.discard(cid)
        if shell is None:
            why = sanitise.safe_text(reason, 200)
            self.app.notify(f"No shell in {name} (tried bash, sh): {why}", severity="warning")
            return
        if self.settings.read_only:
            return
        argv = self.collector.interactive_exec_argv(cid, [shell])
        if argv is None:
            self.app.notify(f"No command runs a shell on this terminal in {name}.")
            return
        with self.hold_collection():
            try:
                with self.app.suspend():
                    code = self.shell_runner(argv)
            except SuspendNotSupported:
                command = sanitise.safe_text(" ".join(argv).replace(cid, cid[:12]), 200)
                self.app.notify(
                    f"This terminal cannot be suspended here: run {command} in another one.",
                    severity="warning",
                )
                return
        self.app.notify(f"{shell} in {name} ended (exit {code}).", timeout=3)

    def lifecycle(self, action: str) -> None:
        """Confirm, then stop, start, restart, pause or unpause the selected container.

        The engine is asked on a thread.

        Args:
            action: ``stop``, ``start``, ``restart``, ``pause`` or ``unpause``.
        """
        if self.refused():
            return
        verb, _, note = LIFECYCLE[action]
        container = self._selected("lifecycle", running=action in ("stop", "pause"))
        if container is None:
            return
        info = container.info
        name = sanitise.safe_text(info.name, 60)
        if action == "start" and info.running:
            self.app.notify(f"Container {name} is already running.", severity="warning")
            return
        if action == "unpause" and info.status != "paused":
            self.app.notify(f"Container {name} is not paused.", severity="warning")
            return
        if info.id in self.busy:
            self.app.notify(f"{name}: an action is already under way.", severity="warning")
            return
        from gputui.ui.screens.confirm import ConfirmScreen

        body = Content.assemble(
            f"{verb} container ",
            (name, "bold"),
            "?\n",
            ("image ", "$text-muted"),
            sanitise.safe_text(info.image, 80),
            ("   state ", "$text-muted"),
            sanitise.safe_text(info.status, 20),
            "\n",
            (note, "$text-muted"),
        )
        cid = info.id

        def answered(yes: bool | None) -> None:
            if not yes or self.settings.read_only or cid in self.busy:
                return
            self.busy.add(cid)
            self.main.ctree.mark_pending(container, PENDING_STATUS[action])
            threading.Thread(
                target=self._run_lifecycle,
                args=(cid, name, action),
                name="gputui-container-action",
                daemon=True,
            ).start()

        self.app.push_screen(ConfirmScreen(f"{verb} {name}", body), answered)

    def _run_lifecycle(self, cid: str, name: str, action: str) -> None:
        """On a thread (stop waits up to 10 s for the container): act, then say how it went."""
        try:
            error = self.collector.container_action(cid, action)
        except Exception as exc:  # the source reports refusals as text; this one did not
            error = f"{type(exc).__name__}: {redact(str(exc), 200)}"
        with contextlib.suppress(RuntimeError):  # the app closed meanwhile
            self.app.call_from_thread(self._lifecycle_done, cid, name, action, error)

    def _lifecycle_done(self, cid: str, name: str, action: str, error: str | None) -> None:
        verb, done, _ = LIFECYCLE[action]
        self.busy.discard(cid)
        if error is not None or action == "restart":
            # Failed: the status it had stands. Restarted: running again, as it reads; a stop or
            # start keeps its "…" until the engine's next list says exited or running.
            self.main.ctree.clear_pending(cid)
        if error is None:
            self.app.notify(f"Container {name} {done}.")
        else:
            text = f"{verb} {name} failed: {sanitise.safe_text(error, 200)}"
            self.app.notify(text, severity="error")


def unlisted(container: ContainerUsage) -> str:
    """Why nothing acts on a container no connected engine lists (one sentence)."""
    name = sanitise.safe_text(container.info.name, 60)
    if container.known_to_engine:  # listed by the snapshot shown, gone from the engine since
        return f"No connected engine lists {name} now: nothing here can act on it."
    runtime = sanitise.safe_text(container.cgroup_runtime, 30) if container.cgroup_runtime else None
    where = f"a {runtime} cgroup" if runtime else "a container cgroup"
    hint = connect_hint(container.cgroup_runtime)
    return (
        f"{name} is seen only in {where}: no connected engine lists it, "
        "so nothing here can act on it" + (f"; to connect one, {hint}." if hint else ".")
    )


def _run_interactive(argv: Sequence[str]) -> int:
    """nvidia-smi's modal module's runner, imported on first use (``X`` is rarely pressed)."""
    from gputui.ui.screens.exec_modal import run_interactive

    return run_interactive(argv)


def run_shell(argv: Sequence[str]) -> int:
    """Run a shell on the real terminal (the TUI is suspended) and return to gputui when it ends.

    Only when the docker CLI itself failed (the container went away, no permission) does it
    wait for Enter, so that its message can be read.

    Args:
        argv: The full command line (a list: no shell parses it).

    Returns:
        The exit status.
    """
    try:
        code = subprocess.run(list(argv), check=False).returncode
    except OSError as error:
        print(f"gputui: could not run {argv[0]}: {error}")
        code = 127
    if code in _CLI_FAILURES:
        with contextlib.suppress(EOFError):
            input(f"\n[gputui] exit status {code}. Press Enter to return to gputui… ")
    return code
