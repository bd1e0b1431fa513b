"""Visual regression: the demo machine at 80x24 and 160x50, the Containers and Processes tabs
also at 120x30 and 200x60 (SVGs in __snapshots__/); the Ledger tab on the demo's own week."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.factories import demo_app
from tests.support.pilot import ready

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((160, 50), id="160x50")]
#: Where the FLAGS badges and the commands must fit: every common terminal size.
EVERY_SIZE = [
    pytest.param((80, 24), id="80x24"),
    pytest.param((120, 30), id="120x30"),
    pytest.param((160, 50), id="160x50"),
    pytest.param((200, 60), id="200x60"),
]


def _before(*keys: str) -> Any:
    async def run_before(pilot: Any) -> None:
        await ready(pilot)
        if keys:
            await pilot.press(*keys)
        await pilot.pause()
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("size", EVERY_SIZE)
def test_containers_tab(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(demo_app(), terminal_size=size, run_before=_before())


@pytest.mark.parametrize("size", EVERY_SIZE)
def test_processes_tab(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(demo_app(), terminal_size=size, run_before=_before("2"))


@pytest.mark.parametrize("size", SIZES)
def test_health_tab(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(demo_app(), terminal_size=size, run_before=_before("3"))


@pytest.mark.parametrize("size", SIZES)
def test_history_tab(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(demo_app(), terminal_size=size, run_before=_before("j", "j", "4"))


@pytest.mark.parametrize("size", SIZES)
def test_alerts_tab(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(demo_app(), terminal_size=size, run_before=_before("5"))


@pytest.mark.parametrize("size", SIZES)
def test_evidence_view(snap_compare: Any, size: tuple[int, int]) -> None:
    # Five lines down: the inference server sharing GPU 1 with the host, restarted 3 times.
    keys = ("j",) * 5 + ("e",)
    assert snap_compare(demo_app(), terminal_size=size, run_before=_before(*keys))


@pytest.mark.parametrize("size", SIZES)
def test_ledger_tab(snap_compare: Any, size: tuple[int, int]) -> None:
    """The demo's simulated week by owner (read on a worker: waited for)."""

    async def run_before(pilot: Any) -> None:
        from gputui.ui.widgets.ledger_view import LedgerView

        await ready(pilot)
        await pilot.press("7")
        view = pilot.app.main.query_one(LedgerView)
        for _ in range(300):
            if view.board is not None and not view.loading:
                break
            await pilot.pause(0.02)
        await pilot.pause()
        await pilot.pause()

    assert snap_compare(demo_app(), terminal_size=size, run_before=run_before)


def test_help_screen(snap_compare: Any) -> None:
    assert snap_compare(demo_app(), terminal_size=(80, 24), run_before=_before("question_mark"))


def test_read_only_paused_light(snap_compare: Any) -> None:
    app = demo_app(read_only=True)
    assert snap_compare(app, terminal_size=(120, 30), run_before=_before("p", "d"))


@pytest.mark.parametrize("size", [pytest.param((60, 15), id="60x15")])
def test_containers_tab_other_sizes(snap_compare: Any, size: tuple[int, int]) -> None:
    """The layout chosen by size: the GPU summary line at 60x15 (cards and the side column:
    test_containers_tab)."""
    assert snap_compare(demo_app(), terminal_size=size, run_before=_before())


def test_tagged_processes_and_gpu_scope(snap_compare: Any) -> None:
    """GPU 0 scoped (its card highlighted, "GPU 0 only"), a tagged process marked ``*``."""
    keys = ("f", "j", "space")
    assert snap_compare(demo_app(), terminal_size=(120, 30), run_before=_before(*keys))


def test_signal_menu(snap_compare: Any) -> None:
    """F9 on a process: the signals to pick from (the confirmation comes after)."""
    assert snap_compare(demo_app(), terminal_size=(100, 30), run_before=_before("2", "f9"))
