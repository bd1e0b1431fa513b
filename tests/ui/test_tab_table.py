"""The tab table generates the tab bar, the panes, the sync, the tab keys and the refusals."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual.widgets import Static

from gputui.model.settings import Settings
from gputui.model.snapshot import Snapshot
from gputui.ui.app import GpuTuiApp
from gputui.ui.tab_table import TABS, TabRow, TabTable
from tests.support.factories import FakeCollector
from tests.support.pilot import ready, screen_lines

AppFactory = Callable[..., GpuTuiApp]


def _messages(app: GpuTuiApp) -> list[str]:
    return [n.message for n in app._notifications]


def test_the_table_checks_its_rows() -> None:
    row = TABS.rows[0]
    with pytest.raises(ValueError, match="unique"):
        TabTable((row, row))
    with pytest.raises(ValueError, match="at least one"):
        TabTable(())
    assert TABS.where_to_go() == "the Containers or Processes tab; press 1 or 2 first"
    assert [TABS.key(tab) for tab in TABS.ids] == ["1", "2", "3", "4", "5", "6", "7"]


async def test_a_tab_added_with_one_entry_is_in_the_bar_keyed_and_synced() -> None:
    synced: list[Snapshot] = []
    probe = Static("probe pane", id="probe-body")
    extra = TabRow(
        "probe",
        "Probe",
        lambda screen: (probe,),
        lambda screen, snapshot: synced.append(snapshot),
        lambda screen: probe,
    )
    tabs = TabTable((*TABS, extra))
    app = GpuTuiApp(FakeCollector(), Settings(interval=60.0), tabs)
    async with app.run_test(size=(120, 30), notifications=True) as pilot:
        await ready(pilot)
        bar = next(line for line in screen_lines(app) if "Containers" in line and "Users" in line)
        assert "Probe" in bar  # in the tab bar, after the last tab
        assert synced == []  # hidden: not synced
        await pilot.press(tabs.key("probe"))  # its key: the one after the last tab's
        await pilot.pause()
        assert app.main.active_tab == "probe"
        assert synced and synced[-1] is app.main.snapshot
        assert "probe pane" in "\n".join(screen_lines(app))
        # No selection on it: container keys say where they act, s and / are dimmed.
        assert app.check_action("sort", ()) is None
        assert app.check_action("filter", ()) is None
        await pilot.press("x")
        await pilot.pause()
        assert "press 1 or 2 first" in _messages(app)[-1]
        await pilot.press("tab")  # the cycle wraps from the added tab to the first
        await pilot.pause()
        assert app.main.active_tab == "containers"
        # Its key shows in the help like every tab's.
        app.action_help()
        await pilot.pause()
        rows = {text: key for key, text in app.screen.rows}  # type: ignore[attr-defined]
        assert rows["Switch to the probe tab"] == tabs.key("probe")
