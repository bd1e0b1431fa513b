"""Which container engines a host runs: the sockets and state directories gputui reads.

A host may run several engines at once: the Docker engine, rootful podman, each user's rootless
podman and rootless Docker, a containerd (or k3s' containerd) under a kubelet. Each found engine
becomes one :class:`EngineSpec`, and the wiring builds one container source per spec, so every
container on the host is listed by the engine that runs it.

Discovery looks only at local paths and makes no request: a socket counts when it exists as a
socket (``stat``, no connect), a containerd when its task-state directory exists. What an engine
is, podman or Docker, is asked of the engine itself (``/version``) on its first read.

``--engine`` (repeatable) restricts or adds: ``KIND`` keeps the discovered engines of that kind
(``docker`` always means the Docker CLI's endpoint: ``DOCKER_HOST``, the docker context, else
``/var/run/docker.sock``), ``KIND=ADDRESS`` adds one at an address (a ``unix://`` or ``tcp://``
URL for ``docker`` and ``podman``, the state directory for ``containerd``, the CRI socket for
``crio``), and ``auto`` adds everything discovered to the explicit ones.

CRI-O is found by its socket (``/var/run/crio/crio.sock``, ``/run/crio/crio.sock``) and read
through the CRI API (:mod:`gputui.collect.criapi.source`). A containerd is never read through its
CRI unless asked (``--engine crio=unix:///run/containerd/containerd.sock``): its bundle source
lists the same containers already.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from gputui.collect.linux.users import user_name
from gputui.model.records import record

#: The kinds of engine gputui reads, as ``--engine`` names them.
ENGINE_KINDS = ("docker", "podman", "containerd", "crio")
#: Where containerd keeps the state of its v2 shims' tasks, below its state directory.
CONTAINERD_TASKS = "io.containerd.runtime.v2.task"
#: containerd state directories: the distribution's and k3s' (RKE2 uses k3s' layout too).
CONTAINERD_STATE_DIRS = (("containerd", "/run/containerd"), ("k3s", "/run/k3s/containerd"))
#: CRI-O's CRI socket: the documented path first (``/var/run`` links to ``/run`` as a rule).
CRIO_SOCKETS = ("/var/run/crio/crio.sock", "/run/crio/crio.sock")
#: More users' runtime directories than a shared host has; the rest are not looked at.
MAX_USER_DIRS = 256
#: The longest address ``--engine`` takes.
MAX_ADDRESS_CHARS = 300


class EngineSpecError(ValueError):
    """A ``--engine`` value that cannot be used (one line)."""


@record
class EngineSpec:
    """One container engine to read.

    Attributes:
        name: The source's name: its key in the snapshot and the JSON report (``docker``,
            ``podman``, ``podman-alice``, ``docker-alice``, ``containerd``, ``k3s``, ``crio``).
        kind: ``docker``, ``podman``, ``containerd`` or ``crio``.
        address: The engine's URL (``unix:///run/podman/podman.sock``), None for the Docker
            CLI's endpoint; for ``containerd`` its state directory; for ``crio`` its CRI
            socket's ``unix://`` URL.
        explicit: Given with ``--engine`` (its absence is then worth a status, not silence).
    """

    name: str
    kind: str
    address: str | None
    explicit: bool = False


def parse_engine_spec(text: str) -> tuple[str, str | None]:
    """One ``--engine`` value as ``(kind, address)``; ``("auto", None)`` for ``auto``.

    Raises:
        EngineSpecError: an unknown kind, an empty or over-long address, or an address of the
            wrong form for its kind.
    """
    kind, sep, address = text.strip().partition("=")
    kind = kind.strip().lower()
    if kind == "auto" and not sep:
        return "auto", None
    if kind not in ENGINE_KINDS:
        shown = repr(kind[:40])
        raise EngineSpecError(
            f"unknown engine {shown}: expected one of {', '.join(ENGINE_KINDS)} or auto"
        )
    if not sep:
        return kind, None
    address = address.strip()
    if not address or len(address) > MAX_ADDRESS_CHARS or "\x00" in address:
        raise EngineSpecError(
            f"--engine {kind}= needs an address of 1 to {MAX_ADDRESS_CHARS} chars"
        )
    if kind == "containerd":
        if not address.startswith("/"):
            raise EngineSpecError(
                "--engine containerd= takes containerd's state directory, e.g. /run/containerd"
            )
        return kind, os.path.normpath(address)
    if kind == "crio":
        path = address[len("unix://") :] if address.startswith("unix://") else address
        if not path.startswith("/"):
            raise EngineSpecError(
                "--engine crio= takes the CRI socket, e.g. unix:///var/run/crio/crio.sock"
            )
        return kind, f"unix://{os.path.normpath(path)}"
    if address.startswith("/"):
        address = f"unix://{address}"
    if not address.startswith(("unix://", "tcp://", "http://", "https://", "ssh://")):
        raise EngineSpecError(
            f"--engine {kind}= takes a unix://, tcp:// or ssh:// URL or a socket path"
        )
    return kind, address


def _is_socket(path: Path) -> bool:
    try:
        return stat.S_ISSOCK(path.stat().st_mode)
    except OSError:
        return False


def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(path.stat().st_mode)
    except OSError:
        return False


def _user_dirs(run_root: Path) -> list[tuple[int, Path]]:
    """``<run>/user/<uid>`` directories, by uid (at most :data:`MAX_USER_DIRS`)."""
    try:
        names = [entry.name for entry in os.scandir(run_root / "user")]
    except OSError:
        return []
    uids = sorted(int(n) for n in names if n.isdigit() and len(n) <= 10)
    return [(uid, run_root / "user" / str(uid)) for uid in uids[:MAX_USER_DIRS]]


def docker_endpoint_path(env: Mapping[str, str]) -> str | None:
    """The socket path the Docker CLI's endpoint names when it is a local socket, else None."""
    host = env.get("DOCKER_HOST") or ""
    if host.startswith("unix://"):
        return host[len("unix://") :]
    if host or env.get("DOCKER_CONTEXT"):
        return None  # a remote engine, or a context: resolved by the Docker source itself
    return "/var/run/docker.sock"


def _same_socket(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return False
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _crio_socket(root: Path, var_run: Path) -> Path | None:
    """CRI-O's socket (``<var_run>/crio/crio.sock``, else ``<run>/crio/crio.sock``) if there."""
    for path in (var_run / "crio" / "crio.sock", root / "crio" / "crio.sock"):
        if _is_socket(path):
            return path
    return None


def discover(
    env: Mapping[str, str] | None = None,
    *,
    run_root: str | os.PathLike[str] = "/run",
    var_run: str | os.PathLike[str] = "/var/run",
) -> list[EngineSpec]:
    """Every engine this host shows, the Docker CLI's endpoint first.

    The Docker CLI's endpoint is listed when ``DOCKER_HOST`` or a context names it, when the
    default socket exists, or when nothing else is found (its status then says there is no
    engine). A podman socket that is the Docker CLI's endpoint too is listed once.

    Args:
        env: The environment (``os.environ`` when None).
        run_root: Where ``/run`` is (tests point it elsewhere).
        var_run: Where ``/var/run`` is.
    """
    env = os.environ if env is None else env
    root = Path(run_root)
    found: list[EngineSpec] = []
    docker_path = docker_endpoint_path(env)
    if docker_path is not None and docker_path == "/var/run/docker.sock":
        docker_path = str(Path(var_run) / "docker.sock")
    # DOCKER_HOST or a context is what the user asked for: read even when it does not answer.
    docker_present = (
        docker_path is None or bool(env.get("DOCKER_HOST")) or _is_socket(Path(docker_path))
    )
    sockets: list[tuple[str, str, Path]] = []
    if _is_socket(root / "podman" / "podman.sock"):
        sockets.append(("podman", "podman", root / "podman" / "podman.sock"))
    for uid, home in _user_dirs(root):
        user = user_name(uid) or str(uid)
        if _is_socket(home / "podman" / "podman.sock"):
            sockets.append((f"podman-{user}", "podman", home / "podman" / "podman.sock"))
        if _is_socket(home / "docker.sock"):
            sockets.append((f"docker-{user}", "docker", home / "docker.sock"))
    others = [
        EngineSpec(name, kind, f"unix://{path}")
        for name, kind, path in sockets
        if not (docker_present and _same_socket(str(path), docker_path))
    ]
    for name, state in CONTAINERD_STATE_DIRS:
        base = Path(state) if str(root) == "/run" else root / Path(state).relative_to("/run")
        if _is_dir(base / CONTAINERD_TASKS):
            others.append(EngineSpec(name, "containerd", str(base)))
    crio = _crio_socket(root, Path(var_run))
    if crio is not None:
        others.append(EngineSpec("crio", "crio", f"unix://{crio}"))
    if docker_present or not others:
        found.append(EngineSpec("docker", "docker", None))
    return found + others


def select(
    specs: Sequence[str],
    discovered: Iterable[EngineSpec] | None = None,
    env: Mapping[str, str] | None = None,
) -> list[EngineSpec]:
    """The engines to read for the ``--engine`` values given (none: everything discovered).

    Args:
        specs: The ``--engine`` values, in order.
        discovered: What :func:`discover` found (looked up when needed and None).
        env: The environment, for discovery.

    Raises:
        EngineSpecError: a value cannot be used.
    """
    parsed = [parse_engine_spec(s) for s in specs]
    if not parsed:
        return list(discovered) if discovered is not None else discover(env)
    needs_discovery = any(kind == "auto" or address is None for kind, address in parsed)
    found = (
        (list(discovered) if discovered is not None else discover(env)) if needs_discovery else []
    )
    chosen: list[EngineSpec] = []
    names: set[str] = set()

    def add(spec: EngineSpec) -> None:
        if any(s.kind == spec.kind and s.address == spec.address for s in chosen):
            return
        name, n = spec.name, 2
        while name in names:
            name, n = f"{spec.name}-{n}", n + 1
        names.add(name)
        chosen.append(EngineSpec(name, spec.kind, spec.address, spec.explicit))

    for kind, address in parsed:
        if kind == "auto":
            for spec in found:
                add(spec)
        elif address is None:
            matching = [s for s in found if s.kind == kind]
            if kind == "docker" and not any(s.address is None for s in matching):
                matching.insert(0, EngineSpec("docker", "docker", None, explicit=True))
            if not matching:
                matching = [_default_of(kind)]
            for spec in matching:
                add(EngineSpec(spec.name, spec.kind, spec.address, explicit=True))
        else:
            add(EngineSpec(kind, kind, address, explicit=True))
    return chosen


def _default_of(kind: str) -> EngineSpec:
    """The usual address of a kind nothing was discovered of (its status then says so)."""
    if kind == "podman":
        return EngineSpec("podman", "podman", "unix:///run/podman/podman.sock", explicit=True)
    if kind == "containerd":
        return EngineSpec("containerd", "containerd", "/run/containerd", explicit=True)
    if kind == "crio":
        return EngineSpec("crio", "crio", f"unix://{CRIO_SOCKETS[0]}", explicit=True)
    return EngineSpec("docker", "docker", None, explicit=True)


#: How to let gputui reach the engine of a container it sees only in a cgroup, by the runtime
#: its cgroup path (or runtime monitor) names.
_CONNECT_HINTS = {
    "podman": "start podman's API service (systemctl start podman.socket; a user's: "
    "systemctl --user start podman.socket) or name it: --engine podman=unix:///PATH",
    "docker": "name its engine: --engine docker=unix:///PATH (a rootless one: "
    "/run/user/UID/docker.sock)",
    "containerd": "name containerd's state directory: --engine containerd=/run/containerd",
    "crio": f"name CRI-O's socket: --engine crio=unix://{CRIO_SOCKETS[0]}",
    "kubernetes": "name containerd's state directory: --engine containerd=/run/containerd "
    "(k3s: /run/k3s/containerd)",
}


def connect_hint(runtime: str | None) -> str:
    """How to connect the engine of a runtime gputui does not read (empty when unknown)."""
    return _CONNECT_HINTS.get(runtime or "", "")
