"""Runtime-health checks about the Docker engine and its GPU plumbing on this host.

The engine itself, its ``nvidia`` runtime (and ``daemon.json``), the NVIDIA Container Toolkit and
CDI specs. They judge the :class:`ContainerReading` the Docker source made (never the Docker SDK
itself), plus files under :class:`HealthRoots`; tools are found with the injected ``which`` and
asked for ``--version`` through the injected runner, so tests need neither the tools nor the host.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from gputui.health.cdi import inventory as cdi_inventory
from gputui.health.cdi import shown
from gputui.health.context import CheckContext
from gputui.health.docs import (
    DOCS_CDI,
    DOCS_DOCKER_DAEMON_ACCESS,
    DOCS_TOOLKIT_INSTALL,
)
from gputui.health.podman import podman_engines
from gputui.health.readings import read_text
from gputui.health.registry import HOST, check
from gputui.health.result import Result
from gputui.model.containers import EngineInfo

#: The fix for a missing nvidia runtime (also given by the per-container checks).
CONFIGURE_RUNTIME_FIX = (
    "sudo nvidia-ctk runtime configure --runtime=docker\n"
    "(add --set-as-default to make it the default runtime)\n"
    "sudo systemctl restart docker"
)


def cdi_enabled(engine: EngineInfo | None) -> bool | None:
    """Whether the engine has CDI on: None when it does not say (no engine, Docker < 25)."""
    if engine is None or engine.cdi_spec_dirs is None:
        return None
    return bool(engine.cdi_spec_dirs)


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


@check("docker.engine", scope=HOST)
def check_docker_engine(ctx: CheckContext) -> Result:
    """Can gputui talk to the Docker engine?"""
    reading = ctx.inputs.containers
    status = reading.status
    engine = reading.engine
    if status.name != "docker":  # the collector's first container source is another engine
        return Result.skip("No Docker engine is connected")
    if status.ok:
        facts = _engine_facts(engine)
        version = engine.server_version if engine and engine.server_version else "unknown"
        where = engine.endpoint if engine and engine.endpoint else "default endpoint"
        return Result.passed(
            f"Docker {version} at {where}",
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
    return Result.fail(
        f"{summary}: {status.error}" if status.error and not status.kind else summary,
        details=details,
        fix=status.fix or default_fix,
        docs=DOCS_DOCKER_DAEMON_ACCESS if kind == "permission" else None,
    )


@check("engines.sources", scope=HOST)
def check_engine_sources(ctx: CheckContext) -> Result:
    """Which container engines gputui reads, and whether each answers."""
    statuses = ctx.inputs.container_sources
    if not statuses:
        return Result.skip("No container engine is read")
    engines = ctx.inputs.engines
    lines = []
    for name, status in statuses.items():
        engine = engines.get(name)
        what = (engine.product if engine else None) or ""
        where = (engine.endpoint if engine else None) or ""
        about = " at ".join(part for part in (what, where) if part)
        state = "answers" if status.ok else f"{status.kind or 'error'}: {status.error or '?'}"
        lines.append(f"{name} ({about}): {state}" if about else f"{name}: {state}")
        kubelet = engine.pod_resources if engine else None
        if kubelet is not None:
            said = "answers" if kubelet.ok and not kubelet.error else kubelet.error or "?"
            lines.append(f"{name}: kubelet pod-resources (GPU allocations): {said}")
    # The Docker engine's failure is docker.engine's FAIL; another engine's is this warning.
    down = [n for n, s in statuses.items() if not s.ok and n != "docker"]
    if down:
        first = statuses[down[0]]
        return Result.warn(
            f"Container engine {', '.join(down)} does not answer",
            details=tuple(lines),
            fix=first.fix or "Check the engine's service, or leave it out with --engine.",
        )
    # A kubelet that does not say which GPUs its pods hold: idle pod reservations go unseen.
    deaf = [
        (n, e.pod_resources)
        for n, e in engines.items()
        if n in statuses and e.pod_resources is not None and not e.pod_resources.ok
    ]
    if deaf:
        name, kubelet = deaf[0]
        return Result.warn(
            f"{name}: the kubelet's GPU allocations are not read: {kubelet.error or '?'}",
            details=tuple(lines),
            fix=kubelet.fix,
        )
    names = ", ".join(statuses)
    return Result.passed(f"{len(statuses)} container engine(s) read: {names}", details=tuple(lines))


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


@check("docker.nvidia_runtime", scope=HOST)
def check_docker_nvidia_runtime(ctx: CheckContext) -> Result:
    """Is the ``nvidia`` OCI runtime registered with the engine (and what daemon.json says)?"""
    config, note = read_daemon_json(ctx)
    details = [note]
    in_daemon_json = False
    if config is not None:
        facts, in_daemon_json = _daemon_json_runtime_facts(config)
        details.extend(facts)
    invalid_json = note.startswith("invalid")
    if not ctx.docker_ok:
        return ctx.docker_skip(*details)
    engine = ctx.inputs.containers.engine
    if engine is None:
        return Result.skip("The engine reported no runtime information", details=tuple(details))
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
        return Result.warn(
            summary,
            details=tuple(details),
            fix=f"{json_fix}\n{fix}" if invalid_json else fix,
            docs=DOCS_TOOLKIT_INSTALL,
        )
    if invalid_json:
        return Result.warn(
            "nvidia runtime registered, but daemon.json is invalid JSON",
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
    return Result.passed(summary, details=tuple(details), docs=DOCS_TOOLKIT_INSTALL)


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


#: After the install, what makes each engine use it: Docker registers the runtime; podman has no
#: runtime to configure, it reads the CDI spec.
_DOCKER_SETUP = (
    "`sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker`"
)
_PODMAN_SETUP = (
    "`sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml` (podman takes GPUs through "
    "CDI: `--device nvidia.com/gpu=all`)"
)


def _toolkit_setup(ctx: CheckContext) -> str:
    """The set-up step after installing the toolkit, for the engines this host runs."""
    podman = bool(podman_engines(ctx))
    sources = ctx.inputs.container_sources
    docker = "docker" in sources or (not sources and ctx.inputs.containers.status.name == "docker")
    if podman and not docker:
        return _PODMAN_SETUP + "."
    if podman:
        return f"for Docker {_DOCKER_SETUP}; for podman {_PODMAN_SETUP}."
    return _DOCKER_SETUP + "."


@check("toolkit.installed", scope=HOST)
def check_toolkit_installed(ctx: CheckContext) -> Result:
    """Is the NVIDIA Container Toolkit installed, and which version?"""
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
        "`sudo apt-get install -y nvidia-container-toolkit`), then " + _toolkit_setup(ctx)
    )
    if not found:
        return Result.warn(
            "NVIDIA Container Toolkit not found: install it",
            details=tuple(details),
            fix=install_fix,
            docs=DOCS_TOOLKIT_INSTALL,
        )
    if "nvidia-ctk" not in found:
        legacy = next(iter(found.items()))
        return Result.warn(
            (
                f"Only {legacy[0]} {legacy[1] or ''} found, no nvidia-ctk: the toolkit predates "
                "1.12"
            ).replace("  ", " "),
            details=tuple(details),
            fix="Upgrade: " + install_fix,
            docs=DOCS_TOOLKIT_INSTALL,
        )
    ctk = found["nvidia-ctk"]
    if ctk is None:
        return Result.warn(
            "nvidia-ctk found but `nvidia-ctk --version` gave no version",
            details=tuple(details),
            fix="Run `nvidia-ctk --version` by hand; reinstall the toolkit if it fails.",
            docs=DOCS_TOOLKIT_INSTALL,
        )
    return Result.passed(
        f"NVIDIA Container Toolkit {ctk}", details=tuple(details), docs=DOCS_TOOLKIT_INSTALL
    )


# --------------------------------------------------------------------------------------------
# cdi.specs


@check("cdi.specs", scope=HOST)
def check_cdi_specs(ctx: CheckContext) -> Result:
    """Are NVIDIA CDI specs present, current, and is CDI enabled in the engine?"""
    if not ctx.docker_ok and podman_engines(ctx):
        # podman's CDI (its own dirs, its containers, no daemon.json) is podman.cdi's.
        return Result.skip("No Docker engine is connected (podman's CDI specs: see podman.cdi)")
    engine = ctx.inputs.containers.engine if ctx.docker_ok else None
    enabled = cdi_enabled(engine)
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
    # Read bounded and non-blocking (a FIFO named nvidia.yaml is refused, not waited on).
    found = cdi_inventory(ctx, ctx.roots.cdi_dirs)
    details.extend(found.notes)
    for spec in found.specs:
        if spec.problem is not None:
            details.append(f"{shown(spec.path)}: {spec.problem}")
            continue
        if not spec.nvidia:
            details.append(f"{shown(spec.path)}: CDI spec (not NVIDIA)")
            continue
        versions = spec.driver_versions
        nvidia_specs.append(spec.path)
        details.append(
            f"{shown(spec.path)}: NVIDIA spec"
            + (f" for driver {', '.join(sorted(versions))}" if versions else "")
        )
        if driver and versions and driver not in versions:
            stale.append(spec.path)

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

    if enabled is False and requested:
        return Result.warn(
            "Containers request CDI devices but CDI is disabled in the engine",
            details=details,
            fix=enable,
            docs=DOCS_CDI,
        )
    if not nvidia_specs and requested:
        return Result.warn(
            "Containers request CDI devices but no NVIDIA CDI spec exists",
            details=details,
            fix=generate,
            docs=DOCS_CDI,
        )
    if stale:
        return Result.warn(
            f"CDI spec written for another driver than the running {driver}: regenerate it",
            details=details,
            fix=generate + "\n(the toolkit's nvidia-cdi-refresh.service does this on boot)",
            docs=DOCS_CDI,
        )
    if not nvidia_specs:
        return Result.info(
            "No NVIDIA CDI spec (needed only for CDI injection: --device nvidia.com/gpu=...)",
            details=details,
            fix=generate,
            docs=DOCS_CDI,
        )
    if enabled is False:
        return Result.info(
            "NVIDIA CDI spec present, but CDI is disabled in the engine",
            details=details,
            fix=enable,
            docs=DOCS_CDI,
        )
    return Result.passed(
        f"NVIDIA CDI spec present ({len(nvidia_specs)} file(s))", details=details, docs=DOCS_CDI
    )
