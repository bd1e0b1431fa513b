"""Formatting of numbers for people: sizes, percentages, temperatures, durations.

Every function takes ``None`` ("not available") and returns ``"N/A"`` (or the given ``na``), so
callers never special-case missing data. Shared by the text report and the UI.
"""

from __future__ import annotations

import re
import unicodedata

from gputui.model import THROTTLE_REASONS

NA = "N/A"

# C0/C1 control characters and DEL, and ANSI escape sequences, which must never reach the terminal
# from a container name, label or command line (terminal injection).
_ANSI = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)?|[@-Z\\-_])")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# Invisible format characters: bidirectional overrides and isolates (U+202E makes "exe.txt" read
# as "txt.exe"), zero-width spaces and joiners, the BOM, soft hyphen, interlinear annotation. They
# let a name look like another one, so each shows as "?", like a control character.
_INVISIBLE = re.compile(
    "[\u00ad\u061c\u115f\u1160\u180e\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]"
)
# Categories that never show as themselves: controls, format, surrogates, private use,
# unassigned, line and paragraph separators.
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
# Line and paragraph separators end a line in some terminals and log viewers.
_SEPARATORS = re.compile("[\u2028\u2029\x85]")
# Lone surrogates (undecodable bytes as psutil and os.fsdecode return them) cannot be written by
# any UTF-8 stream: one in a label would crash the report or the TUI mid-write.
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def safe_text(value: str | None, limit: int = 200, na: str = NA) -> str:
    """Make an untrusted string safe and short enough to display on one line.

    Strips ANSI escape sequences, replaces newlines, tabs and line separators with a space, other
    control characters and invisible format characters (bidi overrides, zero-width characters)
    with ``?``, lone surrogates with U+FFFD, and truncates with an ellipsis. This is the one
    sanitiser every output (TUI, text, metrics, logs) passes external strings through.

    Args:
        value: Text from a container, label or process; None for unknown.
        limit: Maximum length of the result.
        na: What to show for None.

    Returns:
        The cleaned text.
    """
    if value is None:
        return na
    text = _SEPARATORS.sub(" ", _ANSI.sub("", value).replace("\n", " ").replace("\t", " "))
    text = _SURROGATE.sub("\ufffd", _INVISIBLE.sub("?", _CONTROL.sub("?", text)))
    if not text.isprintable():
        # Rare: a format or private-use character outside the common set above (Unicode grows
        # new ones). Per-character only here, so the usual printable text costs one C call.
        text = "".join(
            "?" if ch != " " and unicodedata.category(ch) in _HIDDEN_CATEGORIES else ch
            for ch in text
        )
    if len(text) > limit:
        text = text[: max(0, limit - 1)] + "…"
    return text


def size(value: int | float | None, na: str = NA) -> str:
    """Bytes with a binary unit, one decimal below 100 of it: ``512MiB``, ``3.2GiB``, ``121GiB``.

    The one size formatter of every screen and of the text report: a column of sizes may mix
    units (a 300 MiB container above a 60 GiB one), and no small size reads ``0.0GiB``.
    """
    if value is None:
        return na
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(amount) < 1024 or unit == "TiB":
            if unit == "B":
                return f"{int(amount)}B"
            return f"{amount:.1f}{unit}" if abs(amount) < 100 else f"{amount:.0f}{unit}"
        amount /= 1024
    raise AssertionError("unreachable")


def energy(joules: float | None, na: str = NA) -> str:
    """Energy in the unit that keeps 3 significant figures: ``850J``, ``94.3kJ``, ``12.6kWh``.

    A GPU's counter since the driver loaded is often below one kWh: ``0.0kWh`` would say
    nothing.
    """
    if joules is None:
        return na
    if joules < 1e3:
        return f"{joules:.0f}J"
    if joules < 3.6e6:
        return f"{joules / 1e3:.3g}kJ"
    return f"{joules / 3.6e6:.3g}kWh"


def pct(value: float | None, na: str = NA) -> str:
    """A percentage without decimals, e.g. ``"97%"``."""
    if value is None:
        return na
    return f"{value:.0f}%"


def ratio(used: int | float | None, total: int | float | None) -> float | None:
    """``used / total`` as a percentage, None when either is unknown or total is zero."""
    if used is None or total is None or total <= 0:
        return None
    return 100.0 * float(used) / float(total)


def temp(value: int | None, na: str = NA) -> str:
    """Degrees Celsius, e.g. ``"62°C"``."""
    return na if value is None else f"{value}°C"


def watts(value: float | None, na: str = NA) -> str:
    """Watts without decimals, e.g. ``"684W"``."""
    return na if value is None else f"{value:.0f}W"


def mhz(value: int | None, na: str = NA) -> str:
    """A clock, e.g. ``"1980MHz"``."""
    return na if value is None else f"{value}MHz"


def throttle(mask: int | None, na: str = NA, *, include_idle: bool = False) -> str:
    """Names of the active clock-event reasons, ``"none"`` when the GPU runs unthrottled."""
    if mask is None:
        return na
    names = [name for bit, name in THROTTLE_REASONS if mask & bit and (include_idle or bit != 0x01)]
    return ", ".join(names) if names else "none"


def duration(seconds: float | None, na: str = NA) -> str:
    """A compact duration, e.g. ``"45s"``, ``"12m"``, ``"3h05m"``, ``"2d04h"``."""
    if seconds is None:
        return na
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600:02d}h"


def container_status(status: str, exit_code: int | None = None) -> str:
    """A container's state as its row shows it: ``running``, ``exited (3)``, ``created``.

    Args:
        status: The engine's ``State.Status`` (untrusted: pass the result through
            :func:`safe_text`).
        exit_code: ``State.ExitCode`` of a stopped container (None: unknown or running).

    Returns:
        The status, with the exit code of an exited or dead container.
    """
    if exit_code is not None and status in ("exited", "dead"):
        return f"{status} ({exit_code})"
    return status


def gpu_request(value: str | tuple[str, ...] | None, na: str = "-") -> str:
    """A container's GPU request, e.g. ``"all"`` or ``"0,1"``."""
    if value is None:
        return na
    if isinstance(value, str):
        return value
    return ",".join(value) if value else na


_EIGHTHS = " ▏▎▍▌▋▊▉"


def bar(percent: float | None, width: int) -> str:
    """A horizontal gauge of ``width`` cells filled to ``percent`` with eighth-block precision.

    Args:
        percent: 0-100 (clamped); None draws an empty track of light shade.
        width: Cells the gauge occupies (at least 1).

    Returns:
        Exactly ``width`` characters: full blocks, one partial block, then spaces.
    """
    width = max(1, width)
    if percent is None:
        return "░" * width
    eighths = round(max(0.0, min(100.0, float(percent))) / 100.0 * width * 8)
    full, rest = divmod(eighths, 8)
    text = "█" * full
    if rest and full < width:
        text += _EIGHTHS[rest]
    return text.ljust(width)


_SPARKS = "▁▂▃▄▅▆▇█"


def spark(values: list[float] | tuple[float, ...], width: int, low: float, high: float) -> str:
    """A one-line sparkline on a fixed scale, newest sample at the right.

    Fixed bounds (0-100 % for utilization) keep a flat 97 % from looking like wild swings, which
    a min-max scaled sparkline would show. With fewer samples than cells the line is left-padded
    with spaces (history builds up from the right); with more, each cell shows its bucket's max.

    Args:
        values: Samples, oldest first.
        width: Cells (at least 1).
        low: Value drawn as the lowest bar.
        high: Value drawn as the full bar.

    Returns:
        Exactly ``width`` characters.
    """
    width = max(1, width)
    if not values:
        return " " * width
    count = len(values)
    if count > width:
        # Bucket edges by integer arithmetic so every sample lands in exactly one cell.
        cells = [max(values[i * count // width : (i + 1) * count // width]) for i in range(width)]
    else:
        cells = list(values)
    extent = (high - low) or 1.0
    top = len(_SPARKS) - 1
    text = "".join(
        _SPARKS[max(0, min(top, round((value - low) / extent * top)))] for value in cells
    )
    return text.rjust(width)
