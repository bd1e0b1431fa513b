"""Every status and severity style of the UI, in theme variables (light, dark and NO_COLOR alike).

The strings are Textual style strings (``bold $text-error``): ``Content`` resolves them itself.
The container tree's labels and the tables' cells are Rich ``Text``, which knows no theme
variables, so :func:`themed` resolves them against the running app's theme when drawn.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.style import Style as RichStyle
from rich.text import Span, Text
from textual.style import Style
from textual.theme import BUILTIN_THEMES

from gputui.derive.alerts import AlertPhase
from gputui.model.records import record
from gputui.model.status import HealthStatus

ERROR = "bold $text-error"
WARNING = "bold $text-warning"
ACCENT = "bold $text-accent"
SUCCESS = "$text-success"
MUTED = "$text-muted"
EMPH = "bold"

#: Severity word (findings, markers, alerts) -> style. The one table for severities.
SEVERITY_STYLE: Mapping[str, str] = {
    "critical": ERROR,
    "fail": ERROR,
    "warning": WARNING,
    "warn": WARNING,
    "info": ACCENT,
}


def badge(style: str) -> str:
    """A style drawn as a reversed block (status cells that must stand out in a column)."""
    return f"reverse {style}"


#: Health check status -> style of its status cell.
STATUS_STYLE: Mapping[HealthStatus, str] = {
    HealthStatus.FAIL: badge(ERROR),
    HealthStatus.WARN: badge(WARNING),
    HealthStatus.INFO: EMPH,
    HealthStatus.PASS: SUCCESS,
    HealthStatus.SKIP: MUTED,
}

#: Alert phase -> style.
PHASE_STYLE: Mapping[AlertPhase, str] = {
    AlertPhase.FIRING: ERROR,
    AlertPhase.PENDING: WARNING,
    AlertPhase.RESOLVED: SUCCESS,
}


def severity_style(severity: str) -> str:
    """The style of a severity word; an unknown one (from a user's rule file) is a warning."""
    return SEVERITY_STYLE.get(severity, WARNING)


@lru_cache(maxsize=1)
def _default_variables() -> dict[str, str]:
    # Outside a running app (a label rendered in a unit test) the default dark theme applies.
    theme = BUILTIN_THEMES["textual-dark"]
    return {**theme.to_color_system().generate(), **theme.variables}


def rich_style(style: str) -> RichStyle | str:
    """A Textual style string as a Rich style, theme variables resolved by the running app.

    An ``auto`` colour (``$text-muted``) is picked against the background at draw time, which a
    Rich style cannot express: it becomes ``dim``, which reads as muted on every theme.
    """
    if "$" not in style:
        return style
    parsed = Style.parse(style, _default_variables())  # the active app's theme when there is one
    if parsed.foreground is not None and parsed.foreground.auto:
        return parsed.rich_style.without_color + RichStyle(dim=True)
    return parsed.rich_style


def themed(text: Text) -> Text:
    """``text`` with every style that names a theme variable resolved (a copy when any does)."""
    base = text.style
    if not (isinstance(base, str) and "$" in base) and not any(
        isinstance(span.style, str) and "$" in span.style for span in text.spans
    ):
        return text
    out = text.copy()
    if isinstance(base, str):
        out.style = rich_style(base)
    out.spans = [
        Span(s.start, s.end, rich_style(s.style)) if isinstance(s.style, str) else s
        for s in text.spans
    ]
    return out


@record
class Styled:
    """A table cell: Rich text whose theme-variable styles are resolved when drawn.

    Resolving at draw time (not when the cell is built) lets a theme switch recolour cells that
    did not change: the tables drop their render caches when the app's styles change.
    """

    text: Text

    @property
    def plain(self) -> str:
        """The cell's text."""
        return self.text.plain

    def __str__(self) -> str:
        """The cell's text, as ``str`` of a Rich ``Text`` cell gives."""
        return self.text.plain

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        """Render the text, styles resolved."""
        yield themed(self.text)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        """Measure the text as the table measures a ``Text`` cell (unclamped to the console)."""
        return self.text.__rich_measure__(console, options)
