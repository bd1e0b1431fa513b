"""``gputui fleet --once`` (a text table) and ``--json`` (a document for scripts).

Shared with the fleet screen: the cell texts of a host row (:func:`cells`), so the terminal and
the report read the same. Every label value was sanitised when the model was built.
"""

from __future__ import annotations

from typing import Any

from gputui.boundary import sanitise
from gputui.derive import units
from gputui.fleet.model import MIB, HostDetail, HostRow, Kind
from gputui.fleet.source import FleetSnapshot

#: The host table's columns, in order (header texts).
COLUMNS = (
    "HOST",
    "STATE",
    "GPUS",
    "UTIL",
    "MEMORY",
    "POWER",
    "HOT",
    "TOP CONTAINERS",
    "IDLE",
    "ALERTS",
    "CHECKS",
)


def state(row: HostRow) -> str:
    """``up``/``down`` with the staleness: ``up 3s``, ``down``, ``stale 2m``, ``gone``."""
    if row.up is None:
        return "gone"  # Prometheus has no up series any more (target removed or data expired)
    if not row.up:
        return "down"
    age = row.collect_age_s
    if age is not None and age > 60:
        return f"stale {units.duration(age)}"  # scraped, but gputui's collection hangs
    return f"up {units.duration(row.scrape_age_s)}"


def memory(used_mib: float | None, total_mib: float | None) -> str:
    """``used/total`` in binary units, e.g. ``12.5GiB/1.1TiB``."""
    if used_mib is None:
        return sanitise.NA
    used = units.size(used_mib * MIB)
    return used if total_mib is None else f"{used}/{units.size(total_mib * MIB)}"


def top(row: HostRow) -> str:
    """The containers holding the most GPU memory: ``trainer 40GiB, infer-0/server 2GiB``.

    A Kubernetes pod's container is named ``pod/container``, so two pods' ``server`` read apart.
    """
    if row.kind is Kind.DCGM:
        return "(dcgm)"  # plain dcgm-exporter series name no containers
    if row.down or not row.top:
        return "-"
    return ", ".join(f"{t.shown} {units.size(t.memory_bytes)}" for t in row.top)


def checks(row: HostRow) -> str:
    """Failing and warning health checks, and silent sources: ``2 fail 1 warn``."""
    if row.kind is Kind.DCGM or row.down:
        return "-"  # dcgm-exporter has no health checks; a down host's are unknown
    parts = []
    if row.failing:
        parts.append(f"{row.failing} fail")
    if row.warning:
        parts.append(f"{row.warning} warn")
    if row.sources_down:
        parts.append(f"{row.sources_down} src down")
    return " ".join(parts) or "ok"


def cells(row: HostRow) -> tuple[str, ...]:
    """The texts of one host row, in :data:`COLUMNS` order."""
    temp = None if row.temp_max_c is None else round(row.temp_max_c)
    idle = "-" if row.idle_reservations is None or row.down else str(row.idle_reservations)
    return (
        row.host,
        state(row),
        str(row.gpus),
        units.pct(row.util_pct),
        memory(row.mem_used_mib, row.mem_total_mib),
        units.watts(row.power_w),
        units.temp(temp),
        top(row),
        idle,
        str(row.alerts),
        checks(row),
    )


def to_text(snapshot: FleetSnapshot) -> str:
    """The host table as aligned text, a summary line first."""
    rows = [COLUMNS, *(cells(r) for r in snapshot.hosts)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    down = sum(1 for r in snapshot.hosts if r.down)
    gpus = sum(r.gpus for r in snapshot.hosts)
    lines = [
        f"{len(snapshot.hosts)} hosts ({down} down), {gpus} GPUs, from {snapshot.source}",
        *("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows),
    ]
    if not snapshot.hosts:
        lines.append(
            "no GPU hosts in Prometheus: check that it scrapes gputui export or "
            "dcgm-exporter, and the --match selector"
        )
    return "\n".join(lines) + "\n"


def _round(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


def host_json(row: HostRow) -> dict[str, Any]:
    """One host for ``--json``."""
    return {
        "host": row.host,
        "instance": row.instance,
        "job": row.job,
        "kind": row.kind.value,
        "up": row.up,
        "scrape_age_s": _round(row.scrape_age_s),
        "collect_age_s": _round(row.collect_age_s),
        "gpus": row.gpus,
        "util_pct": _round(row.util_pct),
        "memory_used_mib": _round(row.mem_used_mib, 0),
        "memory_total_mib": _round(row.mem_total_mib, 0),
        "power_w": _round(row.power_w),
        "temp_max_c": _round(row.temp_max_c),
        "containers": row.containers,
        "top_containers": [
            {
                "name": t.name,
                "pod": t.pod or None,
                "namespace": t.namespace or None,
                "gpu_memory_bytes": t.memory_bytes,
            }
            for t in row.top
        ],
        "idle_reservations": row.idle_reservations,
        "alerts_firing": row.alerts,
        "checks_failing": row.failing,
        "checks_warning": row.warning,
        "sources_down": row.sources_down,
    }


def to_json(snapshot: FleetSnapshot) -> dict[str, Any]:
    """The fleet for ``--json``: the source, the time, and one object per host."""
    return {
        "source": snapshot.source,
        "taken_at": round(snapshot.taken_at, 3),
        "query_seconds": round(snapshot.query_s, 4),
        "hosts": [host_json(r) for r in snapshot.hosts],
    }


def detail_json(detail: HostDetail) -> dict[str, Any]:
    """One host's drill-down for ``--json --host``."""
    return {
        "gpus": [
            {
                "gpu": g.gpu,
                "uuid": g.uuid,
                "model": g.model,
                "util_pct": _round(g.util_pct),
                "memory_used_mib": _round(g.mem_used_mib, 0),
                "memory_total_mib": _round(g.mem_total_mib, 0),
                "power_w": _round(g.power_w),
                "temp_c": _round(g.temp_c),
            }
            for g in detail.gpus
        ],
        "containers": [
            {
                "name": c.name,
                "pod": c.pod or None,
                "namespace": c.namespace or None,
                "image": c.image,
                "gpus": list(c.gpus),
                "gpu_memory_bytes": c.memory_bytes,
                "sm_util": _round(c.sm_util),
                "idle_reservation": c.idle_reservation,
            }
            for c in detail.containers
        ],
        "alerts": list(detail.alerts),
        "checks": [{"check": c, "status": s} for c, s in detail.checks],
    }
