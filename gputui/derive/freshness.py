"""How old the per-process and per-container figures are, in words for the screen.

With many GPU processes (or running containers) a refresh reads only a rotating share of their
/proc (or cgroup) files; the others keep the figures of an earlier refresh, stamped with when
they were read (``ProcessInfo.sampled_at``, ``ContainerInfo.stats_sampled_at``). These helpers
turn those stamps into the short texts the UI shows next to the figures and in a status note.
A stamp of None means the figures were read by this refresh: nothing is said then.
"""

from __future__ import annotations

from collections.abc import Iterable

from gputui.model.snapshot import Snapshot

__all__ = ["age_text", "container_stats_note", "figure_age", "process_figures_note"]

#: Figures younger than this are called current: a share read a moment before the snapshot
#: was stamped is not "old".
CURRENT_S = 1.0


def figure_age(taken_at: float, sampled_at: float | None) -> float | None:
    """Seconds by which a figure is older than the snapshot; None when read by this refresh.

    Args:
        taken_at: The snapshot's time (seconds since the epoch).
        sampled_at: When the figure was read (seconds since the epoch), or None.
    """
    if sampled_at is None:
        return None
    return max(0.0, taken_at - sampled_at)


def age_text(taken_at: float, sampled_at: float | None) -> str:
    """A figure's age for a table cell or label, e.g. ``"3s"``; empty when current.

    Args:
        taken_at: The snapshot's time.
        sampled_at: When the figure was read, or None (read by this refresh).

    Returns:
        ``""`` for a figure read by this refresh or less than :data:`CURRENT_S` before it,
        else whole seconds (``"4s"``), or minutes beyond 99 s (``"2m"``).
    """
    age = figure_age(taken_at, sampled_at)
    if age is None or age < CURRENT_S:
        return ""
    if age < 99.5:
        return f"{age:.0f}s"
    return f"{age // 60:.0f}m"


def _note(what: str, count: int, noun: str, ages: Iterable[float]) -> str | None:
    oldest = max(ages, default=None)
    if oldest is None:
        return None
    return f"{what} of {count:,} {noun} read in turn: up to {max(oldest, CURRENT_S):.0f} s old"


def process_figures_note(snapshot: Snapshot) -> str | None:
    """A status note when per-process CPU/RSS come from a rotating share, else None.

    Example: ``"CPU/RSS of 2,000 processes read in turn: up to 5 s old"`` (a process on two
    GPUs counts once).
    """
    stamped = {
        p.pid: p.info.sampled_at for p in snapshot.processes if p.info.sampled_at is not None
    }
    ages = (snapshot.taken_at - at for at in stamped.values())
    return _note("CPU/RSS", len(stamped), "processes", ages)


def container_stats_note(snapshot: Snapshot) -> str | None:
    """A status note when container CPU/memory come from a rotating share, else None.

    Example: ``"CPU/memory of 200 containers read in turn: up to 4 s old"``.
    """
    stamped = [
        u.info.stats_sampled_at for u in snapshot.containers if u.info.stats_sampled_at is not None
    ]
    ages = (snapshot.taken_at - at for at in stamped)
    return _note("CPU/memory", len(stamped), "containers", ages)
