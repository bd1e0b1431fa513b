"""psutil is asked only where /proc is not enough: a one-shot report never loads it."""

from __future__ import annotations

import subprocess
import sys

# --- the one-shot path -------------------------------------------------------------------------


def test_once_does_not_import_psutil() -> None:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "gputui", "--once", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    modules = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()}
    assert "gputui.collect.linux.proc_reader" in modules  # the live path was taken
    assert "psutil" not in modules
    demo = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "gputui", "--demo", "--once", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    demo_modules = {line.rsplit("|", 1)[-1].strip() for line in demo.stderr.splitlines()}
    assert "gputui.collect.collector" in demo_modules
    assert "socket" not in demo_modules  # the host name comes from os.uname()
    assert "psutil" not in demo_modules
