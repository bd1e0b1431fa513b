"""Every binding, pressed through Pilot."""

from __future__ import annotations

import pytest
from textual.binding import Binding
from textual.widgets import Input

from gputui.derive.history import WINDOWS
from gputui.ui.action_table import POLICIES
from gputui.ui.app import GpuTuiApp
from gputui.ui.screens.help import HelpScreen
from gputui.ui.tab_table import TABS as TAB_TABLE
from tests.support.factories import FakeCollector, standard
from tests.support.pilot import AppFactory, current_screen, focused, push, ready

TABS = TAB_TABLE.ids


async def test_first_snapshot_fills_header_and_collects_off_ui_thread(make_app: AppFactory) -> None:
    collector = FakeCollector(mode="demo")
    app = make_app(collector)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        header = app.main.header.text
        for part in ("lab-1", "580.159.04", "CUDA 13.0", "every 60s", "NVML ok", "Docker ok"):
            assert part in header
        assert "1 fail / 1 warn" in header
        assert "DEMO" in header
        assert "MainThread" not in collector.collect_threads
        assert collector.calls == 1


@pytest.mark.parametrize(
    ("key", "tab"), [("1", "containers"), ("2", "processes"), ("3", "health"), ("4", "history")]
)
async def test_number_keys_switch_tabs(make_app: AppFactory, key: str, tab: str) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("4" if key == "1" else "1")
        await pilot.press(key)
        assert app.main.active_tab == tab


async def test_tab_and_shift_tab_cycle_every_tab(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        seen = [app.main.active_tab]
        for _ in range(len(TABS)):
            await pilot.press("tab")
            seen.append(app.main.active_tab)
        assert seen == [*TABS, TABS[0]]
        await pilot.press("shift+tab")
        assert app.main.active_tab == TABS[-1]


async def test_mouse_click_on_tab(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.click("#--content-tab-health")
        await pilot.pause()
        assert app.main.active_tab == "health"
        await pilot.click("#--content-tab-processes")
        await pilot.pause()
        assert app.main.active_tab == "processes"


async def test_q_quits(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running


async def test_help_lists_every_binding(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(120, 50)) as pilot:
        await ready(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = "\n".join(f"{k} {d}" for k, d in app.screen.rows)
        for binding in GpuTuiApp.BINDINGS:
            assert isinstance(binding, Binding), binding
            if POLICIES[binding.action.split("(")[0]].replay:
                continue  # only offered while replaying (test_replay_keys)
            assert binding.description in text or (binding.tooltip or "") in text, binding
        for key in ("x", "X", "T", "K", "?", "/", "+", "-", "1", "tab", "j k", "enter", "ctrl+p"):
            assert key in text, key
        await pilot.press("escape")
        await pilot.pause()
        assert current_screen(app) is app.main


async def test_help_in_read_only_omits_exec_and_signals(make_app: AppFactory) -> None:
    app = make_app(read_only=True)
    async with app.run_test(size=(120, 50)) as pilot:
        await ready(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = "\n".join(d for _, d in app.screen.rows)
        assert "SIGTERM" not in text
        assert "SIGKILL" not in text
        assert "nvidia-smi" not in text
        assert "Stop or restart refreshing" in text


async def test_p_pauses_collecting_and_applying(make_app: AppFactory) -> None:
    collector = FakeCollector([standard(1.0), standard(2.0, util=90)])
    app = make_app(collector, interval=0.1)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("p")
        assert app.paused
        assert "PAUSED" in app.main.header.text
        applied = app.main.snapshot
        calls = collector.calls
        await pilot.pause(0.4)
        assert collector.calls <= calls + 1  # at most the refresh already in flight
        await push(pilot, standard(50.0, util=10))
        assert app.main.snapshot is applied
        await pilot.press("p")
        assert not app.paused
        assert "PAUSED" not in app.main.header.text
        for _ in range(50):
            if collector.calls > calls + 1:
                break
            await pilot.pause(0.05)
        assert collector.calls > calls + 1


async def test_plus_minus_step_interval_within_bounds(make_app: AppFactory) -> None:
    app = make_app(interval=1.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("plus")
        assert app.interval == 2.0
        assert "every 2s" in app.main.header.text
        await pilot.press("minus", "minus")
        assert app.interval == 0.5
        # The buffers are resized by the next analysis, on the collector's thread.
        for _ in range(100):
            if app.history.maxlen == 3600:
                break
            await pilot.pause(0.05)
        assert app.history.maxlen == 3600
        for _ in range(10):
            await pilot.press("minus")
        assert app.interval == 0.1
        for _ in range(20):
            await pilot.press("plus")
        assert app.interval == 30.0
        await pilot.press("equals_sign")  # '+' without shift
        assert app.interval == 30.0


async def test_w_cycles_history_window(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert app.window == WINDOWS[1]
        seen = []
        for _ in range(3):
            await pilot.press("w")
            seen.append(app.window)
        assert seen == [WINDOWS[2], WINDOWS[0], WINDOWS[1]]


async def test_r_requests_health_checks(make_app: AppFactory) -> None:
    collector = FakeCollector()
    app = make_app(collector)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("r")
        assert collector.health_requests == 1
        for _ in range(50):  # the wait is cut short: the re-check runs now, not in 60 s
            if collector.calls >= 2:
                break
            await pilot.pause(0.05)
        assert collector.calls >= 2


async def test_d_toggles_light_and_dark(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        dark = app.current_theme.dark
        await pilot.press("d")
        assert app.current_theme.dark is not dark
        await pilot.press("d")
        assert app.current_theme.dark is dark


async def test_s_sorts_the_process_table(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        assert app.check_action("sort", ()) is True  # the tree sorts too (test_tree_columns.py)
        await pilot.press("2")
        table = app.main.table
        assert table.row_keys()[0] == "611:0"  # GPU memory, descending
        await pilot.press("s")  # SM %
        await pilot.press("s")  # CPU %
        await pilot.press("s")  # PID ascending
        assert table.sort_label == "PID ▲"
        assert table.row_keys() == ["611:0", "612:1", "700:1", "800:0", "900:0", "999:1"]
        await pilot.press("s")  # container
        assert table.sort_label.startswith("container")
        await pilot.press("s")  # elapsed, longest first
        assert table.sort_label == "elapsed ▼"
        await pilot.press("s")  # GPU index: who is on GPU 0 first
        assert table.sort_label == "GPU ▲"
        assert table.row_keys() == ["611:0", "800:0", "900:0", "612:1", "700:1", "999:1"]
        await pilot.press("s")
        assert table.sort_label == "GPU mem ▼"


async def test_slash_filters_and_escape_clears(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await pilot.press("2", "slash")  # on the Containers tab, / filters the tree
        assert app.main.active_tab == "processes"
        assert isinstance(app.focused, Input)
        await pilot.press(*"trainer")
        await pilot.pause()
        assert sorted(app.main.table.row_keys()) == ["611:0", "612:1"]
        await pilot.press("escape")
        await pilot.pause()
        assert len(app.main.table.row_keys()) == 6
        assert not app.main.filter_input.display
        await pilot.press("slash", *"700", "enter")
        await pilot.pause()
        assert app.main.table.row_keys() == ["700:1"]
        assert focused(app) is app.main.table


async def test_filter_matches_user_and_pid(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await pilot.press("2", "slash", *"nobody")
        await pilot.pause()
        assert app.main.table.row_keys() == ["800:0"]


async def test_vim_keys_move_tree_and_table(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        tree = app.main.ctree
        assert tree.cursor_line == 0
        await pilot.press("j", "j")
        assert tree.cursor_line == 2
        await pilot.press("k")
        assert tree.cursor_line == 1
        await pilot.press("G")
        assert tree.cursor_line == tree.last_line
        await pilot.press("g")
        assert tree.cursor_line == 0
        await pilot.press("down")
        assert tree.cursor_line == 1
        await pilot.press("2")
        table = app.main.table
        await pilot.press("j", "j")
        assert table.cursor_row == 2
        await pilot.press("k")
        assert table.cursor_row == 1
        await pilot.press("G")
        assert table.cursor_row == table.row_count - 1
        await pilot.press("g")
        assert table.cursor_row == 0


async def test_enter_and_space_toggle_container(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        tree = app.main.ctree
        node = tree.cursor_node
        assert node is not None
        assert node.is_expanded
        await pilot.press("space")
        assert not node.is_expanded
        await pilot.press("space")
        assert node.is_expanded
        await pilot.press("enter")
        assert not node.is_expanded
        await pilot.press("enter")
        assert node.is_expanded


async def test_palette_lists_actions(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        titles = [c.title for c in app.get_system_commands(app.main)]
        for title in (
            "Pause / resume",
            "nvidia-smi in container",
            "SIGKILL process",
            "Show Health tab",
        ):
            assert title in titles
        await pilot.press("ctrl+p")
        await pilot.pause()
        assert app.screen.__class__.__name__ == "CommandPalette"
        await pilot.press(*"pause", "enter")
        await pilot.pause(0.3)
        assert app.paused


async def test_footer_shows_main_keys(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        keys = {binding.key for binding in (b.binding for b in app.screen.active_bindings.values())}
        assert {"q", "question_mark", "slash", "s", "x", "p", "T", "K"} <= keys
