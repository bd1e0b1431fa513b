"""Runs the registered health checks: is the driver, Docker and the container toolkit set up right?

:func:`run_checks` judges what the other sources read (:class:`HealthInputs`) plus a few file
reads under :class:`HealthRoots` and ``--version`` calls, and returns one :class:`HealthCheck`
per finding, each with what it saw and the fix. The checks register themselves with
:func:`gputui.health.registry.check`; :data:`CHECK_MODULES` says which modules hold them and in
which order their results are shown.

No ``pynvml``, ``docker``, ``textual`` or ``rich`` import happens here or below.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from functools import partial

from gputui.collect.sources import HealthInputs
from gputui.health import (
    containers,
    docker,
    gpu,
    host,
    kernel_log,
    mig_mps,
    nvml,
    podman,
    registry,
)
from gputui.health.context import CheckContext, DistVersion, HealthRoots, RunVersion, Which
from gputui.health.registry import Check, Scope
from gputui.health.result import Result
from gputui.model.gpu import GpuSample
from gputui.model.status import HealthCheck

#: The modules holding checks, in display order: within each scope, a module's checks come in the
#: order they are defined there.
CHECK_MODULES: tuple[str, ...] = tuple(
    m.__name__ for m in (nvml, gpu, docker, podman, host, kernel_log, containers, mig_mps)
)

#: Seconds a tool gets to print its version; the health pass must never hang on a wedged tool.
VERSION_TIMEOUT_S = 3.0


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
    """Version of an installed Python distribution, or None when it is not installed.

    Found as ``importlib.metadata.version`` finds it (the first ``.dist-info`` or ``.egg-info``
    of that name along ``sys.path``), from the entry's name, or its metadata file when the name
    carries no version. Importing ``importlib.metadata`` costs ~20 ms, a tenth of a one-shot.
    """
    wanted = _dist_key(distribution)
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:  # a zip file, a missing directory
            continue
        for name in names:
            stem, dot, suffix = name.rpartition(".")
            if not dot or suffix not in ("dist-info", "egg-info"):
                continue
            project, _, rest = stem.partition("-")
            if _dist_key(project) != wanted:
                continue
            version = rest.partition("-")[0]  # egg-info: name-version-pyX.Y
            return version or _metadata_version(os.path.join(entry or ".", name))
    return None


def _dist_key(name: str) -> str:
    """A distribution name as packaging compares them: ``nvidia-ml-py`` is ``nvidia_ml_py``."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _metadata_version(path: str) -> str | None:
    """The ``Version:`` header of an installed distribution's metadata (a file or a directory)."""
    candidates = (
        [path]
        if os.path.isfile(path)
        else [
            os.path.join(path, "METADATA"),
            os.path.join(path, "PKG-INFO"),
        ]
    )
    for candidate in candidates:
        try:
            with open(candidate, encoding="utf-8", errors="replace") as handle:
                for _, line in zip(range(200), handle, strict=False):  # headers come first
                    if line.startswith("Version:"):
                        return line.partition(":")[2].strip()[:64] or None
                    if not line.strip():
                        break
        except OSError:
            continue
    return None


def run_checks(
    inputs: HealthInputs,
    roots: HealthRoots = HealthRoots(),  # noqa: B008 - frozen, so a shared default is safe
    which: Which = shutil.which,
    run_version: RunVersion = run_version_output,
    dist_version: DistVersion = installed_version,
) -> tuple[HealthCheck, ...]:
    """Run every registered health check once.

    Args:
        inputs: What the GPU, Docker and process sources read.
        roots: Where to read /proc, /sys, daemon.json, CDI specs and /dev.
        which: Finds a command on PATH (``shutil.which`` by default).
        run_version: Runs an argv with a short timeout, returns its output or None.
        dist_version: Installed version of a Python distribution, or None.

    Returns:
        Host checks first, then per-GPU checks by GPU, then per-container checks by container,
        each group in registry order. Checks that need a source that is down come back as
        ``skip`` with the reason.
    """
    ctx = CheckContext(
        inputs=inputs, roots=roots, which=which, run_version=run_version, dist_version=dist_version
    )
    results: list[HealthCheck] = []
    for host_check in registry.in_order(Scope.HOST, CHECK_MODULES):
        results.extend(_guarded(host_check.id, None, partial(host_check.run, ctx)))

    gpu_checks = registry.in_order(Scope.GPU, CHECK_MODULES)
    if not ctx.nvml_ok:
        results.extend(ctx.nvml_skip().to_check(c.id) for c in gpu_checks)
    else:
        for sample in inputs.gpu.gpus:
            for gpu_check in gpu_checks:
                run = partial(_run_gpu_check, ctx, sample, gpu_check)
                results.extend(_guarded(gpu_check.id, str(sample.index), run))

    container_checks = registry.in_order(Scope.CONTAINER, CHECK_MODULES)
    # Any engine that answered has containers to judge (each against its own engine's facts),
    # whether or not the first source is the Docker engine (a node with only containerd).
    sources = inputs.container_sources
    answered = any(s.ok for s in sources.values()) if sources else ctx.docker_ok
    if not answered:
        results.extend(ctx.docker_skip().to_check(c.id) for c in container_checks)
    else:
        for container in inputs.containers.containers:
            for container_check in container_checks:
                if container_check.running_only and not container.running:
                    continue
                run_one = partial(container_check.run, ctx, container)
                # The pod too: two pods' `server` containers are two subjects, not one.
                subject = container.qualified_name
                results.extend(_guarded(container_check.id, subject, run_one))
    return tuple(results)


def _run_gpu_check(ctx: CheckContext, sample: GpuSample, gpu_check: Check) -> Result | None:
    # A lost GPU answers nothing: its other checks would only repeat "n/a", so they skip.
    if sample.lost and not gpu_check.on_lost_gpu:
        return Result.skip("GPU lost (see gpu.lost)")
    return gpu_check.run(ctx, sample)


def _guarded(
    check_id: str, subject: str | None, run: Callable[[], Result | None]
) -> list[HealthCheck]:
    """Run one check and stamp its id and subject; a crash becomes a visible ``fail``.

    A bug in one check must not blank the health tab (the UI calls this on a timer), but it must
    not hide either: a ``skip`` would look like "nothing to check here" and the bug would never
    be reported, so it is a ``fail`` with id ``<check>.error`` and the exception text.
    """
    try:
        result = run()
    except Exception as exc:  # deliberately broad: see the docstring
        import traceback  # only a crashed check needs it

        where = traceback.extract_tb(exc.__traceback__)[-1]
        crashed = Result.fail(
            f"Check {check_id} crashed: {type(exc).__name__}: {exc}",
            details=(f"at {os.path.basename(where.filename)}:{where.lineno} in {where.name}",),
            fix="This is a gputui bug: please report it with the text above.",
        )
        return [crashed.to_check(f"{check_id}.error", subject)]
    return [] if result is None else [result.to_check(check_id, subject)]
