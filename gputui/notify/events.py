"""One event type for everything gputui can tell someone about, and the analysis adapter.

An :class:`Event` is a transition: something started (``firing``) or stopped (``resolved``).
Alerts, findings and idle-policy notices become events here; a kernel-log fault becomes one
with :func:`event` (kind ``fault``) in one small adapter beside its parser. Events carry only
sanitised-later text: the payload builders (:mod:`gputui.notify.payloads`) pass every string
through ``safe_text`` at the output boundary.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import Enum

from gputui.derive.alerts import Alert
from gputui.derive.analysis import Analysis
from gputui.model.records import record
from gputui.model.status import AlertSeverity, Finding, FindingSeverity


class Kind(str, Enum):
    """What an event is about; ``[[notify]] events`` selects by these names."""

    ALERT = "alerts"
    FINDING = "findings"
    FAULT = "faults"
    IDLE = "idle"

    def __str__(self) -> str:
        return str(self.value)


class Status(str, Enum):
    """Started or over (Alertmanager's two statuses)."""

    FIRING = "firing"
    RESOLVED = "resolved"

    def __str__(self) -> str:
        return str(self.value)


#: Severities, lowest first; ``[[notify]] severity`` is the lowest one a target receives.
SEVERITIES: tuple[str, ...] = ("info", "warning", "critical")
#: A finding's severity in the events' scale.
_FINDING_SEVERITY = {
    FindingSeverity.INFO: "info",
    FindingSeverity.WARN: "warning",
    FindingSeverity.FAIL: "critical",
}


def severity_rank(severity: str) -> int:
    """0 for ``info`` up to 2 for ``critical``; an unknown name ranks as ``warning``."""
    return SEVERITIES.index(severity) if severity in SEVERITIES else 1


@record
class Event:
    """One transition to deliver.

    Attributes:
        kind: alerts, findings, faults or idle.
        status: firing or resolved.
        name: What happened: the alert rule's id, the finding's kind, the policy's stage,
            the fault's class.
        subject: What it is about (``gpu0``, ``container:<id>``...).
        severity: ``info``, ``warning`` or ``critical``.
        summary: One line for people (unsanitised: payloads sanitise).
        starts_at: When it started (seconds since the epoch).
        ends_at: When it ended, None while firing.
        labels: Identifying pairs (rule, gpu, container, owner...), sorted by key.
        figures: The numbers or facts behind it, by name.
    """

    kind: Kind
    status: Status
    name: str
    subject: str
    severity: str
    summary: str
    starts_at: float
    ends_at: float | None = None
    labels: tuple[tuple[str, str], ...] = ()
    figures: tuple[tuple[str, float | int | str], ...] = ()

    @property
    def key(self) -> str:
        """What makes two events the same one (deduplication): kind, name and subject."""
        return f"{self.kind.value}|{self.name}|{self.subject}"

    def resolved(self, at: float) -> Event:
        """This event, over at ``at``."""
        return Event(
            self.kind,
            Status.RESOLVED,
            self.name,
            self.subject,
            self.severity,
            self.summary,
            self.starts_at,
            at,
            self.labels,
            self.figures,
        )


def event(
    kind: Kind,
    name: str,
    subject: str,
    severity: str,
    summary: str,
    at: float,
    labels: Mapping[str, str] | None = None,
    figures: Iterable[tuple[str, float | int | str]] = (),
) -> Event:
    """A firing event; the one constructor every adapter (faults too) goes through.

    Args:
        kind: What it is about.
        name: What happened (a rule id, a finding kind, an XID class).
        subject: What it happened to.
        severity: ``info``, ``warning`` or ``critical`` (anything else counts as warning).
        summary: One line for people.
        at: When it started.
        labels: Identifying pairs; ``kind``/``name``/``subject`` are added.
        figures: The numbers behind it.
    """
    severity = severity if severity in SEVERITIES else "warning"
    pairs = {**(labels or {}), "subject": subject}
    return Event(
        kind,
        Status.FIRING,
        name,
        subject,
        severity,
        summary,
        at,
        None,
        tuple(sorted(pairs.items())),
        tuple(figures),
    )


def alert_event(alert: Alert) -> Event:
    """An alert that started firing."""
    severity = "critical" if alert.severity is AlertSeverity.CRITICAL else "warning"
    return event(
        Kind.ALERT,
        alert.rule,
        alert.subject,
        severity,
        alert.message or f"{alert.subject}: {alert.rule}",
        alert.firing_since if alert.firing_since is not None else alert.since,
        {"rule": alert.rule},
        (("value", alert.value), ("bound", alert.bound)),
    )


def finding_event(finding: Finding, at: float) -> Event:
    """A finding that appeared with the snapshot taken at ``at``."""
    return event(
        Kind.FINDING,
        finding.kind,
        finding.subject,
        _FINDING_SEVERITY.get(finding.severity, "warning"),
        finding.summary,
        at,
        {"finding": finding.kind},
        finding.figures,
    )


class AnalysisEvents:
    """Turns successive analyses into firing and resolved events (pure, keeps what is open).

    An alert fires once when it starts firing and resolves when it no longer fires; a finding
    fires when it first appears and resolves when a later analysis no longer has it. The same
    analysis fed twice gives nothing the second time.
    """

    def __init__(self) -> None:
        self._open: dict[str, Event] = {}
        self._last: Analysis | None = None

    def update(self, analysis: Analysis) -> list[Event]:
        """The transitions ``analysis`` brings, resolved ones first."""
        if analysis is self._last:
            return []
        self._last = analysis
        at = analysis.snapshot.taken_at
        now: dict[str, Event] = {}
        if analysis.alerts is not None:
            for alert in analysis.alerts.firing:
                e = alert_event(alert)
                now[e.key] = self._open.get(e.key, e)
        for finding in analysis.findings:
            e = finding_event(finding, at)
            now.setdefault(e.key, self._open.get(e.key, e))
        out = [e.resolved(at) for key, e in self._open.items() if key not in now]
        out += [e for key, e in now.items() if key not in self._open]
        self._open = now
        return out
