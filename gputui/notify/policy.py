"""The idle-GPU policy at work: notices audited and delivered, reclaims stopped only when allowed.

:class:`PolicyRunner` is an analysis sink (:class:`~gputui.derive.analysis.Analyzer`): each new
snapshot goes through :class:`~gputui.derive.idle_policy.IdlePolicyEngine`; every stage it
reports is written to the audit file, and handed to the notifier as an ``idle`` event. At the
reclaim stage the container is stopped only when the policy and the container's label both
opt in, the policy is not a dry run, and gputui is not read-only; otherwise the stop is
audited as what it was (a dry run, or refused and why). The stop runs on a thread of its own:
the engine may take its stop timeout, the refresh does not wait for it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gputui.boundary.sanitise import safe_text
from gputui.boundary.userfiles import UserFileError
from gputui.collect.sources import CollectorProtocol
from gputui.derive.analysis import Analysis
from gputui.derive.idle_policy import IdlePolicyEngine, Notice, Stage
from gputui.model.settings import IdlePolicy
from gputui.notify.audit import AuditLog, default_audit_path, notice_record
from gputui.notify.events import Event, Kind, event
from gputui.notify.worker import Notifier

#: An event's severity at each stage.
_SEVERITY = {Stage.NOTICE: "warning", Stage.ESCALATE: "critical", Stage.RECLAIM: "critical"}
#: Every stage's event name, so that ``cleared`` resolves whichever were sent.
_STAGES = (Stage.NOTICE, Stage.ESCALATE, Stage.RECLAIM)


def notice_events(notice: Notice) -> list[Event]:
    """The events of a stage reached: one firing, or (``cleared``) the stages resolved."""
    subject = f"container:{notice.container_id}"
    labels = {"container": notice.name, "stage": notice.stage.value}
    if notice.owner:
        labels["owner"] = notice.owner
    if notice.stage is Stage.CLEARED:
        return [
            event(
                Kind.IDLE, f"idle-{s.value}", subject, _SEVERITY[s], notice.summary, notice.at
            ).resolved(notice.at)
            for s in _STAGES
        ]
    return [
        event(
            Kind.IDLE,
            f"idle-{notice.stage.value}",
            subject,
            _SEVERITY[notice.stage],
            notice.summary,
            notice.at,
            labels,
            notice.evidence,
        )
    ]


class PolicyRunner:
    """Runs the idle-GPU policy on each analysis; audits and delivers what it says.

    Args:
        policy: The policy (``[idle_policy]``).
        audit: The audit file.
        host: This host's name (in audit lines).
        notifier: Where ``idle`` events go; None: audited only.
        control: What stops a container (the Docker source); None: automatic stops are
            refused (a recording, the demo).
        read_only: ``--read-only`` (``export`` always): every stop refused.
        log: One line per problem (an unwritable audit file...).
        engine: The engine (tests pass one on a fake time of day).
    """

    def __init__(
        self,
        policy: IdlePolicy,
        audit: AuditLog,
        host: str,
        *,
        notifier: Notifier | None = None,
        control: CollectorProtocol | None = None,
        read_only: bool = True,
        log: Callable[[str], None] = lambda line: None,
        engine: IdlePolicyEngine | None = None,
    ) -> None:
        self.policy = policy
        self.audit = audit
        self.host = host
        self.notifier = notifier
        self.control = control
        self.read_only = read_only
        self._log = log
        self.engine = engine or IdlePolicyEngine(policy)
        #: Containers at the reclaim stage now, by id (the TUI's banner, ``gputui reclaim``).
        self.reclaim_due: dict[str, Notice] = {}
        #: Automatic stops started and not yet done (threads).
        self.stopping: dict[str, threading.Thread] = {}
        self._audit_failed = False
        self._banner: str | None = None

    def observe(self, analysis: Analysis) -> None:
        """The analysis sink: one snapshot through the policy."""
        for notice in self.engine.update(analysis.snapshot):
            self._record(notice_record(notice, self.host))
            if self.notifier is not None:
                self.notifier.submit(notice_events(notice))
            if notice.stage is Stage.RECLAIM:
                self.reclaim_due[notice.container_id] = notice
                if notice.auto:
                    self._auto_stop(notice)
            elif notice.stage is Stage.CLEARED:
                self.reclaim_due.pop(notice.container_id, None)
        # Built here, on the analysing thread: the UI thread only reads the finished string.
        names = ", ".join(safe_text(n.name, 40) for n in self.reclaim_due.values())
        self._banner = (
            f"GPU reclaim due (idle reservations): {names}; run `gputui reclaim` to review"
            if names
            else None
        )

    def banner(self) -> str | None:
        """One line naming the containers due for reclaim, None when there are none."""
        return self._banner

    def _record(self, record: dict[str, Any]) -> None:
        try:
            self.audit.append(record)
            self._audit_failed = False
        except UserFileError as exc:
            if not self._audit_failed:  # once per run of failures, not once per refresh
                self._log(f"idle policy: {exc}")
            self._audit_failed = True

    def _auto_stop(self, notice: Notice) -> None:
        action = {"action": "stop", "by": "policy"}
        if self.policy.dry_run:
            self._record(
                notice_record(notice, self.host, **action, event="stop-dry-run", result="dry run")
            )
            return
        refused = (
            "read-only mode: actions are disabled"
            if self.read_only
            else "no container control (not a live Docker engine)"
            if self.control is None
            else "a stop is already under way"
            if notice.container_id in self.stopping
            else None
        )
        if refused is not None:
            self._record(
                notice_record(notice, self.host, **action, event="stop-refused", result=refused)
            )
            return
        control = self.control
        assert control is not None

        def stop() -> None:
            try:
                problem = control.container_action(notice.container_id, "stop")
            except Exception as exc:  # the engine's failure is an audit line, not a crash
                problem = type(exc).__name__
            done = "stop" if problem is None else "stop-failed"
            self._record(
                notice_record(notice, self.host, **action, event=done, result=problem or "stopped")
            )
            self.stopping.pop(notice.container_id, None)

        thread = threading.Thread(target=stop, name="gputui-idle-stop", daemon=True)
        self.stopping[notice.container_id] = thread
        thread.start()


def start_policy(
    policy: IdlePolicy,
    host: str,
    *,
    notifier: Notifier | None,
    collector: CollectorProtocol | None,
    read_only: bool,
    log: Callable[[str], None] = lambda line: None,
) -> PolicyRunner | None:
    """A :class:`PolicyRunner` for ``[idle_policy]``; None when the policy is off.

    Args:
        policy: The policy.
        host: This host's name.
        notifier: Where its events go (None: audited only).
        collector: The collector that stops containers through their owning source
            (:func:`live_control`: none for the demo or a replay).
        read_only: Refuse every stop.
        log: One line per problem.
    """
    if not policy.enabled:
        return None
    path = Path(policy.audit) if policy.audit else default_audit_path()
    return PolicyRunner(
        policy,
        AuditLog(path),
        host,
        notifier=notifier,
        control=live_control(collector),
        read_only=read_only,
        log=log,
    )


def live_control(collector: CollectorProtocol | None) -> CollectorProtocol | None:
    """The collector when its containers are this machine's (not the demo, not a recording).

    A scenario replaces NVML only: its containers are the engine's, so they can be stopped.
    The owning source's own refusals (read-only, no lifecycle) come back from
    ``container_action``.
    """
    if collector is None or collector.player is not None or collector.mode in ("demo", "replay"):
        return None
    return collector
