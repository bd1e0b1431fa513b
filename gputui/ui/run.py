"""Entry point for the interactive monitor (``gputui`` without ``--once``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gputui.boundary.startup_trace import mark
from gputui.model.settings import Settings

if TYPE_CHECKING:
    from gputui.collect.sources import CollectorProtocol, GpuSource
    from gputui.config.file import Config


def run_tui(
    settings: Settings,
    collector: CollectorProtocol | None = None,
    *,
    config: Config | None = None,
    headless: bool = False,
    gpu: GpuSource | None = None,
) -> int:
    """Build the collector, run the app until the user quits, close the collector.

    Textual and the collector are imported here, not at module level, so ``gputui --once`` never
    pays for (or depends on) Textual.

    Args:
        settings: What the user asked for.
        collector: A ready collector (``gputui replay`` passes a recording's player); built from
            ``settings`` when None. Closed at the end either way.
        config: The config file, loaded once by the command line; None: the defaults.
        headless: Run without a terminal (no output, no input), as the tests do.
        gpu: NVML already starting (made by the command line at once), for the collector built
            here; closed at the end either way.

    Returns:
        The exit status: 0 after the user quit, non-zero after a crash (whose traceback, without
        local variables, is on stderr).
    """
    from gputui.collect.loop import Prefetched
    from gputui.wiring.compose import build_collector

    # The first collection (NVML's start, the engine, the health checks) runs while Textual is
    # imported and paints, not after: the first frame with data comes sooner.
    if collector is None:
        chosen: CollectorProtocol = Prefetched(
            build_collector(settings, gpu=gpu, first_health_later=True)
        )
    else:
        chosen = collector
        if gpu is not None:
            gpu.close()  # the ready collector reads its own

    from gputui.ui.app import GpuTuiApp
    from gputui.ui.crash import run_app

    mark("textual-imported")

    try:
        return run_app(lambda: GpuTuiApp(chosen, settings, config=config), headless=headless)
    finally:
        chosen.close()
