"""``nvidia-smi`` inside a container: captured in a modal (``x``) or interactive (``X``)."""

from __future__ import annotations

import contextlib
import subprocess
import textwrap
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import ScrollableContainer, Vertical
from textual.content import Content
from textual.css.query import NoMatches
from textual.screen import ModalScreen
from textual.widgets import LoadingIndicator, Static

from gputui.boundary import sanitise
from gputui.model.containers import ExecResult

#: Why the two process lists differ; shown under every result.
PID_NAMESPACE_NOTE = (
    "Why this list may differ from gputui's: NVML on the host reports host PIDs, while nvidia-smi "
    "inside the container runs in the container's PID namespace and shows only that container's "
    "processes, with in-container PIDs (often none at all: without --pid=host a container cannot "
    "map GPU processes to its own PIDs). gputui shows both: PID is the host PID; the in-container "
    "PID is the number in parentheses after it in the tree, e.g. 48211 (7), and CPID in the "
    "process table."
)

#: Columns of gputui's own notes in the output view (which does not wrap).
PROSE_WIDTH = 70

#: Lines of each stream shown; nvidia-smi prints a few dozen, a hostile binary may print millions.
MAX_OUTPUT_LINES = 2000
#: Characters of each shown line (the view scrolls sideways; nvidia-smi's lines are 91).
MAX_LINE_CHARS = 400
#: Characters of one stream sanitised for the modal, at most: the result is drawn in one UI
#: handler, and 1 MiB of binary output took ~0.4 s there. The rest is counted, not shown.
MAX_OUTPUT_CHARS = 256 << 10

#: How the collector says it cut a command's output (``... more than 1 MiB: the output was cut``).


@dataclass
class ExecRun:
    """One captured run of ``nvidia-smi`` in a container, from start to result.

    The app keeps at most one per container while it runs; the modal shows its state.

    Attributes:
        container_id: The container's full id.
        container: Its display name (already safe).
        timeout_s: How long the collector waits for the command.
        started: ``time.monotonic()`` at the start.
        result: What the collector returned; None while it runs.
    """

    container_id: str
    container: str
    timeout_s: float
    started: float = field(default_factory=time.monotonic)
    result: ExecResult | None = None


def output_cut_mib(result: ExecResult) -> str | None:
    """The size at which the collector cut the command's output (``"1"``), None when it did not."""
    if result.output_cut_bytes is None:
        return None
    return f"{result.output_cut_bytes / 2**20:g}"


def _stream_lines(name: str, stream: str) -> list[str | tuple[str, str]]:
    parts: list[str | tuple[str, str]] = ["\n", (f"── {name} ──", "$text-muted"), "\n"]
    lines = stream.splitlines()
    budget = MAX_OUTPUT_CHARS
    shown = 0
    for line in lines[:MAX_OUTPUT_LINES]:
        if budget <= 0:
            break
        # Cut before sanitising: a single 1 MiB line costs its whole length in safe_text.
        piece = line[: min(budget, 4 * MAX_LINE_CHARS)]
        budget -= len(piece)
        parts += [sanitise.safe_text(piece, MAX_LINE_CHARS, na=""), "\n"]
        shown += 1
    if len(lines) > shown:
        more = len(lines) - shown
        parts += [(f"… {more:,} more lines not shown", "italic $text-warning"), "\n"]
    return parts


def _prose(text: str) -> str:
    # The output does not wrap (it scrolls sideways); gputui's own sentences are wrapped here so
    # that they read without scrolling at 80 columns.
    return textwrap.fill(text, PROSE_WIDTH, break_long_words=False, break_on_hyphens=False)


def result_content(container: str, result: ExecResult) -> Content:
    """Exit code, duration, a one-line diagnosis, stdout and stderr, then notes.

    Each stream shows at most :data:`MAX_OUTPUT_LINES` lines; a cut output says where it was
    cut; the PID-namespace note comes only with a successful run (exit 0), the only kind that
    printed a process list.

    Args:
        container: The container's display name (already safe).
        result: What the collector returned.

    Returns:
        The body of the modal; output keeps its lines but loses control, bidi and zero-width
        characters.
    """
    argv = " ".join(sanitise.safe_text(a, 80) for a in result.argv) or "nvidia-smi"
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
        parts += [(_prose(sanitise.safe_text(result.error, 500)), "bold $text-error"), "\n"]
    for name, stream in (("stdout", result.stdout), ("stderr", result.stderr)):
        if stream:
            parts += _stream_lines(name, stream)
    cut = output_cut_mib(result)
    if cut is not None:
        parts += [(f"(output cut at {cut} MiB)", "italic $text-warning"), "\n"]
    if not result.stdout and not result.stderr and not result.error:
        parts += ["\n", ("(no output)", "$text-muted"), "\n"]
    if result.exit_code == 0:
        # Only a list nvidia-smi actually printed can differ from gputui's.
        parts += ["\n", (_prose(PID_NAMESPACE_NOTE), "italic $text-muted")]
    return Content.assemble(*parts)


class ExecScreen(ModalScreen[None]):
    """Shows one :class:`ExecRun`: a running state until its result arrives, then the result.

    The command runs in the app's worker, not here: closing the modal leaves it to finish (the
    collector stops it at its timeout, or when gputui quits), and ``x`` while it runs re-opens
    this view of it instead of starting another.
    """

    DEFAULT_CSS = """
    ExecScreen #exec-scroll { overflow-x: auto; overflow-y: auto; }
    ExecScreen #exec-output { width: auto; }
    """

    BINDINGS = [
        Binding("escape,q", "close", "Close"),
        Binding("j", "scroll_down", "Down", show=False),
        Binding("k", "scroll_up", "Up", show=False),
    ]

    def __init__(self, run: ExecRun) -> None:
        super().__init__()
        self.exec_run = run

    @property
    def container(self) -> str:
        """The container's display name."""
        return self.exec_run.container

    @property
    def result(self) -> ExecResult | None:
        """The result shown; None while the command runs."""
        return self.exec_run.result

    def compose(self) -> ComposeResult:
        """Title, the running state until the result arrives, the scrollable output."""
        with Vertical(id="exec-dialog", classes="dialog"):
            yield Static(
                Content.assemble(("nvidia-smi in ", "bold"), (self.container, "bold $accent")),
                classes="dialog-title",
            )
            yield Static(self._running_text(), id="exec-state")
            yield LoadingIndicator(id="exec-wait")
            # Output keeps its lines: nvidia-smi's 91-column table scrolls sideways, never wraps.
            with ScrollableContainer(id="exec-scroll"):
                yield Static("", id="exec-output")
            yield Static(Content.styled("Esc closes · ↑↓ ←→ scroll", "$text-muted"))

    def _running_text(self) -> Content:
        wait = (
            f"stopped after {self.exec_run.timeout_s:g} s; closing this keeps it running (x shows "
            "it again; quitting gputui stops it)"
        )
        return Content.assemble(("Running… ", "bold $text-warning"), (wait, "$text-muted"))

    def on_mount(self) -> None:
        """Show the result at once when the command already finished."""
        if self.exec_run.result is not None:
            self.show_result(self.exec_run.result)

    def show_result(self, result: ExecResult) -> None:
        """Replace the running state with the output."""
        try:
            wait = self.query_one("#exec-wait")
        except NoMatches:
            # Pushed but not composed yet (the run ended as ``x`` re-opened it): on_mount
            # shows the result, which the run already holds.
            return
        wait.display = False
        self.query_one("#exec-state").display = False
        self.query_one("#exec-output", Static).update(result_content(self.container, result))
        self.query_one("#exec-scroll").focus()

    def action_close(self) -> None:
        """Close (a command still running keeps running; ``x`` shows it again)."""
        self.dismiss(None)

    def action_scroll_down(self) -> None:
        """Scroll the output."""
        self.query_one("#exec-scroll", ScrollableContainer).scroll_down()

    def action_scroll_up(self) -> None:
        """Scroll the output."""
        self.query_one("#exec-scroll", ScrollableContainer).scroll_up()


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
