"""Runtime-health checks of GPU partitioning: MIG layouts and requests, and the MPS daemon.

MIG splits a GPU into isolated devices; a container asks for one by ``0:1``, ``MIG-<uuid>`` or
CDI ``nvidia.com/gpu=0:1``. MPS lets several processes share one GPU context through a control
daemon whose pipes clients find in ``CUDA_MPS_PIPE_DIRECTORY`` (``/tmp/nvidia-mps`` by default);
a container is a client only when that directory is the daemon's, mounted in, and it shares the
host's IPC namespace.

The MPS scan reads ``<proc>/<pid>/comm`` (and, for the daemon's processes only, ``cmdline`` and
the one variable ``CUDA_MPS_PIPE_DIRECTORY`` of ``environ``): no other environment value is kept.
"""

from __future__ import annotations

import os
from pathlib import Path

from gputui.health.context import CheckContext
from gputui.health.docs import DOCS_MIG
from gputui.health.registry import CONTAINER, GPU, HOST, check
from gputui.health.result import Result
from gputui.model.containers import ContainerInfo
from gputui.model.gpu import GpuSample
from gputui.model.mig import is_mig_token, mig_device_name, mig_request
from gputui.model.records import record

DOCS_MPS = "https://docs.nvidia.com/deploy/mps/index.html"

#: Where MPS clients and the daemon put their pipes unless ``CUDA_MPS_PIPE_DIRECTORY`` says.
MPS_DEFAULT_PIPE_DIRECTORY = "/tmp/nvidia-mps"
MPS_CONTROL = "nvidia-cuda-mps-control"
MPS_SERVER = "nvidia-cuda-mps-server"
#: ``comm`` holds 15 characters: both MPS programs read ``nvidia-cuda-mps`` there.
_MPS_COMM = "nvidia-cuda-mps"
#: Bounds of the scan: /proc entries looked at, and bytes read of one cmdline or environ.
MAX_PROC_ENTRIES = 200_000
_MAX_READ = 256 * 1024

#: What MPS changes for the figures gputui shows (the health tab's explanation).
MPS_EXPLAINED = (
    "MPS runs the clients' kernels in one GPU context owned by nvidia-cuda-mps-server",
    "NVML lists MPS clients apart (type M+C); their memory is their own, but per-process "
    "SM % may be credited to the server, so a client's utilization can read 0 or N/A",
    "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE caps the share of SMs a client may use",
)


@record
class MpsDaemons:
    """The MPS processes found in ``/proc``.

    Attributes:
        control: PIDs of ``nvidia-cuda-mps-control`` (the daemon).
        server: PIDs of ``nvidia-cuda-mps-server`` (one per user with clients).
        pipe_directory: The daemon's ``CUDA_MPS_PIPE_DIRECTORY``; the default when it has none,
            None when its environment is not readable.
        scanned: False when ``/proc`` could not be listed.
    """

    control: tuple[int, ...] = ()
    server: tuple[int, ...] = ()
    pipe_directory: str | None = None
    scanned: bool = True


def _read_bytes(path: Path) -> bytes | None:
    try:
        with path.open("rb") as handle:
            return handle.read(_MAX_READ)
    except OSError:
        return None


def _daemon_pipe_directory(proc: Path, pid: int) -> str | None:
    raw = _read_bytes(proc / str(pid) / "environ")
    if raw is None:
        return None
    for entry in raw.split(b"\0"):
        key, sep, value = entry.partition(b"=")
        if sep and key == b"CUDA_MPS_PIPE_DIRECTORY":
            return value.decode("utf-8", errors="replace")[:1024] or MPS_DEFAULT_PIPE_DIRECTORY
    return MPS_DEFAULT_PIPE_DIRECTORY


def scan_mps(proc_root: str) -> MpsDaemons:
    """Find the MPS control daemon and servers among the processes of ``proc_root``.

    Args:
        proc_root: The procfs mount (``/proc``).
    """
    proc = Path(proc_root)
    control: list[int] = []
    server: list[int] = []
    try:
        entries = os.scandir(proc)
    except OSError:
        return MpsDaemons(scanned=False)
    with entries:
        for count, entry in enumerate(entries):
            if count >= MAX_PROC_ENTRIES:
                break
            if not entry.name.isdigit():
                continue
            comm = _read_bytes(Path(entry.path) / "comm")
            if comm is None or not comm.strip().startswith(_MPS_COMM.encode()):
                continue
            cmdline = _read_bytes(Path(entry.path) / "cmdline") or b""
            program = os.path.basename(cmdline.split(b"\0", 1)[0].decode("utf-8", "replace"))
            if program.startswith(MPS_SERVER):
                server.append(int(entry.name))
            elif program.startswith(MPS_CONTROL) or not program:
                control.append(int(entry.name))
    pipe = _daemon_pipe_directory(proc, min(control)) if control else None
    return MpsDaemons(tuple(sorted(control)), tuple(sorted(server)), pipe)


def mps_hinted(ctx: CheckContext) -> bool:
    """Whether anything points at MPS, so that the /proc scan is worth its cost.

    Reading every process's ``comm`` costs tens of milliseconds on a busy host, so the scan runs
    only when NVML lists an MPS client or an MPS server, a container asks for MPS, or the
    daemon's control pipe exists (``$CUDA_MPS_PIPE_DIRECTORY/control``, ``/tmp/nvidia-mps``).
    """
    for proc in ctx.inputs.processes:
        if proc.sample.mps or (proc.info.name or "").startswith(_MPS_COMM):
            return True
    for box in ctx.inputs.containers.containers:
        if box.mps_pipe_directory is not None or box.mps_thread_percentage is not None:
            return True
    pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY") or MPS_DEFAULT_PIPE_DIRECTORY
    return os.path.exists(os.path.join(pipe, "control"))


def mps_daemons(ctx: CheckContext) -> MpsDaemons:
    """The MPS scan of this health pass (done once per pass, whoever asks first).

    Nothing pointing at MPS (:func:`mps_hinted`), the answer is "none" without a scan.
    """
    return ctx.once(
        "mps_daemons",
        lambda: scan_mps(ctx.roots.proc) if mps_hinted(ctx) else MpsDaemons(),
    )


# --------------------------------------------------------------------------------------------
# gpu.mig_layout


@check("gpu.mig_layout", scope=GPU)
def check_gpu_mig_layout(ctx: CheckContext, gpu: GpuSample) -> Result:
    """The MIG devices of a MIG GPU, and GPU instances nothing can run on."""
    if not gpu.mig_mode_current:
        return Result.skip("MIG is not enabled on this GPU")
    devices = [m for m in gpu.mig_instances if m.index >= 0]
    empty = [m for m in gpu.mig_instances if m.index < 0]
    details = [
        f"{mig_device_name(gpu.index, m.index)}: {m.profile or 'profile unknown'}, "
        f"GI {m.gpu_instance_id} CI {m.compute_instance_id}"
        + (f", {m.sm_count} SMs" if m.sm_count is not None else "")
        + (f", {m.uuid}" if m.uuid else "")
        for m in devices
    ]
    details += [f"GPU instance {m.gpu_instance_id}: no compute instance" for m in empty]
    if empty:
        ids = ", ".join(str(m.gpu_instance_id) for m in empty)
        first = empty[0].gpu_instance_id
        return Result.warn(
            f"{len(empty)} GPU instance(s) without a compute instance (GI {ids}): "
            "no MIG device, nothing can run there",
            details=details,
            fix=(
                f"Create the default compute instance: `sudo nvidia-smi mig -i {gpu.index} "
                f"-gi {first} -cci` (or destroy the instance: `sudo nvidia-smi mig -i "
                f"{gpu.index} -gi {first} -dgi`)."
            ),
            docs=DOCS_MIG,
        )
    if not devices:
        return Result.warn(
            "MIG is enabled but the GPU has no MIG device: no process can use it",
            details=details,
            fix=(
                f"List the profiles with `nvidia-smi mig -i {gpu.index} -lgip`, then create "
                f"instances with their compute instances: `sudo nvidia-smi mig -i {gpu.index} "
                "-cgi <profile>,<profile> -C`."
            ),
            docs=DOCS_MIG,
        )
    return Result.passed(
        f"{len(devices)} MIG device(s): "
        + ", ".join(f"{mig_device_name(gpu.index, m.index)} {m.profile or '?'}" for m in devices),
        details=(*details, "utilization is not measured per MIG device (NVML): shown as N/A"),
        docs=DOCS_MIG,
    )


# --------------------------------------------------------------------------------------------
# container.mig_device


@check("container.mig_device", scope=CONTAINER, running_only=False)
def check_container_mig_device(ctx: CheckContext, container: ContainerInfo) -> Result | None:
    """A container asking for MIG devices gets ones that exist (and only those, not the GPU)."""
    request = container.gpu_request
    tokens = request if isinstance(request, tuple) else ()
    wanted = [t for t in tokens if is_mig_token(t)]
    if not wanted:
        return None
    if not ctx.nvml_ok:
        return ctx.nvml_skip()
    gpus = ctx.inputs.gpu.gpus
    found = []
    missing = []
    for token in wanted:
        hit = mig_request(token, gpus)
        if hit is None:
            missing.append(token)
        else:
            found.append(hit)
    details = [
        f"{mig_device_name(g.index, m.index)} ({m.profile or 'profile unknown'}) of GPU {g.index}"
        for g, m in found
    ]
    if missing:
        names = ", ".join(t[:48] for t in missing)
        return Result.fail(
            f"requests MIG device(s) that do not exist: {names}",
            details=(*details, "MIG devices here: " + _all_devices(gpus)),
            fix=(
                "Ask for an existing MIG device: "
                + (
                    "`podman run --device nvidia.com/gpu=<gpu>:<mig>` or "
                    if ctx.product_of(container) == "podman"
                    else "`docker run --gpus device=<gpu>:<mig>` or "
                )
                + "NVIDIA_VISIBLE_DEVICES=MIG-<uuid>, as `nvidia-smi -L` lists them (a MIG "
                "layout change renumbers devices: recreate the container)."
            ),
            docs=DOCS_MIG,
        )
    return Result.passed(
        "MIG device " + ", ".join(mig_device_name(g.index, m.index) for g, m in found),
        details=(
            *details,
            "a MIG device is isolated memory and SMs: it is this container's alone unless "
            "another container asks for the same device",
        ),
    )


def _all_devices(gpus: tuple[GpuSample, ...]) -> str:
    names = [
        f"{mig_device_name(g.index, m.index)} {m.profile or ''}".strip()
        for g in gpus
        for m in g.mig_instances
        if m.index >= 0
    ]
    return ", ".join(names) or "none (MIG is not enabled on any GPU)"


# --------------------------------------------------------------------------------------------
# mps.daemon


@check("mps.daemon", scope=HOST)
def check_mps_daemon(ctx: CheckContext) -> Result:
    """Whether an MPS daemon runs, its clients, and what MPS changes in the figures."""
    daemons = mps_daemons(ctx)
    clients = [p for p in ctx.inputs.processes if p.sample.mps]
    if not daemons.scanned and not clients:
        return Result.skip(f"MPS not checked: {ctx.roots.proc} cannot be listed")
    if not daemons.control and not daemons.server and not clients:
        return Result.skip(
            "MPS is not in use (no MPS client or server on the GPUs, no control daemon)"
        )
    details = [
        "control daemon PID "
        + (", ".join(str(p) for p in daemons.control) if daemons.control else "not found"),
        "server PID " + (", ".join(str(p) for p in daemons.server) or "none (no client yet)"),
        "pipe directory "
        + (daemons.pipe_directory or f"unknown (default {MPS_DEFAULT_PIPE_DIRECTORY})"),
        f"{len(clients)} MPS client process(es) on the GPUs",
        *MPS_EXPLAINED,
    ]
    if clients and not daemons.control:
        return Result.warn(
            "MPS clients run but gputui sees no nvidia-cuda-mps-control process",
            details=details,
            fix=(
                "The daemon runs in another PID namespace (a container) or has exited: run "
                "gputui with --pid=host, or restart the daemon (`nvidia-cuda-mps-control -d`)."
            ),
            docs=DOCS_MPS,
        )
    return Result.info(
        f"MPS daemon running ({len(clients)} client process(es))", details=details, docs=DOCS_MPS
    )


# --------------------------------------------------------------------------------------------
# container.mps


@check("container.mps", scope=CONTAINER, running_only=True)
def check_container_mps(ctx: CheckContext, container: ContainerInfo) -> Result | None:
    """A GPU container next to an MPS daemon sees the daemon's pipes and the host's IPC."""
    clients = [p for p in ctx.processes_of(container.id) if p.sample.mps]
    asks = container.mps_pipe_directory is not None or container.mps_thread_percentage is not None
    if container.gpu_request is None and not clients and not asks:
        return None
    daemons = mps_daemons(ctx)
    if not daemons.control and not clients and not asks:
        return None  # no MPS on this host and none asked for: nothing to judge
    inside = container.mps_pipe_directory or MPS_DEFAULT_PIPE_DIRECTORY
    host_dir = daemons.pipe_directory or MPS_DEFAULT_PIPE_DIRECTORY
    details = [
        f"pipe directory in the container: {inside}"
        + ("" if container.mps_pipe_directory else " (default)"),
        f"mounted from: {container.mps_pipe_source or 'nothing'}",
        f"daemon's pipe directory: {host_dir}",
        f"IPC mode: {container.ipc_mode or 'unknown'}",
        "active thread percentage: "
        + (
            f"{container.mps_thread_percentage}% of the SMs"
            if container.mps_thread_percentage is not None
            else "not set (no limit)"
        ),
        f"{len(clients)} MPS client process(es)",
    ]
    problems = []
    if container.mps_pipe_source is None:
        problems.append(f"{inside} is not mounted from the host")
    elif _norm(container.mps_pipe_source) != _norm(host_dir):
        problems.append(f"{inside} comes from {container.mps_pipe_source}, not {host_dir}")
    if container.ipc_mode != "host":
        problems.append("the container does not share the host's IPC namespace")
    if not daemons.control and (clients or asks):
        return Result.warn(
            "asks for MPS but gputui sees no MPS daemon",
            details=details,
            fix="Start the daemon on the host: `nvidia-cuda-mps-control -d`.",
            docs=DOCS_MPS,
        )
    if problems:
        return Result.warn(
            "MPS pipe directory not shared with the daemon: " + "; ".join(problems),
            details=details,
            fix=(
                f"Run the container with `-v {host_dir}:{inside} --ipc=host` (and "
                f"CUDA_MPS_PIPE_DIRECTORY={inside}); without them its CUDA processes do not "
                "use MPS and run beside it in their own context."
            ),
            docs=DOCS_MPS,
        )
    return Result.passed(
        "shares the MPS daemon's pipes"
        + (
            f" (limited to {container.mps_thread_percentage}% of SMs)"
            if container.mps_thread_percentage is not None
            else ""
        ),
        details=details,
        docs=DOCS_MPS,
    )


def _norm(path: str) -> str:
    return path.rstrip("/") or "/"
