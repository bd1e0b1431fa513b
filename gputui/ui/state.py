"""Small UI state shared by the app and its widgets (no Textual imports: unit-testable)."""

from __future__ import annotations

from gputui.boundary import sanitise
from gputui.model.records import record
from gputui.model.settings import MIN_INTERVAL_S, ViewScope

#: The refresh periods ``+``/``-`` step through, in seconds.
INTERVAL_STEPS: tuple[float, ...] = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)


def step_interval(current: float, direction: int) -> float:
    """The next refresh period up (``direction`` > 0) or down from ``current``.

    A period set on the command line that is not a step (say 3 s) moves to the nearest step in
    the asked direction; the ends of :data:`INTERVAL_STEPS` are sticky.

    Args:
        current: The period in use.
        direction: +1 for slower refreshes, -1 for faster ones.

    Returns:
        The new period, never below :data:`gputui.model.settings.MIN_INTERVAL_S`.
    """
    if direction > 0:
        larger = [s for s in INTERVAL_STEPS if s > current + 1e-9]
        new = larger[0] if larger else max(current, INTERVAL_STEPS[-1])
    else:
        smaller = [s for s in INTERVAL_STEPS if s < current - 1e-9]
        new = smaller[-1] if smaller else min(current, INTERVAL_STEPS[0])
    return max(MIN_INTERVAL_S, new)


def interval_label(seconds: float) -> str:
    """``"1s"``, ``"0.5s"``, ``"0.25s"``: a refresh period for the header."""
    return f"{seconds:g}s"


@record
class UiState:
    """What the header shows besides the snapshot.

    Attributes:
        interval: The refresh period in use.
        paused: True while ``p`` holds the display (or the replay player).
        read_only: True when exec and signals are disabled.
        mode: The collector's mode (``live``, ``scenario``, ``demo``, ``replay``).
        replay: (index of the snapshot shown, snapshots in the recording) while replaying.
        scope: What ``--only``/``--user``/``--pid`` narrow the views to (``GPU 0,2 user
            alice``), None when nothing is narrowed.
    """

    interval: float
    paused: bool = False
    read_only: bool = False
    mode: str = "live"
    replay: tuple[int, int] | None = None
    scope: str | None = None


def scope_label(scope: ViewScope) -> str | None:
    """``GPU 0,2 · user alice · PID 4242``: what the views are narrowed to; None for nothing."""
    parts = []
    if scope.gpus is not None:
        parts.append(f"GPU {','.join(str(i) for i in scope.gpus)}")
    if scope.users is not None:
        parts.append(f"user {','.join(sanitise.safe_text(u, 32) for u in scope.users)}")
    if scope.pids is not None:
        parts.append(f"PID {','.join(str(p) for p in scope.pids)}")
    return " · ".join(parts)[:80] if parts else None
