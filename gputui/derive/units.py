"""Figures for people: sizes, percentages, temperatures, durations, bars and sparklines.

Numbers stay numbers in the model; these turn them into the short text every front-end shows. A
value that is not available is ``N/A``, never zero.
"""

from __future__ import annotations

from gputui.boundary.sanitise import NA
from gputui.model.gpu import THROTTLE_REASONS


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
