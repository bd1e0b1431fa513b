"""The fleet's model of containers: Kubernetes pods' containers keyed by namespace, pod and name.

``gputui export`` labels a pod's container series with ``pod`` and ``namespace``; for a CRI
container ``container`` is the Kubernetes container name, so two pods' ``server`` containers
share it. The answers here are shaped as Prometheus gives them (``data`` members), some with
label values no honest exporter writes.
"""

from __future__ import annotations

import json
from typing import Any

from gputui.fleet.command import _detail_text
from gputui.fleet.model import (
    LABEL_LIMIT,
    TopContainer,
    detail_from,
    filtered,
    hosts_from,
)
from gputui.fleet.queries import FIELD, host_history, host_queries
from gputui.fleet.report import detail_json, host_json, to_text, top
from gputui.fleet.source import FleetSnapshot

GIB = 1024**3
INSTANCE = "node-k8s:9400"
EVIL = "\x1b[31mred\x1b]0;title\x07\u202eevil\n" + "x" * 2000  # under the client's 4096


def _vector(*series: tuple[dict[str, str], float]) -> dict[str, Any]:
    return {
        "resultType": "vector",
        "result": [{"metric": m, "value": [1.0, repr(v)]} for m, v in series],
    }


def _matrix(*series: tuple[dict[str, str], list[float]]) -> dict[str, Any]:
    return {
        "resultType": "matrix",
        "result": [
            {"metric": m, "values": [[float(t), repr(v)] for t, v in enumerate(vs)]}
            for m, vs in series
        ],
    }


def _mem(gpu: str, value: float, **labels: str) -> tuple[dict[str, str], float]:
    metric = {"__name__": "gputui_container_gpu_memory_bytes", "instance": INSTANCE, "gpu": gpu}
    return {**metric, **labels}, value


def _top(value: float, **labels: str) -> tuple[dict[str, str], float]:
    return {"instance": INSTANCE, FIELD: "top", **labels}, value


HOST_BASE = (
    ({"instance": INSTANCE, "job": "gpu", FIELD: "up"}, 1.0),
    ({"instance": INSTANCE, FIELD: "gpus"}, 2.0),
    ({"instance": INSTANCE, FIELD: "age"}, 1.0),
)


def _plain(text: str) -> bool:
    return text.isprintable() and "\x1b" not in text and "\u202e" not in text


# -- the drill-down --------------------------------------------------------------------------


def test_two_pods_containers_of_one_name_are_two_rows() -> None:
    data = _vector(
        _mem("0", 3 * GIB, container="server", pod="infer-a", namespace="serving", image="img:1"),
        _mem("1", 1 * GIB, container="server", pod="infer-a", namespace="serving", image="img:1"),
        _mem("1", 2 * GIB, container="server", pod="infer-b", namespace="serving", image="img:2"),
        _mem("0", 5 * GIB, container="trainer", image="train:1"),  # no pod: as before
    )
    history = _matrix(
        ({FIELD: "container_mem", "container": "server", "pod": "infer-a", "namespace": "serving"},
         [1.0, 4.0 * GIB]),
        ({FIELD: "container_mem", "container": "server", "pod": "infer-b", "namespace": "serving"},
         [2.0, 2.0 * GIB]),
    )  # fmt: skip
    detail = detail_from(data, history)
    rows = [
        (c.namespace, c.pod, c.name, c.image, c.gpus, c.memory_bytes) for c in detail.containers
    ]
    assert rows == [
        ("", "", "trainer", "train:1", ("0",), 5 * GIB),
        ("serving", "infer-a", "server", "img:1", ("0", "1"), 4 * GIB),
        ("serving", "infer-b", "server", "img:2", ("1",), 2 * GIB),
    ]
    assert [c.pod_shown for c in detail.containers] == ["", "serving/infer-a", "serving/infer-b"]
    # Each pod's sparkline is its own.
    assert [c.memory_history for c in detail.containers] == [
        (),
        (1.0, 4.0 * GIB),
        (2.0, 2.0 * GIB),
    ]
    doc = detail_json(detail)
    assert [(c["namespace"], c["pod"], c["name"]) for c in doc["containers"]] == [
        (None, None, "trainer"),
        ("serving", "infer-a", "server"),
        ("serving", "infer-b", "server"),
    ]
    text = _detail_text({"host": {"host": "n", "instance": INSTANCE}, **doc})
    assert "  server (pod serving/infer-a) img:1: GPU 0,1, 4096 MiB" in text
    assert "  server (pod serving/infer-b) img:2: GPU 1, 2048 MiB" in text
    assert "  trainer train:1: GPU 0, 5120 MiB" in text


def test_same_pod_name_in_two_namespaces_stays_apart() -> None:
    data = _vector(
        _mem("0", 1 * GIB, container="server", pod="web-0", namespace="prod"),
        _mem("0", 2 * GIB, container="server", pod="web-0", namespace="staging"),
    )
    detail = detail_from(data, None)
    assert [(c.pod_shown, c.memory_bytes) for c in detail.containers] == [
        ("staging/web-0", 2 * GIB),
        ("prod/web-0", 1 * GIB),
    ]


def test_hostile_pod_and_namespace_labels_are_sanitised_bounded_and_kept_apart() -> None:
    # Two pods whose names differ only beyond the shown length are still two containers.
    long_a, long_b = "p" * 300 + "a", "p" * 300 + "b"
    data = _vector(
        _mem("0", 1 * GIB, container=EVIL, pod=EVIL, namespace=EVIL, image=EVIL),
        _mem("0", 2 * GIB, container="server", pod=long_a, namespace="ns"),
        _mem("0", 3 * GIB, container="server", pod=long_b, namespace="ns"),
        (
            {
                "__name__": "gputui_container_idle_gpu_reservation",
                "instance": INSTANCE,
                "container": "idle",
                "pod": EVIL,
            },
            1.0,
        ),
    )
    detail = detail_from(data, None)
    assert len(detail.containers) == 4
    for c in detail.containers:
        for value in (c.name, c.pod, c.namespace, c.image, c.pod_shown):
            assert _plain(value), repr(value)
        assert len(c.pod) <= LABEL_LIMIT and len(c.namespace) <= LABEL_LIMIT
    assert [c.memory_bytes for c in detail.containers[:2]] == [3 * GIB, 2 * GIB]
    doc = detail_json(detail)
    text = _detail_text({"host": {"host": "n", "instance": INSTANCE}, **doc})
    assert all(_plain(line) for line in text.splitlines())
    assert all(_plain(v) for v in json.dumps(doc, ensure_ascii=False).splitlines())


# -- the host table --------------------------------------------------------------------------


def _hosts(*tops: tuple[dict[str, str], float]) -> FleetSnapshot:
    rows = hosts_from([_vector(*HOST_BASE), _vector(*tops)], 2.0)
    return FleetSnapshot(2.0, "http://prom", tuple(rows), 0.0, None)


def test_top_containers_name_pod_slash_container() -> None:
    snapshot = _hosts(
        _top(4 * GIB, container="server", pod="infer-a", namespace="serving"),
        _top(2 * GIB, container="server", pod="infer-b", namespace="serving"),
        _top(1 * GIB, container="trainer"),
    )
    (row,) = snapshot.hosts
    assert row.top == (
        TopContainer("server", 4 * GIB, "infer-a", "serving"),
        TopContainer("server", 2 * GIB, "infer-b", "serving"),
        TopContainer("trainer", 1 * GIB),
    )
    assert top(row) == "infer-a/server 4.0GiB, infer-b/server 2.0GiB, trainer 1.0GiB"
    assert "infer-a/server 4.0GiB, infer-b/server 2.0GiB" in to_text(snapshot)
    assert host_json(row)["top_containers"] == [
        {"name": "server", "pod": "infer-a", "namespace": "serving", "gpu_memory_bytes": 4 * GIB},
        {"name": "server", "pod": "infer-b", "namespace": "serving", "gpu_memory_bytes": 2 * GIB},
        {"name": "trainer", "pod": None, "namespace": None, "gpu_memory_bytes": 1 * GIB},
    ]


def test_hostile_top_container_labels_are_sanitised_and_bounded() -> None:
    snapshot = _hosts(_top(4 * GIB, container=EVIL, pod=EVIL, namespace=EVIL))
    (row,) = snapshot.hosts
    (t,) = row.top
    assert len(t.pod) <= LABEL_LIMIT and len(t.namespace) <= LABEL_LIMIT
    assert _plain(t.shown) and _plain(top(row))
    assert all(_plain(line) for line in to_text(snapshot).splitlines())


def test_the_filter_finds_a_host_by_pod_and_namespace() -> None:
    snapshot = _hosts(_top(4 * GIB, container="server", pod="infer-a", namespace="serving"))
    rows = list(snapshot.hosts)
    assert filtered(rows, "INFER-A") == rows
    assert filtered(rows, "serving") == rows
    assert filtered(rows, "infer-a/server") == rows
    assert filtered(rows, "infer-b") == []


def test_the_queries_group_containers_by_namespace_pod_and_name() -> None:
    queries = host_queries("")
    for field in ("containers", "top"):
        assert "namespace, pod, container" in queries[field]
    assert "sum by (namespace, pod, container)" in host_history("", INSTANCE)
