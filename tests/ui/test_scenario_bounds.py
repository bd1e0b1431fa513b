"""Input bounds the UI can honour: beyond them one line and exit 2; at them the TUI quits on ``q``.

The scenario validator once accepted 1,024 GPUs and 300,000 processes, which the TUI then took
35 s to quit. The bounds are what NVML can report on one host (64 GPUs, 10,000 GPU processes in
all; docs/scenario-format.md); the real program runs at them on a pseudo-terminal.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import pytest

from gputui.collect.standins.scenario_format import MAX_GPUS, MAX_PROCESSES

ROOT = Path(__file__).resolve().parents[2]
#: Generous: the old behaviour (35 s) fails it; a loaded 2-core machine passes it.
QUIT_DEADLINE_S = 10.0


def _scenario(gpus: int, processes: int) -> dict[str, Any]:
    per, extra = divmod(processes, gpus)
    out = []
    pid = 3_000_000  # PIDs no process has here: held memory nobody can find
    for i in range(gpus):
        procs = []
        for j in range(per + (1 if i < extra else 0)):
            procs.append({"pid": pid, "used_memory_mib": 10 + j % 50, "sm_util": j % 100})
            pid += 1
        out.append(
            {
                "index": i,
                "uuid": f"GPU-{i:08x}-0000-0000-0000-000000000000",
                "name": "NVIDIA H200",
                "memory_total_mib": 143771,
                "memory_used_mib": [20000, 21000],
                "utilization_gpu": [10, 90],
                "processes": procs,
            }
        )
    return {"gpus": out}


@pytest.mark.parametrize(
    ("gpus", "processes", "said"),
    [
        (1024, 0, f"at most {MAX_GPUS} GPUs"),
        (MAX_GPUS + 1, 0, f"at most {MAX_GPUS} GPUs"),
        (8, 300_000, f"at most {MAX_PROCESSES} GPU processes in all, got 300000"),
        (8, MAX_PROCESSES + 1, f"at most {MAX_PROCESSES} GPU processes"),
    ],
)
def test_beyond_the_bounds_is_one_line_and_exit_2(
    gpus: int, processes: int, said: str, tmp_path: Path
) -> None:
    path = tmp_path / "big.json"
    path.write_text(json.dumps(_scenario(gpus, processes)))
    result = subprocess.run(
        [sys.executable, "-m", "gputui", "--scenario", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1 and said in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_at_the_bounds_the_tui_quits_promptly(tmp_path: Path) -> None:
    path = tmp_path / "bound.json"
    path.write_text(json.dumps(_scenario(MAX_GPUS, MAX_PROCESSES)))
    pid, fd = pty.fork()
    if pid == 0:  # the child: the real program on the scenario at the bounds
        os.chdir(ROOT)
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        env["TERM"] = "xterm-256color"
        os.execve(sys.executable, [sys.executable, "-m", "gputui", "--scenario", str(path)], env)
    try:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))
        os.kill(pid, signal.SIGWINCH)

        def pump(seconds: float) -> bytes:
            got = b""
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                ready_fds, _, _ = select.select([fd], [], [], 0.05)
                if ready_fds:
                    try:
                        got += os.read(fd, 1 << 20)
                    except OSError:
                        break
            return got

        seen = b""
        deadline = time.monotonic() + 60
        while b"unfindable" not in seen and time.monotonic() < deadline:
            seen += pump(0.2)  # up, with the scenario's processes in the tree
        assert b"unfindable" in seen
        pump(3.0)  # a few refreshes in: the UI is applying snapshots when q comes
        os.write(fd, b"q")
        asked = time.monotonic()
        status = None
        while status is None and time.monotonic() - asked < QUIT_DEADLINE_S:
            pump(0.05)
            done, code = os.waitpid(pid, os.WNOHANG)
            if done:
                status = code
        assert status is not None, f"q did not quit within {QUIT_DEADLINE_S:g} s"
        assert os.waitstatus_to_exitcode(status) == 0
        pid = 0
    finally:
        if pid:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
