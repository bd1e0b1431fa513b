"""A kubelet's pod-resources API for tests: a real gRPC server (grpcio's) on a unix socket,
serving ``/v1.PodResourcesLister/List`` with the messages of
``k8s.io/kubelet/pkg/apis/podresources/v1/api.proto`` written by hand, answering as a test says
(a kubelet's answer, or a hostile one)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.support.protobuf import field, msg, varint

#: What the server answers a request with: ``(request bytes, grpc context) -> reply bytes``.
Behaviour = Callable[[bytes, Any], bytes]


def grpc_module() -> Any:
    """grpcio, or a skip (a failure in CI, where the test extra holds it)."""
    try:
        import grpc
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip(
            "grpcio is not installed (pip install grpcio, in the test extra)",
            allow_module_level=True,
        )
    return grpc


def devices(resource: str, *ids: str) -> bytes:
    """``ContainerDevices``, with a NUMA topology as the kubelet sends it."""
    topology = msg((1, msg((1, 0))))
    return msg((1, resource), *((2, i) for i in ids), (3, topology))


def container(name: str, *device_entries: bytes) -> bytes:
    """``ContainerResources``: name, devices, and CPU ids (packed) a reader must skip."""
    packed_cpus = field(3, varint(2) + varint(3))
    return msg((1, name), *((2, d) for d in device_entries)) + packed_cpus


def pod(name: str, namespace: str, *containers: bytes) -> bytes:
    """``PodResources``."""
    return msg((1, name), (2, namespace), *((3, c) for c in containers))


def answer(*pods: bytes) -> bytes:
    """``ListPodResourcesResponse``."""
    return msg(*((1, p) for p in pods))


@contextlib.contextmanager
def pod_resources_server(sock: Path, behaviour: Behaviour) -> Iterator[str]:
    """A gRPC server on ``sock`` answering ``List`` as ``behaviour`` says; yields the path."""
    grpc = grpc_module()
    server = grpc.server(
        ThreadPoolExecutor(max_workers=4), options=[("grpc.max_send_message_length", 64 << 20)]
    )

    def list_pods(request: bytes, context: Any) -> bytes:
        assert request == b""  # an empty ListPodResourcesRequest
        return behaviour(request, context)

    handler = grpc.method_handlers_generic_handler(
        "v1.PodResourcesLister", {"List": grpc.unary_unary_rpc_method_handler(list_pods)}
    )
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"unix://{sock}")
    server.start()
    try:
        yield str(sock)
    finally:
        server.stop(grace=0).wait()
