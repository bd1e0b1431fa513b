"""F9's list of signals (as htop's F9): pick one, then the usual confirmation asks first."""

from __future__ import annotations

import signal

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Footer, OptionList, Static
from textual.widgets.option_list import Option

from gputui.boundary import sanitise

#: The signals offered, in the list's order, with what each does to a process.
SIGNAL_MENU: tuple[tuple[signal.Signals, str], ...] = (
    (signal.SIGTERM, "terminate: the usual request to stop"),
    (signal.SIGINT, "interrupt, as Ctrl+C: Python raises KeyboardInterrupt"),
    (signal.SIGHUP, "hang up: many daemons reload their configuration"),
    (signal.SIGKILL, "kill at once: cannot be caught, nothing is saved"),
    (signal.SIGUSR1, "user signal 1: what the program set it to do"),
    (signal.SIGUSR2, "user signal 2: what the program set it to do"),
    (signal.SIGSTOP, "stop (freeze): cannot be caught; CONT resumes it"),
    (signal.SIGCONT, "continue a stopped process"),
    (signal.SIGQUIT, "quit and dump core"),
)


def option_text(signum: signal.Signals, what: str) -> Content:
    """``15 TERM  terminate: …`` (the number, the name without ``SIG``, what it does)."""
    return Content.assemble(
        (f"{int(signum):>2} ", "$text-muted"),
        (signum.name.removeprefix("SIG").ljust(5), "bold"),
        " ",
        (what, "$text-muted"),
    )


class SignalMenuScreen(ModalScreen[int | None]):
    """The signals to choose from; dismisses with the signal's number, or None (Escape)."""

    BINDINGS = [Binding("escape,q", "cancel", "Cancel")]

    DEFAULT_CSS = """
    SignalMenuScreen #signal-list { height: auto; max-height: 12; border: none; }
    """

    def __init__(self, target: str) -> None:
        """Args: target: what the signal goes to, in one line (``PID 611 (python3 train.py)``)."""
        super().__init__()
        self.target = sanitise.safe_text(target, 120)

    def compose(self) -> ComposeResult:
        """The title, the list (TERM first), and a footer with only this screen's keys."""
        with Vertical(id="signal-dialog", classes="dialog"):
            yield Static(Content.styled("Send a signal", "bold"), classes="dialog-title")
            yield Static(Content.assemble("to ", (self.target, "bold")), id="signal-target")
            yield OptionList(
                *(Option(option_text(s, what), id=s.name) for s, what in SIGNAL_MENU),
                id="signal-list",
            )
            yield Static(
                Content.styled("Enter picks (then asks again), Esc cancels", "$text-muted"),
                id="signal-hint",
            )
        yield Footer()

    def on_mount(self) -> None:
        """The list takes the keys (↑ ↓ and Enter)."""
        self.query_one(OptionList).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """A signal picked: hand its number to the confirmation."""
        event.stop()
        name = event.option.id
        self.dismiss(int(signal.Signals[name]) if name else None)

    def action_cancel(self) -> None:
        """Nothing is sent."""
        self.dismiss(None)
