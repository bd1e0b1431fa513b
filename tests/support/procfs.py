"""Real processes for the tests to read, and figures read straight from /proc as the truth
the tests compare gputui with."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

#: A child that says it is up, then sleeps: its /proc entries hold still while it is read.
SLEEP_CODE = "print('ready', flush=True); import time; time.sleep(60)"
#: A child that says it is up, then spins one core (for two minutes at most: one a killed test
#: run leaves behind does not spin for ever).
BUSY_CODE = (
    "print('ready', flush=True)\nimport time\nend = time.time() + 120\n"
    "while time.time() < end:\n    pass\n"
)

#: ``spawn(code, *argv, **popen_kwargs)``: the type of the :func:`children` starter.
Spawn = Callable[..., subprocess.Popen[bytes]]


def wait_ready(child: subprocess.Popen[bytes]) -> subprocess.Popen[bytes]:
    """Read the child's ``ready`` line: it is fully started then, not mid-exec.

    Popen can return while the exec is still setting up the new image: /proc/<pid>/cmdline,
    its name and its memory are the interpreter's own only once the code runs.
    """
    assert child.stdout is not None
    assert child.stdout.readline() == b"ready\n"
    return child


def end_child(child: subprocess.Popen[bytes]) -> None:
    """Kill (when still running) and reap a child, and close its pipe."""
    if child.poll() is None:
        child.kill()
    child.wait()
    if child.stdout is not None:
        child.stdout.close()


@contextlib.contextmanager
def children() -> Iterator[Spawn]:
    """Start ``python -c CODE [ARGV...]`` children; all are killed and reaped at the end.

    Each start returns once the child printed its ``ready`` line, when CODE prints one.
    """
    started: list[subprocess.Popen[bytes]] = []

    def spawn(code: str, *argv: str | bytes, **kwargs: Any) -> subprocess.Popen[bytes]:
        child = subprocess.Popen(
            [sys.executable, "-c", code, *argv], stdout=subprocess.PIPE, **kwargs
        )
        started.append(child)  # before the wait: a child that never says ready is ended too
        return wait_ready(child) if "ready" in code else child

    try:
        yield spawn
    finally:
        for child in started:
            end_child(child)


def cpu_ticks(pid: int) -> int:
    """utime + stime of a process in clock ticks."""
    with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


#: The unprivileged user every Debian host has.
NOBODY = 65534


def as_nobody(fn: Callable[[], object]) -> object:
    """Run ``fn`` in a forked child that dropped to uid nobody; return its JSON-able result.

    A fork (not an exec) because the interpreter may live where nobody cannot read it. Skips
    when not root (only root can switch users).
    """
    if os.geteuid() != 0:
        pytest.skip("needs root to switch to another user")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        status = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            os.write(write_end, json.dumps(fn()).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the unprivileged child failed"
    return json.loads(data)
