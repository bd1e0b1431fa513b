"""Pure functions turning Docker engine payloads and cgroup file texts into gputui's vocabulary.

Nothing here imports ``docker`` or touches the network or the file system, so every rule can be
tested on literal dicts and strings. The CPU and memory formulas are the docker CLI's own
(docker/cli ``cli/command/container/stats_helpers.go``), so gputui shows the numbers a user
would see in ``docker stats``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

# The cgroup-file half of parsing lives in cgroup_stats (module size); re-exported here.
from gputui.collect.linux.cgroup_usage import cpu_percent, memory_used
from gputui.model import ContainerInfo, EngineInfo

#: Environment keys gputui reads from ``Config.Env``; every other value is dropped unseen.
GPU_ENV_KEYS = frozenset(
    {"NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "CUDA_VERSION", "NVIDIA_REQUIRE_CUDA"}
)

_NVIDIA_DEV_RE = re.compile(r"^/dev/nvidia(\d+)$")
#: Every NVIDIA device node (GPUs, nvidiactl, nvidia-uvm...): CUDA needs more than the GPU node.
_NVIDIA_ANY_DEV_RE = re.compile(r"^/dev/nvidia")
_TIME_RE = re.compile(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")
# The engine reports "never" as Go's zero time.
_ZERO_TIME_PREFIX = "0001-01-01"


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
    for entry in env or ():
        key, sep, value = entry.partition("=")
        if sep and key in GPU_ENV_KEYS:
            picked[key] = value
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
    parts = tuple(part.strip() for part in text.split(",") if part.strip())
    return parts or None


def parse_capabilities(value: str | None) -> tuple[str, ...] | None:
    """Split ``NVIDIA_DRIVER_CAPABILITIES`` (``"compute,utility"``) into a tuple; None if unset."""
    if value is None:
        return None
    return tuple(part.strip() for part in value.split(",") if part.strip())


def _device_request(
    requests: Iterable[Mapping[str, Any]] | None,
) -> tuple[str | tuple[str, ...] | None, str | None]:
    """GPU request from ``HostConfig.DeviceRequests`` (``--gpus`` or CDI ``--device``)."""
    for req in requests or ():
        driver = (req.get("Driver") or "").lower()
        ids = [str(i) for i in req.get("DeviceIDs") or ()]
        if driver == "cdi":
            gpus = [i.split("=", 1)[1] for i in ids if i.startswith("nvidia.com/gpu=")]
            if gpus:
                return ("all" if "all" in gpus else tuple(gpus)), "cdi"
            continue
        caps = {c for group in req.get("Capabilities") or () for c in group or ()}
        if driver not in ("", "nvidia") and "gpu" not in caps:
            continue
        if ids:
            return tuple(ids), "device_requests"
        count = int(req.get("Count") or 0)
        if count < 0:
            return "all", "device_requests"
        if count > 0:
            # The engine's nvidia driver turns a count into the first N indexes (moby
            # daemon/nvidia_linux.go countToDevices), so this is what the container gets.
            return tuple(str(i) for i in range(count)), "device_requests"
    return None, None


def parse_docker_time(value: str | None) -> float | None:
    """Seconds since the epoch from an engine timestamp (RFC 3339 with nanoseconds).

    Returns:
        None for a missing value or Go's zero time (``0001-01-01T00:00:00Z``, "never").
    """
    if not value or value.startswith(_ZERO_TIME_PREFIX):
        return None
    match = _TIME_RE.match(value)
    if match is None:
        return None
    year, month, day, hour, minute, second, frac, zone = match.groups()
    tz = timezone.utc
    if zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        hours, minutes = int(zone[1:3]), int(zone[4:6])
        tz = timezone(sign * timedelta(hours=hours, minutes=minutes))
    stamp = datetime(
        int(year), int(month), int(day), int(hour), int(minute), int(second), tzinfo=tz
    ).timestamp()
    # datetime keeps only microseconds; the engine sends nanoseconds, so add the fraction by hand.
    return stamp + (float("0." + frac) if frac else 0.0)


def parse_inspect(data: Mapping[str, Any]) -> ContainerInfo:
    """Turn one ``GET /containers/{id}/json`` payload into a :class:`ContainerInfo`.

    Environment values other than the NVIDIA/CUDA keys are never read into the result; the
    caller should drop ``data`` right after this call.

    Args:
        data: The inspect payload.

    Returns:
        The container's immutable facts (no CPU/memory figures).
    """
    config: Mapping[str, Any] = data.get("Config") or {}
    state: Mapping[str, Any] = data.get("State") or {}
    host: Mapping[str, Any] = data.get("HostConfig") or {}
    labels: Mapping[str, str] = config.get("Labels") or {}
    env = gpu_env(config.get("Env"))

    runtime = host.get("Runtime") or None
    device_paths = tuple(
        str(d.get("PathOnHost"))
        for d in host.get("Devices") or ()
        if _NVIDIA_ANY_DEV_RE.match(str(d.get("PathOnHost") or ""))
    )
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

    status = str(state.get("Status") or "unknown")
    running = status in ("running", "restarting", "paused")
    pid = int(state.get("Pid") or 0)
    exit_code = state.get("ExitCode")
    return ContainerInfo(
        id=str(data.get("Id") or ""),
        name=str(data.get("Name") or "").lstrip("/"),
        image=str(config.get("Image") or data.get("Image") or ""),
        status=status,
        pid=pid or None,
        compose_project=labels.get("com.docker.compose.project"),
        compose_service=labels.get("com.docker.compose.service"),
        k8s_pod=labels.get("io.kubernetes.pod.name"),
        k8s_namespace=labels.get("io.kubernetes.pod.namespace"),
        gpu_request=request,
        gpu_request_via=via,
        runtime=runtime,
        gpu_device_paths=device_paths,
        nvidia_capabilities=parse_capabilities(env.get("NVIDIA_DRIVER_CAPABILITIES")),
        cuda_version=env.get("CUDA_VERSION"),
        cuda_requirement=env.get("NVIDIA_REQUIRE_CUDA"),
        started_at=parse_docker_time(state.get("StartedAt")),
        restart_count=data.get("RestartCount"),
        oom_killed=state.get("OOMKilled"),
        exit_code=None if running or exit_code is None else int(exit_code),
        cpu_quota_cpus=cpu_quota(host),
    )


def cpu_quota(host: Mapping[str, Any]) -> float | None:
    """The container's CPU limit in CPUs (``--cpus``, or ``--cpu-quota``/``--cpu-period``)."""
    nano = host.get("NanoCpus") or 0
    if nano > 0:
        return float(nano) / 1e9
    quota, period = host.get("CpuQuota") or 0, host.get("CpuPeriod") or 100_000
    return float(quota) / float(period) if quota > 0 else None


# --- CPU and memory, the docker CLI way -----------------------------------------------------


def cpu_percent_from_stats(stats: Mapping[str, Any]) -> float | None:
    """CPU % from one ``GET /containers/{id}/stats`` payload (``cpu_stats``/``precpu_stats``).

    Returns:
        None when the payload has no previous sample (first streamed or one-shot sample).
    """
    cur: Mapping[str, Any] = stats.get("cpu_stats") or {}
    pre: Mapping[str, Any] = stats.get("precpu_stats") or {}
    cur_sys, pre_sys = cur.get("system_cpu_usage"), pre.get("system_cpu_usage")
    cur_total = (cur.get("cpu_usage") or {}).get("total_usage")
    pre_total = (pre.get("cpu_usage") or {}).get("total_usage")
    if cur_sys is None or pre_sys is None or cur_total is None or pre_total is None:
        return None
    online = cur.get("online_cpus") or len((cur.get("cpu_usage") or {}).get("percpu_usage") or ())
    return cpu_percent(cur_total - pre_total, cur_sys - pre_sys, online)


def memory_from_stats(stats: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """(used, limit) bytes from a stats payload; the key present tells v1 from v2."""
    mem: Mapping[str, Any] = stats.get("memory_stats") or {}
    detail: Mapping[str, int] = mem.get("stats") or {}
    version = "1" if "total_inactive_file" in detail else "2"
    return memory_used(mem.get("usage"), detail, version), mem.get("limit")


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
    cdi = info.get("CDISpecDirs")
    return EngineInfo(
        endpoint=endpoint,
        context=context,
        server_version=version.get("Version"),
        api_version=api_version,
        runtimes=tuple(sorted(info.get("Runtimes") or {})),
        default_runtime=info.get("DefaultRuntime"),
        cgroup_driver=info.get("CgroupDriver"),
        cgroup_version=str(info.get("CgroupVersion") or "1"),
        cdi_spec_dirs=None if cdi is None else tuple(cdi),
        host_memory_bytes=info.get("MemTotal"),
    )


def exec_error(argv: Sequence[str], exit_code: int | None, output: str) -> str | None:
    """Explain a failed exec the user can act on, or None.

    Exit 126/127 or the runtime's "executable file not found" means the binary is missing; for
    ``nvidia-*`` tools that means the container got no GPU utilities.
    """
    if exit_code not in (126, 127) and "executable file not found" not in output:
        return None
    name = argv[0] if argv else "command"
    if name.rsplit("/", 1)[-1].startswith("nvidia-"):
        return (
            f"{name} not found in the container: it was started without --gpus / "
            "NVIDIA_DRIVER_CAPABILITIES=utility"
        )
    return f"{name} not found in the container"
