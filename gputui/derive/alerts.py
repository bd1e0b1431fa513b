"""Alert rules evaluated on successive snapshots: static thresholds and mean + k*sigma anomalies.

Pure: :class:`AlertEngine` keeps per-series state between :meth:`AlertEngine.update` calls and
takes the time from ``Snapshot.taken_at`` (never the wall clock), so a recording or a scenario
with a fake clock plays alerts exactly as they happened. Phases follow Prometheus: a condition
that holds is *pending*; once it has held for the rule's ``for`` duration it is *firing*; when it
stops holding (or the value disappears) a firing alert is *resolved* and a pending one is
dropped. Rules are documented in docs/alerts.md.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import replace
from enum import Enum

from gputui.derive import units
from gputui.derive.units import ratio
from gputui.derive.windows import SampledWindow, newer
from gputui.model.gpu import busy_percent
from gputui.model.records import record
from gputui.model.snapshot import Snapshot
from gputui.model.status import AlertSeverity


class AlertPhase(str, Enum):
    """Where an alert stands."""

    PENDING = "pending"
    FIRING = "firing"
    RESOLVED = "resolved"


def _gpu_metric(pick: Callable[..., float | None]) -> Callable[[Snapshot], dict[str, float]]:
    def values(snapshot: Snapshot) -> dict[str, float]:
        out = {}
        for gpu in snapshot.gpus:
            value = None if gpu.lost else pick(gpu)
            if value is not None:
                out[f"gpu{gpu.index}"] = float(value)
        return out

    return values


def _container_metric(pick: Callable[..., float | None]) -> Callable[[Snapshot], dict[str, float]]:
    def values(snapshot: Snapshot) -> dict[str, float]:
        out = {}
        for usage in snapshot.containers:
            value = pick(usage) if usage.pids else None
            if value is not None:
                out[f"container {usage.info.name}"] = float(value)
        return out

    return values


#: What a rule can watch: name -> values by subject (``gpu0``, ``container trainer-a``).
METRICS: dict[str, Callable[[Snapshot], dict[str, float]]] = {
    # Busy as time over the interval (GPM's graphics activity, else the mean of the driver's
    # samples since the last read, else the point read): a rule "gpu_util < 5 for 30m" must not
    # fire on a job busy 40 % of each second that a point read happens to catch idle.
    "gpu_util": _gpu_metric(busy_percent),
    "memory_util": _gpu_metric(lambda g: g.utilization_memory),
    "memory_used_percent": _gpu_metric(lambda g: ratio(g.memory_used_bytes, g.memory_total_bytes)),
    "temperature_c": _gpu_metric(lambda g: g.temperature_c),
    "power_w": _gpu_metric(lambda g: g.power_w),
    "power_percent": _gpu_metric(lambda g: ratio(g.power_w, g.power_limit_w)),
    "container_gpu_memory_bytes": _container_metric(lambda u: u.gpu_memory_bytes),
    "container_sm_util": _container_metric(lambda u: u.sm_util),
}

#: The unit of each metric: ``%``, ``°C``, ``W`` or ``B`` (bytes, shown as GiB/MiB).
UNITS = {
    "gpu_util": "%",
    "memory_util": "%",
    "memory_used_percent": "%",
    "temperature_c": "°C",
    "power_w": "W",
    "power_percent": "%",
    "container_gpu_memory_bytes": "B",
    "container_sm_util": "%",
}


def format_metric(metric: str, value: float) -> str:
    """A metric's value for people, in its unit: ``97%``, ``86°C``, ``612W``, ``7.8GiB``.

    Args:
        metric: A key of :data:`METRICS` (an unknown one prints the number alone).
        value: The value in the metric's base unit (bytes, percent, degrees, watts).
    """
    unit = UNITS.get(metric, "")
    if not math.isfinite(value):
        return f"{value}"
    if unit == "B":
        return units.size(value)
    if unit:
        # Whole numbers stay whole; a fraction keeps one decimal, so 90.4 % does not read as
        # "90% above 90%".
        number = f"{value:.0f}" if value == round(value) else f"{value:.1f}"
        return f"{number}{unit}"
    return f"{value:.4g}"


@record
class AlertRule:
    """One rule.

    Attributes:
        id: Unique name, e.g. ``gpu-util-high``.
        metric: A key of :data:`METRICS`.
        kind: ``static`` (compare with ``threshold``) or ``dynamic`` (compare with the mean of
            the series' own recent window plus ``k`` standard deviations).
        op: ``>`` (alert when above) or ``<`` (below; dynamic: below mean - k*sigma).
        threshold: The static bound.
        for_s: How long the condition must hold before the alert fires.
        k: Standard deviations for dynamic rules.
        window_s: How far back a dynamic rule's window reaches.
        min_samples: A dynamic rule stays silent until its window holds this many samples.
        min_delta: A dynamic rule also needs the value this far from the mean (a flat series
            has sigma = 0, and a change of 1 % would otherwise count as an anomaly).
        severity: warning or critical (the config file's text, e.g. ``"critical"``, is taken as
            the enum; anything else is a ValueError).
    """

    id: str
    metric: str
    kind: str = "static"
    op: str = ">"
    threshold: float = 0.0
    for_s: float = 0.0
    k: float = 2.0
    window_s: float = 1800.0
    min_samples: int = 10
    min_delta: float = 0.0
    severity: AlertSeverity = AlertSeverity.WARNING

    def __post_init__(self) -> None:
        # The config parser hands over the file's text; every later reader gets the enum.
        if not isinstance(self.severity, AlertSeverity):
            object.__setattr__(self, "severity", AlertSeverity(self.severity))


#: The rules used when the config file names none (docs/alerts.md).
DEFAULT_RULES: tuple[AlertRule, ...] = (
    AlertRule("gpu-util-high", "gpu_util", threshold=90.0, for_s=300.0),
    AlertRule("gpu-memory-high", "memory_used_percent", threshold=90.0, for_s=60.0),
    AlertRule(
        "gpu-temperature-high",
        "temperature_c",
        threshold=85.0,
        for_s=60.0,
        severity=AlertSeverity.CRITICAL,
    ),
)


@record
class Alert:
    """One alert of one rule on one subject.

    Attributes:
        rule: The rule's id.
        subject: ``gpu0``, ``container trainer-a``...
        phase: pending, firing or resolved.
        value: The metric's latest value (for resolved: the last value while it held).
        bound: What it was compared with: the threshold, or mean ± k*sigma for dynamic rules.
        since: When the condition started to hold (the pending start).
        firing_since: When it started firing, None while pending.
        resolved_at: When it was resolved, None until then.
        severity: The rule's severity (text such as ``"critical"`` is taken as the enum).
        message: One line for people.
    """

    rule: str
    subject: str
    phase: AlertPhase
    value: float
    bound: float
    since: float
    firing_since: float | None = None
    resolved_at: float | None = None
    severity: AlertSeverity = AlertSeverity.WARNING
    message: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.severity, AlertSeverity):
            object.__setattr__(self, "severity", AlertSeverity(self.severity))


@record
class AlertState:
    """The engine's answer after one snapshot.

    Attributes:
        at: The snapshot's time.
        active: Pending and firing alerts, firing first.
        history: Transitions to firing and to resolved, oldest first (bounded).
    """

    at: float
    active: tuple[Alert, ...] = ()
    history: tuple[Alert, ...] = ()

    @property
    def firing(self) -> tuple[Alert, ...]:
        """The firing alerts."""
        return tuple(a for a in self.active if a.phase is AlertPhase.FIRING)

    @property
    def pending(self) -> tuple[Alert, ...]:
        """The pending alerts."""
        return tuple(a for a in self.active if a.phase is AlertPhase.PENDING)


def _message(rule: AlertRule, subject: str, value: float, bound: float) -> str:
    what = "above" if rule.op == ">" else "below"
    detail = format_metric(rule.metric, bound)
    if rule.kind == "dynamic":
        detail = f"mean {'+' if rule.op == '>' else '-'} {rule.k:g} sigma = {detail}"
    return f"{subject}: {rule.metric} {format_metric(rule.metric, value)} {what} {detail}"


class AlertEngine:
    """Evaluates rules on each snapshot and tracks pending / firing / resolved alerts.

    Args:
        rules: The rules (ids must be unique; see :mod:`gputui.config`).
        history_limit: How many transitions :attr:`AlertState.history` keeps.
    """

    def __init__(self, rules: Iterable[AlertRule], history_limit: int = 200) -> None:
        self.rules = tuple(rules)
        for rule in self.rules:
            if rule.metric not in METRICS:
                raise ValueError(f"rule {rule.id}: unknown metric {rule.metric!r}")
        self._active: dict[tuple[str, str], Alert] = {}
        self._windows: dict[tuple[str, str], SampledWindow] = {}
        self._history: deque[Alert] = deque(maxlen=history_limit)

    def update(self, snapshot: Snapshot) -> AlertState:
        """Evaluate every rule on ``snapshot`` and return the new state."""
        now = snapshot.taken_at
        values = {name: METRICS[name](snapshot) for name in {r.metric for r in self.rules}}
        seen: set[tuple[str, str]] = set()
        for rule in self.rules:
            for subject, value in values[rule.metric].items():
                key = (rule.id, subject)
                seen.add(key)
                bound = self._bound(rule, key, now, value)
                holds = bound is not None and (value > bound if rule.op == ">" else value < bound)
                if holds and bound is not None:
                    self._holds(rule, key, now, value, bound)
                else:
                    self._clear(key, now)
        for key in [k for k in self._active if k not in seen]:
            self._clear(key, now)  # the value disappeared (GPU lost, container gone): resolve
        for key in [k for k in self._windows if k not in seen]:
            del self._windows[key]  # bounded by what exists now, not by everything ever seen
        order = {AlertPhase.FIRING: 0, AlertPhase.PENDING: 1}
        active = sorted(
            self._active.values(), key=lambda a: (order[a.phase], a.since, a.rule, a.subject)
        )
        return AlertState(now, tuple(active), tuple(self._history))

    def _bound(
        self, rule: AlertRule, key: tuple[str, str], now: float, value: float
    ) -> float | None:
        if rule.kind != "dynamic":
            return rule.threshold
        window = self._windows.get(key)
        if window is None:
            # A subsample of the window (see derive/windows.py): statistics over a few hundred
            # points cost the same at any refresh rate.
            window = self._windows[key] = SampledWindow(rule.window_s, combine=newer)
        # The bound comes from the window *before* this value: a spike must not widen its own sigma.
        past = window.values()
        window.add(now, value)
        if len(past) < max(rule.min_samples, 2):
            return None
        mean = math.fsum(past) / len(past)
        sigma = math.sqrt(math.fsum((v - mean) ** 2 for v in past) / len(past))
        spread = max(rule.k * sigma, rule.min_delta)
        return mean + spread if rule.op == ">" else mean - spread

    def _holds(
        self, rule: AlertRule, key: tuple[str, str], now: float, value: float, bound: float
    ) -> None:
        message = _message(rule, key[1], value, bound)
        alert = self._active.get(key)
        if alert is None:
            alert = Alert(
                rule.id, key[1], AlertPhase.PENDING, value, bound, now, None, None, rule.severity
            )
        alert = replace(alert, value=value, bound=bound, message=message)
        if alert.phase is AlertPhase.PENDING and now - alert.since >= rule.for_s:
            alert = replace(alert, phase=AlertPhase.FIRING, firing_since=now)
            self._history.append(alert)
        self._active[key] = alert

    def _clear(self, key: tuple[str, str], now: float) -> None:
        alert = self._active.pop(key, None)
        if alert is not None and alert.phase is AlertPhase.FIRING:
            self._history.append(replace(alert, phase=AlertPhase.RESOLVED, resolved_at=now))
