"""``nvidia-smi`` inside a container: captured in a modal (``x``) or interactive (``X``)."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable, Sequence

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import LoadingIndicator, Static

from gputui.derive import fmt
from gputui.model import ExecResult

#: Why the two process lists differ; shown under every result.
PID_NAMESPACE_NOTE = (
    "Why this list may differ from gputui's: NVML on the host reports host PIDs, while nvidia-smi "
    "inside the container runs in the container's PID namespace and shows only that container's "
    "processes, with in-container PIDs (often none at all: without --pid=host a container cannot "
    "map GPU processes to its own PIDs). gputui shows both: PID is the host PID, the number in "
    "brackets / CPID the in-container one."
)


def result_content(container: str, result: ExecResult) -> Content:
    """Exit code, duration, a one-line diagnosis, then stdout and stderr.

    Args:
        container: The container's display name (already safe).
        result: What the collector returned.

    Returns:
        The body of the modal; output keeps its lines but loses control characters.
    """
    argv = " ".join(fmt.safe_text(a, 80) for a in result.argv) or "nvidia-smi"
    code = "none" if result.exit_code is None else str(result.exit_code)
    ok = result.exit_code == 0 and result.error is None and not result.timed_out
    parts: list[str | tuple[str, str]] = [
        ("$ ", "$text-muted"),
        (argv, "bold"),
        ("   in ", "$text-muted"),
        (container, "bold"),
        "\n",
        ("exit ", "$text-muted"),
        (code, "bold $text-success" if ok else "bold $text-error"),
        ("   took ", "$text-muted"),
        f"{result.duration_s:.2f}s",
        "\n",
    ]
    if result.timed_out:
        parts += [
            ("Timed out: nvidia-smi did not finish in time; abandoned.", "bold $text-error"),
            "\n",
        ]
    if result.error:
        parts += [(fmt.safe_text(result.error, 500), "bold $text-error"), "\n"]
    for name, stream in (("stdout", result.stdout), ("stderr", result.stderr)):
        if not stream:
            continue
        parts += ["\n", (f"── {name} ──", "$text-muted"), "\n"]
        for line in stream.splitlines():
            parts += [fmt.safe_text(line, 400, na=""), "\n"]
    if not result.stdout and not result.stderr and not result.error:
        parts += ["\n", ("(no output)", "$text-muted"), "\n"]
    parts += ["\n", (PID_NAMESPACE_NOTE, "italic $text-muted")]
    return Content.assemble(*parts)


class ExecScreen(ModalScreen[None]):
    """Runs the command in a thread worker and shows the result; never blocks the UI thread."""

    BINDINGS = [
        Binding("escape,q", "close", "Close"),
        Binding("j", "scroll_down", "Down", show=False),
        Binding("k", "scroll_up", "Up", show=False),
    ]

    def __init__(self, container: str, runner: Callable[[], ExecResult]) -> None:
        super().__init__()
        self.container = container
        self.runner = runner
        self.result: ExecResult | None = None

    def compose(self) -> ComposeResult:
        """Title, a spinner until the result arrives, the scrollable output."""
        with Vertical(id="exec-dialog", classes="dialog"):
            yield Static(
                Content.assemble(("nvidia-smi in ", "bold"), (self.container, "bold $accent")),
                classes="dialog-title",
            )
            yield LoadingIndicator(id="exec-wait")
            with VerticalScroll(id="exec-scroll"):
                yield Static("", id="exec-output")
            yield Static(Content.styled("Esc closes · ↑↓ scroll", "$text-muted"))

    def on_mount(self) -> None:
        """Start the command."""
        self._run()

    @work(thread=True, group="exec", exit_on_error=False)
    def _run(self) -> None:
        result = self.runner()
        self.app.call_from_thread(self.show_result, result)

    def show_result(self, result: ExecResult) -> None:
        """Replace the spinner with the output."""
        self.result = result
        self.query_one("#exec-wait").display = False
        self.query_one("#exec-output", Static).update(result_content(self.container, result))
        self.query_one("#exec-scroll").focus()

    def action_close(self) -> None:
        """Close (a command still running keeps running in its thread; its result is dropped)."""
        self.dismiss(None)

    def action_scroll_down(self) -> None:
        """Scroll the output."""
        self.query_one("#exec-scroll", VerticalScroll).scroll_down()

    def action_scroll_up(self) -> None:
        """Scroll the output."""
        self.query_one("#exec-scroll", VerticalScroll).scroll_up()


def run_interactive(argv: Sequence[str]) -> int:
    """Run ``argv`` on the real terminal (the TUI is suspended), then wait for Enter.

    Args:
        argv: The full command line (a list: no shell).

    Returns:
        The command's exit status.
    """
    try:
        code = subprocess.run(list(argv), check=False).returncode
    except OSError as error:
        print(f"gputui: could not run {argv[0]}: {error}")
        code = 127
    with contextlib.suppress(EOFError):
        input(f"\n[gputui] exit status {code}. Press Enter to return to gputui… ")
    return code
