"""What gputui still asks psutil (the only module that imports it).

Everything else about processes and the host is read from ``/proc`` directly (with psutil's
formulas); psutil is imported inside these functions only, so reading and reporting never load
it: a signal's last checks (the process's start time and owner, in psutil's exact terms) and
the host's memory on a kernel whose ``meminfo`` lacks a field psutil computes otherwise.
"""

from __future__ import annotations


def create_time(pid: int) -> float:
    """The start time of ``pid`` as psutil gives it (seconds since the epoch).

    Raises:
        ProcessLookupError: The process is gone.
        PermissionError: Its files may not be read.
    """
    import psutil

    try:
        return float(psutil.Process(pid).create_time())
    except psutil.NoSuchProcess as exc:
        raise ProcessLookupError(pid) from exc
    except psutil.AccessDenied as exc:
        raise PermissionError(pid) from exc


def owner(pid: int) -> str:
    """User name (or uid) owning ``pid``, for messages; ``another user`` when unreadable."""
    import psutil

    try:
        return str(psutil.Process(pid).username())
    except (psutil.Error, OSError):
        return "another user"


def memory_and_swap() -> tuple[int, int, int, int]:
    """(total, available, swap total, swap used) in bytes, as psutil computes them."""
    import psutil

    vm, sw = psutil.virtual_memory(), psutil.swap_memory()
    return (int(vm.total), int(vm.available), int(sw.total), int(sw.total - sw.free))
