"""Findings, alerts and GPU shares for each snapshot, computed on the collector thread.

No Textual imports: the collector worker calls :meth:`Analyzer.analyse` right after ``collect()``
and posts the result with the snapshot, so the UI thread only draws. The engines keep state
between snapshots (trends, ``for`` durations), which is why one :class:`Analyzer` lives as long
as the app.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from gputui.derive.alerts import Alert, AlertEngine, AlertRule, AlertState
from gputui.derive.fault_findings import fault_findings
from gputui.derive.findings import FindingsEngine, Share, Throttling, gpu_shares
from gputui.derive.process_history import RefreshSums, refresh_sums
from gputui.derive.tree import Group, Markers, build_groups, node_markers
from gputui.model import AlertSeverity, Finding, Snapshot

#: Alert severities, worst first.
SEVERITIES: tuple[AlertSeverity, ...] = (AlertSeverity.CRITICAL, AlertSeverity.WARNING)


@dataclass(frozen=True, slots=True)
class Analysis:
    """What one snapshot means, beyond its raw numbers.

    Attributes:
        snapshot: The refresh analysed.
        findings: Sharing, memory growth, idle reservations, throttling, OOM, restarts.
        alerts: The alert engine's state, None when no engine ran (a bare analysis).
        shares: Per GPU index, each party's share of its memory and SM, biggest first.
        markers: Tree-node markers by subject (``container:<id>``, ``pid:<pid>``, ``host``).
        started: Alerts that started firing with this snapshot (toasts, the bell).
        throttling: Per container id, its CPU throttling over the findings engine's window (the
            figure the ``cpu_throttled`` finding and the tree marker print).
        groups: The snapshot's processes under their containers (the Containers tab's groups).
        process_sums: Each process summed over its GPUs (what the per-process history records).
    """

    snapshot: Snapshot
    findings: tuple[Finding, ...] = ()
    alerts: AlertState | None = None
    shares: Mapping[int, tuple[Share, ...]] = field(default_factory=dict)
    markers: Markers = field(default_factory=dict)
    started: tuple[Alert, ...] = ()
    throttling: Mapping[str, Throttling] = field(default_factory=dict)
    # Derived here, on the collector's thread, so the UI thread does not (2 ms or more a
    # refresh at 2,000 processes); None only in an Analysis built by hand.
    groups: tuple[Group, ...] | None = None
    process_sums: RefreshSums | None = None

    @classmethod
    def bare(cls, snapshot: Snapshot) -> Analysis:
        """Shares and sharing markers only: what a snapshot says without any history."""
        shares = gpu_shares(snapshot)
        return cls(
            snapshot,
            shares=shares,
            markers=node_markers((), shares),
            groups=build_groups(snapshot),
            process_sums=refresh_sums(snapshot),
        )

    def findings_for(self, container_id: str, pids: Iterable[int] = ()) -> tuple[Finding, ...]:
        """The findings about one container: its own, its processes', and its shared GPUs'."""
        subjects = {f"container:{container_id}", *(f"pid:{pid}" for pid in pids)}
        gpus = {
            f"gpu:{gpu}"
            for gpu, parties in self.shares.items()
            if any(share.party == container_id for share in parties)
        }
        return tuple(f for f in self.findings if f.subject in subjects or f.subject in gpus)


def worst_severity(alerts: Iterable[Alert]) -> AlertSeverity | None:
    """``critical`` or ``warning`` (the worst among ``alerts``), None when there are none."""
    present = {alert.severity for alert in alerts}
    if not present:
        return None
    # A severity outside the known ones (an Alert built by hand) counts as a warning.
    return next((s for s in SEVERITIES if s in present), AlertSeverity.WARNING)


class Analyzer:
    """Runs the findings and alert engines on each snapshot, in order.

    Args:
        rules: The alert rules in force (``load_config(...).alert_rules``).
    """

    def __init__(self, rules: Iterable[AlertRule]) -> None:
        self.rules = tuple(rules)
        self._findings = FindingsEngine()
        self._alerts = AlertEngine(self.rules)
        self._last: Analysis | None = None
        # Alerts already announced; kept across resets so a replay jumping back does not toast
        # an alert that is still firing a second time.
        self._announced: set[tuple[str, str]] = set()

    def analyse(self, snapshot: Snapshot) -> Analysis:
        """Feed one snapshot to both engines and return what it means.

        The same snapshot object again (a paused replay, a stalled test collector) returns the
        previous answer without feeding the engines twice; a snapshot older than the previous one
        (a replay seeking back) restarts the engines, whose trends only run forwards.
        """
        last = self._last
        if last is not None and snapshot is last.snapshot:
            return replace(last, started=())
        if last is not None and snapshot.taken_at < last.snapshot.taken_at:
            self._findings = FindingsEngine()
            self._alerts = AlertEngine(self.rules)
        findings = self._findings.update(snapshot) + fault_findings(snapshot)
        alerts = self._alerts.update(snapshot)
        firing = {(a.rule, a.subject): a for a in alerts.firing}
        started = tuple(a for key, a in firing.items() if key not in self._announced)
        self._announced = set(firing)
        shares = gpu_shares(snapshot)
        self._last = Analysis(
            snapshot,
            findings,
            alerts,
            shares,
            node_markers(findings, shares),
            started,
            dict(self._findings.throttling),
            build_groups(snapshot),
            refresh_sums(snapshot),
        )
        return self._last
