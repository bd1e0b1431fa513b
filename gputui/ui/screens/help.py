"""The ``?`` screen: every key binding, generated from the live bindings so it cannot drift."""

from __future__ import annotations

from collections.abc import Iterable

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

#: Keys handled by Textual widgets themselves, listed so the help is complete.
BUILTIN_KEYS: tuple[tuple[str, str], ...] = (
    ("↑ ↓ / j k", "move the cursor"),
    ("g / G, home / end", "first / last row"),
    ("pgup / pgdn", "page up / down"),
    ("enter", "expand / collapse the container under the cursor"),
    ("space", "expand / collapse"),
    ("shift+←/→/↑/↓", "tree: parent / next ancestor / previous / next sibling"),
    ("escape", "close the filter or a dialog"),
    ("ctrl+p", "command palette (every action by name)"),
    ("mouse", "click tabs, rows and tree nodes; scroll with the wheel"),
)


def _bindings(bindings: Iterable[BindingType]) -> list[Binding]:
    return [b for b in bindings if isinstance(b, Binding)]


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
}


def key_label(binding: Binding) -> str:
    """How a binding's key is shown: every key it has, else ``key_display`` or a readable form."""
    keys = [key.strip() for key in binding.key.split(",")]
    if binding.key_display and len(keys) == 1:
        return binding.key_display
    return "/".join(KEY_NAMES.get(key, key) for key in keys)


def help_content(rows: list[tuple[str, str]]) -> Content:
    """Two aligned columns: key, description."""
    width = max((len(key) for key, _ in rows), default=0) + 2
    parts: list[str | tuple[str, str]] = []
    for key, description in rows:
        parts += [(key.ljust(width), "bold $accent"), description, "\n"]
    return Content.assemble(*parts)


class HelpScreen(ModalScreen[None]):
    """Lists every binding the main screen offers right now (read-only hides exec and signals)."""

    BINDINGS = [Binding("escape,q,question_mark", "dismiss_help", "Close")]

    def __init__(self, rows: list[tuple[str, str]]) -> None:
        super().__init__()
        self.rows = rows

    def compose(self) -> ComposeResult:
        """A scrollable two-column list."""
        with VerticalScroll(id="help-dialog", classes="dialog"):
            yield Static(Content.styled("gputui keys", "bold"), classes="dialog-title")
            yield Static(help_content(self.rows), id="help-keys")
            yield Static(
                Content.styled("Esc, q or ? closes this screen.", "$text-muted"), id="help-foot"
            )

    def action_dismiss_help(self) -> None:
        """Close."""
        self.dismiss(None)


def binding_rows(bindings: Iterable[BindingType], enabled: set[str]) -> list[tuple[str, str]]:
    """(key, description) rows for the bindings whose action is in ``enabled``, merged by action.

    Args:
        bindings: The app's and screen's declared bindings.
        enabled: Actions available (``check_action`` did not return False).

    Returns:
        One row per action, keys of the same action joined with ``/``.
    """
    by_action: dict[str, tuple[list[str], str]] = {}
    for binding in _bindings(bindings):
        if binding.action not in enabled:
            continue
        keys, _ = by_action.setdefault(binding.action, ([], binding.tooltip or binding.description))
        label = key_label(binding)
        if label not in keys:
            keys.append(label)
    rows = [(" / ".join(keys), description) for keys, description in by_action.values()]
    return rows + list(BUILTIN_KEYS)
