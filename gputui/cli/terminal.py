"""How a command talks to its terminal: guarded output, exit codes, stopping on signals.

When the reader of a pipe goes away (``gputui --once | head -1``) gputui stops quietly with
status 141 (128 + SIGPIPE); any other write failure (``>/dev/full``, a closed stdout) is one line
on stderr and status 2. Text the output encoding cannot represent is replaced, never an error.
"""

from __future__ import annotations

import io
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass


EXIT_USAGE = 2
#: The status when stdout's reader went away (128 + SIGPIPE, as a shell shows a SIGPIPE death).
EXIT_BROKEN_PIPE = 141


class _OutputError(Exception):
    """Standard output cannot be written (full disk, closed descriptor); not a broken pipe."""


def write_out(text: str) -> None:
    """Write to stdout, turning a failure other than a broken pipe into :class:`_OutputError`."""
    if sys.stdout is None:  # started with stdout closed (`gputui --once >&-`)
        raise _OutputError("standard output is closed")
    try:
        sys.stdout.write(text)
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise _OutputError(exc.strerror or str(exc)) from None


def flush_out() -> None:
    """Flush stdout, turning a failed write into the output error of :func:`write_out`."""
    if sys.stdout is None:
        return
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except (OSError, ValueError) as exc:  # ValueError: the stream was closed under us
        raise _OutputError(getattr(exc, "strerror", None) or str(exc)) from None


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null so the interpreter's final flush of what is left cannot fail.

    This is the recipe of the Python documentation (signal module, "Note on SIGPIPE").
    """
    if sys.stdout is None:
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _tolerant_output() -> None:
    """Never fail on encoding: an ASCII or Latin-1 locale gets ``?`` for ``°``, ``…``, ``≤``."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
            stream.reconfigure(errors="replace")


#: Why the monitor does not start without a terminal (it would write escape codes forever).
NOT_A_TERMINAL = (
    "the monitor needs a terminal (stdin and stdout); for a report use --once or --once --json"
)


def on_terminal() -> bool:
    """Whether stdin and stdout are both terminals (the monitor reads keys and draws there)."""
    for stream in (sys.stdin, sys.stdout):
        try:
            if stream is None or not stream.isatty():
                return False
        except (OSError, ValueError):  # a closed stream
            return False
    return True


def fail_usage(message: str) -> int:
    """Print ``gputui: error: <message>`` (sanitised) on stderr; the usage exit status."""
    from gputui.boundary.sanitise import safe_text

    # Messages quote file content and paths: one line, no terminal escapes, bounded.
    print(f"gputui: error: {safe_text(message, 1000)}", file=sys.stderr)
    return EXIT_USAGE


def stop_on_signals() -> threading.Event:
    """An event set by SIGTERM or SIGINT, so loops end cleanly and close their sources.

    A second signal while the first is being honoured (a collect stuck on a hung source)
    takes the default action: the process ends at once.
    """
    stop = threading.Event()

    def handler(signum: int, _frame: object) -> None:
        if stop.is_set():
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, handler)
    return stop


def log_line(line: str) -> None:
    """One line on stderr (a delivery's problem: already redacted and sanitised)."""
    print(f"gputui: {line}", file=sys.stderr, flush=True)
