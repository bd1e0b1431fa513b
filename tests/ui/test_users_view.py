"""The Users tab: GPU totals per user and per compose project, sortable, small and large."""

from __future__ import annotations

from typing import Any

import pytest

from gputui.derive.users import SORTS
from gputui.model.snapshot import Snapshot
from gputui.ui.tab_table import TABS as TAB_TABLE
from tests.support.factories import (
    FakeCollector,
    cid,
    container,
    demo_app,
    proc,
    snapshot,
    standard,
)
from tests.support.pilot import AppFactory, push, ready, screen_lines

TABS = TAB_TABLE.ids


def _cells(app_table: object) -> list[list[str]]:
    from textual.widgets import DataTable

    assert isinstance(app_table, DataTable)
    return [[str(c) for c in app_table.get_row_at(i)] for i in range(app_table.row_count)]


def _hostile() -> Snapshot:
    processes = [
        proc(10, 0, 9000, cid(1), "python train.py", user="1000"),
        proc(11, 1, 500, None, "python notebook.py", user="alice\x1b[31m", sm=None),
    ]
    evil = container(1, "nb\x1b]0;owned\x07", processes, compose_project="proj\x1b[2J")
    return snapshot(processes=processes, containers=[evil])


async def test_users_tab_is_key_6_and_lists_users(make_app: AppFactory) -> None:
    assert TABS[5] == "users"
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        await pilot.press("6")
        await pilot.pause()
        assert app.main.active_tab == "users"
        view = app.main.users_view
        assert app.focused is view.table
        rows = _cells(view.table)
        # standard(): root runs trainer-a's two processes and Xorg on the host.
        assert rows[0][0] == "root"
        assert rows[0][1].strip() == "15.2GiB"  # 13290 + 2048 + 256 MiB
        assert rows[0][5] == "host, trainer-a"
        labels = [r[0] for r in rows]
        assert "app" in labels and "nobody" in labels and "PIDs nobody can find" in labels
        projects = _cells(view.projects)
        assert [p[0] for p in projects] == ["lab"]
        assert projects[0][5] == "trainer-a" and projects[0][6] == "root"
        assert view.projects.display
        text = "\n".join(screen_lines(app))
        assert "USER" in text and "Compose projects" in text


async def test_sort_keys_cycle_and_reverse_on_the_users_tab(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        await pilot.press("6")
        await pilot.pause()
        view = app.main.users_view
        process_sort = app.main.table.sort_index
        assert view.sort_key == "memory"
        await pilot.press("s")
        await pilot.pause()
        assert view.sort_key == SORTS[1]
        assert app.main.table.sort_index == process_sort  # the Processes tab's sort is its own
        while view.sort_key != "name":
            await pilot.press("s")
            await pilot.pause()
        names = [r[0] for r in _cells(view.table)]
        assert names == sorted(names, key=str.casefold)
        await pilot.press("S")
        await pilot.pause()
        assert [r[0] for r in _cells(view.table)] == names[::-1]
        assert "NAME ↑" in str(view.status.render())


async def test_keys_acting_on_a_selection_do_nothing_on_the_users_tab(
    make_app: AppFactory,
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("6")
        await pilot.pause()
        assert app.main.selection() == (None, None)


async def test_hostile_names_are_inert_and_small_terminal_fits(make_app: AppFactory) -> None:
    app = make_app(collector=FakeCollector(snapshots=[_hostile()]))
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press("6")
        await pilot.pause()
        view = app.main.users_view
        cells = _cells(view.table) + _cells(view.projects)
        flat = " ".join(" ".join(r) for r in cells)
        assert "\x1b" not in flat and "\x07" not in flat
        assert any(r[0].startswith("uid 1000 (nb") for r in cells)
        lines = screen_lines(app)
        assert len(lines) == 24 and all(len(line) <= 80 for line in lines)
        assert any("USER" in line for line in lines)


async def test_no_gpu_process_says_so_and_new_snapshots_update(make_app: AppFactory) -> None:
    app = make_app(collector=FakeCollector(snapshots=[snapshot()]))
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("6")
        await pilot.pause()
        view = app.main.users_view
        assert view.table.row_count == 0
        assert "No GPU processes" in str(view.status.render())
        assert not view.projects.display
        await push(pilot, standard(taken_at=1_000_010.0))
        assert view.table.row_count == 4  # root, app, nobody and the PIDs nobody can find
        assert "4 users" in str(view.status.render())


@pytest.mark.parametrize(
    "size", [pytest.param((80, 24), id="80x24"), pytest.param((160, 50), id="160x50")]
)
def test_users_tab_snapshot(snap_compare: Any, size: tuple[int, int]) -> None:
    """The demo machine's users: root across three containers, a uid the host cannot name."""

    async def run_before(pilot: Any) -> None:
        await ready(pilot)
        await pilot.press("6")
        await pilot.pause()
        await pilot.pause()

    assert snap_compare(demo_app(), terminal_size=size, run_before=run_before)
