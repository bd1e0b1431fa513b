"""The logs screen under a flood from a real container: bounded work per frame and memory, and
``q`` answered while the lines keep coming.

Before the per-frame bound one handler sanitised the whole buffer (10,000 lines of 8 KiB) while
the reader refilled it: the screen froze for 20-38 s and ``q`` waited. The containers log to a
rotated json-file (the flood must not fill the engine's disk) and get half a core.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from textual.app import App
from textual.pilot import Pilot

from gputui.collect.docker.logs import MAX_PENDING_BYTES
from gputui.collect.docker.source import DockerSource
from gputui.ui.screens.logs import LogsScreen

#: Shell commands that print faster than any screen shows: 8,000-byte lines in a loop, and a
#: binary (busybox itself) over and over.
FLOODS = {
    "8k-lines": 'exec yes "$(printf %08000d 0)"',
    "binary": "while :; do cat /bin/busybox; done",
}


class FloodApp(App[None]):
    """Only the logs screen, on a real container's stream."""

    def __init__(self, source: DockerSource, container_id: str) -> None:
        super().__init__()
        self.logs = LogsScreen(
            "flood",
            "gputui-test · running",
            lambda: source.open_logs(container_id, tail=500, follow=True),
            follow=True,
        )

    def on_mount(self) -> None:
        self.push_screen(self.logs)


async def _until(pilot: Pilot[None], check: Callable[[], object], what: str, s: float) -> None:
    deadline = time.monotonic() + s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


def _status(app: FloodApp) -> str:
    return str(app.logs.query_one("#logs-status").render())


@pytest.mark.parametrize("flood", sorted(FLOODS))
async def test_a_flood_keeps_the_screen_answering_and_bounded(
    flood: str, run_container: Callable[..., Any], free_run_id: str
) -> None:
    container = run_container(
        ["sh", "-c", FLOODS[flood]],
        name=f"logs-flood-{flood}-{free_run_id}",
        nano_cpus=500_000_000,
        network_mode="none",
        log_config={"type": "json-file", "config": {"max-size": "8m", "max-file": "2"}},
    )
    source = DockerSource(label=f"gputui-test={free_run_id}")
    app = FloodApp(source, container.id)
    try:
        async with app.run_test(size=(120, 30)) as pilot:
            logs = app.logs
            peak = 0

            def skipping() -> bool:
                nonlocal peak
                peak = max(peak, logs.pending_bytes)
                return logs.skipped > 0 and len(logs.view.lines) > 0

            # The flood outruns the screen: the buffer drops its oldest lines, and says so.
            await _until(pilot, skipping, "lines skipped", 60)
            for _ in range(20):  # the buffer stays under its bound while the flood goes on
                peak = max(peak, logs.pending_bytes)
                await pilot.pause(0.05)
            assert 0 < peak <= MAX_PENDING_BYTES
            assert "skipped: too fast to show" in _status(app)
            await pilot.press("q")
            await _until(pilot, lambda: app.screen is not logs, "the screen to close", 5)
            await _until(pilot, lambda: not logs.reader_alive, "the reader's end", 5)
    finally:
        source.close()
