"""Reliability, layout: the minimum terminal size, N/A gauges, the READ-ONLY badge."""

from __future__ import annotations

import re

from textual.pilot import Pilot

from gputui.boundary import sanitise
from gputui.ui.screens.main import too_small_text
from gputui.ui.state import UiState
from gputui.ui.widgets.header import header_content
from tests.support.factories import FakeCollector, gpu, snapshot, standard
from tests.support.pilot import AppFactory, ready, screen_lines


async def _settle(pilot: Pilot[None]) -> None:
    await pilot.pause()
    await pilot.pause()


# ------------------------------------------------------------------------ 1. minimum size


async def test_too_small_terminal_shows_message_and_recovers_after_resize_storm(
    make_app: AppFactory,
) -> None:
    app = make_app()
    async with app.run_test(size=(35, 10)) as pilot:
        await ready(pilot)
        await _settle(pilot)
        assert app.main.has_class("-too-small")
        message = str(app.main.too_small.content)
        times = "\N{MULTIPLICATION SIGN}"
        assert message == f"gputui needs at least 40{times}12 — this terminal is 35{times}10"
        text = "\n".join(screen_lines(app))
        assert f"40{times}12" in text and f"35{times}10" in text
        assert "Containers" not in text  # the squeezed layout is not drawn
        assert "trainer-a" not in text
        storm = [(39, 11), (40, 12), (20, 5), (120, 40), (39, 40), (80, 11), (1, 1), (200, 60)]
        storm += [(41, 13), (10, 100), (79, 23), (33, 9)]
        for width, height in storm:
            await pilot.resize_terminal(width, height)
            small = width < 40 or height < 12
            await _settle(pilot)
            assert app.main.has_class("-too-small") is small, (width, height)
            if small:
                assert str(app.main.too_small.content) == too_small_text(width, height)
        await pilot.resize_terminal(140, 40)
        await _settle(pilot)
        assert not app.main.has_class("-too-small")
        text = "\n".join(screen_lines(app))
        assert "needs at least" not in text
        for shown in ("gputui", "Containers", "Processes", "trainer-a", "GPU 0"):
            assert shown in text, shown
        assert app.main.ctree.nodes_by_key  # the tree kept its rows through the storm


# --------------------------------------------------------------------------- 2. N/A gauges


def _blind_gpu() -> object:
    return gpu(
        0,
        utilization_gpu=None,
        memory_used_bytes=None,
        temperature_c=None,
        power_w=None,
        clock_sm_mhz=None,
        clock_mem_mhz=None,
    )


async def test_every_gauge_shows_na_for_a_missing_value(make_app: AppFactory) -> None:
    blind = snapshot(gpus=(_blind_gpu(),))  # type: ignore[arg-type]
    app = make_app(FakeCollector([blind]))
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        await _settle(pilot)
        assert not app.main.gpus.has_class("-compact")
        card = app.main.gpus.cards[0].gauges.render().plain
        for gauge in ("util", "mem ", "temp", "pwr "):
            # label, an empty (light-shade) track, then N/A: never a bare "/700W"
            assert re.search(rf"{gauge}\s*░+\s+N/A(\s|$)", card), (gauge, card)
        assert "/700W" not in card
        assert f"SM {sanitise.NA}  MEM {sanitise.NA}" in card
        text = "\n".join(screen_lines(app))
        assert re.search(r"pwr\s*░+\s+N/A", text), text

        await pilot.resize_terminal(80, 15)  # short: one line per GPU
        await _settle(pilot)
        assert app.main.gpus.has_class("-compact")
        line = app.main.gpus.cards[0].gauges.render().plain
        assert "\n" not in line
        assert re.search(r"util\s*░+\s+N/A", line), line
        assert re.search(r"mem\s*░+\s+N/A", line), line
        assert re.fullmatch(r".*N/A\s+N/A\s*", line), line  # temperature, then power
        assert "/700W" not in line


# ----------------------------------------------------------------- 3. READ-ONLY at 40 columns


async def test_read_only_badge_outlasts_scenario_at_40_columns(make_app: AppFactory) -> None:
    app = make_app(FakeCollector(mode="scenario"), read_only=True)
    async with app.run_test(size=(40, 24)) as pilot:
        await ready(pilot)
        await _settle(pilot)
        header = app.main.header.text
        assert "READ-ONLY" in header, header
        assert "✗1" in header or "1 fail" in header, header  # the failure count stays too
        await pilot.press("p")
        await _settle(pilot)
        header = app.main.header.text
        assert "READ-ONLY" in header and "PAUSED" in header, header
        assert len(header.splitlines()[0]) <= 40 - 2  # padding 0 1


def test_header_drops_mode_before_read_only_paused_and_failures() -> None:
    state = UiState(1.0, paused=True, read_only=True, mode="scenario")
    wide = header_content(standard(), state, width=200, lines=1).plain
    assert "SCENARIO" in wide and "READ-ONLY" in wide
    for width in (60, 50, 40):
        text = header_content(standard(), state, width=width, lines=1).plain
        assert len(text) <= width
        for kept in ("READ-ONLY", "PAUSED"):
            assert kept in text, (width, text)
        assert "1 fail" in text or "✗1" in text, (width, text)
    tiny = header_content(standard(), state, width=22, lines=1).plain
    assert " RO " in tiny and "PAUSED" in tiny, tiny  # shortened, still there
