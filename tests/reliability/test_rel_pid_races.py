"""PID races against real processes: exit mid-read, PID reuse, zombies, other users, churn.

NVML lists a PID; by the time /proc and psutil are read the process may have exited, been
replaced by another process under the same PID, be a zombie, or belong to a user gputui cannot
fully read. None of that may raise, and attribution must follow the process that holds the PID
*now*.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from gputui.collect.collector import Collector
from gputui.collect.docker.source import DockerSource
from gputui.collect.linux.proc_reader import ProcSource
from gputui.collect.standins.scenario import ScenarioSource
from tests.support.gputui_process import gpu

NOBODY = 65534


def _kill(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()
    proc.wait()


def test_exit_between_nvml_and_proc_reads(
    host_sleeper: Callable[..., subprocess.Popen[bytes]],
) -> None:
    proc = host_sleeper()
    collector = Collector(
        ScenarioSource({"gpus": [gpu(0, [proc.pid])]}), ProcSource(), DockerSource()
    )
    try:
        first = collector.collect()
        assert first.processes[0].info.exists
        _kill(proc)  # NVML still lists the PID (the scenario), the process is gone
        snap = collector.collect()
        [gp] = snap.processes
        assert not gp.info.exists and gp.container_id is None
        assert snap.orphan_processes == (gp,)
    finally:
        collector.close()


@pytest.mark.parametrize("stage", ["owner", "cgroup"])
def test_exit_inside_one_read(
    stage: str, host_sleeper: Callable[..., subprocess.Popen[bytes]], monkeypatch: Any
) -> None:
    """The process dies after /proc/<pid>/stat was read but before its owner / cgroup file."""
    proc = host_sleeper()
    source = ProcSource()
    if stage == "owner":
        real_owner = ProcSource._read_owner

        def dying(self: ProcSource, pid: int) -> Any:
            _kill(proc)
            return real_owner(self, pid)

        monkeypatch.setattr(ProcSource, "_read_owner", dying)
    else:
        real_read = ProcSource._read_text

        def dying_read(self: ProcSource, pid: int, leaf: str) -> Any:
            if proc.poll() is None:
                _kill(proc)
            return real_read(self, pid, leaf)

        monkeypatch.setattr(ProcSource, "_read_text", dying_read)
    info = source.read([proc.pid])[proc.pid]
    assert not info.exists
    monkeypatch.undo()
    assert source.read([proc.pid])[proc.pid].exists is False


def _spawn_at(pid: int, argv: list[str]) -> subprocess.Popen[bytes] | None:
    """Start ``argv`` under exactly ``pid`` (root: ns_last_pid); None when another fork won."""
    last_pid = Path("/proc/sys/kernel/ns_last_pid")
    for _ in range(20):
        last_pid.write_text(str(pid - 1))
        child = subprocess.Popen(argv, stdout=subprocess.PIPE)
        if child.pid == pid:
            return child
        _kill(child)
    return None


@pytest.mark.skipif(os.geteuid() != 0, reason="ns_last_pid needs root")
def test_pid_reused_by_host_process_after_container_exit(
    run_container: Callable[..., Any], host_sleeper: Any
) -> None:
    ct = run_container(["sleep", "300"])
    pid = int(ct.attrs["State"]["Pid"])
    collector = Collector(ScenarioSource({"gpus": [gpu(0, [pid])]}), ProcSource(), DockerSource())
    try:
        before = collector.collect()
        assert before.processes[0].container_id == ct.id
        ct.remove(force=True)
        deadline = time.monotonic() + 10
        while psutil.pid_exists(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        code = "import time; print('ready', flush=True); time.sleep(60)"
        new = _spawn_at(pid, [sys.executable, "-c", code, "reused-pid-marker"])
        if new is None:
            pytest.skip("could not get the PID back (a busy machine forked in between)")
        try:
            assert new.stdout is not None and new.stdout.readline() == b"ready\n"
            after = collector.collect()
            [gp] = after.processes
            assert gp.info.exists
            assert gp.container_id is None, "the reused PID kept the old container"
            assert "reused-pid-marker" in (gp.info.command or "")
            assert after.container(ct.id) is None
        finally:
            _kill(new)
    finally:
        collector.close()


def test_zombie(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    try:
        source = ProcSource()
        info = source.read([child.pid])[child.pid]
        assert info.exists and info.cpu_percent is None and info.rss_bytes is None
        assert info.container_id is None
        reason = source.send_signal(child.pid, 15, info.start_time)
        assert reason is not None and "zombie" in reason
    finally:
        child.wait()
    assert ProcSource().read([child.pid])[child.pid].exists is False


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start a process as nobody")
def test_other_users_both_ways(run_container: Callable[..., Any]) -> None:
    # /bin/sleep: nobody may not be able to run this test's interpreter.
    theirs = subprocess.Popen(["sleep", "60"], user=NOBODY)
    try:
        info = ProcSource().read([theirs.pid])[theirs.pid]
        assert info.user == "nobody" and info.exists and info.command == "sleep 60"
    finally:
        _kill(theirs)
    # gputui itself as nobody, reading root's processes (a container's and a host one).
    ct = run_container(["sleep", "300"])
    cpid = int(ct.attrs["State"]["Pid"])
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the forked child
        try:
            os.close(read)
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            infos = ProcSource().read([cpid, 1, os.getppid()])
            out = {str(p): [i.exists, i.container_id, i.user, i.access_denied]
                   for p, i in infos.items()}  # fmt: skip
            os.write(write, json.dumps(out).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as fh:
        result = json.loads(fh.read() or "{}")
    os.waitpid(child, 0)
    assert result, "the reader as nobody crashed"
    assert result[str(cpid)][:2] == [True, ct.id]  # attribution works without privileges
    assert result["1"][0] is True


def test_churning_pids_never_raise(host_sleeper: Any) -> None:
    """200 short-lived processes read while they start and exit: no exception, no stale entry."""
    source = ProcSource()
    seen_dead = seen_alive = 0
    deadline = time.monotonic() + 2.0
    children: list[subprocess.Popen[bytes]] = []
    try:
        while time.monotonic() < deadline or len(children) < 200:
            if len(children) < 200:
                children.append(subprocess.Popen(["sleep", f"0.0{len(children) % 10}"]))
            for child in children:
                child.poll()
            infos = source.read([c.pid for c in children])
            seen_alive += sum(1 for i in infos.values() if i.exists)
            seen_dead += sum(1 for i in infos.values() if not i.exists)
        for child in children:
            child.wait()
        final = source.read([c.pid for c in children])
        assert not any(i.exists for i in final.values())
        assert seen_alive and seen_dead
        assert len(source.tracked_pids()["tracked"]) <= len(children)
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
            child.wait()
