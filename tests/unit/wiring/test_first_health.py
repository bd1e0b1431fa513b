"""The monitor's first snapshot goes out before the health checks; the next one has them."""

from __future__ import annotations

from gputui.model.settings import Settings
from gputui.wiring.compose import build_collector


def test_the_first_collection_leaves_the_checks_to_the_next() -> None:
    collector = build_collector(Settings(demo=True), first_health_later=True)
    try:
        first = collector.collect()
        assert first.health == () and first.health_pending
        second = collector.collect()
        assert second.health and not second.health_pending
    finally:
        collector.close()


def test_a_one_shot_and_other_collectors_run_them_at_once() -> None:
    collector = build_collector(Settings(demo=True))
    try:
        first = collector.collect()
        assert first.health and not first.health_pending
    finally:
        collector.close()
