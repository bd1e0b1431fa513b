"""Entry point for the interactive monitor (``gputui`` without ``--once``)."""

from __future__ import annotations

from gputui.settings import Settings


def run_tui(settings: Settings) -> int:
    """Build the collector, run the app until the user quits, close the collector.

    Textual and the collector are imported here, not at module level, so ``gputui --once`` never
    pays for (or depends on) Textual.

    Args:
        settings: What the user asked for.

    Returns:
        The exit status (0).
    """
    from gputui.collect.collector import build_collector
    from gputui.ui.app import GpuTuiApp

    collector = build_collector(settings)
    try:
        GpuTuiApp(collector, settings).run()
    finally:
        collector.close()
    return 0
