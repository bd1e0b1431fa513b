"""What a plain start loads: the modules a session may never use are imported on first use.

Each check runs in a fresh interpreter (a module imported by an earlier test in this process
would hide a regression) and reads ``sys.modules`` once the work is done: the monitor headless on
the demo machine after its first snapshot is on screen, and ``--once`` / ``--once --json``.
A module named here that a plain start imports again costs every session its code and memory.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Opened by a key or an action, never by a plain start of the monitor.
TUI_DEFERRED = (
    "gputui.ui.screens.confirm",
    "gputui.ui.screens.evidence",
    "gputui.ui.screens.exec_modal",
    "gputui.ui.screens.help",
    "gputui.ui.screens.logs",
    "gputui.ui.screens.process_detail",
    "gputui.ui.machine_actions",
    "gputui.collect.docker.logs",  # the logs screen's reader (the demo has no engine)
    "gputui.collect.linux.processes",  # the drill-down's parent chain (the demo reads no /proc)
)
#: Other commands' code: reports, recordings, exporters, the fleet view, `gputui free`.
OTHER_COMMANDS = (
    "gputui.report",
    "gputui.replay",
    "gputui.serialize",
    "gputui.export",
    "gputui.metrics_server",
    "gputui.fleet",
    "gputui.ui.fleet_app",
    "gputui.derive.free",
)
#: Heavy libraries nothing in a plain session draws with (rich.traceback: only after a crash).
HEAVY_LIBRARIES = (
    "rich.traceback",
    "rich.syntax",
    "pygments",
    "markdown_it",
    "textual.widgets._markdown",
    "textual.widgets._text_area",
    "textual_serve",
    "prometheus_client",
)
#: ``--once`` prints a report: no Textual, no Rich, no UI, no other command.
ONCE_NEVER = (
    "textual",
    "rich",
    "gputui.ui",
    "gputui.serve",
    *(m for m in OTHER_COMMANDS if m != "gputui.report"),
)

#: The monitor as ``gputui --demo`` builds it (gputui.ui.run.run_tui), run headless until the
#: first snapshot is applied; then the keys in argv are pressed; prints sorted sys.modules.
TUI_SCRIPT = """
import asyncio, json, sys
import gputui.cli, gputui.serve, gputui.ui.run  # what `gputui` imports before run_tui
from gputui.collect.loop import Prefetched
from gputui.settings import Settings
from gputui.ui.app import GpuTuiApp
from gputui.wiring import build_collector

async def main() -> None:
    settings = Settings(demo=True, interval=0.5)
    collector = Prefetched(build_collector(settings))
    app = GpuTuiApp(collector, settings)
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            for _ in range(600):  # 30 s at most
                if app.analysis is not None and app.main.snapshot is not None:
                    break
                await asyncio.sleep(0.05)
            else:
                raise SystemExit("no snapshot on screen after 30 s")
            for key in sys.argv[1:]:
                await pilot.press(key)
                await pilot.pause()
            print("SCREEN", type(app.screen).__name__, file=sys.stderr)
    finally:
        collector.close()

asyncio.run(main())
print(json.dumps(sorted(sys.modules)))
"""

#: ``gputui <argv>`` through the real entry point, its report thrown away; prints sys.modules.
CLI_SCRIPT = """
import json, os, sys
from gputui.cli import main
real, sys.stdout = sys.stdout, open(os.devnull, "w")
try:
    status = main(sys.argv[1:])
finally:
    sys.stdout = real
if status != 0:
    raise SystemExit(f"gputui exited {status}")
print(json.dumps(sorted(sys.modules)))
"""


def _modules(script: str, *argv: str) -> set[str]:
    """``sys.modules`` of a fresh interpreter after ``script`` ran (no user config, no cache)."""
    env = {**os.environ, "XDG_CONFIG_HOME": "/nonexistent/gputui-test", "PYTHONPATH": str(ROOT)}
    env.pop("GPUTUI_SCENARIO", None)
    result = subprocess.run(
        [sys.executable, "-c", script, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    loaded: list[str] = json.loads(result.stdout.strip().splitlines()[-1])
    return set(loaded)


def _found(loaded: set[str], denied: Iterable[str]) -> list[str]:
    """The loaded modules that are, or are under, a denied name."""
    return sorted(m for m in loaded for d in denied if m == d or m.startswith(d + "."))


@pytest.fixture(scope="module")
def tui_modules() -> set[str]:
    return _modules(TUI_SCRIPT)


@pytest.mark.parametrize("name", [*TUI_DEFERRED, *OTHER_COMMANDS])
def test_deny_list_names_real_modules(name: str) -> None:
    # A misspelt name would never be found loaded: the deny-list would pass while checking
    # nothing.
    assert importlib.util.find_spec(name) is not None


def test_plain_monitor_start_loads_no_deferred_module(tui_modules: set[str]) -> None:
    assert "gputui.ui.screens.main" in tui_modules  # the list is the running monitor's
    assert _found(tui_modules, TUI_DEFERRED) == []


def test_plain_monitor_start_loads_no_other_command_or_heavy_library(
    tui_modules: set[str],
) -> None:
    assert _found(tui_modules, (*OTHER_COMMANDS, *HEAVY_LIBRARIES)) == []


def test_a_deferred_screen_loads_when_first_opened() -> None:
    # The check above sees a lazily imported screen once it is used: ? opens the help.
    loaded = _modules(TUI_SCRIPT, "question_mark")
    assert "gputui.ui.screens.help" in loaded
    assert "gputui.ui.screens.confirm" not in loaded


@pytest.mark.parametrize("argv", [["--demo", "--once"], ["--demo", "--once", "--json"]])
def test_once_loads_no_ui_and_no_other_command(argv: list[str]) -> None:
    loaded = _modules(CLI_SCRIPT, *argv)
    assert "gputui.report" in loaded  # the list is the one of a run that printed a report
    assert _found(loaded, ONCE_NEVER) == []
