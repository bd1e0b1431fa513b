"""What a container engine says: containers, the engine, one reading, an exec's result."""

from __future__ import annotations

from gputui.model.records import record
from gputui.model.status import SourceStatus

#: How sure gputui is of an owner, strongest first (``none``: no owner is known).
OWNER_CONFIDENCES = ("high", "medium", "low", "none")


@record
class Owner:
    """The person a container's GPU time is credited to, and how gputui knows.

    On a Docker host every container runs as root, so the user of its processes names nobody;
    the owner is found from evidence instead (``gputui/collect/owners.py`` lists the chain).

    Attributes:
        name: The person (a host user name, or a label's value); None when unknown.
        confidence: ``high`` (a label or a rootless engine's socket names them), ``medium``
            (the compose project's directory, a numeric ``--user``), ``low`` (bind-mount
            sources, a ``--user`` name the host also has) or ``none``.
        evidence: One line saying what named them (or why nothing did).
        hint: How to name the owner for sure, when the evidence is weaker than a label.
    """

    name: str | None
    confidence: str
    evidence: str
    hint: str | None = None


@record
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
            ``env``, ``devices`` (``--device /dev/nvidiaN``) or ``kubelet`` (a Kubernetes
            container's allocation, from the kubelet's pod-resources API).
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
        mps_pipe_directory: ``CUDA_MPS_PIPE_DIRECTORY`` of the container's config (a path; None
            when unset: MPS clients then use ``/tmp/nvidia-mps``).
        mps_thread_percentage: ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` (0-100), None when unset.
        mps_pipe_source: The host path bind-mounted at the container's MPS pipe directory, None
            when nothing is mounted there.
        ipc_mode: ``HostConfig.IpcMode`` (``host``, ``private``, ``shareable``...).
        stats_sampled_at: When the CPU, memory and throttling figures were read from the cgroup
            files (seconds since the epoch), set only when they are read on their own cadence
            (many running containers); None means this refresh read them.
        inspect_problem: Why the engine's full description is missing (its inspect reply was
            over the size cap): the container is a stub made from the list reply (name, image,
            state, compose/k8s labels), and what only inspect tells (GPU request, runtime,
            environment, PID) is unknown. None for a fully inspected container.
        policy_labels: The container's ``gputui.*`` labels (``gputui.owner``,
            ``gputui.idle-policy``), sorted by key: what the idle-GPU policy and alert delivery
            read of its labels (at most 16, each bounded by the parser); other labels are not
            kept.
        owner: Who the container is credited to, with the evidence; None where the source
            does not say (a stub, an engine that describes no owner facts).
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
    mps_pipe_directory: str | None = None
    mps_thread_percentage: int | None = None
    mps_pipe_source: str | None = None
    ipc_mode: str | None = None
    stats_sampled_at: float | None = None
    inspect_problem: str | None = None
    policy_labels: tuple[tuple[str, str], ...] = ()
    owner: Owner | None = None

    def label(self, key: str) -> str | None:
        """One of :attr:`policy_labels` by key, None when the container does not carry it."""
        return next((v for k, v in self.policy_labels if k == key), None)

    @property
    def short_id(self) -> str:
        """The 12-character id the docker CLI shows."""
        return self.id[:12]

    @property
    def running(self) -> bool:
        """True while the container's processes can run (running or restarting)."""
        return self.status in ("running", "restarting")

    @property
    def qualified_name(self) -> str:
        """``namespace/pod/name`` for a Kubernetes pod's container, else the name.

        A pod's container is named by its pod spec (``server``), which many pods share; where
        a name must tell containers apart (a health check's subject) it carries its pod.
        """
        if self.k8s_pod:
            return f"{self.k8s_namespace or '-'}/{self.k8s_pod}/{self.name}"
        return self.name


@record
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
        rootless: The engine runs as an unprivileged user (``SecurityOptions`` holds
            ``name=rootless``).
        product: What answers at the endpoint: ``docker``, or ``podman`` when ``/version``'s
            ``Components`` name the Podman Engine (its Docker-compatible API); None unknown.
        pod_resources: For containerd on a Kubernetes node: whether the kubelet's
            pod-resources API answered (the GPUs it allocated each container); None when
            there is no such socket or it was not asked.
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
    rootless: bool = False
    product: str | None = None
    pod_resources: SourceStatus | None = None


@record
class ContainerReading:
    """Everything one read of the container source returns."""

    status: SourceStatus
    containers: tuple[ContainerInfo, ...] = ()
    engine: EngineInfo | None = None


@record
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


@record
class Mount:
    """One mount of a container, as its engine describes it.

    Attributes:
        kind: ``bind``, ``volume``, ``tmpfs``… (the engine's word).
        source: The host path or volume name ("" when there is none, as for a tmpfs).
        destination: The path inside the container.
        read_only: Mounted read-only.
    """

    kind: str
    source: str
    destination: str
    read_only: bool


@record
class ContainerDetails:
    """A container's inspect facts for the inspect screen, bounded, fetched on demand.

    Environment *values* are never read into it: only the variables' names are kept.

    Attributes:
        id: The container's id.
        image: The image reference.
        command: The entrypoint and arguments, as the engine runs them (at most a few dozen).
        created_at: Creation time (seconds since the epoch), None when unknown.
        started_at: Last start time, None when unknown or never started.
        restart_policy: ``always``, ``on-failure:3``, ``no``… None when the engine keeps none.
        mounts: Its mounts, at most :data:`MAX_DETAIL_ITEMS`.
        labels: Its labels (or a bundle's annotations) by key, at most
            :data:`MAX_DETAIL_ITEMS`, keys and values cut short.
        env_names: The names of its environment variables (no values), at most
            :data:`MAX_DETAIL_ITEMS`.
        networks: The networks it is attached to (``none`` for a container without one).
        more: How many of each list were left out, by list (``labels``: 12).
        unknown: What this engine does not describe, one phrase each (``restart policy``).
        error: Why there are no details (refused, not found, unreachable); None when there are.
    """

    id: str
    image: str = ""
    command: tuple[str, ...] = ()
    created_at: float | None = None
    started_at: float | None = None
    restart_policy: str | None = None
    mounts: tuple[Mount, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    env_names: tuple[str, ...] = ()
    networks: tuple[str, ...] = ()
    more: tuple[tuple[str, int], ...] = ()
    unknown: tuple[str, ...] = ()
    error: str | None = None


#: The most mounts, labels, environment names and networks one inspect keeps, each.
MAX_DETAIL_ITEMS = 64


@record
class ContainerProcess:
    """One process of a container, from ``/proc``.

    Attributes:
        pid: Host PID.
        container_pid: PID inside the container's PID namespace, None when unknown.
        user: User name (or uid) on the host.
        cpu_percent: CPU % since the previous read (100 = one core), None on the first.
        rss_bytes: Resident memory.
        command: Its command line (or its name, for a process without one).
        state: One-letter state (``R``, ``S``, ``T`` when paused or stopped, ``Z``).
    """

    pid: int
    container_pid: int | None
    user: str
    cpu_percent: float | None
    rss_bytes: int
    command: str
    state: str = ""


@record
class ContainerProcesses:
    """Every process of a container (capped), as ``top`` in it would list them.

    Attributes:
        processes: The processes, by host PID, at most the reader's cap.
        total: How many the container has (more than ``len(processes)`` when capped).
        error: Why there is no list (not running, refused, its cgroup not found).
    """

    processes: tuple[ContainerProcess, ...] = ()
    total: int = 0
    error: str | None = None
