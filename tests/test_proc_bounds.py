"""Everything read from /proc and cgroup files is bounded: oversized input costs no more."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.collect.linux.fileio import read_capped
from gputui.collect.linux.membership import (
    MAX_CGROUP_CHARS,
    MAX_MOUNTINFO_CHARS,
    MAX_NSPID_FIELDS,
    MAX_STATUS_CHARS,
    ProcMount,
    parse_cgroup,
    parse_nspid,
    parse_nspid_fields,
    parse_proc_mount,
)
from gputui.collect.linux.proc_parse import MAX_STAT_BYTES, parse_cmdline, parse_stat
from gputui.collect.linux.proc_reader import MAX_CMDLINE_BYTES, ProcSource

DOCKER_ID = "c3da37be2142bda84fb414cdb8eb48548f2b3b6b9c24da6b37de18a260e967d8"
CONTAINER_LINE = f"0::/system.slice/docker-{DOCKER_ID}.scope\n"
FAST = settings(max_examples=40, deadline=None)

#: Text that looks like the real thing, padded with hostile bulk.
junk = st.text(alphabet="0123456789abcdef:/-. \n\t", max_size=200)


# --- NSpid ------------------------------------------------------------------------------------


@FAST
@given(st.integers(MAX_NSPID_FIELDS + 1, 5000), st.integers(1, 2**22))
def test_nspid_longer_than_any_kernel_writes_is_refused(count: int, pid: int) -> None:
    status = "Name:\tx\nNSpid:\t" + "\t".join([str(pid)] * count) + "\n"
    assert parse_nspid_fields(status) is None
    assert parse_nspid(status) is None


@FAST
@given(st.lists(st.integers(1, 2**22), min_size=1, max_size=MAX_NSPID_FIELDS))
def test_nspid_within_the_nesting_limit_is_read(pids: list[int]) -> None:
    status = "NSpid:\t" + "\t".join(map(str, pids)) + "\n"
    assert parse_nspid_fields(status) == tuple(pids)
    assert parse_nspid(status) == pids[-1]


@FAST
@given(junk)
def test_nspid_after_the_status_size_limit_is_not_looked_for(padding: str) -> None:
    status = "Groups:\t" + "1 " * (MAX_STATUS_CHARS // 2) + padding + "\nNSpid:\t7\n"
    assert parse_nspid(status) is None


# --- cgroup ------------------------------------------------------------------------------------


@FAST
@given(junk, st.integers(65, 400))
def test_cgroup_lines_beyond_the_limit_are_ignored(padding: str, lines: int) -> None:
    text = "".join(f"{n}:name=x{n}:/{padding.strip()}\n" for n in range(lines)) + CONTAINER_LINE
    assert parse_cgroup(text) is None
    assert parse_cgroup(CONTAINER_LINE) is not None


@FAST
@given(st.integers(4097, 50_000))
def test_cgroup_path_longer_than_path_max_is_skipped(length: int) -> None:
    long_path = f"0::/{'a' * length}/docker-{DOCKER_ID}.scope\n"
    assert parse_cgroup(long_path) is None


@FAST
@given(junk)
def test_cgroup_text_beyond_the_size_limit_is_ignored(padding: str) -> None:
    text = "1:cpu:/" + "x" * MAX_CGROUP_CHARS + padding + "\n" + CONTAINER_LINE
    assert parse_cgroup(text) is None


# --- stat --------------------------------------------------------------------------------------


def _stat(comm: str = "x", fields: list[str] | None = None) -> str:
    values = fields if fields is not None else ["S", "1"] + ["0"] * 50
    return f"42 ({comm}) {' '.join(values)}\n"


@FAST
@given(st.integers(21, 400))
def test_stat_numbers_longer_than_64_bits_are_garbage(digits: int) -> None:
    values = ["S", "1"] + ["0"] * 50
    values[19] = "9" * digits  # start time
    assert parse_stat(_stat(fields=values)) is None
    values[19] = "9" * 20
    assert parse_stat(_stat(fields=values)) is not None


@FAST
@given(st.integers(MAX_STAT_BYTES, 100_000))
def test_oversized_stat_is_refused(length: int) -> None:
    assert parse_stat(_stat(comm="c" * length)) is None
    assert parse_stat(_stat(comm="c" * 64)) is not None


@FAST
@given(st.lists(st.sampled_from(["-1", "+3", "1e3", "٣", "0x10", ""]), min_size=1, max_size=3))
def test_stat_signs_and_non_ascii_digits_are_garbage(bad: list[str]) -> None:
    values = ["S", "1"] + ["0"] * 50
    values[11] = bad[0] or "-"
    assert parse_stat(_stat(fields=values)) is None


# --- mountinfo ---------------------------------------------------------------------------------

PROC_LINE = "23 22 0:21 / /proc rw,nosuid - proc proc rw,hidepid=2\n"


@FAST
@given(junk)
def test_mountinfo_beyond_the_size_limit_is_ignored(padding: str) -> None:
    filler = "1 1 0:1 / /x rw - tmpfs tmpfs rw\n"
    text = filler * (MAX_MOUNTINFO_CHARS // len(filler) + 1) + padding + "\n" + PROC_LINE
    assert parse_proc_mount(text) is None
    assert parse_proc_mount(PROC_LINE) == ProcMount("2", None)


@FAST
@given(st.integers(17, 10_000), st.integers(11, 500))
def test_mountinfo_option_values_are_bounded(value_length: int, gid_digits: int) -> None:
    options = f"rw,hidepid={'v' * value_length},gid={'9' * gid_digits}"
    text = f"23 22 0:21 / /proc rw - proc proc {options}\n"
    mount = parse_proc_mount(text)
    assert mount is not None
    assert mount.hidepid is not None and len(mount.hidepid) == 16
    assert mount.gid is None  # more digits than any gid: ignored, not converted


@FAST
@given(st.text(max_size=2000))
def test_mountinfo_parser_never_raises(text: str) -> None:
    mount = parse_proc_mount(text)
    assert mount is None or isinstance(mount, ProcMount)


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


@FAST
@given(st.integers(MAX_CMDLINE_BYTES, 4 * MAX_CMDLINE_BYTES))
def test_cmdline_parse_of_a_cut_read_stays_within_the_cut(length: int) -> None:
    data = (b"prog\0" + b"a " * length + b"\0")[:MAX_CMDLINE_BYTES]
    args = parse_cmdline(data, cut=True)
    assert args[0] == "prog"  # still split at the NULs, though the trailing one was cut off
    assert sum(len(a) for a in args) <= MAX_CMDLINE_BYTES


def test_huge_command_line_of_a_live_process_is_cut() -> None:
    # Three arguments just under one argument's kernel limit: 384 KiB of command line.
    big = ["A" * (MAX_CMDLINE_BYTES - 16)] * 3
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(30)", *big],
        stdout=subprocess.PIPE,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        info = ProcSource().read([child.pid])[child.pid]
        assert info.command is not None
        assert info.command.startswith(f"{sys.executable} -c import time")
        assert len(info.command) <= MAX_CMDLINE_BYTES + 1
        assert info.command.endswith("A…")
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()


def test_oversized_cgroup_and_status_files_are_read_only_up_to_their_limit(
    tmp_path: Path,
) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        pid_dir = tmp_path / str(child.pid)
        pid_dir.mkdir()
        # 8 MiB of junk before the facts: a reader that takes it all in is the defect.
        (pid_dir / "cgroup").write_text("9:cpu:/" + "x" * (8 << 20) + "\n" + CONTAINER_LINE)
        (pid_dir / "status").write_text("Groups:\t" + "1 " * (4 << 20) + "\nNSpid:\t5\t1\n")
        started = time.monotonic()
        info = ProcSource(tmp_path).read([child.pid])[child.pid]
        assert time.monotonic() - started < 2.0
        assert info.exists
        assert (info.container_id, info.container_pid) == (None, None)
    finally:
        child.kill()
        child.wait()
