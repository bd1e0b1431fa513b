"""Fixtures for the UI tests: an app factory wired to a fake collector."""

from __future__ import annotations

from typing import Any

import pytest

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
    """``make_app(collector=None, **settings)``: a long interval so only pushed frames change it."""

    def factory(collector: Any = None, **settings: Any) -> GpuTuiApp:
        settings.setdefault("interval", 60.0)
        return GpuTuiApp(collector or FakeCollector(), Settings(**settings))

    return factory
