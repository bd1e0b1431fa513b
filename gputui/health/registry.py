"""Runtime-health checks: is the NVIDIA driver, Docker and the container toolkit set up right?

:func:`run_checks` judges what the other sources read (:class:`HealthInputs`) plus a few file
reads under :class:`HealthRoots` and ``--version`` calls, and returns one :class:`HealthCheck`
per finding, each with what it saw and the fix. The checks live in ``health_gpu``,
``health_docker`` and ``health_host``; this module orchestrates them and formats the results.

No ``pynvml``, ``docker``, ``textual`` or ``rich`` import happens here or below.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import traceback
from collections.abc import Callable, Sequence
from functools import partial

from gputui.collect.sources import HealthInputs
from gputui.health.base import (
    CheckContext,
    DistVersion,
    HealthRoots,
    RunVersion,
    Which,
    docker_skip,
    nvml_skip,
)
from gputui.health.docker import (
    check_container_gpu_unrequested,
    check_container_gpu_visible,
    check_container_runtime,
    check_container_utility_cap,
    check_docker_engine,
    check_docker_nvidia_runtime,
)
from gputui.health.gpu import (
    check_gpu_ecc,
    check_gpu_lost,
    check_gpu_mig,
    check_gpu_persistence,
    check_gpu_remap,
    check_gpu_throttle,
    check_gpu_xid,
)
from gputui.health.host import (
    check_cdi_specs,
    check_cgroup_driver,
    check_cgroup_nvml_hazard,
    check_gputui_visibility,
    check_toolkit_installed,
)
from gputui.health.nvml import (
    check_container_cuda,
    check_nvml_bindings,
    check_nvml_driver,
    check_nvml_loadable,
    check_nvml_version_mismatch,
)
from gputui.model import (
    ContainerInfo,
    GpuSample,
    HealthCheck,
    HealthStatus,
)

__all__ = [
    "CONTAINER_CHECKS",
    "GPU_CHECKS",
    "HOST_CHECKS",
    "installed_version",
    "run_checks",
    "run_version_output",
]

HostCheck = Callable[[CheckContext], HealthCheck]
GpuCheck = Callable[[CheckContext, GpuSample], HealthCheck]
ContainerCheck = Callable[[CheckContext, ContainerInfo], "HealthCheck | None"]

#: Seconds a tool gets to print its version; the health pass must never hang on a wedged tool.
VERSION_TIMEOUT_S = 3.0

#: Checks about the whole host, in display order.
HOST_CHECKS: tuple[tuple[str, HostCheck], ...] = (
    ("nvml.loadable", check_nvml_loadable),
    ("nvml.version_mismatch", check_nvml_version_mismatch),
    ("nvml.bindings", check_nvml_bindings),
    ("nvml.driver", check_nvml_driver),
    ("gpu.xid", check_gpu_xid),
    ("docker.engine", check_docker_engine),
    ("docker.nvidia_runtime", check_docker_nvidia_runtime),
    ("toolkit.installed", check_toolkit_installed),
    ("cdi.specs", check_cdi_specs),
    ("cgroup.driver", check_cgroup_driver),
    ("cgroup.nvml_hazard", check_cgroup_nvml_hazard),
    ("gputui.visibility", check_gputui_visibility),
)

#: Checks run once per GPU (id suffix ``:<index>``).
GPU_CHECKS: tuple[tuple[str, GpuCheck], ...] = (
    ("gpu.lost", check_gpu_lost),
    ("gpu.persistence", check_gpu_persistence),
    ("gpu.ecc", check_gpu_ecc),
    ("gpu.remap", check_gpu_remap),
    ("gpu.throttle", check_gpu_throttle),
    ("gpu.mig", check_gpu_mig),
)

#: Checks run once per container (id suffix ``:<name>``); the flag says "running ones only".
#: ``container.cuda`` and ``container.runtime`` also judge stopped containers: a CUDA or runtime
#: mismatch is exactly what keeps a container from starting.
CONTAINER_CHECKS: tuple[tuple[str, ContainerCheck, bool], ...] = (
    ("container.cuda", check_container_cuda, False),
    ("container.runtime", check_container_runtime, False),
    ("container.gpu_visible", check_container_gpu_visible, True),
    ("container.gpu_unrequested", check_container_gpu_unrequested, True),
    ("container.utility_cap", check_container_utility_cap, True),
)


def run_version_output(argv: Sequence[str]) -> str | None:
    """Run ``argv`` (never through a shell) briefly and return what it printed.

    Returns:
        stdout (or stderr when stdout is empty) of a zero exit, else None: missing binary,
        non-zero exit, or no answer within :data:`VERSION_TIMEOUT_S`.
    """
    try:
        done = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=VERSION_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
            # Untranslated output: the parsers look for the English word "version".
            env={**os.environ, "LC_ALL": "C"},
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout or done.stderr or None


def installed_version(distribution: str) -> str | None:
    """Version of an installed Python distribution, or None when it is not installed."""
    # Imported here: importlib.metadata costs ~20 ms at start-up, and only this check needs it.
    import importlib.metadata

    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def run_checks(
    inputs: HealthInputs,
    roots: HealthRoots = HealthRoots(),  # noqa: B008 - frozen, so a shared default is safe
    which: Which = shutil.which,
    run_version: RunVersion = run_version_output,
    dist_version: DistVersion = installed_version,
) -> tuple[HealthCheck, ...]:
    """Run every health check once.

    Args:
        inputs: What the GPU, Docker and process sources read.
        roots: Where to read /proc, /sys, daemon.json, CDI specs and /dev.
        which: Finds a command on PATH (``shutil.which`` by default).
        run_version: Runs an argv with a short timeout, returns its output or None.
        dist_version: Installed version of a Python distribution, or None.

    Returns:
        Host checks first, then per-GPU checks by GPU, then per-container checks by container.
        Checks that need a source that is down come back as ``skip`` with the reason.
    """
    ctx = CheckContext(
        inputs=inputs, roots=roots, which=which, run_version=run_version, dist_version=dist_version
    )
    results: list[HealthCheck] = []
    for check_id, host_check in HOST_CHECKS:
        results.extend(_guarded(check_id, None, partial(host_check, ctx)))

    if not ctx.nvml_ok:
        results.extend(nvml_skip(ctx, check_id) for check_id, _ in GPU_CHECKS)
    else:
        for gpu in inputs.gpu.gpus:
            for check_id, gpu_check in GPU_CHECKS:
                run = partial(_run_gpu_check, ctx, gpu, check_id, gpu_check)
                results.extend(_guarded(check_id, str(gpu.index), run))

    if not ctx.docker_ok:
        results.extend(docker_skip(ctx, check_id) for check_id, _, _ in CONTAINER_CHECKS)
    else:
        for container in inputs.containers.containers:
            for check_id, container_check, running_only in CONTAINER_CHECKS:
                if running_only and not container.running:
                    continue
                run_one = partial(container_check, ctx, container)
                results.extend(_guarded(check_id, container.name, run_one))
    return tuple(results)


def _run_gpu_check(
    ctx: CheckContext, gpu: GpuSample, check_id: str, check: GpuCheck
) -> HealthCheck:
    # A lost GPU answers nothing: its other checks would only repeat "n/a", so they skip.
    if gpu.lost and check_id != "gpu.lost":
        return HealthCheck(
            id=f"{check_id}:{gpu.index}",
            status=HealthStatus.SKIP,
            summary="GPU lost (see gpu.lost)",
            subject=str(gpu.index),
        )
    return check(ctx, gpu)


def _guarded(
    check_id: str, subject: str | None, run: Callable[[], HealthCheck | None]
) -> list[HealthCheck]:
    """Run one check; a crash becomes a visible ``fail`` instead of killing the whole pass.

    A bug in one check must not blank the health tab (the UI calls this on a timer), but it must
    not hide either: a ``skip`` would look like "nothing to check here" and the bug would never
    be reported, so it is a ``fail`` with id ``<check>.error`` and the exception text.
    """
    try:
        check = run()
    except Exception as exc:  # deliberately broad: see the docstring
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return [
            HealthCheck(
                id=f"{check_id}.error" + (f":{subject}" if subject is not None else ""),
                status=HealthStatus.FAIL,
                summary=f"Check {check_id} crashed: {type(exc).__name__}: {exc}",
                details=(f"at {os.path.basename(where.filename)}:{where.lineno} in {where.name}",),
                fix="This is a gputui bug: please report it with the text above.",
                subject=subject,
            )
        ]
    return [] if check is None else [check]
