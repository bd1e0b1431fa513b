"""The container pane under the tree on tall terminals: live figures, findings and the last log
lines of the selected container, against real containers (Docker, their logs and /proc are real;
NVML is a scenario), and its snapshot on the demo at 160x50.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from textual.pilot import Pilot

from gputui.collect.collector import Collector
from gputui.collect.docker.source import DockerSource
from gputui.collect.linux.proc_reader import ProcSource
from gputui.collect.standins.scenario import ScenarioSource
from gputui.model.settings import Settings
from gputui.ui.app import GpuTuiApp
from gputui.ui.messages import SnapshotReady
from gputui.ui.widgets.selection_pane import LOG_LINES, LogTail, SelectionPane
from tests.support.factories import demo_app, demo_snapshots
from tests.support.pilot import ready, screen_lines, select_container, wait_until

SCENARIO: dict[str, Any] = {"nvml": "ok", "driver_version": "580.159.04", "gpus": []}


def _app(free_run_id: str, **settings: Any) -> tuple[GpuTuiApp, Collector]:
    collector = Collector(
        ScenarioSource(SCENARIO),
        ProcSource(),
        DockerSource(label=f"gputui-test={free_run_id}"),
        mode="scenario",
        health=None,
    )
    return GpuTuiApp(collector, Settings(interval=60.0, **settings)), collector


def _pane(app: GpuTuiApp) -> SelectionPane:
    pane = app.main.selection_pane
    assert pane is not None
    return pane


def _ring_has(app: GpuTuiApp, text: str) -> bool:
    tail = _pane(app).tail
    return tail is not None and any(line.text == text for line in tail.snapshot(LOG_LINES))


def _logs(app: GpuTuiApp) -> str:
    return str(_pane(app).logs.render())


async def test_the_pane_follows_the_selection_and_its_logs_at_160x50(
    run_container: Callable[..., Any], free_run_id: str
) -> None:
    talker = run_container(
        [
            "sh",
            "-c",
            "echo first-line; i=0; while true; do i=$((i+1)); echo tick-$i; sleep 0.2; done",
        ],
        name=f"ui-pane-a-{free_run_id}",
        network_mode="none",
    )
    quiet = run_container(
        ["sh", "-c", "echo \"$(printf 'evil\\033[2Jline')\"; sleep 300"],
        name=f"ui-pane-b-{free_run_id}",
        network_mode="none",
    )
    app, collector = _app(free_run_id)
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await ready(pilot, tries=500)
            await select_container(app, pilot, talker.id)
            assert app.main.pane_shown  # by itself at this size
            # Its first line is in the ring (on screen only while fewer ticks than rows came).
            await wait_until(pilot, lambda: _ring_has(app, "first-line"), "the talker's first line")
            seen = _logs(app)
            # Following: newer lines keep coming while the pane is open.
            await wait_until(
                pilot, lambda: _logs(app) != seen and "tick-" in _logs(app), "new lines"
            )
            lines = screen_lines(app)
            assert any(talker.name in line and "running" in line for line in lines[-16:])
            first_tail = _pane(app).tail
            assert first_tail is not None

            await select_container(app, pilot, quiet.id)
            # The old stream is closed (its thread returns), the new container's is read.
            first_tail.thread.join(5)
            assert not first_tail.thread.is_alive()
            await wait_until(pilot, lambda: "evilline" in _logs(app), "the quiet container's line")
            assert "tick-" not in _logs(app) and "\x1b" not in _logs(app)
            assert any(quiet.name in line for line in screen_lines(app)[-16:])

            # o hides it (the tree gets the rows back), o again shows it.
            await pilot.press("o")
            await pilot.pause()
            assert not app.main.pane_shown
            assert _pane(app).tail is None  # hidden: no stream stays open
            await pilot.press("o")
            await pilot.pause()
            assert app.main.pane_shown
            await wait_until(pilot, lambda: "evilline" in _logs(app), "the logs again")
    finally:
        collector.close()


@pytest.mark.parametrize("size", [(80, 24), (120, 30)], ids=["80x24", "120x30"])
async def test_the_pane_yields_at_narrow_sizes(size: tuple[int, int]) -> None:
    app = demo_app(refreshes=3)
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        await pilot.pause()
        assert not app.main.pane_shown
        assert app.main.selection_pane is None  # never imported nor mounted
        if size == (80, 24):
            await pilot.press("o")  # asked for: too small, and said so
            await pilot.pause()
            assert not app.main.pane_shown
            notes = [n.message for n in app._notifications]
            assert any("needs at least 100x30" in n for n in notes), notes


async def test_resizing_shows_and_hides_the_pane() -> None:
    app = demo_app(refreshes=3)
    async with app.run_test(size=(120, 30)) as pilot:
        await ready(pilot)
        assert not app.main.pane_shown
        await pilot.resize_terminal(200, 60)
        await pilot.pause(0.2)
        assert app.main.pane_shown
        text = "\n".join(screen_lines(app))
        assert "docker does not offer container logs" in text  # the demo simulates, says so
        await pilot.resize_terminal(120, 30)
        await pilot.pause(0.2)
        assert not app.main.pane_shown


async def test_no_logs_hides_the_pane_s_logs(
    run_container: Callable[..., Any], free_run_id: str
) -> None:
    container = run_container(
        ["sh", "-c", "echo secret-in-logs; sleep 300"],
        name=f"ui-pane-nl-{free_run_id}",
        network_mode="none",
    )
    app, collector = _app(free_run_id, hide_sensitive=True)
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await ready(pilot, tries=500)
            await select_container(app, pilot, container.id)
            await pilot.pause(0.5)
            assert "hidden (--no-logs)" in _logs(app)
            assert "secret-in-logs" not in "\n".join(screen_lines(app))
            assert _pane(app).tail is None
    finally:
        collector.close()


class _Flood:
    """A reader that hands out more lines than the pane keeps, then blocks until closed."""

    tty = False

    def __init__(self) -> None:
        self.closed = threading.Event()
        self.batches = 3

    def read(self) -> Any:
        from gputui.collect.docker.logs import LogLine

        if self.batches and not self.closed.is_set():
            self.batches -= 1
            return [LogLine("stdout", f"line {i}") for i in range(LOG_LINES)]
        self.closed.wait(30)
        return None

    def close(self) -> None:
        self.closed.set()


async def test_the_pane_repaints_only_the_cells_that_changed() -> None:
    """An unchanged selection repaints nothing and never lays the screen out again; a refresh
    whose figures moved repaints those cells only (Static.update asked for a layout of the
    whole screen and a render of all seven lines, every second)."""
    app = demo_app(refreshes=5, interval=60.0)  # no refresh of its own during the test
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        await pilot.pause()
        stats = _pane(app).stats
        calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
        refresh = stats.refresh

        def recorded(*regions: Any, **kwargs: Any) -> Any:
            calls.append((regions, kwargs))
            return refresh(*regions, **kwargs)

        stats.refresh = recorded  # type: ignore[method-assign]
        shown, rendered = stats.text_lines(), stats.lines_rendered
        for _ in range(3):
            app.main.show_pane()
            await pilot.pause()
        assert calls == [] and stats.lines_rendered == rendered
        later = demo_snapshots(6)[-1]
        app.on_snapshot_ready(SnapshotReady(later, app.analyzer.analyse(later)))
        await pilot.pause()
        await pilot.pause()
        moved = [
            i for i, (a, b) in enumerate(zip(shown, stats.text_lines(), strict=False)) if a != b
        ]
        assert moved, "the demo's next refresh moves the selected container's figures"
        assert calls and all(regions and not kwargs.get("layout") for regions, kwargs in calls)
        assert 0 < stats.lines_rendered - rendered <= len(moved) < len(shown)


def test_the_log_ring_is_bounded_and_close_ends_the_thread() -> None:
    reader = _Flood()
    tail = LogTail(lambda: reader)
    tail.start()
    deadline = time.monotonic() + 5
    while reader.batches and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)
    assert len(tail.lines) == LOG_LINES
    assert [line.text for line in tail.snapshot(2)] == [
        f"line {LOG_LINES - 2}",
        f"line {LOG_LINES - 1}",
    ]
    tail.close()
    tail.thread.join(5)
    assert not tail.thread.is_alive() and reader.closed.is_set()


@pytest.mark.parametrize("size", [(160, 50)], ids=["160x50"])
def test_snapshot_wide_containers_with_the_pane(snap_compare: Any, size: tuple[int, int]) -> None:
    """The demo at 160x50: the pane shows the shared, throttled, memory-bound bert container."""

    async def run_before(pilot: Pilot[None]) -> None:
        await ready(pilot)
        for _ in range(6):  # vllm, its process, llm-trainer and its two, bert-infer
            await pilot.press("j")
        await pilot.pause(0.3)

    assert snap_compare(demo_app(), terminal_size=size, run_before=run_before)
