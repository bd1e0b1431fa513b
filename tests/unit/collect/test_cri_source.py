"""The CRI source against a real gRPC server: the CRI's lists decoded, bounded, and hostile ones.

The server is grpcio's on a unix socket (tests/support/cri_peer.py) serving
``/runtime.v1.RuntimeService/ListPodSandbox``, ``ListContainers`` and ``Version`` with the
messages of ``k8s.io/cri-api``'s ``api.proto`` written by hand: a runtime's answers, and
hostile ones (oversized, endless maps, wrong wire types, huge counts). The real CRI plugin runs
in tests/engine/test_runtimes_cri.py.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from gputui.collect.containerd import cri
from gputui.collect.criapi import listing
from gputui.collect.criapi.source import MAX_REPLY_BYTES, CriSource
from gputui.collect.kubelet.protowire import WireError
from tests.support.cri_peer import Behaviour, cri_server
from tests.support.protobuf import field, msg, varint

CONTAINER, SANDBOX = "c" * 64, "5" * 64
CREATED_NS = 1_764_000_000_123_456_789


def _map(number: int, values: Mapping[str, str]) -> bytes:
    return b"".join(field(number, msg((1, k), (2, v))) for k, v in values.items())


def _container(
    cid: str = CONTAINER,
    *,
    name: str = "trainer",
    state: int = 1,
    labels: Mapping[str, str] | None = None,
    extra: bytes = b"",
) -> bytes:
    """``Container{id 1, pod_sandbox_id 2, metadata 3, image 4, image_ref 5, state 6,
    created_at 7, labels 8, annotations 9}``, and ``image_id`` (10) a reader must skip."""
    if labels is None:
        labels = {"io.kubernetes.container.name": name, "team": "vision", "gputui.owner": "alice"}
    return (
        msg(
            (1, cid),
            (2, SANDBOX),
            (3, msg((1, name), (2, 3))),
            (4, msg((1, "sha256:" + "e" * 64), (18, "nvcr.io/nvidia/pytorch:24.05-py3"))),
            (5, "nvcr.io/nvidia/pytorch@sha256:" + "d" * 64),
            (6, state),
            (7, CREATED_NS),
        )
        + _map(8, labels)
        + _map(9, {"io.kubernetes.container.restartCount": "2", "other": "x" * 100})
        + field(10, "sha256:" + "e" * 64)
        + extra
    )


def _sandbox(
    sid: str = SANDBOX, *, state: int = 0, labels: Mapping[str, str] | None = None
) -> bytes:
    """``PodSandbox{id 1, metadata 2 {name 1, uid 2, namespace 3, attempt 4}, state 3,
    created_at 4, labels 5, annotations 6}``, and ``runtime_handler`` (7) to skip."""
    pod_labels = labels if labels is not None else {"app": "train", "gputui.idle-policy": "stop"}
    return (
        msg(
            (1, sid),
            (2, msg((1, "train-7d9c"), (2, "uid-1"), (3, "ml"), (4, 1))),
            (3, state),
            (4, CREATED_NS),
        )
        + _map(5, {"io.kubernetes.pod.name": "train-7d9c", **pod_labels})
        + _map(6, {"kubernetes.io/config.seen": "now"})
        + field(7, "nvidia")
    )


def _list(*items: bytes) -> bytes:
    return b"".join(field(1, item) for item in items)


def _version(name: str = "cri-o") -> bytes:
    return msg((1, "0.1.0"), (2, name), (3, "1.30.4"), (4, "v1"))


def _answer(reply: bytes) -> Behaviour:
    return lambda _request, _context: reply


@pytest.fixture
def peer(tmp_path: Path) -> Iterator[Callable[[Mapping[str, Behaviour]], str]]:
    """A CRI server on a unix socket answering each method as a test says."""
    with contextlib.ExitStack() as stack:
        started: list[str] = []

        def start(behaviours: Mapping[str, Behaviour]) -> str:
            sock = tmp_path / f"cri-{len(started)}.sock"
            started.append(stack.enter_context(cri_server(sock, behaviours)))
            return started[-1]

        yield start


def _runtime(
    containers: bytes, sandboxes: bytes = b"", version: bytes | None = None
) -> dict[str, Behaviour]:
    return {
        "ListContainers": _answer(containers),
        "ListPodSandbox": _answer(sandboxes),
        "Version": _answer(_version() if version is None else version),
    }


def test_a_runtimes_pods_and_containers_are_named_as_the_kubelet_names_them(
    peer: Callable[[Mapping[str, Behaviour]], str],
) -> None:
    asked: list[bytes] = []

    def containers(request: bytes, _context: Any) -> bytes:
        asked.append(request)
        return _list(_container(), _container("f" * 64, name="sidecar", state=2))

    path = peer({**_runtime(b""), "ListContainers": containers,
                 "ListPodSandbox": _answer(_list(_sandbox()))})  # fmt: skip
    source = CriSource(path, owner_labels=("team",))
    try:
        reading = source.read()
        details = source.details(CONTAINER)
    finally:
        source.close()
    assert asked == [field(1, b"")]  # an empty ContainerFilter: every container
    assert reading.status.ok and reading.status.error is None, reading.status
    assert reading.engine is not None and reading.engine.product == "cri-o"
    assert reading.engine.server_version == "1.30.4"
    assert reading.engine.endpoint == f"unix://{path}"
    by_id = {c.id: c for c in reading.containers}
    trainer, sidecar, pod = by_id[CONTAINER], by_id["f" * 64], by_id[SANDBOX]
    assert (trainer.name, trainer.k8s_pod, trainer.k8s_namespace) == ("trainer", "train-7d9c", "ml")
    assert trainer.image == "nvcr.io/nvidia/pytorch:24.05-py3"  # the pod spec's, not the id
    assert (trainer.status, sidecar.status, sidecar.name) == ("running", "exited", "sidecar")
    assert trainer.restart_count == 2
    # The gputui labels of the container and of its pod (a pod's labels are its sandbox's).
    assert trainer.policy_labels == (("gputui.idle-policy", "stop"), ("gputui.owner", "alice"))
    # The configured owner label wins over gputui.owner.
    assert trainer.owner is not None and (trainer.owner.name, trainer.owner.confidence) == (
        "vision",
        "high",
    )
    assert (pod.name, pod.k8s_pod, pod.status) == ("POD", "train-7d9c", "running")
    assert details.error is None and details.created_at == pytest.approx(CREATED_NS / 1e9)
    # Inspect shows the kept labels: the kubelet's, gputui's and the owner label, no others.
    assert [k for k, _ in details.labels] == [
        "gputui.idle-policy", "gputui.owner", "io.kubernetes.container.name",
        "io.kubernetes.pod.name", "team",
    ]  # fmt: skip
    assert "start time" in details.unknown


def test_every_state_and_a_sandbox_not_ready() -> None:
    states = [_container(f"{n:064x}", state=n) for n in (0, 1, 2, 3, 7)]
    parsed = listing.parse_containers(_list(*states))
    assert [c.state for c in parsed.containers] == [
        "created", "running", "exited", "unknown", "unknown",
    ]  # fmt: skip
    (sandbox,) = listing.parse_sandboxes(_list(_sandbox(state=1))).sandboxes
    assert (sandbox.state, sandbox.uid, sandbox.namespace, sandbox.attempt) == (
        "notready", "uid-1", "ml", 1,
    )  # fmt: skip
    # A created_at of 0 or before the epoch is no time.
    (unset,) = listing.parse_containers(
        _list(msg((1, CONTAINER)) + field(7, (1 << 64) - 5))
    ).containers
    assert unset.created_at is None


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (varint(1 << 3) + varint(5), "a container is not a message"),
        (_list(msg((1, CONTAINER)) + field(6, "running")), "state is not a varint"),
        (_list(msg((1, CONTAINER)) + field(3, 7)), "not length-delimited"),
        (_list(msg((1, CONTAINER)) + field(4, 7)), "not length-delimited"),
        (_list(msg((1, CONTAINER)) + field(8, 1)), "not length-delimited"),
        (_list(field(1, 42)), "not length-delimited"),
        (_list(msg((1, CONTAINER)) + field(7, "yesterday")), "length-delimited"),
        (_list(msg((1, CONTAINER)) + varint(8 << 3 | 3)), "wire type 3"),
        (_list(b"\x0a\x7f"), "past the end"),
    ],
    ids=["item", "state", "metadata", "image", "labels", "id", "created", "group", "cut"],
)
def test_wrong_wire_types_are_a_malformed_reply(reply: bytes, why: str) -> None:
    with pytest.raises(WireError, match=why):
        listing.parse_containers(reply)


def test_wrong_wire_types_from_the_runtime_are_its_status_not_a_crash(
    peer: Callable[[Mapping[str, Behaviour]], str],
) -> None:
    bad = _list(msg((1, CONTAINER)) + field(6, "running"))
    source = CriSource(peer(_runtime(bad)))
    try:
        reading = source.read()
    finally:
        source.close()
    assert not reading.status.ok and reading.status.kind == "malformed", reading.status
    assert "ListContainers" in (reading.status.error or "") and reading.containers == ()
    with pytest.raises(WireError, match="sandbox's state is not a varint"):
        listing.parse_sandboxes(_list(msg((1, SANDBOX)) + field(3, "READY")))


def test_an_endless_map_is_cut_and_a_bottomless_one_spends_the_budget() -> None:
    many = {f"gputui.k{n:04}": "v" for n in range(500)}
    (item,) = listing.parse_containers(_list(_container(labels=many))).containers
    assert len(item.labels) == listing.MAX_KEPT_LABELS
    # A map of millions of empty entries: the budget ends the decode, in bounded time (its
    # field count, or on a loaded machine its decoding time, whichever is spent first).
    endless = msg((1, CONTAINER)) + field(8, b"") * 1_500_000
    started = time.monotonic()
    with pytest.raises(WireError, match=r"more fields|too long to decode"):
        listing.parse_containers(_list(endless))
    assert time.monotonic() - started < 5


def test_long_strings_are_cut_and_an_overlong_id_leaves_its_item_out() -> None:
    huge = "n" * 100_000
    reply = _list(
        _container(name=huge, labels={huge: "x", "gputui.owner": huge}),
        _container("a" * 1000),
        msg((2, SANDBOX)),  # no id at all
    )
    parsed = listing.parse_containers(reply)
    (item,) = parsed.containers
    assert parsed.skipped == 2
    assert len(item.name) == listing.MAX_NAME_CHARS
    assert dict(item.labels)["gputui.owner"] == "n" * listing.MAX_VALUE_CHARS
    assert not any(len(k) > listing.MAX_KEY_CHARS for k, _ in item.labels)


def test_a_huge_count_is_read_up_to_the_cap_and_said(
    peer: Callable[[Mapping[str, Behaviour]], str],
) -> None:
    items = [msg((1, f"{n:064x}"), (3, msg((1, f"c{n}")))) for n in range(listing.MAX_ITEMS + 250)]
    source = CriSource(peer(_runtime(_list(*items))))
    try:
        reading = source.read()
    finally:
        source.close()
    assert reading.status.ok and reading.status.kind == "partial", reading.status
    assert "250 more than 5000 not read" in (reading.status.error or "")
    assert len(reading.containers) == listing.MAX_ITEMS


def test_an_oversized_reply_is_refused_before_it_is_read(
    peer: Callable[[Mapping[str, Behaviour]], str],
) -> None:
    big = _list(msg((1, CONTAINER), (9, b"x" * (MAX_REPLY_BYTES + 1024))))
    source = CriSource(peer(_runtime(big)))
    try:
        reading = source.read()
    finally:
        source.close()
    assert not reading.status.ok and reading.status.kind == "too_large", reading.status
    assert "over 16 MiB" in (reading.status.error or "")
    # The client's own cap, whatever the list.
    small = cri.CriClient(peer(_runtime(_list(_container()) * 100)), max_reply_bytes=1 << 10)
    try:
        with pytest.raises(cri.CriError) as caught:
            small.list_containers(2.0)
    finally:
        small.close()
    assert caught.value.kind == "too_large"


def test_without_a_socket_or_an_answer_the_status_says_why(
    peer: Callable[[Mapping[str, Behaviour]], str], tmp_path: Path
) -> None:
    gone = CriSource(f"unix://{tmp_path}/crio.sock")
    assert gone.read().status.kind == "not_found"
    assert "--engine crio=" in (gone.read().status.fix or "")
    gone.close()

    def slow(_request: bytes, _context: Any) -> bytes:
        time.sleep(3)
        return b""

    source = CriSource(peer({"Version": _answer(_version()), "ListPodSandbox": slow}), timeout=0.5)
    try:
        started = time.monotonic()
        reading = source.read()
        assert time.monotonic() - started < 1.5
    finally:
        source.close()
    assert reading.status.kind == "timeout" and "CRI-O did not answer" in (
        reading.status.error or ""
    ), reading.status


def test_exec_and_logs_are_refused_for_a_sandbox_and_the_keys_name_kubectl(
    peer: Callable[[Mapping[str, Behaviour]], str],
) -> None:
    source = CriSource(peer(_runtime(_list(_container()), _list(_sandbox()))))
    try:
        source.read()
        caps = source.capabilities()
        refused = source.exec(SANDBOX, ["true"], 1)
        unknown = source.exec("9" * 64, ["true"], 1)
    finally:
        source.close()
    assert caps.exec and caps.logs and caps.inspect and not caps.lifecycle
    assert "kubectl exec -it" in caps.why("interactive_exec")
    assert "kubectl delete pod" in caps.why("lifecycle") and "CRI-O stops" in caps.why("lifecycle")
    assert refused.error is not None and "sandbox" in refused.error
    assert unknown.error is not None and "no such container in CRI-O's CRI" in unknown.error


def _u64(value: int) -> bytes:
    return msg((1, value))


def _stats(
    cid: str = CONTAINER, *, at_ns: int, cpu_ns: int, cores: int | None = None, ws: int = 7 << 20
) -> bytes:
    """``ContainerStats{attributes 1 {id 1}, cpu 2 {timestamp 1, usage_core_nano_seconds 2,
    usage_nano_cores 3}, memory 3 {timestamp 1, working_set_bytes 2}}``, and an ``io`` (6)
    a reader must skip."""
    cpu: list[tuple[int, int | str | bytes]] = [(1, at_ns), (2, _u64(cpu_ns))]
    if cores is not None:
        cpu.append((3, _u64(cores)))
    return msg(
        (1, msg((1, cid), (2, msg((1, "trainer"))))),
        (2, msg(*cpu)),
        (3, msg((1, at_ns), (2, _u64(ws)), (3, _u64(1 << 30)))),
        (6, msg((1, at_ns))),
    )


def test_cpu_is_cpu_time_over_the_runtimes_clock_and_memory_its_working_set(
    peer: Callable[[Mapping[str, Behaviour]], str],
) -> None:
    replies = [
        _list(_stats(at_ns=10**12, cpu_ns=5 * 10**9, cores=250_000_000)),
        # 1.5 s of CPU in 2 s of the runtime's clock: 75 % of a core.
        _list(_stats(at_ns=10**12 + 2 * 10**9, cpu_ns=6_500_000_000, ws=9 << 20)),
        # A counter that went back (the container was made again under its id): no rate.
        _list(_stats(at_ns=10**12 + 3 * 10**9, cpu_ns=10**9)),
    ]
    behaviours = _runtime(_list(_container()), _list(_sandbox()))
    behaviours["ListContainerStats"] = lambda _request, _context: replies.pop(0)
    source = CriSource(peer(behaviours))
    try:
        figures = []
        for _ in range(3):
            (info,) = [c for c in source.read().containers if c.id == CONTAINER]
            figures.append((info.cpu_percent, info.memory_used_bytes))
    finally:
        source.close()
    # The first read: the runtime's own rate (usage_nano_cores 0.25 core).
    assert figures[0][0] == pytest.approx(25.0) and figures[0][1] == 7 << 20
    assert figures[1][0] == pytest.approx(75.0) and figures[1][1] == 9 << 20
    assert figures[2] == (None, 7 << 20)


def test_stats_a_runtime_lacks_or_garbles_leave_the_list_standing(
    peer: Callable[[Mapping[str, Behaviour]], str],
) -> None:
    asked: list[bytes] = []

    def unimplemented(request: bytes, context: Any) -> bytes:
        asked.append(request)
        import grpc  # the peer's own library (the test extra)

        context.abort(grpc.StatusCode.UNIMPLEMENTED, "unknown method")
        return b""

    behaviours = _runtime(_list(_container()), _list(_sandbox()))
    behaviours["ListContainerStats"] = unimplemented
    source = CriSource(peer(behaviours))
    try:
        for _ in range(2):
            reading = source.read()
            assert reading.status.ok and reading.containers, reading.status
            assert all(c.cpu_percent is None for c in reading.containers)
    finally:
        source.close()
    assert len(asked) == 1, "a runtime without the call is not asked again"
    # A wrong wire type, a huge rate or memory figure: refused or bounded, never a crash.
    with pytest.raises(WireError, match="UInt64Value"):
        listing.parse_stats(_list(msg((1, msg((1, CONTAINER))), (2, msg((2, 5))))))
    garbled = _runtime(_list(_container()), _list(_sandbox()))
    garbled["ListContainerStats"] = _answer(_list(_stats(at_ns=1, cpu_ns=1, cores=2**63, ws=2**63)))
    source = CriSource(peer(garbled))
    try:
        (info,) = [c for c in source.read().containers if c.id == CONTAINER]
    finally:
        source.close()
    assert info.cpu_percent is not None and info.cpu_percent <= 100 * (os.cpu_count() or 1)
    assert info.memory_used_bytes == 64 << 40
