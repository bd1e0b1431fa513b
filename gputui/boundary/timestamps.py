"""One way to write a moment: UTC ISO 8601 in machine output, the viewer's local time in the UI."""

from __future__ import annotations

import datetime as dt
import math


def utc(ts: float | None, na: str = "N/A") -> str:
    """``2026-11-30T15:04:05Z``: for reports, JSON-adjacent text, health details and logs.

    Args:
        ts: Seconds since the epoch; None, non-finite or out-of-range values give ``na``.
        na: What to write when there is no usable moment.
    """
    moment = _moment(ts, dt.timezone.utc)
    return na if moment is None else moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def local(ts: float | None, na: str = "N/A", *, date: bool = True) -> str:
    """``2026-11-30 16:04:05`` (or ``16:04:05`` without the date) in the local time zone: the UI.

    Args:
        ts: Seconds since the epoch; None, non-finite or out-of-range values give ``na``.
        na: What to write when there is no usable moment.
        date: Include the date.
    """
    moment = _moment(ts, None)
    if moment is None:
        return na
    return moment.strftime("%Y-%m-%d %H:%M:%S" if date else "%H:%M:%S")


def _moment(ts: float | None, tz: dt.tzinfo | None) -> dt.datetime | None:
    if ts is None or not math.isfinite(ts):
        return None
    try:
        return dt.datetime.fromtimestamp(ts, tz)
    except (OverflowError, OSError, ValueError):
        # Years beyond 9999 or before 1 (a corrupt recording): no moment to show.
        return None
