"""The pure /proc parsers: stat, cmdline, /proc/stat CPU times, meminfo; bounded and never
raising.
"""

from __future__ import annotations

from typing import Any

import psutil
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.collect.linux.membership import parse_nspid_fields
from gputui.collect.linux.proc_parse import (
    MAX_STAT_BYTES,
    busy_percent,
    container_pid,
    cpu_times,
    parse_cmdline,
    parse_meminfo,
    parse_stat,
)
from gputui.collect.linux.proc_reader import MAX_CMDLINE_BYTES

FAST = settings(max_examples=40)


# --- stat --------------------------------------------------------------------------------------


def _stat(comm: str = "x", fields: list[str] | None = None) -> str:
    values = fields if fields is not None else ["S", "1"] + ["0"] * 50
    return f"42 ({comm}) {' '.join(values)}\n"


def test_parse_stat_counts_fields_after_the_last_parenthesis() -> None:
    from gputui.collect.linux.proc_parse import parse_stat

    # A command name may contain spaces and parentheses: fields are counted from the last ')'.
    rest = "S 1 2 3 4 5 6 7 8 9 10 110 40 0 0 20 0 1 0 987654 1000 2048 0"
    parsed = parse_stat(f"4242 (evil) name (x)) {rest}")
    assert parsed is not None
    assert (parsed.state, parsed.cpu_ticks, parsed.start_ticks, parsed.rss_pages) == (
        "S",
        150,
        987654,
        2048,
    )
    assert parse_stat("garbage") is None
    assert parse_stat("1 (x) S 1 2") is None


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


@FAST
@given(st.integers(MAX_CMDLINE_BYTES, 4 * MAX_CMDLINE_BYTES))
def test_cmdline_parse_of_a_cut_read_stays_within_the_cut(length: int) -> None:
    data = (b"prog\0" + b"a " * length + b"\0")[:MAX_CMDLINE_BYTES]
    args = parse_cmdline(data, cut=True)
    assert args[0] == "prog"  # still split at the NULs, though the trailing one was cut off
    assert sum(len(a) for a in args) <= MAX_CMDLINE_BYTES


# --- the in-container PID at the depth of the container's PID namespace -----------------------


def _nspid(line: str) -> tuple[int, ...]:
    fields = parse_nspid_fields(f"Name:\tx\nNSpid:\t{line}\n")
    assert fields is not None
    return fields


@pytest.mark.parametrize(
    ("own", "ancestors", "expected"),
    [
        ("4242", [], 4242),  # a host process: its host PID
        ("4242\t7", [], 7),  # `docker exec`'d (its parent, the shim, is outside)
        ("4242\t7", ["4200\t1"], 7),  # started by the container's init
        ("4242\t10\t1", ["4241\t9", "4200\t1"], 10),  # below `unshare -fp` in the container
        ("4242\t10\t2", ["4241\t10\t1", "4240\t9", "4200\t1"], 10),  # the sub-namespace's second
        ("4242\t10\t3\t1", ["4241\t10\t3\t1", "4240\t10\t2", "4239\t9"], 10),  # two levels below
        ("4242\t1", ["4200"], 4242),  # a sub-namespace in a container sharing the host's
        ("4242\t10\t1", [], 1),  # no ancestor known: the last field, as before
    ],
)
def test_container_pid_is_the_field_at_the_containers_depth(
    own: str, ancestors: list[str], expected: int
) -> None:
    assert container_pid(_nspid(own), [_nspid(a) for a in ancestors]) == expected


def test_container_pid_of_nothing_is_none() -> None:
    assert container_pid((), []) is None
    assert container_pid((), [(1,)]) is None
