"""Container CPU/memory on their own cadence: a rotating share of many running containers.

The cgroup files are prepared v2 files (what the kernel shows under ``/sys/fs/cgroup``), so each
test can change a container's numbers between refreshes and see exactly which containers were
read, and when.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

from gputui.collect.linux.cgroup_usage import CgroupSampler
from gputui.model.containers import ContainerInfo, EngineInfo

EPOCH = 1_800_000_000.0
ENGINE = EngineInfo(cgroup_version="2", cgroup_driver="systemd", host_memory_bytes=1 << 30)
CPUS = 2  # /proc/stat below lists cpu0 and cpu1
CLK_TCK = os.sysconf("SC_CLK_TCK")


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> float:
        return EPOCH + self.now


def _cid(n: int) -> str:
    return f"{n:064x}"


def _write(root: Path, cid: str, usage_usec: int, current: int) -> None:
    folder = root / "cg" / "system.slice" / f"docker-{cid}.scope"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cpu.stat").write_text(
        f"usage_usec {usage_usec}\nnr_periods 4\nnr_throttled 1\nthrottled_usec 500\n"
    )
    (folder / "memory.current").write_text(f"{current}\n")
    (folder / "memory.stat").write_text("anon 5\ninactive_file 1000\n")
    (folder / "memory.max").write_text("max\n")


def _host(root: Path, busy: int, idle: int) -> None:
    (root / "proc").mkdir(exist_ok=True)
    (root / "proc" / "stat").write_text(f"cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\ncpu0 1\ncpu1 1\n")


def _setup(root: Path, n: int) -> list[ContainerInfo]:
    _host(root, 100, 800)
    infos = []
    for i in range(n):
        _write(root, _cid(i), 1_000, 5_000 + i)
        infos.append(ContainerInfo(id=_cid(i), name=f"c{i}", image="i", status="running"))
    return infos


def _sampler(root: Path, clock: FakeClock, full_read_max: int, window: float) -> CgroupSampler:
    return CgroupSampler(
        root / "cg",
        root / "proc",
        clock=clock.monotonic,
        wall=clock.wall,
        full_read_max=full_read_max,
        sample_window=window,
    )


def test_few_containers_are_read_every_refresh_without_an_age(tmp_path: Path) -> None:
    infos = _setup(tmp_path, 4)
    clock = FakeClock()
    sampler = _sampler(tmp_path, clock, full_read_max=4, window=4.0)
    for step in range(3):
        clock.now += 1.0
        for i in range(4):
            _write(tmp_path, _cid(i), 1_000, 10_000 * (step + 1) + i)
        out = sampler.sample(infos, ENGINE)
        assert sampler.last_read_count == 4
        assert [c.memory_used_bytes for c in out] == [
            10_000 * (step + 1) + i - 1000 for i in range(4)
        ]
        assert all(c.stats_sampled_at is None for c in out)


def test_many_containers_are_each_read_within_the_window(tmp_path: Path) -> None:
    n, window = 12, 6.0
    infos = _setup(tmp_path, n)
    clock = FakeClock()
    sampler = _sampler(tmp_path, clock, full_read_max=2, window=window)
    read_at = dict.fromkeys(range(n), 0.0)
    counts = []
    for step in range(1, 16):
        clock.now += 1.0
        for i in range(n):  # every container's memory moves every refresh
            _write(tmp_path, _cid(i), 1_000, 100_000 * step + i)
        out = sampler.sample(infos, ENGINE)
        counts.append(sampler.last_read_count)
        for i, c in enumerate(out):
            assert c.stats_sampled_at is not None
            assert clock.wall() - c.stats_sampled_at <= window
            if c.stats_sampled_at == clock.wall():
                read_at[i] = clock.now
                assert c.memory_used_bytes == 100_000 * step + i - 1000  # read now
            else:
                assert c.memory_used_bytes != 100_000 * step + i - 1000  # an older figure
        if step > window:
            assert all(clock.now - at < window for at in read_at.values())
    assert counts[0] == n
    assert counts[1:] == [max(2, math.ceil(n * 1.0 / window))] * 14


def test_a_new_or_restarted_container_is_read_at_once(tmp_path: Path) -> None:
    infos = _setup(tmp_path, 8)
    clock = FakeClock()
    sampler = _sampler(tmp_path, clock, full_read_max=2, window=100.0)
    for _ in range(3):
        clock.now += 1.0
        sampler.sample(infos, ENGINE)
    _write(tmp_path, _cid(99), 1_000, 77_000)
    newcomer = ContainerInfo(id=_cid(99), name="new", image="i", status="running")
    clock.now += 1.0
    out = sampler.sample([*infos, newcomer], ENGINE)
    assert out[-1].memory_used_bytes == 76_000
    assert out[-1].stats_sampled_at == clock.wall()
    # A restart (re-inspect) forgets the figures: the next refresh reads that container.
    stale = next(c for c in out[:-1] if c.stats_sampled_at != clock.wall())
    index = out.index(stale)
    _write(tmp_path, _cid(index), 1_000, 55_000)
    sampler.inspected(stale.id, None)
    clock.now += 1.0
    out = sampler.sample([*infos, newcomer], ENGINE)
    assert out[index].memory_used_bytes == 54_000
    assert out[index].stats_sampled_at == clock.wall()


def test_cpu_percent_over_a_longer_interval_is_the_docker_formula(tmp_path: Path) -> None:
    n = 6
    infos = _setup(tmp_path, n)
    clock = FakeClock()
    sampler = _sampler(tmp_path, clock, full_read_max=1, window=6.0)  # one per refresh
    usage = dict.fromkeys(range(n), 1_000)
    busy, idle = 100, 800
    seen: dict[int, tuple[int, int, int]] = {}  # container -> (usage, host ticks, step) when read
    checked = 0
    for step in range(1, 16):
        clock.now += 1.0
        busy, idle = busy + 150, idle + 50  # host: 200 ticks per refresh over 2 CPUs
        _host(tmp_path, busy, idle)
        for i in range(n):
            usage[i] += 300_000 * (i + 1)  # container i: 0.3 * (i + 1) CPU-seconds per refresh
            _write(tmp_path, _cid(i), usage[i], 5_000)
        out = sampler.sample(infos, ENGINE)
        for i, c in enumerate(out):
            if c.stats_sampled_at != clock.wall():
                continue
            if i in seen:
                prev_usage, prev_host, prev_step = seen[i]
                cpu_ns = (usage[i] - prev_usage) * 1_000
                system_ns = (busy + idle - prev_host) * 1e9 / CLK_TCK
                expected = cpu_ns / system_ns * CPUS * 100.0
                assert c.cpu_percent is not None
                assert math.isclose(c.cpu_percent, expected, rel_tol=1e-9), (i, step)
                checked += step - prev_step >= 3
            seen[i] = (usage[i], busy + idle, step)
    assert checked, "no container was sampled over a longer interval"


def test_real_containers_read_in_turn_carry_their_age(
    docker_engine: Any, run_container: Any, free_run_id: str
) -> None:
    """Through the Docker source, on real cgroup files: one container a refresh, all aged <= 4 s."""
    from gputui.collect.docker.source import DockerSource

    started = [run_container(["sleep", "300"], mem_limit="32m") for _ in range(4)]
    ids = {c.id for c in started}
    source = DockerSource(label=f"gputui-test={free_run_id}")
    clock = FakeClock()
    old = source._sampler  # the source's sampler, with a threshold and clock for this test
    source._sampler = _sampler_at(old.cgroup_root, old.proc_root, clock)
    try:
        counts = []
        for _ in range(8):
            clock.now += 1.0
            reading = source.read()
            assert reading.status.ok, reading.status
            counts.append(source._sampler.last_read_count)
            mine = [c for c in reading.containers if c.id in ids]
            assert len(mine) == 4
            for info in mine:
                assert info.memory_limit_bytes == 32 * 1024 * 1024
                assert info.memory_used_bytes is not None
                assert info.stats_sampled_at is not None
                assert clock.wall() - info.stats_sampled_at <= 4.0
        assert counts[0] == 4
        assert counts[1:] == [1] * 7
        newcomer = run_container(["sleep", "300"], mem_limit="16m")
        clock.now += 1.0
        fresh = next(c for c in _wait_listed(source, newcomer.id).containers if c.id == newcomer.id)
        assert fresh.stats_sampled_at == clock.wall()
        assert fresh.memory_limit_bytes == 16 * 1024 * 1024
    finally:
        source.close()


def _sampler_at(cgroup_root: Path, proc_root: Path, clock: FakeClock) -> CgroupSampler:
    return CgroupSampler(
        cgroup_root,
        proc_root,
        clock=clock.monotonic,
        wall=clock.wall,
        full_read_max=1,
        sample_window=4.0,
    )


def _wait_listed(source: Any, container_id: str) -> Any:
    """The first reading that lists ``container_id`` (the engine's event may lag the start)."""
    deadline = time.monotonic() + 10
    while True:
        reading = source.read()
        if any(c.id == container_id for c in reading.containers):
            return reading
        assert time.monotonic() < deadline, "the new container was never listed"
        time.sleep(0.1)
