"""The drill-down's parent chain, read from the real /proc and from prepared roots."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil

from gputui.collect.linux.parent_chain import EXITED_NOTE, parent_chain


def test_the_chain_of_a_live_child_starts_at_this_process(
    sleeper: subprocess.Popen[bytes],
) -> None:
    links, note = parent_chain(sleeper.pid, psutil.Process(sleeper.pid).create_time())
    assert links[0].pid == os.getpid()
    assert links[0].command is not None and sys.executable in links[0].command
    assert links[1].pid == os.getppid()
    expected = [p.pid for p in psutil.Process(sleeper.pid).parents()]
    assert [link.pid for link in links] == expected[: len(links)]
    assert note is None or note.startswith("stopped after")


def test_another_start_time_gives_no_chain(sleeper: subprocess.Popen[bytes]) -> None:
    started = psutil.Process(sleeper.pid).create_time()
    links, note = parent_chain(sleeper.pid, started - 10)
    assert links == ()
    assert note == f"{EXITED_NOTE} (PID {sleeper.pid} now names another process)"


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
