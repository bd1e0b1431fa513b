"""containerd's CRI API for tests: a real gRPC server (grpcio's) on a unix socket, serving
``/runtime.v1.RuntimeService/ExecSync`` and ``ContainerStatus`` with the messages of
``k8s.io/cri-api`` ``pkg/apis/runtime/v1/api.proto`` written by hand, answering as a test says
(containerd's answer, or a hostile one). The real CRI plugin is tests/support/runtimes.py's."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.support.kubelet import grpc_module
from tests.support.protobuf import field, msg, varint

#: What the server answers a request with: ``(request bytes, grpc context) -> reply bytes``.
Behaviour = Callable[[bytes, Any], bytes]


def exec_reply(stdout: bytes = b"", stderr: bytes = b"", exit_code: int = 0) -> bytes:
    """``ExecSyncResponse``: stdout 1, stderr 2 (bytes), exit_code 3 (int32: a negative one as
    its ten-byte two's complement)."""
    code = varint(3 << 3) + varint(exit_code & ((1 << 64) - 1)) if exit_code else b""
    return msg((1, stdout), (2, stderr)) + code


def status_reply(log_path: str, container_id: str = "c" * 64) -> bytes:
    """``ContainerStatusResponse{status: ContainerStatus{id 1, state 3, log_path 15}}``, with
    labels (12) a reader must skip."""
    labels = field(12, msg((1, "io.kubernetes.pod.name"), (2, "train")))
    status = msg((1, container_id), (3, 1)) + labels + field(15, log_path)
    return msg((1, status))


@contextlib.contextmanager
def cri_server(sock: Path, behaviours: Mapping[str, Behaviour]) -> Iterator[str]:
    """A gRPC server on ``sock`` answering each named method as its behaviour says."""
    grpc = grpc_module()
    server = grpc.server(
        ThreadPoolExecutor(max_workers=4), options=[("grpc.max_send_message_length", 64 << 20)]
    )
    handler = grpc.method_handlers_generic_handler(
        "runtime.v1.RuntimeService",
        {name: grpc.unary_unary_rpc_method_handler(b) for name, b in behaviours.items()},
    )
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"unix://{sock}")
    server.start()
    try:
        yield str(sock)
    finally:
        server.stop(grace=0).wait()


#: Starts a server on a new socket answering each named method as its behaviour says; its path.
StartPeer = Callable[[Mapping[str, Behaviour]], str]


@contextlib.contextmanager
def cri_servers(folder: Path) -> Iterator[StartPeer]:
    """Yields ``start``: a new :func:`cri_server` in ``folder`` at each call; all stopped after."""
    with contextlib.ExitStack() as stack:
        started: list[str] = []

        def start(behaviours: Mapping[str, Behaviour]) -> str:
            sock = folder / f"cri-{len(started)}.sock"
            started.append(stack.enter_context(cri_server(sock, behaviours)))
            return started[-1]

        yield start
