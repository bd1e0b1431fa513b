"""Shared Pilot helpers."""

from __future__ import annotations

from textual.pilot import Pilot

from gputui.model import Snapshot
from gputui.ui.app import GpuTuiApp
from gputui.ui.messages import SnapshotReady


async def ready(pilot: Pilot[None], tries: int = 100) -> GpuTuiApp:
    """Wait until the first snapshot from the collector thread has been applied."""
    app = pilot.app
    assert isinstance(app, GpuTuiApp)
    for _ in range(tries):
        if app.main.snapshot is not None and app.main.health_title:
            break
        await pilot.pause(0.02)
    assert app.main.snapshot is not None, "no snapshot applied"
    await pilot.pause()
    return app


async def push(pilot: Pilot[None], snapshot: Snapshot, analyse: bool = False) -> None:
    """Deliver a snapshot the way the collector thread does.

    ``analyse`` runs the app's findings and alert engines on it first, as the collector thread
    does (call it only while that thread waits out its interval, so the engines see one feeder).
    """
    app = pilot.app
    assert isinstance(app, GpuTuiApp)
    analysis = app.analyzer.analyse(snapshot) if analyse else None
    app.post_message(SnapshotReady(snapshot, analysis))
    await pilot.pause()
    await pilot.pause()


def tree_keys(app: GpuTuiApp) -> list[str]:
    """Top-level node keys of the container tree, in order."""
    return [n.data.key for n in app.main.ctree.root.children if n.data is not None]


def screen_lines(app: GpuTuiApp) -> list[str]:
    """The text of every line the current screen draws (what a terminal would show)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]
