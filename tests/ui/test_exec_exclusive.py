"""``x``: one nvidia-smi per container at a time, a running state, the result, honest notes.

Every run holds a thread until the collector's timeout; pressing ``x`` repeatedly used to start
one more each time (and each modal was a new one), so the threads piled up.
"""

from __future__ import annotations

import threading
import time

import pytest
from textual.pilot import Pilot
from textual.widgets import Static

from gputui.model.containers import ExecResult
from gputui.model.settings import Settings
from gputui.ui.app import GpuTuiApp
from gputui.ui.messages import SnapshotReady
from gputui.ui.run import run_tui
from gputui.ui.screens.exec_modal import PID_NAMESPACE_NOTE, ExecRun, ExecScreen
from tests.support.factories import FakeCollector, cid
from tests.support.pilot import AppFactory, ready, toasts

NOTE = PID_NAMESPACE_NOTE.split(":")[0]


async def _select(app: GpuTuiApp, pilot: Pilot[None], key: str) -> None:
    tree = app.main.ctree
    node = tree.nodes_by_key[key]
    tree.move_cursor(node)
    await pilot.pause()
    await pilot.pause()
    assert tree.cursor_node is node


async def _result_text(app: GpuTuiApp, pilot: Pilot[None]) -> str:
    for _ in range(500):  # up to 10 s: returns as soon as it holds
        if isinstance(app.screen, ExecScreen) and app.screen.result is not None:
            break
        await pilot.pause(0.02)
    assert isinstance(app.screen, ExecScreen)
    assert app.screen.result is not None
    await pilot.pause()
    return str(app.screen.query_one("#exec-output", Static).content)


def _on_main(app: GpuTuiApp) -> bool:
    screen: object = app.screen  # not narrowed by an earlier isinstance check
    return screen is app.main


#: The most a :class:`SlowExec` waits for its release: every test releases it in a ``finally``,
#: so this bounds only a broken test, and is far above what a loaded machine takes to get there.
SLOW_EXEC_BOUND_S = 120.0


class SlowExec:
    """An exec that runs until released (bounded by :data:`SLOW_EXEC_BOUND_S`, like a timeout)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.threads: set[int] = set()

    def __call__(self, container_id: str) -> ExecResult:
        self.threads.add(threading.get_ident())
        if not self.release.wait(SLOW_EXEC_BOUND_S):
            return ExecResult(("nvidia-smi",), None, timed_out=True, duration_s=SLOW_EXEC_BOUND_S)
        return ExecResult(("nvidia-smi",), 0, stdout="| NVIDIA-SMI 580.159.04 |\n")


async def test_second_x_while_running_starts_nothing_and_says_so(make_app: AppFactory) -> None:
    slow = SlowExec()
    collector = FakeCollector(exec_result=slow)
    app = make_app(collector)
    # Counted as shown, not as still on screen: a toast goes after 5 s of wall clock, and on a
    # loaded machine the four presses below took longer than that (1 run in 8 failed).
    said = toasts(app)
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await _select(app, pilot, f"c:{cid(1)}")
        threads_before = threading.active_count()
        try:
            await pilot.press("x")
            await pilot.pause()
            assert isinstance(app.screen, ExecScreen)
            first = app.screen
            state = first.query_one("#exec-state", Static)
            assert state.display and "Running" in str(state.content)
            await pilot.press("x")  # in the modal: x is not bound there
            await pilot.pause()
            assert app.screen is first
            for _ in range(4):  # closed, still running: x shows that run again, starts none
                await pilot.press("escape")
                await pilot.pause()
                assert _on_main(app)
                await pilot.press("x")
                await pilot.pause()
                assert isinstance(app.screen, ExecScreen)
                assert app.screen.exec_run is first.exec_run
                assert len(app.screen_stack) == 2  # no modal stacked on a modal
            await pilot.pause(0.1)
            assert len(collector.exec_calls) == 1
            assert threading.active_count() <= threads_before + 1
            assert sum("already running" in m for m in said) == 4, said
        finally:
            slow.release.set()
        text = await _result_text(app, pilot)
        assert "NVIDIA-SMI 580.159.04" in text and "exit 0" in text
        assert not app.screen.query_one("#exec-state").display
        assert len(slow.threads) == 1
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("x")  # finished: x runs it again
        await _result_text(app, pilot)
        assert len(collector.exec_calls) == 2
        assert len(app.screen_stack) == 2
        await pilot.press("escape")
        await pilot.pause()
        assert _on_main(app)


async def test_other_container_runs_alongside(make_app: AppFactory) -> None:
    slow = SlowExec()
    app = make_app(FakeCollector(exec_result=slow))
    said = toasts(app)
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        try:
            await _select(app, pilot, f"c:{cid(1)}")
            await pilot.press("x")
            await pilot.pause()
            await pilot.press("escape")
            await _select(app, pilot, f"c:{cid(2)}")
            await pilot.press("x")
            await pilot.pause(0.1)
            assert [c[0] for c in app.collector.exec_calls] == [cid(1), cid(2)]  # type: ignore[attr-defined]
            await pilot.press("escape")
            await pilot.pause()
        finally:
            slow.release.set()
        for _ in range(500):  # up to 10 s: returns as soon as it holds
            if sum("ended: exit 0" in m for m in said) == 2:
                break
            await pilot.pause(0.02)
        # Both modals were closed: each run says how it ended.
        assert sum("ended: exit 0" in m for m in said) == 2, said
        assert not app.machine.exec_runs


async def test_exec_that_raises_shows_an_error_not_a_spinner(make_app: AppFactory) -> None:
    def raises(container_id: str) -> ExecResult:
        env = ["API_KEY=" + "super" + "secret"]
        raise ConnectionResetError(f"peer reset while sending {env[0]}")

    app = make_app(FakeCollector(exec_result=raises))
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await _select(app, pilot, f"c:{cid(1)}")
        await pilot.press("x")
        text = await _result_text(app, pilot)
        assert "exec failed: ConnectionResetError" in text
        assert "supersecret" not in text
        assert NOTE not in text
        assert app.is_running and app.return_code is None


async def test_cut_output_note_and_pid_note_only_on_success(make_app: AppFactory) -> None:
    results = {
        cid(1): ExecResult(
            ("nvidia-smi",),
            None,
            stdout="y\n" * 50,
            error="nvidia-smi printed more than 1 MiB: the output was cut there "
            "(the command may keep running inside the container)",
            output_cut_bytes=1 << 20,
        ),
        cid(2): ExecResult(
            ("nvidia-smi",), 255, stdout="Failed to initialize NVML: Unknown Error\n"
        ),
    }
    app = make_app(FakeCollector(exec_result=lambda container_id: results[container_id]))
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await _select(app, pilot, f"c:{cid(1)}")
        await pilot.press("x")
        text = await _result_text(app, pilot)
        assert "(output cut at 1 MiB)" in text
        assert "exit none" in text
        assert NOTE not in text
        await pilot.press("escape")
        await _select(app, pilot, f"c:{cid(2)}")
        await pilot.press("x")
        text = await _result_text(app, pilot)
        assert "exit 255" in text and "Failed to initialize NVML" in text
        assert NOTE not in text
        assert "output cut" not in text


def test_quit_while_an_exec_runs_does_not_wait_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A silent nvidia-smi holds its thread until the collector's timeout; q must not wait."""
    slow = SlowExec()
    collector = FakeCollector(exec_result=slow)
    original = GpuTuiApp.on_snapshot_ready

    def on_snapshot_ready(self: GpuTuiApp, message: SnapshotReady) -> None:
        original(self, message)
        node = self.main.ctree.nodes_by_key.get(f"c:{cid(1)}")
        # A snapshot that lands before the first paint is applied right after it: act then.
        if node is not None and not collector.exec_calls and not self.machine.exec_runs:
            self.main.ctree.move_cursor(node)
            self.action_exec_smi()
            self.set_timer(0.3, self.action_quit)

    monkeypatch.setattr(GpuTuiApp, "on_snapshot_ready", on_snapshot_ready)
    started = time.monotonic()
    try:
        code = run_tui(Settings(interval=60.0), collector, headless=True)
        took = time.monotonic() - started
    finally:
        slow.release.set()
    assert len(collector.exec_calls) == 1  # it was running when q came
    assert code == 0
    assert took < 5, f"quitting waited {took:.1f} s for the exec"


async def test_a_run_ending_before_its_reopened_modal_is_composed_shows_its_result(
    make_app: AppFactory,
) -> None:
    # Under load the run can end between ``x`` pushing the modal and the modal composing:
    # showing the result then queried widgets that did not exist yet and crashed the app.
    app = make_app(FakeCollector())
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        run = ExecRun(cid(1), "trainer", 15.0)
        app.push_screen(ExecScreen(run))
        # Synchronously, before the event loop composes the pushed screen.
        app.machine.exec_done(run, ExecResult(("nvidia-smi",), 0, stdout="| NVIDIA-SMI 580 |\n"))
        await pilot.pause()
        await pilot.pause()
        assert isinstance(app.screen, ExecScreen)
        assert "NVIDIA-SMI 580" in str(app.screen.query_one("#exec-output", Static).content)
        assert not app.screen.query_one("#exec-wait").display
