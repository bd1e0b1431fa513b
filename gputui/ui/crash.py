"""The one crash path of every gputui App: a traceback without locals, secrets redacted, status 1.

Textual renders an unhandled exception with rich's ``Traceback(show_locals=True)``: every frame's
locals, which while parsing an engine reply include a container's inspect data (``'Env':
['API_KEY=…']``) and while asking Prometheus the request's ``header = 'Bearer …'``. Every App
class in gputui derives from :class:`CrashSafeApp` and is run by :func:`run_app`, so a crash in a
handler, a worker, layout or rendering, or one that escapes Textual, prints
:func:`crash_report` instead and ends the process with a non-zero status
(``tests/ui/test_crash_path.py`` fails for an App class that does not).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from rich.segment import Segments
from textual.app import App
from textual.worker import WorkerFailed

from gputui.boundary.sanitise import safe_text
from gputui.ui.textual_compat import end_app_after_crash

if TYPE_CHECKING:
    # rich.traceback pulls in rich.syntax and Pygments (~45 ms, several MB): imported only
    # when a crash is reported, not on every start.
    from rich.console import RenderableType
    from rich.traceback import Stack, Trace, Traceback

#: ``NAME=value`` as environment variables, labels and command lines write it: the value goes.
_ASSIGNMENT = re.compile(r"\b([A-Za-z_][A-Za-z0-9_.-]*)=([^\s,;'\"\]\)}]+)")
#: HTTP credentials as a header, a log line or an exception message writes them.
_CREDENTIAL = re.compile(
    r"\b((?:Proxy-)?Authorization:?\s+(?:(?:Bearer|Basic)\s+)?|(?:Bearer|Basic)\s+)"
    r"([^\s,;'\"\]\)}]+)",
    re.IGNORECASE,
)
#: Environment variables whose values are secrets by their name (``GPUTUI_PROMETHEUS_TOKEN``,
#: ``AWS_SECRET_ACCESS_KEY``, ``DOCKER_AUTH_CONFIG``…): redacted wherever they appear.
_SECRET_NAME = re.compile(r"TOKEN|PASSW|SECRET|KEY|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)
#: Shorter values are not redacted by value (they would blank common words); patterns still apply.
MIN_SECRET_CHARS = 4

#: Longest exception message kept (a reply echoed into an exception can be megabytes).
MESSAGE_LIMIT = 500

#: Frames kept per exception (rich keeps the outermost and innermost halves).
MAX_FRAMES = 40

#: Exit status after a crash.
CRASH_STATUS = 1


def environment_secrets(environ: dict[str, str] | os._Environ[str] | None = None) -> set[str]:
    """Values of the environment variables whose names say they hold secrets.

    Args:
        environ: The environment; the process's own when None.

    Returns:
        Those values of at least :data:`MIN_SECRET_CHARS` characters.
    """
    env = os.environ if environ is None else environ
    return {
        value
        for name, value in env.items()
        if _SECRET_NAME.search(name) and len(value) >= MIN_SECRET_CHARS
    }


def redact(text: str | None, limit: int = MESSAGE_LIMIT, secrets: Iterable[str] = ()) -> str:
    """A text fit to print: one safe line, secrets and ``NAME=value`` values replaced by ``…``.

    Args:
        text: The message (of an exception, a note, a syntax error, a source line).
        limit: Maximum length of the result.
        secrets: Values never to print (config secrets, credentials), wherever they appear.

    Returns:
        The cleaned text.
    """
    cleaned = text or ""
    # Longest first: a secret containing another is replaced whole.
    for secret in sorted(set(secrets), key=len, reverse=True):
        if len(secret) >= MIN_SECRET_CHARS and secret in cleaned:
            cleaned = cleaned.replace(secret, "…")
    cleaned = _CREDENTIAL.sub(r"\1…", cleaned)
    return safe_text(_ASSIGNMENT.sub(r"\1=…", cleaned), limit, na="")


def _clean_stack(stack: Stack, secrets: frozenset[str]) -> None:
    stack.exc_type = redact(stack.exc_type, 200, secrets)
    stack.exc_value = redact(stack.exc_value, MESSAGE_LIMIT, secrets)
    stack.notes = [redact(note, MESSAGE_LIMIT, secrets) for note in stack.notes[:10]]
    if stack.syntax_error is not None:
        stack.syntax_error.msg = redact(stack.syntax_error.msg, MESSAGE_LIMIT, secrets)
        stack.syntax_error.line = redact(stack.syntax_error.line, MESSAGE_LIMIT, secrets)
    for frame in stack.frames:
        frame.locals = None  # never extracted; cleared again should rich ever default to it
        frame.line = redact(frame.line, MESSAGE_LIMIT, secrets)
    for inner in stack.exceptions:
        _clean_trace(inner, secrets)


def _clean_trace(trace: Trace, secrets: frozenset[str]) -> None:
    for stack in trace.stacks:
        _clean_stack(stack, secrets)


def crash_trace(error: BaseException, secrets: Iterable[str] = ()) -> Trace:
    """The frames and messages of ``error`` (and its causes), without any local variable.

    Args:
        error: The exception that ended the app (raised, so it has a traceback).
        secrets: Values to redact besides the environment's secrets and ``NAME=value`` values.

    Returns:
        rich's description of the traceback, every message redacted.
    """
    from rich.traceback import Traceback

    trace = Traceback.extract(type(error), error, error.__traceback__, show_locals=False)
    _clean_trace(trace, frozenset(secrets) | environment_secrets())
    return trace


def crash_report(error: BaseException, secrets: Iterable[str] = ()) -> Traceback:
    """A renderable traceback of ``error``: source lines and positions, never locals or secrets.

    Args:
        error: The exception that ended the app.
        secrets: Values to redact besides the environment's secrets and ``NAME=value`` values.

    Returns:
        What to print on the error console.
    """
    from rich.traceback import Traceback

    return Traceback(
        crash_trace(error, secrets), show_locals=False, max_frames=MAX_FRAMES, width=100
    )


class CrashSafeApp(App[None]):
    """The base of every gputui App: its crashes go through :func:`crash_report`.

    Attributes:
        crash_secrets: Values no crash report may print (the config file's credentials, the
            Prometheus token...); add with :meth:`keep_secret`. The environment's secrets
            (:func:`environment_secrets`) are always redacted.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.crash_secrets: set[str] = set()

    def keep_secret(self, *values: str | None) -> None:
        """Never print these values in a crash report (None and short values are ignored)."""
        self.crash_secrets.update(v for v in values if v and len(v) >= MIN_SECRET_CHARS)

    def _handle_exception(self, error: Exception) -> None:
        """Every unhandled exception ends the app with status 1 and a traceback without locals.

        Textual's own rendering (``rich.traceback.Traceback(show_locals=True)``, or the error's
        ``__rich__``) prints every frame's variables. Textual calls this for errors in handlers,
        workers, layout and rendering alike, so replacing it covers them all.
        """
        cause = error.error if isinstance(error, WorkerFailed) else error
        report = crash_report(cause, self.crash_secrets)
        rendered = self.console.render(report, self.console.options)
        end_app_after_crash(self, error, Segments(rendered))

    def panic(self, *renderables: RenderableType) -> None:
        """Textual's panic (a driver's input thread failed), its tracebacks cleaned, status 1."""
        from rich.traceback import Traceback

        secrets = frozenset(self.crash_secrets) | environment_secrets()
        for renderable in renderables:
            if isinstance(renderable, Traceback):
                renderable.show_locals = False
                _clean_trace(renderable.trace, secrets)
        cleaned = [
            redact(r, MESSAGE_LIMIT, secrets) if isinstance(r, str) else r for r in renderables
        ]
        self._return_code = CRASH_STATUS
        super().panic(*cleaned)


def run_app(build: Callable[[], CrashSafeApp], *, headless: bool = False) -> int:
    """Build an App and run it until it ends; the process's exit status.

    Args:
        build: Makes the App (every gputui App derives from :class:`CrashSafeApp`); called
            here so that a failure while building it gets the same report.
        headless: Run without a terminal, as the tests do.

    Returns:
        0 after a normal quit, :data:`CRASH_STATUS` after a crash, whether Textual caught it
        (its report is printed once the screen is gone) or it escaped Textual (printed here).
    """
    app: CrashSafeApp | None = None
    try:
        app = build()
        app.run(headless=headless)
    except Exception as error:  # escaped Textual's own handler: the same report, status 1
        from rich.console import Console

        secrets = app.crash_secrets if app is not None else ()
        Console(stderr=True).print(crash_report(error, secrets))
        return CRASH_STATUS
    # Textual sets 1 when an exception ended the app; None or 0 after a normal quit.
    return app.return_code or 0
