"""Messages the collector worker and the widgets post upwards."""

from __future__ import annotations

from textual.message import Message

from gputui.model import Snapshot


class SnapshotReady(Message):
    """A fresh snapshot from the collector thread.

    Replaceable: when the UI falls behind (a slow terminal, a big redraw), a newer snapshot waiting
    in the queue replaces the older one instead of queueing stale frames behind it.
    """

    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__()
        self.snapshot = snapshot
        """The refresh to apply."""

    def can_replace(self, message: Message) -> bool:
        """A newer snapshot makes any queued older one pointless."""
        return isinstance(message, SnapshotReady)


class SelectionChanged(Message):
    """The container or process under the cursor changed (keys that need one may change state)."""
