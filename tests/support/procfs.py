"""Figures read straight from /proc, as the truth the tests compare gputui with."""

from __future__ import annotations


def cpu_ticks(pid: int) -> int:
    """utime + stime of a process in clock ticks."""
    with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])
