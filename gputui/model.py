"""The vocabulary of gputui: frozen, slotted dataclasses shared by every layer.

Numbers stay numbers here (bytes, percent, watts, MHz); the UI and the text report format them.
``None`` always means "not available" (unsupported, no permission, source down), never zero.
No third-party imports: this module is imported by the data layer and the UI alike.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum

__all__ = [
    "STATUS_RANK",
    "THROTTLE_REASONS",
    "ContainerInfo",
    "ContainerReading",
    "ContainerUsage",
    "EngineInfo",
    "ExecResult",
    "Finding",
    "GpuProcess",
    "GpuProcessSample",
    "GpuReading",
    "GpuSample",
    "HealthCheck",
    "HealthStatus",
    "HostInfo",
    "HostStats",
    "MigInstance",
    "ProcessInfo",
    "Snapshot",
    "SourceStatus",
    "Visibility",
    "XidEvent",
    "worst_status",
]

# --- GPUs, as NVML reports them ------------------------------------------------------------

#: NVML clock-event (throttle) reason bits and their short names, most severe first.
THROTTLE_REASONS: tuple[tuple[int, str], ...] = (
    (0x40, "HW thermal"),
    (0x08, "HW slowdown"),
    (0x80, "HW power brake"),
    (0x20, "SW thermal"),
    (0x04, "SW power cap"),
    (0x10, "sync boost"),
    (0x02, "app clocks"),
    (0x100, "display clock"),
    (0x01, "idle"),
)


@dataclass(frozen=True, slots=True)
class GpuProcessSample:
    """One process on one GPU as NVML reports it (host PID namespace).

    Attributes:
        pid: Host PID.
        gpu_index: Index of the GPU (the parent GPU for MIG).
        used_memory_bytes: GPU memory held by the process, None when NVML says N/A.
        kind: ``"C"`` (compute), ``"G"`` (graphics) or ``"C+G"``.
        sm_util: SM utilization 0-100 from the last process-utilization sample, None if never seen.
        mem_util: Memory-controller utilization 0-100, likewise.
        enc_util: Encoder utilization 0-100, likewise.
        dec_util: Decoder utilization 0-100, likewise.
        mig_gi_id: GPU instance id on a MIG GPU, else None.
        mig_ci_id: Compute instance id on a MIG GPU, else None.
    """

    pid: int
    gpu_index: int
    used_memory_bytes: int | None
    kind: str = "C"
    sm_util: int | None = None
    mem_util: int | None = None
    enc_util: int | None = None
    dec_util: int | None = None
    mig_gi_id: int | None = None
    mig_ci_id: int | None = None


@dataclass(frozen=True, slots=True)
class MigInstance:
    """A MIG device under a physical GPU."""

    index: int
    uuid: str | None
    gpu_instance_id: int | None
    compute_instance_id: int | None
    memory_used_bytes: int | None
    memory_total_bytes: int | None


@dataclass(frozen=True, slots=True)
class GpuSample:
    """Every gauge of one physical GPU at one refresh.

    Attributes that NVML could not provide are None. ``lost`` marks a GPU whose every query fails
    (fallen off the bus, ``GpuIsLost``); ``error`` then says how.
    """

    index: int
    uuid: str | None
    name: str | None
    lost: bool = False
    error: str | None = None
    utilization_gpu: int | None = None
    utilization_memory: int | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    temperature_c: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    clock_sm_mhz: int | None = None
    clock_mem_mhz: int | None = None
    clock_sm_max_mhz: int | None = None
    clock_mem_max_mhz: int | None = None
    pstate: int | None = None
    fan_percent: int | None = None
    pcie_rx_kbps: int | None = None
    pcie_tx_kbps: int | None = None
    throttle_reasons: int | None = None
    ecc_mode_current: bool | None = None
    ecc_mode_pending: bool | None = None
    ecc_uncorrected_volatile: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    encoder_util: int | None = None
    decoder_util: int | None = None
    persistence_mode: bool | None = None
    mig_mode_current: bool | None = None
    mig_mode_pending: bool | None = None
    mig_instances: tuple[MigInstance, ...] = ()
    processes: tuple[GpuProcessSample, ...] = ()


@dataclass(frozen=True, slots=True)
class XidEvent:
    """A critical XID error reported by the driver for one GPU."""

    gpu_index: int
    xid: int
    at: float


class HealthStatus(str, Enum):
    """Outcome of one runtime-health check, ordered from worst to best by :data:`STATUS_RANK`."""

    FAIL = "fail"
    WARN = "warn"
    INFO = "info"
    PASS = "pass"
    SKIP = "skip"


#: Lower is worse; used to pick the worst status for a tab title or an exit code.
STATUS_RANK: dict[HealthStatus, int] = {
    HealthStatus.FAIL: 0,
    HealthStatus.WARN: 1,
    HealthStatus.INFO: 2,
    HealthStatus.PASS: 3,
    HealthStatus.SKIP: 4,
}


@dataclass(frozen=True, slots=True)
class SourceStatus:
    """Whether one data source (``nvml``, ``docker``, ``procs``) answered, and if not, why.

    Attributes:
        name: The source's name.
        ok: True when the last read succeeded.
        error: One-line description of the failure, or None.
        kind: Machine-readable failure kind, e.g. ``LibraryNotFound``, ``DriverNotLoaded``,
            ``permission``, ``unreachable``, ``not_found``; None when ok.
        fix: What the user can do about it, or None.
    """

    name: str
    ok: bool
    error: str | None = None
    kind: str | None = None
    fix: str | None = None


@dataclass(frozen=True, slots=True)
class GpuReading:
    """Everything one read of the GPU source returns.

    Attributes:
        status: Whether NVML is usable; ``status.kind`` carries the NVML init error name.
        driver_version: e.g. ``"580.159.04"``.
        cuda_driver_version: Highest CUDA the driver supports, e.g. ``"13.0"``.
        nvml_version: e.g. ``"13.580.159.04"``.
        gpus: One sample per physical GPU, by index.
        xid_events: Recent XID events, oldest first (bounded).
        binding_problems: Names of NVML symbols missing from the installed library (binding skew).
    """

    status: SourceStatus
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    nvml_version: str | None = None
    gpus: tuple[GpuSample, ...] = ()
    xid_events: tuple[XidEvent, ...] = ()
    binding_problems: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    """Host-side facts about one PID (from /proc and psutil).

    Attributes:
        pid: Host PID.
        exists: False when the PID is not (or no longer) present in /proc.
        command: Full command line joined by spaces (or the process name), None if unknown.
        name: Process name.
        user: Owner's user name (or uid as text when it has no name).
        cpu_percent: CPU % since the previous refresh (100 = one core), None on the first sample.
        rss_bytes: Resident set size.
        start_time: Process start, seconds since the epoch.
        container_id: 64-hex container id found in /proc/<pid>/cgroup, or None (host).
        runtime: Which runtime's cgroup naming matched (``docker``, ``containerd``, ``crio``,
            ``podman``, ``kubernetes``), or None.
        pod_uid: Kubernetes pod UID from the cgroup path, or None.
        container_pid: The PID inside the process's own PID namespace (last ``NSpid`` field).
        access_denied: True when some facts could not be read for permission reasons.
        proc_hidden: True when the process exists but ``/proc`` hides it from gputui (``hidepid``
            mount option): its GPU memory is held by a process of another user, not an orphan.
    """

    pid: int
    exists: bool = True
    command: str | None = None
    name: str | None = None
    user: str | None = None
    cpu_percent: float | None = None
    rss_bytes: int | None = None
    start_time: float | None = None
    container_id: str | None = None
    runtime: str | None = None
    pod_uid: str | None = None
    container_pid: int | None = None
    access_denied: bool = False
    proc_hidden: bool = False


@dataclass(frozen=True, slots=True)
class Visibility:
    """What gputui itself can see of the host.

    Attributes:
        host_pid_namespace: True when gputui shares the host's PID namespace (NVML PIDs resolve),
            None when unknown.
        private_cgroup_namespace: True when other processes' cgroup paths show ``..`` (gputui runs
            in its own cgroup namespace), None when unknown.
        proc_hidepid: The ``hidepid=`` value of the ``/proc`` mount (``2``, ``invisible``...) when
            it hides other users' processes from gputui; None when it hides nothing (or unknown).
    """

    host_pid_namespace: bool | None = None
    private_cgroup_namespace: bool | None = None
    proc_hidepid: str | None = None


@dataclass(frozen=True, slots=True)
class ContainerInfo:
    """One container as the Docker engine describes it (environment values never kept).

    Attributes:
        id: Full 64-hex id.
        name: Name without the leading ``/``.
        image: Image reference as the container was created with.
        status: ``running``, ``exited``, ``paused``, ``created``, ``restarting``, ``dead``...
        pid: Host PID of the container's init process (0/None when not running).
        compose_project: ``com.docker.compose.project`` label.
        compose_service: ``com.docker.compose.service`` label.
        k8s_pod: ``io.kubernetes.pod.name`` label.
        k8s_namespace: ``io.kubernetes.pod.namespace`` label.
        gpu_request: ``"all"``, a tuple of GPU indexes/UUIDs, or None (no GPU asked for).
        gpu_request_via: How the GPU was requested: ``device_requests``, ``cdi``, ``runtime``,
            ``env`` or ``devices`` (``--device /dev/nvidiaN``).
        runtime: ``HostConfig.Runtime`` (``runc``, ``nvidia``...).
        gpu_device_paths: ``/dev/nvidia*`` paths passed with ``--device``.
        nvidia_capabilities: Parsed ``NVIDIA_DRIVER_CAPABILITIES``, e.g. ``("compute", "utility")``.
        cuda_version: ``CUDA_VERSION`` of the image, e.g. ``"12.4.1"``.
        cuda_requirement: ``NVIDIA_REQUIRE_CUDA`` constraint, e.g. ``"cuda>=12.4"``.
        started_at: Start time, seconds since the epoch.
        restart_count: From inspect.
        oom_killed: ``State.OOMKilled``.
        exit_code: ``State.ExitCode`` for a stopped container.
        cpu_percent: CPU % the way ``docker stats`` computes it (100 = one core).
        memory_used_bytes: Memory the way ``docker stats`` computes it (usage minus inactive file).
        memory_limit_bytes: The container's memory limit (host memory when unlimited).
        cpu_quota_cpus: CPU limit in CPUs (``--cpus``), None when unlimited.
        cpu_periods: CFS enforcement periods so far (cgroup ``cpu.stat nr_periods``).
        cpu_throttled_periods: Periods in which the container was throttled (``nr_throttled``).
        cpu_throttled_seconds: Total time throttled (``throttled_usec`` / ``throttled_time``).
    """

    id: str
    name: str
    image: str
    status: str
    pid: int | None = None
    compose_project: str | None = None
    compose_service: str | None = None
    k8s_pod: str | None = None
    k8s_namespace: str | None = None
    gpu_request: str | tuple[str, ...] | None = None
    gpu_request_via: str | None = None
    runtime: str | None = None
    gpu_device_paths: tuple[str, ...] = ()
    nvidia_capabilities: tuple[str, ...] | None = None
    cuda_version: str | None = None
    cuda_requirement: str | None = None
    started_at: float | None = None
    restart_count: int | None = None
    oom_killed: bool | None = None
    exit_code: int | None = None
    cpu_percent: float | None = None
    memory_used_bytes: int | None = None
    memory_limit_bytes: int | None = None
    cpu_quota_cpus: float | None = None
    cpu_periods: int | None = None
    cpu_throttled_periods: int | None = None
    cpu_throttled_seconds: float | None = None

    @property
    def short_id(self) -> str:
        """The 12-character id the docker CLI shows."""
        return self.id[:12]

    @property
    def running(self) -> bool:
        """True while the container's processes can run (running or restarting)."""
        return self.status in ("running", "restarting")


@dataclass(frozen=True, slots=True)
class EngineInfo:
    """Facts about the Docker engine relevant to GPUs (from ``docker info``/``version``).

    Attributes:
        endpoint: The URL the client talks to (``unix:///var/run/docker.sock``...).
        context: Name of the active docker CLI context, if one was used.
        server_version: Engine version.
        api_version: Negotiated API version.
        runtimes: Registered OCI runtimes (``runc``, ``nvidia``...).
        default_runtime: The runtime containers get unless they ask otherwise.
        cgroup_driver: ``cgroupfs`` or ``systemd``.
        cgroup_version: ``"1"`` or ``"2"``.
        cdi_spec_dirs: Directories the engine reads CDI specs from; empty when CDI is disabled,
            None when the engine does not report it (older engines).
        host_memory_bytes: Total memory of the engine's host.
    """

    endpoint: str | None = None
    context: str | None = None
    server_version: str | None = None
    api_version: str | None = None
    runtimes: tuple[str, ...] = ()
    default_runtime: str | None = None
    cgroup_driver: str | None = None
    cgroup_version: str | None = None
    cdi_spec_dirs: tuple[str, ...] | None = None
    host_memory_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class ContainerReading:
    """Everything one read of the container source returns."""

    status: SourceStatus
    containers: tuple[ContainerInfo, ...] = ()
    engine: EngineInfo | None = None


@dataclass(frozen=True, slots=True)
class ExecResult:
    """Outcome of running a command inside a container.

    Attributes:
        argv: The command that ran (never through a shell).
        exit_code: Its exit status, None when it never started or timed out.
        stdout: Captured standard output (decoded, replacement characters for bad bytes).
        stderr: Captured standard error.
        duration_s: Wall time.
        error: A one-line explanation when it could not run or failed in a known way.
        timed_out: True when it was abandoned after the timeout.
        output_cut_bytes: The output cap when the command printed more and the rest was
            dropped; None when the whole output was kept.
    """

    argv: tuple[str, ...]
    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    error: str | None = None
    timed_out: bool = False
    output_cut_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class HealthCheck:
    """One runtime-health finding.

    Attributes:
        id: Stable dotted id, e.g. ``docker.nvidia_runtime`` (per-subject checks append
            ``:<subject>``, e.g. ``container.gpu_visible:trainer-a``).
        status: pass/warn/fail/info/skip.
        summary: One line.
        details: What the check saw, one fact per line.
        fix: What to run or change, None when nothing needs doing.
        docs: A documentation URL, when one exists.
        subject: What the check is about (a GPU index, a container name), None for host checks.
    """

    id: str
    status: HealthStatus
    summary: str
    details: tuple[str, ...] = ()
    fix: str | None = None
    docs: str | None = None
    subject: str | None = None


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """One GPU process joined with its host process facts and its container.

    Attributes:
        sample: What NVML said.
        info: What /proc and psutil said (``info.exists`` False: nobody can find the PID).
        container_id: The container owning the process, None for a host process. It may name a
            container the Docker engine does not know (another runtime such as containerd).
    """

    sample: GpuProcessSample
    info: ProcessInfo
    container_id: str | None = None

    @property
    def pid(self) -> int:
        """Host PID."""
        return self.sample.pid


@dataclass(frozen=True, slots=True)
class ContainerUsage:
    """A container with the GPU usage gputui attributed to it.

    Attributes:
        info: The engine's view of the container; a stub (status ``unknown``) when the id came only
            from a cgroup path and the engine does not know it.
        gpu_memory_bytes: Sum of GPU memory over its GPU processes.
        pids: Host PIDs of its GPU processes (each once).
        gpu_indexes: GPUs its processes use.
        sm_util: Sum of the SM % of its processes (None when none reported any).
        known_to_engine: False for ids seen only in cgroups (containerd, CRI-O, podman...).
        gpu_data: False when NVML gave no process list (no library, no permission, driver
            gone): nobody can tell then whether the container uses its GPUs.
    """

    info: ContainerInfo
    gpu_memory_bytes: int = 0
    pids: tuple[int, ...] = ()
    gpu_indexes: tuple[int, ...] = ()
    sm_util: int | None = None
    known_to_engine: bool = True
    gpu_data: bool = True

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


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class Finding:
    """A conclusion drawn from several snapshots: sharing, leaks, idle reservations, throttling.

    Attributes:
        kind: ``gpu_shared``, ``memory_growth``, ``idle_reservation``, ``cpu_throttled``,
            ``memory_pressure``, ``oom_killed``, ``restarting``.
        subject: What it is about: ``gpu:0``, ``container:<id>``, ``pid:<pid>``.
        severity: ``info``, ``warn`` or ``fail``.
        summary: One line for people.
        figures: The numbers behind it (rates, shares, durations), by name.
    """

    kind: str
    subject: str
    severity: str
    summary: str
    figures: tuple[tuple[str, float | int | str], ...] = ()

    def figure(self, name: str) -> float | int | str | None:
        """One figure by name, None when absent."""
        return next((v for k, v in self.figures if k == name), None)


@dataclass(frozen=True, slots=True)
class HostInfo:
    """The machine gputui runs on."""

    hostname: str
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    nvml_version: str | None = None


# Snapshot.container() is called once per process by every consumer (reports, findings, UI
# rows); a linear scan made that O(processes x containers). The index lives beside the frozen
# snapshot rather than in it, so serialisation and equality never see it; a few entries cover
# the snapshots in flight (collector thread, UI thread, an exporter scrape).
_INDEX_LOCK = threading.Lock()
_INDEX: dict[int, tuple[tuple[ContainerUsage, ...], dict[str, ContainerUsage]]] = {}
_INDEX_SIZE = 8


def _container_index(containers: tuple[ContainerUsage, ...]) -> dict[str, ContainerUsage]:
    with _INDEX_LOCK:
        hit = _INDEX.get(id(containers))
        # The tuple itself is kept in the entry, so its id cannot be reused while it is cached.
        if hit is not None and hit[0] is containers:
            return hit[1]
        index = {u.info.id: u for u in containers}
        _INDEX[id(containers)] = (containers, index)
        while len(_INDEX) > _INDEX_SIZE:
            del _INDEX[next(iter(_INDEX))]
        return index


@dataclass(frozen=True, slots=True)
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
        xid_events: Recent XID events.
        host_stats: The host's CPU, load, memory and swap.
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
    xid_events: tuple[XidEvent, ...] = ()
    host_stats: HostStats | None = None

    def container(self, container_id: str) -> ContainerUsage | None:
        """The container with this id, or None (O(1): the id index is built once per snapshot)."""
        return _container_index(self.containers).get(container_id)

    @property
    def orphan_processes(self) -> tuple[GpuProcess, ...]:
        """GPU memory held by PIDs that do not exist (in this PID namespace)."""
        return tuple(p for p in self.processes if not p.info.exists)


def worst_status(checks: Iterable[HealthCheck]) -> HealthStatus | None:
    """The worst status among ``checks`` (``fail`` < ``warn`` < ``info`` < ``pass`` < ``skip``).

    Returns:
        None for no checks at all: nothing was judged.
    """
    return min((c.status for c in checks), key=STATUS_RANK.__getitem__, default=None)
