"""The cgroup sampler keeps and closes its containers' file descriptors; the targeted memory.stat
lookup."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.collect.linux.cgroup_usage import CgroupSampler, keyed_value, parse_keyed
from gputui.model.containers import ContainerInfo, EngineInfo

CID = "c3da37be2142bda84fb414cdb8eb48548f2b3b6b9c24da6b37de18a260e967d8"


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
