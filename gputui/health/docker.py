"""Runtime-health checks about the Docker engine and the GPU wiring of each container.

They judge the :class:`ContainerReading` the Docker source made (never the Docker SDK itself),
plus ``daemon.json`` read from ``HealthRoots.daemon_json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gputui.health.base import (
    DOCS_DOCKER_DAEMON_ACCESS,
    DOCS_DOCKER_SPECIALIZED,
    DOCS_TOOLKIT_INSTALL,
    DOCS_TOOLKIT_TROUBLESHOOTING,
    FAIL,
    INFO,
    PASS,
    SKIP,
    WARN,
    CheckContext,
    docker_skip,
    read_text,
)
from gputui.model import ContainerInfo, EngineInfo, HealthCheck, HealthStatus

CONFIGURE_RUNTIME_FIX = (
    "sudo nvidia-ctk runtime configure --runtime=docker\n"
    "(add --set-as-default to make it the default runtime)\n"
    "sudo systemctl restart docker"
)

# --------------------------------------------------------------------------------------------
# docker.engine

#: Docker source failure kind → (summary, fix) used when the source gave no fix of its own.
_ENGINE_FAILURES: dict[str, tuple[str, str]] = {
    "permission": (
        "Permission denied on the Docker socket",
        "sudo usermod -aG docker $USER, then log out and in again (the docker group is "
        "root-equivalent), or run gputui with sudo.",
    ),
    "unreachable": (
        "No Docker engine answers",
        "Start it: sudo systemctl start docker. Or point gputui at the right engine: set "
        "DOCKER_HOST (e.g. unix:///run/user/$UID/docker.sock for rootless, or podman's socket) "
        "or `docker context use <name>`.",
    ),
    "not_found": (
        "No Docker socket at the configured endpoint",
        "Start dockerd (sudo systemctl start docker), or set DOCKER_HOST / a docker context to "
        "where the engine listens.",
    ),
    "timeout": (
        "The Docker engine did not answer in time",
        "Check `sudo systemctl status docker` and `journalctl -u docker`; a hung engine may "
        "need a restart.",
    ),
}


def check_docker_engine(ctx: CheckContext) -> HealthCheck:
    """Can gputui talk to the Docker engine?"""
    reading = ctx.inputs.containers
    status = reading.status
    engine = reading.engine
    if status.ok:
        facts = _engine_facts(engine)
        version = engine.server_version if engine and engine.server_version else "unknown"
        where = engine.endpoint if engine and engine.endpoint else "default endpoint"
        return HealthCheck(
            id="docker.engine",
            status=PASS,
            summary=f"Docker {version} at {where}",
            details=(*facts, f"{len(reading.containers)} container(s)"),
        )
    kind = status.kind or ""
    summary, default_fix = _ENGINE_FAILURES.get(
        kind,
        (
            "Docker engine unavailable",
            "Check that dockerd runs (`docker info`) and that DOCKER_HOST / the docker context "
            "point to it.",
        ),
    )
    details = tuple(
        d
        for d in (
            f"kind: {status.kind}" if status.kind else None,
            f"error: {status.error}" if status.error else None,
            *_engine_facts(engine),
        )
        if d
    )
    return HealthCheck(
        id="docker.engine",
        status=FAIL,
        summary=f"{summary}: {status.error}" if status.error and not status.kind else summary,
        details=details,
        fix=status.fix or default_fix,
        docs=DOCS_DOCKER_DAEMON_ACCESS if kind == "permission" else None,
    )


def _engine_facts(engine: EngineInfo | None) -> tuple[str, ...]:
    if engine is None:
        return ()
    pairs = (
        ("endpoint", engine.endpoint),
        ("context", engine.context),
        ("server version", engine.server_version),
        ("API version", engine.api_version),
    )
    return tuple(f"{label}: {value}" for label, value in pairs if value)


# --------------------------------------------------------------------------------------------
# daemon.json


def read_daemon_json(ctx: CheckContext) -> tuple[dict[str, Any] | None, str]:
    """Read and parse ``daemon.json``.

    Returns:
        ``(config, note)``: the parsed object (None when absent, unreadable or invalid) and a
        one-line description of what was found. Invalid JSON notes start with ``"invalid"``.
    """
    path = Path(ctx.roots.daemon_json)
    text, reason = read_text(path)
    if text is None:
        return None, f"{path}: {reason}"
    try:
        config = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON in {path}: {exc.msg} at line {exc.lineno}"
    if not isinstance(config, dict):
        return None, f"invalid {path}: top level is {type(config).__name__}, not an object"
    return config, f"{path}: readable"


def _daemon_json_runtime_facts(config: dict[str, Any]) -> tuple[list[str], bool]:
    runtimes = config.get("runtimes")
    names = sorted(runtimes) if isinstance(runtimes, dict) else []
    facts = [f"daemon.json runtimes: {', '.join(names) or '(none)'}"]
    default = config.get("default-runtime")
    if default is not None:
        facts.append(f"daemon.json default-runtime: {default}")
    return facts, "nvidia" in names


# --------------------------------------------------------------------------------------------
# docker.nvidia_runtime


def check_docker_nvidia_runtime(ctx: CheckContext) -> HealthCheck:
    """Is the ``nvidia`` OCI runtime registered with the engine (and what daemon.json says)?"""
    check_id = "docker.nvidia_runtime"
    config, note = read_daemon_json(ctx)
    details = [note]
    in_daemon_json = False
    if config is not None:
        facts, in_daemon_json = _daemon_json_runtime_facts(config)
        details.extend(facts)
    invalid_json = note.startswith("invalid")
    if not ctx.docker_ok:
        skipped = docker_skip(ctx, check_id)
        return HealthCheck(
            id=check_id,
            status=SKIP,
            summary=skipped.summary,
            details=(*skipped.details, *details),
        )
    engine = ctx.inputs.containers.engine
    if engine is None:
        return HealthCheck(
            id=check_id,
            status=SKIP,
            summary="The engine reported no runtime information",
            details=tuple(details),
        )
    details.insert(0, f"engine runtimes: {', '.join(engine.runtimes) or '(none)'}")
    details.insert(1, f"engine default runtime: {engine.default_runtime or 'unknown'}")
    hook = ctx.which("nvidia-container-runtime-hook")
    details.append(
        f"nvidia-container-runtime-hook: {hook or 'not found on PATH'}"
        " (Docker's --gpus uses it even without the nvidia runtime)"
    )
    json_fix = (
        f"daemon.json is not valid JSON: dockerd will refuse to start on its next restart. "
        f"Check it with `python3 -m json.tool {ctx.roots.daemon_json}` and fix it first."
    )
    if "nvidia" not in engine.runtimes:
        if in_daemon_json:
            summary = "nvidia runtime is in daemon.json but not loaded: dockerd was not restarted"
            fix = "sudo systemctl restart docker"
        else:
            summary = "Docker has no nvidia runtime registered"
            fix = CONFIGURE_RUNTIME_FIX
        details.append(
            'symptoms: `--runtime=nvidia` fails with "unknown or invalid runtime name: nvidia"; '
            '`--gpus` fails with \'could not select device driver "" with capabilities: '
            "[[gpu]]' when the toolkit's hook is missing too"
        )
        return HealthCheck(
            id=check_id,
            status=WARN,
            summary=summary,
            details=tuple(details),
            fix=f"{json_fix}\n{fix}" if invalid_json else fix,
            docs=DOCS_TOOLKIT_INSTALL,
        )
    if invalid_json:
        return HealthCheck(
            id=check_id,
            status=WARN,
            summary="nvidia runtime registered, but daemon.json is invalid JSON",
            details=tuple(details),
            fix=json_fix,
            docs=DOCS_TOOLKIT_INSTALL,
        )
    if engine.default_runtime == "nvidia":
        summary = "nvidia runtime registered and the default"
    else:
        summary = (
            f"nvidia runtime registered (default: {engine.default_runtime or 'unknown'}); "
            "containers need --gpus or --runtime=nvidia"
        )
    return HealthCheck(
        id=check_id, status=PASS, summary=summary, details=tuple(details), docs=DOCS_TOOLKIT_INSTALL
    )


# --------------------------------------------------------------------------------------------
# Per-container checks


def _effective_runtime(container: ContainerInfo, engine: EngineInfo | None) -> str:
    if container.runtime:
        return container.runtime
    if engine is not None and engine.default_runtime:
        return engine.default_runtime
    return "runc"


def _cdi_enabled(engine: EngineInfo | None) -> bool | None:
    if engine is None or engine.cdi_spec_dirs is None:
        return None
    return bool(engine.cdi_spec_dirs)


def check_container_gpu_visible(ctx: CheckContext, container: ContainerInfo) -> HealthCheck | None:
    """Can a container that asked for GPUs actually get them injected?"""
    if container.gpu_request is None:
        return None
    check_id = f"container.gpu_visible:{container.name}"
    engine = ctx.inputs.containers.engine
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

    def result(status: HealthStatus, summary: str, fix: str | None = None) -> HealthCheck:
        return HealthCheck(
            id=check_id,
            status=status,
            summary=summary,
            details=tuple(details),
            fix=fix,
            docs=DOCS_DOCKER_SPECIALIZED if fix else None,
            subject=container.name,
        )

    if processes:
        return result(PASS, f"GPUs visible: {len(processes)} GPU process(es) running")
    if via == "env" and runtime != "nvidia" and not container.gpu_device_paths:
        details.append(
            f"NVIDIA_VISIBLE_DEVICES is set, but runtime {runtime!r} ignores it: only the "
            "nvidia runtime (or --gpus / CDI) injects devices and driver libraries"
        )
        return result(
            FAIL,
            "GPUs requested (NVIDIA_VISIBLE_DEVICES) but not injected",
            "Recreate the container with `--gpus all` (compose: deploy.resources.reservations."
            "devices with capabilities: [gpu]) or `--runtime=nvidia`.",
        )
    if via == "device_requests":
        has_runtime = engine is not None and "nvidia" in engine.runtimes
        hook = ctx.which("nvidia-container-runtime-hook")
        if not has_runtime and not _cdi_enabled(engine) and hook is None:
            details.append(
                "the engine has no nvidia runtime, CDI is off and no "
                "nvidia-container-runtime-hook is on PATH"
            )
            return result(
                WARN,
                "--gpus request, but the engine shows no way to inject GPUs",
                "Install the NVIDIA Container Toolkit, then\n" + CONFIGURE_RUNTIME_FIX,
            )
    if via == "cdi" and _cdi_enabled(engine) is False:
        details.append("the engine reports CDI disabled (no CDI spec dirs)")
        return result(
            WARN,
            "CDI devices requested, but CDI is disabled in the engine",
            'Enable CDI: add "features": {"cdi": true} to daemon.json (default on since '
            "Docker 28) and `sudo systemctl restart docker`.",
        )
    if engine is not None and engine.runtimes and runtime not in engine.runtimes:
        return result(
            FAIL,
            f"Runtime {runtime!r} is not registered with the engine",
            CONFIGURE_RUNTIME_FIX,
        )
    if via == "devices":
        names = {Path(p).name for p in container.gpu_device_paths}
        missing = [n for n in ("nvidiactl", "nvidia-uvm") if n not in names]
        details.append("device nodes only: driver libraries come from the image, if at all")
        if missing:
            return result(
                WARN,
                f"GPU device nodes passed without {', '.join(missing)}: CUDA will not start",
                "Prefer `--gpus all`; with --device also pass "
                + " ".join(f"--device /dev/{n}" for n in missing),
            )
        return result(INFO, "GPUs passed as raw device nodes (--device)")
    return result(PASS, f"GPU injection configured ({via}, runtime {runtime})")


def check_container_gpu_unrequested(
    ctx: CheckContext, container: ContainerInfo
) -> HealthCheck | None:
    """A container that uses GPUs without having asked for them (privileged / device mounts)."""
    processes = ctx.processes_of(container.id)
    if not processes:
        return None
    check_id = f"container.gpu_unrequested:{container.name}"
    gpus = sorted({p.sample.gpu_index for p in processes})
    pids = sorted({p.pid for p in processes})
    if container.gpu_request is not None:
        return HealthCheck(
            id=check_id,
            status=PASS,
            summary=f"Uses GPU(s) {', '.join(map(str, gpus))}, which it requested",
            subject=container.name,
        )
    how = (
        f"device mounts {', '.join(container.gpu_device_paths)}"
        if container.gpu_device_paths
        else "--privileged or bind-mounted /dev"
    )
    return HealthCheck(
        id=check_id,
        status=WARN,
        summary=f"Uses GPU(s) {', '.join(map(str, gpus))} without requesting any",
        details=(
            f"GPU processes (host PIDs): {', '.join(map(str, pids))}",
            f"no --gpus / NVIDIA_VISIBLE_DEVICES / CDI request; it probably sees GPUs via {how}",
            "schedulers and other users cannot tell this GPU is taken",
        ),
        fix=(
            "Recreate it with an explicit request, e.g. "
            f"`--gpus '\"device={','.join(map(str, gpus))}\"'`, and drop --privileged if it was "
            "only there for the GPU."
        ),
        docs=DOCS_DOCKER_SPECIALIZED,
        subject=container.name,
    )


def check_container_utility_cap(ctx: CheckContext, container: ContainerInfo) -> HealthCheck | None:
    """Does a GPU container get the ``utility`` capability (nvidia-smi, NVML)?"""
    if container.gpu_request is None and container.runtime != "nvidia":
        return None
    check_id = f"container.utility_cap:{container.name}"
    caps = container.nvidia_capabilities
    if not caps:
        return HealthCheck(
            id=check_id,
            status=PASS,
            summary="Default driver capabilities (compute,utility)",
            subject=container.name,
        )
    if "all" in caps or "utility" in caps:
        return HealthCheck(
            id=check_id,
            status=PASS,
            summary=f"Driver capabilities include utility ({','.join(caps)})",
            subject=container.name,
        )
    wanted = ",".join(dict.fromkeys((*caps, "utility")))
    return HealthCheck(
        id=check_id,
        status=WARN,
        summary="No `utility` capability: nvidia-smi and NVML are missing inside",
        details=(f"NVIDIA_DRIVER_CAPABILITIES={','.join(caps)}",),
        fix=f"Recreate with `-e NVIDIA_DRIVER_CAPABILITIES={wanted}` (or compute,utility).",
        docs=DOCS_DOCKER_SPECIALIZED,
        subject=container.name,
    )


def check_container_runtime(ctx: CheckContext, container: ContainerInfo) -> HealthCheck | None:
    """A container created with a runtime the engine no longer has cannot (re)start."""
    engine = ctx.inputs.containers.engine
    runtime = container.runtime
    if not runtime or runtime == "runc" or engine is None or not engine.runtimes:
        return None
    check_id = f"container.runtime:{container.name}"
    if runtime in engine.runtimes:
        return HealthCheck(
            id=check_id,
            status=PASS,
            summary=f"Runtime {runtime} is registered",
            subject=container.name,
        )
    return HealthCheck(
        id=check_id,
        status=FAIL,
        summary=f"Created with runtime {runtime!r}, which the engine does not have",
        details=(
            f"engine runtimes: {', '.join(engine.runtimes)}",
            f"container status: {container.status}; it cannot be started again as is",
        ),
        fix=CONFIGURE_RUNTIME_FIX
        if runtime == "nvidia"
        else "Register the runtime in daemon.json "
        "and restart docker, or recreate the container without --runtime.",
        docs=DOCS_TOOLKIT_TROUBLESHOOTING,
        subject=container.name,
    )
