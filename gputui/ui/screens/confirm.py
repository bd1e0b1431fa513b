"""A yes/no dialog for destructive actions (signals); ``y`` confirms, ``n``/Escape cancels."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Footer, Static


class ConfirmScreen(ModalScreen[bool]):
    """Ask before doing something that cannot be undone; dismisses with True or False."""

    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, title: str, body: Content) -> None:
        super().__init__()
        self.title_text = title
        self.body = body

    def compose(self) -> ComposeResult:
        """Question and two buttons (No focused: Enter alone never confirms)."""
        with Vertical(id="confirm-dialog", classes="dialog"):
            yield Static(Content.styled(self.title_text, "bold"), classes="dialog-title")
            yield Static(self.body, id="confirm-body")
            with Horizontal(classes="buttons"):
                yield Button("No (n)", id="no", variant="primary")
                yield Button("Yes (y)", id="yes", variant="error")
        # Its own footer, over the monitor's: only the keys that work here.
        yield Footer()

    def on_mount(self) -> None:
        """Focus the harmless answer."""
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        """Buttons answer like the keys."""
        event.stop()
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        """Close with the answer."""
        self.dismiss(yes)
