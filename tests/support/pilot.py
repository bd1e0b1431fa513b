"""Shared Pilot helpers."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from rich.text import Text
from textual.notifications import Notification, Notifications
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets.tree import TreeNode

from gputui.derive.analysis import Analysis
from gputui.model.snapshot import Snapshot
from gputui.ui.app import GpuTuiApp
from gputui.ui.messages import SnapshotReady

NodeData = TypeVar("NodeData")


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
    does (call it only while that thread waits out its interval, so the engines see one feeder);
    without it only the history is recorded (the same way, same caveat).
    """
    app = pilot.app
    assert isinstance(app, GpuTuiApp)
    if analyse:
        analysis = app.analyzer.analyse(snapshot)
    else:
        # No findings or alerts, but the history recorded in the analyzer's buffers, as the
        # collector thread's analysis records it.
        analysis = Analysis.bare(snapshot)
        history, processes = app.analyzer.history, app.analyzer.process_history
        if history is not None and processes is not None:
            if history.last_time is not None and snapshot.taken_at < history.last_time:
                history.clear()  # back in time, as the analysis does
                processes.clear()
            history.record(snapshot)
            processes.record(snapshot, app.analyzer.followed, analysis.process_sums)
            analysis = replace(analysis, history=history.view(), process_history=processes.view())
    app.post_message(SnapshotReady(snapshot, analysis))
    await pilot.pause()
    await pilot.pause()


def toasts(app: GpuTuiApp) -> list[str]:
    """Every toast's message the app shows from now on, kept after the toast has gone.

    ``app._notifications`` forgets a toast once its timeout (5 s of wall clock) has passed, so
    a test counting toasts there fails whenever a loaded machine makes it slower than that.
    The returned list grows as toasts are shown (sanitised, as on screen).
    """
    shown: list[str] = []
    notifications = app._notifications
    add = notifications.add

    def recording(notification: Notification) -> Notifications:
        shown.append(notification.message)
        return add(notification)

    notifications.add = recording  # type: ignore[method-assign]
    return shown


def tree_keys(app: GpuTuiApp) -> list[str]:
    """Top-level node keys of the container tree, in order."""
    return [n.data.key for n in app.main.ctree.root.children if n.data is not None]


def screen_lines(app: GpuTuiApp) -> list[str]:
    """The text of every line the current screen draws (what a terminal would show)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def node_label(node: TreeNode[NodeData]) -> Text:
    """A tree node's label as the ``Text`` it is (``TreeNode.label`` is typed ``str | Text``)."""
    label = node.label
    assert isinstance(label, Text), label
    return label


def current_screen(app: GpuTuiApp) -> Screen[object]:
    """``app.screen``, un-narrowed (an earlier ``isinstance`` does not fix what it is now)."""
    return app.screen


def focused(app: GpuTuiApp) -> Widget | None:
    """``app.focused``, un-narrowed (an earlier ``isinstance`` does not fix what it is now)."""
    return app.focused


#: ``make_app(collector=None, **settings)``, the UI tests' fixture.
AppFactory = Callable[..., GpuTuiApp]


async def wait_until(
    pilot: Pilot[None], check: Callable[[], object], what: str, seconds: float = 30
) -> None:
    """Poll ``check`` between frames until it holds; fail naming ``what`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


async def select_container(app: GpuTuiApp, pilot: Pilot[None], container_id: str) -> None:
    """Put the tree's cursor on a container (after a refresh that lists it), and check it."""
    key = f"c:{container_id}"
    tree = app.main.ctree
    await wait_until(pilot, lambda: key in tree.nodes_by_key, f"{key} in the tree")
    node = tree.nodes_by_key[key]
    if node.parent is not None and not node.parent.is_expanded:  # "other containers", folded
        node.parent.expand()
        await pilot.pause()
    tree.move_cursor(node)
    await pilot.pause()
    await pilot.pause()
    selected, _ = app.main.selection()
    assert selected is not None and selected.info.id == container_id
