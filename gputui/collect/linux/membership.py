"""Pure parsers for ``/proc/<pid>/cgroup``, ``/proc/<pid>/status`` and mountinfo text (no I/O).

The container id of a process is read from its cgroup path, the one fact every runtime (Docker,
containerd, CRI-O, podman, Kubernetes) leaves in a common place. Every function here takes text
and never raises, whatever the text (the tests fuzz them): the files are read from other processes
and may be truncated, garbled, or shaped by a runtime nobody has seen yet. Each parser also bounds
how much of its input it looks at, so an oversized file costs no more than a normal one.
"""

from __future__ import annotations

import re

from gputui.model.records import record

__all__ = [
    "MAX_CGROUP_CHARS",
    "MAX_MONITOR_ARGS",
    "MAX_MOUNTINFO_CHARS",
    "MAX_STATUS_CHARS",
    "CgroupMatch",
    "MonitorMatch",
    "ProcMount",
    "has_relative_path",
    "hides_other_users",
    "parse_cgroup",
    "parse_monitor_cmdline",
    "parse_nspid",
    "parse_nspid_fields",
    "parse_proc_mount",
    "parse_stat_ppid",
    "path_names_container",
]

#: A cgroup file has one line per hierarchy (about 13 on cgroup v1, one on v2), each path at most
#: PATH_MAX: more text than this is not a cgroup file and is ignored.
MAX_CGROUP_CHARS = 64 * 1024
MAX_CGROUP_LINES = 64
_PATH_MAX = 4096
#: ``/proc/<pid>/status`` is about 1.5 KiB; only a process in thousands of supplementary groups
#: (its ``Groups:`` line precedes ``NSpid:``) comes near this.
MAX_STATUS_CHARS = 64 * 1024
#: The kernel nests PID namespaces at most 32 deep (MAX_PID_NS_LEVEL), so NSpid has at most 33.
MAX_NSPID_FIELDS = 33
#: A host with thousands of container mounts has a mountinfo of a few hundred KiB.
MAX_MOUNTINFO_CHARS = 1024 * 1024
MAX_MOUNTINFO_LINES = 20_000

# One path component that names a container: an optional runtime prefix, the 64-hex id, and an
# optional systemd ``.scope`` suffix (``nerdctl-<id>.scope`` is nerdctl's unit under the systemd
# driver). Matched against WHOLE components, which is what skips the
# look-alikes: a ``docker-<id>.mount`` unit, and the ``crio-conmon-<id>.scope`` /
# ``libpod-conmon-<id>.scope`` monitor processes that sit next to a container but are not in it.
_ID_RE = re.compile(
    r"(?:(docker|libpod|cri-containerd|crio|containerd|nerdctl)-)?([0-9a-f]{64})(?:\.scope)?"
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
    "nerdctl": "containerd",
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


@record
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


@record
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


def component_container_id(component: str) -> str | None:
    """The container id one cgroup path component names (``docker-<id>.scope``...), or None."""
    if len(component) < 64 or len(component) > 255:
        return None
    hit = _component_id(component)
    return None if hit is None else hit[0]


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
    for line in text[:MAX_CGROUP_CHARS].splitlines()[:MAX_CGROUP_LINES]:
        fields = line.strip().split(":", 2)
        # A path longer than PATH_MAX cannot be a real cgroup: skip it rather than scan it.
        if len(fields) == 3 and len(fields[2]) <= _PATH_MAX:
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


def parse_nspid_fields(status_text: str) -> tuple[int, ...] | None:
    """All fields of the ``NSpid:`` line: the PID in each namespace, the reader's first.

    Args:
        status_text: Contents of ``/proc/<pid>/status``.

    Returns:
        The PIDs (one field: the process is in the reader's own PID namespace), or None when the
        line is absent (kernel before 4.1), garbled, or longer than any kernel writes.
    """
    for line in status_text[:MAX_STATUS_CHARS].splitlines():
        if not line.startswith("NSpid:"):
            continue
        fields = line[len("NSpid:") :].split(maxsplit=MAX_NSPID_FIELDS)
        # A digit-only regex rather than str.isdigit(): the latter accepts "²", which int()
        # rejects; the length bound keeps int() away from its huge-string limit.
        if not 0 < len(fields) <= MAX_NSPID_FIELDS or not all(
            _NSPID_FIELD_RE.fullmatch(f) for f in fields
        ):
            return None
        pids = tuple(int(f) for f in fields)
        return pids if all(p > 0 for p in pids) else None
    return None


def parse_nspid(status_text: str) -> int | None:
    """The PID of a process inside its own PID namespace (last field of the ``NSpid:`` line).

    ``NSpid`` lists the PID in every namespace from the reader's down to the process's own, so
    the last field is the in-container PID; for a host process it equals the host PID.

    Args:
        status_text: Contents of ``/proc/<pid>/status``.

    Returns:
        The PID, or None when the line is absent (kernel before 4.1) or garbled.
    """
    fields = parse_nspid_fields(status_text)
    return fields[-1] if fields else None


@record
class ProcMount:
    """The options of a procfs mount that decide what gputui may see.

    Attributes:
        hidepid: The ``hidepid=`` value as the kernel writes it (``1``/``noaccess``,
            ``2``/``invisible``, ``4``/``ptraceable``), None when absent or ``0``/``off``.
        gid: The ``gid=`` option: members of this group see every process anyway.
    """

    hidepid: str | None
    gid: int | None


_HIDEPID_OFF = frozenset({"0", "off"})
_MOUNT_GID_RE = re.compile(r"[0-9]{1,10}")


def parse_proc_mount(mountinfo: str, mount_point: str = "/proc") -> ProcMount | None:
    """The procfs mounted at ``mount_point``, from ``/proc/self/mountinfo`` text.

    When several procfs are stacked on the same point, the last line (the topmost) wins.

    Args:
        mountinfo: Contents of ``/proc/self/mountinfo``.
        mount_point: Where the procfs of interest is mounted.

    Returns:
        Its options, or None when no procfs is mounted there (or the text is garbled).
    """
    found: ProcMount | None = None
    for line in mountinfo[:MAX_MOUNTINFO_CHARS].splitlines()[:MAX_MOUNTINFO_LINES]:
        # ``id parent maj:min root mount-point mount-options [optional...] - fstype source
        # super-options``: the optional fields vary in number, hence the split on " - ".
        head, sep, tail = line.partition(" - ")
        fields, after = head.split(), tail.split()
        if not sep or len(fields) < 6 or len(after) < 3 or after[0] != "proc":
            continue
        if fields[4] != mount_point:
            continue
        hidepid: str | None = None
        gid: int | None = None
        # procfs options are per mount since Linux 5.8 and per superblock before: read both.
        for option in (fields[5] + "," + after[2]).split(","):
            key, _, value = option.partition("=")
            if key == "hidepid" and value:
                hidepid = None if value in _HIDEPID_OFF else value[:16]
            elif key == "gid" and _MOUNT_GID_RE.fullmatch(value):
                gid = int(value)
        found = ProcMount(hidepid, gid)
    return found


def hides_other_users(mount: ProcMount | None, euid: int, groups: frozenset[int]) -> bool:
    """Whether a procfs with these options hides other users' processes from this reader.

    Args:
        mount: The procfs options (None: no procfs found, nothing known to be hidden).
        euid: The reader's effective uid; root (with its ptrace capability) sees everything.
        groups: The reader's effective and supplementary group ids.

    Returns:
        True when ``hidepid`` is set and the reader is neither root nor in the ``gid=`` group.
    """
    if mount is None or mount.hidepid is None or euid == 0:
        return False
    return mount.gid is None or mount.gid not in groups


#: A runtime monitor's command line is a few hundred bytes to a few KiB (conmon's lists its log
#: and exit paths); the options that name the container come first, so more than this is not
#: looked at.
MAX_MONITOR_ARGS = 256
#: containerd ids are ``[A-Za-z0-9]+([._-][A-Za-z0-9]+)*`` of at most 76 characters, podman's are
#: 64-hex; a longer or otherwise shaped value is not an id a runtime would have accepted.
_MONITOR_ID_RE = re.compile(r"[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*")
_MONITOR_ID_MAX = 76
#: The containerd namespace of the Kubernetes CRI plugin. Its shims serve a whole pod: ``-id``
#: names the pod's sandbox, not the container a process runs in, so it attributes nothing.
CRI_NAMESPACE = "k8s.io"
_NAMESPACE_RUNTIME = {"moby": "docker"}


@record
class MonitorMatch:
    """The container a runtime's monitor process (``conmon``, ``containerd-shim``) serves.

    Attributes:
        container_id: The id as the runtime gave it (64-hex, or a name such as ``ctr run``'s).
        runtime: ``podman``, ``crio``, ``docker`` (containerd namespace ``moby``) or
            ``containerd``.
        namespace: The containerd namespace (``moby``, ``default``...), None for conmon.
    """

    container_id: str
    runtime: str
    namespace: str | None


def _option(args: list[str], names: tuple[str, ...]) -> str | None:
    """The value of the first of ``names`` (``-x value`` or ``-x=value``), or None."""
    for at, arg in enumerate(args):
        if arg in names:
            return args[at + 1] if at + 1 < len(args) else None
        key, eq, value = arg.partition("=")
        if eq and key in names:
            return value
    return None


def _monitor_id(value: str | None) -> str | None:
    if value is None or len(value) > _MONITOR_ID_MAX or not _MONITOR_ID_RE.fullmatch(value):
        return None
    return value


def parse_monitor_cmdline(args: list[str]) -> MonitorMatch | None:
    """The container a monitor process serves, from its command line.

    Every runtime keeps a monitor as the parent of a container's first process (and of the
    processes ``exec`` starts in it): podman's and CRI-O's ``conmon -c <id>``, containerd's
    ``containerd-shim-runc-v2 -namespace <ns> -id <id>`` (also Docker's and nerdctl's, which run
    on containerd), and the v1 ``containerd-shim -namespace <ns> -workdir .../<ns>/<id>``. Where
    a container has no cgroup of its own (rootless engines on cgroup v1) or one whose name no
    rule recognises (``ctr run`` with a named id), this parent is what tells which it is.

    Args:
        args: The command line split at NUL bytes (``/proc/<pid>/cmdline``).

    Returns:
        The container, or None when the process is not a monitor, is a shim of the Kubernetes
        CRI namespace (whose ``-id`` is the pod's sandbox), or names no valid id.
    """
    args = args[:MAX_MONITOR_ARGS]
    if not args:
        return None
    program = args[0].rsplit("/", 1)[-1]
    if program == "conmon":
        container_id = _monitor_id(_option(args, ("-c", "--cid")))
        if container_id is None:
            return None
        # CRI-O's conmon writes its exit files under CRI-O's own state directory; podman passes
        # an ``--exit-command`` that runs podman itself.
        exit_dir = _option(args, ("--exit-dir",)) or ""
        runtime = "crio" if "crio" in exit_dir.split("/") else "podman"
        return MonitorMatch(container_id, runtime, None)
    if not program.startswith("containerd-shim"):
        return None
    namespace = _monitor_id(_option(args, ("-namespace", "--namespace")))
    if namespace is None or namespace == CRI_NAMESPACE:
        return None
    container_id = _option(args, ("-id", "--id"))
    if container_id is None:  # the v1 shim names its bundle directory, whose name is the id
        workdir = _option(args, ("-workdir", "--workdir"))
        container_id = workdir.rstrip("/").rsplit("/", 1)[-1] if workdir else None
    container_id = _monitor_id(container_id)
    if container_id is None:
        return None
    return MonitorMatch(container_id, _NAMESPACE_RUNTIME.get(namespace, "containerd"), namespace)


def parse_stat_ppid(stat_text: str) -> int | None:
    """The parent PID from ``/proc/<pid>/stat`` text (the field after the state).

    The command name in parentheses may itself hold ``)`` and spaces, hence the split at the
    last ``)``.

    Args:
        stat_text: Contents of ``/proc/<pid>/stat``.

    Returns:
        The parent PID (0 for PID 1 and for the first process of a PID namespace whose parent
        the reader cannot see), or None when the text is garbled.
    """
    _, paren, rest = stat_text[:4096].rpartition(")")
    fields = rest.split(maxsplit=3)
    if not paren or len(fields) < 2 or not _NSPID_FIELD_RE.fullmatch(fields[1]):
        return None
    return int(fields[1])


def path_names_container(path: str, container_id: str) -> bool:
    """Whether a cgroup path is a container's own cgroup (or one below it).

    A process of a container without a cgroup of its own (a rootless engine on cgroup v1)
    sits in its user's session cgroup, and that cgroup's figures are every process's of the
    session: only a path that names the container is its cgroup. Accepted components: the id
    itself (cgroupfs: ``/docker/<id>``, containerd's ``/<namespace>/<id>``), any runtime's
    ``<prefix>-<id>[.scope]`` (``docker-``, ``libpod-``, ``nerdctl-``...), and the
    ``<slice>:<runtime>:<id>`` form.

    Args:
        path: A cgroup path (one line's third field of ``/proc/<pid>/cgroup``).
        container_id: The container's id as its engine gives it.

    Returns:
        True when some whole component of ``path`` names ``container_id``.
    """
    if not container_id or len(path) > _PATH_MAX:
        return False
    for component in path.split("/"):
        if component == container_id:
            return True
        if container_id not in component:
            continue
        hit = _component_id(component)
        if hit is not None and hit[0] == container_id:
            return True
        prefix, dash, rest = component.removesuffix(".scope").rpartition("-")
        if dash and rest == container_id and prefix in _PREFIX_RUNTIME:
            return True
        if component.endswith(":" + container_id):
            return True
    return False
