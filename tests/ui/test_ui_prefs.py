"""[ui] preferences: applied at start, remembered when changed in the app, never fatal to save."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from gputui.config.file import ui_state_path
from gputui.config.ui_state import UiPrefs, load_ui_state
from tests.support.pilot import AppFactory, ready


def _xdg() -> Path:
    return Path(os.environ["XDG_CONFIG_HOME"])  # conftest: an empty directory per test


def _config(text: str) -> Path:
    path = _xdg() / "gputui" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


async def test_preferences_apply_at_start(make_app: AppFactory) -> None:
    _config('[ui]\ntheme = "nord"\nsort = "pid"\nlayout = "top"\ncollapsed = ["gpus"]\n')
    app = make_app()
    async with app.run_test(size=(200, 60)) as pilot:
        await ready(pilot)
        await pilot.pause()
        assert app.theme == "nord"
        assert app.main.table.sort_label.startswith("PID")
        assert app.main.layout_preference == "top"
        layout = app.main.arrangement
        assert layout is not None and not layout.side  # 200 columns, but "top"
        assert app.main.gpus_collapsed and app.main.gpus.outer_size.height == 2
    assert not ui_state_path().exists()  # nothing changed: nothing written


async def test_changes_are_remembered_and_the_config_file_is_untouched(
    make_app: AppFactory,
) -> None:
    mine = "# my alert rules\n[alerts]\ndefaults = true\n\n[ui]\ninterval = 60\n"
    config = _config(mine)
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        dark = app.current_theme.dark
        await pilot.press("d")  # theme
        await pilot.press("minus")  # interval 60 -> 30
        await pilot.press("v")  # collapse the GPU panel
        await pilot.press("2", "s")  # sort the process table by SM %
        await pilot.pause()
    saved = load_ui_state(ui_state_path())
    assert saved == UiPrefs(
        theme="textual-dark" if not dark else "textual-light",
        interval=30.0,
        sort="sm",
        collapsed=("gpus",),
    )
    assert config.read_text() == mine
    assert not list(ui_state_path().parent.glob(".ui-state.*"))  # no temporary file left
    # The next start uses them.
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert app.theme == saved.theme
        assert app.main.gpus_collapsed
        assert app.main.table.sort_label.startswith("SM")


async def test_an_unwritable_state_file_is_said_once(
    make_app: AppFactory, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(blocker))  # gputui/ cannot be created under it
    app = make_app()
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await ready(pilot)
        await pilot.press("v")
        await pilot.press("v")
        await pilot.press("d")
        await pilot.pause()
        assert app.is_running
        messages = [n.message for n in app._notifications if "not saved" in n.message]
        assert len(messages) == 1, messages
        assert "Preferences are not saved: cannot write" in messages[0]


async def test_keys_section_remaps_by_binding_name(make_app: AppFactory) -> None:
    _config('[keys]\npause = "z"\n"tab.health" = "ctrl+t"\nno-such-action = "f9"\n')
    app = make_app()
    notes: list[str] = []
    original = app.notify

    def notify(message: str, **kw: Any) -> None:
        notes.append(message)
        original(message, **kw)

    app.notify = notify  # type: ignore[method-assign]  # a spy on the instance
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
    assert any("no-such-action" in note for note in notes)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[keys]\npause = 5\n", "expected keys"),
        ('[keys]\n"Pause!" = "z"\n', "not a binding name"),
        ('[keys]\npause = "z; rm -rf /"\n', "expected keys"),
        ("keys = 3\n", "keys must be a table"),
    ],
)
def test_keys_section_is_validated(text: str, problem: str) -> None:
    from gputui.config.file import load_config
    from gputui.config.values import ConfigError

    with pytest.raises(ConfigError, match=problem):
        load_config(_config(text))
