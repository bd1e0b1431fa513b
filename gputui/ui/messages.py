"""Messages the collector worker and the widgets post upwards."""

from __future__ import annotations

from dataclasses import replace

from textual.message import Message

from gputui.derive.alerts import AlertState
from gputui.derive.analysis import Analysis
from gputui.model.containers import ExecResult
from gputui.model.snapshot import Snapshot
from gputui.model.status import Finding


class SnapshotReady(Message):
    """A fresh snapshot from the collector thread, with its findings and alerts.

    Replaceable: when the UI falls behind (a slow terminal, a big redraw), a newer snapshot waiting
    in the queue replaces the older one instead of queueing stale frames behind it. Alerts that
    started firing with a replaced snapshot would be lost with it, so they move to the newer one.
    """

    def __init__(
        self,
        snapshot: Snapshot,
        analysis: Analysis | None = None,
        replay: tuple[int, int] | None = None,
    ) -> None:
        super().__init__()
        self.snapshot = snapshot
        """The refresh to apply."""
        # Built on the posting thread (the collector worker) when not given, never on the UI's.
        self.analysis = analysis if analysis is not None else Analysis.bare(snapshot)
        """Findings, alerts and GPU shares of :attr:`snapshot`."""
        self.replay = replay
        """(index, length) of the recording when replaying, read right after the collect."""

    @property
    def findings(self) -> tuple[Finding, ...]:
        """The findings for this snapshot."""
        return self.analysis.findings

    @property
    def alerts(self) -> AlertState | None:
        """The alert state after this snapshot (None: no alert engine ran)."""
        return self.analysis.alerts

    def can_replace(self, message: Message) -> bool:
        """A newer snapshot (``message``) makes this older, still queued one pointless.

        Textual asks the queued message whether the next one may supersede it; alerts that
        started firing with this one move to the newer message so their toasts are not lost.
        """
        if not isinstance(message, SnapshotReady):
            return False
        if self.analysis.started:
            newer = message.analysis
            keys = {(a.rule, a.subject) for a in newer.started}
            carried = tuple(a for a in self.analysis.started if (a.rule, a.subject) not in keys)
            message.analysis = replace(newer, started=carried + newer.started)
        return True


class SelectionChanged(Message):
    """The container or process under the cursor changed (keys that need one may change state)."""


class ExecFinished(Message):
    """A captured ``nvidia-smi`` run ended (posted from its thread)."""

    def __init__(self, run: object, result: ExecResult) -> None:
        super().__init__()
        self.run = run
        """The :class:`gputui.ui.screens.exec_modal.ExecRun` that ended."""
        self.result = result
        """What the collector returned."""
