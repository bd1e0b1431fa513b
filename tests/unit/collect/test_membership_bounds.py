"""The cgroup, NSpid and mountinfo parsers look at a bounded part of their input: oversized
text costs no more than a normal file.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

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

DOCKER_ID = "c3da37be2142bda84fb414cdb8eb48548f2b3b6b9c24da6b37de18a260e967d8"
CONTAINER_LINE = f"0::/system.slice/docker-{DOCKER_ID}.scope\n"
FAST = settings(max_examples=40)

#: Text that looks like the real thing, padded with hostile bulk.
junk = st.text(alphabet="0123456789abcdef:/-. \n\t", max_size=200)


# --- mountinfo ---------------------------------------------------------------------------------

PROC_LINE = "23 22 0:21 / /proc rw,nosuid - proc proc rw,hidepid=2\n"


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
