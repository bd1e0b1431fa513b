"""The actions that reach into the machine: nvidia-smi in a container, signals to a process.

A base class of the app (kept apart so ``app.py`` stays a thin loop-and-dispatch module). Every
action here is in ``WRITE_ACTIONS``: gone with ``--read-only`` and while replaying.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Sequence

from textual import work
from textual.app import App, SuspendNotSupported
from textual.content import Content

from gputui.derive import fmt
from gputui.model import ExecResult
from gputui.settings import Settings
from gputui.ui.actions import CollectorLike
from gputui.ui.crash import redact
from gputui.ui.messages import ExecFinished
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.exec_modal import ExecRun, ExecScreen
from gputui.ui.screens.main import MainScreen

#: Why a write action did nothing when reached anyway (keys and palette entries are hidden).
READ_ONLY_REFUSAL = "Read-only mode: nvidia-smi in containers and signals are off."


class MachineActions(App[None]):
    """exec / interactive exec / signals and the theme toggle, on the selected row."""

    # Set by the app's constructor.
    collector: CollectorLike
    settings: Settings
    main: MainScreen
    paused: bool
    interactive_runner: Callable[[Sequence[str]], int]
    _go: threading.Event
    _wake: threading.Event
    _exec_runs: dict[str, ExecRun]  # container id -> the nvidia-smi run still going there

    def action_toggle_theme(self) -> None:
        """Light / dark."""
        self.theme = "textual-light" if self.current_theme.dark else "textual-dark"

    def _refused(self) -> bool:
        """True (after saying so) in read-only mode: a write action invoked directly refuses."""
        if self.settings.read_only:
            self.notify(READ_ONLY_REFUSAL, severity="warning")
        return self.settings.read_only

    def action_exec_smi(self) -> None:
        """Run nvidia-smi in the selected container, captured, in a modal; one at a time each.

        A second ``x`` while the container's run goes on starts nothing: it says so and shows
        that run (every run holds a thread until the collector's timeout, so repeated presses
        must not pile them up).
        """
        if self._refused():
            return
        container, _ = self.main.selection()
        if container is None or not container.info.running:
            self.notify("Select a running container first.", severity="warning")
            return
        cid = container.info.id
        running = self._exec_runs.get(cid)
        if running is not None:
            self.notify(
                f"nvidia-smi is already running in {running.container}; "
                "its result shows here when it ends.",
                severity="warning",
            )
            if not (isinstance(self.screen, ExecScreen) and self.screen.exec_run is running):
                self.push_screen(ExecScreen(running))
            return
        run = ExecRun(cid, fmt.safe_text(container.info.name, 60), self.settings.exec_timeout)
        self._exec_runs[cid] = run
        self.push_screen(ExecScreen(run))
        self._start_exec(run)

    def _start_exec(self, run: ExecRun) -> None:
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
        self.post_message(ExecFinished(run, result))  # thread-safe, never blocks

    def on_exec_finished(self, message: ExecFinished) -> None:
        """A run ended: record and show its result."""
        if isinstance(message.run, ExecRun):
            self._exec_done(message.run, message.result)

    def _exec_done(self, run: ExecRun, result: ExecResult) -> None:
        """On the UI thread: record the result, show it where the run is on screen."""
        run.result = result
        if self._exec_runs.get(run.container_id) is run:
            del self._exec_runs[run.container_id]
        shown = False
        for screen in self.screen_stack:
            if isinstance(screen, ExecScreen) and screen.exec_run is run:
                screen.show_result(result)
                shown = True
        if not shown:  # the modal was closed meanwhile: say how it ended
            code = "none" if result.exit_code is None else str(result.exit_code)
            text = f"nvidia-smi in {run.container} ended: exit {code}"
            self.notify(text, severity="information" if result.exit_code == 0 else "warning")

    def action_exec_interactive(self) -> None:
        """Run nvidia-smi on the real terminal with the TUI suspended."""
        if self._refused():
            return
        container, _ = self.main.selection()
        if container is None or not container.info.running:
            self.notify("Select a running container first.", severity="warning")
            return
        argv = self.collector.interactive_exec_argv(container.info.id, ["nvidia-smi"])
        if argv is None:
            self.notify("Interactive exec needs the docker CLI (not in demo mode); use x.")
            return
        self._go.clear()  # no collecting while the terminal belongs to someone else
        try:
            with self.suspend():
                self.interactive_runner(argv)
        except SuspendNotSupported:
            self.notify("This terminal cannot be suspended here; x shows nvidia-smi's output.")
        finally:
            if not self.paused:
                self._go.set()
                self._wake.set()

    def key_upper_t(self) -> None:
        """``T`` reaches here only when its binding is gone (read-only): say why."""
        self._signal_key_refused()

    def key_upper_k(self) -> None:
        """``K`` reaches here only when its binding is gone (read-only): say why."""
        self._signal_key_refused()

    def _signal_key_refused(self) -> None:
        if self.settings.read_only and self.screen is self.main:
            self.notify(READ_ONLY_REFUSAL, severity="warning")

    def signal_refusal(self) -> str | None:
        """Why ``T`` / ``K`` cannot act on the selection now, None when they can.

        Signals need a live process under the cursor and gputui in the host's PID namespace:
        elsewhere the PIDs NVML reports name other processes (or none) in gputui's namespace.
        """
        container, process = self.main.selection()
        if process is None:
            if container is not None:
                return (
                    "A container is selected: T / K signal a process, not a container; "
                    "select one of its processes."
                )
            return "Select a process first: T / K signal the process under the cursor."
        if not process.info.exists:
            return f"PID {process.pid} is gone or hidden from gputui: nothing to signal."
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

    def action_signal(self, signum: int) -> None:
        """Confirm, then send SIGTERM / SIGKILL to the selected process (or say why not)."""
        if self._refused():
            return
        why = self.signal_refusal()
        if why is not None:
            self.notify(why, severity="warning")
            return
        _, process = self.main.selection()
        assert process is not None  # signal_refusal said there is one
        name = signal.Signals(signum).name
        command = fmt.safe_text(process.info.command or process.info.name, 80)
        body = Content.assemble(
            f"Send {name} to PID ",
            (str(process.pid), "bold"),
            "?\n",
            (command, "$text-muted"),
        )
        pid, start = process.pid, process.info.start_time

        def answered(yes: bool | None) -> None:
            if not yes:
                return
            snapshot = self.main.snapshot  # refreshed while the question was open
            if snapshot is None or snapshot.visibility.host_pid_namespace is not True:
                self.notify("Signals are off: the host's PID namespace is no longer visible.")
                return
            self._send_signal(pid, signum, start)

        self.push_screen(ConfirmScreen(f"{name} process {pid}", body), answered)

    @work(thread=True, group="signal", exit_on_error=False)
    def _send_signal(self, pid: int, signum: int, start_time: float | None) -> None:
        name = signal.Signals(signum).name
        try:
            error = self.collector.signal_process(pid, signum, start_time)
        except Exception as exc:  # the collector reports refusals as text; this one did not
            error = f"{type(exc).__name__}: {redact(str(exc), 200)}"
        if error is None:
            self.call_from_thread(self.notify, f"Sent {name} to PID {pid}.")
        else:
            text = f"{name} to PID {pid} failed: {fmt.safe_text(error, 200)}"
            self.call_from_thread(self.notify, text, severity="error")
