"""A replay says "end of recording" once it stands on the last snapshot (header, every width)."""

from __future__ import annotations

import pytest

from gputui.model.snapshot import Snapshot
from gputui.recording.player import ReplayCollector
from tests.support.factories import standard
from tests.support.pilot import AppFactory, ready


def recording(count: int = 4) -> list[Snapshot]:
    return [standard(1_800_000_000.0 + 10.0 * i, util=10 + i) for i in range(count)]


@pytest.mark.parametrize("size", [(160, 50), (80, 24), (60, 15)])
async def test_the_header_says_end_of_recording_at_the_last_snapshot(
    make_app: AppFactory, size: tuple[int, int]
) -> None:
    player = ReplayCollector(recording(), source="test")
    app = make_app(player, read_only=True)
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        assert "end" not in app.main.header.text  # 1/4: more to come
        await pilot.press("right_square_bracket")  # +60 s: past the end, clamped at the last
        for _ in range(100):
            if "4/4" in app.main.header.text or "end" in app.main.header.text:
                break
            await pilot.pause(0.02)
        header = app.main.header.text
        assert ("end of recording" if size[0] >= 80 else " end") in header, header
        await pilot.press("comma")  # one back: not the end any more
        for _ in range(100):
            if "end" not in app.main.header.text:
                break
            await pilot.pause(0.02)
        assert "end" not in app.main.header.text, app.main.header.text
