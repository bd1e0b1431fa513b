"""Any CRI runtime's pods and containers, through its CRI API: CRI-O, or containerd's CRI plugin.

CRI-O speaks only the kubelet's runtime API (``runtime.v1.RuntimeService``, on
``/var/run/crio/crio.sock``): its containers are listed with ``ListPodSandbox`` and
``ListContainers`` (:mod:`~gputui.collect.criapi.listing`), and named as the kubelet names them:
the container's name, its pod and namespace (the sandbox's metadata), its image, its state and
when it was made. A pod's sandbox is listed as ``POD``, as the containerd source lists it. The
``gputui.*`` labels (the idle-GPU policy's, ``gputui.owner``) and the configured owner labels are
kept from the container's and its pod's labels (a pod's own labels are its sandbox's); other
labels are kept only if they are ``io.kubernetes.*``, and only for inspect. The container's
process is attributed by its cgroup (``crio-<id>.scope``), as every runtime's is.

``x`` and ``l`` go through the same CRI calls as the containerd source's
(:mod:`~gputui.collect.criapi.actions`): ``ExecSync`` and the CRI log file ``ContainerStatus``
names. A terminal and the lifecycle keys stay refused, naming ``kubectl``.

A container's CPU and memory come from ``ListContainerStats`` (the figures the kubelet reads):
CPU % from the CPU time used between two reads over the runtime's clock, working-set memory.
The CRI lists no PID and no cgroup path of a container, so inspect shows what the list says
(image, creation time, labels). gRPC is ``grpcio``, the
optional extra ``pip install 'gputui[kubernetes]'``; every call has a deadline within the read's,
and a reply is at most :data:`MAX_REPLY_BYTES` (the kubelet's own limit on a CRI message).
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Sequence
from dataclasses import replace

from gputui.collect import grpc_unix
from gputui.collect.containerd import cri
from gputui.collect.containerd.cri_logs import CriLogReader
from gputui.collect.criapi import actions
from gputui.collect.criapi.listing import MAX_ITEMS, CriContainer, CriSandbox
from gputui.collect.docker import parse as dp
from gputui.collect.docker.logs import LogStreamError
from gputui.collect.engines import CRIO_SOCKETS
from gputui.collect.owners import (
    OwnerFacts,
    OwnerResolver,
    owner_facts_from_labels,
    owner_label_keys,
)
from gputui.collect.sources import (
    Capability,
    ContainerCapabilities,
    ContainerSource,
    failed_reading,
)
from gputui.model.containers import (
    MAX_DETAIL_ITEMS,
    ContainerDetails,
    ContainerInfo,
    ContainerProcesses,
    ContainerReading,
    EngineInfo,
    ExecResult,
    Owner,
)
from gputui.model.records import record
from gputui.model.status import SourceStatus

#: The largest reply read: the kubelet's own limit on a CRI message (16 MiB).
MAX_REPLY_BYTES = 16 << 20
#: The most memory a container's figure may say (64 TiB: more than any host holds).
MAX_MEMORY_BYTES = 64 << 40
#: What a pod's sandbox is called, as the containerd source calls it.
SANDBOX_NAME = "POD"
#: The label prefix kept for inspect (the kubelet's own labels of a pod and its containers).
KUBERNETES_PREFIX = "io.kubernetes."
#: The annotation the kubelet counts a container's restarts in.
RESTART_COUNT = "io.kubernetes.container.restartCount"
#: How a runtime's ``Version`` names itself, and how gputui's messages name it.
RUNTIME_WORDS = {"cri-o": "CRI-O", "containerd": "containerd"}
#: What the CRI does not tell of a container (the inspect screen says so).
UNKNOWN_DETAILS = ("command", "mounts", "environment", "restart policy", "networks", "start time")
#: What a failure says when grpcio is missing.
GRPC_FIX = "Install gRPC for the CRI API: pip install 'gputui[kubernetes]' (grpcio)."


def socket_of(address: str) -> str:
    """The socket path of a ``unix://`` address (or of a bare path)."""
    return address[len("unix://") :] if address.startswith("unix://") else address


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


@record
class _Listed:
    """One listed container (or sandbox) and what inspect shows of it."""

    info: ContainerInfo
    sandbox: bool
    created_at: float | None
    labels: tuple[tuple[str, str], ...]


class CriSource(ContainerSource):
    """A CRI runtime's pods and containers, listed through its CRI API (a ``ContainerSource``).

    Args:
        address: The runtime's socket, ``unix:///var/run/crio/crio.sock`` or a path.
        name: The source's name (``crio``).
        timeout: Seconds one read may spend on its calls, all together.
        owner_labels: Labels naming a container's owner, strongest first (read before
            ``gputui.owner``).
    """

    def __init__(
        self,
        address: str = "unix://" + CRIO_SOCKETS[0],
        *,
        name: str = "crio",
        timeout: float = 2.0,
        owner_labels: Sequence[str] = (),
    ) -> None:
        self.name = name
        self.address = address if "://" in address else f"unix://{address}"
        self.path = socket_of(address)
        self._timeout = timeout
        self._owners = OwnerResolver(owner_label_keys(owner_labels))
        self._keys = frozenset(self._owners.label_keys)
        self._engine: EngineInfo | None = None
        self._runtime = "CRI-O"
        self._listed: dict[str, _Listed] = {}
        #: Each container's last CPU figure: (the runtime's timestamp, CPU ns used).
        self._cpu_seen: dict[str, tuple[int, int]] = {}
        self._stats_refused = False  # the runtime does not implement ListContainerStats
        self._lock = threading.Lock()
        self._client: cri.CriClient | None = None
        self._closed = False

    # --- reading ----------------------------------------------------------------------------

    def _keep(self, key: str) -> bool:
        """The labels kept: the kubelet's, gputui's, and the configured owner labels."""
        return key.startswith((KUBERNETES_PREFIX, dp.POLICY_LABEL_PREFIX)) or key in self._keys

    def _cri(self) -> cri.CriClient | None:
        with self._lock:
            if self._closed:
                return None
            if self._client is None:
                self._client = cri.CriClient(self.path, max_reply_bytes=MAX_REPLY_BYTES)
            return self._client

    def read(self) -> ContainerReading:
        """The runtime's sandboxes and containers, named as the kubelet names them."""
        try:
            return self._read(time.monotonic() + self._timeout)
        except Exception as exc:  # the boundary: whatever happened is a status
            return failed_reading(self.name, exc)

    def _read(self, deadline: float) -> ContainerReading:
        if not _is_socket(self.path):
            return ContainerReading(
                SourceStatus(
                    self.name,
                    ok=False,
                    error=f"no CRI socket at {self.path}",
                    kind="not_found",
                    fix="Start CRI-O (systemctl start crio), or name its socket: "
                    "--engine crio=unix:///PATH.",
                )
            )
        if not grpc_unix.installed():
            return ContainerReading(
                SourceStatus(
                    self.name,
                    ok=False,
                    error="grpcio is not installed: the CRI API cannot be asked",
                    kind="missing_dependency",
                    fix=GRPC_FIX,
                )
            )
        client = self._cri()
        if client is None:
            return ContainerReading(SourceStatus(self.name, False, "the source is closed", "error"))
        try:
            if self._engine is None:
                self._engine = self._version(client, deadline)
            sandboxes = client.list_pod_sandboxes(self._left(deadline), self._keep)
            containers = client.list_containers(self._left(deadline), self._keep)
        except cri.CriError as exc:
            return ContainerReading(self._failure(exc), engine=self._engine)
        pods = {s.id: s for s in sandboxes.sandboxes}
        listed: dict[str, _Listed] = {}
        for sandbox in sandboxes.sandboxes:
            listed.setdefault(sandbox.id, self._sandbox(sandbox))
        for container in containers.containers:
            listed.setdefault(
                container.id, self._container(container, pods.get(container.sandbox_id))
            )
        self._listed = listed
        usage = self._usage(client, deadline, {c.id for c in containers.containers})
        infos = sorted(
            (
                replace(item.info, cpu_percent=usage[cid][0], memory_used_bytes=usage[cid][1])
                if cid in usage
                else item.info
                for cid, item in listed.items()
            ),
            key=lambda c: (c.k8s_namespace or "", c.k8s_pod or "", c.name, c.id),
        )
        status = SourceStatus(self.name, ok=True)
        more = sandboxes.more + containers.more
        skipped = sandboxes.skipped + containers.skipped
        if more or skipped:
            said = [f"{more} more than {MAX_ITEMS} not read"] if more else []
            said += [f"{skipped} without a usable id left out"] if skipped else []
            status = SourceStatus(self.name, True, "; ".join(said), "partial")
        return ContainerReading(status, tuple(infos), self._engine)

    def _usage(
        self, client: cri.CriClient, deadline: float, ids: set[str]
    ) -> dict[str, tuple[float | None, int | None]]:
        """Each listed container's CPU % and working-set memory (``ListContainerStats``).

        CPU % is the CPU time used between two reads over the runtime's own clock between them
        (100 = one core); on a container's first read, the runtime's own rate
        (``usage_nano_cores``) where it gives one above 0. A runtime without the call, or one that
        does not answer in time, leaves the figures unknown: the list itself still stands.
        """
        if self._stats_refused or not ids:
            return {}
        try:
            reply = client.list_container_stats(self._left(deadline))
        except cri.CriError as exc:
            self._stats_refused = exc.kind == "error"  # UNIMPLEMENTED: never asked again
            return {}
        cores = os.cpu_count() or 1
        seen: dict[str, tuple[int, int]] = {}
        figures: dict[str, tuple[float | None, int | None]] = {}
        for item in reply.stats:
            if item.id not in ids or item.id in figures:
                continue
            cpu: float | None = None
            if item.cpu_ns is not None:
                at = item.cpu_at_ns or time.monotonic_ns()
                seen[item.id] = (at, item.cpu_ns)
                before = self._cpu_seen.get(item.id)
                if before is not None and at > before[0] and item.cpu_ns >= before[1]:
                    cpu = 100.0 * (item.cpu_ns - before[1]) / (at - before[0])
            if cpu is None and item.nano_cores:
                # containerd says 0 before it has two samples of its own: 0 is not "idle" here.
                cpu = item.nano_cores / 1e7
            # Bounded: a runtime's figure is never more than every core, nor memory absurd.
            cpu = None if cpu is None else min(cpu, 100.0 * cores)
            memory = item.working_set_bytes
            figures[item.id] = (cpu, None if memory is None else min(memory, MAX_MEMORY_BYTES))
        self._cpu_seen = seen  # containers gone since are forgotten
        return figures

    @staticmethod
    def _left(deadline: float) -> float:
        return max(0.05, deadline - time.monotonic())

    def _version(self, client: cri.CriClient, deadline: float) -> EngineInfo:
        """What answers on the socket (``Version``), asked on the first read that answers."""
        name, version = client.version(self._left(deadline))
        product = name.strip().lower() or "cri"
        self._runtime = RUNTIME_WORDS.get(product, name.strip() or "the CRI runtime")
        return EngineInfo(endpoint=self.address, server_version=version or None, product=product)

    def _failure(self, exc: cri.CriError) -> SourceStatus:
        """A call that gave no answer, in this runtime's words (one line)."""
        who = self._runtime
        said = exc.detail.lower()
        if exc.kind == "unavailable" and "permission denied" in said:
            return SourceStatus(
                self.name,
                False,
                f"permission denied on {self.path}",
                "permission",
                fix="The CRI socket is root's: run gputui as root (sudo).",
            )
        if exc.kind == "unavailable":
            return SourceStatus(
                self.name,
                False,
                f"{who} does not answer on {self.path}",
                "unavailable",
                fix="Check its service (systemctl status crio).",
            )
        if exc.kind == "timeout":
            return SourceStatus(
                self.name, False, f"{who} did not answer within {self._timeout:g} s", "timeout"
            )
        if exc.kind == "too_large":
            return SourceStatus(
                self.name,
                False,
                f"{who}'s list is over {MAX_REPLY_BYTES >> 20} MiB",
                "too_large",
            )
        if exc.kind == "missing_dependency":
            return SourceStatus(self.name, False, "grpcio is not installed", exc.kind, fix=GRPC_FIX)
        return SourceStatus(self.name, False, f"{who}: {exc}", exc.kind)

    def _labels(self, *maps: tuple[tuple[str, str], ...]) -> dict[str, str]:
        merged: dict[str, str] = {}
        for kept in maps:
            merged.update(kept)
        return merged

    def _sandbox(self, sandbox: CriSandbox) -> _Listed:
        labels = self._labels(sandbox.labels)
        pod = sandbox.name or labels.get("io.kubernetes.pod.name") or None
        info = ContainerInfo(
            id=sandbox.id,
            name=SANDBOX_NAME,
            image="",
            status="running" if sandbox.state == "ready" else "exited",
            k8s_pod=pod,
            k8s_namespace=(sandbox.namespace or labels.get("io.kubernetes.pod.namespace"))
            if pod
            else None,
            policy_labels=dp.policy_labels(labels),
            owner=self._owner(labels),
        )
        return _Listed(info, True, sandbox.created_at, _inspected(labels))

    def _container(self, container: CriContainer, sandbox: CriSandbox | None) -> _Listed:
        # A pod's own labels are its sandbox's: a container's win where both carry a key.
        labels = self._labels(sandbox.labels if sandbox else (), container.labels)
        notes = dict(container.annotations)
        pod = (sandbox.name if sandbox else "") or labels.get("io.kubernetes.pod.name") or None
        namespace = (sandbox.namespace if sandbox else "") or labels.get(
            "io.kubernetes.pod.namespace"
        )
        restarts = notes.get(RESTART_COUNT, "")
        info = ContainerInfo(
            id=container.id,
            name=container.name or labels.get("io.kubernetes.container.name") or container.id[:12],
            image=container.image or container.image_ref,
            status=container.state,
            k8s_pod=pod,
            k8s_namespace=(namespace or None) if pod else None,
            restart_count=int(restarts) if restarts.isdigit() and len(restarts) <= 9 else None,
            policy_labels=dp.policy_labels(labels),
            owner=self._owner(labels),
        )
        return _Listed(info, False, container.created_at, _inspected(labels))

    def _owner(self, labels: dict[str, str]) -> Owner | None:
        facts = OwnerFacts(
            labels=owner_facts_from_labels(
                labels, self._owners.label_keys, text=lambda v: dp.as_text(v, dp.MAX_NAME_CHARS)
            )
        )
        # Only a label names a pod's owner here: the CRI lists no user, mounts or directory.
        return self._owners.resolve(facts) if facts.labels else None

    # --- what it offers ---------------------------------------------------------------------

    def capabilities(self) -> ContainerCapabilities:
        """Exec and logs of a pod's container through the CRI, inspect of what the list says.

        A terminal and the lifecycle actions are refused, each with what to use instead.
        """
        notes: list[tuple[Capability, str]] = [
            ("interactive_exec", actions.KUBECTL_TERMINAL),
            ("lifecycle", actions.kubelet_lifecycle(self._runtime)),
        ]
        offered = grpc_unix.installed()
        if not offered:
            notes += [("exec", GRPC_FIX), ("logs", GRPC_FIX)]
        return ContainerCapabilities(
            exec=offered,
            logs=offered,
            inspect=True,
            note=f"read through the CRI API on {self.path}",
            notes=tuple(notes),
        )

    def _pod_container(self, container_id: str, what: str) -> tuple[str | None, str]:
        """``(None, label)`` when the CRI can reach the container, else ``(why not, label)``."""
        item = self._listed.get(container_id)
        if item is None:
            return f"no such container in {self._runtime}'s CRI: {container_id[:12]}", (
                container_id[:12]
            )
        if item.sandbox:
            return (
                actions.sandbox_refusal(item.info.k8s_pod or "", SANDBOX_NAME, what),
                item.info.name,
            )
        return None, item.info.name

    def exec(self, container_id: str, argv: Sequence[str], timeout_s: float) -> ExecResult:
        """Run ``argv`` (no shell) in a pod's container through the CRI's ``ExecSync``.

        Returns:
            Exit code and decoded output (bounded), or an explanation in ``error``.
        """
        args = tuple(argv)
        why, label = self._pod_container(container_id, "exec")
        client = self._cri() if why is None else None
        if why is not None or client is None:
            return ExecResult(args, None, error=why or "the CRI source is closed")
        return actions.exec_sync(
            client, container_id, args, timeout_s, label=label, engine=self._runtime
        )

    def open_logs(self, container_id: str, *, tail: int, follow: bool) -> CriLogReader:
        """A pod's container's CRI log file, as ``ContainerStatus`` names it.

        Raises:
            LogStreamError: a sandbox, an unknown container, no answer or no file (one line).
        """
        why, _ = self._pod_container(container_id, "logs")
        client = self._cri() if why is None else None
        if why is not None or client is None:
            raise LogStreamError(why or "the CRI source is closed")
        return actions.open_log(
            client, container_id, tail=tail, follow=follow, engine=self._runtime
        )

    def details(self, container_id: str) -> ContainerDetails:
        """What the CRI's list says of a container: its image, creation time and labels."""
        item = self._listed.get(container_id)
        if item is None:
            return ContainerDetails(container_id, error=f"no such container: {container_id[:12]}")
        labels = item.labels[:MAX_DETAIL_ITEMS]
        more = len(item.labels) - len(labels)
        return ContainerDetails(
            container_id,
            image=item.info.image,
            created_at=item.created_at,
            labels=labels,
            more=(("labels", more),) if more else (),
            unknown=UNKNOWN_DETAILS,
        )

    def processes(self, container_id: str) -> ContainerProcesses:
        """Refused: the CRI's list names no PID of a container (its GPU processes are shown)."""
        return ContainerProcesses(
            error=f"{self._runtime}'s CRI list names no process of a container: `x` runs `ps` in it"
        )

    def close(self) -> None:
        """Cancel every CRI call in flight; no new one is made."""
        with self._lock:
            client, self._client = self._client, None
            self._closed = True
        if client is not None:
            client.close()


def _inspected(labels: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """The labels inspect shows, by key, keys and values cut short (at most 128: two maps)."""
    kept = sorted((k[: dp.MAX_NAME_CHARS], v[: dp.MAX_TEXT_CHARS]) for k, v in labels.items())
    return tuple(kept)
