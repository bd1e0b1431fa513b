"""Runtime-health checks about the NVIDIA driver, NVML and its Python bindings.

None of them talks to NVML: they read the :class:`GpuReading` the NVML source made, plus the kernel
module's version files under ``HealthRoots.proc``/``.sys`` and installed package metadata.
"""

from __future__ import annotations

import re
from pathlib import Path

from gputui.health.context import CheckContext
from gputui.health.docs import (
    DOCS_CUDA_COMPAT,
    DOCS_NVML_PYTHON,
    DOCS_NVML_UNKNOWN_ERROR,
    DOCS_TOOLKIT_TROUBLESHOOTING,
)
from gputui.health.readings import read_text, version_tuple
from gputui.health.registry import HOST, check
from gputui.health.result import Result

# --------------------------------------------------------------------------------------------
# nvml.loadable

_INSTALL_DRIVER_FIX = (
    "Install the NVIDIA driver on the host (e.g. `sudo ubuntu-drivers install`, or your distro's "
    "nvidia-driver package) and reboot.\n"
    "Inside a container: start it with `--gpus all` (or `--runtime=nvidia`; podman: "
    "`--device nvidia.com/gpu=all`) and "
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
        "(`--gpus all`; podman: `--device nvidia.com/gpu=all`), not just the libraries.",
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


@check("nvml.loadable", scope=HOST)
def check_nvml_loadable(ctx: CheckContext) -> Result:
    """Can NVML be initialised? The root of every GPU check."""
    reading = ctx.inputs.gpu
    status = reading.status
    if status.ok:
        return Result.passed(
            "NVML initialised",
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
        return Result.fail(summary, details=details, fix=fix, docs=docs)
    return Result.fail(
        f"NVML could not be initialised: {status.error or kind or 'unknown error'}",
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


@check("nvml.version_mismatch", scope=HOST)
def check_nvml_version_mismatch(ctx: CheckContext) -> Result:
    """Does the loaded kernel module match the user-space driver library?

    The classic case: the driver package was upgraded, the old module is still loaded, and
    every NVML call fails with "Driver/library version mismatch" until a reboot.
    """
    reading = ctx.inputs.gpu
    modules = kernel_module_versions(ctx)
    seen = tuple(f"kernel module {v} ({path})" for path, v in modules.items())
    fix = (
        "Reboot, or stop every GPU user (containers, nvidia-persistenced, Xorg) and reload the "
        "modules: `sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && sudo modprobe "
        "nvidia`."
    )
    if _nvml_kind(reading.status.kind) == "LibRmVersionMismatch":
        return Result.fail(
            "Driver/library version mismatch: driver upgraded, old kernel module loaded",
            details=(*seen, f"NVML: {reading.status.error or 'LibRmVersionMismatch'}"),
            fix=fix,
        )
    library = reading.driver_version
    mismatched = sorted({v for v in modules.values() if library and v != library})
    if mismatched:
        return Result.fail(
            (
                f"Kernel module {', '.join(mismatched)} ≠ driver library {library}: "
                "reboot pending after a driver upgrade"
            ),
            details=(*seen, f"user-space driver (NVML): {library}"),
            fix=fix,
        )
    if library and modules:
        return Result.passed(f"Kernel module and driver library agree ({library})", details=seen)
    if not modules and not reading.status.ok:
        return Result.skip(
            "No NVIDIA kernel module version found and NVML unavailable",
            details=(
                f"{Path(ctx.roots.proc) / 'driver/nvidia/version'}: absent or unreadable",
                f"{Path(ctx.roots.sys) / 'module/nvidia/version'}: absent or unreadable",
            ),
        )
    if reading.status.ok:
        # NVML initialised, which it refuses to do on a real mismatch: not comparable, but fine.
        return Result.passed(
            "NVML initialised, so library and kernel module are compatible",
            details=(*seen, "kernel module version files not readable from here")
            if not modules
            else seen,
        )
    return Result.info(
        "Kernel module loaded; NVML gave no library version to compare", details=seen
    )


# --------------------------------------------------------------------------------------------
# nvml.bindings

_BINDINGS_FIX = (
    "pip uninstall -y pynvml nvidia-ml-py3 && pip install --force-reinstall nvidia-ml-py"
)


@check("nvml.bindings", scope=HOST)
def check_nvml_bindings(ctx: CheckContext) -> Result:
    """Are the Python NVML bindings the official ones, and do they fit the driver?"""
    official = ctx.dist_version("nvidia-ml-py")
    shim = ctx.dist_version("pynvml")
    fork = ctx.dist_version("nvidia-ml-py3")
    details = [f"nvidia-ml-py {official or 'not installed'}"]
    # Every problem here is a warning: gputui still works, with fewer or noisier metrics.
    problems: list[tuple[str, str]] = []  # (summary, fix)
    if fork is not None:
        details.append(f"nvidia-ml-py3 {fork} installed (stale 2017 fork)")
        problems.append(
            (f"Stale nvidia-ml-py3 {fork} installed: it overwrites pynvml.py", _BINDINGS_FIX)
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
        problems.append((f"Deprecated pynvml {shim} installed: {how}", _BINDINGS_FIX))
    if official is None and fork is None and shim is None:
        problems.append(
            ("nvidia-ml-py is not installed: no NVML bindings", "pip install nvidia-ml-py")
        )
    binding = ctx.inputs.gpu.binding_problems
    if binding:
        driver = ctx.inputs.gpu.driver_version or "unknown"
        details.append(f"missing NVML symbols: {', '.join(binding)}")
        problems.append(
            (
                f"nvidia-ml-py {official or '?'} is newer than driver {driver}: "
                f"{len(binding)} NVML function(s) missing, some metrics unavailable",
                "Upgrade the NVIDIA driver, or pin an older nvidia-ml-py matching it "
                "(`pip install 'nvidia-ml-py<X'` with X your driver's major.minor series).",
            )
        )
    if not problems:
        return Result.passed(
            f"Official NVML bindings nvidia-ml-py {official}",
            details=details,
            docs=DOCS_NVML_PYTHON,
        )
    first = problems[0][0]
    fixes = tuple(dict.fromkeys(fix for _, fix in problems))  # de-duplicated, order kept
    summary = first if len(problems) == 1 else f"{first} (+{len(problems) - 1} more)"
    return Result.warn(
        summary,
        details=(*details, *(more for more, _ in problems[1:])),
        fix="\n".join(fixes),
        docs=DOCS_NVML_PYTHON,
    )


# --------------------------------------------------------------------------------------------
# nvml.driver


@check("nvml.driver", scope=HOST)
def check_nvml_driver(ctx: CheckContext) -> Result:
    """Report the driver version and the newest CUDA it supports."""
    if not ctx.nvml_ok:
        return ctx.nvml_skip()
    reading = ctx.inputs.gpu
    cuda = reading.cuda_driver_version or "unknown"
    return Result.info(
        f"Driver {reading.driver_version or 'unknown'}, CUDA up to {cuda}",
        details=(
            f"driver {reading.driver_version or 'unknown'}",
            f"max CUDA {cuda}: containers built for a newer CUDA need a newer driver "
            "(or the CUDA forward-compat package)",
            f"NVML {reading.nvml_version or 'unknown'}",
        ),
        docs=DOCS_CUDA_COMPAT,
    )
