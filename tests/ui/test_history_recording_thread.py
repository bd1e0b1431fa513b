"""The UI thread only applies: history is recorded and user totals computed by the analysis.

The app's collector worker runs the analysis (``Analyzer.analyse``), which records the GPU,
container and per-process history and computes the users and projects; the UI thread shows the
views the analysis hands it. The recorders here note the thread they run on.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from gputui.derive.history import History, gpu_key
from gputui.derive.process_history import ProcessHistory, identity_of
from gputui.ui.app import GpuTuiApp
from gputui.ui.messages import SnapshotReady
from tests.support.factories import FakeCollector, standard
from tests.support.pilot import ready

MakeApp = Callable[..., GpuTuiApp]


@pytest.fixture
def recorder_threads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """(recorder, thread id) of every ``History.record`` and ``ProcessHistory.record`` call."""
    calls: list[tuple[str, int]] = []
    for cls in (History, ProcessHistory):
        original = cls.record

        def spy(self: Any, *args: Any, _original: Any = original, _name: str = cls.__name__,
                **kwargs: Any) -> None:  # fmt: skip
            calls.append((_name, threading.get_ident()))
            _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, "record", spy)
    return calls


async def _until(pilot: Any, done: Callable[[], bool]) -> None:
    for _ in range(250):
        if done():
            return
        await pilot.pause(0.02)
    assert done()


async def test_history_is_recorded_on_the_collector_thread_never_on_the_ui_thread(
    make_app: MakeApp, recorder_threads: list[tuple[str, int]]
) -> None:
    snaps = [standard(taken_at=1_000_000.0 + i, util=10 * i) for i in range(5)]
    app = make_app(FakeCollector(snaps), interval=0.1)
    ui_thread = threading.get_ident()  # run_test runs the app on this thread's event loop
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await _until(pilot, lambda: app.main.snapshot is snaps[-1])
        recorders = {name for name, _ in recorder_threads}
        assert recorders == {"History", "ProcessHistory"}
        on_ui = [name for name, thread in recorder_threads if thread == ui_thread]
        assert not on_ui, f"recorded on the UI thread: {on_ui}"
        # What is shown is the history of every snapshot collected, as the analysis recorded
        # it, including any the UI skipped because a newer one replaced it in the queue.
        gpu = snaps[-1].gpus[0]
        assert app.history.last_time == snaps[-1].taken_at
        assert app.history.series(gpu_key(gpu, "util"), 1e9) == tuple(
            float(s.gpus[0].utilization_gpu or 0) for s in snaps
        )
        trainer = identity_of(snaps[-1].processes[0])
        assert len(app.process_history.timed(trainer, "mem", 1e9)[0]) == len(snaps)


async def test_pause_freezes_the_shown_history_while_a_late_collection_is_recorded(
    make_app: MakeApp,
) -> None:
    snaps = [standard(taken_at=1_000_000.0 + i) for i in range(4)]
    app = make_app(FakeCollector(snaps))  # 60 s interval: one collection until woken
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        key = gpu_key(snaps[0].gpus[0], "util")
        assert app.history.last_time == snaps[0].taken_at
        await pilot.press("p")
        assert app.paused
        # A collection under way when the pause came still delivers; its analysis records it,
        # but the paused screen goes on showing what it showed.
        await asyncio.to_thread(app.loop.once)
        await pilot.pause()
        await pilot.pause()
        assert app.analyzer.history is not None
        assert app.analyzer.history.last_time == snaps[1].taken_at
        assert app.history.last_time == snaps[0].taken_at
        assert len(app.history.series(key, 1e9)) == 1
        assert app.main.snapshot is snaps[0]
        await pilot.press("p")  # resume: collects at once, and the history shown catches up
        await _until(pilot, lambda: app.history.last_time == snaps[2].taken_at)
        assert len(app.history.series(key, 1e9)) == 3


async def test_the_users_tab_shows_the_analysis_totals(make_app: MakeApp) -> None:
    snap = standard()
    app = make_app(FakeCollector([snap]))
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        await pilot.press("6")
        await pilot.pause()
        analysis = app.analysis
        assert analysis is not None and analysis.totals is not None
        view = app.main.users_view
        # The very rows the analysis computed on the collector's thread, not a recomputation.
        assert view.users is analysis.totals.users
        assert view.project_rows is analysis.totals.projects
        assert view.users  # the standard host has users
        # A later snapshot's totals replace them (shown when the tab syncs).
        later = replace(snap, taken_at=snap.taken_at + 1)
        # Analysed here while the collector thread waits out its interval, as it would.
        app.post_message(SnapshotReady(later, app.analyzer.analyse(later)))
        await _until(pilot, lambda: app.main.users_view.snapshot is later)
        assert app.analysis is not None and app.analysis.totals is not None
        assert app.main.users_view.users is app.analysis.totals.users
