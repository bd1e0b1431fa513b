"""The lossless Snapshot <-> dict serializer behind recordings, and the contract reader."""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.model import snapshot as model_snapshot
from gputui.model.containers import ContainerInfo
from gputui.model.settings import Settings
from gputui.model.snapshot import Snapshot
from gputui.model.status import HealthCheck, HealthStatus
from gputui.present.json_report import snapshot_to_json
from gputui.recording.codec import (
    FORMAT_VERSION,
    SerializeError,
    encode,
    snapshot_from_record,
    snapshot_from_report,
    snapshot_to_record,
)
from gputui.wiring.compose import build_collector
from tests.support.contract import as_old
from tests.support.paths import FIXTURES

FIXTURE = FIXTURES / "h200-lab-once.json"


def through_json(snapshot: Snapshot, previous: Snapshot | None = None) -> Snapshot:
    line = json.dumps(snapshot_to_record(snapshot, previous), separators=(",", ":"))
    return snapshot_from_record(json.loads(line), previous)


@pytest.fixture(scope="module")
def demo_snapshots() -> list[Snapshot]:
    collector = build_collector(Settings(demo=True), once=True)
    collector.request_health()
    try:
        return [collector.collect() for _ in range(6)]
    finally:
        collector.close()


def test_demo_snapshots_round_trip_exactly(demo_snapshots: list[Snapshot]) -> None:
    previous = None
    for snapshot in demo_snapshots:
        assert through_json(snapshot) == snapshot
        assert through_json(snapshot, previous) == snapshot
        previous = snapshot
    # The demo has everything that makes the round trip hard: enums, unions, nested tuples.
    first = demo_snapshots[0]
    assert first.health and first.containers and first.processes and first.host_stats
    assert any(isinstance(c.info.gpu_request, tuple) for c in first.containers)
    assert any(isinstance(c.info.gpu_request, str) for c in first.containers)


def test_unchanged_top_level_fields_are_not_repeated(demo_snapshots: list[Snapshot]) -> None:
    a, b = demo_snapshots[1], demo_snapshots[2]
    record = snapshot_to_record(b, a)
    assert "health" in record["same"]
    assert "health" not in record["snapshot"]
    assert "gpus" not in record["same"]  # the demo's figures move every refresh
    assert len(json.dumps(record)) < len(json.dumps(snapshot_to_record(b))) * 0.8


def test_types_survive_exactly(demo_snapshots: list[Snapshot]) -> None:
    back = through_json(demo_snapshots[0])
    gpu = back.gpus[0]
    assert type(gpu.power_w) is float
    assert type(gpu.memory_used_bytes) is int
    assert isinstance(back.health[0].status, HealthStatus)
    assert isinstance(back.gpus, tuple) and isinstance(back.sources, dict)


def test_defaults_are_left_out() -> None:
    info = ContainerInfo(id="a" * 64, name="x", image="img", status="running")
    assert encode(info) == {"id": "a" * 64, "name": "x", "image": "img", "status": "running"}


def test_h200_fixture_reads_back_to_the_same_report_and_round_trips() -> None:
    doc = json.loads(FIXTURE.read_text())
    snapshot = snapshot_from_report(doc)
    again = snapshot_to_json(snapshot)
    # The reader loses nothing the contract carries: every key of the report comes back equal
    # (keys added to the contract since it was written come back too, and are not compared).
    assert as_old(again, doc) == doc
    assert through_json(snapshot) == snapshot
    by_pid = {p.pid: p for p in snapshot.processes}
    assert snapshot.container(by_pid[656].container_id or "").info.name == "trainer-a"  # type: ignore[union-attr]
    assert by_pid[774].container_id is None


def test_figures_read_in_turn_keep_their_read_time_through_a_report() -> None:
    doc = json.loads(FIXTURE.read_text())
    doc["processes"][0]["cpu_rss_sampled_at"] = "2026-11-30T10:00:01Z"
    doc["containers"][0]["stats_sampled_at"] = "2026-11-30T10:00:02Z"
    snapshot = snapshot_from_report(doc)
    assert snapshot.processes[0].info.sampled_at is not None
    again = snapshot_to_json(snapshot)
    assert again["processes"][0]["cpu_rss_sampled_at"] == "2026-11-30T10:00:01Z"
    assert again["containers"][0]["stats_sampled_at"] == "2026-11-30T10:00:02Z"
    assert again["processes"][1]["cpu_rss_sampled_at"] is None  # read by that refresh


@pytest.mark.parametrize(
    ("record", "needle"),
    [
        ({"snapshot": {}}, "not a gputui recording line"),
        ({"v": FORMAT_VERSION + 1, "snapshot": {}}, f"format version {FORMAT_VERSION + 1}"),
        ({"v": 1, "snapshot": {"taken_at": 1.0, "mode": "live"}}, "'host'"),
        (
            {"v": 1, "snapshot": {"taken_at": "x", "mode": "live", "host": {"hostname": "h"}}},
            "snapshot.taken_at: expected float",
        ),
        (
            {"v": 1, "snapshot": {"taken_at": 1, "mode": "m", "host": {"hostname": "h", "x": 1}}},
            "unknown field 'x'",
        ),
        (
            {"v": 1, "same": ["health"], "snapshot": {}},
            "it is the first",
        ),
        (
            {
                "v": 1,
                "snapshot": {
                    "taken_at": 1,
                    "mode": "m",
                    "host": {"hostname": "h"},
                    "health": [{"id": "a", "status": "maybe", "summary": "s"}],
                },
            },
            "snapshot.health[0].status",
        ),
    ],
)
def test_bad_records_name_the_problem(record: dict[str, Any], needle: str) -> None:
    with pytest.raises(SerializeError) as info:
        snapshot_from_record(record)
    assert needle in str(info.value)


def test_contract_reader_refuses_other_documents() -> None:
    with pytest.raises(SerializeError, match="not a gputui --once --json"):
        snapshot_from_report({"health": []})


# -- property: any Snapshot the model can hold survives the trip --------------------------------

_TEXT = st.text(max_size=8)  # any code point, lone surrogates included
_FLOAT = st.floats(allow_nan=False, allow_infinity=False)


def _strategy(tp: Any) -> st.SearchStrategy[Any]:
    origin = typing.get_origin(tp)
    if origin is typing.Union or str(origin) == "<class 'types.UnionType'>":
        return st.one_of(*(_strategy(a) for a in typing.get_args(tp)))
    if tp is type(None):
        return st.none()
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return st.lists(_strategy(args[0]), max_size=2).map(tuple)
        return st.tuples(*(_strategy(a) for a in args))
    if origin is dict:
        _, value_tp = typing.get_args(tp)
        return st.dictionaries(_TEXT, _strategy(value_tp), max_size=2)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        fields = {f.name: _strategy(hints[f.name]) for f in dataclasses.fields(tp) if f.init}
        if tp is Snapshot:  # a snapshot's time must be showable (1970 .. 9999)
            fields["taken_at"] = st.floats(0.0, 253402300799.0)
        return st.builds(tp, **fields)
    if isinstance(tp, type) and issubclass(tp, HealthStatus):
        return st.sampled_from(HealthStatus)
    ints = st.integers(-(2**63), 2**64 - 1)  # what any source reports; larger is refused
    return {bool: st.booleans(), int: ints, float: _FLOAT, str: _TEXT}[tp]


@settings(max_examples=60)
@given(_strategy(Snapshot))
def test_any_snapshot_round_trips(snapshot: Snapshot) -> None:
    assert through_json(snapshot) == snapshot


@settings(max_examples=30)
@given(_strategy(HealthCheck), _strategy(HealthCheck))
def test_previous_only_supplies_what_is_named(a: HealthCheck, b: HealthCheck) -> None:
    one = Snapshot(1.0, "live", model_snapshot.HostInfo("h"), health=(a,))
    two = Snapshot(2.0, "live", model_snapshot.HostInfo("h"), health=(b,))
    assert through_json(two, one) == two


@pytest.mark.parametrize("taken_at", ["NaN", "Infinity", "-Infinity", "1e300", "-1"])
def test_a_record_whose_time_cannot_be_shown_is_refused(taken_at: str) -> None:
    # json.loads accepts NaN and Infinity; such a time crashed --once and the TUI's clock.
    body = '"mode":"live","host":{"hostname":"h"}'
    line = '{"v":1,"snapshot":{"taken_at":' + taken_at + "," + body + "}}"
    with pytest.raises(SerializeError, match="taken_at"):
        snapshot_from_record(json.loads(line))
