"""Pure functions turning Docker engine payloads into gputui's vocabulary.

Nothing here imports ``docker`` or touches the network or the file system, so every rule can be
tested on literal dicts and strings. CPU and memory figures come from the cgroup files, not from
the engine's stats call: ``gputui.collect.linux.cgroup_usage`` holds the docker CLI's formulas
(docker/cli ``cli/command/container/stats_helpers.go``), so gputui shows the numbers a user
would see in ``docker stats``.

Payloads come from outside: every field is checked for its type and bounded (numbers by what
they mean, strings by length, lists by count) before use. A field of the wrong type is ignored
as if absent, so parsing never raises on any JSON document.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

from gputui.collect.owners import (
    COMPOSE_DIR_LABEL,
    MAX_BIND_SOURCES,
    OwnerFacts,
    owner_facts_from_labels,
)
from gputui.model.containers import (
    MAX_DETAIL_ITEMS,
    ContainerDetails,
    ContainerInfo,
    EngineInfo,
    Mount,
)

#: Environment keys gputui reads from ``Config.Env``; every other value is dropped unseen.
GPU_ENV_KEYS = frozenset(
    {
        "NVIDIA_VISIBLE_DEVICES",
        "NVIDIA_DRIVER_CAPABILITIES",
        "CUDA_VERSION",
        "NVIDIA_REQUIRE_CUDA",
        # MPS: where the client looks for the daemon's pipes, and its share of the SMs.
        "CUDA_MPS_PIPE_DIRECTORY",
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
    }
)
#: Where MPS clients look for the control daemon's pipes when the variable is unset.
MPS_DEFAULT_PIPE_DIRECTORY = "/tmp/nvidia-mps"

#: A container (and exec) id: 64 lowercase hex digits. Anything else is never used, not even
#: as a cache key: an id such as ``--privileged`` would become a flag in a ``docker`` argv.
CONTAINER_ID_RE = re.compile(r"[0-9a-f]{64}")
#: More GPUs than any host has; a larger ``--gpus N`` is kept as the number, never expanded.
MAX_GPU_COUNT = 64
#: Bounds on the lists and strings read from a payload.
MAX_LIST_ITEMS = 4096
MAX_GPU_IDS = 256
MAX_NAME_CHARS = 256
MAX_TEXT_CHARS = 1024
MAX_PID = 1 << 22  # the kernel's PID_MAX_LIMIT
MAX_INT32 = (1 << 31) - 1
MAX_INT64 = (1 << 63) - 1

_NVIDIA_DEV_RE = re.compile(r"^/dev/nvidia(\d+)$")
#: Every NVIDIA device node (GPUs, nvidiactl, nvidia-uvm...): CUDA needs more than the GPU node.
_NVIDIA_ANY_DEV_RE = re.compile(r"^/dev/nvidia")
_TIME_RE = re.compile(
    r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,12}))?(Z|[+-]\d\d:\d\d)$"
)
# The engine reports "never" as Go's zero time.
_ZERO_TIME_PREFIX = "0001-01-01"


def valid_id(value: object) -> bool:
    """True for a full container/exec id (64 lowercase hex digits)."""
    return isinstance(value, str) and CONTAINER_ID_RE.fullmatch(value) is not None


def as_dict(value: object) -> Mapping[str, Any]:
    """``value`` when it is a JSON object, else an empty one (a wrong type counts as absent)."""
    return value if isinstance(value, dict) else {}


def as_list(value: object, limit: int = MAX_LIST_ITEMS) -> list[Any]:
    """The first ``limit`` items of a JSON array; anything else gives ``[]``."""
    return value[:limit] if isinstance(value, list) else []


def as_text(value: object, limit: int = MAX_TEXT_CHARS) -> str | None:
    """A string of at most ``limit`` characters (cut), None for anything that is not a string."""
    return value[:limit] if isinstance(value, str) else None


def as_int(value: object, low: int, high: int) -> int | None:
    """An integer within ``[low, high]``, None otherwise (bools, floats and huge numbers too)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if low <= value <= high else None


def as_bool(value: object) -> bool | None:
    """A JSON boolean, None for anything else."""
    return value if isinstance(value, bool) else None


def gpu_env(env: Iterable[str] | None) -> dict[str, str]:
    """Pick the GPU-related keys out of a ``Config.Env`` list.

    Only the keys in :data:`GPU_ENV_KEYS` survive; other entries (which may hold secrets) are
    never copied anywhere, not even into an intermediate dict.

    Args:
        env: ``KEY=value`` strings, or None.

    Returns:
        The GPU-related keys and their values.
    """
    picked: dict[str, str] = {}
    for entry in env if isinstance(env, (list, tuple)) else ():
        if not isinstance(entry, str):
            continue  # a wrong-typed entry is ignored, not an error
        key, sep, value = entry.partition("=")
        if sep and key in GPU_ENV_KEYS:
            picked[key] = value[:MAX_TEXT_CHARS]
    return picked


def parse_visible_devices(value: str | None) -> str | tuple[str, ...] | None:
    """Interpret ``NVIDIA_VISIBLE_DEVICES`` the way the NVIDIA container runtime does.

    Args:
        value: The variable's value, None when unset.

    Returns:
        ``"all"``, a tuple of indexes/UUIDs, or None for unset, empty, ``none`` and ``void``
        (``none`` still injects the driver but no GPU; ``void`` injects nothing).
    """
    if value is None:
        return None
    text = value.strip()
    if text.lower() in ("", "none", "void"):
        return None
    if text.lower() == "all":
        return "all"
    parts = tuple(part.strip()[:MAX_NAME_CHARS] for part in text.split(",") if part.strip())
    return parts[:MAX_GPU_IDS] or None


def parse_capabilities(value: str | None) -> tuple[str, ...] | None:
    """Split ``NVIDIA_DRIVER_CAPABILITIES`` (``"compute,utility"``) into a tuple; None if unset."""
    if value is None:
        return None
    return tuple(part.strip() for part in value.split(",") if part.strip())[:MAX_GPU_IDS]


def _device_ids(value: object) -> list[str]:
    """``DeviceIDs``: strings (numbers accepted), bounded in count and length."""
    ids = []
    for item in as_list(value, MAX_GPU_IDS):
        if isinstance(item, str):
            ids.append(item[:MAX_NAME_CHARS])
        elif as_int(item, 0, MAX_INT32) is not None:
            ids.append(str(item))
    return ids


def _device_request(requests: object) -> tuple[str | tuple[str, ...] | None, str | None]:
    """GPU request from ``HostConfig.DeviceRequests`` (``--gpus`` or CDI ``--device``).

    ``Count`` is bounded by what it means: up to :data:`MAX_GPU_COUNT` it becomes the indexes
    the container gets; a larger count (no host has that many GPUs) stays the number, as
    ``"count=N"``, and is never expanded into a tuple.
    """
    for req in as_list(requests, MAX_GPU_IDS):
        if not isinstance(req, dict):
            continue
        driver = (as_text(req.get("Driver"), MAX_NAME_CHARS) or "").lower()
        ids = _device_ids(req.get("DeviceIDs"))
        if driver == "cdi":
            gpus = [i.split("=", 1)[1] for i in ids if i.startswith("nvidia.com/gpu=")]
            if gpus:
                return ("all" if "all" in gpus else tuple(gpus)), "cdi"
            continue
        caps = {
            c
            for group in as_list(req.get("Capabilities"), MAX_GPU_IDS)
            for c in as_list(group, MAX_GPU_IDS)
            if isinstance(c, str)
        }
        if driver not in ("", "nvidia") and "gpu" not in caps:
            continue
        if ids:
            return tuple(ids), "device_requests"
        count = req.get("Count")
        if isinstance(count, bool) or not isinstance(count, int) or count == 0:
            continue
        if count < 0:
            return "all", "device_requests"
        if count > MAX_GPU_COUNT:
            return f"count={min(count, MAX_INT64)}", "device_requests"
        # The engine's nvidia driver turns a count into the first N indexes (moby
        # daemon/nvidia_linux.go countToDevices), so this is what the container gets.
        return tuple(str(i) for i in range(count)), "device_requests"
    return None, None


def parse_docker_time(value: str | None) -> float | None:
    """Seconds since the epoch from an engine timestamp (RFC 3339 with nanoseconds).

    Returns:
        None for a missing value or Go's zero time (``0001-01-01T00:00:00Z``, "never").
    """
    if not isinstance(value, str) or not value or value.startswith(_ZERO_TIME_PREFIX):
        return None
    match = _TIME_RE.match(value[:64])
    if match is None:
        return None
    year, month, day, hour, minute, second, frac, zone = match.groups()
    try:  # month 13, hour 25 or a +99:00 offset are malformed, not errors
        tz = timezone.utc
        if zone != "Z":
            sign = 1 if zone[0] == "+" else -1
            hours, minutes = int(zone[1:3]), int(zone[4:6])
            tz = timezone(sign * timedelta(hours=hours, minutes=minutes))
        stamp = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), tzinfo=tz
        ).timestamp()
    except (ValueError, OverflowError):
        return None
    # datetime keeps only microseconds; the engine sends nanoseconds, so add the fraction by hand.
    return stamp + (float("0." + frac) if frac else 0.0)


def parse_mps_percentage(value: str | None) -> int | None:
    """``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` as a whole percentage 0-100, None if unset or bad."""
    if value is None:
        return None
    try:
        number = float(value.strip()[:16])
    except ValueError:
        return None
    return int(number) if 0 <= number <= 100 else None


def mount_source(mounts: object, destination: str) -> str | None:
    """The host path mounted at ``destination`` in a container (``Mounts`` of inspect)."""
    wanted = destination.rstrip("/") or "/"
    for mount in as_list(mounts):
        entry = as_dict(mount)
        dest = as_text(entry.get("Destination"), MAX_TEXT_CHARS)
        if dest is not None and (dest.rstrip("/") or "/") == wanted:
            return as_text(entry.get("Source"), MAX_TEXT_CHARS)
    return None


#: Labels under this prefix are kept (owner, idle-policy opt-in); at most this many of them.
POLICY_LABEL_PREFIX = "gputui."
MAX_POLICY_LABELS = 16


def policy_labels(labels: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """The ``gputui.*`` labels of a container, sorted by key, strings only, each bounded.

    Only these are kept: the idle-GPU policy reads its opt-in and the owner from them, and no
    other label (which may hold anything) is carried into a snapshot.
    """
    kept = sorted(
        (key, text)
        for key, value in labels.items()
        if isinstance(key, str)
        and key.startswith(POLICY_LABEL_PREFIX)
        and len(key) <= MAX_NAME_CHARS
        and (text := as_text(value, MAX_NAME_CHARS)) is not None
    )
    return tuple(kept[:MAX_POLICY_LABELS])


def parse_inspect(data: Mapping[str, Any]) -> ContainerInfo:
    """Turn one ``GET /containers/{id}/json`` payload into a :class:`ContainerInfo`.

    Environment values other than the NVIDIA/CUDA keys are never read into the result; the
    caller should drop ``data`` right after this call. Never raises: a field of the wrong type
    or out of range is treated as absent (the caller checks :func:`valid_id` on the id).

    Args:
        data: The inspect payload.

    Returns:
        The container's immutable facts (no CPU/memory figures).
    """
    data = as_dict(data)
    config = as_dict(data.get("Config"))
    state = as_dict(data.get("State"))
    host = as_dict(data.get("HostConfig"))
    labels = as_dict(config.get("Labels"))
    env = gpu_env(as_list(config.get("Env"), MAX_LIST_ITEMS * 4))

    runtime = as_text(host.get("Runtime"), MAX_NAME_CHARS) or None
    device_paths = tuple(
        path
        for d in as_list(host.get("Devices"))
        if (path := as_text(as_dict(d).get("PathOnHost"), MAX_NAME_CHARS))
        and _NVIDIA_ANY_DEV_RE.match(path)
    )[:MAX_GPU_IDS]
    request, via = _device_request(host.get("DeviceRequests"))
    env_request = parse_visible_devices(env.get("NVIDIA_VISIBLE_DEVICES"))
    gpu_nodes = tuple(m.group(1) for p in device_paths if (m := _NVIDIA_DEV_RE.match(p)))
    if request is None and gpu_nodes:
        # Only numbered nodes select GPUs; nvidiactl/nvidia-uvm alone give a container none.
        request, via = gpu_nodes, "devices"
    if request is None and env_request is not None:
        # With the nvidia runtime the variable is what selects GPUs; with runc it only matters
        # when the engine's default runtime is nvidia or a hook reads it, still worth showing.
        request, via = env_request, ("runtime" if runtime == "nvidia" else "env")

    mps_dir = env.get("CUDA_MPS_PIPE_DIRECTORY")
    mps_source = mount_source(data.get("Mounts"), mps_dir or MPS_DEFAULT_PIPE_DIRECTORY)

    status = as_text(state.get("Status"), MAX_NAME_CHARS) or "unknown"
    running = status in ("running", "restarting", "paused")
    exit_code = as_int(state.get("ExitCode"), -MAX_INT32 - 1, MAX_INT32)
    image = as_text(config.get("Image"), MAX_TEXT_CHARS) or as_text(data.get("Image")) or ""
    return ContainerInfo(
        id=as_text(data.get("Id"), 64) or "",
        name=shown_name((as_text(data.get("Name"), MAX_NAME_CHARS + 1) or "").lstrip("/"), labels),
        image=image,
        status=status,
        pid=as_int(state.get("Pid"), 1, MAX_PID),
        compose_project=as_text(labels.get("com.docker.compose.project"), MAX_NAME_CHARS),
        compose_service=as_text(labels.get("com.docker.compose.service"), MAX_NAME_CHARS),
        k8s_pod=as_text(labels.get("io.kubernetes.pod.name"), MAX_NAME_CHARS),
        k8s_namespace=as_text(labels.get("io.kubernetes.pod.namespace"), MAX_NAME_CHARS),
        policy_labels=policy_labels(labels),
        gpu_request=request,
        gpu_request_via=via,
        runtime=runtime,
        gpu_device_paths=device_paths,
        nvidia_capabilities=parse_capabilities(env.get("NVIDIA_DRIVER_CAPABILITIES")),
        cuda_version=env.get("CUDA_VERSION"),
        cuda_requirement=env.get("NVIDIA_REQUIRE_CUDA"),
        started_at=parse_docker_time(state.get("StartedAt")),
        restart_count=as_int(data.get("RestartCount"), 0, MAX_INT32),
        oom_killed=as_bool(state.get("OOMKilled")),
        exit_code=None if running else exit_code,
        cpu_quota_cpus=cpu_quota(host),
        mps_pipe_directory=mps_dir or None,
        mps_thread_percentage=parse_mps_percentage(env.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")),
        mps_pipe_source=mps_source,
        ipc_mode=as_text(host.get("IpcMode"), MAX_NAME_CHARS) or None,
    )


def owner_facts(data: Mapping[str, Any], label_keys: Sequence[str]) -> OwnerFacts:
    """What one inspect payload says about the container's owner (:mod:`gputui.collect.owners`).

    Args:
        data: The inspect payload.
        label_keys: The owner labels, strongest first (``owner_label_keys``).
    """
    data = as_dict(data)
    config = as_dict(data.get("Config"))
    labels = as_dict(config.get("Labels"))
    binds = []
    for mount in as_list(data.get("Mounts")):
        entry = as_dict(mount)
        source = as_text(entry.get("Source"), MAX_TEXT_CHARS)
        if entry.get("Type") == "bind" and source and source.startswith("/"):
            binds.append(source)
    return OwnerFacts(
        labels=owner_facts_from_labels(
            labels, label_keys, text=lambda v: as_text(v, MAX_NAME_CHARS)
        ),
        compose_dir=as_text(labels.get(COMPOSE_DIR_LABEL), MAX_TEXT_CHARS) or None,
        bind_sources=tuple(dict.fromkeys(binds))[:MAX_BIND_SOURCES],
        config_user=as_text(config.get("User"), MAX_NAME_CHARS) or None,
    )


def cgroup_parent(data: Mapping[str, Any]) -> str | None:
    """``HostConfig.CgroupParent`` of an inspect payload, if it is a plain cgroup path.

    It becomes part of a path under the cgroup root, so ``..`` components, NUL bytes and
    overlong values are refused (None: the engine's default layout is used).
    """
    value = as_text(as_dict(as_dict(data).get("HostConfig")).get("CgroupParent"), 4096)
    if not value or len(value) > MAX_TEXT_CHARS or "\x00" in value:
        return None
    if ".." in value.split("/"):
        return None
    return value


def shown_name(docker_name: str, labels: Mapping[str, Any]) -> str:
    """A container's name: a Kubernetes pod's by its pod spec, as kubectl and the CRI name it.

    The kubelet's Docker shim (dockershim, cri-dockerd) names a pod's container
    ``k8s_<container>_<pod>_<namespace>_<uid>_<attempt>`` and labels it with each part; the pod
    and namespace are shown beside the name, so the container is ``<container>`` (its sandbox
    ``POD``), as containerd's and CRI-O's are. Any other name is the engine's.
    """
    if not docker_name.startswith("k8s_") or not labels.get("io.kubernetes.pod.name"):
        return docker_name
    return as_text(labels.get("io.kubernetes.container.name"), MAX_NAME_CHARS) or docker_name


def parse_list_entry(entry: object) -> tuple[str, tuple[str | None, str]] | None:
    """``(id, (state, name))`` from one ``GET /containers/json`` entry; None if its id is bad.

    The state and name tell which cached inspects went stale (compared with
    :class:`ContainerInfo` ``status`` and ``name``).
    """
    item = as_dict(entry)
    cid = item.get("Id")
    if not valid_id(cid):
        return None
    assert isinstance(cid, str)
    names = [n for n in as_list(item.get("Names"), 16) if isinstance(n, str)]
    name = "/".join(names)[: MAX_NAME_CHARS + 1].lstrip("/")
    # Named as parse_inspect names it: the two are compared to find stale inspects.
    name = shown_name(name, as_dict(item.get("Labels")))
    return cid, (as_text(item.get("State"), MAX_NAME_CHARS), name)


def parse_list_stub(entry: object, problem: str) -> ContainerInfo | None:
    """A stub :class:`ContainerInfo` from one ``GET /containers/json`` entry; None if its id is bad.

    For a container whose inspect reply cannot be used (over the size cap): the list entry
    still names it, its image, state and compose/Kubernetes labels, so it stays on screen with
    ``problem`` saying what is unknown, instead of vanishing.

    Args:
        entry: One list entry.
        problem: The one-line reason, kept in :attr:`ContainerInfo.inspect_problem`.
    """
    parsed = parse_list_entry(entry)
    if parsed is None:
        return None
    cid, (state, name) = parsed
    item = as_dict(entry)
    labels = as_dict(item.get("Labels"))
    return ContainerInfo(
        id=cid,
        name=name or cid[:12],
        image=as_text(item.get("Image"), MAX_TEXT_CHARS) or "",
        status=state or "unknown",
        compose_project=as_text(labels.get("com.docker.compose.project"), MAX_NAME_CHARS),
        compose_service=as_text(labels.get("com.docker.compose.service"), MAX_NAME_CHARS),
        k8s_pod=as_text(labels.get("io.kubernetes.pod.name"), MAX_NAME_CHARS),
        k8s_namespace=as_text(labels.get("io.kubernetes.pod.namespace"), MAX_NAME_CHARS),
        policy_labels=policy_labels(labels),
        inspect_problem=problem[:MAX_TEXT_CHARS],
    )


def cpu_quota(host: Mapping[str, Any]) -> float | None:
    """The container's CPU limit in CPUs (``--cpus``, or ``--cpu-quota``/``--cpu-period``)."""
    host = as_dict(host)
    nano = as_int(host.get("NanoCpus"), 1, MAX_INT64)
    if nano is not None:
        return float(nano) / 1e9
    quota = as_int(host.get("CpuQuota"), 1, MAX_INT64)
    period = as_int(host.get("CpuPeriod"), 1, MAX_INT64) or 100_000
    return float(quota) / float(period) if quota is not None else None


def classify_connect_error(message: str) -> tuple[str, str]:
    """Map a docker SDK connection error text to a ``SourceStatus`` kind and fix text.

    Args:
        message: ``str(exc)``, e.g. ``Error while fetching server API version: ('Connection
            aborted.', PermissionError(13, 'Permission denied'))``.

    Returns:
        (kind, fix): kind is ``permission``, ``unreachable``, ``not_found`` or ``error``.
    """
    low = message.lower()
    if "permission denied" in low or "permissionerror" in low:
        return "permission", (
            "Add your user to the docker group (sudo usermod -aG docker $USER, then log in "
            "again; the group is root-equivalent) or run gputui with sudo."
        )
    if "filenotfounderror" in low or "no such file or directory" in low:
        return "not_found", (
            "No Docker daemon at that socket: start it (sudo systemctl start docker), or point "
            "DOCKER_HOST or the docker context at the right socket."
        )
    if "context" in low and "not found" in low:
        return "not_found", "The docker context does not exist: check `docker context ls`."
    if any(
        word in low
        for word in ("connection refused", "timed out", "timeout", "connection", "name resolution")
    ):
        return "unreachable", (
            "The Docker engine does not answer: check that dockerd is running and that "
            "DOCKER_HOST or the docker context names the right endpoint."
        )
    return "error", "Check `docker info` with the same DOCKER_HOST / docker context."


def parse_engine(
    info: Mapping[str, Any],
    version: Mapping[str, Any],
    endpoint: str | None,
    context: str | None,
    api_version: str | None,
) -> EngineInfo:
    """Engine facts from ``GET /info`` and ``GET /version``.

    ``cdi_spec_dirs`` is None when the engine has no ``CDISpecDirs`` key (older engines) and
    empty when CDI is disabled.
    """
    info, version = as_dict(info), as_dict(version)
    cdi = info.get("CDISpecDirs")
    components = [as_text(as_dict(c).get("Name"), MAX_NAME_CHARS) or "" for c in
                  as_list(version.get("Components"), 32)]  # fmt: skip
    product = "podman" if any("podman" in c.lower() for c in components) else "docker"
    runtimes = [r[:MAX_NAME_CHARS] for r in as_dict(info.get("Runtimes")) if isinstance(r, str)]
    cdi_dirs = [d for d in as_list(cdi, 64) if isinstance(d, str)]
    return EngineInfo(
        endpoint=endpoint,
        context=context,
        server_version=as_text(version.get("Version"), MAX_NAME_CHARS),
        api_version=api_version,
        runtimes=tuple(sorted(runtimes[:64])),
        default_runtime=as_text(info.get("DefaultRuntime"), MAX_NAME_CHARS),
        cgroup_driver=as_text(info.get("CgroupDriver"), MAX_NAME_CHARS),
        cgroup_version=as_text(info.get("CgroupVersion"), 8) or "1",
        cdi_spec_dirs=None if cdi is None else tuple(d[:MAX_TEXT_CHARS] for d in cdi_dirs),
        host_memory_bytes=as_int(info.get("MemTotal"), 1, MAX_INT64),
        rootless=any(
            isinstance(o, str) and "name=rootless" in o.split(",")
            for o in as_list(info.get("SecurityOptions"), 64)
        ),
        product=product,
    )


#: What ``nvidia-smi`` prints when the container lost access to its GPU device nodes.
_NVML_LOST_RE = re.compile(r"Failed to initialize NVML: Unknown Error", re.IGNORECASE)
#: The fix, in the words of the ``cgroup.nvml_hazard`` health check.
NVML_LOST_FIX = (
    "restart the container now (docker restart; recreate it if that does not help); "
    'for good, set "exec-opts": ["native.cgroupdriver=cgroupfs"] in daemon.json '
    "(then sudo systemctl restart docker), or inject GPUs with CDI "
    "(sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml, then "
    "--device nvidia.com/gpu=all)"
)


def exec_error(argv: Sequence[str], exit_code: int | None, output: str) -> str | None:
    """Explain a failed exec the user can act on, or None.

    Exit 126/127 or the runtime's "executable file not found" means the binary is missing; for
    ``nvidia-*`` tools that means the container got no GPU utilities. ``Failed to initialize
    NVML: Unknown Error`` means the container lost its device cgroup access to the GPUs, which
    is what a ``systemctl daemon-reload`` does under the systemd cgroup driver.
    """
    if exit_code not in (0, None) and _NVML_LOST_RE.search(output[-65536:]):
        return (
            "the container lost access to its GPUs (Failed to initialize NVML: Unknown Error): "
            "with the systemd cgroup driver, a `systemctl daemon-reload` (package upgrades run "
            "one) re-applied the container's device cgroup without the NVIDIA devices; fix: "
            + NVML_LOST_FIX
        )
    if exit_code not in (126, 127) and "executable file not found" not in output:
        return None
    name = argv[0] if argv else "command"
    if name.rsplit("/", 1)[-1].startswith("nvidia-"):
        return (
            f"{name} not found in the container: it was started without --gpus / "
            "NVIDIA_DRIVER_CAPABILITIES=utility"
        )
    return f"{name} not found in the container"


#: The most ``Config.CreateCommand`` arguments read (a command line longer than this is cut).
MAX_CREATE_ARGS = 4096
_CDI_GPU_PREFIX = "nvidia.com/gpu="


def cdi_request_from_command(command: object) -> str | tuple[str, ...] | None:
    """The CDI GPU request of a podman container, from its ``Config.CreateCommand``.

    podman's inspect shows ``--device nvidia.com/gpu=0`` nowhere but in the command line the
    container was created with (its Docker-compatible inspect not even there): ``--device`` and
    ``--gpus`` with a ``nvidia.com/gpu=`` value, as one argument (``--device=...``) or two.

    Returns:
        ``"all"``, the GPU indexes or UUIDs named, or None when the command asks for none.
    """
    args = [a for a in as_list(command, MAX_CREATE_ARGS) if isinstance(a, str)]
    found: list[str] = []
    for index, arg in enumerate(args):
        value: str | None = None
        for flag in ("--device", "--gpus"):
            if arg == flag and index + 1 < len(args):
                value = args[index + 1]
            elif arg.startswith(flag + "="):
                value = arg[len(flag) + 1 :]
        if value is None:
            continue
        for part in value.split(","):
            part = part.strip()
            if part.startswith(_CDI_GPU_PREFIX):
                gpu = part[len(_CDI_GPU_PREFIX) :].split(":", 1)[0][:MAX_NAME_CHARS]
                if gpu:
                    found.append(gpu)
    if not found:
        return None
    return "all" if "all" in found else tuple(dict.fromkeys(found))[:MAX_GPU_IDS]


def podman_facts(
    info: ContainerInfo, libpod: Mapping[str, Any], default_runtime: str | None
) -> ContainerInfo:
    """A podman container's facts its Docker-compatible inspect leaves out or gets wrong.

    The compatible inspect says ``HostConfig.Runtime`` is ``oci`` for every container (podman's
    word for "the OCI runtime", no runtime's name); podman's own inspect names it
    (``OCIRuntime``). A CDI GPU request is only in ``Config.CreateCommand``.

    Args:
        info: The container from the compatible inspect.
        libpod: podman's own inspect (``/libpod/containers/{id}/json``); empty when unread.
        default_runtime: The engine's default runtime, for ``oci`` when podman's inspect is
            missing.
    """
    libpod = as_dict(libpod)
    runtime = as_text(libpod.get("OCIRuntime"), MAX_NAME_CHARS) or None
    if runtime is None and info.runtime == "oci":
        runtime = default_runtime
    changes: dict[str, Any] = {}
    if runtime != info.runtime and (runtime is not None or info.runtime == "oci"):
        changes["runtime"] = runtime
    request = cdi_request_from_command(as_dict(libpod.get("Config")).get("CreateCommand"))
    if request is not None and info.gpu_request_via in (None, "env", "devices"):
        changes["gpu_request"], changes["gpu_request_via"] = request, "cdi"
    return replace(info, **changes) if changes else info


#: Characters kept of a label's key and of its value, of an environment name, of a path.
MAX_LABEL_KEY_CHARS = 128
MAX_LABEL_VALUE_CHARS = 256
MAX_ENV_NAME_CHARS = 128
MAX_PATH_CHARS = 512
#: Arguments of a command kept.
MAX_COMMAND_ARGS = 64


def env_names(env: object) -> tuple[tuple[str, ...], int]:
    """The names of a ``KEY=value`` environment list; the values are never copied.

    Args:
        env: ``Config.Env`` (or a runtime spec's ``process.env``), any JSON value.

    Returns:
        ``(names, left out)``: at most :data:`MAX_DETAIL_ITEMS` names, sorted, each cut to
        :data:`MAX_ENV_NAME_CHARS`, and how many more there were.
    """
    names: list[str] = []
    for entry in as_list(env):
        if isinstance(entry, str):
            # Only what precedes the first "=": the value is not sliced, kept or decoded.
            name = entry[: entry.find("=")] if "=" in entry else entry[:MAX_ENV_NAME_CHARS]
            if name:
                names.append(name[:MAX_ENV_NAME_CHARS])
    names.sort()
    return tuple(names[:MAX_DETAIL_ITEMS]), max(0, len(names) - MAX_DETAIL_ITEMS)


def _labels(labels: object) -> tuple[tuple[tuple[str, str], ...], int]:
    found = [
        (key[:MAX_LABEL_KEY_CHARS], value[:MAX_LABEL_VALUE_CHARS])
        for key, value in list(as_dict(labels).items())[:MAX_LIST_ITEMS]
        if isinstance(key, str) and isinstance(value, str)
    ]
    found.sort()
    return tuple(found[:MAX_DETAIL_ITEMS]), max(0, len(found) - MAX_DETAIL_ITEMS)


def _command(parts: Iterable[object]) -> tuple[str, ...]:
    out: list[str] = []
    for part in parts:
        text = as_text(part, MAX_TEXT_CHARS)
        if text is not None:
            out.append(text)
        if len(out) >= MAX_COMMAND_ARGS:
            break
    return tuple(out)


def _more(**counts: int) -> tuple[tuple[str, int], ...]:
    return tuple((name, count) for name, count in counts.items() if count > 0)


def parse_details(data: Mapping[str, Any]) -> ContainerDetails:
    """The inspect screen's facts from a Docker (or podman) inspect reply; never raises.

    Environment values are never read: :func:`env_names` keeps the names only.

    Args:
        data: ``GET /containers/{id}/json``.
    """
    config = as_dict(data.get("Config"))
    host = as_dict(data.get("HostConfig"))
    state = as_dict(data.get("State"))
    path = as_text(data.get("Path"))
    command = _command([path] if path else [])
    command += _command(as_list(data.get("Args"), MAX_COMMAND_ARGS))
    policy = as_dict(host.get("RestartPolicy"))
    restart = as_text(policy.get("Name"), 32)
    retries = as_int(policy.get("MaximumRetryCount"), 0, MAX_INT32)
    if restart == "":
        restart = "no"
    if restart == "on-failure" and retries:
        restart = f"on-failure:{retries}"
    mounts: list[Mount] = []
    entries = as_list(data.get("Mounts"))
    for entry in entries[:MAX_DETAIL_ITEMS]:
        mount = as_dict(entry)
        destination = as_text(mount.get("Destination"), MAX_PATH_CHARS)
        if not destination:
            continue
        source = as_text(mount.get("Source"), MAX_PATH_CHARS) or ""
        if as_text(mount.get("Type"), 32) == "volume":
            source = as_text(mount.get("Name"), MAX_PATH_CHARS) or source
        mounts.append(
            Mount(
                as_text(mount.get("Type"), 32) or "?",
                source,
                destination,
                as_bool(mount.get("RW")) is False,
            )
        )
    labels, labels_more = _labels(config.get("Labels"))
    names, env_more = env_names(config.get("Env"))
    networks_map = as_dict(as_dict(data.get("NetworkSettings")).get("Networks"))
    networks = sorted(k[:MAX_NAME_CHARS] for k in list(networks_map)[:MAX_LIST_ITEMS])
    if not networks:
        mode = as_text(host.get("NetworkMode"), MAX_NAME_CHARS)
        networks = [mode] if mode else []
    return ContainerDetails(
        id=as_text(data.get("Id"), MAX_NAME_CHARS) or "",
        image=as_text(config.get("Image"), MAX_NAME_CHARS) or "",
        command=command,
        created_at=parse_docker_time(as_text(data.get("Created"), 64)),
        started_at=parse_docker_time(as_text(state.get("StartedAt"), 64)),
        restart_policy=restart,
        mounts=tuple(mounts),
        labels=labels,
        env_names=names,
        networks=tuple(networks[:MAX_DETAIL_ITEMS]),
        more=_more(
            mounts=max(0, len(entries) - MAX_DETAIL_ITEMS),
            labels=labels_more,
            env=env_more,
            networks=max(0, len(networks) - MAX_DETAIL_ITEMS),
        ),
    )


def parse_bundle_details(task_id: str, spec: Mapping[str, Any]) -> ContainerDetails:
    """The inspect screen's facts from an OCI runtime spec (a containerd bundle's config.json).

    A bundle says the process, its environment (names kept, values never read), the mounts and
    the annotations; it says nothing of a restart policy, networks or when it was created.

    Args:
        task_id: The task's id.
        spec: The parsed runtime spec.
    """
    spec = as_dict(spec)
    process = as_dict(spec.get("process"))
    notes = as_dict(spec.get("annotations"))
    mounts: list[Mount] = []
    entries = as_list(spec.get("mounts"))
    for entry in entries[:MAX_DETAIL_ITEMS]:
        mount = as_dict(entry)
        destination = as_text(mount.get("destination"), MAX_PATH_CHARS)
        if not destination:
            continue
        options = [o for o in as_list(mount.get("options"), 64) if isinstance(o, str)]
        mounts.append(
            Mount(
                as_text(mount.get("type"), 32) or "bind",
                as_text(mount.get("source"), MAX_PATH_CHARS) or "",
                destination,
                "ro" in options,
            )
        )
    labels, labels_more = _labels(notes)
    names, env_more = env_names(process.get("env"))
    return ContainerDetails(
        id=task_id,
        image=as_text(notes.get("io.kubernetes.cri.image-name"), MAX_NAME_CHARS) or "",
        command=_command(as_list(process.get("args"), MAX_COMMAND_ARGS)),
        mounts=tuple(mounts),
        labels=labels,
        env_names=names,
        more=_more(
            mounts=max(0, len(entries) - MAX_DETAIL_ITEMS), labels=labels_more, env=env_more
        ),
        unknown=("restart policy", "networks", "creation time"),
    )
