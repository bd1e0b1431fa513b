"""One crash path for every App class: no locals, secrets redacted, a non-zero exit status.

Every ``textual.app.App`` subclass in gputui is found twice (an AST walk over the sources and
``__subclasses__`` after importing every module) and must derive from ``CrashSafeApp``; each
has a case in :data:`CRASH_CASES` that crashes it in a refresh through the real command line on
a pseudo-terminal, with secrets in locals and in the message, and checks what the terminal and
the files around it received. The secrets are built at run time so that the source lines a
traceback quotes never contain them.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import os
import pkgutil
import pty
import select
import signal
import struct
import sys
import termios
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from textual.app import App

import gputui
from gputui.ui.crash import CrashSafeApp, environment_secrets, redact

ROOT = Path(__file__).resolve().parents[2]
ANSWERS = ROOT / "tests" / "fixtures" / "fleet-answers.json"
PACKAGE = ROOT / "gputui"

#: The child: patches one refresh of the App to raise, then runs the real command line. The
#: patched function holds every secret in a local and puts them in its message.
CHILD = """
import os, sys

def crash(*args, **kwargs):
    token = os.environ["GPUTUI_PROMETHEUS_TOKEN"]
    header = "Bearer " + token
    env = ["API_KEY=" + os.environ["CRASH_ENV_VALUE"]]
    from_config = os.environ["CRASH_CONFIG_WORD"]
    raise ValueError(
        f"Invalid header value {header!r} with {env[0]} and {from_config} and {token}"
    )

target = sys.argv[1]
module, _, name = target.rpartition(".")
cls_module, _, cls_name = module.rpartition(".")
holder = getattr(__import__(cls_module, fromlist=[cls_name]), cls_name)
original = getattr(holder, name)

def patched(self, *args, **kwargs):
    if args and args[0] is not None:  # the first (empty) apply passes: a refresh crashes
        crash()
    return original(self, *args, **kwargs)

setattr(holder, name, patched if target.endswith("MainScreen.apply") else crash)
from gputui.cli.main import main
sys.exit(main(sys.argv[2:]))
"""


@dataclass(frozen=True)
class CrashCase:
    """How to crash one App class in a refresh through its command.

    Attributes:
        patched: ``module.Class.method`` the child makes raise.
        argv: The gputui command line (after ``gputui``), given the config file.
    """

    patched: str
    argv: Callable[[Path], list[str]]


#: Every App class in gputui, by qualified name: a new App class without a case fails
#: ``test_every_app_class_has_a_crash_case``.
CRASH_CASES: dict[str, CrashCase] = {
    "gputui.ui.app.GpuTuiApp": CrashCase(
        "gputui.ui.screens.main.MainScreen.apply",
        lambda config: ["--demo", "--config", str(config)],
    ),
    "gputui.ui.fleet_app.FleetApp": CrashCase(
        "gputui.fleet.source.RecordedFleet.snapshot",
        lambda config: ["fleet", "--answers", str(ANSWERS), "--config", str(config)],
    ),
}


def _app_classes_by_ast() -> set[str]:
    """Classes in gputui's sources whose bases name an App class (any spelling)."""
    found: set[str] = set()
    app_names = {"App", "CrashSafeApp"}
    changed = True
    trees = {
        ".".join(path.relative_to(ROOT).with_suffix("").parts): ast.parse(path.read_text())
        for path in PACKAGE.rglob("*.py")
    }
    while changed:  # subclasses of subclasses, to a fixed point
        changed = False
        for module, tree in trees.items():
            for node in ast.walk(tree):
                if not isinstance(node, ast.ClassDef):
                    continue
                bases = set()
                for base in node.bases:
                    target = base.value if isinstance(base, ast.Subscript) else base
                    if isinstance(target, ast.Name):
                        bases.add(target.id)
                    elif isinstance(target, ast.Attribute):
                        bases.add(target.attr)
                qualified = f"{module}.{node.name}"
                if bases & app_names and qualified not in found and node.name != "CrashSafeApp":
                    found.add(qualified)
                    app_names.add(node.name)
                    changed = True
    return found


def _app_classes_by_import() -> dict[str, type[Any]]:
    """Every App subclass defined in gputui, after importing all of its modules."""
    for info in pkgutil.walk_packages(gputui.__path__, "gputui."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)
    seen: dict[str, type[Any]] = {}
    todo: list[type[Any]] = list(App.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.startswith("gputui.") and cls is not CrashSafeApp:
            seen[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return seen


def test_every_app_class_uses_the_crash_path() -> None:
    by_import = _app_classes_by_import()
    assert set(by_import) == _app_classes_by_ast()
    assert by_import, "no App class found: the walk is broken"
    for name, cls in by_import.items():
        assert issubclass(cls, CrashSafeApp), f"{name} does not derive from CrashSafeApp"
        # Its own crash handling would bypass the report: only the base class defines them.
        for hook in ("_handle_exception", "_fatal_error", "panic"):
            owner = next(c for c in cls.__mro__ if hook in vars(c))
            assert owner in (CrashSafeApp, App), f"{name} overrides {hook}"


def test_every_app_class_has_a_crash_case() -> None:
    assert set(_app_classes_by_import()) == set(CRASH_CASES)


def _run_on_pty(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str]:
    """Run ``argv`` on a pseudo-terminal of 120x40; its exit status and everything it wrote."""
    pid, fd = pty.fork()
    if pid == 0:  # the child
        os.chdir(cwd)
        os.execve(argv[0], argv, env)
    output = b""
    status: int | None = None
    try:
        import fcntl

        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        deadline = time.monotonic() + 60
        while status is None and time.monotonic() < deadline:
            ready_fds, _, _ = select.select([fd], [], [], 0.1)
            if ready_fds:
                with contextlib.suppress(OSError):  # the child closed the terminal: exiting
                    output += os.read(fd, 65536)
            done, code = os.waitpid(pid, os.WNOHANG)
            if done:
                status = code
        assert status is not None, "the crashed app did not exit within 60 s"
        with_rest = True
        while with_rest:  # what it wrote just before exiting
            ready_fds, _, _ = select.select([fd], [], [], 0.1)
            try:
                chunk = os.read(fd, 65536) if ready_fds else b""
            except OSError:
                chunk = b""
            output += chunk
            with_rest = bool(chunk)
        return os.waitstatus_to_exitcode(status), output.decode(errors="replace")
    finally:
        if status is None:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)


@pytest.mark.parametrize("app_class", sorted(CRASH_CASES))
def test_a_crash_in_a_refresh_prints_no_secret_and_exits_non_zero(
    app_class: str, tmp_path: Path
) -> None:
    case = CRASH_CASES[app_class]
    token, env_value, config_word = (f"{kind}-{uuid.uuid4().hex}" for kind in "tec")
    config = tmp_path / "config.toml"
    config.write_text(f'[fleet]\ntoken = "{config_word}"\n')
    config.chmod(0o600)
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(
        TERM="xterm-256color",
        HOME=str(tmp_path),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_STATE_HOME=str(tmp_path / "state"),
        PYTHONPATH=str(ROOT),
        GPUTUI_PROMETHEUS_TOKEN=token,
        CRASH_ENV_VALUE=env_value,
        CRASH_CONFIG_WORD=config_word,
    )
    argv = [sys.executable, str(child), case.patched, *case.argv(config)]
    status, output = _run_on_pty(argv, env, tmp_path)
    assert status != 0
    assert "ValueError" in output and "Invalid header value" in output, output[-3000:]
    assert "crash" in output  # the frames are shown, only their variables are not
    for secret in (token, env_value, config_word):
        assert secret not in output, f"{secret[:1]} secret printed"
    assert "Bearer …" in output and "Bearer t-" not in output  # no locals table either
    # Nothing written around it holds a secret either (state files, a log, a crash file).
    for path in tmp_path.rglob("*"):
        if path.is_file() and path not in (child,):
            data = path.read_bytes()
            assert all(s.encode() not in data for s in (token, env_value)), path
            if path != config:
                assert config_word.encode() not in data, path


def test_redact_removes_credentials_environment_secrets_and_known_values() -> None:
    secret = "s" + uuid.uuid4().hex
    assert redact(f"Authorization: Bearer {secret}") == "Authorization: Bearer …"
    assert redact(f"header b'Basic {secret}'") == "header b'Basic …'"
    assert secret not in redact(f"value {secret}!", secrets={secret})
    assert environment_secrets({"GPUTUI_PROMETHEUS_TOKEN": secret, "HOME": "/root"}) == {secret}
    assert redact("Authorization: Basic abc, next") == "Authorization: Basic …, next"
    assert redact("unexpected token x") == "unexpected token x"
