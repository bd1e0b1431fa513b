"""F6's list of sort columns (as htop's F6): pick one for the visible tab's view."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Footer, OptionList, Static
from textual.widgets.option_list import Option

from gputui.boundary import sanitise


class SortMenuScreen(ModalScreen[int | None]):
    """The view's sort columns; dismisses with the chosen one's index, or None (Escape).

    Args:
        what: The view sorted, for the title (``the process table``).
        choices: The columns, in the view's order (what ``s`` cycles through).
        current: The index of the column the view sorts by now (highlighted).
    """

    BINDINGS = [Binding("escape,q", "cancel", "Cancel")]

    DEFAULT_CSS = """
    SortMenuScreen #sort-list { height: auto; max-height: 14; border: none; }
    """

    def __init__(self, what: str, choices: Sequence[str], current: int) -> None:
        super().__init__()
        self.what = sanitise.safe_text(what, 60)
        self.choices = tuple(choices)
        self.current = current

    def compose(self) -> ComposeResult:
        """The title, the columns (the current one marked), a footer with this screen's keys."""
        with Vertical(id="sort-dialog", classes="dialog"):
            yield Static(Content.styled(f"Sort {self.what} by", "bold"), classes="dialog-title")
            yield OptionList(
                *(
                    Option(Content.assemble(("● " if i == self.current else "  "), label))
                    for i, label in enumerate(self.choices)
                ),
                id="sort-list",
            )
            yield Static(
                Content.styled(
                    "Enter sorts (biggest first; S reverses), Esc cancels", "$text-muted"
                ),
                id="sort-hint",
            )
        yield Footer()

    def on_mount(self) -> None:
        """The list takes the keys, on the current column."""
        options = self.query_one(OptionList)
        options.highlighted = self.current if 0 <= self.current < len(self.choices) else 0
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """A column picked."""
        event.stop()
        self.dismiss(event.option_index)

    def action_cancel(self) -> None:
        """The sort stays as it is."""
        self.dismiss(None)
