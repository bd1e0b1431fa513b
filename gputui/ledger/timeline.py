"""The store's timeline: compact snapshots to replay, and the containers' lifecycle events.

Every :data:`EVERY_S` seconds the writer keeps one snapshot in the store: the recording codec's
record (:func:`gputui.recording.codec.snapshot_to_record`) as the structural delta from the
previous kept record (:mod:`gputui.ledger.delta`: what changed, by key and by identity),
compressed with zlib using the previous record's delta (or, after a whole record, its JSON) as
the preset dictionary: consecutive deltas name the same fields. Every :data:`KEY_EVERY`-th
record is whole, compressed alone: a replay decodes from the nearest such record before the
point it shows, at most :data:`KEY_EVERY` records. The timeline keeps
:data:`~gputui.ledger.store.TIMELINE_KEEP_S` (7 days): what happened to a container at 03:00
last night, not a year of snapshots.

A stored record (a blob) is one of:

* a whole record: the record's JSON, zlib-compressed alone (its first byte is zlib's, ``x``);
* a delta (:data:`DELTA`, then zlib with the preset dictionary above);
* a delta as gputui wrote it before deltas were structural: the whole record's JSON,
  zlib-compressed with the previous record's JSON as the preset dictionary (zlib's first byte
  too, but in a row not marked whole). Such stores still replay. That helped only while a
  record fit zlib's 32 KB window: a busy host's record of 150 KB compressed no better than
  alone.

Sizes (``python -m bench.timeline_cost``) are in docs/ledger.md.

Lifecycle events (``start``, ``die`` with its exit code, ``oom`` for an OOM kill, ``restart``,
``remove``) come from consecutive snapshots: a status, an ``OOMKilled`` flag or a restart count
that changed, a container that came or went.
"""

from __future__ import annotations

import json
import threading
import zlib
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any, overload

from gputui.ledger.delta import DeltaError, apply, diff
from gputui.ledger.quantities import container_subject
from gputui.ledger.store import LifecycleEvent, Store, StoreError
from gputui.model.snapshot import ContainerUsage, Snapshot
from gputui.recording.codec import SerializeError, snapshot_from_record, snapshot_to_record
from gputui.recording.writer import RecordingError

#: Seconds between two snapshots kept in the timeline.
EVERY_S = 10.0
#: Every this many kept snapshots, one is whole (the rest name what did not change).
KEY_EVERY = 30
#: The most a stored record may decompress to (a hostile or damaged store is not inflated).
MAX_RECORD_BYTES = 16 * 1024**2
#: Decoded snapshots a replay keeps at hand (stepping back and forth decodes nothing again).
CACHE_SNAPSHOTS = 64
#: The first byte of a structural delta (a zlib stream's first byte is never this).
DELTA = b"\x01"
#: The zlib level of every record (6: 9 is slower for a few bytes less).
LEVEL = 6

_COMPACT = (",", ":")


def _deflate(data: bytes, dictionary: bytes | None) -> bytes:
    if dictionary is None:
        packer = zlib.compressobj(LEVEL)
    else:
        packer = zlib.compressobj(
            LEVEL, zlib.DEFLATED, 15, 8, zlib.Z_DEFAULT_STRATEGY, zdict=dictionary
        )
    return packer.compress(data) + packer.flush()


class TimelineEncoder:
    """Picks the snapshots the timeline keeps and encodes them (the writer's side)."""

    def __init__(self, every_s: float = EVERY_S, key_every: int = KEY_EVERY) -> None:
        self.every_s = every_s
        self.key_every = key_every
        self._previous_at: float | None = None
        self._previous: tuple[Any, bytes] | None = None
        self._since_key = 0

    def take(self, snapshot: Snapshot) -> tuple[float, bool, bytes] | None:
        """``(t, whole, blob)`` when ``snapshot`` is kept, None when it is skipped.

        ``whole`` marks a record compressed alone (a replay starts inflating there).
        """
        at = self._previous_at
        if at is not None and snapshot.taken_at - at < self.every_s:
            return None
        whole = at is None or self._since_key >= self.key_every - 1
        raw = json.dumps(snapshot_to_record(snapshot), separators=_COMPACT).encode()
        blob, self._previous = encode_record(raw, None if whole else self._previous)
        self._previous_at = snapshot.taken_at
        self._since_key = 0 if whole else self._since_key + 1
        return snapshot.taken_at, whole, blob

    def restart(self) -> None:
        """The next kept record is compressed alone (the ones before it were dropped)."""
        self._previous_at = None


class LifecycleWatch:
    """Lifecycle events between consecutive snapshots (the first one sets the baseline)."""

    def __init__(self) -> None:
        self._seen: dict[str, ContainerUsage] | None = None

    def take(self, snapshot: Snapshot) -> list[LifecycleEvent]:
        """The events between the previous snapshot and ``snapshot``."""
        now = {u.info.id: u for u in snapshot.containers}
        before, self._seen = self._seen, now
        if before is None:
            return []
        t = snapshot.taken_at
        out = []
        for cid, usage in now.items():
            info, old = usage.info, before.get(cid)
            subject = container_subject(usage)
            if old is None:
                if info.running:
                    out.append(LifecycleEvent(t, subject, "start"))
                continue
            was = old.info
            if info.oom_killed and not was.oom_killed:
                out.append(LifecycleEvent(t, subject, "oom", "OOM killed"))
            if was.running and not info.running and info.status in ("exited", "dead"):
                code = f"exit {info.exit_code}" if info.exit_code is not None else info.status
                out.append(LifecycleEvent(t, subject, "die", code))
            elif not was.running and info.running:
                out.append(LifecycleEvent(t, subject, "start"))
            if (info.restart_count or 0) > (was.restart_count or 0):
                out.append(LifecycleEvent(t, subject, "restart", f"restart {info.restart_count}"))
        for cid, usage in before.items():
            if cid not in now:
                out.append(LifecycleEvent(t, container_subject(usage), "remove"))
        return out


def encode_record(
    raw: bytes, previous: tuple[Any, bytes] | None
) -> tuple[bytes, tuple[Any, bytes]]:
    """One record's blob: whole when ``previous`` is None, else its delta from the previous.

    Args:
        raw: The record's JSON.
        previous: What this function gave for the previous record, None for a whole record.

    Returns:
        ``(blob, state)``: the blob, and what the next record is encoded from (this record
        parsed, and the next one's preset dictionary).
    """
    # The delta is taken between parsed JSON on both sides, so that what the decoder rebuilds
    # from its own parse of the previous record is exactly this record's JSON again.
    record = json.loads(raw)
    if previous is None:
        return _deflate(raw, None), (record, raw)
    before, dictionary = previous
    change = json.dumps(diff(before, record), separators=_COMPACT).encode()
    return DELTA + _deflate(change, dictionary), (record, change)


def decode_record(
    blob: bytes, whole: bool, previous: tuple[bytes, Any, bytes] | None
) -> tuple[bytes, Any, bytes]:
    """One blob's record, as ``(JSON, parsed, the next record's preset dictionary)``.

    Args:
        blob: The stored record.
        whole: Whether its row is marked whole.
        previous: What this function gave for the record before (None for a whole one); its
            parsed part may be None, then it is parsed from the JSON.

    Raises:
        SerializeError: damaged, hostile or too large (never more than
            :data:`MAX_RECORD_BYTES` a record).
    """
    if whole or previous is None:
        if not whole:
            raise SerializeError("a timeline delta without the record before it")
        raw = inflate(blob, None)
        return raw, _parse(raw), raw
    raw_before, before, dictionary = previous
    if blob[:1] != DELTA:  # as written before deltas were structural
        raw = inflate(blob, raw_before)
        return raw, _parse(raw), raw
    change = inflate(blob[1:], dictionary)
    if before is None:
        before = _parse(raw_before)
    try:
        record = apply(before, _parse(change))
        raw = json.dumps(record, separators=_COMPACT).encode()
    except DeltaError as exc:
        raise SerializeError(f"damaged timeline record: {exc}") from None
    except (RecursionError, ValueError, TypeError):
        raise SerializeError("damaged timeline record: not JSON") from None
    if len(raw) > MAX_RECORD_BYTES:
        raise SerializeError(f"timeline record over {MAX_RECORD_BYTES} bytes")
    return raw, record, change


def _parse(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        raise SerializeError("timeline record is not JSON") from None


def inflate(blob: bytes, previous: bytes | None) -> bytes:
    """One stored record's JSON, inflated within :data:`MAX_RECORD_BYTES`.

    Args:
        blob: The stored record (zlib).
        previous: The preset dictionary; None for a whole record.

    Raises:
        SerializeError: damaged or too large.
    """
    inflater = zlib.decompressobj() if previous is None else zlib.decompressobj(zdict=previous)
    try:
        raw = inflater.decompress(blob, MAX_RECORD_BYTES)
    except zlib.error as exc:
        raise SerializeError(f"damaged timeline record: {exc}") from None
    if inflater.unconsumed_tail:
        raise SerializeError(f"timeline record over {MAX_RECORD_BYTES} bytes")
    if not inflater.eof:
        raise SerializeError("damaged timeline record: cut short")
    return raw


#: The first bytes of every SQLite file (a ledger store is one).
SQLITE_HEADER = b"SQLite format 3\x00"


class StoreTimeline(Sequence[Snapshot]):
    """The store's timeline as a sequence of snapshots, decoded on demand.

    Index ``i`` is decoded from the whole record at or before it, forward; the last decoded
    snapshots are cached. Records before the first whole one (pruned away) are left out.

    Args:
        store: A store open for reading (kept open while the sequence is used;
            :meth:`close` closes it).
        since: The first time to include.
        until: The time to stop before.

    Raises:
        StoreError: the store cannot be read.
    """

    def __init__(self, store: Store, since: float = 0.0, until: float = float("inf")) -> None:
        self._store = store
        entries = store.timeline_index(since, until)
        first_whole = next((i for i, (_, whole) in enumerate(entries) if whole), len(entries))
        entries = entries[first_whole:]
        self.times: list[float] = [t for t, _ in entries]
        self._whole: list[bool] = [whole for _, whole in entries]
        # A snapshot and what the next record decodes from (its parsed form left out: a
        # busy host's is megabytes, and the JSON parses again in a millisecond).
        self._cache: OrderedDict[int, tuple[Snapshot, tuple[bytes, Any, bytes]]] = OrderedDict()
        self._lock = threading.Lock()
        #: Records that did not decode (a damaged store), replaced by a neighbour.
        self.skipped = 0

    def __len__(self) -> int:
        return len(self.times)

    def close(self) -> None:
        """Release the store."""
        self._store.close()

    @overload
    def __getitem__(self, index: int) -> Snapshot: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Snapshot]: ...

    def __getitem__(self, index: int | slice) -> Snapshot | Sequence[Snapshot]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        with self._lock:
            try:
                return self._decode(index)
            except (SerializeError, StoreError) as exc:
                # The player replaces a snapshot that does not decode by its neighbour.
                raise RecordingError(str(exc)) from None

    def __iter__(self) -> Iterator[Snapshot]:
        for i in range(len(self)):
            yield self[i]

    def _decode(self, index: int) -> Snapshot:
        found = self._cache.get(index)
        if found is not None:
            self._cache.move_to_end(index)
            return found[0]
        start = index
        while start > 0 and not self._whole[start] and (start - 1) not in self._cache:
            start -= 1
        previous = None if self._whole[start] else self._cache[start - 1][1]
        blobs = self._store.timeline_blobs(self.times[start], self.times[index])
        if len(blobs) != index - start + 1:
            raise SerializeError(f"timeline records from {self.times[start]} are missing")
        for i, (_, blob) in zip(range(start, index + 1), blobs, strict=True):
            previous = decode_record(blob, self._whole[i], previous)
            raw, record, dictionary = previous
            self._cache[i] = (snapshot_from_record(record), (raw, None, dictionary))
            self._cache.move_to_end(i)
        while len(self._cache) > CACHE_SNAPSHOTS:
            self._cache.popitem(last=False)
        return self._cache[index][0]
