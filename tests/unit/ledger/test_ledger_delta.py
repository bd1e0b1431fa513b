"""Structural deltas: applied, they give back the new record byte for byte; hostile ones fail."""

from __future__ import annotations

import json
import random
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.ledger.delta import MAX_DEPTH, DeltaError, apply, diff
from gputui.ledger.timeline import DELTA, decode_record, encode_record
from gputui.recording.codec import SerializeError

_COMPACT = (",", ":")

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([0, 0.0, -0.0, 1, 1.0, True, False, "", "0"])
    | st.text(max_size=8)
)
keys = st.sampled_from(["pid", "id", "index", "uuid", "name", "a", "b", "info", "sample"])
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(keys | st.text(max_size=4), inner),
    max_leaves=40,
)


def _dump(value: Any) -> bytes:
    return json.dumps(value, separators=_COMPACT).encode()


def _roundtrip(old: Any, new: Any) -> None:
    before, after = json.loads(_dump(old)), json.loads(_dump(new))
    frozen = _dump(before)
    delta = json.loads(_dump(diff(before, after)))  # as stored: through JSON text
    assert _dump(apply(before, delta)) == _dump(new)
    assert _dump(before) == frozen  # the old record is left as it was


def _mutate(value: Any, rng: random.Random, depth: int = 0) -> Any:
    """``value`` with what moves between two snapshots moved: figures, keys, items."""
    roll = rng.random()
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if rng.random() < 0.1:
                continue  # a key went
            out[key] = _mutate(item, rng, depth + 1)
        if rng.random() < 0.2:
            out[rng.choice(["new", "pid", "x"])] = rng.randrange(10)  # a key came (or moved last)
        if rng.random() < 0.1:
            out = dict(reversed(list(out.items())))  # keys in another order
        return out
    if isinstance(value, list):
        items = [_mutate(item, rng, depth + 1) for item in value if rng.random() > 0.1]
        if rng.random() < 0.2:
            items.insert(rng.randrange(len(items) + 1), {"pid": rng.randrange(5), "v": 1})
        if rng.random() < 0.1:
            rng.shuffle(items)
        return items
    if roll < 0.3:
        return rng.choice([value, 0, 0.0, -0.0, 1, 1.0, True, None, "s", [value], {"k": value}])
    return value


@settings(max_examples=400)
@given(json_values, json_values)
def test_any_two_json_values_give_the_new_one_back_exactly(old: Any, new: Any) -> None:
    _roundtrip(old, new)


@settings(max_examples=400)
@given(json_values, st.randoms(use_true_random=False))
def test_a_moved_value_gives_the_new_one_back_exactly(old: Any, rng: random.Random) -> None:
    new = _mutate(old, rng)
    _roundtrip(old, new)
    _roundtrip({"snapshot": {"processes": [old, new]}}, {"snapshot": {"processes": [new, old]}})


@settings(max_examples=200)
@given(st.lists(json_values, min_size=1, max_size=8), st.randoms(use_true_random=False))
def test_a_chain_of_blobs_decodes_to_each_records_json(
    firsts: list[Any], rng: random.Random
) -> None:
    # What the encoder writes, from a whole record on; each decoded as a replay does.
    records = [{"v": 1, "snapshot": firsts[0]}]
    for first in firsts[1:]:
        records.append(_mutate(rng.choice([first, records[-1]]), rng))
    state: tuple[bytes, Any, bytes] | None = None
    previous: tuple[Any, bytes] | None = None
    for i, record in enumerate(records):
        raw = _dump(record)
        blob, previous = encode_record(raw, previous if i else None)
        assert blob.startswith(DELTA) == (i > 0)
        state = decode_record(blob, i == 0, state)
        assert state[0] == raw
        if rng.random() < 0.5:  # a replay that starts from its cache has the JSON only
            state = (state[0], None, state[2])


def test_objects_in_a_list_are_matched_by_identity_not_position() -> None:
    procs = [{"sample": {"pid": p, "mem": 1000 + p}, "info": {"cmd": "x" * 200}} for p in range(50)]
    moved = [dict(p) for p in procs[1:]]  # the first exited: every item moves up one place
    moved.insert(20, {"sample": {"pid": 99, "mem": 5}, "info": {"cmd": "new"}})
    delta = diff({"processes": procs}, {"processes": moved})
    assert len(_dump(delta)) < 200, delta
    _roundtrip({"processes": procs}, {"processes": moved})


def test_nothing_changed_is_an_empty_delta() -> None:
    record = {"v": 1, "snapshot": {"gpus": [{"index": 0, "power_w": 1.5}], "x": [1, 2]}}
    assert diff(record, json.loads(_dump(record))) == {"d": {}}
    assert diff({"a": 0.0}, {"a": -0.0}) == {"d": {"a": -0.0}}
    assert diff({"a": 1}, {"a": 1.0}) == {"d": {"a": 1.0}}
    assert diff({"a": 1}, {"a": True}) == {"d": {"a": True}}
    assert diff({"a": [1]}, {"a": {"b": 1}}) == {"d": {"a": [{"b": 1}]}}


def _deep(depth: int) -> Any:
    node: Any = [1]
    for _ in range(depth):
        node = {"d": {"a": node}}
    return node


def _nested(depth: int) -> Any:
    node: Any = 1
    for _ in range(depth):
        node = {"a": node}
    return node


@pytest.mark.parametrize(
    ("old", "delta", "needle"),
    [
        ({"a": 1}, [1, 2], "list of one"),
        ({"a": 1}, {"d": [], "x": []}, "not an object"),
        ({"a": 1}, {"q": 1}, "one of d, p, l"),
        ({"a": 1}, {"d": {}, "p": []}, "one of d, p, l"),
        ({"a": 1}, {"d": {}, "x": "a"}, "not an object"),
        ({"a": 1}, {"d": {}, "x": ["b"]}, "removes a key"),
        ({"a": 1}, {"d": {"a": [2]}, "x": ["a"]}, "removes a key"),
        ({"a": 1}, {"d": {"b": {"d": {}}}}, "does not hold"),
        ({"a": [1, 2]}, {"d": {"a": {"p": [[5, [1]]]}}}, "past a list"),
        ({"a": [1, 2]}, {"d": {"a": {"p": [[0, [1]], [-1, [1]]]}}}, "negative"),
        ({"a": [1, 2]}, {"d": {"a": {"p": [[True, [1]]]}}}, "past a list"),
        ({"a": [1, 2]}, {"d": {"a": {"p": [1]}}}, "[skip, node]"),
        ({"a": [[1] * 1000]}, {"d": {"a": {"l": [0, -1, -1, -1]}}}, "twice"),
        ({"a": [1, 2]}, {"d": {"a": {"l": [3]}}}, "past a list"),
        ({"a": 1}, {"d": {"a": {"l": [0]}}}, "not a list"),
        ({"a": 1}, {"d": {"a": {"p": []}}}, "not a list"),
        (_nested(MAX_DEPTH + 5), _deep(MAX_DEPTH + 5), "deeper"),
    ],
)
def test_a_hostile_delta_is_refused(old: Any, delta: Any, needle: str) -> None:
    with pytest.raises(DeltaError) as caught:
        apply(old, delta)
    assert needle in str(caught.value)
    assert len(str(caught.value)) <= 200 and "\n" not in str(caught.value)


def test_a_change_deeper_than_the_limit_is_written_whole_and_applies() -> None:
    old: Any = 1
    new: Any = 2
    for _ in range(MAX_DEPTH + 10):
        old, new = {"k": old}, {"k": new}
    delta = diff(old, new)
    assert _dump(apply(old, delta)) == _dump(new)


def test_neither_a_delta_nor_what_it_makes_outgrows_the_record_limit() -> None:
    # Small compressed, each: a delta past the limit itself, and one that makes a record past it.
    raw = _dump({"v": 1, "snapshot": {"a": "y" * (10 * 1024**2)}})
    state = decode_record(encode_record(raw, None)[0], True, None)
    for text in (17 * 1024**2, 10 * 1024**2):
        big = _dump({"d": {"snapshot": {"d": {"b": ["x" * text]}}}})
        blob = DELTA + zlib.compress(big, 9)
        assert len(blob) < 40_000
        with pytest.raises(SerializeError, match="over 16777216 bytes"):
            decode_record(blob, False, state)


@pytest.mark.parametrize(
    "blob",
    [
        DELTA,
        DELTA + b"not zlib",
        DELTA + zlib.compress(b"not json"),
        DELTA + zlib.compress(b"[" * 100_000 + b"]" * 100_000),
        DELTA + zlib.compress(_dump({"d": {"v": {"l": [0]}}}))[:-6],
        DELTA + zlib.compress(_dump({"d": {"v": {"l": [0]}}})),
        b"\x02" + zlib.compress(b"{}"),
    ],
)
def test_a_damaged_or_hostile_blob_is_one_serialize_error(blob: bytes) -> None:
    raw = _dump({"v": 1, "snapshot": {"a": 1}})
    state = decode_record(encode_record(raw, None)[0], True, None)
    with pytest.raises(SerializeError) as caught:
        decode_record(blob, False, state)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 300
