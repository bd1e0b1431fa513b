"""Entry point for the interactive monitor (``gputui`` without ``--once``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gputui.settings import Settings

if TYPE_CHECKING:
    from gputui.ui.actions import CollectorLike


def run_tui(settings: Settings, collector: CollectorLike | None = None) -> int:
    """Build the collector, run the app until the user quits, close the collector.

    Textual and the collector are imported here, not at module level, so ``gputui --once`` never
    pays for (or depends on) Textual.

    Args:
        settings: What the user asked for.
        collector: A ready collector (``gputui replay`` passes a recording's player); built from
            ``settings`` when None. Closed at the end either way.

    Returns:
        The exit status (0).
    """
    from gputui.ui.app import GpuTuiApp
    from gputui.wiring import build_collector

    chosen = collector if collector is not None else build_collector(settings)
    try:
        GpuTuiApp(chosen, settings).run()
    finally:
        close = getattr(chosen, "close", None)
        if close is not None:
            close()
    return 0
