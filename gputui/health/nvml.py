"""Runtime-health checks about the NVIDIA driver, NVML, its Python bindings and image CUDA needs.

None of them talks to NVML: they read the :class:`GpuReading` the NVML source made, plus the kernel
module's version files under ``HealthRoots.proc``/``.sys`` and installed package metadata.
"""

from __future__ import annotations

import re
from pathlib import Path

from gputui.health.base import (
    DOCS_CUDA_COMPAT,
    DOCS_NVML_PYTHON,
    DOCS_NVML_UNKNOWN_ERROR,
    DOCS_TOOLKIT_TROUBLESHOOTING,
    FAIL,
    INFO,
    PASS,
    SKIP,
    WARN,
    CheckContext,
    major_minor,
    nvml_skip,
    read_text,
    version_tuple,
)
from gputui.model import ContainerInfo, HealthCheck, HealthStatus

# --------------------------------------------------------------------------------------------
# nvml.loadable

_INSTALL_DRIVER_FIX = (
    "Install the NVIDIA driver on the host (e.g. `sudo ubuntu-drivers install`, or your distro's "
    "nvidia-driver package) and reboot.\n"
    "Inside a container: start it with `--gpus all` (or `--runtime=nvidia`) and "
    "NVIDIA_DRIVER_CAPABILITIES including `utility` (e.g. compute,utility), so libnvidia-ml is "
    "injected."
)

#: NVML init error kind → (summary, fix, docs).
_LOAD_FAILURES: dict[str, tuple[str, str, str | None]] = {
    "LibraryNotFound": (
        "NVIDIA driver / NVML library (libnvidia-ml.so.1) not found",
        _INSTALL_DRIVER_FIX,
        DOCS_TOOLKIT_TROUBLESHOOTING,
    ),
    "DriverNotLoaded": (
        "NVIDIA kernel module is not loaded",
        "Load it: `sudo modprobe nvidia` (check `dmesg | grep -i nvrm` for why it failed); "
        "after a driver install or kernel update, reboot. With Secure Boot the module must be "
        "signed (or enrolled with mokutil).",
        DOCS_TOOLKIT_TROUBLESHOOTING,
    ),
    "NoPermission": (
        "No permission to open the NVIDIA device nodes",
        "Check `ls -l /dev/nvidia*` (usually crw-rw-rw-); run gputui as a user allowed to open "
        "them (e.g. in the `video` group, or root). In a container, the devices must be injected "
        "(`--gpus all`), not just the libraries.",
        None,
    ),
    "LibRmVersionMismatch": (
        "Driver/library version mismatch: NVML cannot talk to the loaded kernel module",
        "Reboot (or stop every GPU user and `sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset "
        "nvidia && sudo modprobe nvidia`). See nvml.version_mismatch.",
        None,
    ),
    "Unknown": (
        'NVML reports "Unknown Error"',
        "In a container this is usually the cgroup device access lost after "
        "`systemctl daemon-reload` (see cgroup.nvml_hazard): recreate the container "
        "(`docker rm -f` + run again; a restart is not enough). On the host: check "
        "`dmesg | grep -i nvrm` and `nvidia-smi`.",
        DOCS_NVML_UNKNOWN_ERROR,
    ),
}


def _nvml_kind(kind: str | None) -> str | None:
    """Normalise ``NVMLError_LibraryNotFound`` / ``LibraryNotFound`` to the bare name."""
    if kind is None:
        return None
    return kind.removeprefix("NVMLError_")


def check_nvml_loadable(ctx: CheckContext) -> HealthCheck:
    """Can NVML be initialised? The root of every GPU check."""
    reading = ctx.inputs.gpu
    status = reading.status
    if status.ok:
        return HealthCheck(
            id="nvml.loadable",
            status=PASS,
            summary="NVML initialised",
            details=(
                f"driver {reading.driver_version or 'unknown'}",
                f"NVML {reading.nvml_version or 'unknown'}",
                f"{len(reading.gpus)} GPU(s)",
            ),
        )
    kind = _nvml_kind(status.kind)
    details = tuple(
        line
        for line in (
            f"error kind: {status.kind}" if status.kind else None,
            f"error: {status.error}" if status.error else None,
        )
        if line
    )
    known = _LOAD_FAILURES.get(kind or "")
    if known is not None:
        summary, fix, docs = known
        return HealthCheck(
            id="nvml.loadable", status=FAIL, summary=summary, details=details, fix=fix, docs=docs
        )
    return HealthCheck(
        id="nvml.loadable",
        status=FAIL,
        summary=f"NVML could not be initialised: {status.error or kind or 'unknown error'}",
        details=details,
        fix=status.fix or _INSTALL_DRIVER_FIX,
        docs=DOCS_TOOLKIT_TROUBLESHOOTING,
    )


# --------------------------------------------------------------------------------------------
# nvml.version_mismatch

# "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (...)"
_NVRM_VERSION = re.compile(r"NVRM version:.*?\s(\d+\.\d+(?:\.\d+)?)(?:\s|$)", re.MULTILINE)


def kernel_module_versions(ctx: CheckContext) -> dict[str, str]:
    """The loaded kernel module's version as procfs and sysfs report it, by file read."""
    found: dict[str, str] = {}
    proc_file = Path(ctx.roots.proc) / "driver" / "nvidia" / "version"
    text, _ = read_text(proc_file)
    if text is not None and (match := _NVRM_VERSION.search(text)):
        found[str(proc_file)] = match.group(1)
    sys_file = Path(ctx.roots.sys) / "module" / "nvidia" / "version"
    text, _ = read_text(sys_file)
    if text is not None and text.strip():
        found[str(sys_file)] = text.strip()
    return found


def check_nvml_version_mismatch(ctx: CheckContext) -> HealthCheck:
    """Does the loaded kernel module match the user-space driver library?

    The classic case: the driver package was upgraded, the old module is still loaded, and
    every NVML call fails with "Driver/library version mismatch" until a reboot.
    """
    check_id = "nvml.version_mismatch"
    reading = ctx.inputs.gpu
    modules = kernel_module_versions(ctx)
    seen = tuple(f"kernel module {v} ({path})" for path, v in modules.items())
    fix = (
        "Reboot, or stop every GPU user (containers, nvidia-persistenced, Xorg) and reload the "
        "modules: `sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && sudo modprobe "
        "nvidia`."
    )
    if _nvml_kind(reading.status.kind) == "LibRmVersionMismatch":
        return HealthCheck(
            id=check_id,
            status=FAIL,
            summary="Driver/library version mismatch: driver upgraded, old kernel module loaded",
            details=(*seen, f"NVML: {reading.status.error or 'LibRmVersionMismatch'}"),
            fix=fix,
        )
    library = reading.driver_version
    mismatched = sorted({v for v in modules.values() if library and v != library})
    if mismatched:
        return HealthCheck(
            id=check_id,
            status=FAIL,
            summary=(
                f"Kernel module {', '.join(mismatched)} ≠ driver library {library}: "
                "reboot pending after a driver upgrade"
            ),
            details=(*seen, f"user-space driver (NVML): {library}"),
            fix=fix,
        )
    if library and modules:
        return HealthCheck(
            id=check_id,
            status=PASS,
            summary=f"Kernel module and driver library agree ({library})",
            details=seen,
        )
    if not modules and not reading.status.ok:
        return HealthCheck(
            id=check_id,
            status=SKIP,
            summary="No NVIDIA kernel module version found and NVML unavailable",
            details=(
                f"{Path(ctx.roots.proc) / 'driver/nvidia/version'}: absent or unreadable",
                f"{Path(ctx.roots.sys) / 'module/nvidia/version'}: absent or unreadable",
            ),
        )
    if reading.status.ok:
        # NVML initialised, which it refuses to do on a real mismatch: not comparable, but fine.
        return HealthCheck(
            id=check_id,
            status=PASS,
            summary="NVML initialised, so library and kernel module are compatible",
            details=(*seen, "kernel module version files not readable from here")
            if not modules
            else seen,
        )
    return HealthCheck(
        id=check_id,
        status=INFO,
        summary="Kernel module loaded; NVML gave no library version to compare",
        details=seen,
    )


# --------------------------------------------------------------------------------------------
# nvml.bindings

_BINDINGS_FIX = (
    "pip uninstall -y pynvml nvidia-ml-py3 && pip install --force-reinstall nvidia-ml-py"
)


def check_nvml_bindings(ctx: CheckContext) -> HealthCheck:
    """Are the Python NVML bindings the official ones, and do they fit the driver?"""
    check_id = "nvml.bindings"
    official = ctx.dist_version("nvidia-ml-py")
    shim = ctx.dist_version("pynvml")
    fork = ctx.dist_version("nvidia-ml-py3")
    details = [f"nvidia-ml-py {official or 'not installed'}"]
    problems: list[tuple[HealthStatus, str, str]] = []
    if fork is not None:
        details.append(f"nvidia-ml-py3 {fork} installed (stale 2017 fork)")
        problems.append(
            (WARN, f"Stale nvidia-ml-py3 {fork} installed: it overwrites pynvml.py", _BINDINGS_FIX)
        )
    if shim is not None:
        shim_major = version_tuple(shim)
        # pynvml < 12 ships its own pynvml.py that shadows the official module; >= 12 is a
        # deprecated meta-package whose import hook prints a FutureWarning on every import.
        how = (
            "its own pynvml.py shadows nvidia-ml-py"
            if shim_major is not None and shim_major[0] < 12
            else "deprecated shim; prints a FutureWarning on import"
        )
        details.append(f"pynvml {shim} installed ({how})")
        problems.append((WARN, f"Deprecated pynvml {shim} installed: {how}", _BINDINGS_FIX))
    if official is None and fork is None and shim is None:
        problems.append(
            (WARN, "nvidia-ml-py is not installed: no NVML bindings", "pip install nvidia-ml-py")
        )
    binding = ctx.inputs.gpu.binding_problems
    if binding:
        driver = ctx.inputs.gpu.driver_version or "unknown"
        details.append(f"missing NVML symbols: {', '.join(binding)}")
        problems.append(
            (
                WARN,
                f"nvidia-ml-py {official or '?'} is newer than driver {driver}: "
                f"{len(binding)} NVML function(s) missing, some metrics unavailable",
                "Upgrade the NVIDIA driver, or pin an older nvidia-ml-py matching it "
                "(`pip install 'nvidia-ml-py<X'` with X your driver's major.minor series).",
            )
        )
    if not problems:
        return HealthCheck(
            id=check_id,
            status=PASS,
            summary=f"Official NVML bindings nvidia-ml-py {official}",
            details=tuple(details),
            docs=DOCS_NVML_PYTHON,
        )
    worst = problems[0]
    fixes = tuple(dict.fromkeys(p[2] for p in problems))  # de-duplicated, order kept
    summary = worst[1] if len(problems) == 1 else f"{worst[1]} (+{len(problems) - 1} more)"
    return HealthCheck(
        id=check_id,
        status=worst[0],
        summary=summary,
        details=tuple(details) + tuple(p[1] for p in problems[1:]),
        fix="\n".join(fixes),
        docs=DOCS_NVML_PYTHON,
    )


# --------------------------------------------------------------------------------------------
# nvml.driver


def check_nvml_driver(ctx: CheckContext) -> HealthCheck:
    """Report the driver version and the newest CUDA it supports."""
    if not ctx.nvml_ok:
        return nvml_skip(ctx, "nvml.driver")
    reading = ctx.inputs.gpu
    cuda = reading.cuda_driver_version or "unknown"
    return HealthCheck(
        id="nvml.driver",
        status=INFO,
        summary=f"Driver {reading.driver_version or 'unknown'}, CUDA up to {cuda}",
        details=(
            f"driver {reading.driver_version or 'unknown'}",
            f"max CUDA {cuda}: containers built for a newer CUDA need a newer driver "
            "(or the CUDA forward-compat package)",
            f"NVML {reading.nvml_version or 'unknown'}",
        ),
        docs=DOCS_CUDA_COMPAT,
    )


# --------------------------------------------------------------------------------------------
# container.cuda:<name>

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


def check_container_cuda(ctx: CheckContext, container: ContainerInfo) -> HealthCheck | None:
    """Does the container's image need a newer CUDA than the driver provides?"""
    if container.cuda_requirement is None and container.cuda_version is None:
        return None
    # The toolkit enforces the requirement only when it injects GPUs; a CUDA image run without
    # any GPU request never meets the driver, so there is nothing to judge.
    if container.gpu_request is None and container.runtime != "nvidia":
        return None
    check_id = f"container.cuda:{container.name}"
    reading = ctx.inputs.gpu
    driver_cuda = major_minor(reading.cuda_driver_version)
    if driver_cuda is None:
        reason = "NVML unavailable" if not reading.status.ok else "driver CUDA version unknown"
        return HealthCheck(
            id=check_id,
            status=SKIP,
            summary=f"Cannot compare the image's CUDA: {reason}",
            subject=container.name,
        )
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
        return HealthCheck(
            id=check_id,
            status=FAIL,
            summary=f"Image needs CUDA {need}, driver supports only {have}",
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
            subject=container.name,
        )
    if assumed:
        return HealthCheck(
            id=check_id,
            status=WARN,
            summary=(
                f"Image needs CUDA {need} > {have}; only a brand/driver forward-compat clause "
                "could allow it"
            ),
            details=(*details, "brand/arch clauses are assumed to match (not checked here)"),
            fix=(
                f"Upgrade the driver to one supporting CUDA {need}, or make sure the image "
                "ships the CUDA forward-compat package (datacenter GPUs only)."
            ),
            docs=DOCS_CUDA_COMPAT,
            subject=container.name,
        )
    return HealthCheck(
        id=check_id,
        status=PASS,
        summary=f"Image CUDA {need} ≤ driver's {have}",
        details=tuple(details),
        subject=container.name,
    )


def _needed_cuda(requirement: str) -> str | None:
    match = re.search(r"cuda\s*>=?\s*(\d+(?:\.\d+)*)", requirement)
    return match.group(1) if match else None
