"""Exec nvidia-smi (captured and interactive), signals, and read-only mode."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator, Sequence

from textual.app import SuspendNotSupported
from textual.widgets import Static

from gputui.model.containers import ExecResult
from gputui.ui.app import GpuTuiApp
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.exec_modal import PID_NAMESPACE_NOTE, ExecScreen
from tests.support.factories import FakeCollector, cid
from tests.support.pilot import AppFactory, current_screen, ready


async def _select(app: GpuTuiApp, key: str, pilot) -> None:  # type: ignore[no-untyped-def]
    tree = app.main.ctree
    tree.move_cursor(tree.nodes_by_key[key])
    await pilot.pause()
    await pilot.pause()


async def _settle(app: GpuTuiApp, pilot) -> None:  # type: ignore[no-untyped-def]
    # Not workers.wait_for_complete(): the collector loop is a worker that never completes.
    for _ in range(100):
        if not [w for w in app.workers if w.group == "signal" and not w.is_finished]:
            break
        await pilot.pause(0.02)
    await pilot.pause()


async def _exec_output(app: GpuTuiApp, pilot) -> str:  # type: ignore[no-untyped-def]
    assert isinstance(app.screen, ExecScreen)
    for _ in range(100):
        if app.screen.result is not None:
            break
        await pilot.pause(0.02)
    assert app.screen.result is not None
    return str(app.screen.query_one("#exec-output", Static).content)


async def test_x_runs_nvidia_smi_in_selected_container(make_app: AppFactory) -> None:
    collector = FakeCollector()
    app = make_app(collector, exec_timeout=7.0)
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await _select(app, f"c:{cid(1)}", pilot)
        assert app.check_action("exec_smi", ()) is True
        await pilot.press("x")
        await pilot.pause()
        text = await _exec_output(app, pilot)
        assert collector.exec_calls == [(cid(1), ("nvidia-smi",), 7.0)]
        assert "NVIDIA-SMI 580.159.04" in text
        assert "exit 0" in text
        assert "took 0.25s" in text
        assert "PID namespace" in text
        assert PID_NAMESPACE_NOTE.split(":")[0] in text
        await pilot.press("escape")
        await pilot.pause()
        assert current_screen(app) is app.main


async def test_x_on_a_process_uses_its_container(make_app: AppFactory) -> None:
    collector = FakeCollector()
    app = make_app(collector)
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await _select(app, "p:700:1", pilot)
        await pilot.press("x")
        await _exec_output(app, pilot)
        assert collector.exec_calls[0][0] == cid(2)


async def test_x_from_process_table(make_app: AppFactory) -> None:
    collector = FakeCollector()
    app = make_app(collector)
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await pilot.press("2")  # first row: PID 611 in trainer-a
        await pilot.press("x")
        await _exec_output(app, pilot)
        assert collector.exec_calls[0][0] == cid(1)


async def test_x_error_timeout_and_missing_binary_messages(make_app: AppFactory) -> None:
    results = {
        cid(1): ExecResult(("nvidia-smi",), None, duration_s=15.0, timed_out=True),
        cid(2): ExecResult(
            ("nvidia-smi",),
            126,
            stderr='exec: "nvidia-smi": executable file not found in $PATH',
            error="nvidia-smi is not in this container (NVIDIA_DRIVER_CAPABILITIES lacks utility?)",
        ),
    }
    collector = FakeCollector(exec_result=lambda container_id: results[container_id])
    app = make_app(collector)
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await _select(app, f"c:{cid(1)}", pilot)
        await pilot.press("x")
        text = await _exec_output(app, pilot)
        assert "Timed out" in text
        assert "exit none" in text
        await pilot.press("escape")
        await _select(app, f"c:{cid(2)}", pilot)
        await pilot.press("x")
        text = await _exec_output(app, pilot)
        assert "nvidia-smi is not in this container" in text
        assert "executable file not found" in text
        assert "exit 126" in text


async def test_x_dimmed_without_running_container(make_app: AppFactory) -> None:
    collector = FakeCollector()
    app = make_app(collector)
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        for key in ("g:host", "p:900:0", "g:orphans"):
            await _select(app, key, pilot)
            assert app.check_action("exec_smi", ()) is None, key
            assert app.check_action("exec_interactive", ()) is None, key
        await pilot.press("x")
        await pilot.pause()
        assert current_screen(app) is app.main
        assert collector.exec_calls == []
        app.action_exec_smi()  # e.g. from the palette: says why instead of doing nothing
        await pilot.pause()
        assert any("running container" in n.message for n in app._notifications)
        app.main.ctree.nodes_by_key["g:others"].expand()
        await pilot.pause()
        await _select(app, f"c:{cid(5)}", pilot)  # status "unknown": not running
        assert app.check_action("exec_smi", ()) is None


async def test_big_x_suspends_and_runs_argv(make_app: AppFactory) -> None:
    collector = FakeCollector(interactive_argv=["docker", "exec", "-it"])
    app = make_app(collector)
    ran: list[list[str]] = []
    collecting: list[bool] = []

    def runner(argv: Sequence[str]) -> int:
        ran.append(list(argv))
        collecting.append(not app.loop.paused)
        return 0

    @contextlib.contextmanager
    def fake_suspend() -> Iterator[None]:
        yield

    app.machine.interactive_runner = runner
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        app.suspend = fake_suspend  # type: ignore[method-assign]
        await _select(app, f"c:{cid(1)}", pilot)
        await pilot.press("X")
        await pilot.pause()
        assert ran == [["docker", "exec", "-it", cid(1), "nvidia-smi"]]
        assert collecting == [False]  # the collector loop is paused while suspended
        assert not app.loop.paused


async def test_big_x_suspend_not_supported(make_app: AppFactory) -> None:
    collector = FakeCollector(interactive_argv=["docker", "exec", "-it"])
    app = make_app(collector)
    ran: list[Sequence[str]] = []

    def run_interactive(argv: Sequence[str]) -> int:
        ran.append(argv)
        return 0

    app.machine.interactive_runner = run_interactive

    @contextlib.contextmanager
    def no_suspend() -> Iterator[None]:
        raise SuspendNotSupported("not here")
        yield

    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        app.suspend = no_suspend  # type: ignore[method-assign]
        await _select(app, f"c:{cid(1)}", pilot)
        await pilot.press("X")
        await pilot.pause()
        assert ran == []
        assert any("cannot be suspended" in n.message for n in app._notifications)
        assert not app.loop.paused


async def test_big_x_when_the_engine_offers_no_interactive_exec(make_app: AppFactory) -> None:
    app = make_app(FakeCollector(interactive_argv=None))
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await _select(app, f"c:{cid(1)}", pilot)
        await pilot.press("X")
        await pilot.pause()
        messages = [n.message for n in app._notifications]
        assert "docker does not offer interactive exec." in messages


async def test_sigterm_confirm_yes_passes_start_time(make_app: AppFactory) -> None:
    collector = FakeCollector()
    app = make_app(collector)
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await _select(app, "p:611:0", pilot)
        await pilot.press("T")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        assert "SIGTERM" in app.screen.title_text
        assert collector.signals == []
        await pilot.press("y")
        await _settle(app, pilot)
        assert collector.signals == [(611, signal.SIGTERM, 1611.0)]
        assert any("Sent SIGTERM to PID 611" in n.message for n in app._notifications)


async def test_sigkill_cancel_and_failure(make_app: AppFactory) -> None:
    collector = FakeCollector(signal_answer="PID 700 was reused by another process")
    app = make_app(collector)
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await _select(app, "p:700:1", pilot)
        await pilot.press("K")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        await pilot.pause()
        assert current_screen(app) is app.main
        assert collector.signals == []
        await pilot.press("K")
        await pilot.pause()
        await pilot.press("enter")  # the focused button is "No": Enter alone never kills
        await pilot.pause()
        assert collector.signals == []
        await pilot.press("K")
        await pilot.pause()
        await pilot.click("#yes")
        await _settle(app, pilot)
        assert collector.signals == [(700, signal.SIGKILL, 1700.0)]
        errors = [n for n in app._notifications if n.severity == "error"]
        assert errors
        assert "reused" in errors[0].message


async def test_signals_on_containers_and_orphans_say_why(make_app: AppFactory) -> None:
    collector = FakeCollector()
    app = make_app(collector)
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        expected = {
            "p:999:1": "PID 999 is gone",
            "g:host": "Select a process first",
        }
        for key, why in expected.items():
            await _select(app, key, pilot)
            assert app.check_action("signal", ()) is True, key  # the key reaches the action
            await pilot.press("T")
            await pilot.pause()
            assert app.screen is app.main, key  # no confirmation offered
            assert why in [n.message for n in app._notifications][-1], key
        assert collector.signals == []
        await _select(app, "p:900:0", pilot)  # a host process can be signalled
        assert app.machine.signal_refusal() is None


async def test_read_only_removes_exec_and_signals(make_app: AppFactory) -> None:
    collector = FakeCollector(interactive_argv=["docker", "exec", "-it"])
    app = make_app(collector, read_only=True)
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        assert "READ-ONLY" in app.main.header.text
        await _select(app, "p:611:0", pilot)
        for action in ("exec_smi", "exec_interactive", "signal"):
            assert app.check_action(action, ()) is False
        active = {b.binding.key for b in app.screen.active_bindings.values() if b.enabled}
        assert not {"x", "X", "T", "K"} & active
        footer_keys = {
            b.binding.key
            for b in app.screen.active_bindings.values()
            if b.binding.show and b.enabled
        }
        assert "x" not in footer_keys
        titles = [c.title for c in app.get_system_commands(app.main)]
        assert not [t for t in titles if "nvidia-smi" in t or "SIG" in t]
        await pilot.press("x", "X", "T", "K")
        await pilot.pause()
        assert current_screen(app) is app.main
        app.action_exec_smi()
        app.action_exec_interactive()
        app.action_signal(9)
        await pilot.pause()
        assert collector.exec_calls == []
        assert collector.signals == []
