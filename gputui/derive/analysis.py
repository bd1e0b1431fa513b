"""Findings, alerts, GPU shares, history and user totals for each snapshot, on the collector thread.

No Textual imports: the collector worker calls :meth:`Analyzer.analyse` right after ``collect()``
and posts the result with the snapshot, so the UI thread only draws. The engines keep state
between snapshots (trends, ``for`` durations), and so do the history buffers, which is why one
:class:`Analyzer` lives as long as the app. The buffers are written here only; each
:class:`Analysis` carries frozen views of them (:class:`~gputui.derive.history.HistoryView`,
:class:`~gputui.derive.process_history.ProcessHistoryView`) that later appends never change,
so the UI thread reads them while this thread records the next snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import field, replace

from gputui.derive.activity import Activity
from gputui.derive.alerts import Alert, AlertEngine, AlertRule, AlertState
from gputui.derive.fault_findings import fault_findings
from gputui.derive.findings import FindingsEngine, Share, Throttling, gpu_shares
from gputui.derive.history import History, HistoryView
from gputui.derive.process_history import (
    ProcessHistory,
    ProcessHistoryView,
    ProcessKey,
    RefreshSums,
    refresh_sums,
)
from gputui.derive.scope import scope_analysis
from gputui.derive.tree import Group, Markers, build_groups, node_markers
from gputui.derive.users import UserTotals, user_totals
from gputui.model.records import record
from gputui.model.settings import ViewScope
from gputui.model.snapshot import Snapshot
from gputui.model.status import AlertSeverity, Finding

#: Alert severities, worst first.
SEVERITIES: tuple[AlertSeverity, ...] = (AlertSeverity.CRITICAL, AlertSeverity.WARNING)


@record
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
        totals: GPU use per user and per compose project (the Users tab, ``--once``, the
            exporter's user series).
        history: The GPU, MIG and container series up to this snapshot; None when the
            analyzer keeps no history (``--once``, the exporter).
        process_history: The per-process series up to this snapshot (the drill-down); None
            as for ``history``.
        activity: Under ``--only``/``--user``/``--pid``, each shown party's part of its
            devices' GPM activity, computed on the whole snapshot (a user's part of a GPU is not
            all of it because the others are hidden); None: computed from ``snapshot``.
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
    totals: UserTotals | None = None
    history: HistoryView | None = None
    process_history: ProcessHistoryView | None = None
    activity: tuple[Activity, ...] | None = None

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
            totals=user_totals(snapshot),
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
    """Runs the findings and alert engines on each snapshot, in order, and records history.

    Args:
        rules: The alert rules in force (``load_config(...).alert_rules``).
        sinks: Called with each new analysis on the analysing thread (alert delivery, the
            idle-GPU policy), after it is computed; not called again for the same snapshot.
            They must return at once (queue, never send): a sink that raises is counted in
            :attr:`sink_errors` and the analysis goes on.
        history_seconds: How far back the GPU, container and per-process history reaches; None
            keeps no history (a front-end that draws none: ``--once``, the exporter).
        interval: The refresh period the history buffers are sized for.
        totals: Compute the users and projects (:attr:`Analysis.totals`); an exporter without
            user series, or a look-back whose snapshots are not shown, needs none.
        scope: What the views show (``--only``, ``--user``, ``--pid``): :meth:`analyse`
            returns the analysis narrowed to it (:mod:`gputui.derive.scope`), while the engines,
            the history and the sinks see the whole snapshot.
    """

    def __init__(
        self,
        rules: Iterable[AlertRule],
        sinks: Iterable[Callable[[Analysis], None]] = (),
        *,
        history_seconds: float | None = None,
        interval: float = 1.0,
        totals: bool = True,
        scope: ViewScope | None = None,
    ) -> None:
        self.rules = tuple(rules)
        #: What the views show; None when nothing is narrowed.
        self.scope = scope if scope is not None and scope.narrows else None
        self.sinks = tuple(sinks)
        #: Sink calls that raised.
        self.sink_errors = 0
        #: Whether :meth:`analyse` computes the user totals (may change between analyses).
        self.totals = totals
        self._findings = FindingsEngine()
        self._alerts = AlertEngine(self.rules)
        self._last: Analysis | None = None
        # Alerts already announced; kept across resets so a replay jumping back does not toast
        # an alert that is still firing a second time.
        self._announced: set[tuple[str, str]] = set()
        #: The buffers, written by :meth:`analyse` only (the collector's thread).
        self.history = None if history_seconds is None else History(history_seconds, interval)
        self.process_history = None if history_seconds is None else ProcessHistory(history_seconds)
        # Set from other threads (the UI's); each is one reference, read once per analysis.
        self._followed: frozenset[ProcessKey] = frozenset()
        self._interval: float | None = None

    def follow(self, keys: Collection[ProcessKey]) -> None:
        """Keep the history of these processes whatever their memory (the drill-downs' own).

        Safe from any thread: it takes effect with the next snapshot analysed.
        """
        self._followed = frozenset(keys)

    def set_interval(self, interval: float) -> None:
        """Size the history for a new refresh period, from the next snapshot analysed on.

        Safe from any thread (the buffers are resized on the analysing one).
        """
        self._interval = interval

    @property
    def followed(self) -> frozenset[ProcessKey]:
        """The processes :meth:`follow` asked for."""
        return self._followed

    def _resize(self) -> bool:
        """Apply the interval :meth:`set_interval` asked for; True when the buffers changed."""
        wanted = self._interval
        if self.history is None or wanted is None or wanted == self.history.interval:
            return False
        self.history.set_interval(wanted)
        return True

    def analyse(self, snapshot: Snapshot) -> Analysis:
        """Feed one snapshot to both engines and the history, and return what it means.

        Under a :attr:`scope` the answer is narrowed to what the views show; everything else
        (the engines, the history, the sinks) has seen the whole snapshot.

        The same snapshot object again (a paused replay, a stalled test collector) returns the
        previous answer without feeding the engines twice; a snapshot older than the previous one
        (a replay seeking back) restarts the engines, whose trends only run forwards, and
        forgets the history (its samples are that snapshot's future).
        """
        last = self._last
        if last is not None and snapshot is last.snapshot:
            if self._resize() and self.history is not None:
                # Kept as the previous answer too, so the next repeat shows the new size.
                last = self._last = replace(last, history=self.history.view())
            return self._narrow(replace(last, started=()))
        if last is not None and snapshot.taken_at < last.snapshot.taken_at:
            self._findings = FindingsEngine()
            self._alerts = AlertEngine(self.rules)
            if self.history is not None and self.process_history is not None:
                self.history.clear()
                self.process_history.clear()
        shares = gpu_shares(snapshot)
        findings = self._findings.update(snapshot, shares) + fault_findings(snapshot)
        alerts = self._alerts.update(snapshot)
        firing = {(a.rule, a.subject): a for a in alerts.firing}
        started = tuple(a for key, a in firing.items() if key not in self._announced)
        self._announced = set(firing)
        sums = refresh_sums(snapshot)
        history_view = process_view = None
        if self.history is not None and self.process_history is not None:
            self._resize()
            self.history.record(snapshot)
            self.process_history.record(snapshot, self._followed, sums)
            history_view = self.history.view()
            process_view = self.process_history.view()
        self._last = Analysis(
            snapshot,
            findings,
            alerts,
            shares,
            node_markers(findings, shares),
            started,
            dict(self._findings.throttling),
            build_groups(snapshot),
            sums,
            user_totals(snapshot) if self.totals else None,
            history_view,
            process_view,
        )
        for sink in self.sinks:
            try:
                sink(self._last)
            except Exception:  # delivery is a side effect: it never breaks the analysis
                self.sink_errors += 1
        return self._narrow(self._last)

    def _narrow(self, analysis: Analysis) -> Analysis:
        return analysis if self.scope is None else scope_analysis(analysis, self.scope)
