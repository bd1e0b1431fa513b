"""containerd's containers, from the task state its shims keep: names, pods, namespaces, no gRPC.

For every running task, containerd's v2 shim keeps the OCI bundle under
``<state>/io.containerd.runtime.v2.task/<namespace>/<id>/``: ``config.json`` (the runtime spec:
the process, its environment, the cgroup path, and containerd's annotations) and ``init.pid``.
The CRI plugin writes the Kubernetes names into the annotations
(``io.kubernetes.cri.container-name``, ``sandbox-name``, ``sandbox-namespace``, ``image-name``,
``container-type``), so a kubelet's pods are named by pod, namespace and container without the
CRI API; a ``ctr`` container is named by its id, in its namespace.

Everything read is bounded: at most :data:`MAX_NAMESPACES` namespaces and
:data:`MAX_TASKS` tasks, ``config.json`` at most :data:`MAX_CONFIG_BYTES` (a larger one makes
a stub named by its id), ``init.pid`` a few bytes, all of one read within the source's deadline.
A bundle is parsed again only when its ``config.json`` changes (inode, size, mtime). Files are
read with the capped reader of ``/proc`` and ``/sys`` (:func:`~gputui.collect.linux.fileio.
read_capped`): opened non-blocking, never more than the cap plus one byte.

Where the kubelet serves its pod-resources API on this node, a CRI container's GPU request is the
kubelet's allocation (:mod:`gputui.collect.kubelet.pod_resources`): the GPUs the device plugin
gave it, however they were handed in. It is asked when the set of CRI containers changes and at
least every :data:`POD_RESOURCES_REFRESH_S`, within the read's deadline.

Where containerd serves its CRI API on its socket (``<state>/containerd.sock``), a Kubernetes pod's
container takes ``x`` (``ExecSync``: a command, no shell, its output bounded) and ``l`` (its CRI
log file, which ``ContainerStatus`` names, read from its tail): :mod:`~gputui.collect.containerd.
cri`, :mod:`~gputui.collect.containerd.cri_logs`. A ``ctr`` container has no CRI: its refusal
names ``ctr task exec``. A terminal (``X``, ``E``) and the lifecycle keys stay refused, each
naming what to use instead (``kubectl exec -it``; ``kubectl delete pod``: the kubelet restarts a
container stopped under it).
"""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from gputui.boundary.json_limits import finite_float, json_depth, no_constant
from gputui.collect import grpc_unix
from gputui.collect.containerd import cri
from gputui.collect.containerd.cri_logs import CriLogReader
from gputui.collect.criapi import actions
from gputui.collect.docker import parse as dp
from gputui.collect.docker.logs import LogStreamError
from gputui.collect.engines import CONTAINERD_TASKS
from gputui.collect.kubelet import pod_resources as kubelet
from gputui.collect.linux.cgroup_usage import CgroupSampler, EarlyCgroupCpu
from gputui.collect.linux.container_top import ContainerTop
from gputui.collect.linux.fileio import read_capped
from gputui.collect.sources import (
    Capability,
    ContainerCapabilities,
    ContainerSource,
    failed_reading,
)
from gputui.model.containers import (
    ContainerDetails,
    ContainerInfo,
    ContainerProcesses,
    ContainerReading,
    EngineInfo,
    ExecResult,
)
from gputui.model.records import record
from gputui.model.status import SourceStatus

#: A runtime spec is a few KiB (a CRI one with many mounts and a long environment, tens).
MAX_CONFIG_BYTES = 1 << 20
#: containerd namespaces read (``k8s.io``, ``moby``, ``default``, a few more).
MAX_NAMESPACES = 64
#: Tasks read per refresh; more than a node runs.
MAX_TASKS = 20_000
#: The longest namespace or container id taken from a directory name.
MAX_ID_CHARS = 256
_MAX_PID_BYTES = 32
_MAX_JSON_DEPTH = 64

#: The annotations the CRI plugin writes into each bundle's runtime spec.
CRI_CONTAINER_NAME = "io.kubernetes.cri.container-name"
CRI_SANDBOX_NAME = "io.kubernetes.cri.sandbox-name"
CRI_SANDBOX_NAMESPACE = "io.kubernetes.cri.sandbox-namespace"
CRI_IMAGE_NAME = "io.kubernetes.cri.image-name"
CRI_CONTAINER_TYPE = "io.kubernetes.cri.container-type"
#: The namespace the Docker engine runs its containers in (its bundles carry no names).
DOCKER_NAMESPACE = "moby"
#: What a pod's sandbox (its "pause" container) is called, as the kubelet's dockershim did.
SANDBOX_NAME = "POD"
#: Where the NVIDIA device plugin's volume-mounts strategy names a container's GPUs: its
#: ``NVIDIA_VISIBLE_DEVICES`` is this directory, and each GPU a mount below it.
VOLUME_MOUNTS_DIR = "/var/run/nvidia-container-devices"
#: Seconds between the kubelet's pod-resources answers when no CRI container came or went.
POD_RESOURCES_REFRESH_S = 30.0
#: Seconds before a failed pod-resources call is tried again.
POD_RESOURCES_RETRY_S = 10.0
#: The longest a pod-resources call may take (the read's own deadline may leave less).
POD_RESOURCES_TIMEOUT_S = 1.0

#: What a terminal in a container (``X``, ``E``) is instead: the kubelet's exec, or ctr's.
INTERACTIVE_NOTE = (
    f"{actions.KUBECTL_TERMINAL}; in a ctr container: `ctr -n NAMESPACE task exec -t --exec-id "
    "ID CONTAINER COMMAND`"
)
#: What stops and restarts a container instead: the kubelet restarts what CRI stops under it.
LIFECYCLE_NOTE = (
    f"{actions.kubelet_lifecycle('containerd')}; a ctr container: "
    "`ctr -n NAMESPACE task kill CONTAINER`"
)


@record
class _Bundle:
    """One parsed bundle and the ``config.json`` identity it was parsed from."""

    key: tuple[int, int, int, int]
    info: ContainerInfo
    folder: Path


def _children(path: Path, limit: int) -> list[str]:
    """Directory entries that are directories (no symlinks), sorted, at most ``limit``."""
    try:
        with os.scandir(path) as entries:
            names = [
                e.name
                for e in entries
                if len(e.name) <= MAX_ID_CHARS and e.is_dir(follow_symlinks=False)
            ]
    except OSError:
        return []
    return sorted(names)[:limit]


def _read_json(path: Path) -> tuple[Any, str | None]:
    """``(document, None)``, or ``(None, why)``: over the cap, unreadable, not JSON."""
    data, err = read_capped(path, MAX_CONFIG_BYTES + 1)
    if data is None:
        return None, f"cannot read it ({os.strerror(err)})"
    if len(data) > MAX_CONFIG_BYTES:
        return None, f"over {MAX_CONFIG_BYTES >> 20} MiB"
    if json_depth(data) > _MAX_JSON_DEPTH:  # measured before parsing: no deep recursion
        return None, "nested too deep"
    try:
        doc = json.loads(data, parse_constant=no_constant, parse_float=finite_float)
    except (ValueError, RecursionError):
        return None, "not JSON"
    return doc, None


def parse_bundle(namespace: str, task_id: str, spec: Mapping[str, Any]) -> ContainerInfo:
    """One task's container from its runtime spec (``config.json``); never raises.

    Args:
        namespace: The containerd namespace (``k8s.io`` for the CRI's containers).
        task_id: The task's (the container's) id: the directory's name.
        spec: The parsed runtime spec.
    """
    spec = dp.as_dict(spec)
    notes = dp.as_dict(spec.get("annotations"))

    def note(key: str) -> str | None:
        return dp.as_text(notes.get(key), dp.MAX_NAME_CHARS) or None

    process = dp.as_dict(spec.get("process"))
    env = dp.gpu_env(dp.as_list(process.get("env"), dp.MAX_LIST_ITEMS * 4))
    linux = dp.as_dict(spec.get("linux"))
    device_paths = tuple(
        path
        for d in dp.as_list(linux.get("devices"))
        if (path := dp.as_text(dp.as_dict(d).get("path"), dp.MAX_NAME_CHARS))
        and path.startswith("/dev/nvidia")
    )[: dp.MAX_GPU_IDS]
    visible = env.get("NVIDIA_VISIBLE_DEVICES")
    request, via = dp.parse_visible_devices(visible), "env"
    if visible is not None and visible.strip().rstrip("/") == VOLUME_MOUNTS_DIR:
        # The device plugin's volume-mounts strategy: one mount per GPU, named by its id.
        request = _volume_mount_ids(spec) or None
    nodes = tuple(
        p[len("/dev/nvidia") :] for p in device_paths if p[len("/dev/nvidia") :].isdigit()
    )
    if request is None and nodes:
        request, via = nodes, "devices"
    kind = note(CRI_CONTAINER_TYPE)
    pod = note(CRI_SANDBOX_NAME)
    name = SANDBOX_NAME if kind == "sandbox" else (note(CRI_CONTAINER_NAME) or task_id)
    return ContainerInfo(
        id=task_id,
        name=name,
        image=note(CRI_IMAGE_NAME) or "",
        status="running",
        k8s_pod=pod,
        k8s_namespace=note(CRI_SANDBOX_NAMESPACE) if pod else None,
        gpu_request=request,
        gpu_request_via=via if request is not None else None,
        gpu_device_paths=device_paths,
        nvidia_capabilities=dp.parse_capabilities(env.get("NVIDIA_DRIVER_CAPABILITIES")),
        cuda_version=env.get("CUDA_VERSION"),
        cuda_requirement=env.get("NVIDIA_REQUIRE_CUDA"),
    )


def _volume_mount_ids(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The GPU ids of the volume-mounts strategy: ``/var/run/nvidia-container-devices/<id>``."""
    prefix = VOLUME_MOUNTS_DIR + "/"
    ids = []
    for mount in dp.as_list(spec.get("mounts"), dp.MAX_LIST_ITEMS):
        target = dp.as_text(dp.as_dict(mount).get("destination"), dp.MAX_TEXT_CHARS) or ""
        name = target[len(prefix) :] if target.startswith(prefix) else ""
        if name and "/" not in name and name not in ids:
            ids.append(name[: dp.MAX_NAME_CHARS])
    return tuple(ids[: dp.MAX_GPU_IDS])


def _with_pid(bundle: _Bundle, proc_root: Path) -> ContainerInfo:
    """The task's init PID and whether it still runs.

    ``init.pid`` is read each time (a restart writes a new one); the container is ``exited``
    when its PID is gone, ``created`` before it has one.
    """
    data, _ = read_capped(bundle.folder / "init.pid", _MAX_PID_BYTES)
    text = (data or b"").decode(errors="replace").strip()
    pid = int(text) if text.isdigit() and len(text) <= 8 and 0 < int(text) <= dp.MAX_PID else None
    if pid is None or not (proc_root / str(pid)).exists():
        return replace(bundle.info, pid=None, status="exited" if pid is not None else "created")
    return replace(bundle.info, pid=pid)


def _cgroup_engine(cgroup_root: Path, proc_root: Path) -> EngineInfo:
    """The host's cgroup layout and memory, for the cgroup sampler (read once)."""
    version = "2" if (cgroup_root / "cgroup.controllers").exists() else "1"
    total: int | None = None
    data, _ = read_capped(proc_root / "meminfo", 4096)
    for line in (data or b"").decode(errors="replace").splitlines():
        if line.startswith("MemTotal:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                total = int(parts[1]) * 1024
    return EngineInfo(
        cgroup_driver="cgroupfs",
        cgroup_version=version,
        host_memory_bytes=total,
        product="containerd",
    )


class ContainerdBundles(ContainerSource):
    """containerd's running tasks, from the shims' bundles (a ``ContainerSource``).

    Args:
        state_dir: containerd's state directory (``/run/containerd``; k3s:
            ``/run/k3s/containerd``).
        name: The source's name (``containerd``, ``k3s``).
        timeout: Seconds one read may spend on the files.
        cgroup_root: Where the host's cgroup hierarchy is.
        proc_root: Where the host's ``/proc`` is.
        cpu_settle_s: For a single collection: seconds between the two cgroup samples a
            container's first CPU % needs.
        cpu_start: A one-shot's containers' CPU counters read at start-up (the first sample).
        pod_resources: The kubelet's pod-resources socket: True to find it (``$GPUTUI_POD_
            RESOURCES``, else ``/var/lib/kubelet/pod-resources/kubelet.sock`` when it exists),
            a path, or False for none.
        cri_socket: containerd's CRI socket: True for ``<state_dir>/containerd.sock`` when it
            exists, a path, or False for none (no exec, no logs).
    """

    def __init__(
        self,
        state_dir: str | os.PathLike[str] = "/run/containerd",
        *,
        name: str = "containerd",
        timeout: float = 2.0,
        cgroup_root: str | os.PathLike[str] = "/sys/fs/cgroup",
        proc_root: str | os.PathLike[str] = "/proc",
        cpu_settle_s: float = 0.0,
        cpu_start: EarlyCgroupCpu | None = None,
        pod_resources: bool | str = True,
        cri_socket: bool | str = True,
    ) -> None:
        self.name = name
        self._cpu_settle_s = cpu_settle_s
        self._cpu_start = cpu_start
        self._state = Path(state_dir)
        self._tasks = self._state / CONTAINERD_TASKS
        self._timeout = timeout
        self._proc = Path(proc_root)
        self._cgroup_root = Path(cgroup_root)
        self._sampler = CgroupSampler(self._cgroup_root, self._proc)
        self._engine: EngineInfo | None = None
        self._bundles: dict[str, _Bundle] = {}
        self._pod_resources = pod_resources
        self._kubelet: kubelet.PodResourcesClient | None = None
        self._kubelet_answer: kubelet.PodResourcesAnswer | None = None
        self._kubelet_asked: tuple[float, frozenset[tuple[str, str, str]]] | None = None
        self._top: ContainerTop | None = None
        self._cri_socket = cri_socket
        self._cri: cri.CriClient | None = None
        self._cri_lock = threading.Lock()

    def capabilities(self) -> ContainerCapabilities:
        """Inspect from the bundle; exec and logs of pods' containers where the CRI answers.

        A terminal and the lifecycle actions are refused, each with what to use instead.
        """
        path = self._cri_path()
        offered = path is not None and grpc_unix.installed()
        if path is None:
            where = self._state / cri.SOCKET_NAME
            why = (
                f"containerd's CRI socket {where} is not there; on the node: `crictl exec` / "
                "`crictl logs`, or `ctr -n NAMESPACE task exec`"
            )
        else:
            why = cri.GRPC_FIX
        notes: list[tuple[Capability, str]] = [
            ("interactive_exec", INTERACTIVE_NOTE),
            ("lifecycle", LIFECYCLE_NOTE),
        ]
        if not offered:
            notes += [("exec", why), ("logs", why)]
        return ContainerCapabilities(
            exec=offered,
            logs=offered,
            inspect=True,
            note=f"read from containerd's task state in {self._state}",
            notes=tuple(notes),
        )

    def _cri_path(self) -> str | None:
        """The CRI socket: the one named, else containerd's ``<state>/containerd.sock`` if there."""
        if self._cri_socket is False:
            return None
        if self._cri_socket is True:
            return cri.socket_path(self._state)
        return str(self._cri_socket)

    def _cri_client(self) -> cri.CriClient | None:
        with self._cri_lock:
            path = self._cri_path()
            if path is None:
                return None
            if self._cri is None or self._cri.path != path:
                if self._cri is not None:
                    self._cri.close()
                self._cri = cri.CriClient(path)
            return self._cri

    def _pod_container(self, container_id: str, what: str) -> tuple[str | None, str]:
        """``(None, label)`` when the CRI can reach the container, else ``(why not, label)``."""
        bundle = self._bundles.get(container_id)
        if bundle is None:
            return f"no such task: {container_id[:12]}", container_id[:12]
        info, namespace = bundle.info, bundle.folder.parent.name
        if not info.k8s_pod:
            instead = (
                f"on the node: `ctr -n {namespace[:64]} task exec --exec-id ID "
                f"{container_id[:64]} COMMAND`"
                if what == "exec"
                else "its output goes to the ctr that started it (containerd keeps no log)"
            )
            return (
                f"{info.name[:64]} is a containerd container of namespace {namespace[:64]}, not "
                f"a Kubernetes pod's: the CRI has no {what} for it; {instead}",
                info.name,
            )
        if info.name == SANDBOX_NAME:
            return actions.sandbox_refusal(info.k8s_pod, SANDBOX_NAME, what), info.name
        return None, info.name

    def read(self) -> ContainerReading:
        """The running tasks' containers with CPU and memory from their own cgroups."""
        try:
            return self._read(time.monotonic() + self._timeout)
        except Exception as exc:  # the boundary: whatever happened is a status
            return failed_reading(self.name, exc)

    def _read(self, deadline: float) -> ContainerReading:
        try:
            mode = self._tasks.stat().st_mode
        except OSError as exc:
            return ContainerReading(
                SourceStatus(
                    self.name,
                    ok=False,
                    error=f"no containerd task state at {self._tasks} ({exc.strerror})",
                    kind="not_found",
                    fix="Start containerd, or give its state directory with "
                    "--engine containerd=/PATH (k3s: /run/k3s/containerd).",
                )
            )
        if not stat.S_ISDIR(mode):
            return ContainerReading(
                SourceStatus(self.name, False, f"{self._tasks} is not a directory", "error")
            )
        if self._engine is None:
            self._engine = _cgroup_engine(self._cgroup_root, self._proc)
        seen: dict[str, _Bundle] = {}
        problems: list[str] = []
        late = False
        count = 0
        for namespace in _children(self._tasks, MAX_NAMESPACES):
            if namespace == DOCKER_NAMESPACE:
                continue  # the Docker engine's own containers: it names them, this cannot
            for task_id in _children(self._tasks / namespace, MAX_TASKS - count):
                if time.monotonic() > deadline:
                    late = True
                    break
                count += 1
                bundle = self._bundle(namespace, task_id, problems)
                if bundle is not None and bundle.info.id not in seen:
                    seen[bundle.info.id] = bundle
            if late or count >= MAX_TASKS:
                break
        if late:  # keep what the last complete read listed beyond this one's reach
            seen = {**self._bundles, **seen}
        for gone in self._bundles.keys() - seen.keys():
            self._sampler.forget(gone)
        self._bundles = seen
        containers = self._with_allocations(
            [_with_pid(b, self._proc) for b in seen.values()], deadline
        )
        containers.sort(key=lambda c: (c.k8s_namespace or "", c.k8s_pod or "", c.name, c.id))
        sampled = self._sampler.sample(
            containers, self._engine, settle_s=self._cpu_settle_s, start=self._cpu_start
        )
        status = SourceStatus(self.name, ok=True)
        if problems or late:
            shown = "; ".join(problems[:3]) + (
                f" and {len(problems) - 3} more" if len(problems) > 3 else ""
            )
            why = shown if problems else f"the task state took over {self._timeout:g} s to read"
            status = SourceStatus(self.name, True, why, "partial")
        answer = self._kubelet_answer
        engine = (
            self._engine if answer is None else replace(self._engine, pod_resources=answer.status)
        )
        return ContainerReading(status, tuple(sampled), engine)

    def _kubelet_client(self) -> kubelet.PodResourcesClient | None:
        if self._kubelet is None and self._pod_resources is not False:
            path = (
                kubelet.socket_path() if self._pod_resources is True else str(self._pod_resources)
            )
            if path is not None:
                self._kubelet = kubelet.PodResourcesClient(path)
        return self._kubelet

    def _with_allocations(
        self, containers: list[ContainerInfo], deadline: float
    ) -> list[ContainerInfo]:
        """CRI containers' GPU requests from the kubelet's allocations, where it answers."""
        keys = frozenset(
            (c.k8s_namespace or "", c.k8s_pod, c.name)
            for c in containers
            if c.k8s_pod and c.name != SANDBOX_NAME
        )
        now = time.monotonic()
        asked = self._kubelet_asked
        answer = self._kubelet_answer
        wait = (
            POD_RESOURCES_REFRESH_S
            if answer is None or answer.status.ok
            else (POD_RESOURCES_RETRY_S)
        )
        due = asked is None or asked[1] != keys or now - asked[0] >= wait
        left = min(POD_RESOURCES_TIMEOUT_S, deadline - now)
        client = self._kubelet_client() if due and left > 0.05 else None
        if client is not None:
            self._kubelet_answer = answer = client.list_gpus(left)
            self._kubelet_asked = (now, keys)
        if answer is None or not answer.allocations:
            return containers
        out = []
        for c in containers:
            ids = answer.allocations.get((c.k8s_namespace or "", c.k8s_pod or "", c.name))
            if ids and c.k8s_pod and c.name != SANDBOX_NAME:
                c = replace(c, gpu_request=ids[: dp.MAX_GPU_IDS], gpu_request_via="kubelet")
            out.append(c)
        return out

    def _bundle(self, namespace: str, task_id: str, problems: list[str]) -> _Bundle | None:
        folder = self._tasks / namespace / task_id
        config = folder / "config.json"
        try:
            st = config.stat()
        except OSError:
            return None  # a task being created or deleted: seen on the next read
        key = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_dev)
        kept = self._bundles.get(task_id)
        if kept is not None and kept.key == key:
            return kept
        doc, why = _read_json(config) if stat.S_ISREG(st.st_mode) else (None, "not a file")
        if doc is None:
            problems.append(f"{namespace}/{task_id[:12]}: config.json {why}")
            info = ContainerInfo(
                id=task_id,
                name=task_id[:12],
                image="",
                status="running",
                inspect_problem=f"containerd bundle config.json {why}: names unknown",
            )
        else:
            info = parse_bundle(namespace, task_id, doc)
            del doc  # holds the process's whole environment: never kept
        self._sampler.inspected(task_id, None)
        return _Bundle(key, info, folder)

    def details(self, container_id: str) -> ContainerDetails:
        """What the task's bundle says: process, mounts, annotations, environment names.

        A bundle keeps no restart policy, networks or creation time (``unknown`` says so).
        """
        bundle = self._bundles.get(container_id)
        if bundle is None:
            return ContainerDetails(container_id, error=f"no such task: {container_id[:12]}")
        doc, why = _read_json(bundle.folder / "config.json")
        if doc is None:
            return ContainerDetails(container_id, error=f"config.json {why}")
        details = dp.parse_bundle_details(container_id, doc)
        del doc  # holds the process's whole environment: never kept
        return replace(details, image=details.image or bundle.info.image)

    def processes(self, container_id: str) -> ContainerProcesses:
        """Every process of the task, from ``/proc`` and its cgroup (capped)."""
        bundle = self._bundles.get(container_id)
        if bundle is None:
            return ContainerProcesses(error=f"no such task: {container_id[:12]}")
        if self._top is None:
            self._top = ContainerTop(self._proc, self._cgroup_root)
        return self._top.read(container_id, _with_pid(bundle, self._proc).pid)

    # --- exec and logs, through the CRI -----------------------------------------------------

    def exec(self, container_id: str, argv: Sequence[str], timeout_s: float) -> ExecResult:
        """Run ``argv`` (no shell) in a pod's container through the CRI's ``ExecSync``.

        containerd kills the command at the timeout (whole seconds, at least 1); the call
        returns within :data:`~gputui.collect.containerd.cri.EXEC_GRACE_S` after it. At most
        :data:`~gputui.collect.docker.engine_api.MAX_EXEC_OUTPUT` bytes of output are kept.

        Returns:
            Exit code and decoded output, or an explanation in ``error``.
        """
        args = tuple(argv)
        why, label = self._pod_container(container_id, "exec")
        client = self._cri_client() if why is None else None
        if why is not None or client is None:
            return ExecResult(args, None, error=why or "containerd's CRI socket is gone")
        return actions.exec_sync(
            client, container_id, args, timeout_s, label=label, engine="containerd"
        )

    def open_logs(self, container_id: str, *, tail: int, follow: bool) -> CriLogReader:
        """A pod's container's log file, as ``ContainerStatus`` names it: its tail, then on.

        Raises:
            LogStreamError: not a pod's container, the CRI did not answer, or the file cannot
                be read (one line).
        """
        why, _ = self._pod_container(container_id, "logs")
        client = self._cri_client() if why is None else None
        if why is not None or client is None:
            raise LogStreamError(why or "containerd's CRI socket is gone")
        return actions.open_log(client, container_id, tail=tail, follow=follow, engine="containerd")

    def close(self) -> None:
        """Drop the kept cgroup files; cancel a pod-resources or CRI call in flight."""
        self._sampler.clear()
        if self._kubelet is not None:
            self._kubelet.close()
        with self._cri_lock:
            client, self._cri = self._cri, None
            self._cri_socket = False  # closed: no new client
        if client is not None:
            client.close()
