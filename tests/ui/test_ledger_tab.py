"""The Ledger tab over a real store: groups, windows, sparklines, a typed window, no store."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from textual.pilot import Pilot

from gputui.ledger.quantities import Amounts, Device, Subject
from gputui.ledger.store import Store, default_store_path
from gputui.ui.app import GpuTuiApp
from gputui.ui.tab_table import TABS
from gputui.ui.widgets.ledger_view import LedgerView
from tests.support.factories import demo_app
from tests.support.pilot import AppFactory, ready, screen_lines

DEVICE = Device("0", "GPU-0000", "NVIDIA H200")


def _subject(name: str, owner: str | None) -> Subject:
    return Subject("container", name.encode().hex().ljust(64, "0")[:64], name, "img:1", owner=owner)


def _store(path: Path, now: float) -> None:
    """Three days of hours: alice's trainer busy half of each, bob's notebook reserved idle."""
    trainer, notebook = _subject("trainer", "alice"), _subject("notebook", "bob")
    store = Store.open_writer(path, "test")
    try:
        start = int(now - 3 * 86400) // 3600 * 3600
        for hour in range(72):
            t = start + hour * 3600
            busy = 1800.0 if hour >= 48 else 900.0  # busier on the last day
            rows = {
                (t, DEVICE, trainer): Amounts(3600, 3600, busy),
                (t, DEVICE, notebook): Amounts(reserved_s=3600),
            }
            store.write(rows, {t: (3600.0, 3600.0, 1e6)}, [], t + 3600)
    finally:
        store.close()


async def _ledger_tab(pilot: Pilot[None], app: GpuTuiApp) -> LedgerView:
    await pilot.press(TABS.key("ledger"))
    view = app.main.query_one(LedgerView)
    for _ in range(200):
        if view.board is not None and not view.loading:
            break
        await pilot.pause(0.02)
    await pilot.pause()
    return view


async def _wait_read(pilot: Pilot[None], view: LedgerView) -> None:
    for _ in range(200):
        if not view.loading:
            break
        await pilot.pause(0.02)
    await pilot.pause()


async def test_the_ledger_tab_groups_a_week_by_owner_and_cycles_groups_and_windows(
    make_app: AppFactory,
) -> None:
    now = time.time()
    _store(default_store_path(), now)
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await ready(pilot)
        view = await _ledger_tab(pilot, app)
        assert view.board is not None and view.board.problem is None, view.board
        text = "\n".join(screen_lines(app))
        assert "Ledger 7d by owner" in text, text
        rows = {line.key: line for line in view.board.lines}
        assert set(rows) == {"alice", "bob"}
        # 72 hours: the trainer reserved 72 GPU-h and was busy 6 + 6 + 12 = 24 (33 % efficient).
        assert rows["alice"].reserved_h == 72 and rows["alice"].busy_h == 24
        assert rows["bob"].busy_h == 0 and rows["bob"].waste_h == 72
        assert "alice" in text and "OWNER" in text and "BUSY PER DAY" in text
        # The sparkline: a day per cell, the last day twice as busy as the two before.
        spark = view.board.series["alice"]
        assert len(spark) == 7 and spark[-1] == 2 * spark[-2] > 0
        await pilot.press("b")  # by container
        await _wait_read(pilot, view)
        assert view.board.by == "container"
        assert {line.key for line in view.board.lines} == {"trainer", "notebook"}
        await pilot.press("t")  # 30 days
        await _wait_read(pilot, view)
        assert view.board.window == "30d" and len(view.board.series["trainer"]) == 30
        await pilot.press("t")  # today: hourly
        await _wait_read(pilot, view)
        assert view.board.window == "today" and view.board.slot_s == 3600
        assert "BUSY PER HOUR" in "\n".join(screen_lines(app))


async def test_a_typed_window_and_a_bad_one(make_app: AppFactory) -> None:
    now = time.time()
    _store(default_store_path(), now)
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await ready(pilot)
        view = await _ledger_tab(pilot, app)
        await pilot.press("c")
        assert view.window_input.has_focus
        for key in "yesterday":
            await pilot.press(key)
        await pilot.press("enter")
        await pilot.pause()
        assert "window: expected 30d, 12h" in "\n".join(screen_lines(app))
        assert view.window == "7d"  # unchanged
        await pilot.press(*["backspace"] * 12, "2", "d", "enter")
        await _wait_read(pilot, view)
        assert view.window == "2d" and view.board is not None and view.board.window == "2d"
        assert {line.key for line in view.board.lines} == {"alice", "bob"}
        assert view.table.has_focus


async def test_without_a_store_the_tab_says_what_writes_one(
    make_app: AppFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUTUI_LEDGER", "off")  # this monitor writes none either
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        view = await _ledger_tab(pilot, app)
        assert view.board is not None and view.board.problem is not None
        text = "\n".join(screen_lines(app))
        assert "No such file or directory" in text
        assert "gputui daemon" in text


async def test_the_demo_shows_a_week_per_owner_in_a_store_of_its_own() -> None:
    app = demo_app(refreshes=5)
    async with app.run_test(size=(120, 30)) as pilot:
        await ready(pilot)
        assert app.demo_ledger is not None and app.ledger is None
        view = await _ledger_tab(pilot, app)
        assert view.board is not None and view.board.problem is None, view.board
        rows = {line.key: line for line in view.board.lines}
        # Each owner the demo's evidence names, from the time its container started.
        assert {"alice", "bob", "carol", "dave"} <= set(rows), set(rows)
        assert rows["bob"].reserved_h == pytest.approx(48, abs=0.01)  # up 2 days
        assert rows["dave"].reserved_h == pytest.approx(9, abs=0.01)  # the idle notebook
        assert rows["dave"].waste_h == rows["dave"].reserved_h
        assert 0 < rows["carol"].busy_h < rows["carol"].reserved_h < 1  # up 50 minutes
        text = "\n".join(screen_lines(app))
        assert "the demo's ledger: a simulated week" in text and "covered 100 %" in text, text
        assert "carol" in text and "dave" in text
        store = app.demo_ledger.path
        assert store.exists()
    # The demo wrote no store of this host, and its own is gone with it.
    assert not default_store_path().exists()
    for _ in range(100):
        if not store.exists():
            break
        time.sleep(0.02)
    assert not store.parent.exists()
