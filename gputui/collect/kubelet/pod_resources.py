"""Which GPUs the kubelet gave each pod's containers: its pod-resources API.

The kubelet serves ``PodResourcesLister`` (``k8s.io/kubelet/pkg/apis/podresources/v1``) over
gRPC on ``/var/lib/kubelet/pod-resources/kubelet.sock``. ``List`` answers, for every pod, each
container's devices by resource name; the NVIDIA device plugin's resources
(``nvidia.com/gpu``, ``nvidia.com/mig-1g.10gb``, ``nvidia.com/gpu.shared``) name GPUs by UUID
(``GPU-…``, ``MIG-…``; a time-sliced replica as ``GPU-…::N``), or by index with
``--device-id-strategy=index``. This is the allocation whatever the plugin's strategy hands the
container (an environment variable, volume mounts, CDI), so a pod that holds a GPU and runs
nothing on it is found as a Docker container is.

gRPC is ``grpcio``, an optional extra (``pip install 'gputui[kubernetes]'``), spoken through
:mod:`gputui.collect.grpc_unix` (the only importer of ``grpc``) and imported only when the
socket exists; without it the status says so. The messages are decoded here, bounded
(:mod:`~gputui.collect.kubelet.protowire`): the reply at most :data:`MAX_REPLY_BYTES` (grpcio
refuses a larger one before it is read whole), at most :data:`MAX_PODS` pods,
:data:`MAX_CONTAINERS` containers a pod, :data:`MAX_DEVICE_ENTRIES` resources a container,
:data:`MAX_DEVICE_IDS` ids a resource, :data:`MAX_FIELDS` fields and :data:`MAX_DECODE_S` seconds
of decoding in all; the call has a deadline over connect and reply and can be
cancelled from another thread (:meth:`PodResourcesClient.close`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import field

from gputui.collect.grpc_unix import GrpcFailure, UnixGrpcClient
from gputui.collect.kubelet.protowire import LENGTH, Budget, WireError, fields, message, text
from gputui.model.records import record
from gputui.model.status import SourceStatus

#: Where the kubelet serves the pod-resources API (its ``--root-dir`` is ``/var/lib/kubelet``).
DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
#: A socket path instead of the default, or ``off``.
ENV_SOCKET = "GPUTUI_POD_RESOURCES"
#: The method, as the proto names it: package ``v1``, service ``PodResourcesLister``.
LIST_METHOD = "/v1.PodResourcesLister/List"
#: A node of 1,000 pods with a few GPU containers each answers tens of KiB.
MAX_REPLY_BYTES = 4 << 20
MAX_PODS = 10_000
MAX_CONTAINERS = 256
MAX_DEVICE_ENTRIES = 64
MAX_DEVICE_IDS = 256
#: Fields decoded per reply, over every message: a node of 1,000 pods sends some 20,000.
MAX_FIELDS = 250_000
#: Seconds the decoding of one reply may take.
MAX_DECODE_S = 2.0
#: Kubernetes names are at most 253 characters; device ids are UUIDs or indexes.
MAX_NAME_CHARS = 253
MAX_ID_CHARS = 128
#: The resources whose devices are GPUs or MIG devices: the NVIDIA device plugin's.
GPU_RESOURCE_PREFIX = "nvidia.com/"
#: What the status's fix says when grpcio is missing.
GRPC_FIX = (
    "Install gRPC for the kubelet's GPU allocations: pip install 'gputui[kubernetes]' (grpcio); "
    f"or turn the look-up off with {ENV_SOCKET}=off."
)

#: ``(namespace, pod, container)`` to the GPU ids the kubelet allocated it, in its order.
Allocations = Mapping[tuple[str, str, str], tuple[str, ...]]


@record
class PodResourcesAnswer:
    """One ``List`` call's outcome.

    Attributes:
        status: ``kubelet`` status: ok, or why not (``missing_dependency``, ``timeout``,
            ``unavailable``, ``too_large``, ``malformed``, ``error``); ``partial`` when a bound
            cut the answer short.
        allocations: The GPU allocations (empty when the call failed).
        pods: Pods the answer listed.
    """

    status: SourceStatus
    allocations: Allocations = field(default_factory=dict)
    pods: int = 0


def socket_path(env: Mapping[str, str] | None = None) -> str | None:
    """The pod-resources socket to ask, or None: off, or no such socket on this node."""
    env = os.environ if env is None else env
    chosen = (env.get(ENV_SOCKET) or "").strip()
    if chosen.lower() in ("off", "0", "no", "false"):
        return None
    path = chosen or DEFAULT_SOCKET
    try:
        return path if stat.S_ISSOCK(os.stat(path).st_mode) else None
    except (OSError, ValueError):
        return None


def gpu_ids(device_ids: list[str]) -> tuple[str, ...]:
    """The GPUs of a resource's device ids: a replica's ``::N`` suffix dropped, each id once."""
    seen: dict[str, None] = {}
    for raw in device_ids:
        base = raw.split("::", 1)[0].strip()
        if base:
            seen.setdefault(base, None)
    return tuple(seen)


def _container(data: memoryview, budget: Budget) -> tuple[str, list[str], bool]:
    """``ContainerResources``: its name and GPU ids (and whether a bound cut them)."""
    name, ids, cut, entries = "", list[str](), False, 0
    for number, _kind, value in fields(data, budget):
        if number == 1:
            name = text(value, MAX_NAME_CHARS)
        elif number == 2:  # ContainerDevices
            entries += 1
            if entries > MAX_DEVICE_ENTRIES:
                cut = True
                continue
            resource, these = "", list[str]()
            for n, k, v in fields(message(value), budget):
                if n == 1:
                    resource = text(v, MAX_NAME_CHARS)
                elif n == 2:
                    if len(these) >= MAX_DEVICE_IDS:
                        cut = True
                        continue
                    these.append(text(v, MAX_ID_CHARS))
                elif n == 3 and k != LENGTH:
                    raise WireError("a topology is not a message")
            if resource.startswith(GPU_RESOURCE_PREFIX):
                ids.extend(these)
        # cpu_ids (3), memory (4) and dynamic resources (5) are not GPUs by device id.
    return name, ids, cut


def parse_list(
    data: bytes, budget: Budget | None = None
) -> tuple[dict[tuple[str, str, str], tuple[str, ...]], int, bool]:
    """A ``ListPodResourcesResponse``: ``(allocations, pods, cut)``.

    Only containers with GPU devices are in the allocations; ``cut`` says a bound left some
    out.

    Args:
        data: The reply's bytes.
        budget: Fields and seconds the decode may spend (default :data:`MAX_FIELDS`,
            :data:`MAX_DECODE_S`).

    Raises:
        WireError: the bytes are not the message (a wrong wire type for a known field, a field
            that runs past the end, an over-long string), or the budget is spent.
    """
    budget = budget if budget is not None else Budget(MAX_FIELDS, MAX_DECODE_S)
    allocations: dict[tuple[str, str, str], tuple[str, ...]] = {}
    pods, cut = 0, False
    for number, _, value in fields(data, budget):
        if number != 1:
            continue
        pods += 1
        if pods > MAX_PODS:
            cut = True
            break
        pod, namespace, containers = "", "", 0
        found: list[tuple[str, list[str]]] = []
        for n, _k, v in fields(message(value), budget):
            if n == 1:
                pod = text(v, MAX_NAME_CHARS)
            elif n == 2:
                namespace = text(v, MAX_NAME_CHARS)
            elif n == 3:
                containers += 1
                if containers > MAX_CONTAINERS:
                    cut = True
                    continue
                name, ids, cut_here = _container(message(v), budget)
                cut = cut or cut_here
                if ids:
                    found.append((name, ids))
        for name, ids in found:
            allocations[(namespace, pod, name)] = gpu_ids(ids)
    return allocations, min(pods, MAX_PODS), cut


class PodResourcesClient:
    """The kubelet's ``PodResourcesLister.List``, bounded and cancellable.

    Args:
        path: The socket (``/var/lib/kubelet/pod-resources/kubelet.sock``).
        max_reply_bytes: The largest reply read (grpcio refuses a larger one).
    """

    def __init__(self, path: str, *, max_reply_bytes: int = MAX_REPLY_BYTES) -> None:
        self.path = path
        # An empty ListPodResourcesRequest is all that is ever sent.
        self._rpc = UnixGrpcClient(path, max_reply_bytes=max_reply_bytes, max_send_bytes=1024)

    def _status(self, ok: bool, error: str | None = None, kind: str | None = None) -> SourceStatus:
        fix = None
        if kind == "missing_dependency":
            fix = GRPC_FIX
        elif not ok:
            fix = (
                f"Check that the kubelet serves {self.path} (its PodResources API, on by "
                f"default) and that gputui may open it (root); {ENV_SOCKET}=off turns it off."
            )
        where = f"{self.path}: {error}" if error else None
        return SourceStatus("kubelet", ok, where, kind, fix)

    def list_gpus(self, timeout: float) -> PodResourcesAnswer:
        """Ask the kubelet which GPUs each container holds; never raises.

        Args:
            timeout: Seconds for the whole call: connecting, the request and the reply.
        """
        try:
            reply = self._rpc.call(LIST_METHOD, b"", timeout)  # an empty ListPodResourcesRequest
        except GrpcFailure as failure:
            return PodResourcesAnswer(self._failure(failure, timeout))
        try:
            allocations, pods, cut = parse_list(reply)
        except WireError as exc:
            return PodResourcesAnswer(
                self._status(False, f"malformed List reply: {exc}", "malformed")
            )
        status = (
            self._status(True, "a bound cut the answer short: some pods not read", "partial")
            if cut
            else self._status(True)
        )
        return PodResourcesAnswer(status, allocations, pods)

    def _failure(self, failure: GrpcFailure, timeout: float) -> SourceStatus:
        words = {
            "missing_dependency": "grpcio is not installed",
            "closed": "closed",
            "cancelled": "cancelled",
            "malformed": "the reply is not bytes",
            "timeout": f"no answer within {timeout:.2g} s",
            "too_large": f"the reply is over {self._rpc.max_reply_bytes >> 20} MiB",
            "unavailable": "the kubelet does not answer",
        }
        said = words.get(failure.kind)
        if said is not None:
            kind = "error" if failure.kind in ("closed", "cancelled") else failure.kind
            return self._status(False, said, kind)
        # Every other status (not_found and unimplemented too) is an error in its own words,
        # or the exception's where the failure is not the kubelet's.
        shown = (failure.details if failure.details is not None else str(failure))[:200]
        name = failure.code
        return self._status(False, f"{name}: {shown}" if shown else name, "error")

    def close(self) -> None:
        """Cancel a call in flight (from any thread) and close the channel."""
        self._rpc.close()
