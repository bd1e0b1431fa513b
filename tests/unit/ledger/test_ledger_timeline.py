"""The store's timeline: snapshots kept every 10 s, replayed exactly; lifecycle events."""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
import sys
import zlib
from dataclasses import replace
from pathlib import Path

import pytest

from gputui.ledger.store import Store
from gputui.ledger.timeline import (
    DELTA,
    KEY_EVERY,
    LifecycleWatch,
    StoreTimeline,
    TimelineEncoder,
    decode_record,
)
from gputui.ledger.writer import LedgerWriter
from gputui.model.containers import ContainerInfo
from gputui.model.settings import Settings
from gputui.model.snapshot import ContainerUsage, HostInfo, Snapshot
from gputui.recording.codec import snapshot_to_record
from gputui.recording.player import ReplayCollector
from gputui.recording.writer import RecordingError
from gputui.wiring.compose import build_collector
from tests.support.factories import busy_host
from tests.support.paths import REPO

T0 = 1_790_000_000.0


def _demo(n: int, step: float = 1.0) -> list[Snapshot]:
    collector = build_collector(Settings(demo=True))
    try:
        first = [collector.collect() for _ in range(n)]
    finally:
        collector.close()
    # The demo's clock is its own: lay the snapshots out from T0 at the given step.
    return [replace(s, taken_at=T0 + i * step) for i, s in enumerate(first)]


def _write(path: Path, snapshots: list[Snapshot]) -> None:
    now = [T0]
    writer = LedgerWriter(path, "test", interval_s=1.0, commit_every_s=60, clock=lambda: now[0])
    for snapshot in snapshots:
        now[0] = snapshot.taken_at
        writer.observe(snapshot)
    writer.close()
    assert writer.error is None, writer.status


def test_every_tenth_second_is_kept_and_replays_exactly_in_any_order(tmp_path: Path) -> None:
    snapshots = _demo(400)
    path = tmp_path / "ledger.sqlite"
    _write(path, snapshots)
    kept = snapshots[::10]
    store = Store.open_reader(path)
    timeline = StoreTimeline(store)
    try:
        assert timeline.times == [s.taken_at for s in kept]
        whole = [w for _, w in store.timeline_index(0, float("inf"))]
        assert whole[0] and whole.count(True) == -(-len(kept) // KEY_EVERY)
        order = list(range(len(kept)))
        random.Random(3).shuffle(order)  # seeks back and forth, as a player does
        for i in order:
            assert timeline[i] == kept[i], i
        assert list(timeline)[-1] == kept[-1]
    finally:
        timeline.close()


def test_a_kept_snapshot_is_at_least_ten_times_smaller_than_a_recording_line(
    tmp_path: Path,
) -> None:
    snapshots = _demo(600)[::10]  # what the timeline keeps: one every 10 s
    encoder = TimelineEncoder(every_s=0)
    stored = sum(len(kept[2]) for s in snapshots if (kept := encoder.take(s)) is not None)
    previous = None
    line = 0
    for s in snapshots:  # what `gputui record` writes for the same snapshots
        line += len(json.dumps(snapshot_to_record(s, previous), separators=(",", ":"))) + 1
        previous = s
    assert line / stored >= 10, (line / len(snapshots), stored / len(snapshots))


def test_a_damaged_record_is_skipped_by_the_player_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    _write(path, _demo(200))
    with sqlite3.connect(path) as conn:
        (t,) = conn.execute("SELECT t FROM timeline ORDER BY t LIMIT 1 OFFSET 5").fetchone()
        conn.execute("UPDATE timeline SET record = ? WHERE t = ?", (b"\x78\x9cnot zlib", t))
    player = ReplayCollector(StoreTimeline(Store.open_reader(path)))
    try:
        player.seek(t)
        assert player.current.taken_at != t  # a neighbour stands in
        assert player.skipped >= 1
    finally:
        player.close()


def _raw(snapshot: Snapshot) -> bytes:
    return json.dumps(snapshot_to_record(snapshot), separators=(",", ":")).encode()


def test_a_busy_hosts_delta_is_a_fraction_of_its_whole_record() -> None:
    # 8 GPUs, 220 processes, 30 containers: a record of about 150 KB, far past zlib's 32 KB
    # window, so the previous record as a preset dictionary saved nothing (a "delta" of
    # 14.1 KB against 14.3 KB alone). Every figure that moves on such a host moves here.
    snapshots = busy_host(8)
    assert len(_raw(snapshots[0])) > 100_000
    encoder = TimelineEncoder(every_s=0)
    blobs = [kept for s in snapshots if (kept := encoder.take(s)) is not None]
    whole = len(blobs[0][2])
    assert blobs[0][1] and not any(w for _, w, _ in blobs[1:])
    deltas = [len(blob) for _, _, blob in blobs[1:]]
    assert max(deltas) < 0.3 * whole, (whole, deltas)
    # Each decodes to the record's JSON, byte for byte.
    state = None
    for snapshot, (_, whole_one, blob) in zip(snapshots, blobs, strict=True):
        state = decode_record(blob, whole_one, state)
        assert state[0] == _raw(snapshot)


def test_a_busy_hosts_timeline_replays_exactly_from_the_store(tmp_path: Path) -> None:
    snapshots = busy_host(KEY_EVERY + 5)  # two whole records, deltas from each
    path = tmp_path / "ledger.sqlite"
    _write(path, snapshots)
    timeline = StoreTimeline(Store.open_reader(path))
    try:
        assert timeline.times == [s.taken_at for s in snapshots]
        order = list(range(len(snapshots)))
        random.Random(5).shuffle(order)
        for i in order:
            assert timeline[i] == snapshots[i], i
        assert timeline.skipped == 0
    finally:
        timeline.close()
    with sqlite3.connect(path) as conn:
        (stored,) = conn.execute("SELECT sum(length(record)) FROM timeline").fetchone()
    # About 3.8 KB a kept snapshot, a whole one every 30th included (14 KB before).
    assert stored / len(snapshots) < 6_000, stored / len(snapshots)


def _legacy(snapshots: list[Snapshot]) -> list[tuple[float, bool, bytes]]:
    """The timeline as gputui wrote it before: zlib, the previous JSON as preset dictionary."""
    out = []
    previous = b""
    for i, snapshot in enumerate(snapshots):
        raw = _raw(snapshot)
        whole = i % KEY_EVERY == 0
        packer = (
            zlib.compressobj(6)
            if whole
            else zlib.compressobj(6, zlib.DEFLATED, 15, 8, zlib.Z_DEFAULT_STRATEGY, previous)
        )
        out.append((snapshot.taken_at, whole, packer.compress(raw) + packer.flush()))
        previous = raw
    return out


def test_a_store_written_before_structural_deltas_still_replays(tmp_path: Path) -> None:
    old = _demo(40, step=10.0)
    path = tmp_path / "ledger.sqlite"
    store = Store.open_writer(path, "test")
    try:
        store.write({}, {}, [], None, timeline=_legacy(old))
    finally:
        store.close()
    # Then this gputui writes on: a whole record first, structural deltas after it.
    new = [replace(s, taken_at=s.taken_at + 1000) for s in _demo(12, step=10.0)]
    _write(path, new)
    timeline = StoreTimeline(Store.open_reader(path))
    try:
        assert len(timeline) == len(old) + len(new)
        for i in reversed(range(len(timeline))):
            assert timeline[i] == [*old, *new][i], i
    finally:
        timeline.close()
    with sqlite3.connect(path) as conn:
        blobs = [bytes(b) for (b,) in conn.execute("SELECT record FROM timeline ORDER BY t")]
    assert not any(b.startswith(DELTA) for b in blobs[: len(old)])
    assert all(b.startswith(DELTA) for b in blobs[len(old) + 1 :])


@pytest.mark.parametrize(
    "blob",
    [
        DELTA + b"not zlib",
        DELTA + zlib.compress(b"\x00" * (64 * 1024**2), 9),  # a bomb: 64 MB from 64 KB
        DELTA + zlib.compress(b"[" * 200_000),
        DELTA + zlib.compress(b'{"d":{"snapshot":{"d":{"gpus":{"l":[0,-1,-1,-1,-1]}}}}}'),
        DELTA + zlib.compress(b'{"d":{"snapshot":{"d":{"processes":{"p":[[99999,[1]]]}}}}}'),
        DELTA,
    ],
    ids=["not-zlib", "bomb", "deep", "item-reused", "past-the-list", "empty"],
)
def test_a_hostile_delta_in_the_store_is_one_line_and_skipped(tmp_path: Path, blob: bytes) -> None:
    path = tmp_path / "ledger.sqlite"
    snapshots = _demo(12, step=10.0)
    _write(path, snapshots)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE timeline SET record = ? WHERE t = ?", (blob, snapshots[5].taken_at))
    timeline = StoreTimeline(Store.open_reader(path))
    try:
        for i in range(5):
            assert timeline[i] == snapshots[i]
        # The damaged one and the deltas after it (they build on it) fail, each in one line.
        for i in range(5, len(snapshots)):
            with pytest.raises(RecordingError) as caught:
                timeline[i]
            message = str(caught.value)
            assert "\n" not in message and len(message) < 300, message
    finally:
        timeline.close()
    player = ReplayCollector(StoreTimeline(Store.open_reader(path)))
    try:
        player.seek(snapshots[7].taken_at)
        assert player.current.taken_at == snapshots[4].taken_at  # the last one that decodes
        assert player.skipped >= 1
    finally:
        player.close()


def _container(name: str, status: str, **kw: object) -> ContainerUsage:
    cid = (name.encode().hex() * 64)[:64]
    return ContainerUsage(ContainerInfo(cid, name, "img", status, **kw))  # type: ignore[arg-type]


def _at(t: float, *containers: ContainerUsage) -> Snapshot:
    return Snapshot(t, "scenario", HostInfo("node"), containers=containers)


def test_lifecycle_events_from_consecutive_snapshots() -> None:
    watch = LifecycleWatch()
    assert watch.take(_at(T0, _container("old", "running"))) == []  # the baseline
    got = watch.take(
        _at(
            T0 + 1,
            _container("old", "running", restart_count=1),
            _container("new", "running"),
            _container("made", "created"),
        )
    )
    assert [(e.subject.name, e.kind, e.detail) for e in got] == [
        ("old", "restart", "restart 1"),
        ("new", "start", ""),
    ]
    got = watch.take(
        _at(
            T0 + 2,
            _container("old", "exited", restart_count=1, exit_code=137, oom_killed=True),
            _container("made", "running"),
        )
    )
    assert [(e.subject.name, e.kind, e.detail) for e in got] == [
        ("old", "oom", "OOM killed"),
        ("old", "die", "exit 137"),
        ("made", "start", ""),
        ("new", "remove", ""),
    ]
    assert all(e.t == T0 + 2 for e in got)


def test_events_are_stored_with_their_container(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    snaps = [
        _at(T0, _container("job", "running")),
        _at(T0 + 10, _container("job", "exited", exit_code=3)),
        _at(T0 + 20),
    ]
    _write(path, snaps)
    store = Store.open_reader(path)
    try:
        events = store.events(0, T0 + 100)
    finally:
        store.close()
    assert [(e.t, e.subject.name, e.kind, e.detail) for e in events] == [
        (T0 + 10, "job", "die", "exit 3"),
        (T0 + 20, "job", "remove", ""),
    ]


def _gputui(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=False,
    )


def test_replay_of_a_store_at_a_time_prints_the_snapshot_then(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    snapshots = _demo(120)
    _write(path, snapshots)
    at = snapshots[55].taken_at  # between two kept snapshots: the one before it is shown
    result = _gputui("replay", str(path), "--at", str(at), "--once", "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["taken_at"].startswith("2026-09-21T")
    shown = snapshots[50]
    listed = [c["name"] for key in ("containers", "other_containers") for c in doc.get(key, [])]
    assert sorted(listed) == sorted(u.info.name for u in shown.containers)
    assert doc["taken_at"] == json.loads(_gputui_at(path, shown.taken_at))["taken_at"]
    # `gputui --replay` takes a store as well.
    again = _gputui("--replay", str(path), "--at", str(at), "--once", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["taken_at"] == doc["taken_at"]


def _gputui_at(path: Path, at: float) -> str:
    result = _gputui("replay", str(path), "--at", str(at), "--once", "--json")
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        ("empty", "has no timeline yet"),
        ("foreign", "not a gputui ledger store"),
    ],
)
def test_a_store_without_a_timeline_or_not_ours_is_one_line(
    tmp_path: Path, make: str, needle: str
) -> None:
    path = tmp_path / "ledger.sqlite"
    if make == "empty":
        Store.open_writer(path, "test").close()
    else:
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE t (x)")
    result = _gputui("replay", str(path), "--once")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], lines
