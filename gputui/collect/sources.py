"""The interfaces every data source implements; the collector only talks to these.

Real sources (NVML, Docker, /proc) and stand-ins (scenario file, demo machine) implement the same
protocols, so the collector, the UI and the reports never know which one they have.
All methods may block and are called from the collector thread only, never from the UI thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from gputui.model import (
    ContainerReading,
    ExecResult,
    GpuProcess,
    GpuReading,
    HostStats,
    ProcessInfo,
    Visibility,
)


class GpuSource(Protocol):
    """Per-GPU gauges and GPU processes (NVML, a scenario file, or the demo machine)."""

    def read(self) -> GpuReading:
        """Read every GPU once. Initialises lazily on first call; never raises for NVML errors."""
        ...

    def close(self) -> None:
        """Release the library (idempotent)."""
        ...


class ProcessSource(Protocol):
    """Host facts about PIDs: command, user, CPU, RSS, container id, in-container PID."""

    def read(self, pids: Iterable[int]) -> dict[int, ProcessInfo]:
        """Facts for each PID; a missing PID maps to ``ProcessInfo(pid, exists=False)``."""
        ...

    def visibility(self) -> Visibility:
        """Whether this process sees the host PID and cgroup namespaces."""
        ...

    def host_stats(self) -> HostStats:
        """The host's CPU, load, memory and swap."""
        ...

    def send_signal(self, pid: int, signum: int, start_time: float | None) -> str | None:
        """Send ``signum`` to ``pid`` if it is still the process that started at ``start_time``.

        Returns:
            None on success, else a one-line reason (gone, PID reused, permission denied).
        """
        ...


class ContainerSource(Protocol):
    """Containers and engine facts (the Docker engine, or the demo machine)."""

    def read(self) -> ContainerReading:
        """The current container set; cheap when nothing changed (kept fresh by events).

        Returns within the source's own deadline however slow the engine is, and never raises:
        failures are a ``SourceStatus``. The collector still waits for it only so long.
        """
        ...

    def exec(self, container_id: str, argv: Sequence[str], timeout_s: float) -> ExecResult:
        """Run ``argv`` (no shell) inside a running container and capture its output.

        ``container_id`` is a full 64-hex id; the call returns by ``timeout_s`` with bounded
        output and leaves no thread reading behind.
        """
        ...

    def close(self) -> None:
        """Stop background threads and close the client (idempotent, never waits long)."""
        ...


@dataclass(frozen=True)
class HealthInputs:
    """What the other sources read, handed to the checks.

    Attributes:
        gpu: The latest NVML reading.
        containers: The latest Docker reading.
        processes: GPU processes joined with their containers.
        visibility: Whether gputui sees the host PID and cgroup namespaces.
    """

    gpu: GpuReading
    containers: ContainerReading
    processes: tuple[GpuProcess, ...]
    visibility: Visibility
