"""containerd's CRI API (exec and logs of a pod's container) against a real gRPC server.

The server is grpcio's on a unix socket, serving the real methods
(``/runtime.v1.RuntimeService/ExecSync``, ``ContainerStatus``) with the messages of
``k8s.io/cri-api``'s ``api.proto`` written by hand: containerd's answers, and hostile ones (huge,
malformed, of the wrong types, slow, failing, endless). It is our own test peer, as the kubelet's
is for pod-resources; the real CRI plugin runs in tests/engine/test_runtimes_engines.py. The log
files are real files with the CRI's records, and hostile ones (a FIFO, another user's symlink,
records without end).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from gputui.collect import grpc_unix
from gputui.collect.containerd import cri
from gputui.collect.containerd.bundles import ContainerdBundles
from gputui.collect.containerd.cri_logs import MAX_RECORD_BYTES, TAIL_BYTES, CriLogReader
from gputui.collect.docker.engine_api import MAX_EXEC_OUTPUT
from gputui.collect.docker.logs import MAX_LINE_BYTES, LogLine, LogStreamError
from gputui.collect.engines import CONTAINERD_TASKS
from gputui.collect.kubelet.protowire import fields
from tests.support.cri_peer import Behaviour, cri_server, cri_servers, exec_reply, status_reply
from tests.support.kubelet import grpc_module
from tests.support.protobuf import field, msg, varint

grpc = grpc_module()
POD_CONTAINER, SANDBOX, CTR = "a" * 64, "b" * 64, "gputui-job"
TRAINER = {
    "process": {"args": ["python", "train.py"], "env": ["PATH=/bin"]},
    "annotations": {
        "io.kubernetes.cri.container-type": "container",
        "io.kubernetes.cri.container-name": "trainer",
        "io.kubernetes.cri.sandbox-name": "train-7d9c",
        "io.kubernetes.cri.sandbox-namespace": "ml",
    },
}
POD_SANDBOX = {
    "annotations": {
        "io.kubernetes.cri.container-type": "sandbox",
        "io.kubernetes.cri.sandbox-name": "train-7d9c",
        "io.kubernetes.cri.sandbox-namespace": "ml",
    },
}


@pytest.fixture
def peer(tmp_path: Path) -> Iterator[Callable[[Mapping[str, Behaviour]], str]]:
    """A CRI server on a unix socket answering each method as a test says."""
    with cri_servers(tmp_path) as start:
        yield start


def _error(call: Callable[[], object]) -> cri.CriError:
    with pytest.raises(cri.CriError) as caught:
        call()
    return caught.value


# -- the client ---------------------------------------------------------------------------------


def test_exec_sync_sends_the_argv_and_reads_the_answer(
    peer: Callable[[Mapping[str, Behaviour]], str],
) -> None:
    asked: list[list[tuple[int, int, Any]]] = []

    def answer(request: bytes, _c: Any) -> bytes:
        asked.append([(n, k, bytes(v) if isinstance(v, memoryview) else v)
                      for n, k, v in fields(request)])  # fmt: skip
        return exec_reply(b"GPU 0\n", b"warn\n", 3)

    client = cri.CriClient(peer({"ExecSync": answer}))
    try:
        got = client.exec_sync(POD_CONTAINER, ["nvidia-smi", "-L", "a b"], 4.6)
    finally:
        client.close()
    assert (got.stdout, got.stderr, got.exit_code) == (b"GPU 0\n", b"warn\n", 3)
    # ExecSyncRequest: container_id 1, cmd 2 (repeated: each argument, no shell), timeout 3 (s).
    assert asked == [[(1, 2, POD_CONTAINER.encode()), (2, 2, b"nvidia-smi"), (2, 2, b"-L"),
                      (2, 2, b"a b"), (3, 0, 4)]]  # fmt: skip


def test_a_negative_exit_code_and_unknown_fields_are_read(
    peer: Callable[[Mapping[str, Behaviour]], str],
) -> None:
    reply = exec_reply(b"x", b"", -1) + field(9, "a later field") + field(10, 7)
    client = cri.CriClient(peer({"ExecSync": lambda _r, _c: reply}))
    try:
        assert client.exec_sync(POD_CONTAINER, ["true"], 1).exit_code == -1
    finally:
        client.close()


def test_container_status_names_the_log_path(
    peer: Callable[[Mapping[str, Behaviour]], str],
) -> None:
    path = "/var/log/pods/ml_train-7d9c_0000/trainer/0.log"
    client = cri.CriClient(peer({"ContainerStatus": lambda _r, _c: status_reply(path)}))
    try:
        assert client.log_path(POD_CONTAINER) == path
    finally:
        client.close()


@pytest.mark.parametrize(
    ("method", "reply", "kind"),
    [
        ("ExecSync", msg((1, b"x" * (cri.MAX_REPLY_BYTES + 1))), "too_large"),
        ("ExecSync", b"\x0a\xff\xff\xff", "malformed"),  # a length past the end
        ("ExecSync", b"\x0b", "malformed"),  # a group: not proto3
        ("ExecSync", msg((1, 5)), "malformed"),  # stdout as a number
        ("ExecSync", msg((3, "zero")), "malformed"),  # the exit code as bytes
        ("ExecSync", varint(3 << 3) + varint(1 << 40), "malformed"),  # past int32
        ("ExecSync", b"\x80" * 20, "malformed"),  # a varint that never ends
        ("ExecSync", b"".join(field(9, 1) for _ in range(cri.MAX_FIELDS + 1)), "malformed"),
        ("ContainerStatus", msg((1, 7)), "malformed"),  # the status as a number
        ("ContainerStatus", msg((1, msg((15, 3)))), "malformed"),  # the path as a number
        ("ContainerStatus", msg((1, msg((15, "/" * 20_000)))), "malformed"),  # a path too long
    ],
    ids=[
        "huge",
        "past-the-end",
        "group",
        "stdout-type",
        "exit-type",
        "exit-range",
        "varint",
        "many-fields",
        "status-type",
        "path-type",
        "path-long",
    ],
)
def test_hostile_replies_are_an_error_not_a_crash(
    peer: Callable[[Mapping[str, Behaviour]], str], method: str, reply: bytes, kind: str
) -> None:
    client = cri.CriClient(peer({method: lambda _r, _c: reply}))
    started = time.monotonic()
    try:
        if method == "ExecSync":
            error = _error(lambda: client.exec_sync(POD_CONTAINER, ["nvidia-smi"], 1))
        else:
            error = _error(lambda: client.log_path(POD_CONTAINER))
    finally:
        client.close()
    assert time.monotonic() - started < 3
    assert error.kind == kind, error
    assert "\n" not in str(error)


def test_a_slow_engine_is_left_at_the_deadline(
    peer: Callable[[Mapping[str, Behaviour]], str],
) -> None:
    def slow(_r: bytes, _c: Any) -> bytes:
        time.sleep(5)
        return status_reply("/x.log")

    client = cri.CriClient(peer({"ContainerStatus": slow, "ExecSync": slow}))
    try:
        started = time.monotonic()
        error = _error(lambda: client.log_path(POD_CONTAINER, 0.4))
        assert time.monotonic() - started < 1.5
        assert error.kind == "timeout" and "0.4" in str(error)
        # An exec is given its own timeout (containerd kills the command there) and a grace.
        started = time.monotonic()
        error = _error(lambda: client.exec_sync(POD_CONTAINER, ["sleep", "60"], 0.5))
        took = time.monotonic() - started
        assert error.kind == "timeout" and took < 0.5 + cri.EXEC_GRACE_S + 1, took
    finally:
        client.close()


def test_calls_in_flight_are_cancelled_by_close(
    peer: Callable[[Mapping[str, Behaviour]], str],
) -> None:
    entered = threading.Semaphore(0)

    def slow(_r: bytes, _c: Any) -> bytes:
        entered.release()
        time.sleep(3)
        return exec_reply()

    client = cri.CriClient(peer({"ExecSync": slow, "ContainerStatus": slow}))
    errors: list[cri.CriError] = []

    def run(call: Callable[[], object]) -> None:
        try:
            call()
        except cri.CriError as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=run, args=(lambda: client.exec_sync(POD_CONTAINER, ["x"], 30),)),
        threading.Thread(target=run, args=(lambda: client.log_path(POD_CONTAINER, 30),)),
    ]
    for thread in threads:
        thread.start()
    assert entered.acquire(timeout=5) and entered.acquire(timeout=5)
    started = time.monotonic()
    client.close()
    for thread in threads:
        thread.join(5)
    assert time.monotonic() - started < 1.0
    assert sorted(e.kind for e in errors) == ["cancelled", "cancelled"], errors
    assert _error(lambda: client.log_path(POD_CONTAINER)).kind == "cancelled"


def test_a_refusing_and_an_absent_engine_say_why(
    peer: Callable[[Mapping[str, Behaviour]], str], tmp_path: Path
) -> None:
    def refuse(_r: bytes, context: Any) -> bytes:
        context.abort(grpc.StatusCode.PERMISSION_DENIED, "not for you\nsecond line")
        return b""

    def unknown(_r: bytes, context: Any) -> bytes:
        context.abort(grpc.StatusCode.NOT_FOUND, "an error occurred when try to find container")
        return b""

    client = cri.CriClient(peer({"ExecSync": refuse, "ContainerStatus": unknown}))
    try:
        denied = _error(lambda: client.exec_sync(POD_CONTAINER, ["true"], 1))
        assert denied.kind == "error" and "PERMISSION_DENIED: not for you second line" in str(
            denied
        )
        assert _error(lambda: client.log_path(POD_CONTAINER)).kind == "not_found"
    finally:
        client.close()
    gone = cri.CriClient(str(tmp_path / "no-such.sock"))
    try:
        assert _error(lambda: gone.log_path(POD_CONTAINER, 1)).kind == "unavailable"
    finally:
        gone.close()


def test_without_grpcio_a_call_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "grpc", None)  # import grpc now raises ImportError
    error = _error(lambda: cri.CriClient("/nonexistent.sock").log_path(POD_CONTAINER, 1))
    assert error.kind == "missing_dependency" and "gputui[kubernetes]" in str(error)


def test_the_socket_is_found_only_where_one_exists(
    peer: Callable[[Mapping[str, Behaviour]], str], tmp_path: Path
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    assert cri.socket_path(state) is None
    (state / cri.SOCKET_NAME).write_text("")  # a file, not a socket
    assert cri.socket_path(state) is None
    (state / cri.SOCKET_NAME).unlink()
    with cri_server(state / cri.SOCKET_NAME, {}):
        assert cri.socket_path(state) == str(state / cri.SOCKET_NAME)


# -- the containerd source: x and l of a pod's container through the CRI ------------------------


def _state(tmp_path: Path) -> Path:
    state = tmp_path / "containerd"
    for namespace, task_id, spec in (
        ("k8s.io", POD_CONTAINER, TRAINER),
        ("k8s.io", SANDBOX, POD_SANDBOX),
        ("jobs", CTR, {"process": {"args": ["sleep", "1"]}}),
    ):
        folder = state / CONTAINERD_TASKS / namespace / task_id
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps(spec))
        (folder / "init.pid").write_text(str(os.getpid()))
    return state


def _source(tmp_path: Path, sock: str | bool) -> ContainerdBundles:
    source = ContainerdBundles(
        _state(tmp_path), cgroup_root=tmp_path / "none", pod_resources=False, cri_socket=sock
    )
    source.read()
    return source


def test_exec_of_a_pods_container_is_bounded_and_explained(
    peer: Callable[[Mapping[str, Behaviour]], str], tmp_path: Path
) -> None:
    replies = {
        "nvidia-smi": exec_reply(b"NVIDIA-SMI 580\n"),
        "flood": exec_reply(b"o" * (MAX_EXEC_OUTPUT - 10), b"e" * 100, 0),
        "absent": exec_reply(b"", b"sh: absent: not found\n", 127),
    }

    def answer(request: bytes, context: Any) -> bytes:
        argv = [bytes(v).decode() for n, _k, v in fields(request) if n == 2]
        if argv[0] == "/opt/nvidia-smi":
            context.abort(
                grpc.StatusCode.UNKNOWN,
                'failed to exec in container: failed to start exec "1f": OCI runtime exec '
                "failed: exec failed: unable to start container process: exec: "
                '"/opt/nvidia-smi": stat /opt/nvidia-smi: no such file or directory: unknown',
            )
        return replies[argv[0]]

    source = _source(tmp_path, peer({"ExecSync": answer}))
    try:
        offers = source.capabilities()
        assert offers.exec and offers.logs and not offers.interactive_exec
        assert not offers.lifecycle
        smi = source.exec(POD_CONTAINER, ["nvidia-smi"], 5)
        assert (smi.exit_code, smi.stdout, smi.error) == (0, "NVIDIA-SMI 580\n", None)
        flood = source.exec(POD_CONTAINER, ["flood"], 5)
        assert len(flood.stdout) + len(flood.stderr) == MAX_EXEC_OUTPUT
        assert flood.output_cut_bytes == MAX_EXEC_OUTPUT and "was cut" in (flood.error or "")
        assert flood.exit_code == 0
        absent = source.exec(POD_CONTAINER, ["absent"], 5)
        assert absent.exit_code == 127 and absent.error == "absent not found in the container"
        missing = source.exec(POD_CONTAINER, ["/opt/nvidia-smi"], 5)
        assert missing.exit_code is None
        assert (missing.error or "").startswith("/opt/nvidia-smi not found in the container")
        assert "nvidia.com/gpu" in (missing.error or "")
        # Not a pod's container: no CRI exec, and the refusal names what to use.
        ctr = source.exec(CTR, ["nvidia-smi"], 5)
        assert ctr.error is not None and "ctr -n jobs task exec" in ctr.error
        sandbox = source.exec(SANDBOX, ["nvidia-smi"], 5)
        assert sandbox.error is not None and "sandbox" in sandbox.error
        assert "no such task" in (source.exec("f" * 64, ["true"], 5).error or "")
    finally:
        source.close()


def test_without_a_cri_socket_or_grpcio_the_refusals_say_what_to_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = _source(tmp_path, True)  # no containerd.sock in the state directory
    try:
        offers = source.capabilities()
        assert not offers.exec and not offers.logs and offers.inspect
        assert "containerd.sock is not there" in offers.why("exec")
        assert "crictl logs" in offers.why("logs")
        assert "kubectl exec -it" in offers.why("interactive_exec")
        assert "kubectl delete pod" in offers.why("lifecycle")
        assert "ctr -n NAMESPACE task kill" in offers.why("lifecycle")
        monkeypatch.setattr(grpc_unix, "installed", lambda: False)
        named = ContainerdBundles(_state(tmp_path / "b"), cri_socket=str(tmp_path / "x.sock"))
        assert "gputui[kubernetes]" in named.capabilities().why("exec")
    finally:
        source.close()


def _records(*lines: str) -> bytes:
    return "".join(f"{line}\n" for line in lines).encode()


def _read_all(reader: CriLogReader) -> list[LogLine]:
    lines: list[LogLine] = []
    try:
        while (got := reader.read()) is not None:
            lines += got
    finally:
        reader.close()
    return lines


def test_logs_are_the_cri_log_file_parsed_and_joined(
    peer: Callable[[Mapping[str, Behaviour]], str], tmp_path: Path
) -> None:
    log = tmp_path / "0.log"
    log.write_bytes(
        _records(
            "2026-12-02T02:13:34.123456789Z stdout F epoch 1 loss 0.25",
            "2026-12-02T02:13:34.2Z stderr F warning: \x1b[31mred\x1b[0m",
            "2026-12-02T03:13:35.000000001+01:00 stdout P first half, ",
            "2026-12-02T02:13:35.5Z stderr F between the halves",
            "2026-12-02T02:13:36Z stdout F second half",
            "not a CRI record at all",
            "2026-12-02T02:13:37Z stdout F ",
        )
    )
    source = _source(tmp_path, peer({"ContainerStatus": lambda _r, _c: status_reply(str(log))}))
    try:
        lines = _read_all(source.open_logs(POD_CONTAINER, tail=100, follow=False))
        tail = _read_all(source.open_logs(POD_CONTAINER, tail=2, follow=False))
        with pytest.raises(LogStreamError, match="not a Kubernetes pod's"):
            source.open_logs(CTR, tail=10, follow=False)
    finally:
        source.close()
    assert [(line.stream, line.text, line.timestamp) for line in lines] == [
        ("stdout", "epoch 1 loss 0.25", "2026-12-02T02:13:34.123456789Z"),
        ("stderr", "warning: \x1b[31mred\x1b[0m", "2026-12-02T02:13:34.2Z"),  # the screen
        ("stderr", "between the halves", "2026-12-02T02:13:35.5Z"),  # sanitises it
        ("stdout", "first half, second half", "2026-12-02T02:13:35.000000001Z"),  # in UTC
        ("stdout", "not a CRI record at all", None),
        ("stdout", "", "2026-12-02T02:13:37Z"),
    ]
    assert [line.text for line in tail] == ["not a CRI record at all", ""]


def test_endless_records_and_a_huge_file_are_read_bounded(tmp_path: Path) -> None:
    log = tmp_path / "0.log"
    part = "2026-12-02T02:13:34Z stdout P " + "p" * 1000
    with log.open("wb") as fh:
        fh.write(b"2026-12-02T02:13:30Z stdout F before the tail\n" * 100_000)  # 4.6 MB
        fh.write(_records(*[part] * 50, "2026-12-02T02:13:35Z stdout F end"))
        fh.write(b"2026-12-02T02:13:36Z stdout F " + b"r" * (MAX_RECORD_BYTES * 3) + b"\n")
        fh.write(_records("2026-12-02T02:13:37Z stdout F last"))
    assert log.stat().st_size > TAIL_BYTES * 2
    started = time.monotonic()
    lines = _read_all(CriLogReader(str(log), tail=3, follow=False))
    assert time.monotonic() - started < 2
    assert [(line.cut, line.text[:3], len(line.text.encode())) for line in lines] == [
        (True, "ppp", MAX_LINE_BYTES),  # 50 parts joined, then cut
        (True, "rrr", MAX_LINE_BYTES),  # a record of 192 KiB, cut
        (False, "las", 4),
    ]


def test_following_gives_what_is_written_after_and_survives_a_rotation(tmp_path: Path) -> None:
    log = tmp_path / "0.log"
    log.write_bytes(_records("2026-12-02T02:13:34Z stdout F old"))
    reader = CriLogReader(str(log), tail=10, follow=True)
    try:
        assert [line.text for line in reader.read() or []] == ["old"]
        with log.open("ab") as fh:
            fh.write(b"2026-12-02T02:13:35Z stdout P half")  # no newline yet: nothing shown
            fh.flush()
            fh.write(b"\n2026-12-02T02:13:35Z stdout F  and whole\n")
        assert [line.text for line in reader.read() or []] == ["half and whole"]
        # The kubelet renames the file at its size limit; the runtime opens a new 0.log.
        log.rename(tmp_path / "0.log.20261202-021336")
        log.write_bytes(_records("2026-12-02T02:13:37Z stdout F after the rotation"))
        assert [line.text for line in reader.read() or []] == ["after the rotation"]
        # close() from another thread ends a read waiting for more.
        timer = threading.Timer(0.3, reader.close)
        timer.start()
        started = time.monotonic()
        assert reader.read() is None
        assert time.monotonic() - started < 2
    finally:
        reader.close()


def test_a_hostile_log_path_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.log"
    os.mkfifo(fifo)
    with pytest.raises(LogStreamError, match="FIFO"):
        CriLogReader(str(fifo), tail=10, follow=True)
    with pytest.raises(LogStreamError, match="directory"):
        CriLogReader(str(tmp_path), tail=10, follow=False)
    with pytest.raises(LogStreamError, match="No such file"):
        CriLogReader(str(tmp_path / "gone.log"), tail=10, follow=False)


def test_another_users_symlink_as_the_log_is_not_followed(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to plant another user's symlink")
    secret = tmp_path / "secret"
    secret.write_text("2026-12-02T02:13:34Z stdout F TOPSECRET\n")
    link = tmp_path / "0.log"
    os.symlink(secret, link)
    os.lchown(link, 65534, 65534)  # planted by nobody
    with pytest.raises(LogStreamError, match="another user"):
        CriLogReader(str(link), tail=10, follow=False)
