"""What a plain start loads: the modules a session may never use are imported on first use.

Each check runs in a fresh interpreter (a module imported by an earlier test in this process
would hide a regression) and reads ``sys.modules`` once the work is done: ``gputui --demo`` on a
pseudo-terminal, quit a second after its first snapshot is on screen, and ``--once`` /
``--once --json``.
A module named here that a plain start imports again costs every session its code and memory.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterable
from pathlib import Path

import pytest

from tests.support.paths import REPO

ROOT = REPO

#: Opened by a key or an action, never by a plain start of the monitor.
TUI_DEFERRED = (
    "gputui.ui.screens.confirm",
    "gputui.ui.screens.evidence",
    "gputui.ui.screens.exec_modal",
    "gputui.ui.screens.faults",
    "gputui.ui.screens.help",
    "gputui.ui.screens.inspect",
    "gputui.ui.screens.logs",
    "gputui.ui.screens.process_detail",
    "gputui.ui.screens.signal_menu",
    # The other tabs' widgets: imported, built and mounted when their tab is first shown.
    "gputui.ui.widgets.alerts_panel",
    "gputui.ui.widgets.health_panel",
    "gputui.ui.widgets.history",
    "gputui.ui.widgets.users_view",
    "gputui.ui.widgets.ledger_view",
    "gputui.ledger.board",  # the Ledger tab's reader (the writer is the collector loop's)
    "textual.widgets._data_table",  # only those tabs draw a DataTable
    "gputui.ui.machine_actions",
    "gputui.serve",  # asked only when there is no terminal (a monitor started for a browser)
    "gputui.collect.docker.logs",  # the logs screen's reader (the demo has no engine)
    "gputui.collect.linux.parent_chain",  # the drill-down's (the demo reads no /proc)
    "gputui.collect.linux.proc_reader",  # the demo reads no /proc
    # [[notify]] targets and [idle_policy]: their sender, worker and audit log only where
    # configured (the demo delivers nothing either way).
    "gputui.notify.worker",
    "gputui.notify.send",
    "gputui.notify.policy",
    "gputui.notify.audit",
)
#: Other commands' code: reports, recordings, exporters, the fleet view, `gputui free`.
OTHER_COMMANDS = (
    "gputui.present.text_report",
    "gputui.recording.player",
    "gputui.recording.codec",
    "gputui.exporter.families",
    "gputui.exporter.server",
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
    "yaml",  # CDI specs are read only on a podman host
)
#: ``--once`` prints a report: no Textual, no Rich, no UI, no other command.
ONCE_NEVER = (
    "textual",
    "rich",
    "gputui.ui",
    "gputui.serve",
    # The ledger is written by long-running front-ends only, and the config's prices and idle
    # policy are plain records of the model: no part of the ledger or of the policy is loaded.
    "gputui.ledger",
    "gputui.derive.idle_policy",
    # A database or a CSV file is opened by other commands (the user files' reader is shared
    # with them).
    "sqlite3",
    "csv",
    *(m for m in OTHER_COMMANDS if m != "gputui.present.text_report"),
    # The other subcommands' own modules: the table names each by its module, imported when
    # that subcommand runs.
    "gputui.cli.doctor",
    "gputui.cli.export",
    "gputui.cli.fleet",
    "gputui.cli.free",
    "gputui.cli.ledger",
    "gputui.cli.reclaim",
    "gputui.cli.record",
    "gputui.cli.replay",
    "gputui.cli.serve",
    "gputui.cli.store",
    "gputui.collect.settle",
    # [[notify]] and [idle_policy] are parsed by the notify package only for a file that has
    # them (these runs read no config file).
    "gputui.notify",
)
#: And a one-shot of this machine: none of the demo's or a scenario's code.
LIVE_ONCE_NEVER = (
    *ONCE_NEVER,
    "gputui.collect.standins",
    "gputui.wiring.demo_host",
)

#: ``gputui --demo`` through the real entry point on a terminal; when it has quit, its
#: ``sys.modules`` is written to the file named by argv[1].
MONITOR_SCRIPT = """
import json, sys
from gputui.cli.main import main
status = main(["--demo", "--interval", "0.5"])
with open(sys.argv[1], "w") as out:
    json.dump(sorted(sys.modules), out)
sys.exit(status)
"""

#: ``gputui <argv>`` through the real entry point, its report thrown away; prints sys.modules.
CLI_SCRIPT = """
import json, os, sys
from gputui.cli.main import main
real, sys.stdout = sys.stdout, open(os.devnull, "w")
try:
    status = main(sys.argv[1:])
finally:
    sys.stdout = real
if status != 0:
    raise SystemExit(f"gputui exited {status}")
print(json.dumps(sorted(sys.modules)))
"""


def _env() -> dict[str, str]:
    """This checkout first on the path, no user config, no scenario from the caller."""
    env = {**os.environ, "XDG_CONFIG_HOME": "/nonexistent/gputui-test", "PYTHONPATH": str(ROOT)}
    env.pop("GPUTUI_SCENARIO", None)
    return env


def _modules(script: str, *argv: str) -> set[str]:
    """``sys.modules`` of a fresh interpreter after ``script`` ran (it prints them last)."""
    result = subprocess.run(
        [sys.executable, "-c", script, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=_env(),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    loaded: list[str] = json.loads(result.stdout.strip().splitlines()[-1])
    return set(loaded)


def _pump(fd: int, seconds: float) -> bytes:
    """What the terminal received within ``seconds`` (the program blocks if nobody reads)."""
    got = b""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            try:
                got += os.read(fd, 65536)
            except OSError:  # the program ended and closed the terminal
                break
    return got


def _text(output: bytes) -> bytes:
    """Terminal output without its control sequences (styles and cursor moves split words)."""
    return re.sub(rb"\x1b\[[0-9;?]*[ -/]*[@-~]", b"", output)


def _monitor_modules(out: Path, keys: bytes = b"") -> set[str]:
    """The monitor's ``sys.modules``: up on a 160x50 terminal, ``keys`` typed, then Ctrl+C."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: execve at once (nothing of pytest's may run here)
        os.chdir(ROOT)
        env = {k: v for k, v in _env().items() if k not in ("COLUMNS", "LINES")}
        env["TERM"] = "xterm-256color"
        os.execve(sys.executable, [sys.executable, "-c", MONITOR_SCRIPT, str(out)], env)
    try:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))
        seen = b""
        deadline = time.monotonic() + 60
        while b"demo-gpu-node" not in _text(seen) and time.monotonic() < deadline:
            seen += _pump(fd, 0.2)  # the header names the demo host once a snapshot is shown
        assert b"demo-gpu-node" in _text(seen), seen[-2000:].decode(errors="replace")
        seen += _pump(fd, 1.0)  # a few refreshes in
        for key in keys:
            os.write(fd, bytes([key]))
            seen += _pump(fd, 1.0)
        os.write(fd, b"\x03")  # Ctrl+C quits from any screen
        status = None
        deadline = time.monotonic() + 20
        while status is None and time.monotonic() < deadline:
            seen += _pump(fd, 0.1)
            done, code = os.waitpid(pid, os.WNOHANG)
            if done:
                status = code
        assert status is not None, "Ctrl+C did not quit"
        pid = 0
        tail = seen[-2000:].decode(errors="replace")
        assert os.waitstatus_to_exitcode(status) == 0, tail
    finally:
        if pid:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    loaded: list[str] = json.loads(out.read_text())
    return set(loaded)


def _found(loaded: set[str], denied: Iterable[str]) -> list[str]:
    """The loaded modules that are, or are under, a denied name."""
    return sorted(m for m in loaded for d in denied if m == d or m.startswith(d + "."))


@pytest.fixture(scope="module")
def tui_modules(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    return _monitor_modules(tmp_path_factory.mktemp("monitor") / "modules.json")


@pytest.mark.parametrize("name", sorted({*TUI_DEFERRED, *OTHER_COMMANDS, *LIVE_ONCE_NEVER}))
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


def test_a_deferred_screen_loads_when_first_opened(tmp_path: Path) -> None:
    # The check above sees a lazily imported screen once it is used: ? opens the help.
    loaded = _monitor_modules(tmp_path / "modules.json", b"?")
    assert "gputui.ui.screens.help" in loaded
    assert "gputui.ui.screens.confirm" not in loaded


def test_a_tab_s_widgets_load_when_first_shown(tmp_path: Path) -> None:
    # 5 shows the Alerts tab: its panel is imported then, the other hidden tabs' are not.
    loaded = _monitor_modules(tmp_path / "modules.json", b"5")
    assert "gputui.ui.widgets.alerts_panel" in loaded
    assert "gputui.ui.widgets.health_panel" not in loaded
    assert "gputui.ui.widgets.users_view" not in loaded


@pytest.mark.parametrize("argv", [["--demo", "--once"], ["--demo", "--once", "--json"]])
def test_once_loads_no_ui_and_no_other_command(argv: list[str]) -> None:
    loaded = _modules(CLI_SCRIPT, *argv)
    # The list is the one of a run that printed a report.
    assert "gputui.present.text_report" in loaded
    assert _found(loaded, ONCE_NEVER) == []


def test_a_one_shot_of_this_machine_loads_only_its_own_code() -> None:
    # No GPU or no engine here is fine: the report says so, and the imports are the same.
    loaded = _modules(CLI_SCRIPT, "--once", "--json")
    assert "gputui.present.json_report" in loaded and "gputui.collect.docker.source" in loaded
    assert _found(loaded, LIVE_ONCE_NEVER) == []
