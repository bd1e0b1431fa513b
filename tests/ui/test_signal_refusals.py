"""``T`` / ``K`` say why when they cannot act, and never offer the dialog outside the host's PIDs.

Outside the host's PID namespace the PIDs NVML reports are not PIDs of gputui's namespace: a
signal there would hit an unrelated process (or none).
"""

from __future__ import annotations

from textual.pilot import Pilot

from gputui.model.processes import Visibility
from gputui.ui.app import GpuTuiApp
from gputui.ui.machine_actions import READ_ONLY_REFUSAL
from gputui.ui.screens.confirm import ConfirmScreen
from tests.support.factories import FakeCollector, cid, standard
from tests.support.pilot import AppFactory, push, ready


def _with_visibility(host_pid_namespace: bool | None) -> object:
    from dataclasses import replace

    return replace(standard(), visibility=Visibility(host_pid_namespace=host_pid_namespace))


async def _select(app: GpuTuiApp, pilot: Pilot[None], key: str) -> None:
    tree = app.main.ctree
    tree.move_cursor(tree.nodes_by_key[key])
    await pilot.pause()
    await pilot.pause()


def _last(app: GpuTuiApp) -> str:
    messages = [n.message for n in app._notifications]
    return messages[-1] if messages else ""


def _on_main(app: GpuTuiApp) -> bool:
    screen: object = app.screen
    return screen is app.main


async def test_no_dialog_outside_the_host_pid_namespace(make_app: AppFactory) -> None:
    for visible, why in ((False, "not in the host's PID namespace"), (None, "cannot tell")):
        collector = FakeCollector([_with_visibility(visible)])  # type: ignore[list-item]
        app = make_app(collector)
        async with app.run_test(size=(140, 40)) as pilot:
            await ready(pilot)
            await _select(app, pilot, "p:611:0")
            for key in ("T", "K"):
                await pilot.press(key)
                await pilot.pause()
                assert _on_main(app), (visible, key)
                assert why in _last(app), (visible, key, _last(app))
            app.action_signal(15)  # the palette's way in
            await pilot.pause()
            assert _on_main(app)
            assert collector.signals == []


async def test_namespace_lost_while_the_dialog_is_open(make_app: AppFactory) -> None:
    collector = FakeCollector()
    app = make_app(collector)
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await _select(app, pilot, "p:611:0")
        await pilot.press("T")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await push(pilot, _with_visibility(False))  # type: ignore[arg-type]
        await pilot.press("y")
        await pilot.pause()
        assert collector.signals == []
        assert "no longer visible" in _last(app)


async def test_container_row_and_no_selection_say_why(make_app: AppFactory) -> None:
    collector = FakeCollector()
    app = make_app(collector)
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await _select(app, pilot, f"c:{cid(2)}")
        await pilot.press("K")  # a container's row: its GPU processes, named, after a question
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        assert "PID 700" in app.screen.body.plain
        await pilot.press("n")
        await pilot.pause()
        assert _on_main(app)
        await _select(app, pilot, "g:host")  # a group row: no process, no container
        await pilot.press("T")
        await pilot.pause()
        assert _on_main(app)
        assert "Select a process first" in _last(app)
        assert collector.signals == []


async def test_read_only_t_and_k_say_why(make_app: AppFactory) -> None:
    collector = FakeCollector()
    app = make_app(collector, read_only=True)
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await _select(app, pilot, "p:611:0")
        assert app.check_action("signal", ()) is False  # still gone from keys, help, palette
        for key in ("T", "K"):
            before = len(list(app._notifications))
            await pilot.press(key)
            await pilot.pause()
            assert _on_main(app)
            assert len(list(app._notifications)) == before + 1
            assert _last(app) == READ_ONLY_REFUSAL
        assert collector.signals == []


async def test_signal_that_raises_is_reported_not_a_crash(make_app: AppFactory) -> None:
    class Raising(FakeCollector):
        def signal_process(self, pid: int, signum: int, start_time: float | None) -> str | None:
            raise PermissionError(f"EPERM for {pid}")

    app = make_app(Raising())
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await _select(app, pilot, "p:611:0")
        await pilot.press("T")
        await pilot.pause()
        await pilot.press("y")
        for _ in range(100):
            if "failed" in _last(app):
                break
            await pilot.pause(0.02)
        assert "SIGTERM to PID 611 failed: PermissionError: EPERM for 611" in _last(app)
        assert app.is_running and app.return_code is None
