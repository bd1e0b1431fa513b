"""The drill-down's parent chain, read from the real /proc and from prepared roots."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gputui.collect.linux.parent_chain import EXITED_NOTE, parent_chain

SLEEP_CODE = "print('ready', flush=True); import time; time.sleep(60)"


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    """A sleeping child of this test process."""
    proc = subprocess.Popen([sys.executable, "-c", SLEEP_CODE], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n"
    yield proc
    proc.kill()
    proc.wait()
    proc.stdout.close()


def test_the_chain_of_a_live_child_starts_at_this_process(
    child: subprocess.Popen[bytes],
) -> None:
    links, note = parent_chain(child.pid, psutil.Process(child.pid).create_time())
    assert links[0].pid == os.getpid()
    assert links[0].command is not None and sys.executable in links[0].command
    assert links[1].pid == os.getppid()
    expected = [p.pid for p in psutil.Process(child.pid).parents()]
    assert [link.pid for link in links] == expected[: len(links)]
    assert note is None or note.startswith("stopped after")


def test_another_start_time_gives_no_chain(child: subprocess.Popen[bytes]) -> None:
    started = psutil.Process(child.pid).create_time()
    links, note = parent_chain(child.pid, started - 10)
    assert links == ()
    assert note == f"{EXITED_NOTE} (PID {child.pid} now names another process)"


def test_depth_bound_and_bad_pids() -> None:
    links, note = parent_chain(os.getpid(), None, depth=1)
    assert len(links) == 1 and note == "stopped after 1 parents"
    assert parent_chain(0, None) == ((), "not a process ID")
    assert parent_chain(-5, None) == ((), "not a process ID")
    assert parent_chain(4_194_305, None) == ((), "not a process ID")


def _stat(pid: int, ppid: int, comm: str = "sh") -> str:
    return f"{pid} ({comm}) S {ppid} " + " ".join(["0"] * 48) + "\n"


def test_a_loop_and_an_unreadable_parent_stop_the_chain(tmp_path: Path) -> None:
    for pid, ppid in ((10, 11), (11, 12), (12, 11)):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(_stat(pid, ppid))
        (tmp_path / str(pid) / "cmdline").write_bytes(b"sh\x00-c\x00x\x00")
    links, note = parent_chain(10, None, proc_root=tmp_path)
    assert [(link.pid, link.command) for link in links] == [(11, "sh -c x"), (12, "sh -c x")]
    assert note == "stopped: the parents loop"
    (tmp_path / "12" / "stat").unlink()
    links, note = parent_chain(10, None, proc_root=tmp_path)
    assert [link.pid for link in links] == [11]
    assert note == "PID 12 is not readable (exited, or hidden by /proc)"
    assert parent_chain(99, None, proc_root=tmp_path) == ((), EXITED_NOTE)
