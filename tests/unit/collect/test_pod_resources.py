"""The kubelet's pod-resources API against a real gRPC server on a unix socket.

The server is grpcio's, serving the real method (``/v1.PodResourcesLister/List``) with the
messages of ``k8s.io/kubelet/pkg/apis/podresources/v1/api.proto`` written by hand: a kubelet's
answer, and hostile ones (huge, malformed, of the wrong types, slow, failing, endless lists).
It is our own test peer, as the hostile HTTP engines of the Docker tests are.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gputui.collect.containerd.bundles import ContainerdBundles
from gputui.collect.engines import CONTAINERD_TASKS
from gputui.collect.kubelet import pod_resources as pr
from gputui.collect.kubelet.protowire import Budget, WireError, fields
from tests.support.kubelet import (
    Behaviour,
    answer,
    container,
    devices,
    grpc_module,
    pod,
    pod_resources_server,
)
from tests.support.protobuf import field, msg, varint

grpc = grpc_module()
UUID_A = "GPU-8a1d4b2c-0000-4000-8000-00000000000a"
UUID_B = "GPU-8a1d4b2c-0000-4000-8000-00000000000b"


KUBELET_ANSWER = answer(
    pod(
        "train-7d9c",
        "ml",
        container("trainer", devices("nvidia.com/gpu", UUID_A, f"{UUID_B}::1", f"{UUID_B}::2")),
        container("sidecar", devices("example.com/fpga", "fpga-0")),
    ),
    pod("web-1", "default", container("nginx")),
    pod("mig-job", "ml", container("worker", devices("nvidia.com/mig-1g.18gb", "MIG-1234"))),
)


@pytest.fixture
def kubelet(tmp_path: Path) -> Iterator[Callable[[Behaviour], str]]:
    """A gRPC server on a unix socket answering ``List`` as ``behaviour`` says."""
    with contextlib.ExitStack() as stack:
        started: list[str] = []

        def start(behaviour: Behaviour) -> str:
            sock = tmp_path / f"kubelet-{len(started)}.sock"
            started.append(stack.enter_context(pod_resources_server(sock, behaviour)))
            return started[-1]

        yield start


def _ask(sock: str, timeout: float = 2.0) -> pr.PodResourcesAnswer:
    client = pr.PodResourcesClient(sock)
    try:
        return client.list_gpus(timeout)
    finally:
        client.close()


def test_a_kubelets_answer_gives_each_containers_gpus(
    kubelet: Callable[[Behaviour], str],
) -> None:
    got = _ask(kubelet(lambda _r, _c: KUBELET_ANSWER))
    assert got.status.ok and got.status.error is None, got.status
    assert got.pods == 3
    assert dict(got.allocations) == {
        ("ml", "train-7d9c", "trainer"): (UUID_A, UUID_B),  # replicas of B count once
        ("ml", "mig-job", "worker"): ("MIG-1234",),
    }


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (b"\x0a" + varint(pr.MAX_REPLY_BYTES + 1) + b"x" * (pr.MAX_REPLY_BYTES + 1), "too_large"),
        (b"\x0a\xff\xff\xff", "malformed"),  # a length past the end
        (b"\x0b", "malformed"),  # a group: not proto3
        (answer(msg((1, 5))), "malformed"),  # a pod's name as a number
        (answer(pod("p", "n", msg((1, "c"), (2, 7)))), "malformed"),  # devices as a number
        (answer(msg((1, "x" * 2000))), "malformed"),  # a name of 2,000 characters
        (b"\x80" * 20, "malformed"),  # a varint that never ends
        # 300,000 tiny fields in one pod: more than the decode budget, refused in well under 1 s
        (answer(b"".join(field(4, 1) for _ in range(300_000))), "malformed"),
    ],
    ids=[
        "huge",
        "past-the-end",
        "group",
        "wrong-type",
        "wrong-type-nested",
        "long",
        "varint",
        "many-fields",
    ],
)
def test_hostile_replies_are_a_status_not_an_exception(
    kubelet: Callable[[Behaviour], str], reply: bytes, kind: str
) -> None:
    sock = kubelet(lambda _r, _c: reply)
    started = time.monotonic()
    got = _ask(sock)
    assert time.monotonic() - started < 3
    assert (got.status.ok, got.status.kind) == (False, kind), got.status
    assert got.allocations == {}
    assert "\n" not in (got.status.error or "") and got.status.fix


def test_a_slow_kubelet_is_left_at_the_deadline(kubelet: Callable[[Behaviour], str]) -> None:
    def slow(_r: bytes, _c: Any) -> bytes:
        time.sleep(3)
        return KUBELET_ANSWER

    sock = kubelet(slow)
    started = time.monotonic()
    got = _ask(sock, timeout=0.4)
    assert time.monotonic() - started < 1.5
    assert got.status.kind == "timeout" and "0.4" in (got.status.error or "")


def test_a_call_in_flight_is_cancelled_by_close(kubelet: Callable[[Behaviour], str]) -> None:
    entered = threading.Event()

    def slow(_r: bytes, _c: Any) -> bytes:
        entered.set()
        time.sleep(3)
        return KUBELET_ANSWER

    client = pr.PodResourcesClient(kubelet(slow))
    answers: list[pr.PodResourcesAnswer] = []
    thread = threading.Thread(target=lambda: answers.append(client.list_gpus(10)))
    thread.start()
    assert entered.wait(5)
    started = time.monotonic()
    client.close()
    thread.join(5)
    assert time.monotonic() - started < 1.0
    assert answers[0].status.ok is False and answers[0].status.error
    assert client.list_gpus(1).status.error == f"{client.path}: closed"


def test_a_failing_kubelet_and_an_absent_one_say_why(
    kubelet: Callable[[Behaviour], str], tmp_path: Path
) -> None:
    def refuse(_r: bytes, context: Any) -> bytes:
        context.abort(grpc.StatusCode.PERMISSION_DENIED, "not for you\nsecond line")
        return b""

    denied = _ask(kubelet(refuse)).status
    assert denied.kind == "error" and "PERMISSION_DENIED: not for you second line" in (
        denied.error or ""
    )
    gone = _ask(str(tmp_path / "no-such.sock"), timeout=1).status
    assert gone.kind == "unavailable" and gone.fix and "GPUTUI_POD_RESOURCES" in gone.fix


def test_endless_lists_are_cut_at_their_bounds(kubelet: Callable[[Behaviour], str]) -> None:
    many_ids = devices("nvidia.com/gpu", *(f"GPU-{n}" for n in range(pr.MAX_DEVICE_IDS + 50)))
    pods = [pod("big", "ml", container("c", many_ids))]
    pods += [pod(f"p{n}", "ml", container("c")) for n in range(pr.MAX_PODS + 10)]
    got = _ask(kubelet(lambda _r, _c: answer(*pods)))
    assert got.status.ok and got.status.kind == "partial"
    assert got.pods == pr.MAX_PODS
    assert len(got.allocations[("ml", "big", "c")]) == pr.MAX_DEVICE_IDS


def test_without_grpcio_the_status_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "grpc", None)  # import grpc now raises ImportError
    got = pr.PodResourcesClient("/nonexistent.sock").list_gpus(1)
    assert got.status.kind == "missing_dependency"
    assert "gputui[kubernetes]" in (got.status.fix or "")


def test_the_socket_is_found_only_where_one_exists(
    kubelet: Callable[[Behaviour], str], tmp_path: Path
) -> None:
    sock = kubelet(lambda _r, _c: b"")
    assert pr.socket_path({pr.ENV_SOCKET: sock}) == sock
    assert pr.socket_path({pr.ENV_SOCKET: "off"}) is None
    (tmp_path / "file.sock").write_text("")
    assert pr.socket_path({pr.ENV_SOCKET: str(tmp_path / "file.sock")}) is None


def test_the_decode_budget_counts_every_nested_field() -> None:
    with pytest.raises(WireError, match="more fields"):
        pr.parse_list(KUBELET_ANSWER, Budget(10, 5))
    assert pr.parse_list(KUBELET_ANSWER, Budget(1000, 5))[1] == 3


def test_the_wire_reader_refuses_what_runs_past_the_end() -> None:
    assert list(fields(field(1, "ab") + field(2, 300))) == [
        (1, 2, memoryview(b"ab")),
        (2, 0, 300),
    ]
    for bad in (b"\x0a\x05ab", b"\x09\x01", b"\x00\x01", b"\x80"):
        with pytest.raises(WireError):
            list(fields(bad))


# -- the containerd source: a CRI container's GPU request is the kubelet's allocation ----------

CRI_TRAINER = {
    # Nothing in the bundle names a GPU (a runtime that injects them outside the spec).
    "process": {"env": ["PATH=/bin", "NVIDIA_VISIBLE_DEVICES=void"]},
    "annotations": {
        "io.kubernetes.cri.container-type": "container",
        "io.kubernetes.cri.container-name": "trainer",
        "io.kubernetes.cri.sandbox-name": "train-7d9c",
        "io.kubernetes.cri.sandbox-namespace": "ml",
    },
}
CRI_SANDBOX = {
    "annotations": {
        "io.kubernetes.cri.container-type": "sandbox",
        "io.kubernetes.cri.sandbox-name": "train-7d9c",
        "io.kubernetes.cri.sandbox-namespace": "ml",
    },
}


def _state(tmp_path: Path, *specs: tuple[str, dict[str, Any]]) -> Path:
    state = tmp_path / "containerd"
    for task_id, spec in specs:
        folder = state / CONTAINERD_TASKS / "k8s.io" / task_id
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps(spec))
        (folder / "init.pid").write_text(str(os.getpid()))
    return state


def test_a_cri_containers_request_is_the_kubelets_allocation(
    kubelet: Callable[[Behaviour], str], tmp_path: Path
) -> None:
    calls: list[float] = []

    def count(_r: bytes, _c: Any) -> bytes:
        calls.append(time.monotonic())
        return KUBELET_ANSWER

    sock = kubelet(count)
    trainer, sandbox = "a" * 64, "b" * 64
    state = _state(tmp_path, (trainer, CRI_TRAINER), (sandbox, CRI_SANDBOX))
    source = ContainerdBundles(state, cgroup_root=tmp_path / "none", pod_resources=sock)
    try:
        before = ContainerdBundles(state, cgroup_root=tmp_path / "none", pod_resources=False)
        assert {c.id: c.gpu_request for c in before.read().containers}[trainer] is None
        reading = source.read()
        by_id = {c.id: c for c in reading.containers}
        assert (by_id[trainer].gpu_request, by_id[trainer].gpu_request_via) == (
            (UUID_A, UUID_B),
            "kubelet",
        )
        assert by_id[sandbox].gpu_request is None
        assert reading.engine is not None and reading.engine.pod_resources is not None
        assert reading.engine.pod_resources.ok
        source.read()
        assert len(calls) == 1  # the same containers: the kubelet is not asked again
    finally:
        source.close()


def test_an_idle_pod_reservation_is_found_from_the_kubelets_allocation(
    kubelet: Callable[[Behaviour], str], tmp_path: Path
) -> None:
    """``gputui --once --json``: the pod holds GPU 0 (by UUID) and runs nothing on it."""
    sock = kubelet(lambda _r, _c: KUBELET_ANSWER)
    trainer = "c" * 64
    state = _state(tmp_path, (trainer, CRI_TRAINER))
    scenario = tmp_path / "scenario.json"
    gpu = {"index": 0, "uuid": UUID_A, "name": "NVIDIA H200", "memory_total_mib": 143771,
           "memory_used_mib": 0, "processes": []}  # fmt: skip
    scenario.write_text(json.dumps({"nvml": "ok", "gpus": [gpu]}))

    def once(env_socket: str) -> dict[str, Any]:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "gputui",
                "--scenario",
                str(scenario),
                "--once",
                "--json",
                "--engine",
                f"containerd={state}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, pr.ENV_SOCKET: env_socket, "GPUTUI_LEDGER": "off"},
        )
        assert result.returncode == 0, result.stderr
        doc: dict[str, Any] = json.loads(result.stdout)
        return doc

    def idle(doc: dict[str, Any]) -> list[str]:
        return [f["subject"] for f in doc["findings"] if f["kind"] == "idle_reservation"]

    doc = once(sock)
    (found,) = [c for c in doc["containers"] if c["id"] == trainer]
    assert found["gpu_request"] == [UUID_A, UUID_B] and found["gpu_request_via"] == "kubelet"
    assert idle(doc) == [f"container:{trainer}"]
    # Without the kubelet's answer the reservation is invisible: no finding.
    assert idle(once("off")) == []
