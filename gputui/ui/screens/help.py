"""The ``?`` screen: every action of the action table with its keys as bound now."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from gputui.collect.linux.cgroup_usage import CONTAINER_FULL_READ_MAX, CONTAINER_SAMPLE_WINDOW_S
from gputui.collect.linux.proc_reader import FULL_READ_MAX, SAMPLE_WINDOW_S
from gputui.derive.tree import BADGES
from gputui.ui.action_table import ActionRow

#: Keys handled by Textual widgets themselves, listed so the help is complete.
BUILTIN_KEYS: tuple[tuple[str, str], ...] = (
    ("↑ ↓ / j k", "move the cursor"),
    ("g / G, home / end", "first / last row"),
    ("pgup / pgdn", "page up / down"),
    ("enter", "expand / collapse the container under the cursor"),
    ("space", "expand / collapse"),
    ("shift+←/→/↑/↓", "tree: parent / next ancestor / previous / next sibling"),
    ("escape", "close a dialog (on the monitor: clear and close the filter, else all GPUs)"),
    ("ctrl+p", "command palette (every action by name)"),
    ("/ n N t f", "in the logs screen: search, next / previous match, times, follow"),
    ("mouse", "click tabs, rows and tree nodes; scroll with the wheel"),
)


#: The Containers tab's FLAGS badges and columns, for the help screen's legend.
TREE_LEGEND: tuple[tuple[str, str], ...] = (
    *BADGES,
    ("+N", "N more badges: the line under the tree gives every flag of the row in full"),
    ("GPUS", "the GPUs its processes use; req …: what it asked for, while it uses none"),
    ("SM%", "SM % per GPU: its processes' figures added up on each GPU, mean over its GPUs"),
    ("stopping…", "an action asked of Docker, until Docker reports the outcome"),
    ("*", "before a process: tagged (Space); the signal keys act on every tagged process"),
)


#: The header's and the GPU panel's marks, for the help screen's legend.
SCREEN_LEGEND: tuple[tuple[str, str], ...] = (
    ("⇄", "after a GPU's name: two or more parties (containers, host processes) use that GPU"),
    ("N firing", "header: alert rules firing now (the Alerts tab lists them)"),
    (
        "N pending",
        "header: alert rules whose condition holds, not yet for their `for` duration",
    ),
    (
        "GPU N only",
        "status lines: the tree and table show only GPU N (f or a click on it; Esc: every GPU)",
    ),
)


#: Readable names of the keys Textual spells out.
KEY_NAMES = {
    "question_mark": "?",
    "slash": "/",
    "plus": "+",
    "minus": "-",
    "equals_sign": "=",
    "comma": ",",
    "full_stop": ".",
    "less_than_sign": "<",
    "greater_than_sign": ">",
    "left_square_bracket": "[",
    "right_square_bracket": "]",
    "colon": ":",
    "space": "Space",
}


#: What a note "read in turn" on a status line means (one line of the help).
IN_TURN_TEXT = (
    f"“read in turn”: beyond {FULL_READ_MAX} GPU processes ({CONTAINER_FULL_READ_MAX} running"
    " containers) a refresh reads the CPU/RSS (CPU/memory) of a share of them; each within"
    f" {SAMPLE_WINDOW_S:.0f} s ({CONTAINER_SAMPLE_WINDOW_S:.0f} s)."
)


def key_label(keys: Iterable[str], key_display: str | None = None) -> str:
    """How an action's keys are shown: every key it has, else ``key_display`` or a readable form."""
    names = [key.strip() for key in keys]
    if key_display and len(names) == 1:
        return key_display
    return "/".join(KEY_NAMES.get(key, key) for key in names)


def help_content(rows: list[tuple[str, str]]) -> Content:
    """Two aligned columns: key, description."""
    width = max((len(key) for key, _ in rows), default=0) + 2
    parts: list[str | tuple[str, str]] = []
    for key, description in rows:
        parts += [(key.ljust(width), "bold $accent"), description, "\n"]
    return Content.assemble(*parts)


class HelpScreen(ModalScreen[None]):
    """Lists every binding the main screen offers right now (read-only hides exec and signals)."""

    BINDINGS = [Binding("escape,q,question_mark,f1,h", "dismiss_help", "Close")]

    def __init__(self, rows: list[tuple[str, str]], binding_ids: Sequence[str] = ()) -> None:
        super().__init__()
        self.rows = rows
        #: The names ``[keys]`` in the config file remaps (``gputui.`` left out).
        self.binding_ids = tuple(binding_ids)

    def compose(self) -> ComposeResult:
        """A scrollable two-column list."""
        with VerticalScroll(id="help-dialog", classes="dialog"):
            yield Static(Content.styled("gputui keys", "bold"), classes="dialog-title")
            yield Static(help_content(self.rows), id="help-keys")
            yield Static(Content.styled("Containers tab", "bold"), classes="dialog-title")
            yield Static(help_content(list(TREE_LEGEND)), id="help-legend")
            yield Static(Content.styled("Header and GPU panel", "bold"), classes="dialog-title")
            yield Static(help_content(list(SCREEN_LEGEND)), id="help-screen-legend")
            if self.binding_ids:
                yield Static(
                    Content.styled("Binding ids ([keys] in the config file)", "bold"),
                    classes="dialog-title",
                )
                yield Static(binding_ids_content(self.binding_ids), id="help-binding-ids")
            yield Static(Content.styled(IN_TURN_TEXT, "$text-muted"), id="help-in-turn")
            yield Static(
                Content.styled("Esc, q, ?, F1 or h closes this screen.", "$text-muted"),
                id="help-foot",
            )
        # Its own footer, over the monitor's: only the keys that work here.
        yield Footer()

    def action_dismiss_help(self) -> None:
        """Close."""
        self.dismiss(None)


def binding_ids_content(names: Iterable[str]) -> Content:
    """The binding ids, with an example line: ``[keys]`` takes ``name = "key"``."""
    listed = " · ".join(names)
    return Content.assemble(
        (listed, ""),
        "\n",
        (
            'e.g. [keys] exec-smi = "ctrl+x" (each id is also gputui.<id> in a Textual keymap)',
            "$text-muted",
        ),
    )


def help_rows(rows: Iterable[ActionRow], bound: Mapping[str, list[str]]) -> list[tuple[str, str]]:
    """(keys, help) for each action row offered, then the keys Textual's widgets handle.

    Args:
        rows: The action table's rows offered on the screen the help was asked from.
        bound: Binding id -> the keys bound to it now; a keymap may have moved them. Rows
            missing here (a monitor key asked from another screen) show their default keys.

    Returns:
        One row per action, in table order (rows with one help text share a line: ``q/^c``;
        a key already listed is not listed again: ``p`` is Pause and, while paused, Resume),
        then the :data:`BUILTIN_KEYS` whose keys no row lists.
    """
    labels: dict[str, list[str]] = {}
    seen: set[str] = set()
    defaults = {row.binding_id: [k.strip() for k in row.keys.split(",")] for row in rows}
    for row in rows:
        keys = bound.get(row.binding_id) or defaults[row.binding_id]
        if seen.issuperset(keys):
            continue  # another action's row already lists these keys
        seen.update(keys)
        display = row.key_display if keys == defaults[row.binding_id] else None
        labels.setdefault(row.help, []).append(key_label(keys, display))
    lines = [("/".join(keys), text) for text, keys in labels.items()]
    builtin = [(key, text) for key, text in BUILTIN_KEYS if key not in seen]
    return lines + builtin
