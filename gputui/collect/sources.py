"""The interfaces every data source implements, and the one interface of a collector.

Real sources (NVML, Docker, /proc) and stand-ins (scenario file, demo machine) implement the same
protocols, so the collector, the UI and the reports never know which one they have.
All source methods may block and are called from the collector thread only, never from the UI
thread.

:class:`CollectorProtocol` is what every front-end (the TUI, ``--once``, ``export``, ``record``)
takes: the live :class:`~gputui.collect.collector.Collector` and the replay of a recording
(``gputui.recording.player.ReplayCollector``) both implement it. Replay controls are an
explicit optional
capability, :attr:`CollectorProtocol.player`, never guessed from the object's attributes.

Container runtimes meet the rest of gputui at :class:`ContainerSource`: a name, a read, and the
actions it offers (:class:`ContainerCapabilities`, one call). A collector takes several and
routes each container's actions to the source that lists it (:meth:`CollectorProtocol.
container_owner`); the front-ends never reach a source, or the machine, but through the
collector.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Literal, Protocol

from gputui.model.containers import (
    ContainerDetails,
    ContainerProcesses,
    ContainerReading,
    EngineInfo,
    ExecResult,
)
from gputui.model.gpu import GpuReading
from gputui.model.processes import GpuProcess, ProcessInfo, Visibility
from gputui.model.records import record
from gputui.model.snapshot import HostStats, Snapshot
from gputui.model.status import SourceStatus

if TYPE_CHECKING:
    from gputui.collect.docker.logs import LogReader
    from gputui.collect.linux.parent_chain import ParentLink


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

    def parent_chain(
        self, pid: int, start_time: float | None
    ) -> tuple[tuple[ParentLink, ...], str | None]:
        """The ancestors of ``pid``, nearest first, if it is still the process started then.

        Returns:
            ``(parents, note)``: ``note`` says why the chain is empty or stops early, None when
            it is complete.
        """
        ...


#: What a container source may offer beyond reading, by :class:`ContainerCapabilities` field.
Capability = Literal["exec", "interactive_exec", "logs", "lifecycle", "inspect"]

#: How a sentence names each capability ("docker does not offer container logs").
CAPABILITY_TEXT: dict[Capability, str] = {
    "exec": "exec",
    "interactive_exec": "interactive exec",
    "logs": "container logs",
    "lifecycle": "container stop/start/restart/pause",
    "inspect": "container inspect",
}


@record
class ContainerCapabilities:
    """What a container source can do besides listing containers, said once per read.

    Attributes:
        exec: Runs a command in a container and captures its output (``x``, the shell probe).
        interactive_exec: Gives the argv of a command on the terminal (``X``, ``E``).
        logs: Streams a container's logs (``l``).
        lifecycle: Stops, starts, restarts, pauses and unpauses containers (``D`` / ``U`` /
            ``R`` / ``P``).
        inspect: Describes a container on demand (mounts, labels, environment names) and
            lists all of its processes from ``/proc`` (``i``).
        note: Why what is missing is missing, when there is something to say (a simulated
            machine), else empty.
        notes: A capability's own note where it differs from :attr:`note` (what to use
            instead of this one key), by capability.
    """

    exec: bool = False
    interactive_exec: bool = False
    logs: bool = False
    lifecycle: bool = False
    inspect: bool = False
    note: str = ""
    notes: tuple[tuple[Capability, str], ...] = ()

    def offers(self, capability: Capability) -> bool:
        """Whether the source offers ``capability``."""
        return bool(getattr(self, capability))

    def why(self, capability: Capability) -> str:
        """What the refusal of ``capability`` says after the engine's name: its note."""
        return next((text for c, text in self.notes if c == capability), self.note)


def refusal(source: str, capability: Capability, note: str = "") -> str:
    """The one sentence for a capability a container source lacks."""
    why = f" ({note})" if note else ""
    return f"{source} does not offer {CAPABILITY_TEXT[capability]}{why}"


def failed_reading(source: str, exc: BaseException) -> ContainerReading:
    """What a container source's read that raised reports: one status line, never a traceback.

    Args:
        source: The source's name.
        exc: What the read raised.
    """
    text = " ".join(str(exc).split())[:200] or type(exc).__name__
    return ContainerReading(
        SourceStatus(source, ok=False, error=f"{type(exc).__name__}: {text}", kind="error")
    )


class ContainerSource(Protocol):
    """One container runtime (the Docker engine, the demo machine, any other engine).

    A source lists containers and says, through :meth:`capabilities`, what else it offers; the
    collector reads every source it was given and routes each action to the source that lists
    the container. The action methods here refuse (a source lacking a capability need not
    write them: subclass this protocol to inherit the refusals).

    Attributes:
        name: The source's name: its key in ``Snapshot.sources`` and in the JSON report, the
            ``source`` label of the exporter, and how messages name it (``docker``).
    """

    name: str

    def read(self) -> ContainerReading:
        """The current container set; cheap when nothing changed (kept fresh by events).

        Returns within the source's own deadline however slow the engine is, and never raises:
        failures are a ``SourceStatus`` named :attr:`name`. The collector still waits for it
        only so long.
        """
        ...

    def capabilities(self) -> ContainerCapabilities:
        """What the source offers besides reading (asked on the read thread after each read)."""
        ...

    def slow_status(self, waited_s: float) -> SourceStatus:
        """The status shown while a read has taken ``waited_s`` seconds and is not over."""
        return SourceStatus(
            self.name,
            ok=False,
            error=f"the {self.name} source has not answered for {waited_s:.0f} s; "
            "showing the containers last seen",
            kind="slow",
            fix="GPU data keeps updating meanwhile.",
        )

    def exec(self, container_id: str, argv: Sequence[str], timeout_s: float) -> ExecResult:
        """Run ``argv`` (no shell) inside a running container and capture its output.

        ``container_id`` is the source's full id; the call returns by ``timeout_s`` with
        bounded output and leaves no thread reading behind.
        """
        return ExecResult(tuple(argv), None, error=refusal(self.name, "exec"))

    def interactive_exec_argv(self, container_id: str, argv: Sequence[str]) -> list[str] | None:
        """The argv that runs ``argv`` in the container on the terminal (e.g. ``docker exec -it``).

        Returns:
            None when there is no such command (a malformed id, a simulated container).
        """
        return None

    def open_logs(self, container_id: str, *, tail: int, follow: bool) -> LogReader:
        """Open a container's logs: the last ``tail`` lines, then new ones while ``follow``.

        Raises:
            LogStreamError: the stream cannot be opened (one line).
        """
        # Imported here: a session that never opens logs does not load their module. The logs
        # vocabulary (the reader protocol, its one error) lives beside Docker's stream decoder
        # but names no engine.
        from gputui.collect.docker.logs import LogStreamError

        raise LogStreamError(refusal(self.name, "logs"))

    def container_action(self, container_id: str, action: str) -> str | None:
        """``stop``, ``start``, ``restart``, ``pause`` or ``unpause`` a container.

        Returns:
            None on success, else why not.
        """
        return refusal(self.name, "lifecycle")

    def details(self, container_id: str) -> ContainerDetails:
        """The container's inspect facts, fetched now (blocking, bounded; never raises).

        Environment values are never read into the result: only the variables' names.
        """
        return ContainerDetails(container_id, error=refusal(self.name, "inspect"))

    def processes(self, container_id: str) -> ContainerProcesses:
        """Every process of the container, from ``/proc`` (blocking, capped; never raises)."""
        return ContainerProcesses(error=refusal(self.name, "inspect"))

    def close(self) -> None:
        """Stop background threads and close the client (idempotent, never waits long)."""
        ...


@record
class ContainerOwner:
    """The source that lists a container, and what it offers.

    Attributes:
        source: The source's name (``docker``), or how a collector without sources names
            itself (``the recording``).
        capabilities: What that source offers.
    """

    source: str
    capabilities: ContainerCapabilities


@record(slots=False)
class HealthInputs:
    """What the other sources read, handed to the checks.

    Attributes:
        gpu: The latest NVML reading.
        containers: Every container source's containers, merged by id, with the status and
            engine facts of the first source (the Docker engine's, as wired today: the Docker
            checks judge those).
        processes: GPU processes joined with their containers.
        visibility: Whether gputui sees the host PID and cgroup namespaces.
        kmsg: Whether the kernel log could be read for XID lines and OOM kills; None when
            gputui does not read it (scenario, demo).
        container_sources: Each container source's status, by source name, in the order the
            collector was given them.
        engines: Each container source's engine facts, by source name (a source that never
            answered has none).
        owners: Container id -> the name of the source that lists it: a container is judged
            against its own engine (a podman container against podman's runtimes).
    """

    gpu: GpuReading
    containers: ContainerReading
    processes: tuple[GpuProcess, ...]
    visibility: Visibility
    kmsg: SourceStatus | None = None
    container_sources: Mapping[str, SourceStatus] = field(default_factory=dict)
    engines: Mapping[str, EngineInfo] = field(default_factory=dict)
    owners: Mapping[str, str] = field(default_factory=dict)


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
        """The owning source's argv for ``argv`` on the terminal, None when unavailable."""
        ...

    def container_owner(self, container_id: str) -> ContainerOwner | None:
        """The source that listed the container at the last collection, and what it offers.

        A dictionary look-up (no I/O): the UI thread may ask it before choosing an action.

        Returns:
            None when no connected source lists it (a container seen only in cgroups).
        """
        ...

    def open_container_logs(self, container_id: str, *, tail: int, follow: bool) -> LogReader:
        """Open a container's logs through its source (blocking: call it off the UI thread).

        Raises:
            LogStreamError: no source offers them, or the stream cannot be opened (one line).
        """
        ...

    def container_action(self, container_id: str, action: str) -> str | None:
        """``stop``, ``start``, ``restart``, ``pause`` or ``unpause`` a container (blocking).

        Returns:
            None on success, else why not (read-only, no source lists it, or the engine's
            answer).
        """
        ...

    def container_details(self, container_id: str) -> ContainerDetails:
        """A container's inspect facts through its source (blocking: off the UI thread).

        Returns:
            The facts, or their ``error`` (no source lists it, or it does not describe them).
        """
        ...

    def container_processes(self, container_id: str) -> ContainerProcesses:
        """Every process of a container through its source (blocking: off the UI thread)."""
        ...

    def signal_process(self, pid: int, signum: int, start_time: float | None) -> str | None:
        """Send a signal to a GPU process; None on success, else why not."""
        ...

    def parent_chain(
        self, pid: int, start_time: float | None
    ) -> tuple[tuple[ParentLink, ...], str | None]:
        """A process's ancestors from the process source (blocking, bounded; see ProcessSource)."""
        ...

    def close(self) -> None:
        """Release every source (idempotent, never waits long)."""
        ...
