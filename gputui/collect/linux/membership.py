"""Pure parsers for ``/proc/<pid>/cgroup`` and ``/proc/<pid>/status`` text (no I/O).

The container id of a process is read from its cgroup path, the one fact every runtime (Docker,
containerd, CRI-O, podman, Kubernetes) leaves in a common place. Every function here takes text
and never raises, whatever the text (the tests fuzz them): the files are read from other processes
and may be truncated, garbled, or shaped by a runtime nobody has seen yet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["CgroupMatch", "has_relative_path", "parse_cgroup", "parse_nspid"]

# One path component that names a container: an optional runtime prefix, the 64-hex id, and an
# optional systemd ``.scope`` suffix. Matched against WHOLE components, which is what skips the
# look-alikes: a ``docker-<id>.mount`` unit, and the ``crio-conmon-<id>.scope`` /
# ``libpod-conmon-<id>.scope`` monitor processes that sit next to a container but are not in it.
_ID_RE = re.compile(
    r"(?:(docker|libpod|cri-containerd|crio|containerd)-)?([0-9a-f]{64})(?:\.scope)?"
)
# Kubernetes pod UID, written with ``-`` (cgroupfs driver) or ``_`` (systemd driver, which reserves
# ``-`` as its slice separator): ``pod<uid>`` or ``kubepods-burstable-pod<uid>.slice``.
_POD_RE = re.compile(
    r"(?:^|-)pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})"
    r"(?:\.slice)?$"
)
_PREFIX_RUNTIME = {
    "docker": "docker",
    "libpod": "podman",
    "cri-containerd": "containerd",
    "containerd": "containerd",
    "crio": "crio",
}
# The middle field of the systemd-driver form ``<slice>:<runtime>:<id>`` (kubelet's cgroup name
# for a container when the runtime is given a systemd slice but not a scope).
_COLON_RUNTIME = {
    "docker": "docker",
    "cri-containerd": "containerd",
    "containerd": "containerd",
    "crio": "crio",
    "libpod": "podman",
}
_HEX64_RE = re.compile(r"[0-9a-f]{64}")
_NSPID_FIELD_RE = re.compile(r"[0-9]{1,10}")


@dataclass(frozen=True, slots=True)
class CgroupMatch:
    """The container a cgroup file places a process in.

    Attributes:
        container_id: The full 64-hex container id (lowercase).
        runtime: ``docker``, ``containerd``, ``crio``, ``podman`` or ``kubernetes``; None when the
            path names a container under a parent no rule recognises.
        pod_uid: Kubernetes pod UID with ``-`` separators, or None.
        relative: True when the path had ``..`` components, i.e. the reader sits in a private
            cgroup namespace and sees paths relative to its own cgroup.
    """

    container_id: str
    runtime: str | None
    pod_uid: str | None
    relative: bool


@dataclass(frozen=True, slots=True)
class _PathHit:
    """The deepest container named by one cgroup path, plus the ids of containers above it."""

    match: CgroupMatch
    outer_ids: tuple[str, ...]


def _component_id(component: str) -> tuple[str, str | None] | None:
    """The (id, runtime-from-name) one path component names, or None."""
    if ":" in component:
        # ``kubepods-...-pod<uid>.slice:cri-containerd:<id>``: the id is the last field.
        fields = component.split(":")
        if len(fields) >= 3 and _HEX64_RE.fullmatch(fields[-1]):
            return fields[-1], _COLON_RUNTIME.get(fields[-2])
        return None
    found = _ID_RE.fullmatch(component)
    if found is None:
        return None
    prefix = found.group(1)
    return found.group(2), (_PREFIX_RUNTIME[prefix] if prefix else None)


def _component_pod(component: str) -> str | None:
    """The pod UID (``-`` separated) one path component names, or None."""
    for part in component.split(":"):
        found = _POD_RE.search(part)
        if found is not None:
            return found.group(1).replace("_", "-")
    return None


def _scan_path(path: str) -> _PathHit | None:
    """Find the deepest container id among all components of one cgroup path.

    Every component is scanned, not only the last: podman adds a ``/container`` child below
    ``libpod-<id>.scope``, and nested runtimes (Docker-in-Docker, kind) stack several ids, of which
    the deepest is the container the process really runs in.
    """
    components = path.split("/")
    ids: list[tuple[int, str, str | None]] = []
    for depth, component in enumerate(components):
        hit = _component_id(component)
        if hit is not None:
            ids.append((depth, hit[0], hit[1]))
    if not ids:
        return None
    depth, container_id, runtime = ids[-1]
    above = components[: depth + 1]
    pod_uid = None
    for component in reversed(above):
        pod_uid = _component_pod(component)
        if pod_uid is not None:
            break
    if runtime is None:
        parent = components[depth - 1] if depth > 0 else ""
        if parent == "docker":
            runtime = "docker"
        elif pod_uid is not None or any(c.startswith("kubepods") for c in above):
            runtime = "kubernetes"
    match = CgroupMatch(
        container_id=container_id,
        runtime=runtime,
        pod_uid=pod_uid,
        relative=".." in components,
    )
    return _PathHit(match=match, outer_ids=tuple(i for _, i, _ in ids[:-1]))


def _lines(text: str) -> list[tuple[str, str, str]]:
    """Split cgroup file text into (hierarchy id, controllers, path) triples.

    Only two splits per line: the path itself may contain ``:`` (the cri-containerd form).
    """
    triples: list[tuple[str, str, str]] = []
    for line in text.splitlines():
        fields = line.strip().split(":", 2)
        if len(fields) == 3:
            triples.append((fields[0], fields[1], fields[2]))
    return triples


def parse_cgroup(text: str) -> CgroupMatch | None:
    """Find the container a process belongs to from its ``/proc/<pid>/cgroup`` text.

    The cgroup v2 line (``0::``) is preferred when it names a container; otherwise the deepest
    match of the controller lines (``memory``, ``name=systemd``...) is used. One exception: on a
    hybrid host the v2 line may stop at an outer container while a controller line goes on to a
    container nested inside it (kind, Docker-in-Docker); the nested one is then the answer.

    Args:
        text: Contents of ``/proc/<pid>/cgroup``.

    Returns:
        The container, or None for a host process, a non-container sandbox (``/process_api/...``,
        ECS task names), or unparseable text.
    """
    unified: _PathHit | None = None
    controller: _PathHit | None = None
    for hierarchy, controllers, path in _lines(text):
        hit = _scan_path(path)
        if hit is None:
            continue
        if hierarchy == "0" and controllers == "":
            unified = unified or hit
        elif controller is None or len(hit.outer_ids) > len(controller.outer_ids):
            controller = hit
    if unified is None:
        return controller.match if controller else None
    if controller is not None and unified.match.container_id in controller.outer_ids:
        return controller.match
    return unified.match


def has_relative_path(text: str) -> bool:
    """Whether any line of a cgroup file has ``..`` path components.

    Args:
        text: Contents of ``/proc/<pid>/cgroup``.

    Returns:
        True when the reader is in a private cgroup namespace that does not contain the process.
    """
    return any(".." in path.split("/") for _, _, path in _lines(text))


def parse_nspid(status_text: str) -> int | None:
    """The PID of a process inside its own PID namespace (last field of the ``NSpid:`` line).

    ``NSpid`` lists the PID in every namespace from the reader's down to the process's own, so
    the last field is the in-container PID; for a host process it equals the host PID.

    Args:
        status_text: Contents of ``/proc/<pid>/status``.

    Returns:
        The PID, or None when the line is absent (kernel before 4.1) or garbled.
    """
    for line in status_text.splitlines():
        if not line.startswith("NSpid:"):
            continue
        fields = line[len("NSpid:") :].split()
        # A digit-only regex rather than str.isdigit(): the latter accepts "²", which int()
        # rejects; the length bound keeps int() away from its huge-string limit.
        if not fields or not all(_NSPID_FIELD_RE.fullmatch(f) for f in fields):
            return None
        pid = int(fields[-1])
        return pid if pid > 0 else None
    return None
