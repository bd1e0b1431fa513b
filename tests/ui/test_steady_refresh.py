"""A refresh redraws only what changed: no layout pass, no line whose figures stayed put.

Counts, never timings: lines the header and GPU cards render (``lines_rendered``) and layout
refreshes requested through Textual's ``Widget.refresh(layout=True)`` (``_layout_updates``).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from textual.content import Content
from textual.pilot import Pilot
from textual.strip import Strip
from textual.visual import Visual
from textual.widget import Widget

from gputui.model.snapshot import Snapshot
from gputui.ui.app import GpuTuiApp
from gputui.ui.widgets.gpu_panel import GpuGauges
from gputui.ui.widgets.header import HeaderBar
from tests.support.factories import FakeCollector, gpu, snapshot, standard
from tests.support.pilot import AppFactory, push, ready


def _mine(app: GpuTuiApp) -> list[Widget]:
    """The header and the GPU panel with everything in it."""
    main = app.main
    return [main, main.header, main.gpus, *main.gpus.query("*")]


def _layouts(widgets: list[Widget]) -> int:
    return sum(w._layout_updates for w in widgets)


def _rendered(app: GpuTuiApp) -> dict[str, int]:
    counts = {"header": app.main.header.lines_rendered}
    for index, card in app.main.gpus.cards.items():
        counts[f"gpu{index}"] = card.gauges.lines_rendered
    return counts


async def _settle(pilot: Pilot[None]) -> None:
    for _ in range(3):
        await pilot.pause()


def _moved(snap: Snapshot, util: int, power: float) -> Snapshot:
    """GPU 0's utilization and power moved; GPU 1 and the host stayed put."""
    return replace(
        snap, gpus=(replace(snap.gpus[0], utilization_gpu=util, power_w=power), *snap.gpus[1:])
    )


def _screen(app: GpuTuiApp) -> list[Strip]:
    return app.screen._compositor.render_strips()


async def _redrawn_whole(app: GpuTuiApp, pilot: Pilot[None], header: bool = True) -> list[Strip]:
    """The screen after the GPU lines (and the header) are drawn again from scratch."""
    for widget in app.query(GpuGauges):
        widget.refresh()
    if header:
        app.query_one(HeaderBar).refresh()
    await _settle(pilot)
    return _screen(app)


@pytest.mark.parametrize("size", [(160, 50), (80, 24)])
async def test_an_unchanged_refresh_renders_and_lays_out_nothing(
    make_app: AppFactory, size: tuple[int, int]
) -> None:
    app = make_app()
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        await push(pilot, standard(1_000_001.0))
        await _settle(pilot)
        widgets = _mine(app)
        layouts, rendered = _layouts(widgets), _rendered(app)
        for step in range(2, 5):  # new snapshots, same figures
            await push(pilot, standard(1_000_000.0 + step))
            await _settle(pilot)
        assert _rendered(app) == rendered
        assert _layouts(_mine(app)) == layouts


async def test_a_moving_figure_renders_only_its_line(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        base = standard(1_000_001.0)
        await push(pilot, base)
        await _settle(pilot)
        widgets = _mine(app)
        layouts, before = _layouts(widgets), _rendered(app)
        await push(pilot, _moved(replace(base, taken_at=1_000_002.0), 73, 455.0))
        await _settle(pilot)
        after = _rendered(app)
        # Util and power sit on two of the card's five lines; GPU 1 and the header stayed.
        assert after["gpu0"] - before["gpu0"] == 2
        assert after["gpu1"] == before["gpu1"]
        assert after["header"] == before["header"]
        assert _layouts(_mine(app)) == layouts
        assert "73%" in app.main.gpus.cards[0].gauges.render().plain


async def test_lines_drawn_one_at_a_time_match_a_full_redraw(make_app: AppFactory) -> None:
    """After many partial redraws the screen equals what redrawing every widget whole gives."""
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        base = standard(1_000_001.0)
        for step in range(12):
            snap = _moved(replace(base, taken_at=1_000_002.0 + step), 5 + 8 * step, 90.0 * step)
            if step % 4 == 3:  # a GPU lost and back: the card's lines change length and style
                snap = replace(snap, gpus=(snap.gpus[0], gpu(1, lost=True, error="GpuIsLost")))
            await push(pilot, snap)
            await _settle(pilot)
        partial = _screen(app)
        assert await _redrawn_whole(app, pilot) == partial


async def test_no_gpu_refreshes_do_not_lay_out_again(make_app: AppFactory) -> None:
    app = make_app(FakeCollector([snapshot(gpus=[])]))
    async with app.run_test(size=(120, 30)) as pilot:
        await ready(pilot)
        await _settle(pilot)
        layouts = _layouts(_mine(app))
        for step in range(3):
            await push(pilot, snapshot(gpus=[], taken_at=2_000_000.0 + step))
            await _settle(pilot)
        assert _layouts(_mine(app)) == layouts


async def test_summary_line_refreshes_without_layout(make_app: AppFactory) -> None:
    gpus = [gpu(i) for i in range(8)]
    app = make_app(FakeCollector([snapshot(gpus=gpus)]))
    async with app.run_test(size=(60, 15)) as pilot:
        await ready(pilot)
        await _settle(pilot)
        panel = app.main.gpus
        assert panel.has_class("-summary")
        layouts = _layouts(_mine(app))
        moved = [gpu(i, util=10 + i) for i in range(8)]
        await push(pilot, snapshot(gpus=moved, taken_at=2_000_001.0))
        await _settle(pilot)
        assert "util 14%" in str(panel.summary.render())
        assert _layouts(_mine(app)) == layouts


async def test_a_card_is_three_widgets(make_app: AppFactory) -> None:
    """Every widget on screen costs the compositor work on each refresh: a card has three."""
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        for card in app.main.gpus.cards.values():
            assert len(card.query("*")) == 2  # the gauges and the sparkline row
            assert card.sparks.text().startswith("util ")


async def test_kept_lines_follow_a_style_change(make_app: AppFactory) -> None:
    """A new background or theme (no figure changed) draws every kept line again."""
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        await _settle(pilot)
        card = app.main.gpus.cards[0]
        lines = card.gauges.lines_rendered
        card.add_class("-lost")
        app.theme = "textual-light"
        await _settle(pilot)
        assert card.gauges.lines_rendered > lines
        partial = _screen(app)
        assert await _redrawn_whole(app, pilot) == partial


async def test_a_compact_line_that_wraps_renders_once(make_app: AppFactory) -> None:
    """At 60 columns a GPU's one line is wider than the panel: it is drawn once, not twice."""
    app = make_app()
    async with app.run_test(size=(60, 15)) as pilot:
        await ready(pilot)
        base = standard(1_000_001.0)
        await push(pilot, base)
        await _settle(pilot)
        assert app.main.gpus.has_class("-compact")
        before = _rendered(app)
        await push(pilot, _moved(replace(base, taken_at=1_000_002.0), 73, 455.0))
        await _settle(pilot)
        after = _rendered(app)
        assert after["gpu0"] - before["gpu0"] == 1
        assert after["gpu1"] == before["gpu1"]
        partial = _screen(app)
        assert await _redrawn_whole(app, pilot, header=False) == partial


@pytest.mark.parametrize("size", [(160, 50), (120, 30), (80, 24), (60, 15)])
async def test_lines_drawn_alone_are_the_lines_textual_draws(
    make_app: AppFactory, size: tuple[int, int]
) -> None:
    """Each line the header and the cards draw alone equals Textual's render of the whole.

    Styles, colours and the ``offset`` meta that text selection reads included. Lines that fit
    take the short way (``_fitted_strip``), which all of them do at 160 columns.
    """
    app = make_app()
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        base = standard(1_000_001.0)
        lost = replace(base, gpus=(base.gpus[0], gpu(1, lost=True, error="GpuIsLost")))
        for snap in (_moved(base, 73, 455.0), replace(lost, taken_at=1_000_002.0)):
            await push(pilot, snap)
            await _settle(pilot)
            widgets = [app.main.header, *(card.gauges for card in app.main.gpus.cards.values())]
            for widget in widgets:
                content = widget.render()
                assert isinstance(content, Content)
                width, height = widget.size
                whole = Visual.to_strips(widget, content, width, height, widget.visual_style)
                widget._strips.clear()
                alone = [widget.render_line(y) for y in range(len(whole))]
                assert [list(s) for s in alone] == [list(s) for s in whole]
                if size[0] == 160:
                    lines = content.split("\n", allow_blank=True)
                    assert all(
                        widget._fitted_strip(line, y, width) is not None
                        for y, line in enumerate(lines)
                    )
