"""The fast /proc path: kept descriptors read with pread, raw lifetime facts, raw host figures.

Every value must be the one the psutil-based reads gave (the "old style": psutil for the user,
start time and host figures, a fresh open/read/close of ``stat`` and ``statm`` per refresh).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from gputui.collect.linux import proc_reader as reader_module
from gputui.collect.linux.proc_parse import busy_percent, cpu_times, parse_meminfo
from gputui.collect.linux.proc_reader import ProcSource
from gputui.model import ProcessInfo

NOBODY = 65534
SLEEP_CODE = "print('ready', flush=True); import time; time.sleep(60)"


@pytest.fixture
def children() -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Start sleeping Python children (all killed and reaped at the end)."""
    started: list[subprocess.Popen[bytes]] = []

    def start(user: int | None = None) -> subprocess.Popen[bytes]:
        if user is not None:  # another user cannot run this interpreter: a plain sleep
            child = subprocess.Popen(["sleep", "60"], user=user)
            started.append(child)
            deadline = time.monotonic() + 10
            # Exec'd and asleep in nanosleep (its libraries loaded: the RSS holds from here).
            while Path(f"/proc/{child.pid}/stat").read_text().split(") ")[1][0] != "S" or (
                Path(f"/proc/{child.pid}/comm").read_text() != "sleep\n"
            ):
                assert time.monotonic() < deadline
                time.sleep(0.01)
            return child
        child = subprocess.Popen([sys.executable, "-c", SLEEP_CODE], stdout=subprocess.PIPE)
        started.append(child)
        assert child.stdout is not None
        assert child.stdout.readline() == b"ready\n"
        return child

    yield start
    for child in started:
        if child.poll() is None:
            child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _old_style(pid: int) -> dict[str, object]:
    """What the psutil-based source read for a live process."""
    proc = psutil.Process(pid)
    with open(f"/proc/{pid}/statm", "rb") as fh:  # a fresh open per refresh
        resident = int(fh.read().split()[1])
    return {
        "user": proc.username(),
        "start_time": proc.create_time(),
        "rss_bytes": resident * os.sysconf("SC_PAGE_SIZE"),
        "name": proc.name(),
        "command": " ".join(proc.cmdline()),
    }


def _new_style(info: ProcessInfo) -> dict[str, object]:
    return {
        "user": info.user,
        "start_time": info.start_time,
        "rss_bytes": info.rss_bytes,
        "name": info.name,
        "command": info.command,
    }


def test_kept_reads_give_the_old_style_values(
    children: Callable[..., subprocess.Popen[bytes]],
) -> None:
    mine = children()
    other = children(user=NOBODY) if os.geteuid() == 0 else children()
    pids = [mine.pid, other.pid, os.getppid()]
    source = ProcSource()
    first = source.read(pids)
    assert source.kept_fds == 2 * len(pids)  # stat and statm of each, kept open
    time.sleep(reader_module.MIN_CPU_INTERVAL_S + 0.05)
    second = source.read(pids)  # through the kept descriptors
    fresh = ProcSource().read(pids)  # a new source opens every file afresh
    for pid in (mine.pid, other.pid):
        assert second[pid].exists
        assert _new_style(second[pid]) == _old_style(pid)
        assert _new_style(first[pid]) == _old_style(pid)
        assert second[pid].cpu_percent == 0.0  # a sleeper, over a real interval
        assert dataclasses.replace(second[pid], cpu_percent=None) == fresh[pid]
    if os.geteuid() == 0:
        assert second[other.pid].user == "nobody"
    # The parent (pytest's runner or a shell) may allocate between reads: only fixed facts.
    parent = _old_style(os.getppid())
    assert second[os.getppid()].start_time == parent["start_time"]
    assert second[os.getppid()].user == parent["user"]


def test_unchanged_process_gets_the_same_object_back(
    children: Callable[..., subprocess.Popen[bytes]],
) -> None:
    child = children()
    source = ProcSource()
    source.read([child.pid])
    time.sleep(reader_module.MIN_CPU_INTERVAL_S + 0.05)
    second = source.read([child.pid])[child.pid]
    time.sleep(reader_module.MIN_CPU_INTERVAL_S + 0.05)
    third = source.read([child.pid])[child.pid]
    assert third == second
    assert third is second  # nothing rebuilt for a sleeper whose figures did not move


def test_descriptors_are_closed_when_processes_go(
    children: Callable[..., subprocess.Popen[bytes]],
) -> None:
    kids = [children() for _ in range(3)]
    pids = [k.pid for k in kids]
    baseline = _open_fds()
    source = ProcSource()
    source.read(pids)
    assert source.kept_fds == 6
    assert _open_fds() == baseline + 6
    kids[0].kill()
    kids[0].wait()  # reaped: its kept descriptors now fail with ESRCH
    after = source.read(pids)
    assert not after[pids[0]].exists
    assert after[pids[1]].exists and after[pids[2]].exists
    assert source.kept_fds == 4
    source.read(pids[2:])  # nobody asks about the second one any more
    assert source.kept_fds == 2
    source.close()
    assert source.kept_fds == 0
    assert _open_fds() == baseline
    assert source.read(pids[2:])[pids[2]].exists  # a closed source opens them again
    source.close()


def test_descriptor_budget_is_a_bound_not_a_behaviour(
    children: Callable[..., subprocess.Popen[bytes]],
) -> None:
    kids = [children() for _ in range(4)]
    pids = [k.pid for k in kids]
    limited = ProcSource()
    limited._files.limit = 3
    unlimited = ProcSource()
    for _ in range(2):
        got, want = limited.read(pids), unlimited.read(pids)
        assert limited.kept_fds <= 3
        for pid in pids:
            assert dataclasses.replace(got[pid], cpu_percent=None) == dataclasses.replace(
                want[pid], cpu_percent=None
            )
    assert 0 < reader_module.kept_fd_budget() <= reader_module.MAX_KEPT_FDS


def test_pid_reuse_is_never_read_through_an_old_descriptor(
    children: Callable[..., subprocess.Popen[bytes]],
) -> None:
    # A kept descriptor is bound to the process it was opened for: once that one is reaped,
    # pread fails with ESRCH (never another process's numbers), and the source opens afresh.
    child = children()
    fd = os.open(f"/proc/{child.pid}/stat", os.O_RDONLY)
    try:
        assert os.pread(fd, 4096, 0).startswith(f"{child.pid} (".encode())
        child.kill()
        child.wait()
        with pytest.raises(ProcessLookupError):
            os.pread(fd, 4096, 0)
    finally:
        os.close(fd)


def test_zombie_keeps_no_rss(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    try:
        source = ProcSource()
        for _ in range(2):  # fresh, then through the kept stat descriptor
            info = source.read([child.pid])[child.pid]
            assert info.exists and info.rss_bytes is None and info.cpu_percent is None
            assert info.start_time == psutil.Process(child.pid).create_time()
        child.wait()
        assert not source.read([child.pid])[child.pid].exists
        assert source.kept_fds == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


# --- host figures -------------------------------------------------------------------------------


def test_host_stats_match_psutil() -> None:
    source = ProcSource()
    first = source.host_stats()
    assert first.cpu_percent is None  # nothing measured yet
    stats = source.host_stats()
    vm, swap = psutil.virtual_memory(), psutil.swap_memory()
    assert stats.cpu_count == psutil.cpu_count()
    assert stats.memory_total_bytes == vm.total
    assert stats.swap_total_bytes == swap.total
    assert stats.memory_used_bytes is not None
    assert abs(stats.memory_used_bytes - (vm.total - vm.available)) < 256 << 20
    assert stats.load_avg is not None
    assert stats.cpu_percent is not None and 0.0 <= stats.cpu_percent <= 100.0


def test_cpu_percent_is_psutils_formula() -> None:
    before = b"cpu  100 5 50 1000 20 3 4 2 7 1\ncpu0 1 2 3 4 5 6 7 8 9 10\n"
    after = b"cpu  160 5 80 1100 30 3 9 2 17 1\ncpu0 1 2 3 4 5 6 7 8 9 10\n"
    t1, t2 = cpu_times(before), cpu_times(after)
    assert t1 is not None and t2 is not None
    # psutil's own helpers (private, untyped), applied to the same two samples.
    ps: Any = psutil
    ntp = ps._ntp
    expected_t1, expected_t2 = ntp.scputimes(*t1), ntp.scputimes(*t2)
    deltas = ps._cpu_times_deltas(expected_t1, expected_t2)
    expected = round(ps._cpu_busy_time(deltas) / ps._cpu_tot_time(deltas) * 100, 1)
    assert busy_percent(t1, t2) == expected
    assert busy_percent(t1, t1) == 0.0  # psutil's answer when no time passed
    # A counter going backwards counts as 0, as in psutil.
    back = b"cpu  90 5 80 1100 30 3 9 2 17 1\n"
    t3 = cpu_times(back)
    assert t3 is not None
    deltas = ps._cpu_times_deltas(expected_t1, ntp.scputimes(*t3))
    expected = round(ps._cpu_busy_time(deltas) / ps._cpu_tot_time(deltas) * 100, 1)
    assert busy_percent(t1, t3) == expected
    assert cpu_times(b"cpu  1 2 -3 4 5 6 7 8 9 10\n") is None
    assert cpu_times(b"intr 1 2 3\n") is None


def test_meminfo_needs_every_line() -> None:
    text = (
        b"MemTotal: 100 kB\nMemFree: 10 kB\nMemAvailable: 40 kB\nSwapTotal: 8 kB\nSwapFree: 2 kB\n"
    )
    assert parse_meminfo(text) == (100 * 1024, 40 * 1024, 8 * 1024, 6 * 1024)
    assert parse_meminfo(text.replace(b"MemAvailable", b"Avail")) is None  # psutil estimates
    assert parse_meminfo(text.replace(b"40 kB", b"-4 kB")) is None


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
