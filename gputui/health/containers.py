"""Runtime-health checks of each container: its CUDA needs, its runtime and its GPU wiring.

Each check judges one :class:`ContainerInfo` from the Docker source's reading (never the Docker
SDK) against the engine's facts, the NVML reading and the GPU processes found in the container.
A check returns None when it does not apply to the container (e.g. no GPU request).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from gputui.health.context import CheckContext
from gputui.health.docker import CONFIGURE_RUNTIME_FIX, cdi_enabled
from gputui.health.docs import (
    DOCS_CUDA_COMPAT,
    DOCS_DOCKER_SPECIALIZED,
    DOCS_TOOLKIT_TROUBLESHOOTING,
)
from gputui.health.readings import major_minor, version_tuple
from gputui.health.registry import CONTAINER, check
from gputui.health.result import Result
from gputui.model.containers import ContainerInfo, EngineInfo

_PREDICATE = re.compile(r"^\s*([a-z]+)\s*(>=|<=|==|!=|=|>|<)\s*(\S+?)\s*$")


def _compare(have: tuple[int, ...], op: str, want: tuple[int, ...]) -> bool:
    # Pad both to equal length so that "12.4" == "12.4.0".
    width = max(len(have), len(want))
    left = have + (0,) * (width - len(have))
    right = want + (0,) * (width - len(want))
    return {
        ">=": left >= right,
        "<=": left <= right,
        ">": left > right,
        "<": left < right,
        "=": left == right,
        "==": left == right,
        "!=": left != right,
    }[op]


def evaluate_cuda_requirement(
    requirement: str, cuda: tuple[int, int], driver: tuple[int, ...] | None
) -> tuple[bool, bool, list[str]]:
    """Evaluate an ``NVIDIA_REQUIRE_CUDA`` expression leniently.

    Space-separated alternatives are ORed, comma-separated predicates ANDed (the
    libnvidia-container rules). ``cuda`` and ``driver`` predicates are evaluated; ``brand`` and
    ``arch`` cannot be known from here and are assumed to match, which the caller reports.

    Args:
        requirement: e.g. ``"cuda>=12.4 brand=tesla,driver>=470,driver<471"``.
        cuda: The driver's highest supported CUDA (major, minor).
        driver: The driver version as numbers, or None when unknown.

    Returns:
        ``(satisfied, only_by_assumption, notes)``: satisfied by some alternative; True when
        every satisfying alternative needed an assumed ``brand``/``arch`` match; notes on what
        could not be evaluated.
    """
    notes: list[str] = []
    sure = False
    assumed = False
    for alternative in requirement.split():
        ok = True
        guessed = False
        for predicate in alternative.split(","):
            match = _PREDICATE.match(predicate)
            if match is None:
                notes.append(f"ignored unparsable clause {predicate!r}")
                continue
            key, op, value = match.groups()
            if key == "cuda":
                want = version_tuple(value)
                if want is None or not _compare(cuda, op, want):
                    ok = False
            elif key == "driver":
                want = version_tuple(value)
                if driver is None or want is None:
                    guessed = True
                elif not _compare(driver, op, want):
                    ok = False
            else:  # brand=, arch=: unknown here, assume it matches
                guessed = True
        if ok and not guessed:
            sure = True
        elif ok:
            assumed = True
    return sure or assumed, assumed and not sure, notes


def _effective_runtime(container: ContainerInfo, engine: EngineInfo | None) -> str:
    if container.runtime:
        return container.runtime
    if engine is not None and engine.default_runtime:
        return engine.default_runtime
    return "runc"


#: How podman hands a container GPUs: CDI (the NVIDIA Container Toolkit writes the spec).
PODMAN_CDI_FIX = (
    "podman injects GPUs through CDI: `sudo nvidia-ctk cdi generate --output="
    "/etc/cdi/nvidia.yaml`, then recreate the container with `--device nvidia.com/gpu=all`."
)


#: A podman container's runtime that podman does not have: podman's runtimes are its own.
PODMAN_RUNTIME_FIX = (
    "Add the runtime to containers.conf ([engine.runtimes]), or recreate the container "
    "without --runtime."
)


@check("container.cuda", scope=CONTAINER, running_only=False)
def check_container_cuda(ctx: CheckContext, container: ContainerInfo) -> Result | None:
    """Does the container's image need a newer CUDA than the driver provides?"""
    if container.cuda_requirement is None and container.cuda_version is None:
        return None
    # The toolkit enforces the requirement only when it injects GPUs; a CUDA image run without
    # any GPU request never meets the driver, so there is nothing to judge.
    if container.gpu_request is None and container.runtime != "nvidia":
        return None
    reading = ctx.inputs.gpu
    driver_cuda = major_minor(reading.cuda_driver_version)
    if driver_cuda is None:
        reason = "NVML unavailable" if not reading.status.ok else "driver CUDA version unknown"
        return Result.skip(f"Cannot compare the image's CUDA: {reason}")
    image_cuda = major_minor(container.cuda_version)
    # Without NVIDIA_REQUIRE_CUDA the toolkit derives "cuda>=major.minor" from CUDA_VERSION.
    requirement = container.cuda_requirement or (
        f"cuda>={image_cuda[0]}.{image_cuda[1]}" if image_cuda else ""
    )
    have = f"{driver_cuda[0]}.{driver_cuda[1]}"
    details = [
        f"image: {container.image}",
        f"CUDA_VERSION={container.cuda_version or '(unset)'}",
        f"NVIDIA_REQUIRE_CUDA={container.cuda_requirement or '(unset)'}",
        f"driver {reading.driver_version or 'unknown'} supports CUDA up to {have}",
    ]
    satisfied, assumed, notes = evaluate_cuda_requirement(
        requirement, driver_cuda, version_tuple(reading.driver_version)
    )
    details.extend(notes)
    need = _needed_cuda(requirement) or (container.cuda_version or "?")
    if not satisfied:
        return Result.fail(
            f"Image needs CUDA {need}, driver supports only {have}",
            details=(
                *details,
                'the toolkit refuses to start it: "requirement error: unsatisfied condition: '
                f'{requirement.split()[0] if requirement else "cuda"}"',
            ),
            fix=(
                f"Upgrade the host driver to one supporting CUDA {need}, or use an image built "
                f"for CUDA ≤ {have}. Last resort: NVIDIA_DISABLE_REQUIRE=1 (works only within "
                "CUDA minor-version compatibility)."
            ),
            docs=DOCS_CUDA_COMPAT,
        )
    if assumed:
        return Result.warn(
            (
                f"Image needs CUDA {need} > {have}; only a brand/driver forward-compat clause "
                "could allow it"
            ),
            details=(*details, "brand/arch clauses are assumed to match (not checked here)"),
            fix=(
                f"Upgrade the driver to one supporting CUDA {need}, or make sure the image "
                "ships the CUDA forward-compat package (datacenter GPUs only)."
            ),
            docs=DOCS_CUDA_COMPAT,
        )
    return Result.passed(f"Image CUDA {need} ≤ driver's {have}", details=tuple(details))


def _needed_cuda(requirement: str) -> str | None:
    match = re.search(r"cuda\s*>=?\s*(\d+(?:\.\d+)*)", requirement)
    return match.group(1) if match else None


@check("container.runtime", scope=CONTAINER, running_only=False)
def check_container_runtime(ctx: CheckContext, container: ContainerInfo) -> Result | None:
    """A container created with a runtime the engine no longer has cannot (re)start."""
    engine = ctx.engine_of(container)
    runtime = container.runtime
    if not runtime or runtime == "runc" or engine is None or not engine.runtimes:
        return None
    if runtime in engine.runtimes:
        return Result.passed(f"Runtime {runtime} is registered")
    return Result.fail(
        f"Created with runtime {runtime!r}, which the engine does not have",
        details=(
            f"engine runtimes: {', '.join(engine.runtimes)}",
            f"container status: {container.status}; it cannot be started again as is",
        ),
        fix=(
            PODMAN_RUNTIME_FIX
            if ctx.product_of(container) == "podman"
            else CONFIGURE_RUNTIME_FIX
            if runtime == "nvidia"
            else "Register the runtime in daemon.json "
            "and restart docker, or recreate the container without --runtime."
        ),
        docs=DOCS_TOOLKIT_TROUBLESHOOTING,
    )


@check("container.gpu_visible", scope=CONTAINER, running_only=True)
def check_container_gpu_visible(ctx: CheckContext, container: ContainerInfo) -> Result | None:
    """Can a container that asked for GPUs actually get them injected?"""
    if container.gpu_request is None:
        return None
    engine = ctx.engine_of(container)
    product = ctx.product_of(container)
    if product in ("containerd", "cri-o"):
        # The runtime a CRI or ctr container runs under (nvidia-container-runtime as
        # containerd's or CRI-O's handler, a device plugin's hook) is not in its bundle or
        # the CRI's list: no verdict.
        return None
    runtime = _effective_runtime(container, engine)
    via = container.gpu_request_via or "unknown"
    request = (
        container.gpu_request
        if isinstance(container.gpu_request, str)
        else ",".join(container.gpu_request)
    )
    details = [
        f"requested GPUs: {request} via {via}",
        f"runtime: {runtime}",
        f"device paths: {', '.join(container.gpu_device_paths) or '(none)'}",
    ]
    processes = ctx.processes_of(container.id)

    # Every outcome that needs a fix links the page on how Docker hands GPUs to containers.
    if processes:
        return Result.passed(
            f"GPUs visible: {len(processes)} GPU process(es) running", details=details
        )
    if via == "env" and runtime != "nvidia" and not container.gpu_device_paths:
        details.append(
            f"NVIDIA_VISIBLE_DEVICES is set, but runtime {runtime!r} ignores it: only the "
            "nvidia runtime (or --gpus / CDI) injects devices and driver libraries"
        )
        return Result.fail(
            "GPUs requested (NVIDIA_VISIBLE_DEVICES) but not injected",
            details=details,
            fix=(
                PODMAN_CDI_FIX
                if product == "podman"
                else "Recreate the container with `--gpus all` (compose: deploy.resources."
                "reservations.devices with capabilities: [gpu]) or `--runtime=nvidia`."
            ),
            docs=DOCS_DOCKER_SPECIALIZED,
        )
    # podman hands out GPUs through CDI, not a runtime or Docker's hook: podman.cdi judges it.
    if via == "device_requests" and product != "podman":
        has_runtime = engine is not None and "nvidia" in engine.runtimes
        hook = ctx.which("nvidia-container-runtime-hook")
        if not has_runtime and not cdi_enabled(engine) and hook is None:
            details.append(
                "the engine has no nvidia runtime, CDI is off and no "
                "nvidia-container-runtime-hook is on PATH"
            )
            return Result.warn(
                "--gpus request, but the engine shows no way to inject GPUs",
                details=details,
                fix="Install the NVIDIA Container Toolkit, then\n"
                + (PODMAN_CDI_FIX if product == "podman" else CONFIGURE_RUNTIME_FIX),
                docs=DOCS_DOCKER_SPECIALIZED,
            )
    if via == "cdi" and cdi_enabled(engine) is False:
        details.append("the engine reports CDI disabled (no CDI spec dirs)")
        return Result.warn(
            "CDI devices requested, but CDI is disabled in the engine",
            details=details,
            fix=(
                'Enable CDI: add "features": {"cdi": true} to daemon.json (default on since '
                "Docker 28) and `sudo systemctl restart docker`."
            ),
            docs=DOCS_DOCKER_SPECIALIZED,
        )
    if engine is not None and engine.runtimes and runtime not in engine.runtimes:
        return Result.fail(
            f"Runtime {runtime!r} is not registered with the engine",
            details=details,
            fix=(
                PODMAN_RUNTIME_FIX + "\n" + PODMAN_CDI_FIX
                if product == "podman"
                else CONFIGURE_RUNTIME_FIX
            ),
            docs=DOCS_DOCKER_SPECIALIZED,
        )
    if via == "devices":
        names = {Path(p).name for p in container.gpu_device_paths}
        missing = [n for n in ("nvidiactl", "nvidia-uvm") if n not in names]
        details.append("device nodes only: driver libraries come from the image, if at all")
        if missing:
            return Result.warn(
                f"GPU device nodes passed without {', '.join(missing)}: CUDA will not start",
                details=details,
                fix=(
                    (
                        "Prefer `--device nvidia.com/gpu=all` (CDI)"
                        if product == "podman"
                        else "Prefer `--gpus all`"
                    )
                    + "; with --device also pass "
                    + " ".join(f"--device /dev/{n}" for n in missing)
                ),
                docs=DOCS_DOCKER_SPECIALIZED,
            )
        return Result.info("GPUs passed as raw device nodes (--device)", details=details)
    return Result.passed(f"GPU injection configured ({via}, runtime {runtime})", details=details)


@check("container.gpu_unrequested", scope=CONTAINER, running_only=True)
def check_container_gpu_unrequested(ctx: CheckContext, container: ContainerInfo) -> Result | None:
    """A container that uses GPUs without having asked for them (privileged / device mounts)."""
    processes = ctx.processes_of(container.id)
    if not processes:
        return None
    gpus = sorted({p.sample.gpu_index for p in processes})
    pids = sorted({p.pid for p in processes})
    if container.gpu_request is not None:
        return Result.passed(f"Uses GPU(s) {', '.join(map(str, gpus))}, which it requested")
    how = (
        f"device mounts {', '.join(container.gpu_device_paths)}"
        if container.gpu_device_paths
        else "--privileged or bind-mounted /dev"
    )
    return Result.warn(
        f"Uses GPU(s) {', '.join(map(str, gpus))} without requesting any",
        details=(
            f"GPU processes (host PIDs): {', '.join(map(str, pids))}",
            f"no --gpus / NVIDIA_VISIBLE_DEVICES / CDI request; it probably sees GPUs via {how}",
            "schedulers and other users cannot tell this GPU is taken",
        ),
        fix=(
            "Recreate it with an explicit request, e.g. "
            + _request_example(ctx.product_of(container), gpus, pod=container.k8s_pod is not None)
            + ", and drop --privileged if it was only there for the GPU."
        ),
        docs=DOCS_DOCKER_SPECIALIZED,
    )


def _request_example(product: str, gpus: Sequence[int], *, pod: bool = False) -> str:
    """How a container asks for these GPUs, in its engine's words (a pod: in its spec)."""
    if pod:
        return f"`resources.limits: {{nvidia.com/gpu: {len(gpus)}}}` in the pod's spec"
    if product == "podman":
        return " ".join(f"`--device nvidia.com/gpu={g}`" for g in gpus)
    if product == "containerd":
        return f"`ctr run --gpus {gpus[0]}`" if len(gpus) == 1 else "`ctr run --gpus N` per GPU"
    return f"`--gpus '\"device={','.join(map(str, gpus))}\"'`"


@check("container.utility_cap", scope=CONTAINER, running_only=True)
def check_container_utility_cap(ctx: CheckContext, container: ContainerInfo) -> Result | None:
    """Does a GPU container get the ``utility`` capability (nvidia-smi, NVML)?"""
    if container.gpu_request is None and container.runtime != "nvidia":
        return None
    caps = container.nvidia_capabilities
    if not caps:
        return Result.passed("Default driver capabilities (compute,utility)")
    if "all" in caps or "utility" in caps:
        return Result.passed(f"Driver capabilities include utility ({','.join(caps)})")
    wanted = ",".join(dict.fromkeys((*caps, "utility")))
    return Result.warn(
        "No `utility` capability: nvidia-smi and NVML are missing inside",
        details=(f"NVIDIA_DRIVER_CAPABILITIES={','.join(caps)}",),
        fix=f"Recreate with `-e NVIDIA_DRIVER_CAPABILITIES={wanted}` (or compute,utility).",
        docs=DOCS_DOCKER_SPECIALIZED,
    )
