"""Host figures (as psutil gives them) and visibility: host PID namespace, cgroup namespace,
hidepid, from the real /proc and from prepared roots.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gputui.collect.linux.proc_reader import ProcSource
from gputui.model.processes import Visibility
from tests.support.procfs import as_nobody

DOCKER_ID = "c3da37be2142bda84fb414cdb8eb48548f2b3b6b9c24da6b37de18a260e967d8"


def _unused_pid() -> int:
    # PIDs are always below pid_max, so pid_max itself can never exist.
    return int(Path("/proc/sys/kernel/pid_max").read_text())


def _write_proc(root: Path, pid: int, cgroup: str | None, status: str | None) -> None:
    (root / str(pid)).mkdir(parents=True, exist_ok=True)
    if cgroup is not None:
        (root / str(pid) / "cgroup").write_text(cgroup)
    if status is not None:
        (root / str(pid) / "status").write_text(status)


# --- hidepid --------------------------------------------------------------------------------------


def _mountinfo(options: str) -> str:
    return (
        "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
        f"23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw{options}\n"
        "24 22 0:22 / /sys rw,relatime shared:7 - sysfs sysfs rw\n"
    )


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory another user can read (pytest's tmp_path is private to its owner)."""
    path = Path(tempfile.mkdtemp(prefix="gputui-proc-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def _hidepid_root(base: Path, options: str) -> Path:
    """A prepared /proc as a user sees it under hidepid: no kthreadd, no PID 1, no ns link."""
    root = base / "proc"
    (root / "self").mkdir(parents=True)
    (root / "self" / "mountinfo").write_text(_mountinfo(options))
    for path in (root, root / "self"):
        path.chmod(0o755)
    (root / "self" / "mountinfo").chmod(0o644)
    return root


#: Mount options of /proc → the hidepid value gputui (as nobody) reports.
HIDEPID_CASES = {
    ",hidepid=2": "2",
    ",hidepid=invisible,gid=4242": "invisible",
    "": None,
    ",hidepid=0": None,
    ",hidepid=2,gid=65534": None,  # nobody's own group is exempt through gid=
}


# --- visibility() -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("comm", "init_cgroup", "expected"),
    [
        ("kthreadd\n", "0::/\n", Visibility(True, False)),
        ("kthreadd\n", "0::/../../..\n", Visibility(True, True)),
        ("kthreadd\n", None, Visibility(True, None)),
        (None, "0::/\n", Visibility(False, None)),  # PID 1 is not the host's init here
        (None, "0::/../init.scope\n", Visibility(False, True)),
        ("bash\n", "0::/\n", Visibility(False, None)),  # PID 2 is an ordinary process
    ],
)
def test_visibility_from_proc_root(
    tmp_path: Path, comm: str | None, init_cgroup: str | None, expected: Visibility
) -> None:
    if comm is not None:
        (tmp_path / "2").mkdir()
        (tmp_path / "2" / "comm").write_text(comm)
    if init_cgroup is not None:
        _write_proc(tmp_path, 1, init_cgroup, None)
    assert ProcSource(tmp_path).visibility() == expected


def test_private_cgroup_namespace_seen_in_a_read_process(tmp_path: Path) -> None:
    (tmp_path / "2").mkdir()
    (tmp_path / "2" / "comm").write_text("kthreadd\n")
    _write_proc(tmp_path, 1, "0::/\n", None)
    fake = _unused_pid()
    _write_proc(tmp_path, fake, f"0::../../docker-{DOCKER_ID}.scope\n", "NSpid:\t4\n")
    source = ProcSource(tmp_path)
    assert source.visibility() == Visibility(True, False)
    assert source.read([fake])[fake].container_id == DOCKER_ID
    assert source.visibility() == Visibility(True, True)


def test_host_pid_namespace_answer_is_cached(tmp_path: Path) -> None:
    (tmp_path / "2").mkdir()
    (tmp_path / "2" / "comm").write_text("kthreadd\n")
    source = ProcSource(tmp_path)
    assert source.visibility().host_pid_namespace is True
    (tmp_path / "2" / "comm").unlink()
    assert source.visibility().host_pid_namespace is True


def test_visibility_of_the_real_proc() -> None:
    comm = Path("/proc/2/comm")
    expected = comm.exists() and comm.read_text().strip() == "kthreadd"
    assert ProcSource().visibility().host_pid_namespace is expected


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


def test_hidepid_seen_from_a_prepared_proc_root(shared_dir: Path) -> None:
    roots = {
        options: str(_hidepid_root(shared_dir / str(n), options))
        for n, options in enumerate(HIDEPID_CASES)
    }
    for base in {Path(r).parent for r in roots.values()}:
        base.chmod(0o755)

    def look() -> dict[str, list[object]]:
        seen: dict[str, list[object]] = {}
        for options, root in roots.items():
            visibility = ProcSource(root).visibility()
            seen[options] = [visibility.host_pid_namespace, visibility.proc_hidepid]
        return seen

    seen = as_nobody(look)
    assert isinstance(seen, dict)
    for options, hidepid in HIDEPID_CASES.items():
        # Not "outside the host PID namespace" under hidepid: it hides kthreadd too, so the
        # namespace is unknown; without it a missing kthreadd still means another namespace.
        assert seen[options] == [None if hidepid else False, hidepid], options
    # Root sees every process whatever the options.
    assert ProcSource(roots[",hidepid=2"]).visibility().proc_hidepid is None
