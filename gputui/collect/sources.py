"""The interfaces every data source implements, and the one interface of a collector.

Real sources (NVML, Docker, /proc) and stand-ins (scenario file, demo machine) implement the same
protocols, so the collector, the UI and the reports never know which one they have.
All source methods may block and are called from the collector thread only, never from the UI
thread.

:class:`CollectorProtocol` is what every front-end (the TUI, ``--once``, ``export``, ``record``)
takes: the live :class:`~gputui.collect.collector.Collector` and the replay of a recording
(``gputui.replay.ReplayCollector``) both implement it. Replay controls are an explicit optional
capability, :attr:`CollectorProtocol.player`, never guessed from the object's attributes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from gputui.model import (
    ContainerReading,
    ExecResult,
    GpuProcess,
    GpuReading,
    HostStats,
    ProcessInfo,
    Snapshot,
    SourceStatus,
    Visibility,
)

if TYPE_CHECKING:
    from gputui.collect.docker.logs import LogReader


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

    def prime_cpu(self) -> int:
        """Take a first CPU sample of every process (a one-shot's start); how many were taken."""
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

    def interactive_exec_argv(self, container_id: str, argv: Sequence[str]) -> list[str] | None:
        """The ``docker exec -it`` argv that runs ``argv`` on the terminal.

        Returns:
            None when there is no such command: no docker CLI, a malformed id, a simulated
            container.
        """
        ...

    def close(self) -> None:
        """Stop background threads and close the client (idempotent, never waits long)."""
        ...


@runtime_checkable
class ContainerControl(Protocol):
    """A container source that also reads logs and stops, starts and restarts containers.

    The Docker engine's source has it; the demo machine and recordings do not. Found behind a
    collector by :func:`container_control`; the front-end refuses the actions (logs stay)
    before calling under ``--read-only``.
    """

    def open_logs(self, container_id: str, *, tail: int, follow: bool) -> LogReader:
        """Open a container's logs: the last ``tail`` lines, then new ones while ``follow``.

        Raises:
            LogStreamError: the stream cannot be opened (one line).
        """
        ...

    def container_action(self, container_id: str, action: str) -> str | None:
        """``stop``, ``start`` or ``restart`` a container; None on success, else why not."""
        ...


def container_control(collector: object) -> ContainerControl | None:
    """The container controls behind a collector, None when it has none.

    Looks through a wrapper's ``inner`` collector and a collector's ``containers`` source (a
    collector built by the wiring), at most a few levels deep.

    Args:
        collector: A :class:`CollectorProtocol` (or one of its sources).

    Returns:
        The object to call, or None (the demo machine, a recording). Read-only mode is the
        caller's to enforce: logs are allowed there, the container actions are not.
    """
    current: object = collector
    for _ in range(5):
        # A lazily built source forwards through __getattr__, which isinstance does not see
        # on Python 3.12+: look at the real source it wraps.
        wrapped = getattr(current, "wrapped", None)
        if wrapped is not None:
            current = wrapped
            continue
        if isinstance(current, ContainerControl):
            return current
        current = getattr(current, "inner", None) or getattr(current, "containers", None)
        if current is None:
            return None
    return None


@dataclass(frozen=True)
class HealthInputs:
    """What the other sources read, handed to the checks.

    Attributes:
        gpu: The latest NVML reading.
        containers: The latest Docker reading.
        processes: GPU processes joined with their containers.
        visibility: Whether gputui sees the host PID and cgroup namespaces.
        kmsg: Whether the kernel log could be read for XID lines and OOM kills; None when
            gputui does not read it (scenario, demo).
    """

    gpu: GpuReading
    containers: ContainerReading
    processes: tuple[GpuProcess, ...]
    visibility: Visibility
    kmsg: SourceStatus | None = None


class Player(Protocol):
    """The controls of a collector that plays a recording (pause, step, seek).

    Every call is an index move under a lock (no I/O), so the UI thread may make it while the
    collector thread collects.
    """

    paused: bool

    @property
    def position(self) -> int:
        """Index of the snapshot shown (the one the last collect returned, or will return)."""
        ...

    @property
    def current(self) -> Snapshot:
        """The snapshot at :attr:`position`."""
        ...

    @property
    def start(self) -> float:
        """``taken_at`` of the first recorded snapshot."""
        ...

    @property
    def end(self) -> float:
        """``taken_at`` of the last recorded snapshot."""
        ...

    def __len__(self) -> int: ...

    def pause(self) -> None:
        """Stop advancing: collect keeps returning the current snapshot."""
        ...

    def resume(self) -> None:
        """Advance again, one snapshot per collect."""
        ...

    def step(self, delta: int) -> Snapshot:
        """Move ``delta`` snapshots (negative: back), clamped to the recording; return it."""
        ...

    def seek(self, when: float) -> Snapshot:
        """Move to the last snapshot taken at or before ``when`` (epoch seconds); return it."""
        ...


class CollectorProtocol(Protocol):
    """What every front-end needs from a collector (live, scenario, demo or replay).

    ``collect`` blocks and runs on a collector thread; the actions refuse (with a reason) when
    the collector cannot act, e.g. read-only or a replay.

    Attributes:
        mode: ``live``, ``scenario``, ``demo`` or ``replay``.
    """

    mode: str

    @property
    def player(self) -> Player | None:
        """The replay controls when this collector plays a recording, else None."""
        ...

    def collect(self) -> Snapshot:
        """Read every source once and return the joined snapshot (blocking)."""
        ...

    def request_health(self) -> None:
        """Make the next :meth:`collect` re-run the health checks (thread-safe)."""
        ...

    def exec_in_container(
        self, container_id: str, argv: Sequence[str], timeout_s: float
    ) -> ExecResult:
        """Run ``argv`` (no shell) in a running container; refusals are an ``ExecResult``."""
        ...

    def interactive_exec_argv(self, container_id: str, argv: Sequence[str]) -> list[str] | None:
        """``docker exec -it`` argv for running ``argv`` on the terminal, None when unavailable."""
        ...

    def signal_process(self, pid: int, signum: int, start_time: float | None) -> str | None:
        """Send a signal to a GPU process; None on success, else why not."""
        ...

    def close(self) -> None:
        """Release every source (idempotent, never waits long)."""
        ...
