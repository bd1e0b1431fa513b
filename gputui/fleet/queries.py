"""The fleet's PromQL: a fixed number of instant queries per refresh, never one per host.

The host table is a fixed set of instant queries, one per figure, sent a few at a time: each is
an aggregation ``by (instance)`` tagged with a ``gputui_fleet_field`` label (``label_replace``),
so Prometheus answers at most a few series per host and figure, whatever the number of GPUs
and containers. A host
is its scrape target's ``instance`` label: every series a target exposes carries it, gputui's
and plain dcgm-exporter's alike; the ``Hostname`` label, where a series has one, is only the
name shown.

The drill-down of one host is one instant query for its GPUs, containers, alerts and failing
checks, and one range query for its sparklines, both scoped to that ``instance``.
"""

from __future__ import annotations

import re

from gputui.fleet.client import FleetError

#: The label that names a figure in the union answers.
FIELD = "gputui_fleet_field"
#: How far back a host that stopped answering is still remembered (its GPU count, its name).
LOOKBACK = "15m"
#: Containers named per host in the table.
TOP_CONTAINERS = 3
#: The labels that name one container of a host: a Kubernetes container is its pod's
#: (``gputui export`` sets ``pod`` and ``namespace``), so two pods' containers of one name stay
#: two; for any other container, and in series without them, the two are empty.
CONTAINER_KEY = "namespace, pod, container"
#: Seconds of history behind the drill-down's sparklines, and the points in them.
SPARK_SECONDS = 600
SPARK_POINTS = 60

FAIL = 'status="fail"'
WARN = 'status="warn"'
FAIL_OR_WARN = 'status=~"fail|warn"'
FIRING = 'state="firing"'
RULE_FIRING = 'alertstate="firing"'

_VALUE = r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\''
_MATCHER = rf"\s*[A-Za-z_][A-Za-z0-9_]*\s*(?:=~|!~|!=|=)\s*(?:{_VALUE})\s*"
_MATCHERS_RE = re.compile(rf"{_MATCHER}(?:,{_MATCHER})*,?\s*")


def validate_match(texts: list[str]) -> str:
    """The ``--match`` selectors joined into one matcher list (without braces).

    Args:
        texts: Each ``--match`` value: label matchers as inside PromQL braces, such as
            ``cluster="a"`` or ``cluster="a",rack=~"r1|r2"``; braces around them are allowed.

    Raises:
        FleetError: a value is not a list of label matchers.
    """
    parts: list[str] = []
    for text in texts:
        inner = text.strip()
        if inner.startswith("{") and inner.endswith("}"):
            inner = inner[1:-1]
        if len(inner) > 2000 or not _MATCHERS_RE.fullmatch(inner):
            shown = repr(text) if len(text) <= 60 else repr(text[:57]) + "…"
            raise FleetError(
                f"--match {shown} is not a label selector: write label matchers like "
                'cluster="a" or rack=~"r1|r2"'
            )
        parts.append(inner.strip().rstrip(","))
    return ",".join(p for p in parts if p)


def quote(value: str) -> str:
    """A PromQL double-quoted string literal of ``value``."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _sel(metric: str, match: str, *extra: str) -> str:
    matchers = ",".join(m for m in (match, *extra) if m)
    return f"{metric}{{{matchers}}}" if matchers else metric


def _tag(expr: str, field: str) -> str:
    return f'label_replace({expr}, "{FIELD}", "{field}", "", "")'


def host_queries(match: str) -> dict[str, str]:
    """The instant queries behind the host table: one per figure, each grouped by instance.

    Their number (18) does not grow with the fleet. Each is one aggregation, not a union of
    them: joined with ``or`` into one query per panel, Prometheus 2.42 spent 5 to 7 times as
    long on a panel as on its parts asked one by one (100 hosts; ``bench.run fleet``). Each
    answer is tagged with its figure's name (``gputui_fleet_field``), so the answers are
    self-describing, also when saved.

    Args:
        match: Validated matchers (:func:`validate_match`), or ``""`` for every target.
    """

    def s(metric: str, *extra: str) -> str:
        return _sel(metric, match, *extra)

    fb = s("DCGM_FI_DEV_FB_USED")
    targets = {
        "up": f"max by (instance, job) ({s('up')})",
        "scrape": f"max by (instance, job) (timestamp({s('up')}))",
        # One look-back scan gives both the GPU count last seen and the name shown.
        "seen": f"count by (instance, job, Hostname) (last_over_time({fb}[{LOOKBACK}]))",
        "gputui": (
            f"count by (instance) (last_over_time({s('gputui_collect_age_seconds')}[{LOOKBACK}]))"
        ),
        "age": f"max by (instance) ({s('gputui_collect_age_seconds')})",
    }
    gpus = {
        "gpus": f"count by (instance) ({fb})",
        "util": f"avg by (instance) ({s('DCGM_FI_DEV_GPU_UTIL')})",
        "mem_used": f"sum by (instance) ({fb})",
        "mem_free": f"sum by (instance) ({s('DCGM_FI_DEV_FB_FREE')})",
        "power": f"sum by (instance) ({s('DCGM_FI_DEV_POWER_USAGE')})",
        "temp": f"max by (instance) ({s('DCGM_FI_DEV_GPU_TEMP')})",
    }
    containers = {
        "containers": (
            f"count by (instance) (group by (instance, {CONTAINER_KEY}) "
            f"({s('gputui_container_gpu_memory_bytes')}))"
        ),
        "top": (
            f"topk by (instance) ({TOP_CONTAINERS}, sum by (instance, {CONTAINER_KEY}) "
            f"({s('gputui_container_gpu_memory_bytes')}))"
        ),
        "idle": f"count by (instance) ({s('gputui_container_idle_gpu_reservation')} == 1)",
        "checks": f"count by (instance, status) ({s('gputui_health_status', FAIL_OR_WARN)} == 1)",
        "alerts": f"count by (instance) ({s('gputui_alert', FIRING)} == 1)",
        "rules": f"count by (instance) ({s('ALERTS', RULE_FIRING)})",
        "sources_down": f"count by (instance) ({s('gputui_source_up')} == 0)",
    }
    return {
        field: _tag(expr, field)
        for fields in (targets, gpus, containers)
        for field, expr in fields.items()
    }


#: The GPU series the drill-down reads (dcgm-exporter's names: gputui exports them too).
GPU_SERIES = (
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_GPU_TEMP",
)
CONTAINER_SERIES = (
    "gputui_container_gpu_memory_bytes",
    "gputui_container_sm_util",
    "gputui_container_idle_gpu_reservation",
)


def host_detail(match: str, instance: str) -> str:
    """The one instant query behind a host's drill-down: its GPUs, containers and problems."""
    where = f"instance={quote(instance)}"
    names = "|".join((*GPU_SERIES, *CONTAINER_SERIES))
    parts = [
        _sel("", match, where, f'__name__=~"{names}"'),
        f"{_sel('gputui_health_status', match, where, FAIL_OR_WARN)} == 1",
        f"{_sel('gputui_alert', match, where, FIRING)} == 1",
        _sel("ALERTS", match, where, RULE_FIRING),
    ]
    return " or ".join(parts)


def host_history(match: str, instance: str) -> str:
    """The one range query behind a host's sparklines (GPU utilisation and memory, containers)."""
    where = f"instance={quote(instance)}"
    return " or ".join(
        (
            _tag(_sel("DCGM_FI_DEV_GPU_UTIL", match, where), "util"),
            _tag(_sel("DCGM_FI_DEV_FB_USED", match, where), "mem"),
            _tag(
                f"sum by ({CONTAINER_KEY}) "
                f"({_sel('gputui_container_gpu_memory_bytes', match, where)})",
                "container_mem",
            ),
        )
    )
