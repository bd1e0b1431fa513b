"""The monitor's layout by terminal size and GPU count, the GPU panel's collapse key, card lines.

Sizes of the regions are read from the running app (Pilot), never from SVG snapshots.
"""

from __future__ import annotations

import pytest
from textual.pilot import Pilot

from gputui.derive.findings import Share
from gputui.model.gpu import GpuSample
from gputui.model.status import SourceStatus
from gputui.ui.layout import (
    CARD_HEIGHT,
    MIN_TAB_ROWS,
    SIDE_PANEL_WIDTH,
    SIDE_WIDTH,
    GpuStyle,
    choose_layout,
)
from gputui.ui.widgets.gpu_panel import card_lines
from tests.support.factories import FakeCollector, gpu, snapshot, standard
from tests.support.pilot import AppFactory, ready, screen_lines

SIZES = [(60, 15), (80, 24), (120, 30), (160, 50), (200, 60)]
NO_NVML = {
    "nvml": SourceStatus("nvml", False, "libnvidia-ml.so.1 not found", "LibraryNotFound"),
    "docker": SourceStatus("docker", True),
    "procs": SourceStatus("procs", True),
}


def _snap(gpus: int) -> object:
    if gpus == 0:
        return snapshot(gpus=(), sources=NO_NVML)
    return snapshot(gpus=[gpu(i) for i in range(gpus)])


async def _settle(pilot: Pilot[None]) -> None:
    for _ in range(4):
        await pilot.pause()


@pytest.mark.parametrize("gpus", [0, 1, 2, 8])
async def test_layout_at_every_size(make_app: AppFactory, gpus: int) -> None:
    app = make_app(FakeCollector([_snap(gpus)]))  # type: ignore[list-item]
    async with app.run_test(size=SIZES[0]) as pilot:
        await ready(pilot)
        for width, height in SIZES:
            await pilot.resize_terminal(width, height)
            await _settle(pilot)
            where = (width, height, gpus)
            main = app.main
            layout = main.arrangement
            assert layout is not None, where
            panel = main.gpus.outer_size
            tabs = main.query_one("#tabs").outer_size
            # The tab bar is never cut: the last tab's title is on screen.
            assert any("Alerts" in line for line in screen_lines(app)), where
            # The Containers pane keeps rows to be useful, even with 8 GPUs on 60x15: its sort
            # line, column titles and five rows of tree (or of the empty tree's explanation).
            assert main.query_one("#containers").size.height >= MIN_TAB_ROWS - 2, where
            if layout.side:
                assert width >= SIDE_WIDTH and gpus > 0, where
                assert panel.width == SIDE_PANEL_WIDTH, where
                assert tabs.width == width - SIDE_PANEL_WIDTH, where
                continue
            # Stacked: the tabs (the tree) get the whole width ...
            assert tabs.width == width, where
            # ... and the GPU panel no more rows than its GPUs need.
            needs = {
                GpuStyle.CARDS: gpus * CARD_HEIGHT + 1,
                GpuStyle.LINES: gpus + 1,
                GpuStyle.SUMMARY: 2,
                GpuStyle.EMPTY: 4,
            }[layout.style]
            assert panel.height <= needs, where
            body = height - layout.header_rows - 1
            assert tabs.height == body - panel.height, where  # every other row is the tabs'
            if gpus == 0:
                assert layout.style is GpuStyle.EMPTY, where
            if gpus and layout.style is GpuStyle.LINES:
                assert all(c.gauges.size.height == 1 for c in main.gpus.cards.values()), where


def test_choose_layout_table() -> None:
    # Most sizes stack the GPUs on top; the side column only from 180 columns.
    assert not choose_layout(160, 50, 2).side
    assert choose_layout(200, 60, 2).side
    assert not choose_layout(200, 60, 2, preference="top").side
    assert choose_layout(150, 40, 2, preference="side").side
    # 8 GPUs at 60x15: a summary line, the tabs keep the rest.
    small = choose_layout(60, 15, 8)
    assert (small.style, small.gpu_rows) == (GpuStyle.SUMMARY, 2)
    assert 15 - small.header_rows - 1 - small.gpu_rows >= MIN_TAB_ROWS
    # 8 GPUs at 80x24: one line each.
    assert choose_layout(80, 24, 8).style is GpuStyle.LINES
    # One GPU at 120x30: its card (the rows it needs, no more).
    one = choose_layout(120, 30, 1)
    assert (one.style, one.gpu_rows) == (GpuStyle.CARDS, CARD_HEIGHT + 1)
    # Collapsed: one line whatever the size, also where the side column would be used.
    assert choose_layout(200, 60, 2, collapsed=True).style is GpuStyle.SUMMARY
    assert not choose_layout(200, 60, 2, collapsed=True).side


async def test_tab_bar_is_whole_at_120x30_with_a_failing_check(make_app: AppFactory) -> None:
    app = make_app()  # standard(): "Health ✗ 1 fail"
    async with app.run_test(size=(120, 30)) as pilot:
        await ready(pilot)
        await _settle(pilot)
        text = "\n".join(screen_lines(app))
        assert "Health ✗ 1 fail" in text
        assert "Alerts" in text
        assert app.main.ctree.size.width >= 118  # the tree gets the width


async def test_v_collapses_and_expands_the_gpu_panel(make_app: AppFactory) -> None:
    app = make_app(FakeCollector([_snap(8)]))  # type: ignore[list-item]
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        await _settle(pilot)
        before = app.main.gpus.outer_size.height
        tree_before = app.main.query_one("#containers").size.height
        assert before > 2
        await pilot.press("v")
        await _settle(pilot)
        assert app.main.gpus_collapsed
        assert app.main.gpus.outer_size.height == 2  # the summary line and its border
        assert app.main.query_one("#containers").size.height == tree_before + before - 2
        summary = str(app.main.gpus.summary.render())
        assert summary.startswith("8 GPUs") and "v: show GPUs" in summary
        await pilot.press("v")
        await _settle(pilot)
        assert not app.main.gpus_collapsed
        assert app.main.gpus.outer_size.height == before


LONG = "NVIDIA H200 NVL Extra Long Product Name With Suffix 141GB HBM3e"


def _busy(name: str = LONG) -> GpuSample:
    return gpu(
        0,
        name=name,
        fan_percent=45,
        pstate=2,
        pcie_rx_kbps=1_200_000,
        pcie_tx_kbps=300_000,
        encoder_util=12,
        decoder_util=3,
        ecc_mode_current=True,
        ecc_uncorrected_volatile=0,
        throttle_reasons=0x04,
    )


SHARES = (
    Share("c:a", "trainer-with-a-long-name", 60 * 2**30, 0.6, 40),
    Share("c:b", "inference-service", 30 * 2**30, 0.3, 20),
    Share("host", "host", 10 * 2**30, 0.1, None),
)


@pytest.mark.parametrize("width", [40, 64, 69, 100])
def test_card_lines_never_wrap_and_keep_every_figure(width: int) -> None:
    lines = card_lines(_busy(), width, SHARES).plain.split("\n")
    assert len(lines) == CARD_HEIGHT - 1  # the sparkline row is the last of the card
    assert all(len(line) <= width for line in lines), lines
    title, _, _, clocks, details = lines
    assert title.startswith("GPU 0 ")
    assert "shared:" in title or width < 50  # the sharing line when there is any room
    if width >= 64:
        assert "…" in title  # the long name gave way
        assert "P2" in clocks and "fan 45%" in clocks  # not hidden by the sharing line
        assert "PCIe rx 1.1GiB/s tx 293MiB/s" in details
        assert "enc 12% dec 3%" in details


async def test_long_name_and_three_parties_in_the_app(make_app: AppFactory) -> None:
    snap = standard()
    long = snapshot(
        gpus=(_busy(), gpu(1)),
        processes=snap.processes,
        containers=snap.containers,
        health=snap.health,
    )
    app = make_app(FakeCollector([long]))
    async with app.run_test(size=(200, 50)) as pilot:
        await ready(pilot)
        await _settle(pilot)
        gauges = app.main.gpus.cards[0].gauges
        assert gauges.size.height == CARD_HEIGHT - 1
        lines = gauges.render().plain.split("\n")
        assert len(lines) == CARD_HEIGHT - 1
        assert all(len(line) <= gauges.size.width for line in lines)
        assert "shared:" in lines[0]
        assert "throttle" in lines[3] and "P2" in lines[3]  # the clock line stays in the card
