"""The vocabulary of gputui: frozen, slotted dataclasses shared by every layer.

Numbers stay numbers here (bytes, percent, watts, MHz); the UI and the text report format them.
``None`` always means "not available" (unsupported, no permission, source down), never zero.
No third-party imports: this module is imported by the data layer and the UI alike.
"""

from __future__ import annotations

from dataclasses import field

from gputui.model.containers import ContainerInfo, EngineInfo
from gputui.model.faults import FaultCount, KernelFault
from gputui.model.gpu import GpuSample, XidEvent
from gputui.model.processes import GpuProcess, Visibility
from gputui.model.records import record
from gputui.model.status import HealthCheck, SourceStatus


@record
class ContainerUsage:
    """A container with the GPU usage gputui attributed to it.

    Attributes:
        info: The engine's view of the container; a stub (status ``unknown``) when the id came only
            from a cgroup path and the engine does not know it.
        gpu_memory_bytes: Sum of GPU memory over its GPU processes.
        pids: Host PIDs of its GPU processes (each once).
        gpu_indexes: GPUs its processes use.
        sm_util: SM % of its processes, per GPU: the mean over the GPUs they use
            (:func:`per_gpu_sm`; None when none reported any).
        known_to_engine: False for ids seen only in cgroups (containerd, CRI-O, podman...).
        gpu_data: False when NVML gave no process list (no library, no permission, driver
            gone): nobody can tell then whether the container uses its GPUs.
        mig_devices: The MIG devices its processes run on, by name (``0:1``).
        engine_answered: False while the Docker engine is unreachable: ``known_to_engine``
            False then means "unknown", not "not a Docker container".
        cgroup_runtime: For a container no connected source lists (a stub), the runtime its
            cgroup path names (``containerd``, ``podman``, ``kubernetes``), None when unnamed;
            None for a listed container.
        source: The name of the container source that lists it (``docker``, ``podman``,
            ``containerd``), None for a container no source lists.
    """

    info: ContainerInfo
    gpu_memory_bytes: int = 0
    pids: tuple[int, ...] = ()
    gpu_indexes: tuple[int, ...] = ()
    sm_util: int | None = None
    known_to_engine: bool = True
    gpu_data: bool = True
    mig_devices: tuple[str, ...] = ()
    engine_answered: bool = True
    cgroup_runtime: str | None = None
    source: str | None = None

    @property
    def not_in_engine(self) -> bool:
        """True when the engine answered and does not know this container (cgroups only).

        The one verdict "not in Docker" rests on: without the engine's answer it is unknown.
        """
        return self.engine_answered and not self.known_to_engine

    @property
    def idle_reserved(self) -> bool:
        """True for a running container that asked for GPUs but runs no GPU process.

        Never True without GPU data: a broken driver must not turn every GPU container into an
        "idle reservation" alarm at the moment it breaks.
        """
        return (
            self.gpu_data
            and self.info.running
            and self.info.gpu_request is not None
            and not self.pids
        )


@record
class HostStats:
    """The host's own load, as nvitop's host panel shows it.

    Attributes:
        cpu_percent: All CPUs, 0-100, since the previous refresh (None on the first).
        cpu_count: Logical CPUs.
        load_avg: 1, 5 and 15 minute load averages.
        memory_used_bytes: Used memory (total minus available).
        memory_total_bytes: Total memory.
        swap_used_bytes: Used swap.
        swap_total_bytes: Total swap.
    """

    cpu_percent: float | None = None
    cpu_count: int | None = None
    load_avg: tuple[float, float, float] | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    swap_used_bytes: int | None = None
    swap_total_bytes: int | None = None


@record
class HostInfo:
    """The machine gputui runs on."""

    hostname: str
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    nvml_version: str | None = None


@record
class Snapshot:
    """Everything gputui knows at one refresh: the single object the UI and reports consume.

    Attributes:
        taken_at: Seconds since the epoch.
        mode: ``live``, ``scenario`` or ``demo``.
        host: Host name and NVIDIA versions.
        sources: Status of each source, by name.
        gpus: One sample per GPU.
        processes: Every GPU process (one entry per process and GPU).
        containers: Every container the engine reports plus cgroup-only ones, GPU users first.
        engine: Docker engine facts, None when unreachable.
        visibility: Whether gputui can resolve host PIDs and cgroups.
        health: The latest runtime-health checks (refreshed on their own cadence).
        health_pending: The checks have not run yet (the monitor's first snapshot: they run
            after its first paint).
        xid_events: Recent XID events.
        host_stats: The host's CPU, load, memory and swap.
        kernel_faults: Faults read from the kernel log (XID lines, OOM kills), attributed to
            the process and container, oldest first (bounded).
        fault_counts: Kernel faults seen since gputui started, by kind, GPU, XID, class and
            container (counters; bounded).
    """

    taken_at: float
    mode: str
    host: HostInfo
    sources: dict[str, SourceStatus] = field(default_factory=dict)
    gpus: tuple[GpuSample, ...] = ()
    processes: tuple[GpuProcess, ...] = ()
    containers: tuple[ContainerUsage, ...] = ()
    engine: EngineInfo | None = None
    visibility: Visibility = Visibility()
    health: tuple[HealthCheck, ...] = ()
    health_pending: bool = False
    xid_events: tuple[XidEvent, ...] = ()
    host_stats: HostStats | None = None
    kernel_faults: tuple[KernelFault, ...] = ()
    fault_counts: tuple[FaultCount, ...] = ()
    # Snapshot.container() is called once per process by every consumer (reports, findings, UI
    # rows); a linear scan made that O(processes x containers). The id index is built on first
    # use and kept in the snapshot, outside its fields' contract: not an argument, not compared,
    # not recorded (the codec skips fields that are not init arguments).
    _container_by_id: dict[str, ContainerUsage] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def container(self, container_id: str) -> ContainerUsage | None:
        """The container with this id, or None (O(1): the id index is built once per snapshot)."""
        index = self._container_by_id
        if index is None:
            # Two threads may both build it; each builds the same dict, so either one may win.
            index = {u.info.id: u for u in self.containers}
            object.__setattr__(self, "_container_by_id", index)
        return index.get(container_id)

    @property
    def orphan_processes(self) -> tuple[GpuProcess, ...]:
        """GPU memory held by PIDs that do not exist (in this PID namespace)."""
        return tuple(p for p in self.processes if not p.info.exists)
