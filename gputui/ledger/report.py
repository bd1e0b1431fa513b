"""Sums of the store over a window, grouped, and their table, CSV and JSON forms.

Pure apart from reading the store. Names from outside (containers, images, projects, users)
pass :func:`~gputui.boundary.sanitise.safe_text` in every form.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gputui.boundary.sanitise import safe_text

if TYPE_CHECKING:
    # Types only: the store (sqlite3) is loaded by who opens it.
    from gputui.ledger.quantities import Gap
    from gputui.ledger.store import Coverage, UsageRow
    from gputui.model.settings import Prices

#: What ``--by`` groups by.
GROUPINGS = ("owner", "container", "project", "image", "gpu", "user")
#: Output formats.
FORMATS = ("table", "csv", "json")
#: The owner of a subject nothing names (docs/ledger.md: owners).
UNKNOWN_OWNER = "unknown"


@dataclass(slots=True)
class Line:
    """One group's totals (hours, GiB-hours, kWh, the configured currency)."""

    key: str
    reserved_h: float = 0.0
    occupied_h: float = 0.0
    busy_h: float = 0.0
    waste_h: float = 0.0
    mem_gib_h: float = 0.0
    mem_peak_gib: float = 0.0
    kwh: float = 0.0
    cost: float | None = None

    @property
    def efficiency(self) -> float | None:
        """Busy over reserved (over occupied when nothing was reserved), 0-1; None: neither."""
        base = self.reserved_h or self.occupied_h
        return None if base <= 0 else self.busy_h / base


def group_key(row: UsageRow, by: str) -> str:
    """The group a row belongs to under ``--by``."""
    s = row.subject
    if by == "gpu":
        return f"{row.device} {row.model or ''}".strip()
    if by == "owner":
        if s.kind in ("container", "user"):
            return row.owner or s.owner or UNKNOWN_OWNER
        return s.name  # PIDs nobody can find ("unknown"), or nobody ("unallocated")
    if s.kind != "container":
        label = s.name if s.kind != "user" else f"host:{s.name}"
        if by == "user":
            return s.name if s.kind == "user" else f"({s.kind})"
        return label
    if by == "container":
        return s.name
    if by == "project":
        return s.project or "(no project)"
    if by == "image":
        return s.image or "(no image)"
    return "(container)"  # by == "user": a container's processes are not a host user's


def summarise(rows: Sequence[UsageRow], by: str, prices: Prices) -> list[Line]:
    """The rows grouped, biggest reservation (then busy time) first."""
    lines: dict[str, Line] = {}
    for row in rows:
        a = row.amounts
        key = group_key(row, by)
        line = lines.get(key)
        if line is None:
            line = lines[key] = Line(key)
        line.reserved_h += a.reserved_s / 3600
        line.occupied_h += a.occupied_s / 3600
        line.busy_h += a.busy_s / 3600
        if a.reserved_s > 0:
            line.waste_h += max(0.0, a.reserved_s - a.busy_s) / 3600
        line.mem_gib_h += a.mem_gib_s / 3600
        line.mem_peak_gib = max(line.mem_peak_gib, a.mem_peak_bytes / 1024**3)
        kwh = a.energy_j / 3.6e6
        line.kwh += kwh
        if prices.any:
            cost = 0.0
            if prices.kwh is not None:
                cost += kwh * prices.kwh
            rate = prices.gpu_hour.get(row.model or "")
            if rate is not None and row.subject.kind != "unallocated":
                cost += max(a.reserved_s, a.occupied_s) / 3600 * rate
            line.cost = (line.cost or 0.0) + cost
    return sorted(lines.values(), key=lambda x: (-x.reserved_h, -x.busy_h, x.key))


def parse_since(text: str, now: float) -> float:
    """``30d``, ``12h``, ``90m``, ``today``, ``YYYY-MM-DD`` or ISO time → seconds since the epoch.

    Raises:
        ValueError: one line naming the value.
    """
    value = text.strip()
    match = re.fullmatch(r"([0-9]{1,6})([dhm])", value)
    if match:
        n, unit = int(match.group(1)), match.group(2)
        seconds = n * {"d": 86400, "h": 3600, "m": 60}[unit]
        if seconds > 100 * 365 * 86400:
            raise ValueError(f"--since: at most 100 years, got {safe_text(text, 40)}")
        return now - seconds
    if value == "today":
        local = dt.datetime.fromtimestamp(now).astimezone()
        return local.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
    if len(value) <= 40:
        try:
            when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            if when.tzinfo is None:
                when = when.astimezone()  # a local time, as people write dates
            return when.timestamp()
    raise ValueError(
        f"--since: expected 30d, 12h, 90m, today or a date such as 2026-11-01,"
        f" got {safe_text(text, 40)}"
    )


def _n(value: float, digits: int = 2) -> str:
    """``digits`` decimals, or 3 significant digits for a small figure (a short window)."""
    if 0 < abs(value) < 1:
        return f"{value:.3g}"
    return f"{value:.{digits}f}"


def _coverage_line(coverage: Coverage, since: float, until: float, gaps: Sequence[Gap]) -> str:
    window = max(1e-9, until - since)
    covered = min(100.0, 100 * coverage.wall_s / window)
    longest = max((g.end - g.start for g in gaps), default=0.0)
    text = f"covered {covered:.1f} % of the window"
    if gaps:
        text += f"; {len(gaps)} gap(s), longest {longest / 60:.1f} min"
    return text


_COLUMNS = (
    "reserved_gpu_h",
    "occupied_gpu_h",
    "busy_gpu_h",
    "efficiency_pct",
    "waste_gpu_h",
    "mem_gib_h",
    "mem_peak_gib",
    "kwh",
    "cost",
)


def _cells(line: Line) -> list[str]:
    eff = line.efficiency
    return [
        _n(line.reserved_h),
        _n(line.occupied_h),
        _n(line.busy_h),
        "" if eff is None else _n(eff * 100, 1),
        _n(line.waste_h),
        _n(line.mem_gib_h, 1),
        _n(line.mem_peak_gib, 1),
        _n(line.kwh, 3),
        "" if line.cost is None else _n(line.cost),
    ]


def _values(line: Line) -> dict[str, float | None]:
    eff = line.efficiency
    return {
        "reserved_gpu_h": round(line.reserved_h, 6),
        "occupied_gpu_h": round(line.occupied_h, 6),
        "busy_gpu_h": round(line.busy_h, 6),
        "efficiency_pct": None if eff is None else round(eff * 100, 3),
        "waste_gpu_h": round(line.waste_h, 6),
        "mem_gib_h": round(line.mem_gib_h, 6),
        "mem_peak_gib": round(line.mem_peak_gib, 3),
        "kwh": round(line.kwh, 6),
        "cost": None if line.cost is None else round(line.cost, 4),
    }


def render(
    lines: Sequence[Line],
    *,
    by: str,
    fmt: str,
    since: float,
    until: float,
    coverage: Coverage,
    gaps: Sequence[Gap],
    status: str,
    prices: Prices,
) -> str:
    """The report in ``fmt`` (``table``, ``csv`` or ``json``)."""
    if fmt == "json":
        doc = {
            "since": _iso(since),
            "until": _iso(until),
            "by": by,
            "store": safe_text(status, 400),
            "currency": safe_text(prices.currency, 12),
            "coverage": {
                "wall_s": round(coverage.wall_s, 3),
                "device_s": round(coverage.device_s, 3),
                "energy_j": round(coverage.energy_j, 3),
            },
            "gaps": [
                {"start": _iso(g.start), "end": _iso(g.end), "reason": safe_text(g.reason, 200)}
                for g in gaps
            ],
            "estimates": ["busy_gpu_h", "kwh", "cost", "waste_gpu_h"],
            "sampled": True,
            "rows": [{"key": safe_text(line.key, 200)} | _values(line) for line in lines],
        }
        return json.dumps(doc, indent=1) + "\n"
    if fmt == "csv":
        import csv  # here: the config's prices import this module, a CSV is rarely asked for

        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow([by, *_COLUMNS])
        for line in lines:
            values = _values(line)
            figures = ("" if values[c] is None else values[c] for c in _COLUMNS)
            writer.writerow([safe_text(line.key, 200), *figures])
        return out.getvalue()
    head = [by.upper(), "RESERVED", "OCCUPIED", "BUSY", "EFF%", "WASTE", "GiB-h", "PEAK", "kWh"]
    if prices.any:
        head.append(f"COST {safe_text(prices.currency, 8)}".strip())
    table = [head]
    for line in lines:
        cells = _cells(line)
        table.append([safe_text(line.key, 40), *(cells if prices.any else cells[:-1])])
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    text = [
        f"gputui ledger {_iso(since)} .. {_iso(until)}, by {by}: GPU-hours"
        f" ({_coverage_line(coverage, since, until, gaps)})",
        safe_text(status, 400),
    ]
    for r in table:
        text.append(
            "  ".join(
                c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r)
            ).rstrip()
        )
    if not lines:
        text.append("(nothing recorded in this window)")
    text.append(
        "busy, waste, kWh per subject and cost are estimates (kernel time split by SM share,"
        " energy split); all totals are sampled at the collection interval"
    )
    return "\n".join(text) + "\n"


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
