"""Runtime-health checks about the host around the containers: cgroups, and gputui's own view.

File reads stay under :class:`HealthRoots`, so tests need neither the host's ``/sys``, ``/dev``
nor ``/proc``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gputui.health.context import CheckContext
from gputui.health.docker import read_daemon_json
from gputui.health.docs import DOCS_NVML_UNKNOWN_ERROR
from gputui.health.podman import podman_engines
from gputui.health.readings import read_text
from gputui.health.registry import HOST, check
from gputui.health.result import Result
from gputui.model.containers import ContainerInfo

#: Runtimes that inject GPUs the legacy way (OCI hook, no CDI): the ones the systemd
#: ``daemon-reload`` hazard applies to.
LEGACY_RUNTIMES = frozenset({"runc", "nvidia", ""})

#: The command that runs gputui in a container with everything it needs to see the host.
GPUTUI_CONTAINER_FLAGS = (
    "--pid=host --cgroupns=host -v /var/run/docker.sock:/var/run/docker.sock:ro --gpus all"
)

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


@check("cgroup.driver", scope=HOST)
def check_cgroup_driver(ctx: CheckContext) -> Result:
    """Report the cgroup version and driver (input to the NVML-loss hazard check)."""
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
        return Result.skip("cgroup version and driver unknown", details=tuple(details))
    if host and engine_version and host != engine_version:
        details.append(
            "gputui and the engine see different cgroup versions "
            "(gputui in a container with another view, or a remote engine)"
        )
    version = engine_version or host
    return Result.info(
        f"cgroup v{version or '?'}, driver {driver or 'unknown'}", details=tuple(details)
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


#: The cgroup drivers ``dockerd`` takes in ``native.cgroupdriver`` (``none`` is its own, for
#: rootless engines on cgroup v1, and refused when given).
DOCKER_CGROUP_DRIVERS = ("systemd", "cgroupfs")
#: Entries of ``exec-opts`` looked at: far more than any daemon.json holds.
_MAX_EXEC_OPTS = 64


def configured_cgroup_driver(config: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    """The cgroup driver daemon.json asks dockerd for, as dockerd reads it.

    dockerd takes the first ``exec-opts`` entry whose key is ``native.cgroupdriver`` (any case,
    blanks around the key and the value trimmed, an entry without ``=`` passed over); the value
    is exact: ``systemd`` or ``cgroupfs``, anything else stops dockerd from starting
    ("native.cgroupdriver option X not supported").

    Returns:
        ``(driver, problem)``: the value asked for (None when nothing is), and a one-line
        problem when ``exec-opts`` or the value is one dockerd refuses.
    """
    if not config or "exec-opts" not in config:
        return None, None
    options = config["exec-opts"]
    if not isinstance(options, list):
        return None, "daemon.json: exec-opts is not a list: dockerd refuses to start with it"
    for option in options[:_MAX_EXEC_OPTS]:
        if not isinstance(option, str) or "=" not in option:
            continue
        key, _, value = option.partition("=")
        if key.strip().lower() != "native.cgroupdriver":
            continue
        value = value.strip()
        shown = " ".join(value.split())[:40]
        if value not in DOCKER_CGROUP_DRIVERS:
            return shown, (
                f"daemon.json: native.cgroupdriver={shown} is not a driver dockerd takes "
                "(systemd or cgroupfs): its next start fails"
            )
        return value, None
    return None, None


def _daemon_json_driver(ctx: CheckContext, rootless: bool) -> tuple[str | None, str | None]:
    """What this host's daemon.json asks for (``configured_cgroup_driver``).

    Nothing for a rootless engine (its file is its user's ``~/.config/docker/daemon.json``) or
    a remote one (its file is on its own host).
    """
    engine = ctx.inputs.containers.engine
    endpoint = (engine.endpoint if engine else None) or "unix://"
    if rootless or not endpoint.startswith("unix://"):
        return None, None
    config, _note = read_daemon_json(ctx)
    return configured_cgroup_driver(config)


@check("cgroup.nvml_hazard", scope=HOST)
def check_cgroup_nvml_hazard(ctx: CheckContext) -> Result:
    """Warn before ``systemctl daemon-reload`` takes GPUs away from running containers.

    With the systemd cgroup driver and runc-style (non-CDI) injection, systemd re-applies the
    container unit's device rules on reload; runc only allowed the NVIDIA devices it found under
    ``/dev/char``, which has no NVIDIA entries by default, so the GPUs disappear
    ("Failed to initialize NVML: Unknown Error") until the container is recreated.
    """
    if not ctx.docker_ok:
        return ctx.docker_skip()
    engine = ctx.inputs.containers.engine
    driver = engine.cgroup_driver if engine else None
    if driver is None:
        return Result.skip("The engine did not report its cgroup driver")
    rootless = bool(engine and engine.rootless)
    asked, problem = _daemon_json_driver(ctx, rootless)
    config_line: str | None = problem
    if asked and not problem:
        config_line = f"daemon.json: native.cgroupdriver={asked}" + (
            "" if asked == driver else f", not in effect (the engine runs {driver})"
        )
    if problem:
        # Whatever runs now, the next restart of Docker (an upgrade, a reboot) fails.
        return Result.warn(
            f"Docker will not start again with this daemon.json: {problem.partition(': ')[2]}",
            details=tuple(d for d in (f"engine cgroup driver: {driver}", config_line) if d),
            fix='Set "exec-opts": ["native.cgroupdriver=systemd"] or '
            '["native.cgroupdriver=cgroupfs"] in daemon.json (or remove the entry), then '
            "sudo systemctl restart docker.",
            docs=DOCS_NVML_UNKNOWN_ERROR,
        )
    if driver != "systemd":
        if asked == "systemd":
            return Result.info(
                f"cgroup driver {driver} now; daemon.json asks for systemd from the next "
                "restart of Docker, which exposes runc-injected GPU containers to "
                "`systemctl daemon-reload`",
                details=tuple(d for d in (f"engine cgroup driver: {driver}", config_line) if d),
                fix="Before restarting Docker: sudo nvidia-ctk system create-dev-char-symlinks "
                "--create-all (and the udev rule 71-nvidia-dev-char.rules), or inject GPUs "
                "with CDI (--device nvidia.com/gpu=all).",
                docs=DOCS_NVML_UNKNOWN_ERROR,
            )
        return Result.passed(f"cgroup driver {driver}: not exposed to the daemon-reload GPU loss")
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
    if config_line:
        details.append(config_line)
    symlinks = (
        "sudo nvidia-ctk system create-dev-char-symlinks --create-all, and install the udev "
        "rule 71-nvidia-dev-char.rules so the links survive reboots"
    )
    recreate = "Containers that already lost their GPUs must be removed and recreated."
    if asked == "cgroupfs":
        # Option (b) is written already: only the restart that applies it is missing.
        fix = (
            "daemon.json already sets native.cgroupdriver=cgroupfs, but the running engine "
            "still uses systemd: sudo systemctl restart docker (or: "
            f"{symlinks}; or inject GPUs with CDI, --device nvidia.com/gpu=all).\n{recreate}"
        )
    elif rootless:
        # A rootless engine on cgroup v2 needs the systemd driver for any resource limit.
        fix = (
            f"Pick one:\n(a) {symlinks};\n"
            "(b) inject GPUs with CDI (--device nvidia.com/gpu=all).\n"
            "A rootless engine keeps the systemd driver (cgroup v2 limits need it).\n"
            f"{recreate}"
        )
    else:
        fix = (
            "Pick one:\n"
            f"(a) {symlinks};\n"
            '(b) "exec-opts": ["native.cgroupdriver=cgroupfs"] in daemon.json, then '
            "sudo systemctl restart docker;\n"
            "(c) inject GPUs with CDI (--device nvidia.com/gpu=all).\n"
            f"{recreate}"
        )
    if links:
        return Result.passed(
            "systemd cgroup driver, but /dev/char NVIDIA symlinks are in place",
            details=tuple(details),
            docs=DOCS_NVML_UNKNOWN_ERROR,
        )
    if at_risk:
        return Result.warn(
            (
                f"{len(at_risk)} GPU container(s) will lose their GPUs on the next "
                "`systemctl daemon-reload`"
            ),
            details=tuple(details),
            fix=fix,
            docs=DOCS_NVML_UNKNOWN_ERROR,
        )
    return Result.info(
        "systemd cgroup driver: future runc-injected GPU containers would be exposed",
        details=tuple(details),
        fix=fix,
        docs=DOCS_NVML_UNKNOWN_ERROR,
    )


# --------------------------------------------------------------------------------------------
# gputui.visibility

#: The same for a host where podman is the engine: its socket, and its GPUs through CDI.
GPUTUI_PODMAN_CONTAINER_FLAGS = (
    "--pid=host --cgroupns=host -v /run/podman/podman.sock:/run/podman/podman.sock:ro "
    "--device nvidia.com/gpu=all"
)


def _gputui_container_command(ctx: CheckContext) -> str:
    """How to run gputui in a container, with the engine this host runs (podman alone: its)."""
    sources = ctx.inputs.container_sources
    if podman_engines(ctx) and "docker" not in sources:
        return f"podman run {GPUTUI_PODMAN_CONTAINER_FLAGS}"
    return f"docker run {GPUTUI_CONTAINER_FLAGS}"


def host_pid_namespace_from_proc(ctx: CheckContext) -> bool | None:
    """``/proc/2/comm`` is ``kthreadd`` only in the host's PID namespace (kernel threads)."""
    comm = Path(ctx.roots.proc) / "2" / "comm"
    text, reason = read_text(comm)
    if text is not None:
        return text.strip() == "kthreadd"
    if reason == "absent" and (Path(ctx.roots.proc) / "1").is_dir():
        return False
    return None


@check("gputui.visibility", scope=HOST)
def check_gputui_visibility(ctx: CheckContext) -> Result:
    """Can gputui resolve host PIDs and cgroups (does it run on the host or ``--pid=host``)?"""
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
    fix = f"Run gputui on the host, or in a container with: {_gputui_container_command(ctx)} ..."
    if host_pid is False:
        return Result.fail(
            (
                "gputui is not in the host PID namespace: NVML's host PIDs cannot be mapped to "
                "processes or containers"
            ),
            details=details,
            fix=fix,
        )
    if hidepid is not None:
        # Checked before the "unknown" outcome: hidepid also hides kthreadd and PID 1, which
        # the PID-namespace test reads, so an unknown namespace is its symptom, not the cause.
        return Result.warn(
            f"/proc is mounted with hidepid={hidepid}: processes of other users are hidden",
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
        return Result.warn(
            "gputui runs in a private cgroup namespace: container mapping is less reliable",
            details=details,
            fix=fix + "\n(--cgroupns=host is the missing flag)",
        )
    if host_pid is None:
        return Result.info(
            "Could not tell whether gputui sees the host's processes", details=details
        )
    return Result.passed("gputui sees the host's processes", details=details)


def _tri(value: bool | None) -> str:
    return "unknown" if value is None else ("yes" if value else "no")
