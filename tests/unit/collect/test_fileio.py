"""Raw and capped reads, and KeptFiles: descriptors kept open and read again with pread."""

from __future__ import annotations

import os
import resource
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.collect.linux.fileio import (
    WANTED_FDS,
    KeptFiles,
    fd_budget,
    raise_fd_limit,
    read_capped,
)
from gputui.collect.linux.proc_reader import kept_fd_budget

FAST = settings(max_examples=40)


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


# --- reads -------------------------------------------------------------------------------------


@FAST
@given(st.integers(0, 300_000), st.integers(1, 70_000))
def test_read_capped_reads_at_most_the_limit(size: int, limit: int) -> None:
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"gputui-capped-{os.getpid()}"
    try:
        path.write_bytes(b"x" * size)
        data, error = read_capped(path, limit)
        assert error == 0
        assert data == b"x" * min(size, limit)
    finally:
        path.unlink()


def test_read_capped_reports_the_errno(tmp_path: Path) -> None:
    assert read_capped(tmp_path / "absent", 10) == (None, 2)


def test_kept_file_is_read_again_from_the_start(tmp_path: Path) -> None:
    path = tmp_path / "memory.current"
    path.write_text("100\n")
    files = KeptFiles(8)
    baseline = _open_fds()
    assert files.read("a", path) == "100\n"
    assert len(files) == 1 and _open_fds() == baseline + 1
    path.write_text("20\n")  # same inode, new contents: pread at 0 sees them
    assert files.read("a", path) == "20\n"
    assert len(files) == 1
    files.close_owner("a")
    assert len(files) == 0 and _open_fds() == baseline


def test_kept_files_stop_at_the_limit(tmp_path: Path) -> None:
    paths = [tmp_path / f"f{i}" for i in range(5)]
    for i, path in enumerate(paths):
        path.write_text(f"{i}\n")
    files = KeptFiles(2)
    for _ in range(2):
        assert [files.read("a", p) for p in paths] == [f"{i}\n" for i in range(5)]
        assert len(files) == 2
    assert files.read("a", tmp_path / "absent") is None
    files.close()
    assert len(files) == 0
    assert 0 < fd_budget(8192, 4) <= 8192


@pytest.mark.skipif(
    os.geteuid() != 0 or not Path("/sys/fs/cgroup/memory").is_dir(),
    reason="needs root and the cgroup v1 memory controller",
)
def test_removed_cgroup_is_opened_afresh() -> None:
    # A kept descriptor of a removed cgroup fails (ENODEV): the directory made again under the
    # same name is read, never the old one's numbers.
    folder = Path("/sys/fs/cgroup/memory") / f"gputui-test-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    files = KeptFiles(8)
    try:
        assert files.read("c", folder / "memory.limit_in_bytes") is not None
        folder.rmdir()
        assert files.read("c", folder / "memory.limit_in_bytes") is None
        assert len(files) == 0
        folder.mkdir()
        (folder / "memory.limit_in_bytes").write_text("4096")
        assert files.read("c", folder / "memory.limit_in_bytes") == "4096\n"
    finally:
        files.close()
        if folder.exists():
            folder.rmdir()


@pytest.fixture
def low_fd_limit() -> Iterator[tuple[int, int]]:
    """The soft descriptor limit set to 1,024 (as login sessions start), restored after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 1024:
        pytest.skip(f"the hard descriptor limit ({hard}) leaves nothing to raise")
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
    try:
        yield 1024, hard
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_soft_descriptor_limit_is_raised_toward_the_hard_one(
    low_fd_limit: tuple[int, int],
) -> None:
    _, hard = low_fd_limit
    before = kept_fd_budget()
    expected = WANTED_FDS if hard == resource.RLIM_INFINITY else min(hard, WANTED_FDS)
    assert raise_fd_limit() == (1024, expected)
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == (expected, hard)
    assert kept_fd_budget() > before  # the /proc reader built now keeps more
    assert raise_fd_limit() is None  # already there: nothing asked


def test_the_soft_descriptor_limit_is_never_lowered(low_fd_limit: tuple[int, int]) -> None:
    assert raise_fd_limit(wanted=512) is None
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == 1024
