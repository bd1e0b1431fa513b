"""A crash ends the TUI with a non-zero status and a traceback that shows no local variables.

Textual's default crash report is rich's ``Traceback(show_locals=True)``: every frame's locals,
which while parsing an engine reply hold a container's inspect data. The secret below is built
at run time so that the source lines a traceback quotes never contain it.
"""

from __future__ import annotations

from typing import Any

import pytest

from gputui.model.settings import Settings
from gputui.model.snapshot import Snapshot
from gputui.ui.app import GpuTuiApp
from gputui.ui.crash import crash_trace, redact
from gputui.ui.run import run_tui
from gputui.ui.screens.main import MainScreen
from tests.support.factories import FakeCollector
from tests.support.pilot import ready

SECRET = "super" + "secret"
ENV = f"API_KEY={SECRET}"


class CrashingCollector(FakeCollector):
    """Raises while "parsing" on the collector thread, with the inspect data in a local."""

    def collect(self) -> Snapshot:
        inspect = {"Config": {"Env": [ENV, "PATH=/usr/bin"], "Image": "lab:latest"}}
        env = inspect["Config"]["Env"]
        raise RuntimeError(f"cannot parse {len(env)} environment entries")


def _output(capfd: pytest.CaptureFixture[str]) -> str:
    out, err = capfd.readouterr()
    return out + err


def test_collector_worker_crash_exits_1_without_locals(capfd: pytest.CaptureFixture[str]) -> None:
    collector = CrashingCollector()
    code = run_tui(Settings(interval=60.0), collector, headless=True)
    text = _output(capfd)
    assert code == 1
    assert collector.closed
    assert "RuntimeError" in text and "cannot parse 2 environment entries" in text, text
    assert "collect" in text  # the frames are there, only their variables are not
    assert SECRET not in text
    assert "API_KEY" not in text
    assert "inspect =" not in text.replace('inspect = {"', "")  # no locals table entry


def test_message_handler_crash_exits_1_and_redacts_the_message(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    original = MainScreen.apply

    def apply(self: MainScreen, snapshot: Snapshot | None, *args: Any) -> None:
        labels = {"com.example.token": ENV}
        if snapshot is not None:  # the SnapshotReady handler; the first (empty) apply passes
            raise ValueError(f"bad label {labels['com.example.token']}")
        original(self, snapshot, *args)

    monkeypatch.setattr(MainScreen, "apply", apply)
    code = run_tui(Settings(interval=60.0), FakeCollector(), headless=True)
    text = _output(capfd)
    assert code == 1
    assert "ValueError" in text and "bad label API_KEY=…" in text, text
    assert SECRET not in text


def test_normal_quit_returns_0(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    original = GpuTuiApp.on_mount

    def on_mount(self: GpuTuiApp) -> None:
        original(self)
        self.call_after_refresh(self.action_quit)  # what q does

    monkeypatch.setattr(GpuTuiApp, "on_mount", on_mount)
    collector = FakeCollector()
    code = run_tui(Settings(interval=60.0), collector, headless=True)
    assert code == 0
    assert collector.closed
    assert "Traceback" not in _output(capfd)


async def test_pilot_crash_in_handler_is_reraised_and_sets_return_code(
    make_app: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    app = make_app()

    def boom() -> None:
        environment = [ENV]
        raise KeyError(f"no such key in {len(environment)} entries")

    async def crash_it() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await ready(pilot)
            app.call_later(boom)
            for _ in range(50):
                await pilot.pause(0.02)

    with pytest.raises(KeyError):
        await crash_it()
    assert app.return_code == 1
    assert SECRET not in _output(capfd)


def test_trace_has_no_locals_and_redacts_chained_messages() -> None:
    def parse(reply: dict[str, Any]) -> None:
        env = reply["Env"]
        try:
            int(env[0])
        except ValueError as error:
            raise RuntimeError(f"reply {reply}") from error

    try:
        parse({"Env": [ENV], "Name": "\u202etrainer\x1b]52;c;Y2xpcA==\x07"})
    except RuntimeError as error:
        trace = crash_trace(error)
    stacks = trace.stacks
    assert len(stacks) == 2  # the cause and the error
    for stack in stacks:
        assert SECRET not in stack.exc_value, stack.exc_value
        assert "\x1b" not in stack.exc_value and "\u202e" not in stack.exc_value
        assert all(frame.locals is None for frame in stack.frames)
    assert any(frame.name == "parse" for stack in stacks for frame in stack.frames)


def test_redact_keeps_names_and_drops_values() -> None:
    assert redact("Env: ['API_KEY=abc', 'HOME=/root']") == "Env: ['API_KEY=…', 'HOME=…']"
    assert redact("token=xyz other") == "token=… other"
    assert redact("x" * 2000).endswith("…") and len(redact("x" * 2000)) == 500
    assert redact("a\nb\u200bc") == "a b?c"
