"""Running totals of the ledger's quantities since the process started (the exporter's counters).

Prometheus users take ``increase()`` of them; a restart resets them, which Prometheus handles.
Subjects not seen for :data:`FORGET_AFTER_S` are forgotten (their series end), and at most
:data:`MAX_SUBJECTS` (device, subject) pairs are kept (the least recently seen go first), so a
host with container churn does not grow the exposition for ever.
"""

from __future__ import annotations

from collections.abc import Mapping

from gputui.ledger.quantities import Accountant, Amounts, Device, Interval, Subject
from gputui.model.snapshot import Snapshot

#: A (device, subject) pair unseen this long is dropped from the counters.
FORGET_AFTER_S = 3600.0
#: Most (device, subject) pairs kept.
MAX_SUBJECTS = 1024


class LedgerCounters:
    """Totals per (device, subject) of every interval taken in.

    Args:
        interval_s: The collection interval (gaps are not counted).
        idle_power_w: Idle power per GPU model.
    """

    def __init__(self, interval_s: float, idle_power_w: Mapping[str, float] | None = None) -> None:
        self.accountant = Accountant(interval_s, idle_power_w)
        self.totals: dict[tuple[Device, Subject], Amounts] = {}
        self._seen: dict[tuple[Device, Subject], float] = {}

    def take(self, snapshot: Snapshot) -> None:
        """Add the interval ending at ``snapshot`` (nothing for the first one or a gap)."""
        step = self.accountant.take(snapshot)
        if not isinstance(step, Interval):
            return
        for key, amounts in step.rows.items():
            into = self.totals.get(key)
            if into is None:
                self.totals[key] = into = Amounts()
            into.add(amounts)
            self._seen[key] = step.end
        old = [k for k, t in self._seen.items() if step.end - t > FORGET_AFTER_S]
        if len(self._seen) - len(old) > MAX_SUBJECTS:
            ranked = sorted(self._seen, key=self._seen.__getitem__)
            old = ranked[: len(self._seen) - MAX_SUBJECTS]
        for key in old:
            self.totals.pop(key, None)
            self._seen.pop(key, None)
