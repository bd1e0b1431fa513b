"""The cgroup sampler keeps and closes its containers' file descriptors; the targeted memory.stat
lookup."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.collect.linux.cgroup_usage import (
    CgroupSampler,
    early_cgroup_cpu,
    keyed_value,
    parse_keyed,
)
from gputui.model.containers import ContainerInfo, EngineInfo

CID = "c3da37be2142bda84fb414cdb8eb48548f2b3b6b9c24da6b37de18a260e967d8"
CID2 = "9" * 64


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _v2_root(root: Path, usage_usec: int, current: int) -> None:
    folder = root / "system.slice" / f"docker-{CID}.scope"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cpu.stat").write_text(
        f"usage_usec {usage_usec}\nnr_periods 4\nnr_throttled 1\nthrottled_usec 500\n"
    )
    (folder / "memory.current").write_text(f"{current}\n")
    (folder / "memory.stat").write_text("anon 5\nfile 9\ninactive_file 1000\nactive_file 3\n")
    (folder / "memory.max").write_text("max\n")


def test_sampler_keeps_then_closes_a_containers_files(tmp_path: Path) -> None:
    cgroup_root, proc_root = tmp_path / "cg", tmp_path / "proc"
    proc_root.mkdir()
    (proc_root / "stat").write_text("cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 1\ncpu1 1\n")
    _v2_root(cgroup_root, 1_000, 5_000)
    engine = EngineInfo(cgroup_version="2", cgroup_driver="systemd", host_memory_bytes=1 << 30)
    info = ContainerInfo(id=CID, name="c", image="i", status="running", pid=None)
    sampler = CgroupSampler(cgroup_root, proc_root)
    baseline = _open_fds()
    [first] = sampler.sample([info], engine)
    assert first.memory_used_bytes == 4_000  # current minus inactive_file
    assert first.memory_limit_bytes == 1 << 30
    assert (first.cpu_periods, first.cpu_throttled_periods) == (4, 1)
    assert len(sampler.files) == 5  # /proc/stat, cpu.stat, memory.current, .stat, .max: v2
    assert _open_fds() == baseline + 5
    _v2_root(cgroup_root, 2_000, 7_000)  # files rewritten in place
    (proc_root / "stat").write_text("cpu  200 0 200 1600 0 0 0 0 0 0\ncpu0 1\ncpu1 1\n")
    [second] = sampler.sample([info], engine)
    assert second.memory_used_bytes == 6_000
    assert second.cpu_percent is not None
    stopped = ContainerInfo(id=CID, name="c", image="i", status="exited", pid=None)
    sampler.sample([stopped], engine)  # nothing running: nothing kept
    assert len(sampler.files) == 0 and _open_fds() == baseline
    sampler.sample([info], engine)
    sampler.inspected(CID, None)  # a restart: its cgroup files are looked up again
    assert len(sampler.files) == 1  # only /proc/stat is left
    sampler.clear()
    assert len(sampler.files) == 0 and _open_fds() == baseline


def _cpu_stat(folder: Path, usage_usec: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cpu.stat").write_text(f"usage_usec {usage_usec}\n")


def test_the_start_up_walk_reads_only_cgroups_that_name_a_container(tmp_path: Path) -> None:
    root, proc = tmp_path / "cg", tmp_path / "proc"
    proc.mkdir()
    (proc / "stat").write_text("cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 1\ncpu1 1\n")
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpu memory\n")  # v2
    _cpu_stat(root / "system.slice" / f"docker-{CID}.scope", 1_000)
    _cpu_stat(root / "system.slice" / f"docker-{CID}.mount", 5)  # a look-alike unit
    _cpu_stat(root / "system.slice" / "sshd.service", 7)
    podman = root / "user.slice/user-1000.slice/user@1000.service/user.slice"
    _cpu_stat(podman / f"libpod-{CID2}.scope", 30)
    _cpu_stat(podman / f"libpod-{CID2}.scope" / "container", 20)  # podman's own child
    _cpu_stat(podman / f"libpod-{CID2}.scope" / "container" / "deeper", 10)
    start = early_cgroup_cpu(root, proc)
    assert start is not None and start.system_ns == 1000 * 10**9 // os.sysconf("SC_CLK_TCK")
    assert dict(start.usage_ns) == {
        root / "system.slice" / f"docker-{CID}.scope": 1_000_000,
        podman / f"libpod-{CID2}.scope": 30_000,
        podman / f"libpod-{CID2}.scope" / "container": 20_000,
    }
    # Bounded: one directory read (the root) finds nothing below its children.
    walk = early_cgroup_cpu(root, proc, max_dirs=1)
    assert walk is not None and dict(walk.usage_ns) == {}
    (proc / "stat").write_text("")
    assert early_cgroup_cpu(root, proc) is None  # no host CPU time: nothing to measure against


def test_the_walks_budget_counts_the_counters_it_reads(tmp_path: Path) -> None:
    root, proc = tmp_path / "cg", tmp_path / "proc"
    proc.mkdir()
    (proc / "stat").write_text("cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 1\n")
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpu\n")
    for digit in "123":
        _cpu_stat(root / "docker" / (digit * 64), 1)
    start = early_cgroup_cpu(root, proc, max_dirs=4)  # the root, docker/, two counters
    assert start is not None and len(start.usage_ns) == 2


def test_a_one_shot_takes_a_containers_first_cpu_sample_from_start_up(tmp_path: Path) -> None:
    cgroup_root, proc_root = tmp_path / "cg", tmp_path / "proc"
    proc_root.mkdir()
    (proc_root / "stat").write_text("cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 1\ncpu1 1\n")
    _v2_root(cgroup_root, 1_000, 5_000)
    (cgroup_root / "cgroup.controllers").write_text("cpu memory\n")
    early = early_cgroup_cpu(cgroup_root, proc_root)
    assert early is not None
    start = dataclasses.replace(early, taken_at=100.0)
    # Later: 50 ms of CPU in 1,000 ticks of two CPUs' host time: 1 %.
    _v2_root(cgroup_root, 51_000, 5_000)
    (proc_root / "stat").write_text("cpu  200 0 200 1600 0 0 0 0 0 0\ncpu0 1\ncpu1 1\n")
    engine = EngineInfo(cgroup_version="2", cgroup_driver="systemd", host_memory_bytes=1 << 30)
    info = ContainerInfo(id=CID, name="c", image="i", status="running", pid=None)
    slept: list[float] = []
    sampler = CgroupSampler(cgroup_root, proc_root, clock=lambda: 100.03, sleep=slept.append)
    [got] = sampler.sample([info], engine, settle_s=0.1, start=start)
    assert got.cpu_percent == pytest.approx(1.0)
    assert slept == [pytest.approx(0.07)]  # only the rest of the window since start-up

    # A container the walk did not see (started since) gets the two samples and the whole wait.
    other = ContainerInfo(id=CID2, name="d", image="i", status="running", pid=None)
    _v2_root(cgroup_root, 51_000, 5_000)
    folder = cgroup_root / "system.slice" / f"docker-{CID}.scope"
    folder.rename(cgroup_root / "system.slice" / f"docker-{CID2}.scope")
    slept.clear()
    [late] = CgroupSampler(cgroup_root, proc_root, clock=lambda: 100.5, sleep=slept.append).sample(
        [other], engine, settle_s=0.1, start=start
    )
    assert slept == [0.1] and late.cpu_percent is None  # the counters did not move


lines = st.lists(
    st.tuples(
        st.sampled_from(["inactive_file", "total_inactive_file", "file", "inactive_filex", ""]),
        st.sampled_from([" ", "  ", "\t", ""]),
        st.one_of(st.integers(0, 2**64).map(str), st.sampled_from(["", "x", "-1", " 7 "])),
    ),
    max_size=12,
)


@settings(max_examples=300)
@given(lines, st.booleans())
def test_keyed_value_is_parse_keyed_for_one_key(
    items: list[tuple[str, str, str]], end: bool
) -> None:
    text = "\n".join(f"{k}{sep}{v}" for k, sep, v in items) + ("\n" if end else "")
    for key in ("inactive_file", "total_inactive_file"):
        assert keyed_value(text, key) == parse_keyed(text).get(key)
