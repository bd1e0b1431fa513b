"""What a crash prints: a traceback without local variables, its texts sanitised and redacted.

Textual renders an unhandled exception with rich's ``Traceback(show_locals=True)``: every frame's
locals, which while parsing an engine reply include a container's inspect data (``'Env':
['API_KEY=…']``). The app renders crashes with :func:`crash_report` instead.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from gputui.derive.fmt import safe_text

if TYPE_CHECKING:
    # rich.traceback pulls in rich.syntax and Pygments (~45 ms, several MB): imported only
    # when a crash is reported, not on every start.
    from rich.traceback import Stack, Trace, Traceback

#: ``NAME=value`` as environment variables, labels and command lines write it: the value goes.
_ASSIGNMENT = re.compile(r"\b([A-Za-z_][A-Za-z0-9_.-]*)=([^\s,;'\"\]\)}]+)")

#: Longest exception message kept (a reply echoed into an exception can be megabytes).
MESSAGE_LIMIT = 500

#: Frames kept per exception (rich keeps the outermost and innermost halves).
MAX_FRAMES = 40


def redact(text: str | None, limit: int = MESSAGE_LIMIT) -> str:
    """An exception text fit to print: one safe line, ``NAME=value`` values replaced by ``…``.

    Args:
        text: The message (of an exception, a note, a syntax error).
        limit: Maximum length of the result.

    Returns:
        The cleaned text.
    """
    return safe_text(_ASSIGNMENT.sub(r"\1=…", text or ""), limit, na="")


def _clean_stack(stack: Stack) -> None:
    stack.exc_type = redact(stack.exc_type, 200)
    stack.exc_value = redact(stack.exc_value)
    stack.notes = [redact(note) for note in stack.notes[:10]]
    if stack.syntax_error is not None:
        stack.syntax_error.msg = redact(stack.syntax_error.msg)
        stack.syntax_error.line = redact(stack.syntax_error.line)
    for frame in stack.frames:
        frame.locals = None  # never extracted; cleared again should rich ever default to it
        frame.line = redact(frame.line)
    for inner in stack.exceptions:
        _clean_trace(inner)


def _clean_trace(trace: Trace) -> None:
    for stack in trace.stacks:
        _clean_stack(stack)


def crash_trace(error: BaseException) -> Trace:
    """The frames and messages of ``error`` (and its causes), without any local variable.

    Args:
        error: The exception that ended the app (raised, so it has a traceback).

    Returns:
        rich's description of the traceback, every message redacted.
    """
    from rich.traceback import Traceback

    trace = Traceback.extract(type(error), error, error.__traceback__, show_locals=False)
    _clean_trace(trace)
    return trace


def crash_report(error: BaseException) -> Traceback:
    """A renderable traceback of ``error``: source lines and positions, never locals or secrets.

    Args:
        error: The exception that ended the app.

    Returns:
        What to print on the error console.
    """
    from rich.traceback import Traceback

    return Traceback(crash_trace(error), show_locals=False, max_frames=MAX_FRAMES, width=100)
