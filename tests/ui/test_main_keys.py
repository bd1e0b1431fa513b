"""Keys on the monitor: Ctrl+C quits, refused keys say why, dialogs list only their own keys,
``p`` reads Resume while paused, the help and the palette list each thing once."""

from __future__ import annotations

from collections import Counter

from textual.pilot import Pilot

from gputui.ui.app import GpuTuiApp
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.help import HelpScreen
from tests.support.pilot import AppFactory, ready, screen_lines


async def _select(app: GpuTuiApp, pilot: Pilot[None], key: str) -> None:
    tree = app.main.ctree
    tree.move_cursor(tree.nodes_by_key[key])
    await pilot.pause()
    await pilot.pause()


def _messages(app: GpuTuiApp) -> list[str]:
    return [n.message for n in app._notifications]


def _footer(app: GpuTuiApp) -> str:
    return screen_lines(app)[-1]


async def _quits(app: GpuTuiApp, pilot: Pilot[None]) -> bool:
    for _ in range(50):
        if not app.is_running:
            return True
        await pilot.pause(0.02)
    return False


async def test_ctrl_c_quits_from_the_tree(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+c")
        assert await _quits(app, pilot)
    assert app.return_code in (0, None)


async def test_ctrl_c_quits_from_the_filter_and_from_a_dialog(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.press("2", "slash")  # the filter input has the focus: ctrl+c is "copy" there
        await pilot.pause()
        assert app.main.filter_input.has_focus
        await pilot.press("ctrl+c")
        assert await _quits(app, pilot)
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("ctrl+c")
        assert await _quits(app, pilot)


async def test_e_on_the_unfindable_row_says_why(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await ready(pilot)
        await _select(app, pilot, "p:999:1")  # PID 999: memory held by a process nobody sees
        assert app.check_action("evidence", ()) is None  # dimmed
        await pilot.press("e")
        await pilot.pause()
        assert app.screen is app.main
        assert "PID 999 is not visible" in _messages(app)[-1]
        await _select(app, pilot, "p:900:0")  # Xorg, outside containers
        await pilot.press("e")
        await pilot.pause()
        assert "PID 900 runs outside any container" in _messages(app)[-1]
        await _select(app, pilot, "g:orphans")
        await pilot.press("x")
        await pilot.pause()
        assert "select a container" in _messages(app)[-1]


async def test_palette_sigkill_on_the_health_tab_says_why(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await ready(pilot)
        await _select(app, pilot, "p:611:0")  # a process is selected in the tree ...
        await pilot.press("3")  # ... but the Health tab is what the user sees
        await pilot.pause()
        commands = {c.title: c for c in app.get_system_commands(app.screen)}
        await commands["SIGKILL process"].callback()
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        assert "press 1 or 2" in _messages(app)[-1]
        await commands["Evidence"].callback()  # dimmed as a key: the palette says why as well
        await pilot.pause()
        assert "Containers or Processes tab" in _messages(app)[-1]


async def test_dialogs_list_only_their_own_keys(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert "/ Filter" in _footer(app) and "s Sort" in _footer(app)
        await pilot.press("question_mark")
        await pilot.pause()
        footer = _footer(app)
        assert "Close" in footer
        for label in ("Filter", "Sort", "Evidence", "nvidia-smi", "Pause", "Quit"):
            assert label not in footer, footer
        await pilot.press("escape")
        await _select(app, pilot, "p:611:0")
        await pilot.press("T")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        footer = _footer(app)
        assert "y Yes" in footer and "No" in footer
        for label in ("Filter", "Sort", "Evidence", "nvidia-smi", "Pause"):
            assert label not in footer, footer
        await pilot.press("n")
        await pilot.pause()
        screen: object = app.screen  # (mypy narrowed app.screen to the dialog above)
        assert screen is app.main
        assert "/ Filter" in _footer(app)


async def test_footer_says_resume_while_paused(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert "p Pause" in _footer(app)
        await pilot.press("p")
        await pilot.pause()
        assert app.paused
        assert "p Resume" in _footer(app) and "Pause" not in _footer(app)
        await pilot.press("p")
        await pilot.pause()
        assert not app.paused
        assert "p Pause" in _footer(app)


async def test_help_and_palette_list_each_thing_once(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(120, 50)) as pilot:
        await ready(pilot)
        titles = Counter(c.title for c in app.get_system_commands(app.screen))
        assert titles["Keys"] == 1
        assert max(titles.values()) == 1, titles
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        keys = Counter(key for key, _ in app.screen.rows)
        assert keys["escape"] == 1
        assert max(keys.values()) == 1, keys
        texts = {text: key for key, text in app.screen.rows}
        assert texts["Quit gputui"] == "q/f10/^c"
        assert texts["Stop or restart refreshing"] == "p"
        assert "v" in keys  # the collapse key is documented
