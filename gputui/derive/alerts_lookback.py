"""How much of a recording to replay before the first snapshot shown.

Windowed findings and alert rules then start from the state they had at that moment.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gputui.derive.alerts import AlertRule


#: With --once, how many snapshots before the one shown feed the analysis (trend detectors
#: look back ten minutes; at most this many are decoded, so a huge recording stays fast).
FINDINGS_LOOKBACK_S = 900.0
FINDINGS_MAX_SNAPSHOTS = 1000


def lookback_s(rules: Sequence[AlertRule]) -> float:
    """How far back the analysis must start to reach the state at the snapshot shown."""
    spans = (r.for_s + (r.window_s if r.kind == "dynamic" else 0.0) for r in rules)
    return max([FINDINGS_LOOKBACK_S, *spans])
