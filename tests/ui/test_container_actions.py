"""Container logs (``l``), a shell (``E``) and stop / start / restart (``D`` / ``U`` / ``R``)
against real containers: NVML is a scenario, Docker, /proc and exec are real.
"""

from __future__ import annotations

import contextlib
import io
import os
import pty
import subprocess
import tarfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from textual.app import App, SuspendNotSupported
from textual.pilot import Pilot

from gputui.collect.collector import Collector
from gputui.collect.docker.logs import LogLine, LogStreamError
from gputui.collect.docker.source import DockerSource
from gputui.collect.linux.proc_reader import ProcSource
from gputui.collect.standins.scenario import ScenarioSource
from gputui.model.settings import Settings
from gputui.ui.app import GpuTuiApp
from gputui.ui.machine_actions import READ_ONLY_REFUSAL
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.logs import LogsScreen, ShownLine, short_time, shown_line
from gputui.ui.widgets.crumbs import SEPARATOR
from tests.support.pilot import current_screen, ready, screen_lines, select_container, wait_until

SCENARIO: dict[str, Any] = {
    "nvml": "ok",
    "driver_version": "580.159.04",
    "cuda_driver_version": "13.0",
    "gpus": [
        {
            "index": 0,
            "uuid": "GPU-57d57e22-be4b-9496-673e-11cc7638ed19",
            "name": "NVIDIA H200",
            "memory_total_mib": 143771,
            "memory_used_mib": 0,
            "utilization_gpu": 0,
            "processes": [],
        }
    ],
}

#: A bash that only leaves a mark: the shell e2e test checks it ran inside the container.
FAKE_BASH = b"#!/bin/sh\necho fake-bash-ran > /tmp/shell-marker\nexit 0\n"


def _app(free_run_id: str, **settings: Any) -> tuple[GpuTuiApp, Collector]:
    """The monitor on this test run's containers only (its label), NVML from a scenario."""
    read_only = bool(settings.get("read_only", False))
    collector = Collector(
        ScenarioSource(SCENARIO),
        ProcSource(),
        DockerSource(label=f"gputui-test={free_run_id}"),
        mode="scenario",
        read_only=read_only,
        health=None,
    )
    return GpuTuiApp(collector, Settings(interval=60.0, **settings)), collector


async def _refresh(app: GpuTuiApp, pilot: Pilot[None], container: Any, status: str) -> None:
    """Collect now and wait until the selection shows the container in ``status``."""
    app._wake.set()

    def shown() -> bool:
        selected, _ = app.main.selection()
        return selected is not None and selected.info.status == status

    await wait_until(pilot, shown, f"{container.name} shown as {status}")


def _notes(app: GpuTuiApp) -> list[str]:
    return [n.message for n in app._notifications]


def _wait_exited(container: Any) -> None:
    deadline = time.monotonic() + 20
    while container.status != "exited":
        assert time.monotonic() < deadline, container.status
        time.sleep(0.1)
        container.reload()


@contextlib.contextmanager
def _fake_suspend() -> Iterator[None]:
    yield


def _pty_runner(ran: list[list[str]]) -> Callable[[Sequence[str]], int]:
    """Runs the real ``docker exec -it`` argv on a pseudo-terminal (the CLI wants a TTY)."""

    def run(argv: Sequence[str]) -> int:
        ran.append(list(argv))
        master, slave = pty.openpty()
        try:
            proc = subprocess.Popen(list(argv), stdin=slave, stdout=slave, stderr=slave)
            os.close(slave)
            slave = -1
            deadline = time.monotonic() + 60
            while proc.poll() is None:
                assert time.monotonic() < deadline, "docker exec -it did not end"
                with contextlib.suppress(OSError):
                    os.set_blocking(master, False)
                    os.read(master, 65536)  # keep the terminal drained
                time.sleep(0.05)
            return proc.returncode
        finally:
            os.close(master)
            if slave >= 0:
                os.close(slave)

    return run


# ------------------------------------------------------------------------------- logs


async def test_logs_of_a_stopped_container_streams_marked_hostile_bytes_inert(
    run_container: Callable[..., Any], free_run_id: str
) -> None:
    script = (
        "echo out-1; echo err-1 >&2; printf 'esc \\033[31mred\\033]0;title\\007 "
        "\\342\\200\\256bidi\\tTAB\\n'; echo out-last"
    )
    container = run_container(["sh", "-c", script], name=f"ui-logs-done-{free_run_id}")
    _wait_exited(container)
    app, collector = _app(free_run_id)
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await ready(pilot, tries=500)
            await select_container(app, pilot, container.id)
            await pilot.press("l")
            await pilot.pause()
            screen = current_screen(app)
            assert isinstance(screen, LogsScreen)
            # The path it was opened from, on its first line.
            name = f"ui-logs-done-{free_run_id}"
            assert screen.crumbs.text == f"Containers{SEPARATOR}{name}{SEPARATOR}Logs"
            await wait_until(pilot, lambda: screen.ended, "the stream's end")
            assert screen.error is None
            lines = screen.view.plain_lines()
            assert len(lines) == 4, lines
            # mark, date, time, text; stdout and stderr keep their own order only.
            marked = [(line[:2], line[2:].split(" ", 2)[-1]) for line in lines]
            stdout = [text for mark, text in marked if mark == "  "]
            assert [text for mark, text in marked if mark == "▌ "] == ["err-1"]
            assert stdout[0] == "out-1" and stdout[-1] == "out-last" and len(stdout) == 3
            # Escape sequences, BEL and the bidi override are gone; the tab is spaces.
            hostile = stdout[1]
            assert "\x1b" not in hostile and "\x07" not in hostile and "\u202e" not in hostile
            assert hostile.startswith("esc ") and "red" in hostile and "bidi    TAB" in hostile
            drawn = "\n".join(screen_lines(app))
            assert "\x1b" not in drawn and "\u202e" not in drawn
            assert "out-last" in drawn and "stream ended" in drawn

            await pilot.press("t")  # times off: the text starts after the mark
            assert "  out-1" in screen.view.plain_lines()
            await pilot.press("t")
            assert all(line[2:].startswith("20") for line in screen.view.plain_lines())

            await pilot.press("slash")
            await pilot.press(*"ERR-")  # case-insensitive
            await pilot.press("enter")
            err_index = next(i for i, (mark, _) in enumerate(marked) if mark == "▌ ")
            assert screen.view.current == err_index
            await pilot.press("n")  # the only match: n wraps to it
            assert screen.view.current == err_index
            await pilot.press("slash", *"nothing-like-it", "enter")
            assert screen.view.current is None
            assert "No line matches." in _notes(app)

            await pilot.press("escape")
            await pilot.pause()
            assert current_screen(app) is app.main
    finally:
        collector.close()


async def test_logs_follow_new_lines_and_closing_ends_the_reader(
    run_container: Callable[..., Any], free_run_id: str
) -> None:
    script = "echo first; until cat /tmp/go 2>/dev/null; do sleep 0.1; done; exec sleep 300"
    container = run_container(["sh", "-c", script], name=f"ui-logs-follow-{free_run_id}")
    app, collector = _app(free_run_id, read_only=True)  # logs read: read-only keeps them
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await ready(pilot, tries=500)
            await select_container(app, pilot, container.id)
            await pilot.press("l")
            await pilot.pause()
            screen = current_screen(app)
            assert isinstance(screen, LogsScreen)
            await wait_until(pilot, lambda: screen.view.plain_lines(), "the first line")
            assert screen.view.plain_lines()[-1].endswith(" first")
            container.exec_run(["sh", "-c", "echo second > /tmp/go"])
            await wait_until(
                pilot, lambda: screen.view.plain_lines()[-1].endswith(" second"), "a new line"
            )
            assert not screen.ended
            assert "following" in "\n".join(screen_lines(app))
            assert screen.reader_alive
            await pilot.press("q")
            await pilot.pause()
            assert current_screen(app) is app.main
            await wait_until(pilot, lambda: not screen.reader_alive, "the reader thread's end", 5)
    finally:
        collector.close()


# ------------------------------------------------------------------------------ shell


def _put_fake_bash(container: Any) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("bash")
        info.mode, info.size = 0o755, len(FAKE_BASH)
        tar.addfile(info, io.BytesIO(FAKE_BASH))
    assert container.put_archive("/bin", buf.getvalue())


async def test_shell_runs_bash_through_docker_exec_and_returns(
    run_container: Callable[..., Any], free_run_id: str
) -> None:
    container = run_container(["sleep", "300"], name=f"ui-shell-{free_run_id}")
    _put_fake_bash(container)
    app, collector = _app(free_run_id)
    ran: list[list[str]] = []
    app.machine.shell_runner = _pty_runner(ran)
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await ready(pilot, tries=500)
            app.suspend = _fake_suspend  # type: ignore[method-assign]
            await select_container(app, pilot, container.id)
            await pilot.press("E")
            name = container.name
            await wait_until(
                pilot, lambda: f"bash in {name} ended (exit 0)." in _notes(app), "bash"
            )
            assert ran and ran[0][-3:] == ["-it", container.id, "bash"]
            assert current_screen(app) is app.main
            assert not app.loop.paused  # collecting again
            marker = container.exec_run(["cat", "/tmp/shell-marker"])
            assert marker.output == b"fake-bash-ran\n"
    finally:
        collector.close()


async def test_shell_falls_back_to_sh_then_says_there_is_none(
    run_container: Callable[..., Any], free_run_id: str
) -> None:
    container = run_container(["sleep", "300"], name=f"ui-noshell-{free_run_id}")
    app, collector = _app(free_run_id)
    ran: list[list[str]] = []

    def runner(argv: Sequence[str]) -> int:
        ran.append(list(argv))
        return 0

    app.machine.shell_runner = runner
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await ready(pilot, tries=500)
            app.suspend = _fake_suspend  # type: ignore[method-assign]
            await select_container(app, pilot, container.id)
            await pilot.press("E")
            await wait_until(pilot, lambda: ran, "the sh run")
            assert ran[0][-2:] == [container.id, "sh"]  # no bash in the image: sh

            # A terminal that cannot be suspended says so.
            @contextlib.contextmanager
            def no_suspend() -> Iterator[None]:
                raise SuspendNotSupported("not here")
                yield

            app.suspend = no_suspend  # type: ignore[method-assign]
            await pilot.press("E")
            await wait_until(
                pilot, lambda: any("cannot be suspended" in n for n in _notes(app)), "no suspend"
            )
            assert len(ran) == 1

            # Without any shell: a sentence, no terminal handed over.
            app.suspend = _fake_suspend  # type: ignore[method-assign]
            container.exec_run(["/bin/busybox", "rm", "/bin/sh"])
            await pilot.press("E")
            await wait_until(pilot, lambda: any("No shell in" in n for n in _notes(app)), "refusal")
            assert len(ran) == 1
            assert not app.loop.paused
    finally:
        collector.close()


# -------------------------------------------------------------------- stop/start/restart


async def test_stop_start_restart_confirmed_change_the_real_container(
    run_container: Callable[..., Any], free_run_id: str
) -> None:
    container = run_container(
        ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.2; done"],
        name=f"ui-life-{free_run_id}",
    )
    app, collector = _app(free_run_id)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await ready(pilot, tries=500)
            await select_container(app, pilot, container.id)
            await pilot.press("D")
            await pilot.pause()
            dialog = current_screen(app)
            assert isinstance(dialog, ConfirmScreen)
            body = str(dialog.body)
            assert container.name in body and "gputui-test:latest" in body
            await pilot.press("enter")  # the focused button is No
            await pilot.pause()
            assert current_screen(app) is app.main
            container.reload()
            assert container.status == "running"

            await pilot.press("D", "y")
            await wait_until(
                pilot, lambda: f"Container {container.name} stopped." in _notes(app), "stop"
            )
            container.reload()
            assert container.status == "exited"
            await _refresh(app, pilot, container, "exited")
            # A stopped container: no shell, no second stop (the keys are dimmed and say why).
            app._notifications.clear()
            await pilot.press("E", "D")
            await pilot.pause()
            assert current_screen(app) is app.main
            assert [n for n in _notes(app) if "it needs a running container" in n] == [
                f"Shell in container: container {container.name} is exited; "
                "it needs a running container.",
                f"Stop container: container {container.name} is exited; "
                "it needs a running container.",
            ]

            await pilot.press("U", "y")
            await wait_until(
                pilot, lambda: f"Container {container.name} started." in _notes(app), "start"
            )
            container.reload()
            assert container.status == "running"
            started = container.attrs["State"]["StartedAt"]
            await _refresh(app, pilot, container, "running")

            await pilot.press("R", "y")
            done = f"Container {container.name} restarted."
            await wait_until(pilot, lambda: done in _notes(app), "restart")
            container.reload()
            assert container.status == "running"
            assert container.attrs["State"]["StartedAt"] != started
    finally:
        collector.close()


async def test_a_stop_says_stopping_at_once_then_the_exit_code(
    run_container: Callable[..., Any], free_run_id: str
) -> None:
    """The row reads "stopping…" from the confirmation on, then "exited (3)" once stopped."""
    container = run_container(
        # SIGTERM takes a few seconds to act on (a job saving its state), then exits with 3.
        ["sh", "-c", "trap 'sleep 3; exit 3' TERM; while true; do sleep 0.2; done"],
        name=f"ui-stopping-{free_run_id}",
        network_mode="none",
    )
    app, collector = _app(free_run_id)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await ready(pilot, tries=500)
            await select_container(app, pilot, container.id)

            def row() -> str:
                return next(line for line in screen_lines(app) if container.name[:10] in line)

            await pilot.press("D", "y")
            await pilot.pause()
            # At once, while Docker waits for the container to act on SIGTERM.
            assert f"Container {container.name} stopped." not in _notes(app)
            assert "stopping…" in row(), row()
            await wait_until(
                pilot, lambda: f"Container {container.name} stopped." in _notes(app), "stop"
            )
            container.reload()
            assert container.status == "exited"
            await _refresh(app, pilot, container, "exited")
            await pilot.pause()
            assert "exited (3)" in row() and "stopping…" not in row(), row()
    finally:
        collector.close()


async def test_pause_confirmed_freezes_then_p_again_unpauses(
    run_container: Callable[..., Any], free_run_id: str
) -> None:
    """``P`` pauses a running container (after confirming), and unpauses it once paused."""
    container = run_container(["sleep", "300"], name=f"ui-pause-{free_run_id}", network_mode="none")
    app, collector = _app(free_run_id)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await ready(pilot, tries=500)
            await select_container(app, pilot, container.id)
            await pilot.press("P")
            await pilot.pause()
            dialog = current_screen(app)
            assert isinstance(dialog, ConfirmScreen)
            assert "Pause container" in str(dialog.body) and container.name in str(dialog.body)
            await pilot.press("y")
            await wait_until(
                pilot, lambda: f"Container {container.name} paused." in _notes(app), "pause"
            )
            container.reload()
            assert container.status == "paused"
            await _refresh(app, pilot, container, "paused")

            await pilot.press("P")
            await pilot.pause()
            dialog = current_screen(app)
            assert isinstance(dialog, ConfirmScreen)
            assert "Unpause container" in str(dialog.body)
            await pilot.press("y")
            await wait_until(
                pilot, lambda: f"Container {container.name} unpaused." in _notes(app), "unpause"
            )
            container.reload()
            assert container.status == "running"
    finally:
        collector.close()


async def test_read_only_removes_and_refuses_shell_and_container_actions(
    run_container: Callable[..., Any], free_run_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    container = run_container(["sleep", "300"], name=f"ui-ro-{free_run_id}")
    calls: list[str] = []
    real_action, real_exec = DockerSource.container_action, DockerSource.exec

    def action_spy(self: DockerSource, container_id: str, action: str) -> str | None:
        calls.append(action)
        return real_action(self, container_id, action)

    def exec_spy(self: DockerSource, container_id: str, argv: Sequence[str], t: float) -> Any:
        calls.append("exec")
        return real_exec(self, container_id, argv, t)

    monkeypatch.setattr(DockerSource, "container_action", action_spy)
    monkeypatch.setattr(DockerSource, "exec", exec_spy)
    app, collector = _app(free_run_id, read_only=True)
    ran: list[Sequence[str]] = []

    def runner(argv: Sequence[str]) -> int:
        ran.append(argv)
        return 0

    app.machine.shell_runner = runner
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await ready(pilot, tries=500)
            app.suspend = _fake_suspend  # type: ignore[method-assign]
            await select_container(app, pilot, container.id)
            for key in ("E", "D", "U", "R", "P"):
                await pilot.press(key)
                await pilot.pause()
                assert current_screen(app) is app.main, key
            titles = {c.title for c in app.get_system_commands(app.main)}
            assert "Container logs" in titles
            assert not titles & {
                "Shell in container", "Stop container", "Start container", "Restart container",
                "Container pause / unpause",
            }  # fmt: skip
            for action in (
                "shell", "stop_container", "start_container", "restart_container",
                "pause_container",
            ):  # fmt: skip
                assert app.check_action(action, ()) is False
                app._notifications.clear()
                getattr(app, f"action_{action}")()  # reached anyway (a stale palette, a script)
                await pilot.pause()
                assert _notes(app) == [READ_ONLY_REFUSAL], action
                assert current_screen(app) is app.main
            app.machine.lifecycle("stop")
            await pilot.pause(0.5)
            assert calls == [] and ran == []
            container.reload()
            assert container.status == "running"
            await pilot.press("question_mark")
            await pilot.pause()
            help_text = "\n".join(screen_lines(app))
            assert "Stop the selected container" not in help_text
            assert "Logs of the selected container" in help_text
    finally:
        collector.close()


# ------------------------------------------------------- the logs screen on its own


class FakeReader:
    """Hands out prepared batches, then either ends or blocks (following) until closed."""

    def __init__(self, batches: list[list[LogLine]], *, follow: bool, tty: bool = False) -> None:
        self.batches = list(batches)
        self.follow = follow
        self.tty = tty
        self.closed = threading.Event()

    def read(self) -> list[LogLine] | None:
        if self.batches and not self.closed.is_set():
            return self.batches.pop(0)
        if self.follow:
            self.closed.wait(30)
        return None

    def close(self) -> None:
        self.closed.set()


CANNED = [
    LogLine("stdout", "epoch 1 step 100 loss 2.314", "2026-03-14T09:12:00.000000000Z"),
    LogLine("stderr", "warning: NCCL_P2P_LEVEL not set", "2026-03-14T09:12:00.250000000Z"),
    LogLine("stdout", "\x1b[2J\x1b]0;pwned\x07cleared?\u202eevil\tok", "2026-03-14T09:12:01Z"),
    LogLine("stdout", "x" * 300, "2026-03-14T09:12:02.5Z", cut=True),
    LogLine("stdout", "epoch 1 step 200 loss 1.902", "2026-03-14T09:12:03.125Z"),
]


def _drawn(app: App[None]) -> str:
    """What the app's current screen draws."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


class LogsApp(App[None]):
    """Only the logs screen, on a prepared reader."""

    def __init__(self, reader: FakeReader, **screen: Any) -> None:
        super().__init__()
        self.reader = reader
        self.logs = LogsScreen(
            "trainer-0", "nvcr.io/nvidia/pytorch:24.05-py3 · running", lambda: reader, **screen
        )

    def on_mount(self) -> None:
        self.push_screen(self.logs)


@pytest.mark.parametrize("size", [(80, 24), (160, 50)], ids=["80x24", "160x50"])
def test_snapshot_logs_screen(snap_compare: Any, size: tuple[int, int]) -> None:
    app = LogsApp(FakeReader([CANNED], follow=True), follow=True)

    async def run_before(pilot: Pilot[None]) -> None:
        await wait_until(pilot, lambda: len(app.logs.view.lines) == len(CANNED), "the lines")
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)


async def test_a_flood_is_bounded_and_closing_stops_the_reader() -> None:
    batches = [[LogLine("stdout", f"line {b * 1000 + i}") for i in range(1000)] for b in range(50)]
    reader = FakeReader(batches, follow=True)
    app = LogsApp(reader, follow=True, max_lines=2000)
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.logs.view
        await wait_until(
            pilot, lambda: view.lines and view.lines[-1].text == "line 49999", "the flood"
        )
        assert len(view.lines) == 2000  # the newest kept, the rest counted
        assert view.lines[0].text == "line 48000"
        # Dropped by the view's bound, or skipped by the buffer while the screen was behind.
        assert view.dropped + app.logs.skipped == 48_000
        if view.dropped:
            assert f"(the oldest {view.dropped:,} dropped" in _drawn(app)
        await wait_until(pilot, lambda: view.scroll_y == view.max_scroll_y > 0, "the newest line")
        await pilot.press("k")  # scrolling back stops following
        assert not view.follow
        await pilot.press("G")
        assert view.follow
        await pilot.press("escape")
        await pilot.pause()
        assert reader.closed.is_set()
        await wait_until(pilot, lambda: not app.logs.reader_alive, "the reader's end", 5)


async def test_open_failure_and_tty_are_said() -> None:
    def refuse() -> FakeReader:
        raise LogStreamError("no such container: 0123456789ab")

    app = LogsApp(FakeReader([], follow=False), follow=False)
    app.logs.opener = refuse
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.logs.ended, "the failure")
        assert "stream failed: no such container" in _drawn(app)

    tty = LogsApp(FakeReader([[LogLine("tty", "hello")]], follow=False, tty=True), follow=False)
    async with tty.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: tty.logs.ended, "the end")
        shown = _drawn(tty)
        assert "stdout and stderr are one stream" in shown and "stream ended" in shown
        assert tty.logs.view.plain_lines() == ["  hello"]


def test_times_line_up_and_lines_are_sanitised_once() -> None:
    assert short_time("2026-11-30T17:26:40.686858555Z") == "2026-11-30 17:26:40.686"
    assert short_time("2026-03-14T09:12:01Z") == "2026-03-14 09:12:01.000"
    assert short_time("2026-03-14T09:12:02.5Z") == "2026-03-14 09:12:02.500"
    assert short_time(None) == ""
    line = shown_line(LogLine("stderr", "a\tb\x1b[1mc\x00\u200bd", "2026-03-14T09:12:01Z"))
    assert line == ShownLine(True, "a       bc??d", "2026-03-14 09:12:01.000", False)
