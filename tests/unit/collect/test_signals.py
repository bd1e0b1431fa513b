"""Signals reach only the process meant: every refusal, against real child processes (each
would-be victim is checked to be alive after a refused signal).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gputui.collect.linux.host_view import HOST_PID_NS_LINK
from gputui.collect.linux.proc_parse import PF_KTHREAD
from gputui.collect.linux.proc_reader import ProcSource
from tests.support.paths import REPO
from tests.support.procfs import as_nobody


def _start(pid: int) -> float:
    start = ProcSource().read([pid])[pid].start_time
    assert start is not None
    return start


def _alive(child: subprocess.Popen[bytes]) -> bool:
    time.sleep(0.1)  # a delivered SIGKILL takes effect well within this
    return child.poll() is None


def _prepared_root(
    root: Path, ns_link: str | None = HOST_PID_NS_LINK, nspid: str | None = None
) -> Path:
    """A proc root that says which PID namespace gputui is in."""
    (root / "self" / "ns").mkdir(parents=True)
    if ns_link is not None:
        (root / "self" / "ns" / "pid").symlink_to(ns_link)
    (root / "self" / "status").write_text(f"Name:\tpython\nNSpid:\t{nspid or os.getpid()}\n")
    return root


def _stat_line(pid: int, ppid: int, flags: int) -> str:
    # Fields 3.. of proc(5): state ppid pgrp session tty tpgid flags ... starttime(22) ...
    fields = ["S", str(ppid), "0", "0", "0", "-1", str(flags)] + ["0"] * 45
    return f"{pid} (victim) {' '.join(fields)}\n"


_IN_NAMESPACE = """
import json, subprocess, sys, time
from gputui.collect.linux.proc_reader import ProcSource
child = subprocess.Popen(["sleep", "30"])
time.sleep(0.05)
source = ProcSource()
info = source.read([child.pid])[child.pid]
message = source.send_signal(child.pid, 9, info.start_time)
time.sleep(0.1)
alive = child.poll() is None
child.kill()
child.wait()
print(json.dumps([source.visibility().host_pid_namespace, message, alive]))
"""


def test_sigterm_to_a_child(sleeper: subprocess.Popen[bytes]) -> None:
    source = ProcSource()
    info = source.read([sleeper.pid])[sleeper.pid]
    assert source.send_signal(sleeper.pid, signal.SIGTERM, info.start_time) is None
    assert sleeper.wait(timeout=10) == -signal.SIGTERM


def test_signal_to_an_exited_process(sleeper: subprocess.Popen[bytes]) -> None:
    start = _start(sleeper.pid)
    sleeper.kill()
    sleeper.wait()
    assert ProcSource().send_signal(sleeper.pid, signal.SIGTERM, start) == (
        f"process {sleeper.pid} has already exited"
    )


@pytest.mark.parametrize("pid", [0, -1])
def test_signal_refuses_process_groups(pid: int) -> None:
    assert ProcSource().send_signal(pid, signal.SIGTERM, None) == f"refusing to signal PID {pid}"


@pytest.mark.parametrize("signum", [9999, 2**32 + signal.SIGKILL, -1])
def test_invalid_signal_number(sleeper: subprocess.Popen[bytes], signum: int) -> None:
    message = ProcSource().send_signal(sleeper.pid, signum, None)
    assert message is not None
    assert message.startswith(f"cannot send signal {signum} to process {sleeper.pid}")
    time.sleep(0.1)
    assert sleeper.poll() is None


def test_signal_zero_probes_without_delivering(sleeper: subprocess.Popen[bytes]) -> None:
    assert ProcSource().send_signal(sleeper.pid, 0, _start(sleeper.pid)) is None
    time.sleep(0.1)
    assert sleeper.poll() is None


def test_signal_permission_denied(sleeper: subprocess.Popen[bytes]) -> None:
    owner = pwd.getpwuid(os.getuid()).pw_name
    start = _start(sleeper.pid)
    # Signal 0 only probes permission, so nothing is delivered even if the check were wrong.
    message = as_nobody(lambda: ProcSource().send_signal(sleeper.pid, 0, start))
    assert message == (
        f"permission denied: process {sleeper.pid} belongs to {owner} "
        "(run gputui as that user or root)"
    )


# --- signal refusals ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("link", "nspid", "why"),
    [
        ("pid:[4026532178]", None, "gputui is not in the host PID namespace"),
        # unshare --pid --fork without --mount-proc: /proc (and kthreadd) are the host's, but
        # gputui's own PIDs live in a child namespace (NSpid has two fields).
        (None, "27227\t2", "gputui is not in the host PID namespace"),
        (HOST_PID_NS_LINK, "27227\t2", "gputui is not in the host PID namespace"),
    ],
)
def test_signal_refused_outside_the_host_pid_namespace(
    tmp_path: Path, victim: subprocess.Popen[bytes], link: str | None, nspid: str | None, why: str
) -> None:
    root = _prepared_root(tmp_path, link, nspid)
    (root / "2").mkdir()
    (root / "2" / "comm").write_text("kthreadd\n")  # what the old check trusted
    source = ProcSource(root)
    assert source.visibility().host_pid_namespace is False
    message = source.send_signal(victim.pid, signal.SIGKILL, _start(victim.pid))
    assert message == (
        f"refusing to signal PID {victim.pid}: {why}, so NVML's PID may name another process"
    )
    assert _alive(victim)


def test_signal_refused_when_the_namespace_cannot_be_told(
    tmp_path: Path, victim: subprocess.Popen[bytes]
) -> None:
    root = _prepared_root(tmp_path, ns_link=None)
    (root / "2" / "comm").mkdir(parents=True)  # unreadable as a file (EISDIR): unknown
    source = ProcSource(root)
    assert source.visibility().host_pid_namespace is None
    message = source.send_signal(victim.pid, signal.SIGKILL, _start(victim.pid))
    assert message is not None
    assert "cannot tell whether it is in the host PID namespace" in message
    assert _alive(victim)


def test_signal_refused_without_a_start_time(victim: subprocess.Popen[bytes]) -> None:
    message = ProcSource().send_signal(victim.pid, signal.SIGKILL, None)
    assert message == (
        f"refusing to signal PID {victim.pid}: its start time is unknown, so a reused PID "
        "cannot be ruled out"
    )
    assert _alive(victim)


# PIDs as functions: a test id must not depend on the process collecting it (pytest-xdist).
@pytest.mark.parametrize(
    ("which", "why"),
    [
        (lambda: 1, "it is init"),
        (lambda: 2, "it is kthreadd"),
        (os.getpid, "it is gputui itself"),
        (os.getppid, "it is gputui's parent process"),
    ],
    ids=["init", "kthreadd", "self", "parent"],
)
def test_signal_refused_for_init_kthreadd_gputui_and_its_parent(
    which: Callable[[], int], why: str
) -> None:
    pid = which()
    # Signal 0 delivers nothing, so an unrefused call (the defect) would only return None.
    message = ProcSource().send_signal(pid, 0, _start(pid))
    assert message is not None
    assert message.startswith(f"refusing to signal PID {pid}: {why}")


@pytest.mark.parametrize(("ppid", "flags"), [(1, PF_KTHREAD | 0x40), (2, 0)])
def test_signal_refused_for_a_kernel_thread_from_its_stat(
    tmp_path: Path, victim: subprocess.Popen[bytes], ppid: int, flags: int
) -> None:
    root = _prepared_root(tmp_path)
    (root / str(victim.pid)).mkdir()
    (root / str(victim.pid) / "stat").write_text(_stat_line(victim.pid, ppid, flags))
    message = ProcSource(root).send_signal(victim.pid, signal.SIGKILL, _start(victim.pid))
    assert message == f"refusing to signal PID {victim.pid}: it is a kernel thread"
    assert _alive(victim)


def test_signal_refused_for_a_real_kernel_thread() -> None:
    children = Path("/proc/2/task/2/children")
    if not children.exists() or not children.read_text().split():
        pytest.skip("no kernel threads visible")
    kthread = int(children.read_text().split()[0])
    message = ProcSource().send_signal(kthread, 0, _start(kthread))
    assert message == f"refusing to signal PID {kthread}: it is a kernel thread"


@pytest.mark.parametrize("mount_proc", [True, False])
def test_signal_refused_inside_unshare_pid(mount_proc: bool) -> None:
    """End to end: gputui's process source run in a new PID namespace refuses to signal."""
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        pytest.skip("needs unshare(1) and root")
    argv = [unshare, "--pid", "--fork", *(["--mount-proc"] if mount_proc else [])]
    result = subprocess.run(
        [*argv, sys.executable, "-c", _IN_NAMESPACE],
        capture_output=True,
        timeout=30,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    if result.returncode != 0 and b"unshare failed" in result.stderr:
        pytest.skip("PID namespaces unavailable here")
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-2000:]
    host, message, alive = json.loads(result.stdout)
    assert host is False
    assert message is not None and "not in the host PID namespace" in message
    assert alive
