"""One collection for a command that answers once: read until the sources have answered."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gputui.collect.collector import Collector
    from gputui.model.snapshot import Snapshot


#: A Docker read this slow may have stopped at its deadline with containers left uninspected
#: (their GPU requests unknown); ``free`` then reads again, which inspects the rest.
_SETTLE_S = 4.0
_SETTLE_READS = 3


def collect_settled(collector: Collector) -> tuple[Snapshot, bool]:
    """One snapshot, read again (at most :data:`_SETTLE_READS` in all) while reads are slow.

    Returns:
        The last snapshot and whether its read finished well inside the Docker deadline.
    """
    for _ in range(_SETTLE_READS):
        started = time.monotonic()
        snapshot = collector.collect()
        if time.monotonic() - started < _SETTLE_S:
            return snapshot, True
    return snapshot, False
