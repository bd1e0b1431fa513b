"""Ending the child processes a test or a benchmark started (servers, daemons, exporters).

Plain (no pytest): bench/ uses it through :mod:`tests.support.prometheus`.
"""

from __future__ import annotations

import subprocess


def stop_process(proc: subprocess.Popen[bytes], grace_s: float = 15.0) -> None:
    """End a child started here: SIGTERM, then SIGKILL when it outlives ``grace_s``.

    SIGTERM first, so a server's clean shutdown runs (and a test can see it did); SIGKILL only
    for one that hangs, so teardown never waits longer than ``grace_s`` for it.
    """
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=grace_s)
