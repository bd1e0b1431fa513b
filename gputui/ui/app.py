"""The Textual app: key bindings, the collector loop, and the actions. Widgets live elsewhere."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any

from textual import work
from textual.app import App, SuspendNotSupported, SystemCommand
from textual.binding import Binding
from textual.content import Content
from textual.screen import Screen
from textual.worker import get_current_worker

from gputui.derive import fmt
from gputui.derive.history import WINDOWS, History, next_window, window_label
from gputui.settings import Settings
from gputui.ui.actions import PALETTE, WRITE_ACTIONS, CollectorLike
from gputui.ui.messages import SelectionChanged, SnapshotReady
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.exec_modal import ExecScreen, run_interactive
from gputui.ui.screens.help import HelpScreen, binding_rows
from gputui.ui.screens.main import MainScreen
from gputui.ui.state import UiState, interval_label, step_interval


class GpuTuiApp(App[None]):
    """Who is using the GPUs, in which container, and is the GPU runtime healthy."""

    CSS_PATH = "gputui.tcss"
    TITLE = "gputui"
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("1", "show_tab('containers')", "Containers tab", show=False),
        Binding("2", "show_tab('processes')", "Processes tab", show=False),
        Binding("3", "show_tab('health')", "Health tab", show=False),
        Binding("4", "show_tab('history')", "History tab", show=False),
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("s", "sort", "Sort"),
        Binding("x", "exec_smi", "nvidia-smi", tooltip="nvidia-smi inside the container"),
        Binding(
            "X", "exec_interactive", "smi -it", show=False, tooltip="nvidia-smi on the terminal"
        ),
        Binding("T", "signal(15)", "SIGTERM", show=False, tooltip="SIGTERM the process (confirms)"),
        Binding("K", "signal(9)", "SIGKILL", show=False, tooltip="SIGKILL the process (confirms)"),
        Binding("r", "rerun_health", "Re-check", show=False, tooltip="Re-run health checks now"),
        Binding("w", "window", "Window", show=False, tooltip="History window 1 / 5 / 30 min"),
        Binding("p", "toggle_pause", "Pause"),
        Binding("plus,equals_sign", "interval(1)", "Slower", show=False, key_display="+"),
        Binding("minus", "interval(-1)", "Faster", show=False, key_display="-"),
        Binding("d", "toggle_theme", "Light/dark", show=False, tooltip="Toggle light / dark"),
    ]

    def __init__(self, collector: CollectorLike, settings: Settings) -> None:
        super().__init__()
        self.collector = collector
        self.settings = settings
        self.interval = max(settings.interval, 0.1)
        self.window = WINDOWS[1] if settings.history_seconds >= WINDOWS[1] else WINDOWS[0]
        self.history = History(settings.history_seconds, self.interval)
        self.paused = False
        self.interactive_runner: Callable[[Sequence[str]], int] = run_interactive
        self._stop = threading.Event()  # set once: the loop must exit
        self._wake = threading.Event()  # cuts the interval wait short (interval change, resume)
        self._go = threading.Event()  # clear while paused or suspended
        self._go.set()
        self._binding_state: tuple[object, ...] = ()
        self.main = MainScreen(self.history)

    # ------------------------------------------------------------------- collector loop

    def get_default_screen(self) -> Screen[Any]:
        """The monitor."""
        return self.main

    def on_mount(self) -> None:
        """Start collecting."""
        self.main.apply(None, self.ui_state, self.window)
        # After the first refresh, so the screen's widgets exist when the first snapshot lands.
        self.call_after_refresh(self.collect_loop)

    def on_unmount(self) -> None:
        """Let the collector thread finish promptly."""
        self._stop.set()
        self._go.set()
        self._wake.set()

    @work(thread=True, group="collector", description="Collecting GPU, Docker and process data")
    def collect_loop(self) -> None:
        """The only caller of ``collect()``: one refresh at a time, never on the UI thread."""
        worker = get_current_worker()
        while not (self._stop.is_set() or worker.is_cancelled):
            if not self._go.wait(0.5):
                continue
            snapshot = self.collector.collect()
            if self._stop.is_set():
                break
            self.post_message(SnapshotReady(snapshot))
            self._wake.wait(self.interval)
            self._wake.clear()

    def on_snapshot_ready(self, message: SnapshotReady) -> None:
        """Apply a snapshot (unless paused) in one batch, so the screen repaints once."""
        if self.paused:
            return
        self.history.record(message.snapshot)
        with self.batch_update():
            self.main.apply(message.snapshot, self.ui_state, self.window)
        self._refresh_binding_state()

    @property
    def ui_state(self) -> UiState:
        """What the header shows besides the snapshot."""
        return UiState(self.interval, self.paused, self.settings.read_only, self.collector.mode)

    def _rerender(self) -> None:
        with self.batch_update():
            self.main.apply(None, self.ui_state, self.window)

    # ------------------------------------------------------------------ key availability

    def on_selection_changed(self, message: SelectionChanged) -> None:
        """Cursor or tab moved: re-check which keys apply."""
        self._refresh_binding_state()

    def _refresh_binding_state(self) -> None:
        # refresh_bindings recomposes the footer; only do it when availability really changed.
        state = tuple(self.check_action(a, ()) for a in ("exec_smi", "signal", "sort"))
        state += (self.paused,)
        if state != self._binding_state:
            self._binding_state = state
            self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """False hides an action (read-only); None shows its key dimmed (cannot apply now)."""
        if action in WRITE_ACTIONS and self.settings.read_only:
            return False
        if not self.is_running or self.screen is not self.main:
            return True
        container, process = self.main.selection()
        if action in ("exec_smi", "exec_interactive"):
            return True if container is not None and container.info.running else None
        if action == "signal":
            return True if process is not None and process.info.exists else None
        if action == "sort":
            return True if self.main.active_tab == "processes" else None
        return True

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """Textual's commands plus every gputui action that is not disabled (read-only)."""
        yield from super().get_system_commands(screen)
        for title, help_text, action in PALETTE:
            name = action.split("(")[0]
            if self.check_action(name, ()) is False:
                continue
            yield SystemCommand(title, help_text, partial(self.run_action, action))

    # -------------------------------------------------------------------------- actions

    def action_help(self) -> None:
        """Show every binding."""
        enabled = {
            b.action
            for b in self.BINDINGS
            if isinstance(b, Binding) and self.check_action(b.action.split("(")[0], ()) is not False
        }
        enabled |= {b.action for b in MainScreen.BINDINGS if isinstance(b, Binding)}
        self.push_screen(HelpScreen(binding_rows([*self.BINDINGS, *MainScreen.BINDINGS], enabled)))

    def action_show_tab(self, tab: str) -> None:
        """Switch tabs (1-4)."""
        self.main.show_tab(tab)

    def action_filter(self) -> None:
        """Open the process filter."""
        self.main.open_filter()

    def action_sort(self) -> None:
        """Cycle the process table's sort column."""
        self.main.cycle_sort()

    def action_window(self) -> None:
        """Cycle the sparkline window (1 / 5 / 30 min)."""
        self.window = next_window(self.window)
        self.main.sync_tab("history", force=True)
        self._rerender()
        self.notify(f"History window: {window_label(self.window)}", timeout=2)

    def action_rerun_health(self) -> None:
        """Ask the collector to re-run the health checks on its next refresh (now)."""
        self.collector.request_health()
        self._wake.set()
        self.notify("Re-running health checks…", timeout=2)

    def action_toggle_pause(self) -> None:
        """Stop or restart collecting and applying snapshots."""
        self.paused = not self.paused
        if self.paused:
            self._go.clear()
        else:
            self._go.set()
            self._wake.set()
        self._rerender()
        self._refresh_binding_state()

    def action_interval(self, direction: int) -> None:
        """Step the refresh interval (+ slower, - faster); applies from the next wait."""
        self.interval = step_interval(self.interval, direction)
        self.history.set_interval(self.interval)
        self._wake.set()
        self._rerender()
        self.notify(f"Refreshing every {interval_label(self.interval)}", timeout=2)

    def action_toggle_theme(self) -> None:
        """Light / dark."""
        self.theme = "textual-light" if self.current_theme.dark else "textual-dark"

    def action_exec_smi(self) -> None:
        """Run nvidia-smi in the selected container, captured, in a modal."""
        container, _ = self.main.selection()
        if self.settings.read_only or container is None or not container.info.running:
            self.notify("Select a running container first.", severity="warning")
            return
        cid, timeout = container.info.id, self.settings.exec_timeout
        runner = partial(self.collector.exec_in_container, cid, ["nvidia-smi"], timeout)
        self.push_screen(ExecScreen(fmt.safe_text(container.info.name, 60), runner))

    def action_exec_interactive(self) -> None:
        """Run nvidia-smi on the real terminal with the TUI suspended."""
        container, _ = self.main.selection()
        if self.settings.read_only or container is None or not container.info.running:
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
        _, process = self.main.selection()
        if self.settings.read_only or process is None or not process.info.exists:
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
