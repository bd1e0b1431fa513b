"""The narrow/wide layout follows the terminal's size, flips at most once per resize, never loops.

A dumb terminal (``TERM=dumb``) first reports rich's fallback size, 80x25; the screen's own
Resize events then carried sizes from earlier layout passes, and deciding the layout from them
made the class change and the relayout it causes trigger each other forever (100 % CPU, ``q``
ignored).
"""

from __future__ import annotations

import asyncio
import os
import pty
import select
import signal
import struct
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path

from textual.events import Resize
from textual.geometry import Size
from textual.pilot import Pilot

from gputui.ui.app import GpuTuiApp
from gputui.ui.screens.main import NARROW_HYSTERESIS, NARROW_WIDTH, is_narrow
from tests.support.pilot import AppFactory, ready

ROOT = Path(__file__).resolve().parents[2]


async def _settle(pilot: Pilot[None]) -> None:
    for _ in range(3):
        await pilot.pause()


def _count_flips(app: GpuTuiApp) -> Callable[[], int]:
    """How many times the screen's ``-narrow`` class changed since this was called."""
    flips = [0]
    original = app.main.set_class

    def set_class(add: bool, *names: str, update: bool = True) -> GpuTuiApp:
        if "-narrow" in names and add != app.main.has_class("-narrow"):
            flips[0] += 1
        original(add, *names, update=update)
        return app

    app.main.set_class = set_class  # type: ignore[method-assign, assignment]
    return lambda: flips[0]


def test_is_narrow_has_hysteresis() -> None:
    assert is_narrow(NARROW_WIDTH - 1, None) is True
    assert is_narrow(NARROW_WIDTH, None) is False
    assert is_narrow(NARROW_WIDTH, True) is False  # narrow -> wide at the threshold
    assert is_narrow(NARROW_WIDTH - 1, False) is False  # wide stays wide just below it
    assert is_narrow(NARROW_WIDTH - NARROW_HYSTERESIS, False) is False
    assert is_narrow(NARROW_WIDTH - NARROW_HYSTERESIS - 1, False) is True


async def test_120_and_119_columns_flip_at_most_once_per_resize(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(NARROW_WIDTH, 40)) as pilot:
        await ready(pilot)
        await _settle(pilot)
        assert not app.main.has_class("-narrow")
        flips = _count_flips(app)
        # The same walk as at the old 120-column threshold, shifted to the side column's.
        shift = NARROW_WIDTH - 120
        sizes = [w + shift for w in (119, 120, 119, 100, 119, 120, 121, 80, 160, 117, 120)]
        expected = [False, False, False, True, True, False, False, True, False, True, False]
        for width, narrow in zip(sizes, expected, strict=True):
            before = flips()
            await pilot.resize_terminal(width, 40)
            await _settle(pilot)
            assert app.main.has_class("-narrow") is narrow, width
            assert flips() - before <= 1, width
        assert flips() == 6


async def test_stale_screen_resize_does_not_flip_or_loop(make_app: AppFactory) -> None:
    """A Resize for the screen with a size the terminal does not have (what a dumb terminal
    produces) changes nothing, and ``q`` still quits promptly."""
    app = make_app()
    async with app.run_test(size=(NARROW_WIDTH, 40)) as pilot:
        await ready(pilot)
        await _settle(pilot)
        flips = _count_flips(app)
        stale = Size(80, 25)
        for _ in range(3):
            app.main.post_message(Resize(stale, stale))
            await _settle(pilot)
        for _ in range(10):
            await pilot.pause(0.02)
        assert flips() == 0
        assert not app.main.has_class("-narrow")
        await asyncio.wait_for(pilot.press("q"), 5)
        for _ in range(100):
            if not app.is_running:
                break
            await pilot.pause(0.02)
        assert not app.is_running
    assert app.return_code == 0


def test_dumb_terminal_at_120_columns_is_idle_and_quits() -> None:
    """The real program on a pseudo-terminal with ``TERM=dumb``: idle CPU, and ``q`` exits 0."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: gputui on the demo machine
        os.chdir(ROOT)
        # COLUMNS / LINES would spare rich its dumb-terminal 80x25; execve, because a library
        # of the test process may have set them behind os.environ's back.
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        env["TERM"] = "dumb"
        os.execve(sys.executable, [sys.executable, "-m", "gputui", "--demo"], env)
    try:
        import fcntl

        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        os.kill(pid, signal.SIGWINCH)

        def pump(seconds: float) -> bytes:
            got = b""
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                ready_fds, _, _ = select.select([fd], [], [], 0.05)
                if ready_fds:
                    try:
                        got += os.read(fd, 65536)
                    except OSError:
                        break
            return got

        # Up and drawing: the demo header names its host.
        seen = b""
        deadline = time.monotonic() + 20
        while b"demo-gpu-node" not in seen and time.monotonic() < deadline:
            seen += pump(0.2)
        assert b"demo-gpu-node" in seen
        pump(2.0)  # a few refreshes in
        ticks = _cpu_ticks(pid)
        pump(1.0)
        busy = (_cpu_ticks(pid) - ticks) / os.sysconf("SC_CLK_TCK")
        assert busy < 0.5, f"{busy:.2f} s of CPU in 1 s while idle"
        os.write(fd, b"q")
        status = None
        deadline = time.monotonic() + 10
        while status is None and time.monotonic() < deadline:
            pump(0.1)
            done, code = os.waitpid(pid, os.WNOHANG)
            if done:
                status = code
        assert status is not None, "q did not quit"
        assert os.waitstatus_to_exitcode(status) == 0
        pid = 0
    finally:
        if pid:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime
