"""Sending a signal to a GPU process: the one path by which gputui acts on a process.

Every check that keeps a signal from hitting the wrong process is here: PIDs that are not one
process, init, kthreadd, gputui and its parent, kernel threads, zombies, a PID namespace in
which NVML's host PIDs name other processes, and a reused PID. The process is pinned with a
pidfd before it is checked, so a PID reused between the checks and the signal is never hit.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

from gputui.collect.linux import psutil_facts
from gputui.collect.linux.fileio import read_capped
from gputui.collect.linux.proc_parse import (
    MAX_STAT_BYTES,
    PF_KTHREAD,
    PID_MAX_LIMIT,
    ProcStat,
    parse_stat,
    same_start,
)


def send_signal(
    pid: int,
    signum: int,
    start_time: float | None,
    *,
    host_pid_namespace: Callable[[], bool | None],
    proc_root: Path = Path("/proc"),
) -> str | None:
    """Send ``signum`` to ``pid`` if it is still the process that started at ``start_time``.

    Refused: PIDs that are not one process (0, negatives), PID 1, gputui itself and its
    parent, kernel threads, any PID while gputui is not known to be in the host PID namespace
    (NVML's host PIDs would name other processes here), and a process whose start time is
    unknown (a reused PID could not be told apart). The process is pinned with a pidfd
    before it is checked, so a PID reused between the checks and the signal is never hit.

    Args:
        pid: Host PID.
        signum: Signal number, e.g. ``signal.SIGTERM``.
        start_time: The start time the caller saw (``ProcessInfo.start_time``).
        host_pid_namespace: Whether gputui is in the host PID namespace (None: unknown); asked
            only once the PID and the signal number are valid.
        proc_root: Where the process's ``stat`` is read (a prepared root falls back to the
            real ``/proc`` for a PID it lacks).

    Returns:
        None on success, else a one-line reason.
    """
    if pid <= 0:
        # os.kill(0 or negative) would signal whole process groups.
        return f"refusing to signal PID {pid}"
    if pid > PID_MAX_LIMIT:
        return f"refusing to signal PID {pid}: above the kernel's PID limit"
    if not 0 <= signum < signal.NSIG:
        # os.kill truncates large numbers to a C int: 2**32 + 9 would arrive as SIGKILL.
        return f"cannot send signal {signum} to process {pid}: not a signal number"
    # The namespace first: outside the host's, even "PID 1" or "PID 2" are not the
    # processes the numbers say, and that is the reason to give.
    host = host_pid_namespace()
    if host is not True:
        why = (
            "gputui is not in the host PID namespace"
            if host is False
            else "gputui cannot tell whether it is in the host PID namespace"
        )
        return f"refusing to signal PID {pid}: {why}, so NVML's PID may name another process"
    refusal = _protected(pid)
    if refusal is not None:
        return refusal
    if start_time is None:
        return (
            f"refusing to signal PID {pid}: its start time is unknown, so a reused PID "
            "cannot be ruled out"
        )
    try:
        pidfd: int | None = os.pidfd_open(pid)
    except ProcessLookupError:
        return f"process {pid} has already exited"
    except OSError:
        pidfd = None  # kernel before 5.3: os.kill after the checks, a narrower race
    try:
        return _checked_send(pid, signum, start_time, pidfd, proc_root)
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _checked_send(
    pid: int, signum: int, start_time: float, pidfd: int | None, proc_root: Path
) -> str | None:
    """The checks that need the process itself, then the signal (through ``pidfd``)."""
    stat = _signal_stat(proc_root, pid)
    try:
        if not same_start(psutil_facts.create_time(pid), start_time):
            return f"PID {pid} now belongs to another process"
        if stat is None:
            return f"refusing to signal PID {pid}: cannot read /proc/{pid}/stat"
        if stat.flags & PF_KTHREAD or stat.ppid == 2:
            return f"refusing to signal PID {pid}: it is a kernel thread"
        if stat.state == "Z":
            return f"process {pid} has already exited (a zombie its parent has not reaped)"
        if pidfd is not None:
            signal.pidfd_send_signal(pidfd, signum)
        else:
            os.kill(pid, signum)
    except ProcessLookupError:
        return f"process {pid} has already exited"
    except PermissionError:
        return (
            f"permission denied: process {pid} belongs to {psutil_facts.owner(pid)} "
            "(run gputui as that user or root)"
        )
    except OSError as exc:  # Any other errno: the caller wants a reason, not a traceback.
        return f"cannot send signal {signum} to process {pid}: {exc.strerror or exc}"
    return None


def _signal_stat(proc_root: Path, pid: int) -> ProcStat | None:
    """``<proc_root>/<pid>/stat`` (the real one when a prepared root lacks it)."""
    data, _ = read_capped(proc_root / str(pid) / "stat", MAX_STAT_BYTES)
    if data is None and proc_root != Path("/proc"):
        data, _ = read_capped(f"/proc/{pid}/stat", MAX_STAT_BYTES)
    return None if data is None else parse_stat(data.decode(errors="replace"))


def _protected(pid: int) -> str | None:
    """Why ``pid`` must never be signalled from gputui, or None."""
    if pid == 1:
        return "refusing to signal PID 1: it is init (the whole system or container stops)"
    if pid == 2:
        return "refusing to signal PID 2: it is kthreadd, a kernel thread"
    if pid == os.getpid():
        return f"refusing to signal PID {pid}: it is gputui itself"
    if pid == os.getppid():
        return f"refusing to signal PID {pid}: it is gputui's parent process"
    return None
