"""The action table generates the keys, the footer, the palette, the help and the policy."""

from __future__ import annotations

import pytest
from textual.binding import Binding
from textual.pilot import Pilot

from gputui.model.settings import Settings
from gputui.recording.player import ReplayCollector
from gputui.ui import action_table
from gputui.ui.action_table import ACTIONS, ActionRow, Needs, Scope, policies
from gputui.ui.app import GpuTuiApp
from gputui.ui.screens.help import HelpScreen
from gputui.ui.screens.main import MainScreen
from tests.support.factories import FakeCollector, standard
from tests.support.pilot import AppFactory, ready


def _bindings(scope: Scope) -> dict[str | None, Binding]:
    declared = GpuTuiApp.BINDINGS if scope is Scope.APP else MainScreen.BINDINGS
    return {b.id: b for b in declared if isinstance(b, Binding)}


def test_every_row_is_a_binding_with_its_id_keys_and_texts() -> None:
    app = GpuTuiApp(FakeCollector(), Settings())
    tab_keys = {b.id: b for _, b in app._bindings if b.id and b.id.startswith("gputui.tab.")}
    for row in ACTIONS:
        if row.scope is Scope.TAB:
            binding = tab_keys[row.binding_id]  # bound on the app from its tab table
            assert binding.key == row.keys
            continue
        binding = _bindings(row.scope)[row.binding_id]
        assert (binding.key, binding.action, binding.description) == (
            row.keys,
            row.action,
            row.label,
        )
        assert (binding.show, binding.tooltip) == (row.footer, row.help)
    declared = [*GpuTuiApp.BINDINGS, *MainScreen.BINDINGS, *tab_keys.values()]
    assert len(declared) == len(ACTIONS)  # nothing bound outside the table


def test_one_policy_per_action_and_unique_ids() -> None:
    base = ActionRow("signal(15)", "T", "a", "A", "A", "a", write=True)
    assert policies([base, ActionRow("signal(9)", "K", "b", "B", "B", "b", write=True)])
    with pytest.raises(ValueError, match="disagree"):
        policies([base, ActionRow("signal(9)", "K", "b", "B", "B", "b")])
    with pytest.raises(ValueError, match="used twice"):
        policies([base, ActionRow("signal(9)", "K", "a", "B", "B", "b", write=True)])
    assert set(action_table.SELECTION_DEPENDENT) == {
        "filter",
        "sort",
        "sort_reverse",
        "sort_menu",
        "evidence",
        "inspect",
        "process_detail",
        "exec_smi",
        "exec_interactive",
        "logs",
        "shell",
        "stop_container",
        "start_container",
        "restart_container",
        "pause_container",
        "gpu_scope",
        "toggle_tree",
        "toggle_pane",
        "tag",
    }


async def _surfaces(pilot: Pilot[None]) -> tuple[set[str], set[str], set[str], set[str]]:
    """(actions with a live key, actions in the footer, palette titles, help texts)."""
    app = pilot.app
    assert isinstance(app, GpuTuiApp) and app.screen is app.main
    active = app.screen.active_bindings.values()
    keys = {b.binding.action for b in active}
    footer = {b.binding.action for b in active if b.binding.show}
    palette = {c.title for c in app.get_system_commands(app.screen)}
    await pilot.press("question_mark")
    await pilot.pause()
    help_screen = app.screen
    assert isinstance(help_screen, HelpScreen)
    texts = {text for _, text in help_screen.rows}
    await pilot.press("escape")
    await pilot.pause()
    assert app.screen is app.main
    return keys, footer, palette, texts


async def test_live_app_offers_every_row_but_replay(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        keys, footer, palette, texts = await _surfaces(pilot)
        for row in ACTIONS:
            offered = not row.replay
            if row.action == "resume":
                continue  # p's second row, live only while paused (test_main_layout.py)
            assert (row.action in keys) is offered, row
            assert (row.help in texts) is offered, row
            assert (row.action in footer) is (offered and row.footer), row
            if row.palette:  # (Textual's own palette has a "Quit" of its own)
                assert (row.title in palette) is offered, row


async def test_read_only_removes_every_write_action_everywhere(make_app: AppFactory) -> None:
    app = make_app(read_only=True)
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        keys, footer, palette, texts = await _surfaces(pilot)
        writes = [row for row in ACTIONS if row.write]
        assert writes
        for row in writes:
            assert app.check_action(row.action_name, ()) is False
            assert row.action not in keys and row.action not in footer, row
            assert row.title not in palette and row.help not in texts, row
        for row in ACTIONS:
            if not (row.write or row.replay or row.action == "resume"):
                assert row.action in keys and row.help in texts, row


async def test_replay_rows_only_in_a_replay(make_app: AppFactory) -> None:
    recording = [standard(1_800_000_000.0 + 10 * i) for i in range(5)]
    app = make_app(ReplayCollector(recording, source="test"))
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        keys, footer, palette, texts = await _surfaces(pilot)
        replay = [row for row in ACTIONS if row.replay]
        assert replay
        for row in replay:
            assert row.action in keys and row.action in footer, row
            assert row.title in palette and row.help in texts, row


async def test_dimmed_until_the_selection_fits(make_app: AppFactory) -> None:
    app = make_app(FakeCollector())
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        assert app.check_action("sort", ()) is True  # the tree sorts as well as the table
        await pilot.press("2")
        await pilot.pause()
        assert app.check_action("sort", ()) is True
        assert action_table.needs_met(Needs.RUNNING_CONTAINER, None) is False


async def test_a_key_remapped_through_the_binding_id_works(make_app: AppFactory) -> None:
    app = make_app()
    app.set_keymap({"gputui.pause": "z", "gputui.tab.health": "ctrl+t"})
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        await pilot.press("p")
        await pilot.pause()
        assert not app.paused  # p is no longer bound
        await pilot.press("z")
        await pilot.pause()
        assert app.paused
        await pilot.press("ctrl+t")
        await pilot.pause()
        assert app.main.active_tab == "health"
        app.action_help()
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        rows = {text: key for key, text in app.screen.rows}
        assert rows["Stop or restart refreshing"] == "z"
        assert rows["Switch to the health tab"] == "ctrl+t"
        assert rows["Switch to the alerts tab"] == "5"


def test_the_docs_name_every_binding() -> None:
    """[keys] in the config file takes these names: the docs must list each one."""
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[2] / "docs" / "alerts.md").read_text()
    missing = sorted({row.name for row in action_table.ACTIONS if f"| `{row.name}` |" not in docs})
    assert missing == []
