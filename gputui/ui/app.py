"""The Textual app: key bindings, the collector loop, and the actions. Widgets live elsewhere."""

from __future__ import annotations

import inspect
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any, TypeGuard

from textual import events, work
from textual.actions import parse as parse_action
from textual.app import ScreenStackError, SystemCommand
from textual.command import CommandPalette
from textual.css.query import NoMatches
from textual.filter import LineFilter
from textual.notifications import SeverityLevel
from textual.screen import ModalScreen, Screen
from textual.widgets import Input
from textual.worker import get_current_worker

from gputui.boundary import sanitise, startup_trace
from gputui.boundary.userfiles import UserFileError
from gputui.collect.loop import CollectLoop
from gputui.collect.sources import CollectorProtocol, refusal
from gputui.config.file import Config, ui_state_path
from gputui.config.ui_state import SORTS, THEMES, UiPrefs, load_ui_state, save_ui_state
from gputui.config.values import ConfigError
from gputui.derive.alerts import Alert
from gputui.derive.analysis import Analysis, Analyzer
from gputui.derive.history import WINDOWS, ShownHistory, next_window, window_label
from gputui.derive.process_history import ProcessKey, ShownProcessHistory
from gputui.ledger.writer import announcing, writer_for
from gputui.model.processes import GpuProcess
from gputui.model.settings import Settings
from gputui.model.snapshot import Snapshot
from gputui.ui import action_table
from gputui.ui.ascii_filter import AsciiFilter
from gputui.ui.crash import CrashSafeApp
from gputui.ui.messages import ExecFinished, SelectionChanged, SnapshotReady
from gputui.ui.screens.main import MainScreen
from gputui.ui.state import UiState, interval_label, scope_label, step_interval
from gputui.ui.tab_table import TABS, Selection, TabTable
from gputui.ui.textual_compat import bind_on_instance

if TYPE_CHECKING:
    from gputui.collect.docker.logs import LogReader
    from gputui.ledger.demo import DemoLedger
    from gputui.model.snapshot import ContainerUsage
    from gputui.notify.policy import PolicyRunner
    from gputui.notify.worker import Notifier
    from gputui.ui.machine_actions import MachineActions
    from gputui.ui.screens.evidence import EvidenceScreen
    from gputui.ui.screens.faults import FaultsScreen
    from gputui.ui.screens.process_detail import ProcessDetailScreen

# The screens a key opens (evidence, drill-down, help, dialogs) are imported when first opened,
# so a session that never opens them does not load them. Until one is loaded no screen of its
# kind can exist, which is how the checks below answer without importing it.
_EVIDENCE = "gputui.ui.screens.evidence"
_FAULTS = "gputui.ui.screens.faults"
_DETAIL = "gputui.ui.screens.process_detail"


def _is_evidence(screen: object) -> TypeGuard[EvidenceScreen]:
    """Whether ``screen`` is the evidence view (never imports it while none was opened)."""
    if _EVIDENCE not in sys.modules:
        return False
    from gputui.ui.screens.evidence import EvidenceScreen

    return isinstance(screen, EvidenceScreen)


def _is_faults(screen: object) -> TypeGuard[FaultsScreen]:
    """Whether ``screen`` is the Faults view (never imports it while none was opened)."""
    if _FAULTS not in sys.modules:
        return False
    from gputui.ui.screens.faults import FaultsScreen

    return isinstance(screen, FaultsScreen)


def _is_detail(screen: object) -> TypeGuard[ProcessDetailScreen]:
    """Whether ``screen`` is a process drill-down (never imports it while none was opened)."""
    if _DETAIL not in sys.modules:
        return False
    from gputui.ui.screens.process_detail import ProcessDetailScreen

    return isinstance(screen, ProcessDetailScreen)


#: Actions that still act behind the "terminal too small" message.
_ALWAYS = frozenset({"quit", "interrupt"})


class GpuTuiApp(CrashSafeApp):
    """Who is using the GPUs, in which container, and is the GPU runtime healthy.

    Args:
        collector: Where snapshots come from (the machine, a scenario, the demo, a recording).
        settings: What the command line asked for.
        tabs: The tab table (tests add one of their own).
        config: The config file as the command line loaded it (alert rules, [ui], [keys],
            [[notify]], the idle policy, the ledger); None: the built-in defaults.
    """

    CSS_PATH = "gputui.tcss"
    TITLE = "gputui"
    BINDINGS = action_table.bindings(action_table.Scope.APP)

    def __init__(
        self,
        collector: CollectorProtocol,
        settings: Settings,
        tabs: TabTable = TABS,
        *,
        config: Config | None = None,
    ) -> None:
        super().__init__()
        #: Every action of this app: the action table with the keys of ``tabs``.
        self.actions = action_table.actions(tabs)
        bind_on_instance(self, action_table.bindings(action_table.Scope.TAB, self.actions))
        self.collector = collector
        self.settings = settings
        # --ascii: one filter over every widget's lines (see get_line_filters).
        self._ascii = AsciiFilter() if settings.ascii else None
        # --only/--user/--pid: said in the header, so a narrowed view is never taken for all.
        self._scope = scope_label(settings.scope)
        self.interval = max(settings.interval, 0.1)
        self.window = WINDOWS[1] if settings.history_seconds >= WINDOWS[1] else WINDOWS[0]
        # Recorded on the collector's thread by the analysis; what is shown is the view of the
        # last snapshot applied (so a pause freezes it).
        self.history = ShownHistory()
        #: GPU memory and SM % per process, for the process drill-down.
        self.process_history = ShownProcessHistory()
        self.paused = False
        self._binding_state: tuple[object, ...] = ()
        # The config file as the command line read it, once, before anything started (an
        # invalid file stopped it there); the app never reads the file again.
        config = config if config is not None else Config()
        self.keep_secret(config.fleet.token, config.fleet.password)
        for target in config.notify:
            self.keep_secret(*target.secrets())
        # [[notify]]: the monitor delivers alerts and findings too (not from a recording or
        # the demo: those are no events of this machine). Problems stay in notifier.recent.
        self.notifier: Notifier | None = None
        self.policy: PolicyRunner | None = None
        self._reclaim_shown: str | None = None
        live = collector.mode not in ("replay", "demo") and collector.player is None
        # Imported only where configured: the webhook sender and the policy's audit log are
        # code (and http, ssl, email) most monitors never run.
        if live and (config.notify or config.idle_policy.enabled):
            from gputui.notify.policy import start_policy
            from gputui.notify.worker import start_notifier

            host = socket.gethostname()
            self.notifier = start_notifier(config.notify, host)
            self.policy = start_policy(
                config.idle_policy,
                host,
                notifier=self.notifier,
                collector=collector,
                read_only=settings.read_only,
            )
        rules = config.alert_rules
        #: ``[ledger]`` of the config: the Ledger tab reads its store and prices.
        self.ledger_prefs = config.ledger
        #: The preferences in force ([ui] of the config file, overridden by the state file).
        self.prefs: UiPrefs = config.ui
        self._prefs_path = ui_state_path()
        # [keys] of the config file: binding names to the keys that run them.
        self._unknown_keys = self._apply_user_keys(config.keys)
        self._save_failed = False
        self.main = MainScreen(self.history, len(rules), tabs)
        self.main.layout_preference = self.prefs.layout or "auto"
        self.main.pane_logs = self._pane_logs
        self.main.gpus_collapsed = "gpus" in (self.prefs.collapsed or ())
        if self.prefs.sort is not None and self.prefs.sort in SORTS:
            self.main.table.sort_index = SORTS.index(self.prefs.sort)
        # Used only by the collector thread once running (and by callers priming it before).
        self.analyzer = Analyzer(
            rules,
            [s.observe for s in (self.notifier, self.policy) if s is not None],
            history_seconds=settings.history_seconds,
            interval=self.interval,
            scope=settings.scope,
        )
        # The ledger: written from the loop's thread when this monitor holds the store's lock
        # (a replay is no new time); its status changes are notifications.
        self.ledger = (
            None
            if collector.player is not None
            else writer_for(
                "tui",
                mode=settings.mode,
                interval_s=self.interval,
                store=config.ledger.store,
                explicit=False,
                write=config.ledger.write,
                idle_power_w=config.ledger.idle_power_w,
            )
        )
        # The demo is not this host: its Ledger tab reads a simulated week of its own, made
        # when the tab is first shown, then written with the demo's snapshots.
        self.demo_ledger: DemoLedger | None = None
        observe = None if self.ledger is None else announcing(self.ledger, self._ledger_said)
        if collector.mode == "demo" and collector.player is None and self.ledger is None:
            from gputui.ledger.demo import DemoLedger

            self.demo_ledger = DemoLedger(self.interval, config.ledger.idle_power_w)
            observe = self.demo_ledger.observe
        # The same loop export and record run; the worker below runs it on its thread.
        self.loop = CollectLoop(
            collector,
            self.analyzer.analyse,
            self._post_snapshot,
            interval=self.interval,
            observe=observe,
        )
        # The loop's events, under the names the actions use: _go is clear while paused or
        # suspended, _wake cuts the interval wait short (interval change, resume, health).
        self._go: threading.Event = self.loop.go
        self._wake: threading.Event = self.loop.woken
        self.analysis: Analysis | None = None
        self._replay_at: tuple[int, int] | None = None
        self._painted = False  # set once the first (empty) screen has been drawn
        self._early: SnapshotReady | None = None
        self._machine: MachineActions | None = None
        # Keys of the write actions that still say why they do nothing under --read-only.
        self._explained_keys = frozenset(
            key.strip()
            for row in self.actions
            if row.write and row.explain_read_only
            for key in row.keys.split(",")
        )

    def get_line_filters(self) -> Sequence[LineFilter]:
        """Textual's filters, then the ASCII one under ``--ascii``."""
        filters = super().get_line_filters()
        return filters if self._ascii is None else [*filters, self._ascii]

    @property
    def machine(self) -> MachineActions:
        """exec, interactive exec and signals on the monitor's selection (built on first use)."""
        if self._machine is None:
            from gputui.ui.machine_actions import MachineActions

            self._machine = MachineActions(
                self, self.collector, self.settings, self.main, self.collection_held
            )
        return self._machine

    def _apply_user_keys(self, keys: Mapping[str, str]) -> list[str]:
        """The config file's ``[keys]``: remap by binding id; the names that match no action."""
        names = {row.name for row in self.actions}
        known = {name: keys for name, keys in keys.items() if name in names}
        if known:
            self.set_keymap(
                {f"{action_table.BINDING_ID_PREFIX}{name}": k for name, k in known.items()}
            )
        return sorted(set(keys) - names)

    def set_keymap(self, keymap: Mapping[str, str]) -> None:
        """Textual's keymap, with ``p``'s two rows (Pause, Resume) moved together."""
        keys = dict(keymap)
        pause = action_table.BINDING_ID_PREFIX + "pause"
        resume = action_table.BINDING_ID_PREFIX + "resume"
        if pause in keys and resume not in keys:
            keys[resume] = keys[pause]
        super().set_keymap(keys)

    # ----------------------------------------------------------------------- notifications

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """A toast whose texts are always plain and sanitised.

        Messages carry container names, alert texts and engine errors: never markup (a ``[`` in
        a name would be parsed, an unbalanced ``[/]`` would crash the app), never control, bidi
        or zero-width characters.
        """
        super().notify(
            sanitise.safe_text(message, 500, na=""),
            title=sanitise.safe_text(title, 80, na=""),
            severity=severity,
            timeout=timeout,
            markup=False,
        )

    # ------------------------------------------------------------------- collector loop

    def get_default_screen(self) -> Screen[Any]:
        """The monitor."""
        return self.main

    def on_mount(self) -> None:
        """Apply the theme preference, then start collecting."""
        if self.prefs.theme is not None and self.prefs.theme in self.available_themes:
            self.theme = self.prefs.theme
        # Subscribed after the preference is applied: only the user's changes are remembered.
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        self.main.apply(None, self.ui_state, self.window, None)
        startup_trace.mark("app-mounted")
        if self._unknown_keys:
            self.notify(
                f"[keys] in the config file: no action is called {', '.join(self._unknown_keys)};"
                " the help (?) lists the binding ids",
                severity="warning",
            )
        # Started now, not after the first refresh, so the prefetched first snapshot is
        # analysed on the worker while the empty screen is laid out and painted; a snapshot
        # that arrives before that paint waits for it (widgets that have never been laid out
        # have no regions to repaint).
        self.call_after_refresh(self._first_paint_done)
        self.collect_loop()

    def _first_paint_done(self) -> None:
        startup_trace.mark("empty-screen-painted")
        self._painted = True
        if self._early is not None:
            early, self._early = self._early, None
            self.on_snapshot_ready(early)

    def on_unmount(self) -> None:
        """Let the collector thread finish promptly; stop delivering."""
        self.loop.stop()
        if self.notifier is not None:
            self.notifier.close(0.5)

    @work(thread=True, group="collector", description="Collecting GPU, Docker and process data")
    def collect_loop(self) -> None:
        """The only caller of ``collect()``: one refresh at a time, never on the UI thread.

        The engines run here too (the loop's ``analyse``), so the UI thread only draws. An
        exception ends the worker, and so the app, with the crash report (no ``on_error``).
        """
        worker = get_current_worker()
        try:
            self.loop.run(lambda: worker.is_cancelled)
        finally:
            if self.ledger is not None:
                self.ledger.close()
            if self.demo_ledger is not None:
                self.demo_ledger.close()

    def demo_time(self) -> float:
        """The time of the snapshot shown (the demo's Ledger tab's windows end there)."""
        analysis = self.analysis
        if analysis is not None:
            return analysis.snapshot.taken_at
        return self.demo_ledger.now() if self.demo_ledger is not None else time.time()

    def _ledger_said(self, status: str) -> None:
        """A change of the ledger writer's status (on the worker thread).

        A notification unless it writes, so a monitor that only reads (another gputui writes)
        or cannot write says so. ``notify`` only posts a message: safe from this thread.
        """
        if not self.ledger or not self.ledger.writing or self.ledger.error:
            self.notify(
                sanitise.safe_text(status, 300), title="Ledger", severity="warning", markup=False
            )

    def _post_snapshot(self, snapshot: Snapshot, analysis: Analysis) -> None:
        """The loop's delivery (on the worker): hand the snapshot to the UI thread.

        What is shown is the analysis's snapshot: under ``--only``/``--user``/``--pid`` the
        part of ``snapshot`` the views show.
        """
        player = self.collector.player
        replay = None if player is None else (player.position, len(player))
        self.post_message(SnapshotReady(analysis.snapshot, analysis, replay))

    def on_snapshot_ready(self, message: SnapshotReady) -> None:
        """Apply a snapshot (unless paused) in one batch, so the screen repaints once."""
        startup_trace.mark("snapshot-received")
        if not self._painted:
            self._early = message  # applied right after the first paint (the newest wins)
            return
        if self.paused:
            return
        snapshot, analysis = message.snapshot, message.analysis
        # Recorded by the analysis (a replay jumping back restarts it there); only shown here.
        if analysis.history is not None:
            self.history.show(analysis.history)
        if analysis.process_history is not None:
            self.process_history.show(analysis.process_history)
        self.analyzer.follow(self._viewed_processes())
        self.analysis = analysis
        self._replay_at = message.replay
        try:
            with self.batch_update():
                self.main.apply(snapshot, self.ui_state, self.window, analysis)
                if _is_evidence(self.screen):
                    self.screen.show(analysis, self.window)
                elif _is_faults(self.screen):
                    self.screen.show(snapshot)
                for screen in self._detail_screens():
                    screen.show(snapshot, self.window)
        except (NoMatches, ScreenStackError):
            # The worker's last snapshot can land while the app is closing and the screen's
            # widgets (or the screens themselves) are already gone: nothing is left to show it on.
            return
        self._announce(analysis.started)
        self._announce_reclaim()
        self._refresh_binding_state()
        if startup_trace.enabled():
            startup_trace.mark("snapshot-applied")
            self.call_after_refresh(startup_trace.mark, "snapshot-painted")

    def _announce_reclaim(self) -> None:
        """The idle policy's reclaim line, shown for a minute whenever it changes."""
        line = self.policy.banner() if self.policy is not None else None
        if line is not None and line != self._reclaim_shown:
            self.notify(line, title="Idle GPU policy", severity="warning", timeout=60)
        self._reclaim_shown = line

    def _announce(self, started: Sequence[Alert]) -> None:
        """A toast per alert that started firing (and the bell, when asked for)."""
        for alert in started:
            title = f"Alert {sanitise.safe_text(alert.rule, 40)} firing"
            text = sanitise.safe_text(alert.message, 200)
            if alert.severity == "critical":
                self.notify(text, title=title, severity="error", timeout=10)
            else:
                self.notify(text, title=title, severity="warning", timeout=10)
        if started and self.settings.bell:
            self.bell()

    @property
    def ui_state(self) -> UiState:
        """What the header shows besides the snapshot."""
        player = self.collector.player
        paused = self.paused or (player is not None and player.paused)
        mode = self.collector.mode
        return UiState(
            self.interval, paused, self.settings.read_only, mode, self._replay_at, self._scope
        )

    def _rerender(self) -> None:
        with self.batch_update():
            self.main.apply(None, self.ui_state, self.window, self.analysis)
            if _is_evidence(self.screen) and self.analysis is not None:
                self.screen.show(self.analysis, self.window)
            for screen in self._detail_screens():
                screen.set_window(self.window)

    # ------------------------------------------------------------------ key availability

    def on_selection_changed(self, message: SelectionChanged) -> None:
        """Cursor or tab moved: re-check which keys apply."""
        self._refresh_binding_state()

    def _refresh_binding_state(self) -> None:
        if not self.screen_stack:
            # A selection message still queued while the app closes (its screens already
            # popped): there are no keys left to offer, and asking for the screen would raise.
            return
        # refresh_bindings recomposes the footer; only do it when availability really changed.
        state = tuple(self.check_action(a, ()) for a in action_table.SELECTION_DEPENDENT)
        state += (self.ui_state.paused,)
        if state != self._binding_state:
            self._binding_state = state
            self.refresh_bindings()

    def _offered(self, action: str, screen: Screen[Any]) -> bool:
        """The action table's policy: False hides the action from keys, footer, help, palette."""
        policy = action_table.POLICIES.get(action)
        if policy is None:
            return True  # Textual's own actions
        if policy.write and self.settings.read_only:
            return False
        if policy.sensitive and self.settings.hide_sensitive:
            return False
        if policy.replay and self.collector.player is None:
            return False
        # Main-screen actions act on the monitor's tabs: gone while another screen (the evidence
        # view, a dialog, the help) covers them. The palette is the exception: what it offers
        # runs on the screen it was opened from.
        covered = screen is not self.main and not isinstance(screen, CommandPalette)
        if policy.detail and _is_detail(screen):
            covered = False  # the signals act on the drill-down's process there
        return not (policy.main_only and covered)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """False hides an action (read-only); None shows its key dimmed (cannot apply now)."""
        if not self._offered(action, self.screen):
            return False
        if self.screen is self.main and self.main.is_too_small and action not in _ALWAYS:
            return False  # behind the "terminal too small" message only quitting acts
        modal = isinstance(self.screen, ModalScreen) and not isinstance(self.screen, CommandPalette)
        if modal and action in action_table.POLICIES and action != "interrupt":
            # A dialog's keys are its own (Textual stops at it): none of ours works there, so
            # none is listed under it; only Ctrl+C, a priority key, still quits.
            return False
        if action in ("toggle_pause", "resume"):
            # p is one key with two rows: the footer reads Pause, or Resume while paused.
            return self.ui_state.paused is (action == "resume")
        if action == "process_detail":
            return self._enter_opens_detail()
        if action == "tag":
            return self._space_tags()
        if not self.is_running or self.screen is not self.main:
            return True
        return True if self.refusal(action) is None else None  # None: dimmed until it fits

    def refusal(self, action: str) -> str | None:
        """Why an action cannot act on the monitor's selection now; None when it can.

        Args:
            action: The action's name (parameters aside).

        Returns:
            One sentence for a notification, naming what to do instead.
        """
        policy = action_table.POLICIES.get(action)
        if policy is None or self.screen is not self.main:
            return None
        container, process = self.main.selection()
        tab = self.main.active_row
        tabs = self.main.tabs
        if action_table.needs_met(policy.needs, container, process, tab):
            return None
        title = next(r.title for r in self.actions if r.action_name == action)
        if policy.needs is action_table.Needs.SORT:
            where = tabs.where(lambda row: row.sort is not None)
            return f"{title}: the {tab.title} tab has nothing to sort; it sorts on {where}."
        if policy.needs is action_table.Needs.FILTER:
            where = tabs.where(lambda row: row.filter is not None)
            return f"{title}: the {tab.title} tab has no filter; it filters on {where}."
        if policy.needs is action_table.Needs.TREE:
            where = tabs.where(lambda row: row.selection is Selection.TREE)
            return f"{title}: it acts on {where}; the {tab.title} tab has no container tree."
        if policy.needs is action_table.Needs.ROWS:
            return f"{title}: it acts on {tabs.where_to_go()}."
        if not tab.has_container_selection:
            return f"{title}: it acts on {tabs.where_to_go()}."
        if policy.needs is action_table.Needs.PROCESS:
            return f"{title}: select a process (a row of the Processes tab, or one in the tree)."
        if container is None and process is not None:
            if not process.info.exists:
                return (
                    f"{title}: PID {process.pid} is not visible to gputui (gone, or in another "
                    "PID namespace), so its container is unknown."
                )
            return f"{title}: PID {process.pid} runs outside any container."
        if container is None:
            return f"{title}: select a container (or one of its processes) first."
        if not container.known_to_engine:  # seen only in cgroups: nobody's to act on
            from gputui.ui.machine_actions import unlisted

            return f"{title}: {unlisted(container)}"
        name = sanitise.safe_text(container.info.name, 60)
        status = sanitise.safe_text(container.info.status, 20)
        return f"{title}: container {name} is {status}; it needs a running container."

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """Textual's commands plus every gputui action the table offers on ``screen``."""
        for command in super().get_system_commands(screen):
            if command.title == "Keys":
                continue  # Textual's key panel: the help ("?", also "Keys" here) lists more
            yield command
        for row in self.actions:
            if row.palette and self._offered(row.action_name, screen):
                yield SystemCommand(row.title, row.help, partial(self._run_from_palette, row))

    async def _run_from_palette(self, row: action_table.ActionRow) -> None:
        """Run a palette entry, or say why it cannot act (a key would show dimmed)."""
        why = self.refusal(row.action_name)
        if why is not None:
            self.notify(why, severity="warning")
            return
        name, params = parse_action(row.action)[1:]
        result = getattr(self, f"action_{name}")(*params)  # every palette row acts on the app
        if inspect.isawaitable(result):
            await result

    async def on_event(self, event: events.Event) -> None:
        """A key typed before a filter box took the focus goes into that box, not to a command.

        Keys typed fast are routed as they arrive, to the widget focused then; ``/`` opens a
        filter only when its binding runs, after the keys behind it were routed (to the tree or
        the screen), and they came back here unconsumed: ``1/er`` opened the evidence view and
        re-ran the health checks. A printable key the focused input never saw goes into it.
        """
        if (
            isinstance(event, events.Key)
            and event.is_forwarded
            and event.is_printable
            and event.character is not None
            and isinstance(self.focused, Input)
        ):
            event.stop()
            # Queued behind the input's own Focus event (which selects what it holds).
            self.focused.post_message(events.Key(event.key, event.character))
            return
        await super().on_event(event)

    def on_key(self, event: events.Key) -> None:
        """Keys that cannot act now say why: T / K under --read-only, dimmed keys always."""
        if self.screen is self.main and self.main.is_too_small:
            return  # nothing acts (nor explains) behind the "terminal too small" message
        if event.key in self._explained_keys:
            self.machine.explain_refused_key()
            return
        if self.screen is not self.main:
            return
        active = self.screen.active_bindings.get(event.key)
        if active is not None and not active.enabled:
            if active.binding.action in ("process_detail", "tag"):
                return  # Enter / Space off a process keep their widget's meaning: no refusal
            why = self.refusal(parse_action(active.binding.action)[1])
            if why is not None:
                self.notify(why, severity="warning", timeout=4)

    # -------------------------------------------------------------------------- actions

    def action_help(self) -> None:
        """Show every key the table offers here, as bound now (a keymap may have moved some)."""
        bound: dict[str, list[str]] = {}
        for key, active in self.screen.active_bindings.items():
            if active.binding.id is not None:
                bound.setdefault(active.binding.id, []).append(key)
        screen = self.screen
        # p's two rows: only the one in force now (its keys are the ones bound).
        state = ("toggle_pause", "resume")
        rows = [
            row
            for row in self.actions
            if self._offered(row.action_name, screen)
            and not (row.action_name in state and self.check_action(row.action_name, ()) is False)
        ]
        from gputui.ui.screens.help import HelpScreen, help_rows

        self.push_screen(HelpScreen(help_rows(rows, bound), [row.name for row in rows]))

    def action_commands(self) -> None:
        """``:`` (k9s's command key): the command palette, every action by its name."""
        self.action_command_palette()

    def action_toggle_theme(self) -> None:
        """Light / dark (remembered by the theme signal)."""
        self.theme = "textual-light" if self.current_theme.dark else "textual-dark"

    def _theme_changed(self, theme: object) -> None:
        """``d`` or the palette's theme picker: remember the theme for the next start."""
        if self.theme in THEMES and self.theme != self.prefs.theme:  # not the start's own
            self.remember(theme=self.theme)

    def remember(self, **changes: object) -> None:
        """Save changed preferences to the state file; a failure is said once, never fatal.

        Args:
            changes: :class:`~gputui.config.ui_state.UiPrefs` fields and their new values.
        """
        self.prefs = replace(self.prefs, **changes)  # type: ignore[arg-type]
        try:
            saved = load_ui_state(self._prefs_path)
        except ConfigError:
            saved = UiPrefs()  # unreadable: rewritten with what is known to be good
        updated = replace(saved, **changes)  # type: ignore[arg-type]
        if updated == saved:
            return
        try:
            save_ui_state(updated, self._prefs_path)
        except (OSError, UserFileError) as exc:
            if not self._save_failed:
                self._save_failed = True
                reason = (
                    exc.reason
                    if isinstance(exc, UserFileError)
                    else exc.strerror or type(exc).__name__
                )
                self.notify(
                    f"Preferences are not saved: cannot write {self._prefs_path}: {reason}",
                    severity="warning",
                    timeout=8,
                )

    def action_side_end(self, end: int) -> None:
        """``^`` / ``$``: the visible rows to their left (0) or right (1) edge."""
        self.main.side_end(bool(end))

    def action_toggle_gpus(self) -> None:
        """Collapse the GPU panel to one summary line, or expand it (remembered)."""
        collapsed = self.main.toggle_gpus()
        self.remember(collapsed=("gpus",) if collapsed else ())

    def action_toggle_pane(self) -> None:
        """``o``: show or hide the selected container's pane under the tree."""
        if not self.main.toggle_pane() and self.main.pane_wanted:
            width, height = self.size
            self.notify(
                f"The container pane needs at least 100x30; this terminal is {width}x{height}.",
                severity="warning",
            )

    def _pane_logs(self, usage: ContainerUsage) -> tuple[Callable[[], LogReader] | None, str]:
        """How the container pane opens a container's logs, or why it shows none."""
        if self.settings.hide_sensitive:
            return None, "hidden (--no-logs)"
        owner = self.collector.container_owner(usage.info.id)
        if owner is None:
            return None, "no connected engine lists it"
        if not owner.capabilities.logs:
            text = refusal(owner.source, "logs", owner.capabilities.why("logs"))
            return None, sanitise.safe_text(text, 160)
        from gputui.ui.widgets.selection_pane import LOG_TAIL

        opener = partial(
            self.collector.open_container_logs,
            usage.info.id,
            tail=LOG_TAIL,
            follow=usage.info.running,
        )
        return opener, ""

    def action_interrupt(self) -> None:
        """Ctrl+C: quit at once, from any screen (as htop, nvitop, k9s and lazydocker do)."""
        self.exit()

    def action_resume(self) -> None:
        """``p`` while paused (the footer's Resume)."""
        self.action_toggle_pause()

    def action_exec_smi(self) -> None:
        """nvidia-smi in the selected container, captured, in a modal."""
        self.machine.exec_smi()

    def action_exec_interactive(self) -> None:
        """nvidia-smi in the selected container on the real terminal."""
        self.machine.exec_interactive()

    def _signal_from(self, send: Callable[[GpuProcess | None], None]) -> None:
        """Run a signal action on the drill-down's process, or the monitor's (or say why not)."""
        if _is_detail(self.screen):
            target = self.screen.target()
            if target is None:
                pid = self.screen.pid
                self.notify(f"PID {pid} has exited: nothing to signal.", severity="warning")
                return
            send(target)
            return
        if self.screen is self.main and not self.main.active_row.has_container_selection:
            self.notify(
                f"Signals act on the process under the cursor of {self.main.tabs.where_to_go()}.",
                severity="warning",
            )
            return
        send(None)

    def action_signal(self, signum: int) -> None:
        """Confirm, then signal the selected (or tagged) processes (or say why not)."""
        self._signal_from(partial(self.machine.signal, signum))

    def action_signal_menu(self) -> None:
        """F9: pick a signal, confirm, send it to the selected (or tagged) processes."""
        self._signal_from(self.machine.signal_menu)

    def action_tag(self) -> None:
        """Space on a process: tag or untag it (the signal keys then act on every tagged one)."""
        if self.machine.refused():
            return
        self.main.toggle_tag()

    def action_untag_all(self) -> None:
        """``u``: untag every tagged process."""
        if self.machine.refused():
            return
        count = self.main.untag_all()
        if count:
            self.notify(f"Untagged {count} process{'es' if count != 1 else ''}.", timeout=2)

    def action_gpu_scope(self, step: int) -> None:
        """``f``: show only what runs on the next GPU (after the last: every GPU again)."""
        self.main.cycle_gpu_scope(step)

    def action_toggle_tree(self) -> None:
        """``C``: collapse every container of the tree, or expand them all."""
        self.main.ctree.toggle_all()

    def action_logs(self) -> None:
        """The selected container's logs (last lines, then following) on their own screen."""
        self.machine.logs()

    def action_shell(self) -> None:
        """A shell in the selected container on the real terminal."""
        self.machine.shell()

    def action_stop_container(self) -> None:
        """Confirm, then stop the selected container."""
        self.machine.lifecycle("stop")

    def action_start_container(self) -> None:
        """Confirm, then start the selected container."""
        self.machine.lifecycle("start")

    def action_restart_container(self) -> None:
        """Confirm, then restart the selected container."""
        self.machine.lifecycle("restart")

    def action_pause_container(self) -> None:
        """Confirm, then pause the selected running container (or unpause a paused one)."""
        container, _ = self.main.selection()
        paused = container is not None and container.info.status == "paused"
        self.machine.lifecycle("unpause" if paused else "pause")

    def on_exec_finished(self, message: ExecFinished) -> None:
        """A captured nvidia-smi run ended: record and show its result."""
        from gputui.ui.screens.exec_modal import ExecRun  # loaded: only its runs post this

        if isinstance(message.run, ExecRun):
            self.machine.exec_done(message.run, message.result)

    @contextmanager
    def collection_held(self) -> Iterator[None]:
        """No collecting inside (the terminal belongs to another program); resumes unless paused."""
        self.loop.pause()
        try:
            yield
        finally:
            if not self.paused:
                self.loop.resume()

    def action_show_tab(self, tab: str) -> None:
        """Switch tabs (1-N, in the tab table's order)."""
        self.main.show_tab(tab)

    def action_filter(self) -> None:
        """Open the process filter."""
        self.main.open_filter()

    def action_sort(self) -> None:
        """Cycle the sort column of the visible tab's view (the process table's is remembered)."""
        self.main.cycle_sort()
        if self.main.sort_target is not self.main.process_sort:
            return  # the tree's and the users view's sorts last the session
        index = self.main.table.sort_index
        if 0 <= index < len(SORTS):
            self.remember(sort=SORTS[index])

    def action_sort_menu(self) -> None:
        """F6: pick the sort column of the visible tab's view from a list."""
        target = self.main.sort_target
        if target is None:
            return
        from gputui.ui.screens.sort_menu import SortMenuScreen  # loaded when first opened

        def chosen(index: int | None) -> None:
            if index is None or self.main.sort_target is not target:
                return
            target.sort_by(index)
            if target is self.main.process_sort and 0 <= index < len(SORTS):
                self.remember(sort=SORTS[index])

        what = self.main.active_row.title
        self.push_screen(
            SortMenuScreen(f"the {what} tab", target.sort_choices(), target.sort_current()),
            chosen,
        )

    def action_sort_reverse(self) -> None:
        """Reverse the sort of the container tree or the process table."""
        self.main.reverse_sort()

    def action_window(self) -> None:
        """Cycle the sparkline window (1 / 5 / 30 min)."""
        self.window = next_window(self.window)
        self._rerender()  # every tab is drawn again for the new window, paused or not
        self.notify(f"History window: {window_label(self.window)}", timeout=2)

    def action_rerun_health(self) -> None:
        """Ask the collector to re-run the health checks on its next refresh (now)."""
        self.collector.request_health()
        self._wake.set()
        self.notify("Re-running health checks…", timeout=2)

    def _detail_screens(self) -> list[ProcessDetailScreen]:
        return [s for s in self.screen_stack if _is_detail(s)]

    def _viewed_processes(self) -> set[ProcessKey]:
        """The processes a drill-down shows: their history is kept whatever their memory."""
        return {screen.key for screen in self._detail_screens()}

    def _enter_opens_detail(self) -> bool | None:
        """Whether Enter opens a drill-down now; None leaves Enter to the focused widget.

        Only on the monitor with a process selected and no input focused: on a container node
        Enter expands or collapses it, in a filter it submits, in the palette it picks.
        """
        if not self.is_running or self.screen is not self.main:
            return False
        if isinstance(self.focused, Input) or not self.main.active_row.shows_rows:
            return None  # the History tab charts the tree's selection but does not show it
        return True if self.main.selection()[1] is not None else None

    def _space_tags(self) -> bool | None:
        """Whether Space tags now; None leaves Space to the focused widget (expand, typing).

        As Enter (:meth:`_enter_opens_detail`): only on the monitor, on a process row, with no
        input focused.
        """
        return self._enter_opens_detail()

    def action_process_detail(self) -> None:
        """The drill-down of the process under the cursor (Enter)."""
        _, process = self.main.selection()
        snapshot = self.main.snapshot
        if process is None or snapshot is None:
            self.notify("Select a process first.", severity="warning")
            return
        from gputui.ui.screens.process_detail import ChainReader, ProcessDetailScreen

        reader: ChainReader | None = self.collector.parent_chain
        off = None
        if self.collector.player is not None or self.collector.mode in ("demo", "replay"):
            reader, off = None, "not read: a demo's or a recording's PIDs are not this machine's"
        elif snapshot.visibility.host_pid_namespace is not True:
            reader, off = None, "not read: gputui is not in the host's PID namespace"
        container = snapshot.container(process.container_id) if process.container_id else None
        screen = ProcessDetailScreen(
            process,
            snapshot,
            self.process_history,
            self.window,
            reader,
            off,
            self.main.crumbs(container, f"PID {process.pid}"),
        )
        self.push_screen(screen)
        self.analyzer.follow(self._viewed_processes() | {screen.key})

    def action_evidence(self) -> None:
        """Everything about the selected container on one screen."""
        container, _ = self.main.selection()
        if container is None or self.analysis is None:
            self.notify("Select a container (or one of its processes) first.", severity="warning")
            return
        from gputui.ui.screens.evidence import EvidenceScreen

        screen = EvidenceScreen(
            container.info.id,
            self.history,
            self.window,
            self.analysis,
            self.main.crumbs(container, "Evidence"),
        )
        self.push_screen(screen)

    def action_inspect(self) -> None:
        """The selected container's inspect facts and all of its processes on one screen."""
        self.machine.inspect()

    def action_faults(self) -> None:
        """The kernel-log faults (XID errors, OOM kills) on one screen."""
        if self.analysis is None:
            self.notify("No snapshot yet.", severity="warning")
            return
        from gputui.ui.screens.faults import FaultsScreen

        self.push_screen(FaultsScreen(self.analysis.snapshot))

    def action_replay_step(self, delta: int) -> None:
        """Replay: pause and show the previous / next recorded snapshot."""
        player = self.collector.player
        if player is not None:
            player.pause()  # stepping means looking closely: stop the playback there
            player.step(delta)
            self._show_jump()

    def action_replay_seek(self, seconds: float) -> None:
        """Replay: jump ``seconds`` back or forward (clamped to the recording)."""
        player = self.collector.player
        if player is not None:
            target = player.current.taken_at + seconds
            player.seek(min(max(target, player.start), player.end))  # an index search, no I/O
            self._show_jump()

    def _show_jump(self) -> None:
        self.loop.jump()
        self._rerender()
        self._refresh_binding_state()

    def action_toggle_pause(self) -> None:
        """Stop or restart collecting and applying snapshots (the player, in a replay)."""
        player = self.collector.player
        if player is not None:
            player.resume() if player.paused else player.pause()
            self.loop.wake()
            self._rerender()
            self._refresh_binding_state()
            return
        self.paused = not self.paused
        if self.paused:
            self.loop.pause()
        else:
            self.loop.resume()
        self._rerender()
        self._refresh_binding_state()

    def action_interval(self, direction: int) -> None:
        """Step the refresh interval (+ slower, - faster); applies from the next wait."""
        self.interval = step_interval(self.interval, direction)
        self.analyzer.set_interval(self.interval)  # the buffers resize with the next analysis
        self.loop.interval = self.interval  # ends the wait in progress: the new one applies
        self._rerender()
        self.remember(interval=self.interval)
        self.notify(f"Refreshing every {interval_label(self.interval)}", timeout=2)
