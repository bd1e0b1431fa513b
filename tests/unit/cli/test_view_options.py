"""nvitop's command-line habits: ``-1``, ``--only``, ``--user``, ``--pid``, ``--ascii``.

Each runs the real CLI as a subprocess: on the demo machine, and on a scenario whose GPU runs
real processes of two users (this test's own and ``nobody``'s), read from the real ``/proc``.
"""

from __future__ import annotations

import json
import os
import pty
import pwd
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.gputui_process import gpu, write_scenario


def gputui(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        capture_output=True,
        text=True,
        timeout=90,
        env={**os.environ, "GPUTUI_SCENARIO": ""},
    )


def report(*args: str) -> dict[str, Any]:
    result = gputui("--json", *args)
    assert result.returncode == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def test_dash_one_is_once() -> None:
    result = gputui("--demo", "-1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("gputui ") and "\nGPUs\n" in result.stdout


def test_only_restricts_gpus_their_processes_and_containers_and_keeps_the_schema() -> None:
    whole = report("--demo")
    doc = report("--demo", "--only", "1", "3")
    assert set(doc) == set(whole)  # the same keys: a narrowed report is the same contract
    assert [g["index"] for g in doc["gpus"]] == [1, 3]
    assert doc["processes"] and {p["gpu_index"] for p in doc["processes"]} <= {1, 3}
    names = {c["name"] for c in doc["containers"]}
    assert "llm-trainer-1" not in names and "vllm-server" not in names  # GPUs 0 and 2
    assert "notebook-gpu3" in names  # its idle reservation of MIG device 3:1 is on GPU 3
    assert {f["subject"] for f in doc["findings"]} & {"gpu:1"}
    assert not {f["subject"] for f in doc["findings"]} & {"gpu:0", "gpu:2"}
    assert all(a["subject"] in ("gpu1", "gpu3") or "gpu" not in a["subject"] for a in doc["alerts"])
    for entry in doc["users"]:
        assert set(entry["gpu_indexes"]) <= {1, 3}


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--only", "9"], "--only 9: no such GPU (this machine has GPUs 0, 1, 2, 3)"),
        (["--only", "1", "7", "8", "--json"], "--only 7 8: no such GPUs"),
        (["--only", "x"], "expected a GPU index"),
        (["--only"], "expected at least one argument"),
        (["--pid", "0"], "expected a process id"),
        (["--user", "a b"], "expected a user name or uid"),
    ],
)
def test_a_bad_only_pid_or_user_is_one_line_and_exit_2(args: list[str], needle: str) -> None:
    result = gputui("--demo", "--once", *args)
    assert result.returncode == 2
    assert needle in result.stderr and result.stderr.count("\n") == 1 and not result.stdout


def test_only_an_unknown_gpu_stops_the_monitor_before_it_starts() -> None:
    # On a terminal (a pseudo-terminal), where the monitor would otherwise start and stay.
    controller, terminal = pty.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "gputui", "--demo", "--only", "5"],
            stdin=terminal,
            stdout=terminal,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            env={**os.environ, "GPUTUI_SCENARIO": "", "TERM": "xterm-256color"},
        )
    finally:
        os.close(terminal)
        os.close(controller)
    assert proc.returncode == 2
    expected = "--only 5: no such GPU (this machine has GPUs 0, 1, 2, 3)"
    assert proc.stderr == f"gputui: error: {expected}\n"


def test_user_keeps_the_users_processes_and_their_share_stays_the_whole_gpus() -> None:
    whole = report("--demo")
    doc = report("--demo", "--user", "alice")
    assert [p["pid"] for p in doc["processes"]] == [3121]
    assert doc["containers"] == [] and doc["other_containers"] == []
    assert [u["user"] for u in doc["users"]] == ["alice"]
    assert len(doc["gpus"]) == len(whole["gpus"])  # --user narrows processes, not GPUs
    # alice's host process shares GPU 1 with a container: its part is the estimate made on the
    # whole GPU, not "alone on it" because the container is hidden.
    (activity,) = doc["gpu_activity"]
    expected = next(a for a in whole["gpu_activity"] if a["device"] == "1" and a["party"] == "host")
    assert activity == expected and activity["estimate"] is True


def test_pid_keeps_those_processes_and_sums_their_container_over_them() -> None:
    doc = report("--demo", "--pid", "48211", "3121")
    assert sorted(p["pid"] for p in doc["processes"]) == [3121, 48211]
    (trainer,) = doc["containers"]
    assert trainer["name"] == "llm-trainer-1"
    assert trainer["pids"] == [48211]  # its other process (48290) is not shown
    assert trainer["gpu_memory_bytes"] == 63488 * 2**20


def test_ascii_report_is_plain_ascii_and_keeps_its_columns() -> None:
    plain = gputui("--demo", "-1")
    ascii_ = gputui("--demo", "-1", "--ascii")
    assert plain.returncode == ascii_.returncode == 0
    assert not plain.stdout.isascii()  # °C, … in the ordinary report
    assert ascii_.stdout.isascii()
    assert [len(line) for line in ascii_.stdout.splitlines()] == [
        len(line) for line in plain.stdout.splitlines()
    ]
    # Cell by cell (boundary/glyphs.py's table, tested there): the degree sign is a space.
    assert "66°C" in plain.stdout and "66 C" in ascii_.stdout
    assert gputui("--demo", "-1", "--no-unicode").stdout == ascii_.stdout


# -- a scenario over real processes of two users ------------------------------------------------


@pytest.fixture
def two_users(tmp_path: Path) -> Iterator[tuple[Path, int, int]]:
    """A scenario GPU running a process of this user and one of another user (``nobody``)."""
    if os.getuid() != 0:
        pytest.skip("starting a process of another user needs root")
    mine = subprocess.Popen(["sleep", "120"])
    theirs = subprocess.Popen(["sleep", "120"], user="nobody")
    try:
        path = write_scenario(
            tmp_path / "two-users.json",
            {"nvml": "ok", "gpus": [gpu(0, [mine.pid, theirs.pid]), gpu(1)]},
        )
        yield path, mine.pid, theirs.pid
    finally:
        for proc in (mine, theirs):
            proc.kill()
            proc.wait()


def test_user_without_a_name_is_the_current_user(two_users: tuple[Path, int, int]) -> None:
    path, mine, theirs = two_users
    me = pwd.getpwuid(os.getuid()).pw_name
    every = report("--scenario", str(path))
    assert {p["pid"] for p in every["processes"]} == {mine, theirs}
    doc = report("--scenario", str(path), "--user")
    assert [(p["pid"], p["user"]) for p in doc["processes"]] == [(mine, me)]
    other = report("--scenario", str(path), "-u", "nobody")
    assert [p["pid"] for p in other["processes"]] == [theirs]
    # Containers follow their processes: none of these runs in one, whatever the engine lists.
    assert doc["containers"] == [] and other["containers"] == []
    result = gputui("--scenario", str(path), "-1", "-p", str(theirs), "-o", "0")
    assert result.returncode == 0, result.stderr
    assert str(theirs) in result.stdout and f"\n  {mine} " not in result.stdout
