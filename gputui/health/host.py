"""Runtime-health checks about the host: the container toolkit, CDI, cgroups and gputui itself.

File reads stay under :class:`HealthRoots`; tools are found with the injected ``which`` and asked
for ``--version`` through the injected runner, so tests need neither the tools nor the host.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from gputui.health.base import (
    DOCS_CDI,
    DOCS_NVML_UNKNOWN_ERROR,
    DOCS_TOOLKIT_INSTALL,
    FAIL,
    GPUTUI_CONTAINER_FLAGS,
    INFO,
    LEGACY_RUNTIMES,
    PASS,
    SKIP,
    WARN,
    CheckContext,
    docker_skip,
    read_text,
)
from gputui.model import ContainerInfo, EngineInfo, HealthCheck, HealthStatus

# --------------------------------------------------------------------------------------------
# toolkit.installed

# "NVIDIA Container Toolkit CLI version 1.20.0", "cli-version: 1.17.8",
# "NVIDIA Container Runtime version 1.17.8".
_TOOL_VERSION = re.compile(r"version[:\s]+v?(\d+(?:\.\d+)+[\w.+~-]*)", re.IGNORECASE)

#: Toolkit programs worth reporting, in order of importance.
TOOLKIT_TOOLS = ("nvidia-ctk", "nvidia-container-cli", "nvidia-container-runtime")


def parse_tool_version(output: str | None) -> str | None:
    """The first ``version X.Y.Z`` in a tool's ``--version`` output."""
    if not output:
        return None
    match = _TOOL_VERSION.search(output)
    return match.group(1) if match else None


def check_toolkit_installed(ctx: CheckContext) -> HealthCheck:
    """Is the NVIDIA Container Toolkit installed, and which version?"""
    check_id = "toolkit.installed"
    found: dict[str, str | None] = {}
    details: list[str] = []
    for tool in TOOLKIT_TOOLS:
        path = ctx.which(tool)
        if path is None:
            details.append(f"{tool}: not found on PATH")
            continue
        version = parse_tool_version(ctx.run_version([path, "--version"]))
        found[tool] = version
        details.append(f"{tool}: {version or 'version unknown (--version failed)'} ({path})")
    # which() searches gputui's own PATH: in a container that is not the host's.
    details.append(
        "searched gputui's PATH; from inside a container this says little about the host"
    )
    install_fix = (
        "Install the NVIDIA Container Toolkit (add NVIDIA's package repository, then e.g. "
        "`sudo apt-get install -y nvidia-container-toolkit`), then "
        "`sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker`."
    )
    if not found:
        return HealthCheck(
            id=check_id,
            status=WARN,
            summary="NVIDIA Container Toolkit not found: install it",
            details=tuple(details),
            fix=install_fix,
            docs=DOCS_TOOLKIT_INSTALL,
        )
    if "nvidia-ctk" not in found:
        legacy = next(iter(found.items()))
        return HealthCheck(
            id=check_id,
            status=WARN,
            summary=(
                f"Only {legacy[0]} {legacy[1] or ''} found, no nvidia-ctk: the toolkit predates "
                "1.12"
            ).replace("  ", " "),
            details=tuple(details),
            fix="Upgrade: " + install_fix,
            docs=DOCS_TOOLKIT_INSTALL,
        )
    ctk = found["nvidia-ctk"]
    if ctk is None:
        return HealthCheck(
            id=check_id,
            status=WARN,
            summary="nvidia-ctk found but `nvidia-ctk --version` gave no version",
            details=tuple(details),
            fix="Run `nvidia-ctk --version` by hand; reinstall the toolkit if it fails.",
            docs=DOCS_TOOLKIT_INSTALL,
        )
    return HealthCheck(
        id=check_id,
        status=PASS,
        summary=f"NVIDIA Container Toolkit {ctk}",
        details=tuple(details),
        docs=DOCS_TOOLKIT_INSTALL,
    )


# --------------------------------------------------------------------------------------------
# cdi.specs

_SPEC_SUFFIXES = (".yaml", ".yml", ".json")
_NVIDIA_KIND = re.compile(r"""["']?kind["']?\s*:\s*["']?nvidia\.com/gpu""")
# Generated specs mount driver libraries by full name, e.g. libcuda.so.580.159.04.
_SO_VERSION = re.compile(r"\.so\.(\d{3}\.\d+(?:\.\d+)?)")


def _cdi_enabled(engine: EngineInfo | None) -> bool | None:
    if engine is None or engine.cdi_spec_dirs is None:
        return None
    return bool(engine.cdi_spec_dirs)


def check_cdi_specs(ctx: CheckContext) -> HealthCheck:
    """Are NVIDIA CDI specs present, current, and is CDI enabled in the engine?"""
    check_id = "cdi.specs"
    engine = ctx.inputs.containers.engine if ctx.docker_ok else None
    enabled = _cdi_enabled(engine)
    details: list[str] = []
    if not ctx.docker_ok:
        details.append("engine CDI state unknown (Docker engine unreachable)")
    elif enabled is None:
        details.append("engine does not report CDI (older than Docker 25)")
    elif enabled and engine is not None:
        details.append(f"engine CDI spec dirs: {', '.join(engine.cdi_spec_dirs or ())}")
    else:
        details.append("engine reports no CDI spec dirs: CDI disabled in the engine")

    nvidia_specs: list[str] = []
    stale: list[str] = []
    driver = ctx.inputs.gpu.driver_version
    for directory in ctx.roots.cdi_dirs:
        try:
            entries = sorted(Path(directory).iterdir())
        except FileNotFoundError:
            details.append(f"{directory}: absent")
            continue
        except OSError as exc:
            details.append(f"{directory}: cannot list ({exc.strerror or exc})")
            continue
        for entry in entries:
            if entry.suffix not in _SPEC_SUFFIXES:
                continue
            text, reason = read_text(entry)
            if text is None:
                details.append(f"{entry}: {reason}")
                continue
            if not _NVIDIA_KIND.search(text):
                details.append(f"{entry}: CDI spec (not NVIDIA)")
                continue
            versions = set(_SO_VERSION.findall(text))
            nvidia_specs.append(str(entry))
            details.append(
                f"{entry}: NVIDIA spec"
                + (f" for driver {', '.join(sorted(versions))}" if versions else "")
            )
            if driver and versions and driver not in versions:
                stale.append(str(entry))

    requested = [c.name for c in ctx.running_containers() if c.gpu_request_via == "cdi"]
    if requested:
        details.append(f"containers requesting CDI devices: {', '.join(requested)}")
    generate = (
        "sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml\n"
        "nvidia-ctk cdi list   # shows nvidia.com/gpu=0, =all, ..."
    )
    enable = (
        'Enable CDI in the engine: "features": {"cdi": true} in daemon.json (default on since '
        "Docker 28), then sudo systemctl restart docker"
    )

    def result(status: HealthStatus, summary: str, fix: str | None = None) -> HealthCheck:
        return HealthCheck(
            id=check_id,
            status=status,
            summary=summary,
            details=tuple(details),
            fix=fix,
            docs=DOCS_CDI,
        )

    if enabled is False and requested:
        return result(
            WARN, "Containers request CDI devices but CDI is disabled in the engine", enable
        )
    if not nvidia_specs and requested:
        return result(
            WARN, "Containers request CDI devices but no NVIDIA CDI spec exists", generate
        )
    if stale:
        return result(
            WARN,
            f"CDI spec written for another driver than the running {driver}: regenerate it",
            generate + "\n(the toolkit's nvidia-cdi-refresh.service does this on boot)",
        )
    if not nvidia_specs:
        return result(
            INFO,
            "No NVIDIA CDI spec (needed only for CDI injection: --device nvidia.com/gpu=...)",
            generate,
        )
    if enabled is False:
        return result(INFO, "NVIDIA CDI spec present, but CDI is disabled in the engine", enable)
    return result(PASS, f"NVIDIA CDI spec present ({len(nvidia_specs)} file(s))")


# --------------------------------------------------------------------------------------------
# cgroup.driver


def host_cgroup_version(ctx: CheckContext) -> str | None:
    """``"2"`` when the unified hierarchy is mounted, ``"1"`` for a v1 tree, None if unknown."""
    cgroup = Path(ctx.roots.sys) / "fs" / "cgroup"
    if (cgroup / "cgroup.controllers").exists():
        return "2"
    if cgroup.is_dir():
        return "1"
    return None


def check_cgroup_driver(ctx: CheckContext) -> HealthCheck:
    """Report the cgroup version and driver (input to the NVML-loss hazard check)."""
    check_id = "cgroup.driver"
    host = host_cgroup_version(ctx)
    engine = ctx.inputs.containers.engine if ctx.docker_ok else None
    engine_version = engine.cgroup_version if engine else None
    driver = engine.cgroup_driver if engine else None
    details = [
        f"cgroup v{host} seen by gputui" if host else "cgroup version not visible to gputui",
        f"engine: cgroup v{engine_version}" if engine_version else "engine: cgroup version unknown",
        f"engine cgroup driver: {driver or 'unknown'}",
    ]
    if host is None and engine_version is None and driver is None:
        return HealthCheck(
            id=check_id,
            status=SKIP,
            summary="cgroup version and driver unknown",
            details=tuple(details),
        )
    if host and engine_version and host != engine_version:
        details.append(
            "gputui and the engine see different cgroup versions "
            "(gputui in a container with another view, or a remote engine)"
        )
    version = engine_version or host
    return HealthCheck(
        id=check_id,
        status=INFO,
        summary=f"cgroup v{version or '?'}, driver {driver or 'unknown'}",
        details=tuple(details),
    )


# --------------------------------------------------------------------------------------------
# cgroup.nvml_hazard


def nvidia_dev_char_links(ctx: CheckContext) -> tuple[list[str], str | None]:
    """``/dev/char`` symlinks to NVIDIA device nodes (what ``create-dev-char-symlinks`` makes).

    Returns:
        ``(links, problem)``: the link names, and a reason when the directory could not be listed.
    """
    char = Path(ctx.roots.dev) / "char"
    try:
        entries = sorted(char.iterdir())
    except OSError as exc:
        return [], f"{char}: {exc.strerror or exc}"
    links: list[str] = []
    for entry in entries:
        try:
            target = os.readlink(entry)
        except OSError:  # not a symlink
            continue
        if Path(target).name.startswith("nvidia"):
            links.append(f"{entry.name} -> {target}")
    return links, None


def _uses_gpus(ctx: CheckContext, container: ContainerInfo) -> bool:
    return (
        container.gpu_request is not None
        or container.runtime == "nvidia"
        or bool(container.gpu_device_paths)
        or bool(ctx.processes_of(container.id))
    )


def check_cgroup_nvml_hazard(ctx: CheckContext) -> HealthCheck:
    """Warn before ``systemctl daemon-reload`` takes GPUs away from running containers.

    With the systemd cgroup driver and runc-style (non-CDI) injection, systemd re-applies the
    container unit's device rules on reload; runc only allowed the NVIDIA devices it found under
    ``/dev/char``, which has no NVIDIA entries by default, so the GPUs disappear
    ("Failed to initialize NVML: Unknown Error") until the container is recreated.
    """
    check_id = "cgroup.nvml_hazard"
    if not ctx.docker_ok:
        return docker_skip(ctx, check_id)
    engine = ctx.inputs.containers.engine
    driver = engine.cgroup_driver if engine else None
    if driver is None:
        return HealthCheck(
            id=check_id, status=SKIP, summary="The engine did not report its cgroup driver"
        )
    if driver != "systemd":
        return HealthCheck(
            id=check_id,
            status=PASS,
            summary=f"cgroup driver {driver}: not exposed to the daemon-reload GPU loss",
        )
    default_runtime = engine.default_runtime if engine else None
    at_risk = [
        c.name
        for c in ctx.running_containers()
        if _uses_gpus(ctx, c)
        and c.gpu_request_via != "cdi"
        and (c.runtime or default_runtime or "runc") in LEGACY_RUNTIMES
    ]
    links, problem = nvidia_dev_char_links(ctx)
    details = [
        "engine cgroup driver: systemd",
        f"GPU containers using runc-style injection: {', '.join(at_risk) or '(none)'}",
        f"/dev/char NVIDIA symlinks: {len(links)}" + (f" ({problem})" if problem else ""),
        "trigger: `systemctl daemon-reload` (also run by package upgrades) → "
        '"Failed to initialize NVML: Unknown Error" inside the containers',
    ]
    fix = (
        "Pick one:\n"
        "(a) sudo nvidia-ctk system create-dev-char-symlinks --create-all, and install the udev "
        "rule 71-nvidia-dev-char.rules so the links survive reboots;\n"
        '(b) "exec-opts": ["native.cgroupdriver=cgroupfs"] in daemon.json, then '
        "sudo systemctl restart docker;\n"
        "(c) inject GPUs with CDI (--device nvidia.com/gpu=all).\n"
        "Containers that already lost their GPUs must be removed and recreated."
    )
    if links:
        return HealthCheck(
            id=check_id,
            status=PASS,
            summary="systemd cgroup driver, but /dev/char NVIDIA symlinks are in place",
            details=tuple(details),
            docs=DOCS_NVML_UNKNOWN_ERROR,
        )
    if at_risk:
        return HealthCheck(
            id=check_id,
            status=WARN,
            summary=(
                f"{len(at_risk)} GPU container(s) will lose their GPUs on the next "
                "`systemctl daemon-reload`"
            ),
            details=tuple(details),
            fix=fix,
            docs=DOCS_NVML_UNKNOWN_ERROR,
        )
    return HealthCheck(
        id=check_id,
        status=INFO,
        summary="systemd cgroup driver: future runc-injected GPU containers would be exposed",
        details=tuple(details),
        fix=fix,
        docs=DOCS_NVML_UNKNOWN_ERROR,
    )


# --------------------------------------------------------------------------------------------
# gputui.visibility


def host_pid_namespace_from_proc(ctx: CheckContext) -> bool | None:
    """``/proc/2/comm`` is ``kthreadd`` only in the host's PID namespace (kernel threads)."""
    comm = Path(ctx.roots.proc) / "2" / "comm"
    text, reason = read_text(comm)
    if text is not None:
        return text.strip() == "kthreadd"
    if reason == "absent" and (Path(ctx.roots.proc) / "1").is_dir():
        return False
    return None


def check_gputui_visibility(ctx: CheckContext) -> HealthCheck:
    """Can gputui resolve host PIDs and cgroups (does it run on the host or ``--pid=host``)?"""
    check_id = "gputui.visibility"
    visibility = ctx.inputs.visibility
    host_pid = visibility.host_pid_namespace
    if host_pid is None:
        host_pid = host_pid_namespace_from_proc(ctx)
    private = visibility.private_cgroup_namespace
    hidepid = visibility.proc_hidepid
    details: tuple[str, ...] = (
        f"host PID namespace: {_tri(host_pid)}",
        f"private cgroup namespace: {_tri(private)}",
    )
    if hidepid is not None:
        details += (f"/proc mount option: hidepid={hidepid}",)
    fix = f"Run gputui on the host, or in a container with: docker run {GPUTUI_CONTAINER_FLAGS} ..."
    if host_pid is False:
        return HealthCheck(
            id=check_id,
            status=FAIL,
            summary=(
                "gputui is not in the host PID namespace: NVML's host PIDs cannot be mapped to "
                "processes or containers"
            ),
            details=details,
            fix=fix,
        )
    if hidepid is not None:
        # Checked before the "unknown" outcome: hidepid also hides kthreadd and PID 1, which
        # the PID-namespace test reads, so an unknown namespace is its symptom, not the cause.
        return HealthCheck(
            id=check_id,
            status=WARN,
            summary=(
                f"/proc is mounted with hidepid={hidepid}: processes of other users are hidden"
            ),
            details=(
                *details,
                "their GPU memory is listed under their PIDs without a command, user or container",
            ),
            fix=(
                "Run gputui as root, or remount /proc with gid= of a group gputui's user belongs "
                f"to: sudo mount -o remount,hidepid={hidepid},gid=<group> /proc "
                "(and the same options in /etc/fstab to keep them)"
            ),
        )
    if private:
        return HealthCheck(
            id=check_id,
            status=WARN,
            summary="gputui runs in a private cgroup namespace: container mapping is less reliable",
            details=details,
            fix=fix + "\n(--cgroupns=host is the missing flag)",
        )
    if host_pid is None:
        return HealthCheck(
            id=check_id,
            status=INFO,
            summary="Could not tell whether gputui sees the host's processes",
            details=details,
        )
    return HealthCheck(
        id=check_id, status=PASS, summary="gputui sees the host's processes", details=details
    )


def _tri(value: bool | None) -> str:
    return "unknown" if value is None else ("yes" if value else "no")
