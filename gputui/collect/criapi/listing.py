"""The CRI's lists, decoded: ``ListContainers`` and ``ListPodSandbox`` replies, bounded.

The messages are ``k8s.io/cri-api`` ``pkg/apis/runtime/v1/api.proto`` (package ``runtime.v1``),
read by hand with :mod:`~gputui.collect.kubelet.protowire`:

* ``ListContainersResponse{repeated Container containers = 1}``; ``Container{id = 1,
  pod_sandbox_id = 2, ContainerMetadata metadata = 3 {name = 1, attempt = 2}, ImageSpec image =
  4 {image = 1, user_specified_image = 18}, image_ref = 5, ContainerState state = 6, int64
  created_at = 7 (ns), map labels = 8, map annotations = 9}``;
* ``ListPodSandboxResponse{repeated PodSandbox items = 1}``; ``PodSandbox{id = 1,
  PodSandboxMetadata metadata = 2 {name = 1, uid = 2, namespace = 3, attempt = 4},
  PodSandboxState state = 3, int64 created_at = 4 (ns), map labels = 5, map annotations = 6}``;
* ``ListContainerStatsResponse{repeated ContainerStats stats = 1}``; ``ContainerStats{
  ContainerAttributes attributes = 1 {id = 1}, CpuUsage cpu = 2 {int64 timestamp = 1 (ns),
  UInt64Value usage_core_nano_seconds = 2, UInt64Value usage_nano_cores = 3}, MemoryUsage
  memory = 3 {int64 timestamp = 1, UInt64Value working_set_bytes = 2}}``; ``UInt64Value{uint64
  value = 1}`` (absent: not measured, unlike 0);
* a ``map<string, string>`` is a repeated entry message ``{key = 1, value = 2}``.

Everything is bounded: at most :data:`MAX_ITEMS` items decoded (the rest counted), ids and
names cut at their limits (an item whose id is longer than :data:`MAX_ID_CHARS` is skipped,
counted: a cut id would name another container), at most :data:`MAX_KEPT_LABELS` labels kept an
item, only those a caller asks for, and :data:`MAX_FIELDS` fields and :data:`MAX_DECODE_S`
seconds of decoding in all (the reply's size is the client's cap). A field of the wrong wire
type is a :class:`~gputui.collect.kubelet.protowire.WireError`: the reply is not the CRI's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field
from typing import TypeVar

from gputui.collect.kubelet.protowire import (
    LENGTH,
    VARINT,
    Budget,
    WireError,
    fields,
    message,
    signed,
)
from gputui.model.records import record

#: Items decoded per list: more containers (running and exited) than a node keeps.
MAX_ITEMS = 5_000
#: Fields decoded per reply, over every message: some 40 a container with its labels.
MAX_FIELDS = 400_000
#: Seconds the decoding of one reply may take.
MAX_DECODE_S = 1.0
#: containerd's and CRI-O's ids are 64 hex digits; a Kubernetes name is at most 253 characters.
MAX_ID_CHARS = 128
MAX_NAME_CHARS = 253
#: An image reference (a registry path with a tag and a digest).
MAX_IMAGE_CHARS = 512
#: A label's key and value (Kubernetes: 317 for a key, 63 for a value; annotations more).
MAX_KEY_CHARS = 317
MAX_VALUE_CHARS = 1024
#: Labels (and annotations) kept per item, of those asked for.
MAX_KEPT_LABELS = 64

#: ``ContainerState``: what gputui calls each (Docker's words).
CONTAINER_STATES = {0: "created", 1: "running", 2: "exited", 3: "unknown"}
#: ``PodSandboxState``.
SANDBOX_STATES = {0: "ready", 1: "notready"}

#: Which label keys to keep (``io.kubernetes.*``, ``gputui.*``, the owner labels).
KeepKey = Callable[[str], bool]


@record
class CriContainer:
    """One ``Container`` of a ``ListContainers`` reply.

    Attributes:
        id: The runtime's id (the one in the container's cgroup path).
        sandbox_id: Its pod's sandbox.
        name: ``metadata.name``: the container's name in the pod spec.
        attempt: ``metadata.attempt``: how many times the kubelet made it again.
        image: ``image.user_specified_image`` when the runtime keeps it, else ``image.image``.
        image_ref: The digested reference of the image it runs.
        state: ``created``, ``running``, ``exited`` or ``unknown``.
        created_at: Creation time, seconds since the epoch (None when not given).
        labels: The labels asked for, by key, sorted.
        annotations: The annotations asked for, by key, sorted.
    """

    id: str
    sandbox_id: str = ""
    name: str = ""
    attempt: int = 0
    image: str = ""
    image_ref: str = ""
    state: str = "created"
    created_at: float | None = None
    labels: tuple[tuple[str, str], ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()


@record
class CriSandbox:
    """One ``PodSandbox`` of a ``ListPodSandbox`` reply.

    Attributes:
        id: The sandbox's id (its pause container's, where the runtime runs one).
        name: The pod's name.
        uid: The pod's UID.
        namespace: The pod's namespace.
        attempt: How many times the kubelet made the sandbox again.
        state: ``ready`` or ``notready``.
        created_at: Creation time, seconds since the epoch (None when not given).
        labels: The labels asked for (the pod's own labels are the sandbox's), sorted.
        annotations: The annotations asked for, sorted.
    """

    id: str
    name: str = ""
    uid: str = ""
    namespace: str = ""
    attempt: int = 0
    state: str = "ready"
    created_at: float | None = None
    labels: tuple[tuple[str, str], ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()


@record
class CriStats:
    """One ``ContainerStats`` of a ``ListContainerStats`` reply (its Linux figures).

    Attributes:
        id: The container's id.
        cpu_at_ns: When the CPU figures were taken (the runtime's clock, ns); 0 when not given.
        cpu_ns: CPU time used since the container started (``usage_core_nano_seconds``).
        nano_cores: The runtime's own CPU rate over its last interval (``usage_nano_cores``,
            a billionth of a core).
        working_set_bytes: Memory in use, not counting reclaimable file cache (the kubelet's
            and ``docker stats``' figure).
    """

    id: str
    cpu_at_ns: int = 0
    cpu_ns: int | None = None
    nano_cores: int | None = None
    working_set_bytes: int | None = None


@record
class CriList:
    """What one list reply held.

    Attributes:
        containers: The containers decoded (empty for a sandbox list).
        sandboxes: The sandboxes decoded (empty for a container list).
        stats: The containers' figures decoded (a stats list only).
        more: Items beyond :data:`MAX_ITEMS`, not decoded.
        skipped: Items left out as unusable (no id, or an id over :data:`MAX_ID_CHARS`).
    """

    containers: tuple[CriContainer, ...] = field(default=())
    sandboxes: tuple[CriSandbox, ...] = field(default=())
    stats: tuple[CriStats, ...] = field(default=())
    more: int = 0
    skipped: int = 0


def _string(value: int | memoryview, limit: int) -> tuple[str, bool]:
    """A string field's text cut at ``limit`` characters, and whether it was longer.

    Raises:
        WireError: the field is not length-delimited.
    """
    if not isinstance(value, memoryview):
        raise WireError("a string field is not length-delimited")
    raw = bytes(value[: limit * 4])
    decoded = raw.decode("utf-8", errors="replace")
    return decoded[:limit], len(value) > limit * 4 or len(decoded) > limit


def _text(value: int | memoryview, limit: int) -> str:
    return _string(value, limit)[0]


def _int(value: int | memoryview, bits: int) -> int:
    if not isinstance(value, int):
        raise WireError("an integer field is length-delimited")
    return signed(value, bits)


def _seconds(value: int | memoryview) -> float | None:
    """An ``int64`` of nanoseconds since the epoch as seconds; None when not positive."""
    nanos = _int(value, 64)
    return nanos / 1e9 if nanos > 0 else None


def _entry(value: int | memoryview, budget: Budget) -> tuple[str, str, bool]:
    """One map entry ``{key = 1, value = 2}``: ``(key, value, whether the key was cut)``."""
    key, value_text, cut = "", "", False
    for number, _kind, item in fields(message(value), budget):
        if number == 1:
            key, cut = _string(item, MAX_KEY_CHARS)
        elif number == 2:
            value_text = _text(item, MAX_VALUE_CHARS)
    return key, value_text, cut


class _Map:
    """The entries of one map kept while an item is decoded, bounded."""

    def __init__(self, keep: KeepKey) -> None:
        self._keep = keep
        self._kept: dict[str, str] = {}

    def add(self, value: int | memoryview, budget: Budget) -> None:
        if len(self._kept) >= MAX_KEPT_LABELS:
            message(value)  # still of the right wire type, or not the CRI's
            return
        key, text, cut = _entry(value, budget)
        if key and not cut and self._keep(key):
            self._kept[key] = text

    def items(self) -> tuple[tuple[str, str], ...]:
        return tuple(sorted(self._kept.items()))


def _metadata(value: int | memoryview, budget: Budget) -> tuple[str, int]:
    """``ContainerMetadata{name = 1, attempt = 2}``."""
    name, attempt = "", 0
    for number, _kind, item in fields(message(value), budget):
        if number == 1:
            name = _text(item, MAX_NAME_CHARS)
        elif number == 2:
            attempt = _int(item, 64) & 0xFFFFFFFF
    return name, attempt


def _image(value: int | memoryview, budget: Budget) -> str:
    """``ImageSpec``: ``user_specified_image`` (18) when given, else ``image`` (1)."""
    image = specified = ""
    for number, _kind, item in fields(message(value), budget):
        if number == 1:
            image = _text(item, MAX_IMAGE_CHARS)
        elif number == 18:
            specified = _text(item, MAX_IMAGE_CHARS)
    return specified or image


def _container(value: int | memoryview, budget: Budget, keep: KeepKey) -> CriContainer | None:
    """One ``Container``; None when its id is missing or too long to be one."""
    cid, id_cut = "", False
    sandbox = name = image = image_ref = ""
    attempt, state, created = 0, "created", None
    labels, notes = _Map(keep), _Map(keep)
    for number, kind, item in fields(message(value), budget):
        if number == 1:
            cid, id_cut = _string(item, MAX_ID_CHARS)
        elif number == 2:
            sandbox = _text(item, MAX_ID_CHARS)
        elif number == 3:
            name, attempt = _metadata(item, budget)
        elif number == 4:
            image = _image(item, budget)
        elif number == 5:
            image_ref = _text(item, MAX_IMAGE_CHARS)
        elif number == 6:
            if kind != VARINT:
                raise WireError("a container's state is not a varint")
            state = CONTAINER_STATES.get(_int(item, 32), "unknown")
        elif number == 7:
            created = _seconds(item)
        elif number == 8:
            labels.add(item, budget)
        elif number == 9:
            notes.add(item, budget)
    if not cid or id_cut:
        return None
    return CriContainer(
        cid, sandbox, name, attempt, image, image_ref, state, created, labels.items(), notes.items()
    )


def _sandbox_metadata(value: int | memoryview, budget: Budget) -> tuple[str, str, str, int]:
    """``PodSandboxMetadata{name = 1, uid = 2, namespace = 3, attempt = 4}``."""
    name = uid = namespace = ""
    attempt = 0
    for number, _kind, item in fields(message(value), budget):
        if number == 1:
            name = _text(item, MAX_NAME_CHARS)
        elif number == 2:
            uid = _text(item, MAX_ID_CHARS)
        elif number == 3:
            namespace = _text(item, MAX_NAME_CHARS)
        elif number == 4:
            attempt = _int(item, 64) & 0xFFFFFFFF
    return name, uid, namespace, attempt


def _sandbox(value: int | memoryview, budget: Budget, keep: KeepKey) -> CriSandbox | None:
    """One ``PodSandbox``; None when its id is missing or too long to be one."""
    sid, id_cut = "", False
    name = uid = namespace = ""
    attempt, state, created = 0, "ready", None
    labels, notes = _Map(keep), _Map(keep)
    for number, kind, item in fields(message(value), budget):
        if number == 1:
            sid, id_cut = _string(item, MAX_ID_CHARS)
        elif number == 2:
            name, uid, namespace, attempt = _sandbox_metadata(item, budget)
        elif number == 3:
            if kind != VARINT:
                raise WireError("a sandbox's state is not a varint")
            state = SANDBOX_STATES.get(_int(item, 32), "notready")
        elif number == 4:
            created = _seconds(item)
        elif number == 5:
            labels.add(item, budget)
        elif number == 6:
            notes.add(item, budget)
    if not sid or id_cut:
        return None
    return CriSandbox(
        sid, name, uid, namespace, attempt, state, created, labels.items(), notes.items()
    )


def _u64(value: int | memoryview, budget: Budget) -> int:
    """``UInt64Value{value = 1}`` (an absent value field is 0, as proto3 says)."""
    found = 0
    for number, _kind, item in fields(message(value), budget):
        if number == 1:
            if not isinstance(item, int):
                raise WireError("a UInt64Value is length-delimited")
            found = item & 0xFFFFFFFFFFFFFFFF
    return found


def _usage(value: int | memoryview, budget: Budget) -> dict[int, int]:
    """``CpuUsage`` or ``MemoryUsage``: the timestamp (field 1) and each UInt64Value given."""
    found: dict[int, int] = {}
    for number, kind, item in fields(message(value), budget):
        if number == 1:
            found[1] = _int(item, 64)
        elif 2 <= number <= 7:  # the UInt64Value figures (8: PSI, not read)
            if kind != LENGTH:
                raise WireError("a usage figure is not a UInt64Value")
            found[number] = _u64(item, budget)
    return found


def _stats(value: int | memoryview, budget: Budget, _keep: KeepKey) -> CriStats | None:
    """One ``ContainerStats``; None when its attributes name no usable id."""
    cid, id_cut = "", False
    cpu: dict[int, int] = {}
    memory: dict[int, int] = {}
    for number, _kind, item in fields(message(value), budget):
        if number == 1:
            for field_number, _k, attribute in fields(message(item), budget):
                if field_number == 1:
                    cid, id_cut = _string(attribute, MAX_ID_CHARS)
        elif number == 2:
            cpu = _usage(item, budget)
        elif number == 3:
            memory = _usage(item, budget)
    if not cid or id_cut:
        return None
    return CriStats(
        cid,
        cpu_at_ns=max(0, cpu.get(1, 0)),
        cpu_ns=cpu.get(2),
        nano_cores=cpu.get(3),
        working_set_bytes=memory.get(2),
    )


def _budget(budget: Budget | None) -> Budget:
    return budget if budget is not None else Budget(MAX_FIELDS, MAX_DECODE_S)


def _keep_all(_key: str) -> bool:
    return True


def parse_containers(
    data: bytes | memoryview,
    keep: KeepKey = _keep_all,
    budget: Budget | None = None,
    *,
    max_items: int = MAX_ITEMS,
) -> CriList:
    """A ``ListContainersResponse``: its containers, at most ``max_items``.

    Args:
        data: The reply's bytes.
        keep: Which label and annotation keys to keep (at most :data:`MAX_KEPT_LABELS` each).
        budget: The fields and time the decode may spend (:data:`MAX_FIELDS`,
            :data:`MAX_DECODE_S` when None).
        max_items: The most containers decoded; the rest are counted in ``more``.

    Raises:
        WireError: bytes that are not such a reply (a field of the wrong wire type, a
            truncated field), or the budget is spent.
    """
    budget = _budget(budget)
    found, more, skipped = _items(data, budget, "container", _container, keep, max_items)
    return CriList(containers=tuple(found), more=more, skipped=skipped)


def parse_sandboxes(
    data: bytes | memoryview,
    keep: KeepKey = _keep_all,
    budget: Budget | None = None,
    *,
    max_items: int = MAX_ITEMS,
) -> CriList:
    """A ``ListPodSandboxResponse``: its sandboxes, at most ``max_items``.

    Args:
        data: The reply's bytes.
        keep: Which label and annotation keys to keep.
        budget: As :func:`parse_containers`.
        max_items: The most sandboxes decoded; the rest are counted in ``more``.

    Raises:
        WireError: as :func:`parse_containers`.
    """
    budget = _budget(budget)
    found, more, skipped = _items(data, budget, "sandbox", _sandbox, keep, max_items)
    return CriList(sandboxes=tuple(found), more=more, skipped=skipped)


def parse_stats(
    data: bytes | memoryview, budget: Budget | None = None, *, max_items: int = MAX_ITEMS
) -> CriList:
    """A ``ListContainerStatsResponse``: each container's CPU and memory, at most ``max_items``.

    Raises:
        WireError: as :func:`parse_containers`.
    """
    budget = _budget(budget)
    found, more, skipped = _items(data, budget, "container's stats", _stats, _keep_all, max_items)
    return CriList(stats=tuple(found), more=more, skipped=skipped)


#: A decoded item of a list reply (a container, a sandbox or a container's stats).
_T = TypeVar("_T")


def _items(
    data: bytes | memoryview,
    budget: Budget,
    what: str,
    decode: Callable[[int | memoryview, Budget, KeepKey], _T | None],
    keep: KeepKey,
    max_items: int,
) -> tuple[list[_T], int, int]:
    """A list reply's items (field 1), at most ``max_items``: ``(items, more, skipped)``.

    ``more`` counts the items past the limit (not decoded), ``skipped`` those ``decode``
    refused (None: no id, an overlong one).
    """
    found: list[_T] = []
    more = skipped = 0
    for number, kind, value in fields(data, budget):
        if number != 1:
            continue
        if kind != LENGTH:
            raise WireError(f"a {what} is not a message")
        if len(found) >= max_items:
            more += 1
            continue
        item = decode(value, budget, keep)
        if item is None:
            skipped += 1
        else:
            found.append(item)
    return found, more, skipped


def parse_version(data: bytes | memoryview, budget: Budget | None = None) -> tuple[str, str]:
    """A ``VersionResponse``: ``(runtime_name = 2, runtime_version = 3)``, each cut short.

    Raises:
        WireError: a field of the wrong wire type, or bytes that are not a message.
    """
    name = version = ""
    for number, _kind, value in fields(data, _budget(budget)):
        if number == 2:
            name = _text(value, MAX_NAME_CHARS)
        elif number == 3:
            version = _text(value, MAX_NAME_CHARS)
    return name, version
