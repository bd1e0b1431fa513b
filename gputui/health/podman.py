"""Runtime-health checks of podman's GPU path: its CDI specs and the legacy OCI hook.

podman hands containers GPUs through CDI (``--device nvidia.com/gpu=0``): the spec
``nvidia-ctk cdi generate`` writes, found in the directories containers.conf's ``[engine]
cdi_spec_dirs`` names (``/etc/cdi`` and ``/var/run/cdi`` by default). There is no ``nvidia``
runtime to register and no daemon to restart: a spec that is missing, stale after a driver
upgrade, or short of GPUs is what goes wrong. The older way, the toolkit's OCI hook in
``hooks.d``, injects GPUs into every container that sets ``NVIDIA_VISIBLE_DEVICES``; beside a
CDI spec it injects them a second time.

The checks run when a podman engine is read (a source whose ``/version`` names the Podman
Engine, or one found at a podman socket). Every file is read bounded (:mod:`gputui.health.cdi`;
containers.conf and hook files are small regular files, opened non-blocking), under
:class:`HealthRoots`.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from gputui.boundary.json_limits import json_depth, no_constant
from gputui.boundary.userfiles import UserFileError, read_user_file
from gputui.health.cdi import NVIDIA_GPU_KIND, CdiInventory, CdiSpec, inventory, shown
from gputui.health.context import CheckContext
from gputui.health.docs import DOCS_CDI
from gputui.health.registry import HOST, check
from gputui.health.result import Result
from gputui.model.containers import ContainerInfo
from gputui.model.records import record

#: Bounds of the small files read here: containers.conf (and its drop-ins), hook files.
MAX_CONF_BYTES = 256 * 1024
MAX_CONF_FILES = 32
MAX_HOOK_BYTES = 64 * 1024
MAX_HOOK_FILES = 64
MAX_DIRS = 16
#: Host paths of a spec checked for existence (a stat each).
MAX_STATS = 4096

#: Programs of the NVIDIA Container Toolkit's legacy OCI hook (``oci-nvidia-hook.json``).
NVIDIA_HOOK_PROGRAMS = frozenset(
    {"nvidia-container-toolkit", "nvidia-container-runtime-hook", "oci-nvidia-hook"}
)


def generate_fix(dirs: Sequence[str]) -> str:
    """The command that writes (or rewrites) the NVIDIA spec into podman's first CDI dir."""
    first = dirs[0] if dirs else "/etc/cdi"
    return (
        f"sudo nvidia-ctk cdi generate --output={first.rstrip('/')}/nvidia.yaml\n"
        "nvidia-ctk cdi list   # the names podman takes: --device nvidia.com/gpu=0, =all, ..."
    )


def podman_engines(ctx: CheckContext) -> list[str]:
    """The names of the podman sources read (rootful ``podman``, a user's ``podman-<user>``)."""
    engines = ctx.inputs.engines
    names = []
    for name in ctx.inputs.container_sources:
        engine = engines.get(name)
        product = engine.product if engine is not None else None
        if product == "podman" or (product is None and name.split("-")[0] == "podman"):
            names.append(name)
    return names


def _podman_containers(ctx: CheckContext, engines: Sequence[str]) -> list[ContainerInfo]:
    owners = ctx.inputs.owners
    return [c for c in ctx.inputs.containers.containers if owners.get(c.id) in engines]


# --------------------------------------------------------------------------------------------
# containers.conf


@record(slots=False)
class PodmanConf:
    """What podman's containers.conf says about GPUs.

    Attributes:
        cdi_spec_dirs: ``[engine] cdi_spec_dirs``, None when no file sets it.
        hooks_dirs: ``[engine] hooks_dir``, None when no file sets it.
        notes: One line per file read or refused.
    """

    cdi_spec_dirs: tuple[str, ...] | None
    hooks_dirs: tuple[str, ...] | None
    notes: tuple[str, ...]


def _toml() -> ModuleType:
    """The TOML parser, imported when containers.conf is read (only where podman is)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on Python 3.10 only
        import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]
    module: ModuleType = tomllib
    return module


def _under_host(ctx: CheckContext, path: str) -> str:
    return os.path.join(ctx.roots.host, path.lstrip("/")) if path.startswith("/") else path


def _conf_files(ctx: CheckContext) -> list[str]:
    files: list[str] = []
    for entry in ctx.roots.containers_conf:
        if os.path.isdir(entry):
            try:
                with os.scandir(entry) as listing:
                    found = sorted(
                        e.path
                        for _, e in zip(range(4 * MAX_CONF_FILES), listing, strict=False)
                        if e.name.endswith(".conf")
                    )
            except OSError:
                continue
            files.extend(found)
        elif os.path.lexists(entry):
            files.append(entry)
    return files[:MAX_CONF_FILES]


def read_podman_conf(ctx: CheckContext) -> PodmanConf:
    """``cdi_spec_dirs`` and ``hooks_dir`` as podman reads them: the last file that sets each."""
    cdi: tuple[str, ...] | None = None
    hooks: tuple[str, ...] | None = None
    notes: list[str] = []
    for path in _conf_files(ctx):
        try:
            text = read_user_file(Path(path), "containers.conf", MAX_CONF_BYTES).decode(
                "utf-8", errors="replace"
            )
            config = _toml().loads(text)
        except UserFileError as exc:
            notes.append(f"{shown(path)}: {exc.reason}")
            continue
        except ValueError as exc:  # tomllib.TOMLDecodeError, a bad encoding
            notes.append(f"{shown(path)}: not valid TOML ({str(exc)[:80]})")
            continue
        engine = config.get("engine")
        if not isinstance(engine, dict):
            continue
        for key in ("cdi_spec_dirs", "hooks_dir"):
            value = engine.get(key)
            if value is None:
                continue
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                notes.append(f"{shown(path)}: [engine] {key} is not a list of paths, passed over")
                continue
            dirs = tuple(dict.fromkeys(v for v in value[:MAX_DIRS] if v))
            notes.append(f"{shown(path)}: [engine] {key} = {', '.join(map(shown, dirs))}")
            if key == "cdi_spec_dirs":
                cdi = dirs
            else:
                hooks = dirs
    return PodmanConf(cdi, hooks, tuple(notes))


def podman_cdi_dirs(ctx: CheckContext) -> tuple[list[str], list[str], PodmanConf]:
    """The CDI dirs podman reads: ``(shown, read)``, as on the host and as read; the conf."""
    conf = ctx.once("podman.conf", lambda: read_podman_conf(ctx))
    if conf.cdi_spec_dirs is not None:
        return list(conf.cdi_spec_dirs), [_under_host(ctx, d) for d in conf.cdi_spec_dirs], conf
    return list(ctx.roots.cdi_dirs), list(ctx.roots.cdi_dirs), conf


# --------------------------------------------------------------------------------------------
# podman.cdi


def _missing(ctx: CheckContext, paths: Sequence[str], budget: list[int]) -> list[str]:
    gone = []
    for path in paths:
        if budget[0] <= 0:
            break
        budget[0] -= 1
        if not os.path.exists(_under_host(ctx, path)):
            gone.append(path)
    return gone


def _covered(spec_names: set[str], index: int, uuid: str | None) -> bool:
    if str(index) in spec_names or (uuid is not None and uuid in spec_names):
        return True
    return any(name.startswith(f"{index}:") for name in spec_names)


def _stale_lines(ctx: CheckContext, specs: Sequence[CdiSpec]) -> list[str]:
    """What a spec names that the host no longer has, one line per kind of path."""
    lines: list[str] = []
    budget = [MAX_STATS]
    driver = ctx.inputs.gpu.driver_version
    for spec in specs:
        where = shown(spec.path)
        for label, paths in (
            ("device node(s)", spec.device_nodes),
            ("library or file mount(s)", spec.mounts),
            ("hook program(s)", spec.hooks),
        ):
            gone = _missing(ctx, paths, budget)
            if gone:
                sample = ", ".join(shown(p) for p in gone[:3])
                more = f" and {len(gone) - 3} more" if len(gone) > 3 else ""
                lines.append(f"{where}: {len(gone)} {label} no longer exist: {sample}{more}")
        versions = spec.driver_versions
        if driver and versions and driver not in versions:
            lines.append(
                f"{where}: written for driver {', '.join(sorted(versions))}, "
                f"the running driver is {driver}"
            )
    return lines


@check("podman.cdi", scope=HOST)
def check_podman_cdi(ctx: CheckContext) -> Result:
    """Does podman have a current NVIDIA CDI spec covering every GPU?"""
    engines = podman_engines(ctx)
    if not engines:
        return Result.skip("No podman engine is read")
    dirs, read_dirs, conf = podman_cdi_dirs(ctx)
    found = inventory(ctx, read_dirs)
    origin = "containers.conf cdi_spec_dirs" if conf.cdi_spec_dirs is not None else "the default"
    details = [f"podman engine(s): {', '.join(engines)}"]
    details.append(f"CDI spec dirs ({origin}): {', '.join(map(shown, dirs)) or '(none)'}")
    details.extend(conf.notes)
    details.extend(_spec_lines(found, dirs, read_dirs))
    requested = [c.name for c in _podman_containers(ctx, engines) if c.gpu_request_via == "cdi"]
    if requested:
        details.append(f"podman containers requesting CDI devices: {', '.join(requested)}")
    fix = generate_fix(dirs)
    specs = found.nvidia
    if not specs:
        broken = found.unreadable_nvidia
        if broken:
            summary = f"The NVIDIA CDI spec cannot be read: {broken[0].problem}"
        else:
            summary = (
                "No NVIDIA CDI spec: podman cannot give containers GPUs "
                "(--device nvidia.com/gpu=0 fails: unresolvable CDI devices)"
            )
        status = Result.fail if requested else Result.warn
        return status(summary, details=details, fix=fix, docs=DOCS_CDI)
    stale = _stale_lines(ctx, specs)
    if stale:
        details.extend(stale)
        return Result.warn(
            "The NVIDIA CDI spec is stale (the driver or toolkit changed since it was written): "
            "regenerate it",
            details=details,
            fix=fix + "\n(the toolkit's nvidia-cdi-refresh.service does this on boot)",
            docs=DOCS_CDI,
        )
    names = {name for spec in specs for name in spec.devices}
    gpus = [g for g in ctx.inputs.gpu.gpus if not g.lost] if ctx.nvml_ok else []
    short = [g.index for g in gpus if not _covered(names, g.index, g.uuid)]
    if short:
        return Result.warn(
            f"The NVIDIA CDI spec lists {len(gpus) - len(short)} of the {len(gpus)} GPUs NVML "
            f"sees: GPU {', '.join(map(str, short))} cannot be requested",
            details=(*details, "a GPU was added or replaced since the spec was written"),
            fix=fix,
            docs=DOCS_CDI,
        )
    return Result.passed(
        f"NVIDIA CDI spec for podman: {len(names)} device name(s)"
        + (f", every one of the {len(gpus)} GPU(s)" if gpus else ""),
        details=details,
        docs=DOCS_CDI,
    )


def _spec_lines(found: CdiInventory, dirs: Sequence[str], read_dirs: Sequence[str]) -> list[str]:
    """One line per spec file and per directory note, paths as on the host."""

    def as_on_host(path: str) -> str:
        for shown_dir, read_dir in zip(dirs, read_dirs, strict=True):
            if path.startswith(read_dir):
                return shown_dir + path[len(read_dir) :]
        return path

    lines = [as_on_host(note) for note in found.notes]
    for spec in found.specs:
        where = shown(as_on_host(spec.path))
        if spec.problem is not None:
            what = "NVIDIA spec" if spec.nvidia_text else "spec"
            lines.append(f"{where}: {what} not read: {spec.problem}")
        elif spec.kind == NVIDIA_GPU_KIND:
            sample = ", ".join(map(shown, spec.devices[:6]))
            more = f", ... ({len(spec.devices)})" if len(spec.devices) > 6 else ""
            lines.append(
                f"{where}: {spec.kind}, cdiVersion {shown(spec.version or '?')}, devices "
                f"{sample or '(none)'}{more}"
            )
        else:
            lines.append(f"{where}: {shown(spec.kind or '?')} (not NVIDIA)")
    return lines


# --------------------------------------------------------------------------------------------
# podman.hooks


@record(slots=False)
class NvidiaHook:
    """A hooks.d file that runs the toolkit's legacy hook."""

    path: str
    program: str


def _read_hook(path: str) -> tuple[NvidiaHook | None, str | None]:
    """The NVIDIA hook a hook file configures (None when it is another's), or why not read."""
    try:
        data = read_user_file(Path(path), "OCI hook", MAX_HOOK_BYTES)
    except UserFileError as exc:
        return None, f"{shown(path)}: {exc.reason}"
    if json_depth(data) > 16:
        return None, f"{shown(path)}: nested too deep, not read"
    try:
        document = json.loads(data.decode("utf-8", errors="replace"), parse_constant=no_constant)
    except json.JSONDecodeError as exc:
        return None, f"{shown(path)}: not valid JSON ({exc.msg} at line {exc.lineno})"
    hook = document.get("hook") if isinstance(document, dict) else None
    program = hook.get("path") if isinstance(hook, dict) else None
    if not isinstance(program, str) or len(program) > 4096:
        return None, f"{shown(path)}: no hook.path, passed over"
    if os.path.basename(program) in NVIDIA_HOOK_PROGRAMS:
        return NvidiaHook(path, program), None
    return None, None


def _nvidia_hooks(ctx: CheckContext, dirs: Sequence[str]) -> tuple[list[NvidiaHook], list[str]]:
    hooks: list[NvidiaHook] = []
    notes: list[str] = []
    for directory in dirs:
        try:
            with os.scandir(directory) as listing:
                names = sorted(
                    e.name
                    for _, e in zip(range(4 * MAX_HOOK_FILES), listing, strict=False)
                    if e.name.endswith(".json")
                )
        except FileNotFoundError:
            continue
        except OSError as exc:
            notes.append(f"{shown(directory)}: cannot list ({exc.strerror or exc})")
            continue
        for name in names[:MAX_HOOK_FILES]:
            hook, note = _read_hook(os.path.join(directory, name))
            if hook is not None:
                hooks.append(hook)
            if note is not None:
                notes.append(note)
    return hooks, notes


@check("podman.hooks", scope=HOST)
def check_podman_hooks(ctx: CheckContext) -> Result:
    """Is the toolkit's legacy OCI hook configured beside CDI (twice), or neither?"""
    engines = podman_engines(ctx)
    if not engines:
        return Result.skip("No podman engine is read")
    conf = ctx.once("podman.conf", lambda: read_podman_conf(ctx))
    if conf.hooks_dirs is not None:
        shown_dirs = list(conf.hooks_dirs)
        read_dirs = [_under_host(ctx, d) for d in conf.hooks_dirs]
    else:
        shown_dirs = read_dirs = list(ctx.roots.hooks_dirs)
    hooks, notes = _nvidia_hooks(ctx, read_dirs)
    _, cdi_read, _ = podman_cdi_dirs(ctx)
    specs = inventory(ctx, cdi_read).nvidia

    def on_host(path: str) -> str:
        for shown_dir, read_dir in zip(shown_dirs, read_dirs, strict=True):
            if path.startswith(read_dir):
                return shown_dir + path[len(read_dir) :]
        return path

    details = [f"OCI hooks dirs: {', '.join(map(shown, shown_dirs))}"]
    details.extend(on_host(n) for n in notes)
    details.extend(f"{shown(on_host(h.path))}: runs {shown(h.program)}" for h in hooks)
    details.append(
        f"NVIDIA CDI spec: {', '.join(shown(s.path) for s in specs)}" if specs else
        "NVIDIA CDI spec: none"
    )  # fmt: skip
    generate = generate_fix(podman_cdi_dirs(ctx)[0])
    remove = "\n".join(f"sudo rm {shown(on_host(h.path))}" for h in hooks)
    gone = [h for h in hooks if not os.path.exists(_under_host(ctx, h.program))]
    if gone:
        return Result.warn(
            f"The NVIDIA OCI hook runs {shown(gone[0].program)}, which does not exist: "
            "containers it applies to fail to start",
            details=details,
            fix=f"{remove}\nand give containers GPUs through CDI:\n{generate}",
            docs=DOCS_CDI,
        )
    if hooks and specs:
        return Result.warn(
            "The NVIDIA OCI hook and a CDI spec both inject GPUs: a CDI container gets them twice",
            details=(
                *details,
                "the hook also gives every container that sets NVIDIA_VISIBLE_DEVICES (CUDA "
                "images set it to all) the GPUs it names, without --device",
            ),
            fix=f"Keep CDI, the way podman hands out GPUs; remove the hook:\n{remove}",
            docs=DOCS_CDI,
        )
    if hooks:
        return Result.info(
            "GPUs through the NVIDIA OCI hook (legacy): podman's way is CDI",
            details=details,
            fix=f"{generate}\nthen remove the hook:\n{remove}",
            docs=DOCS_CDI,
        )
    if not specs:
        return Result.warn(
            "podman has no way to give containers GPUs: no NVIDIA CDI spec and no NVIDIA OCI hook",
            details=details,
            fix=generate,
            docs=DOCS_CDI,
        )
    return Result.passed("No legacy NVIDIA OCI hook: GPUs through CDI alone", details=details)
