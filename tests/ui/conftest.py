"""Fixtures for the UI tests: an app factory wired to a fake collector."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from ui_factories import FakeCollector

from gputui.settings import Settings
from gputui.ui.app import GpuTuiApp

AppFactory = Callable[..., GpuTuiApp]


@pytest.fixture(autouse=True)
def _no_user_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """The default config path points at an empty directory: the user's rules never leak in."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))


@pytest.fixture
def make_app() -> AppFactory:
    """``make_app(collector=None, **settings)``: a long interval so only pushed frames change it."""

    def factory(collector: Any = None, **settings: Any) -> GpuTuiApp:
        settings.setdefault("interval", 60.0)
        return GpuTuiApp(collector or FakeCollector(), Settings(**settings))

    return factory
