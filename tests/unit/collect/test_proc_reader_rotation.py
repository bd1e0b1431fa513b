"""The rotating share of GPU processes read per refresh when there are many (real processes).

Beyond ``full_read_max`` PIDs a refresh reads only some of them; these tests pin down what that
must still guarantee: every process read again within the sample window, new processes and
exited ones seen at once, each figure carrying its age, CPU % over the longer interval equal to
the clock-tick formula, and nothing different at or below the threshold.
"""

from __future__ import annotations

import itertools
import math
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gputui.collect.linux.proc_reader import ProcSource
from tests.support.procfs import BUSY_CODE, children, cpu_ticks

EPOCH = 1_800_000_000.0
CLK_TCK = os.sysconf("SC_CLK_TCK")


@pytest.fixture
def spawn() -> Iterator[Callable[[int], list[subprocess.Popen[bytes]]]]:
    """Start ``n`` sleeping processes; all are killed and reaped afterwards."""
    children: list[subprocess.Popen[bytes]] = []

    def start(n: int) -> list[subprocess.Popen[bytes]]:
        started = [subprocess.Popen(["sleep", "120"]) for _ in range(n)]
        children.extend(started)
        # Popen can return while the exec is still setting up the new image (after a vfork the
        # parent resumes before the arguments are in place): /proc/<pid>/cmdline reads empty
        # then, and a read shows the name only. Wait until every command line is whole.
        deadline = time.monotonic() + 10
        for child in started:
            cmdline = Path(f"/proc/{child.pid}/cmdline")
            while cmdline.read_bytes() != b"sleep\x00120\x00" and time.monotonic() < deadline:
                time.sleep(0.005)
        return started

    yield start
    for child in children:
        if child.poll() is None:
            child.kill()
        child.wait()


@pytest.fixture
def busy() -> Iterator[subprocess.Popen[bytes]]:
    """A process spinning one core (started fully: its ``ready`` line was read)."""
    with children() as start:  # this module's own ``spawn`` starts plain sleeps
        yield start(BUSY_CODE)


class FakeClock:
    """The source's monotonic clock and wall clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> float:
        return EPOCH + self.now


def _source(clock: FakeClock, full_read_max: int, window: float) -> ProcSource:
    return ProcSource(
        clock=clock.monotonic, wall=clock.wall, full_read_max=full_read_max, sample_window=window
    )


def test_at_or_below_the_threshold_every_pid_is_read_and_carries_no_age(
    spawn: Callable[[int], list[subprocess.Popen[bytes]]],
) -> None:
    pids = [p.pid for p in spawn(6)]
    clock = FakeClock()
    source = _source(clock, full_read_max=6, window=5.0)
    plain = ProcSource()
    for _ in range(4):
        clock.now += 1.0
        infos = source.read(pids)
        assert source.last_read_count == 6
        assert all(infos[pid].sampled_at is None for pid in pids)
        reference = plain.read(pids)
        for pid in pids:
            assert infos[pid].exists
            assert (infos[pid].command, infos[pid].user, infos[pid].start_time) == (
                reference[pid].command,
                reference[pid].user,
                reference[pid].start_time,
            )
    source.close()
    plain.close()


def test_rotation_reads_every_process_within_the_window(
    spawn: Callable[[int], list[subprocess.Popen[bytes]]],
) -> None:
    pids = [p.pid for p in spawn(12)]
    clock = FakeClock()
    window = 6.0
    source = _source(clock, full_read_max=2, window=window)
    counts = []
    last_read = dict.fromkeys(pids, 0.0)
    for cycle in range(20):
        clock.now += 1.0
        infos = source.read(pids)
        counts.append(source.last_read_count)
        for pid in pids:
            info = infos[pid]
            assert info.exists
            assert info.sampled_at is not None
            age = clock.wall() - info.sampled_at
            assert 0.0 <= age <= window, (cycle, pid, age)
            if info.sampled_at == clock.wall():
                last_read[pid] = clock.now
        if cycle >= 8:
            assert all(clock.now - at <= window for at in last_read.values())
    # First refresh: all new; second: all again for their first CPU %; then 12 * 1 s / 6 s.
    assert counts[:2] == [12, 12]
    assert counts[2:] == [max(2, math.ceil(12 * 1.0 / window))] * 18
    source.close()


def test_a_longer_interval_reads_a_bigger_share(
    spawn: Callable[[int], list[subprocess.Popen[bytes]]],
) -> None:
    pids = [p.pid for p in spawn(12)]
    clock = FakeClock()
    source = _source(clock, full_read_max=2, window=6.0)
    for _ in range(3):
        clock.now += 1.0
        source.read(pids)
    clock.now += 3.0  # a slow refresh: half the window, so half the processes
    source.read(pids)
    assert source.last_read_count == 6
    clock.now += 6.0  # a whole window: every one
    source.read(pids)
    assert source.last_read_count == 12
    source.close()


def test_a_new_process_is_read_at_once(
    spawn: Callable[[int], list[subprocess.Popen[bytes]]],
) -> None:
    pids = [p.pid for p in spawn(10)]
    clock = FakeClock()
    source = _source(clock, full_read_max=2, window=10.0)
    for _ in range(4):
        clock.now += 1.0
        source.read(pids)
    (newcomer,) = spawn(1)
    clock.now += 1.0
    infos = source.read([*pids, newcomer.pid])
    assert infos[newcomer.pid].exists
    # Just started: its command line may still read empty (the name is shown meanwhile).
    assert infos[newcomer.pid].command in ("sleep 120", "sleep")
    assert infos[newcomer.pid].sampled_at == clock.wall()
    assert infos[newcomer.pid].cpu_percent is None  # one sample so far
    # Read again at the next refresh, out of turn, for its first CPU %.
    clock.now += 1.0
    infos = source.read([*pids, newcomer.pid])
    assert infos[newcomer.pid].sampled_at == clock.wall()
    assert infos[newcomer.pid].cpu_percent is not None
    # The refreshes here are a fake second apart, a millisecond in fact: on a loaded machine the
    # command line can still read empty; later refreshes read it again until it does not.
    deadline = time.monotonic() + 10.0
    while infos[newcomer.pid].command != "sleep 120" and time.monotonic() < deadline:
        time.sleep(0.01)
        clock.now += 1.0
        infos = source.read([*pids, newcomer.pid])
    assert infos[newcomer.pid].command == "sleep 120"
    source.close()


def test_an_exited_process_is_seen_at_the_next_refresh(
    spawn: Callable[[int], list[subprocess.Popen[bytes]]],
) -> None:
    children = spawn(10)
    pids = [p.pid for p in children]
    clock = FakeClock()
    source = _source(clock, full_read_max=2, window=100.0)  # a turn comes every 5 refreshes
    for _ in range(3):
        clock.now += 1.0
        source.read(pids)
    # Pick one that the next refresh would not read in its turn: read just now.
    infos = source.read(pids)
    victim = next(p for p in children if infos[p.pid].sampled_at == clock.wall())
    victim.kill()
    victim.wait()
    clock.now += 1.0
    infos = source.read(pids)
    assert not infos[victim.pid].exists
    assert all(infos[p].exists for p in pids if p != victim.pid)
    source.close()


def test_an_exited_unreaped_process_is_read_again_as_a_zombie(
    spawn: Callable[[int], list[subprocess.Popen[bytes]]],
) -> None:
    children = spawn(10)
    pids = [p.pid for p in children]
    clock = FakeClock()
    source = _source(clock, full_read_max=2, window=100.0)
    for _ in range(4):
        clock.now += 1.0
        infos = source.read(pids)
    victim = next(p for p in children if infos[p.pid].sampled_at == clock.wall())
    assert infos[victim.pid].rss_bytes
    os.kill(victim.pid, 9)
    deadline = time.monotonic() + 10
    while open(f"/proc/{victim.pid}/stat").read().split(") ")[1][0] != "Z":  # noqa: SIM115
        assert time.monotonic() < deadline
        time.sleep(0.01)
    clock.now += 1.0
    infos = source.read(pids)
    assert infos[victim.pid].sampled_at == clock.wall()
    assert infos[victim.pid].rss_bytes is None  # a zombie has no memory figures
    source.close()


def test_cpu_percent_over_a_longer_interval_is_the_tick_formula(
    spawn: Callable[[int], list[subprocess.Popen[bytes]]], busy: subprocess.Popen[bytes]
) -> None:
    pids = [p.pid for p in spawn(5)] + [busy.pid]
    clock = FakeClock()
    source = _source(clock, full_read_max=1, window=6.0)  # one process per 1 s refresh
    # Per refresh: (monotonic, ticks) just before and just after the read, and the answer.
    reads: list[tuple[float, int, float, int, float | None, bool]] = []
    for _ in range(14):
        clock.now += 1.0
        t0, k0 = time.monotonic(), cpu_ticks(busy.pid)
        info = source.read(pids)[busy.pid]
        t1, k1 = time.monotonic(), cpu_ticks(busy.pid)
        reads.append((t0, k0, t1, k1, info.cpu_percent, info.sampled_at == clock.wall()))
        time.sleep(0.15)
    sampled = [i for i, r in enumerate(reads) if r[5]]
    assert sampled[:2] == [0, 1]  # new, then its first CPU %
    longer = 0
    for prev, cur in itertools.pairwise(sampled):
        p0, pk0, p1, pk1 = reads[prev][:4]
        c0, ck0, c1, ck1, cpu, _ = reads[cur]
        assert cpu is not None
        low = 100.0 * (ck0 - pk1) / CLK_TCK / (c1 - p0)
        high = 100.0 * (ck1 - pk0) / CLK_TCK / (c0 - p1)
        assert low - 0.1 <= cpu <= high + 0.1, (prev, cur, low, cpu, high)
        longer += cur - prev >= 3
        # Between its samples it keeps the last figure: no read, no new value.
        for skipped in range(prev + 1, cur):
            assert reads[skipped][4] == reads[prev][4]
    assert longer, "the busy process was never left out of a refresh"
    source.close()


def test_close_releases_every_descriptor_including_pidfds(
    spawn: Callable[[int], list[subprocess.Popen[bytes]]],
) -> None:
    pids = [p.pid for p in spawn(8)]
    clock = FakeClock()
    before = len(os.listdir("/proc/self/fd"))
    source = _source(clock, full_read_max=2, window=4.0)
    for _ in range(3):
        clock.now += 1.0
        source.read(pids)
    assert source.kept_fds == 3 * 8  # stat, statm and a pidfd per process
    source.read(pids[:3])  # the others are dropped: their descriptors closed
    assert source.kept_fds == 3 * 3
    source.close()
    assert source.kept_fds == 0
    assert len(os.listdir("/proc/self/fd")) == before
