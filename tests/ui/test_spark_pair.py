"""The GPU card's sparkline row, one widget, draws the cells the five-widget row drew."""

from __future__ import annotations

import random

import pytest
from textual.app import App, ComposeResult
from textual.containers import Horizontal, Vertical
from textual.strip import Strip
from textual.widgets import Label

from gputui.derive import units
from gputui.ui.widgets.spark import Spark, SparkLane, SparkPair


class _Rows(App[None]):
    """The old row (labels, ``1fr`` sparklines with a right margin) above the new widget."""

    CSS = """
    Vertical { height: auto; }
    .old { height: 1; }
    .old Label { width: 5; color: $text-muted; }
    .old Spark { margin-right: 1; }
    .old Spark.mem { color: $secondary; }
    .lost { background: $error 10%; }
    """

    def __init__(self, lost: bool) -> None:
        super().__init__()
        self.lost = lost

    def compose(self) -> ComposeResult:
        with Vertical(classes="lost" if self.lost else ""):
            with Horizontal(classes="old"):
                yield Label("util")
                yield Spark(classes="util")
                yield Label("mem")
                yield Spark(classes="mem")
            yield SparkPair(("util", "mem"))


def _cells(strip: Strip) -> list[tuple[str, str]]:
    """Each cell's character and style (the meta Textual adds for mouse offsets aside)."""
    return [(char, str(seg.style)) for seg in strip for char in seg.text]


@pytest.mark.parametrize("lost", [False, True])
async def test_same_cells_as_labels_and_two_sparklines(lost: bool) -> None:
    rng = random.Random(3)
    for width in (13, 14, 15, 40, 69, 71, 158):
        app = _Rows(lost)
        async with app.run_test(size=(width, 4)) as pilot:
            util, mem = list(app.query(Spark))
            pair = app.query_one(SparkPair)
            for count in (0, 3, width // 2, width * 3):
                a = tuple(rng.uniform(0, 100) for _ in range(count))
                b = tuple(rng.uniform(0, 100) for _ in range(count))
                util.data, mem.data = a, b
                pair.show(a, b)
                await pilot.pause()
                old, new = app.screen._compositor.render_strips()[:2]
                assert _cells(new) == _cells(old), (width, count)


def test_a_lane_appends_like_a_full_redraw() -> None:
    lane = SparkLane()
    rng = random.Random(5)
    samples: list[float] = []
    width = 20
    for step in range(60):
        samples.append(rng.uniform(0, 100))
        lane.update(tuple(samples[-width:]), width)
        assert lane.line(width) == units.spark(tuple(samples[-width:]), width, 0.0, 100.0), step
    assert lane.appends > 50
    assert lane.line(7) == units.spark(tuple(samples[-width:]), 7, 0.0, 100.0)  # a new width


async def test_unchanged_lines_are_not_redrawn() -> None:
    app = _Rows(False)
    async with app.run_test(size=(60, 4)) as pilot:
        pair = app.query_one(SparkPair)
        pair.show((50.0,) * 100, (20.0,) * 100)
        await pilot.pause()
        redraws = pair.redraws
        # Past the width each cell is a bucket's maximum: one more equal sample draws the same.
        pair.show((50.0,) * 101, (20.0,) * 101)
        assert pair.redraws == redraws
        pair.show((50.0,) * 101 + (90.0,), (20.0,) * 102)
        assert pair.redraws == redraws + 1
        await pilot.pause()
        assert pair.text().startswith("util ")
        assert "mem  " in pair.text()


async def test_styles_follow_a_background_and_theme_change() -> None:
    app = _Rows(False)
    async with app.run_test(size=(50, 4)) as pilot:
        util, mem = list(app.query(Spark))
        pair = app.query_one(SparkPair)
        for step, change in enumerate(("lost", "theme", "back")):
            data = tuple(float(10 * i % 100) for i in range(step + 3))
            util.data, mem.data = data, data
            pair.show(data, data)
            await pilot.pause()
            if change == "theme":
                app.theme = "textual-light"
            else:
                app.query_one(Vertical).set_class(change == "lost", "lost")
            await pilot.pause()
            old, new = app.screen._compositor.render_strips()[:2]
            assert _cells(new) == _cells(old), change
