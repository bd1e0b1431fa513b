"""The actions that reach into the machine: nvidia-smi in a container, signals to a process.

A base class of the app (kept apart so ``app.py`` stays a thin loop-and-dispatch module). Every
action here is in ``WRITE_ACTIONS``: gone with ``--read-only`` and while replaying.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Sequence
from functools import partial

from textual import work
from textual.app import App, SuspendNotSupported
from textual.content import Content

from gputui.derive import fmt
from gputui.settings import Settings
from gputui.ui.actions import CollectorLike
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.exec_modal import ExecScreen
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

    def action_toggle_theme(self) -> None:
        """Light / dark."""
        self.theme = "textual-light" if self.current_theme.dark else "textual-dark"

    def _refused(self) -> bool:
        """True (after saying so) in read-only mode: a write action invoked directly refuses."""
        if self.settings.read_only:
            self.notify(READ_ONLY_REFUSAL, severity="warning")
        return self.settings.read_only

    def action_exec_smi(self) -> None:
        """Run nvidia-smi in the selected container, captured, in a modal."""
        if self._refused():
            return
        container, _ = self.main.selection()
        if container is None or not container.info.running:
            self.notify("Select a running container first.", severity="warning")
            return
        cid, timeout = container.info.id, self.settings.exec_timeout
        runner = partial(self.collector.exec_in_container, cid, ["nvidia-smi"], timeout)
        self.push_screen(ExecScreen(fmt.safe_text(container.info.name, 60), runner))

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

    def action_signal(self, signum: int) -> None:
        """Confirm, then send SIGTERM / SIGKILL to the selected process."""
        if self._refused():
            return
        _, process = self.main.selection()
        if process is None or not process.info.exists:
            self.notify("Select a running process first.", severity="warning")
            return
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
            if yes:
                self._send_signal(pid, signum, start)

        self.push_screen(ConfirmScreen(f"{name} process {pid}", body), answered)

    @work(thread=True, group="signal")
    def _send_signal(self, pid: int, signum: int, start_time: float | None) -> None:
        error = self.collector.signal_process(pid, signum, start_time)
        name = signal.Signals(signum).name
        if error is None:
            self.call_from_thread(self.notify, f"Sent {name} to PID {pid}.")
        else:
            text = f"{name} to PID {pid} failed: {fmt.safe_text(error, 200)}"
            self.call_from_thread(self.notify, text, severity="error")
