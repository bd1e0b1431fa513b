"""Fixtures for the UI tests: an app factory wired to a fake collector."""

from __future__ import annotations

from typing import Any

import pytest

from gputui.config.file import load_config
from gputui.model.settings import Settings
from gputui.ui.app import GpuTuiApp
from tests.support.factories import FakeCollector
from tests.support.pilot import AppFactory


@pytest.fixture(autouse=True)
def _no_user_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """The default config path points at an empty directory: the user's rules never leak in."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))


@pytest.fixture
def make_app() -> AppFactory:
    """``make_app(collector=None, **settings)``: a long interval so only pushed frames change it.

    The config file (``config=PATH``, else the default path) is loaded here, once, as the
    command line loads it, and handed to the app.
    """

    def factory(collector: Any = None, **settings: Any) -> GpuTuiApp:
        settings.setdefault("interval", 60.0)
        chosen = Settings(**settings)
        config = load_config(chosen.config)
        return GpuTuiApp(collector or FakeCollector(), chosen, config=config)

    return factory
