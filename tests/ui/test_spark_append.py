"""A sparkline that only got a new sample draws one new cell and shifts the rest."""

from __future__ import annotations

import random

from textual.app import App, ComposeResult

from gputui.derive import units
from gputui.ui.widgets.spark import Spark


class _Host(App[None]):
    def compose(self) -> ComposeResult:
        yield Spark()


def _shown(spark: Spark) -> str:
    return "".join(segment.text for segment in spark.render_line(0))


async def test_appended_samples_draw_the_same_line_as_a_full_redraw() -> None:
    app = _Host()
    rng = random.Random(7)
    async with app.run_test(size=(30, 3)) as pilot:
        spark = app.query_one(Spark)
        await pilot.pause()
        width = spark.size.width
        samples: list[float] = []
        for step in range(80):
            samples.append(rng.uniform(0, 100))
            # Every third refresh lands twice before a draw (two samples between renders).
            spark.data = tuple(samples[-width:]) if step % 7 else tuple(samples[-(width + 5) :])
            if step % 3:
                await pilot.pause()
                assert spark._drawn == units.spark(spark.data, width, 0.0, 100.0), step
                assert _shown(spark).rstrip() == spark._drawn.rstrip()
        assert spark.appends > 40  # most refreshes appended one cell
