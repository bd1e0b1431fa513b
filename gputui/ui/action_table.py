"""Every user action in one table: keys, binding id, titles, help text and when it applies.

The table generates the app's and the main screen's ``BINDINGS``, the command palette entries,
the help screen's rows and the policy ``check_action`` applies (hidden under ``--read-only``,
only while replaying, only with the monitor's tabs on screen, dimmed until the selection or the
tab fits). Adding an action is one row here plus its ``action_*`` method; the tab keys are
generated from the tab table (:mod:`gputui.ui.tab_table`) and bound by the app that shows them.

Every binding carries an id (``gputui.<name>``), so keys can be remapped through Textual's keymap
(``App.set_keymap({"gputui.exec-smi": "ctrl+x"})``) without touching this table.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import Enum

from textual.binding import Binding, BindingType

from gputui.model.processes import GpuProcess
from gputui.model.records import record
from gputui.model.snapshot import ContainerUsage
from gputui.ui.tab_table import TABS, Selection, TabRow, TabTable

#: Seconds ``<`` / ``>`` (and ``[`` / ``]``) jump back / forward in a replay.
SEEK_SECONDS = 60

#: Binding ids are ``gputui.<name>``: the names users write in a keymap.
BINDING_ID_PREFIX = "gputui."


class Scope(Enum):
    """Where a binding is declared.

    On the app (every screen), on the monitor screen only, or on the app from its tab table
    (the tab keys: one per tab the app shows).
    """

    APP = "app"
    MAIN = "main"
    TAB = "tab"


class Needs(Enum):
    """What the monitor must show for an action to apply; until then its key is dimmed."""

    NOTHING = "nothing"
    CONTAINER = "container"  # a container, or one of its processes, is selected
    RUNNING_CONTAINER = "running container"
    PROCESS = "process"  # a process (a row of the table, a process node of the tree)
    SORT = "sort"  # a tab whose view sorts (the tab table's ``sort``)
    FILTER = "filter"  # a tab with a filter (the tab table's ``filter``)
    ROWS = "rows"  # a tab showing containers or processes as rows (Containers, Processes)
    TREE = "tree"  # the tab of the container tree


@record
class ActionRow:
    """One user action.

    Attributes:
        action: The action string Textual runs, parameters included (``signal(15)``).
        keys: Default keys, comma separated, in Textual's key names.
        name: The binding id without its prefix (``exec-smi``); unique.
        label: The footer's short label.
        title: The command palette's title (and help text's subject).
        help: One line for the help screen, the palette and the key's tooltip.
        key_display: How the footer shows the key, when not its name.
        write: Changes the machine: refused, and gone from keys, footer, palette and help, with
            ``--read-only``.
        sensitive: Shows what can hold secrets (container logs): gone the same way with
            ``--no-logs`` (``Settings.hide_sensitive``), as in ``gputui serve``'s monitors
            unless ``--allow-actions`` or ``--allow-logs``.
        replay: Only offered while a recording is replayed.
        main_only: Acts on the monitor's tabs: gone while another full screen covers them.
        needs: What the selection must be for the action to apply (dimmed until then).
        footer: Shown in the footer.
        palette: Offered in the command palette.
        scope: Declared on the app or on the monitor screen.
        explain_read_only: Under ``--read-only`` its key still says why it does nothing.
        priority: The key acts before any widget's own binding (Ctrl+C: quit, even in the filter).
        detail: Also offered on the process drill-down, acting on its process (signals).
    """

    action: str
    keys: str
    name: str
    label: str
    title: str
    help: str
    key_display: str | None = None
    write: bool = False
    sensitive: bool = False
    replay: bool = False
    main_only: bool = False
    needs: Needs = Needs.NOTHING
    footer: bool = True
    palette: bool = True
    scope: Scope = Scope.APP
    explain_read_only: bool = False
    priority: bool = False
    detail: bool = False

    @property
    def action_name(self) -> str:
        """The action without its parameters (what ``check_action`` is asked about)."""
        return self.action.split("(", 1)[0]

    @property
    def binding_id(self) -> str:
        """The id Textual's keymap remaps this action's keys by."""
        return BINDING_ID_PREFIX + self.name

    def binding(self) -> Binding:
        """The Textual binding of this row."""
        return Binding(
            self.keys,
            self.action,
            self.label,
            show=self.footer,
            key_display=self.key_display,
            tooltip=self.help,
            id=self.binding_id,
            priority=self.priority,
        )


@record
class Policy:
    """When an action (by name, parameters aside) is offered; the same for all its rows."""

    write: bool
    replay: bool
    main_only: bool
    needs: Needs
    detail: bool = False
    sensitive: bool = False


def tab_rows(tabs: TabTable) -> tuple[ActionRow, ...]:
    """The key of each tab (``1`` for the first), from a tab table.

    Args:
        tabs: The tabs the app shows.

    Returns:
        One row per tab, in the tab bar's order; its binding id is ``tab.<id>``.
    """
    return tuple(
        ActionRow(
            f"show_tab('{tab.id}')",
            tabs.key(tab.id),
            f"tab.{tab.id}",
            f"{tab.title} tab",
            f"Show {tab.title} tab",
            f"Switch to the {tab.title.lower()} tab",
            main_only=True,
            footer=False,
            scope=Scope.TAB,
        )
        for tab in tabs
    )


#: Every action but the tab keys (:func:`tab_rows`), in the order the help screen and the palette
#: list them; :func:`actions` puts the tab keys after the help.
_ACTIONS: tuple[ActionRow, ...] = (
    # F10 quits as in htop and mc.
    ActionRow("quit", "q,f10", "quit", "Quit", "Quit", "Quit gputui", palette=False),
    # Ctrl+C quits as in htop, nvitop, k9s and lazydocker; before the widgets' "copy".
    ActionRow(
        "interrupt",
        "ctrl+c",
        "quit.ctrl-c",
        "Quit",
        "Quit",
        "Quit gputui",
        key_display="^c",
        footer=False,
        palette=False,
        priority=True,
    ),
    # F1 and h as in htop (h is free: the trees and tables move with j / k and the arrows).
    ActionRow("help", "question_mark,f1,h", "help", "Help", "Keys", "List every key"),
    # k9s's ":" runs a command by name: here it opens the command palette, whose entries are
    # every action of this table (tabs, sort, filter, signals...) by title.
    ActionRow(
        "commands",
        "colon",
        "commands",
        "Commands",
        "Commands",
        "Run an action by name (the command palette, as ctrl+p)",
        key_display=":",
        footer=False,
        palette=False,
    ),
    ActionRow(
        "filter",
        "slash",
        "filter",
        "Filter",
        "Filter",
        "Filter containers (name, image, compose, pod, process command or user) or processes",
        key_display="/",
        main_only=True,
        needs=Needs.FILTER,
    ),
    ActionRow(
        "sort",
        "s",
        "sort",
        "Sort",
        "Cycle sort",
        "Next sort column of the container tree, the process table or the users view",
        main_only=True,
        needs=Needs.SORT,
    ),
    ActionRow(
        "sort_reverse",
        "S",
        "sort.reverse",
        "Reverse",
        "Reverse sort",
        "Reverse the sort of the container tree, the process table or the users view",
        main_only=True,
        needs=Needs.SORT,
        footer=False,
    ),
    ActionRow(
        "sort_menu",
        "f6",
        "sort.menu",
        "Sort by",
        "Sort by…",
        "Pick the sort column of the visible tab's view from a list (htop's F6)",
        main_only=True,
        needs=Needs.SORT,
        footer=False,
    ),
    ActionRow(
        "gpu_scope(1)",
        "f",
        "gpu.scope",
        "GPU",
        "Scope to the next GPU",
        "Show only what runs on one GPU: GPU 0, 1, … then all again (or click a GPU; "
        "Esc: all GPUs)",
        main_only=True,
        needs=Needs.ROWS,
        footer=False,
    ),
    ActionRow(
        "toggle_tree",
        "C",
        "tree.collapse-all",
        "Collapse all",
        "Collapse / expand all",
        "Containers: collapse every container to its row, or expand them all again",
        main_only=True,
        needs=Needs.TREE,
        footer=False,
    ),
    ActionRow(
        "toggle_pane",
        "o",
        "pane",
        "Pane",
        "Show / hide the container pane",
        "Containers: the selected container's CPU, memory, GPU figures, findings and last log "
        "lines under the tree (by itself from 140x44; never below 100x30)",
        main_only=True,
        needs=Needs.TREE,
        footer=False,
    ),
    ActionRow(
        "evidence",
        "e",
        "evidence",
        "Evidence",
        "Evidence",
        "Everything about the selected container on one screen",
        main_only=True,
        needs=Needs.CONTAINER,
    ),
    # k9s and lazydocker describe the selected resource on one key; i is free here.
    ActionRow(
        "inspect",
        "i",
        "inspect",
        "Inspect",
        "Inspect container",
        "The selected container's mounts, labels, restart policy, environment names (never "
        "values), networks, and every one of its processes (CPU, RSS), refreshing",
        main_only=True,
        needs=Needs.CONTAINER,
        footer=False,
    ),
    ActionRow(
        "faults",
        "F",
        "faults",
        "Faults",
        "Kernel-log faults",
        "XID errors and OOM kills from the kernel log, with the container they hit and the fix",
        main_only=True,
        footer=False,
    ),
    # Enter on a process opens its drill-down; anywhere else Enter keeps its widget's meaning
    # (expand / collapse a container, submit the filter): the app skips the binding there.
    ActionRow(
        "process_detail",
        "enter",
        "process-detail",
        "Details",
        "Process details",
        "Details of the process under the cursor: GPU memory and SM history, container, "
        "parents, command line (on a container: expand / collapse)",
        main_only=True,
        needs=Needs.PROCESS,
        footer=False,
        priority=True,
    ),
    ActionRow(
        "exec_smi",
        "x",
        "exec-smi",
        "nvidia-smi",
        "nvidia-smi in container",
        "Run nvidia-smi in the selected container",
        write=True,
        needs=Needs.RUNNING_CONTAINER,
    ),
    ActionRow(
        "exec_interactive",
        "X",
        "exec-interactive",
        "smi -it",
        "nvidia-smi interactive",
        "Run nvidia-smi in the selected container on the terminal",
        write=True,
        needs=Needs.RUNNING_CONTAINER,
        footer=False,
    ),
    ActionRow(
        "logs",
        "l",
        "logs",
        "Logs",
        "Container logs",
        "Logs of the selected container: the last lines, then new ones (/ search, t times)",
        sensitive=True,  # a container's output can hold its secrets
        main_only=True,
        needs=Needs.CONTAINER,
        # Off the footer: at 80 columns it would push Pause out of it; help and palette list it.
        footer=False,
    ),
    ActionRow(
        "shell",
        "E",
        "shell",
        "Shell",
        "Shell in container",
        "A shell (bash, else sh) in the selected container on the terminal",
        write=True,
        main_only=True,
        needs=Needs.RUNNING_CONTAINER,
        footer=False,
    ),
    ActionRow(
        "stop_container",
        "D",
        "container.stop",
        "Stop",
        "Stop container",
        "Stop the selected container: SIGTERM, SIGKILL after 10 s (confirms)",
        write=True,
        main_only=True,
        needs=Needs.RUNNING_CONTAINER,
        footer=False,
    ),
    ActionRow(
        "start_container",
        "U",
        "container.start",
        "Start",
        "Start container",
        "Start the selected stopped container (confirms)",
        write=True,
        main_only=True,
        needs=Needs.CONTAINER,
        footer=False,
    ),
    ActionRow(
        "restart_container",
        "R",
        "container.restart",
        "Restart",
        "Restart container",
        "Restart the selected container (confirms)",
        write=True,
        main_only=True,
        needs=Needs.CONTAINER,
        footer=False,
    ),
    # The signal keys are never dimmed: they always reach action_signal, which says why it
    # cannot act. Each acts on the tagged processes when there are any, else on the process
    # under the cursor, else on the GPU processes of the container under it.
    ActionRow(
        "signal(15)",
        "T",
        "sigterm",
        "SIGTERM",
        "SIGTERM process",
        "SIGTERM: ask the selected (or tagged) processes to terminate (confirms)",
        write=True,
        main_only=True,
        footer=False,
        explain_read_only=True,
        detail=True,
    ),
    ActionRow(
        "signal(9)",
        "K",
        "sigkill",
        "SIGKILL",
        "SIGKILL process",
        "SIGKILL: kill the selected (or tagged) processes (confirms)",
        write=True,
        main_only=True,
        footer=False,
        explain_read_only=True,
        detail=True,
    ),
    ActionRow(
        "signal(2)",
        "I",
        "sigint",
        "SIGINT",
        "SIGINT process",
        "SIGINT, as Ctrl+C: the polite stop of a Python training job (confirms)",
        write=True,
        main_only=True,
        footer=False,
        explain_read_only=True,
        detail=True,
    ),
    ActionRow(
        "signal_menu",
        "f9",
        "signal-menu",
        "Signal",
        "Send a signal…",
        "Pick a signal (TERM, INT, HUP, KILL, USR1, USR2, STOP, CONT, QUIT) to send (confirms)",
        write=True,
        main_only=True,
        footer=False,
        explain_read_only=True,
        detail=True,
    ),
    # Space on a process tags it (htop); on a container it keeps the tree's expand / collapse.
    # Tags only serve signals, so they go with --read-only too.
    ActionRow(
        "tag",
        "space",
        "tag",
        "Tag",
        "Tag / untag process",
        "Tag or untag the process under the cursor: signal keys then act on every tagged "
        "process at once (on a container: expand / collapse)",
        write=True,
        main_only=True,
        needs=Needs.PROCESS,
        footer=False,
        priority=True,
    ),
    ActionRow(
        "untag_all",
        "u",
        "untag-all",
        "Untag all",
        "Untag all processes",
        "Untag every tagged process",
        write=True,
        main_only=True,
        footer=False,
    ),
    ActionRow(
        "rerun_health",
        "r",
        "rerun-health",
        "Re-check",
        "Re-run health checks",
        "Run the runtime-health checks now",
        footer=False,
    ),
    ActionRow(
        "window",
        "w",
        "window",
        "Window",
        "Cycle history window",
        "History window 1 / 5 / 30 min",
        footer=False,
    ),
    # One key, two rows: the footer says Pause while live and Resume while paused.
    ActionRow(
        "toggle_pause", "p", "pause", "Pause", "Pause / resume", "Stop or restart refreshing"
    ),
    # Same help as Pause: the help lists p once. A keymap moving gputui.pause moves it too.
    ActionRow(
        "resume", "p", "resume", "Resume", "Resume", "Stop or restart refreshing", palette=False
    ),
    # lazydocker pauses with p; here p pauses the monitor, so P pauses the container. One key
    # both ways, as the freezer is: a running container pauses, a paused one resumes. After
    # the monitor's p: the palette lists that first for "pause" (equal scores keep this order).
    ActionRow(
        "pause_container",
        "P",
        "container.pause",
        "Pause ctr",
        "Container pause / unpause",
        "Pause the selected running container (its cgroup is frozen), or unpause a paused one "
        "(confirms)",
        write=True,
        main_only=True,
        needs=Needs.CONTAINER,
        footer=False,
    ),
    ActionRow(
        "side_end(0)",
        "circumflex_accent",
        "scroll.start",
        "Start",
        "Scroll to the left edge",
        "Containers / Processes: back to the left edge of the rows (← / → move 8 columns)",
        key_display="^",
        main_only=True,
        footer=False,
    ),
    ActionRow(
        "side_end(1)",
        "dollar_sign",
        "scroll.end",
        "End",
        "Scroll to the right edge",
        "Containers / Processes: to the right edge, the ends of the longest commands",
        key_display="$",
        main_only=True,
        footer=False,
    ),
    ActionRow(
        "toggle_gpus",
        "v",
        "gpus.collapse",
        "GPUs",
        "Collapse / expand GPU panel",
        "Collapse the GPU panel to one summary line, or expand it again",
        main_only=True,
        footer=False,
    ),
    ActionRow(
        "replay_step(-1)",
        "comma",
        "replay.back",
        "Back",
        "Replay: step back",
        "Show the previous recorded snapshot",
        key_display=",",
        replay=True,
    ),
    ActionRow(
        "replay_step(1)",
        "full_stop",
        "replay.step",
        "Step",
        "Replay: step forward",
        "Show the next recorded snapshot",
        key_display=".",
        replay=True,
    ),
    ActionRow(
        f"replay_seek(-{SEEK_SECONDS})",
        "less_than_sign,left_square_bracket",
        "replay.seek-back",
        f"-{SEEK_SECONDS}s",
        f"Replay: back {SEEK_SECONDS} s",
        f"Jump {SEEK_SECONDS} s back in the recording",
        key_display="<",
        replay=True,
    ),
    ActionRow(
        f"replay_seek({SEEK_SECONDS})",
        "greater_than_sign,right_square_bracket",
        "replay.seek-forward",
        f"+{SEEK_SECONDS}s",
        f"Replay: forward {SEEK_SECONDS} s",
        f"Jump {SEEK_SECONDS} s forward in the recording",
        key_display=">",
        replay=True,
    ),
    ActionRow(
        "interval(1)",
        "plus,equals_sign",
        "interval.slower",
        "Slower",
        "Slower refresh",
        "Slower refresh: a longer interval between refreshes",
        key_display="+",
        footer=False,
    ),
    ActionRow(
        "interval(-1)",
        "minus",
        "interval.faster",
        "Faster",
        "Faster refresh",
        "Faster refresh: a shorter interval between refreshes",
        key_display="-",
        footer=False,
    ),
    ActionRow(
        "toggle_theme",
        "d",
        "theme",
        "Light/dark",
        "Toggle light / dark",
        "Switch between the light and dark theme",
        footer=False,
    ),
    # The Screen default binds Tab to focus cycling; on the monitor it cycles tabs, like 1-5.
    ActionRow(
        "cycle_tab(1)",
        "tab",
        "tab.next",
        "Next tab",
        "Next tab",
        "Next tab",
        footer=False,
        palette=False,
        scope=Scope.MAIN,
    ),
    ActionRow(
        "cycle_tab(-1)",
        "shift+tab",
        "tab.previous",
        "Previous tab",
        "Previous tab",
        "Previous tab",
        footer=False,
        palette=False,
        scope=Scope.MAIN,
    ),
    ActionRow(
        "close_filter",
        "escape",
        "filter.close",
        "Close filter",
        "Close filter",
        "Clear and close the filter; with none open, back to every GPU (in a dialog: close it)",
        footer=False,
        palette=False,
        scope=Scope.MAIN,
    ),
)


def policies(rows: Iterable[ActionRow]) -> dict[str, Policy]:
    """The policy of every action name, checked to be the same on all of its rows.

    Args:
        rows: Action rows.

    Returns:
        Action name -> policy.

    Raises:
        ValueError: Two rows of one action disagree, or two rows share a binding id.
    """
    found: dict[str, Policy] = {}
    names: set[str] = set()
    for row in rows:
        if row.name in names:
            raise ValueError(f"binding id {row.binding_id} is used twice")
        names.add(row.name)
        policy = Policy(row.write, row.replay, row.main_only, row.needs, row.detail, row.sensitive)
        if found.setdefault(row.action_name, policy) != policy:
            raise ValueError(f"the rows of action {row.action_name} disagree on when it applies")
    return found


def actions(tabs: TabTable = TABS) -> tuple[ActionRow, ...]:
    """Every action of an app showing ``tabs``: the table with its tab keys after the help.

    Args:
        tabs: The tabs the app shows.

    Returns:
        The rows in the order the help screen and the palette list them.
    """
    split = next(i for i, row in enumerate(_ACTIONS) if row.name == "help") + 1
    return (*_ACTIONS[:split], *tab_rows(tabs), *_ACTIONS[split:])


#: Every action of the monitor with its own tabs.
ACTIONS: tuple[ActionRow, ...] = actions()

#: Action name -> when it is offered (``check_action`` reads only this). The tab keys share one
#: policy whatever the tabs, so any tab table's actions have these policies.
POLICIES: Mapping[str, Policy] = policies(ACTIONS)

#: Action names whose key availability depends on the selection or the tab.
SELECTION_DEPENDENT: tuple[str, ...] = tuple(
    name for name, policy in POLICIES.items() if policy.needs is not Needs.NOTHING
)


def bindings(scope: Scope, rows: Iterable[ActionRow] = ACTIONS) -> list[BindingType]:
    """The Textual bindings of one scope, in table order (a class's ``BINDINGS``)."""
    return [row.binding() for row in rows if row.scope is scope]


def needs_met(
    needs: Needs,
    container: ContainerUsage | None,
    process: GpuProcess | None = None,
    tab: TabRow | None = None,
) -> bool:
    """Whether the monitor's selection (and visible tab) lets an action apply.

    Args:
        needs: The action's requirement.
        container: The selected container (a process row's container counts; None on tabs
            without a selection).
        process: The selected process (None on a container node or tabs without one).
        tab: The visible tab (None: no tab is on screen, so nothing sorts or filters).

    Returns:
        True when the action can act now.
    """
    if needs is Needs.SORT:
        return tab is not None and tab.sort is not None
    if needs is Needs.FILTER:
        return tab is not None and tab.filter is not None
    if needs is Needs.ROWS:
        return tab is not None and tab.shows_rows
    if needs is Needs.TREE:
        return tab is not None and tab.selection is Selection.TREE
    if needs is Needs.PROCESS:
        return process is not None
    if needs is Needs.CONTAINER:
        return container is not None
    if needs is Needs.RUNNING_CONTAINER:
        return container is not None and container.info.running
    return True
