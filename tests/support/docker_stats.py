"""The docker CLI's own figures from one Engine API stats payload: a reference for tests.

gputui never calls ``GET /containers/{id}/stats`` (one call blocks for about a second per
container); it reads the cgroup files and applies the CLI's formulas itself. The tests that
check those figures against the engine's compute the engine's side here, written out from the
CLI's ``calculateCPUPercentUnix`` and ``calculateMemUsageUnixNoCache`` rather than through
gputui's functions, so that a wrong formula in gputui cannot agree with itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def engine_cpu_percent(stats: Mapping[str, Any]) -> float | None:
    """CPU % (100 = one core) from ``cpu_stats`` and ``precpu_stats``, as ``docker stats``.

    Returns:
        None when the payload has no previous sample (the first streamed or a one-shot
        sample) or a delta is not positive.
    """
    cur: Mapping[str, Any] = stats.get("cpu_stats") or {}
    pre: Mapping[str, Any] = stats.get("precpu_stats") or {}
    cur_sys, pre_sys = cur.get("system_cpu_usage"), pre.get("system_cpu_usage")
    cur_total = (cur.get("cpu_usage") or {}).get("total_usage")
    pre_total = (pre.get("cpu_usage") or {}).get("total_usage")
    if cur_sys is None or pre_sys is None or cur_total is None or pre_total is None:
        return None
    # Engines before API 1.27 have no online_cpus: the CLI counts percpu_usage then.
    online = cur.get("online_cpus") or len((cur.get("cpu_usage") or {}).get("percpu_usage") or ())
    cpu_delta, system_delta = cur_total - pre_total, cur_sys - pre_sys
    if cpu_delta < 0 or system_delta <= 0 or online <= 0:
        return None
    return float(cpu_delta) / float(system_delta) * float(online) * 100.0


def engine_memory(stats: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """(used, limit) bytes from ``memory_stats``, as ``docker stats``: usage less inactive files.

    cgroup v1 payloads carry ``total_inactive_file``, v2 payloads ``inactive_file`` only.
    """
    mem: Mapping[str, Any] = stats.get("memory_stats") or {}
    detail: Mapping[str, int] = mem.get("stats") or {}
    usage: int | None = mem.get("usage")
    limit: int | None = mem.get("limit")
    if usage is None:
        return None, limit
    key = "total_inactive_file" if "total_inactive_file" in detail else "inactive_file"
    inactive = detail.get(key)
    if inactive is not None and inactive < usage:
        return usage - inactive, limit
    return usage, limit
