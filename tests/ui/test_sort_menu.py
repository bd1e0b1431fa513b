"""F6, as htop's: the visible tab's sort columns in a list; Enter sorts by the one picked."""

from __future__ import annotations

from textual.pilot import Pilot
from textual.widgets import OptionList

from gputui.ui.app import GpuTuiApp
from gputui.ui.screens.sort_menu import SortMenuScreen
from gputui.ui.tab_table import TABS
from tests.support.factories import FakeCollector, standard
from tests.support.pilot import AppFactory, ready


async def _pick(pilot: Pilot[None], app: GpuTuiApp, label: str) -> None:
    await pilot.press("f6")
    await pilot.pause()
    assert isinstance(app.screen, SortMenuScreen), app.screen
    choices = app.screen.choices
    options = app.screen.query_one(OptionList)
    assert options.highlighted == app.screen.current  # the list opens on the current column
    options.highlighted = choices.index(label)
    await pilot.press("enter")
    await pilot.pause()
    assert not isinstance(app.screen, SortMenuScreen)


async def test_f6_sorts_each_tab_by_the_column_picked(make_app: AppFactory) -> None:
    app = make_app(FakeCollector([standard()]))
    async with app.run_test(size=(120, 30)) as pilot:
        await ready(pilot)
        tree = app.main.ctree
        await _pick(pilot, app, "name")
        assert tree.sort.key == "name" and not tree.reverse
        await pilot.press(TABS.key("processes"))
        await pilot.pause()
        table = app.main.table
        wanted = table.sort_choices()[2]
        await _pick(pilot, app, wanted)
        assert table.sort_choices()[table.sort_index] == wanted
        assert app.prefs.sort == table.columns.sorts[2][0]  # remembered, as s remembers it
        await pilot.press(TABS.key("users"))
        await pilot.pause()
        await _pick(pilot, app, "PROCS")
        assert app.main.users_view.sort_key == "processes"
        # Escape changes nothing; on a tab that sorts nothing F6 is dimmed and opens nothing.
        await pilot.press("f6", "escape")
        await pilot.pause()
        assert app.main.users_view.sort_key == "processes"
        await pilot.press(TABS.key("health"))
        await pilot.pause()
        assert app.check_action("sort_menu", ()) is None
