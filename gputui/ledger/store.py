"""The ledger's store: one SQLite file per host (WAL), written by one gputui at a time.

Layout (``SCHEMA_VERSION`` 2; each version's statements are in :data:`MIGRATIONS`, applied
in order, each in its own transaction, and listed in ``schema_version``):

* ``usage``: per tier, bucket start, device and subject: reserved, occupied and busy
  milliseconds, MiB-seconds and the peak MiB of GPU memory, idle and dynamic millijoules.
  Integers, ``WITHOUT ROWID``: a row is about 40 bytes.
* ``coverage``: per tier and bucket: the wall time credited, device-milliseconds, and the
  energy counters' sum (what the conservation checks compare against).
* ``gaps``: intervals nothing was credited for (nothing ran, a stalled collection), with why.
* ``sessions``: who wrote when (pid, program, first and last committed time).
* ``devices``, ``subjects``: the ids the rows refer to (a subject's owner columns and the
  ``timeline`` and ``events`` tables, from version 2, are for owners and replay over the
  store).

Tiers (:data:`TIERS`): 10 s buckets kept 48 h, 1 min kept 30 days, 1 h kept for ever. Every
increment is added to the three tiers when committed (the roll-up is done on the way in), and
:meth:`Store.prune` drops what a tier no longer keeps. A window is read from the coarsest
buckets inside it and the finest still held at its edges (:meth:`Store.plan`).

One writer: the writer holds an exclusive ``flock`` on ``<store>.lock`` for as long as it
runs; another gputui asking to write is told who writes (:class:`StoreBusyError`) and reads
instead. A store this gputui cannot trust is never written: a file that is not SQLite, a
SQLite file of another program (``application_id``), a store of a newer schema, a failed
integrity check. Every refusal is a :class:`StoreError` with a one-line message.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from gputui.boundary.userfiles import UserFileError, open_user_append, open_user_database
from gputui.ledger.quantities import Amounts, Device, Gap, Subject
from gputui.model.records import record

#: Newest schema this gputui writes (and the newest it reads).
SCHEMA_VERSION = 2
#: ``PRAGMA application_id`` of a gputui store ("GPUT"): another program's SQLite file is refused.
APPLICATION_ID = 0x47505554

#: How long the timeline keeps snapshots, and the lifecycle events their lines.
TIMELINE_KEEP_S = 7 * 86400
EVENTS_KEEP_S = 400 * 86400
#: The most timeline entries (or events) one read returns (7 days at 10 s is 60,480).
MAX_TIMELINE_ROWS = 100_000

#: (tier, bucket seconds, kept seconds or None for ever).
TIERS: tuple[tuple[int, int, int | None], ...] = (
    (0, 10, 48 * 3600),
    (1, 60, 30 * 86400),
    (2, 3600, None),
)

MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "CREATE TABLE devices (id INTEGER PRIMARY KEY, name TEXT NOT NULL,"
        " uuid TEXT NOT NULL DEFAULT '', model TEXT, UNIQUE (name, uuid))",
        "CREATE TABLE subjects (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, key TEXT NOT NULL,"
        " name TEXT NOT NULL, image TEXT, project TEXT, service TEXT, pod TEXT,"
        " UNIQUE (kind, key))",
        "CREATE TABLE usage (tier INTEGER NOT NULL, start INTEGER NOT NULL,"
        " device INTEGER NOT NULL, subject INTEGER NOT NULL,"
        " reserved_ms INTEGER NOT NULL DEFAULT 0, occupied_ms INTEGER NOT NULL DEFAULT 0,"
        " busy_ms INTEGER NOT NULL DEFAULT 0, mem_mib_s INTEGER NOT NULL DEFAULT 0,"
        " mem_peak_mib INTEGER NOT NULL DEFAULT 0, idle_mj INTEGER NOT NULL DEFAULT 0,"
        " dynamic_mj INTEGER NOT NULL DEFAULT 0,"
        " PRIMARY KEY (tier, start, device, subject)) WITHOUT ROWID",
        "CREATE TABLE coverage (tier INTEGER NOT NULL, start INTEGER NOT NULL,"
        " wall_ms INTEGER NOT NULL DEFAULT 0, device_ms INTEGER NOT NULL DEFAULT 0,"
        " energy_mj INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (tier, start)) WITHOUT ROWID",
        "CREATE TABLE gaps (start REAL NOT NULL, end REAL NOT NULL, reason TEXT NOT NULL)",
        "CREATE INDEX gaps_end ON gaps (end)",
        "CREATE TABLE sessions (id INTEGER PRIMARY KEY, pid INTEGER NOT NULL,"
        " program TEXT NOT NULL, started REAL NOT NULL, first REAL, last REAL, ended REAL)",
    ),
    # Owners (the person behind a container) and replay over the store: columns and tables
    # that later work fills, added now so that it needs no migration of its own.
    2: (
        "ALTER TABLE subjects ADD COLUMN owner TEXT",
        "ALTER TABLE subjects ADD COLUMN owner_evidence TEXT",
        "ALTER TABLE subjects ADD COLUMN owner_confidence TEXT",
        "CREATE TABLE timeline (t REAL PRIMARY KEY, full INTEGER NOT NULL,"
        " record BLOB NOT NULL) WITHOUT ROWID",
        "CREATE TABLE events (t REAL NOT NULL, subject INTEGER, kind TEXT NOT NULL, detail TEXT)",
        "CREATE INDEX events_t ON events (t)",
    ),
}


class StoreError(ValueError):
    """A store that cannot be used (as asked); the message is one line naming it."""


class StoreBusyError(StoreError):
    """Another gputui writes the store."""


def default_store_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/gputui/ledger-<host>.sqlite`` (``~/.local/state`` when unset)."""
    env = os.environ if env is None else env
    base = env.get("XDG_STATE_HOME") or ""
    root = (
        Path(base)
        if os.path.isabs(base)
        else Path(env.get("HOME") or "~").expanduser() / ".local" / "state"
    )
    import socket  # late: a one-shot report reads the config, which names this module

    host = "".join(c if c.isalnum() or c in "-_." else "_" for c in socket.gethostname()[:64])
    return root / "gputui" / f"ledger-{host or 'host'}.sqlite"


def lock_path(path: Path) -> Path:
    """The sidecar file whose ``flock`` marks the writer."""
    return path.with_name(path.name + ".lock")


def bucket(t: float, size: int) -> int:
    """The start of the ``size``-second bucket holding time ``t``."""
    return math.floor(t / size) * size


@record
class Session:
    """One writer's run.

    Attributes:
        pid: Its process id.
        program: ``daemon``, ``tui``, ``export``, ``record``...
        started: When it opened the store.
        first: Its first snapshot's time (None: none committed).
        last: The end of the last interval it committed (None: nothing yet).
        ended: When it closed the store (None: still writing, or killed).
    """

    pid: int
    program: str
    started: float
    first: float | None
    last: float | None
    ended: float | None


@record
class UsageRow:
    """One (device, subject) total over a window, as read back.

    Attributes:
        device: The device's name (``0``, ``0:1``).
        uuid: Its UUID (``""`` when unknown).
        model: The GPU model.
        subject: The subject (owner columns included as ``owner``).
        owner: The subject's owner, None until known.
        amounts: The sums.
    """

    device: str
    uuid: str
    model: str | None
    subject: Subject
    owner: str | None
    amounts: Amounts


@record
class LifecycleEvent:
    """A container that started, died, was OOM killed, restarted or was removed.

    Attributes:
        t: When it was seen, seconds since the epoch.
        subject: The container.
        kind: ``start``, ``die``, ``oom``, ``restart`` or ``remove``.
        detail: For people (``exit 137``, ``restart 3``...), or ``""``.
    """

    t: float
    subject: Subject
    kind: str
    detail: str = ""


@record
class Coverage:
    """What a window's buckets cover.

    Attributes:
        wall_s: Wall time credited.
        device_s: Device-seconds credited (devices x wall).
        energy_j: The GPUs' energy counters' sum.
    """

    wall_s: float
    device_s: float
    energy_j: float


class Store:
    """An open store (use :meth:`open_writer` or :meth:`open_reader`)."""

    def __init__(self, path: Path, conn: sqlite3.Connection, lock_fd: int | None) -> None:
        self.path = path
        self.conn = conn
        self._lock_fd = lock_fd
        self._devices: dict[Device, int] = {}
        self._subjects: dict[Subject, int] = {}
        self.session_id: int | None = None

    @property
    def writable(self) -> bool:
        """True for the writer."""
        return self._lock_fd is not None

    # -- opening --------------------------------------------------------------------------

    @classmethod
    def open_writer(cls, path: Path, program: str) -> Store:
        """Take the writer's lock and open (creating or upgrading) the store.

        Raises:
            StoreBusyError: another gputui writes it.
            StoreError: it cannot be created, opened, trusted or upgraded.
        """
        directory = path.parent
        if not directory.is_dir():
            try:
                directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"cannot write ledger store {path}: {exc.strerror or exc}"
                ) from None
        try:
            lock_fd = open_user_append(lock_path(path), "ledger lock")
        except UserFileError as exc:
            raise StoreError(str(exc)) from None
        try:
            try:
                fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise StoreBusyError(
                    f"ledger store {path} is written by another gputui{_writer_of(path)}"
                ) from None
            try:
                conn = open_user_database(path, "ledger store", write=True)
            except UserFileError as exc:
                raise StoreError(str(exc)) from None
            store = cls(path, conn, lock_fd)
            try:
                store._prepare_for_writing()
                store._begin_session(program)
            except BaseException:
                conn.close()
                raise
            return store
        except BaseException:
            os.close(lock_fd)
            raise

    @classmethod
    def open_reader(cls, path: Path) -> Store:
        """Open the store read-only.

        Raises:
            StoreError: missing, unreadable, not a gputui store, or of a newer schema.
        """
        if not os.path.lexists(path):
            raise StoreError(f"cannot read ledger store {path}: No such file or directory")
        try:
            conn = open_user_database(path, "ledger store", write=False)
        except UserFileError as exc:
            raise StoreError(str(exc)) from None
        store = cls(path, conn, None)
        try:
            try:
                version = store._check("read")
            except StoreError:
                if os.path.lexists(path.with_name(path.name + "-wal")):
                    raise
                # No writer, and the shared-memory file a WAL reader needs cannot be made (a
                # read-only file system): read it as the unchanging file it is.
                conn.close()
                try:
                    conn = open_user_database(path, "ledger store", write=False, immutable=True)
                except UserFileError as exc:
                    raise StoreError(str(exc)) from None
                store = cls(path, conn, None)
                version = store._check("read")
            if version == 0:
                raise StoreError(f"cannot read ledger store {path}: it is empty")
        except BaseException:
            conn.close()
            raise
        return store

    def _check(self, verb: str) -> int:
        """The store's schema version (0: an empty file); refuses what is not a gputui store."""
        try:
            app_id = self.conn.execute("PRAGMA application_id").fetchone()[0]
            tables = self.conn.execute(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
            ).fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"cannot {verb} ledger store {self.path}: not a usable SQLite file ({exc})"
            ) from None
        if app_id == 0 and tables == 0:
            return 0
        if app_id != APPLICATION_ID:
            raise StoreError(
                f"cannot {verb} ledger store {self.path}: a SQLite file of another program"
                " (not a gputui ledger store); name another file"
            )
        try:
            row = self.conn.execute("SELECT max(version) FROM schema_version").fetchone()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot {verb} ledger store {self.path}: {exc}") from None
        version = int(row[0] or 0)
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"cannot {verb} ledger store {self.path}: written by a newer gputui (schema"
                f" {version}; this one knows up to {SCHEMA_VERSION}); upgrade gputui"
            )
        return version

    def _prepare_for_writing(self) -> None:
        version = self._check("write")
        try:
            if version:
                # A store cut short or damaged is never written over (nothing in it is lost).
                result = self.conn.execute("PRAGMA quick_check(1)").fetchone()[0]
                if result != "ok":
                    raise StoreError(
                        f"cannot write ledger store {self.path}: damaged ({result}); move it"
                        " away to start a new one"
                    )
            mode = self.conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"cannot write ledger store {self.path}: no WAL ({mode})")
            # A crash (kill -9) loses nothing committed in WAL mode with NORMAL; a power cut
            # may lose the last commits, never the file.
            self.conn.execute("PRAGMA synchronous = NORMAL")
            migrate(self.conn, SCHEMA_VERSION)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot write ledger store {self.path}: {exc}") from None

    def _begin_session(self, program: str) -> None:
        now = time.time()
        with self.transaction():
            # A writer killed before it could close: it ended at its last commit.
            self.conn.execute(
                "UPDATE sessions SET ended = coalesce(last, started) WHERE ended IS NULL"
            )
            cur = self.conn.execute(
                "INSERT INTO sessions (pid, program, started) VALUES (?, ?, ?)",
                (os.getpid(), program[:40], now),
            )
        self.session_id = cur.lastrowid

    def close(self) -> None:
        """End the session (a writer's), close the file and release the lock."""
        if self.session_id is not None:
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute(
                    "UPDATE sessions SET ended = ? WHERE id = ?", (time.time(), self.session_id)
                )
            self.session_id = None
        self.conn.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # -- writing --------------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on an exception)."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def last_written(self) -> float | None:
        """The end of the last interval any writer committed (None: none)."""
        row = self.conn.execute("SELECT max(last) FROM sessions").fetchone()
        return None if row[0] is None else float(row[0])

    def _device_id(self, device: Device) -> int:
        found = self._devices.get(device)
        if found is None:
            uuid = device.uuid or ""
            self.conn.execute(
                "INSERT INTO devices (name, uuid, model) VALUES (?, ?, ?)"
                " ON CONFLICT (name, uuid) DO UPDATE SET model = excluded.model",
                (device.name, uuid, device.model),
            )
            found = self.conn.execute(
                "SELECT id FROM devices WHERE name = ? AND uuid = ?", (device.name, uuid)
            ).fetchone()[0]
            self._devices[device] = found
        return found

    def _subject_id(self, subject: Subject) -> int:
        found = self._subjects.get(subject)
        if found is None:
            # A renamed container keeps its id: the newest name, image and labels win.
            self.conn.execute(
                "INSERT INTO subjects (kind, key, name, image, project, service, pod, owner,"
                " owner_confidence, owner_evidence) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (kind, key) DO UPDATE SET"
                " name = excluded.name, image = excluded.image, project = excluded.project,"
                " service = excluded.service, pod = excluded.pod,"
                # An owner once known is not forgotten when a later read cannot tell.
                " owner = coalesce(excluded.owner, owner),"
                " owner_confidence = CASE WHEN excluded.owner IS NULL THEN owner_confidence"
                " ELSE excluded.owner_confidence END,"
                " owner_evidence = CASE WHEN excluded.owner IS NULL THEN owner_evidence"
                " ELSE excluded.owner_evidence END",
                (
                    subject.kind,
                    subject.key,
                    subject.name,
                    subject.image,
                    subject.project,
                    subject.service,
                    subject.pod,
                    subject.owner,
                    subject.owner_confidence,
                    subject.owner_evidence,
                ),
            )
            found = self.conn.execute(
                "SELECT id FROM subjects WHERE kind = ? AND key = ?", (subject.kind, subject.key)
            ).fetchone()[0]
            self._subjects[subject] = found
        return found

    def write(
        self,
        rows: Mapping[tuple[int, Device, Subject], Amounts],
        coverage: Mapping[int, tuple[float, float, float]],
        gaps: Sequence[Gap],
        last: float | None,
        first: float | None = None,
        timeline: Sequence[tuple[float, bool, bytes]] = (),
        events: Sequence[LifecycleEvent] = (),
    ) -> None:
        """Add increments to every tier, in one transaction.

        Args:
            rows: (10-second bucket start, device, subject) -> the amounts to add.
            coverage: 10-second bucket start -> (wall s, device s, counter energy J) to add.
            gaps: Gaps to record.
            last: The end of the last interval in ``rows`` (the session's progress).
            first: The session's first snapshot (kept from the first commit that gives it).
            timeline: ``(t, whole, compressed record)`` snapshots to keep
                (:mod:`gputui.ledger.timeline`).
            events: Containers' lifecycle events.

        Raises:
            sqlite3.Error: the write failed (nothing of it is in the store).
        """
        with self.transaction():
            ids: dict[tuple[Device, Subject], tuple[int, int]] = {}
            for _, device, subject in rows:
                if (device, subject) not in ids:
                    ids[(device, subject)] = (self._device_id(device), self._subject_id(subject))
            for tier, size, _ in TIERS:
                merged: dict[tuple[int, int, int], Amounts] = {}
                for (start, device, subject), amounts in rows.items():
                    d, s = ids[(device, subject)]
                    key = (bucket(start, size), d, s)
                    into = merged.get(key)
                    if into is None:
                        into = merged[key] = Amounts()
                    into.add(amounts)
                self.conn.executemany(
                    "INSERT INTO usage VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (tier, start, device, subject) DO UPDATE SET"
                    " reserved_ms = reserved_ms + excluded.reserved_ms,"
                    " occupied_ms = occupied_ms + excluded.occupied_ms,"
                    " busy_ms = busy_ms + excluded.busy_ms,"
                    " mem_mib_s = mem_mib_s + excluded.mem_mib_s,"
                    " mem_peak_mib = max(mem_peak_mib, excluded.mem_peak_mib),"
                    " idle_mj = idle_mj + excluded.idle_mj,"
                    " dynamic_mj = dynamic_mj + excluded.dynamic_mj",
                    [(tier, start, d, s, *_encode(a)) for (start, d, s), a in merged.items()],
                )
                cover: dict[int, list[float]] = {}
                for start, (wall, device_s, energy) in coverage.items():
                    into_c = cover.setdefault(bucket(start, size), [0.0, 0.0, 0.0])
                    into_c[0] += wall
                    into_c[1] += device_s
                    into_c[2] += energy
                self.conn.executemany(
                    "INSERT INTO coverage VALUES (?, ?, ?, ?, ?) ON CONFLICT (tier, start)"
                    " DO UPDATE SET wall_ms = wall_ms + excluded.wall_ms,"
                    " device_ms = device_ms + excluded.device_ms,"
                    " energy_mj = energy_mj + excluded.energy_mj",
                    [
                        (tier, start, round(w * 1e3), round(ds * 1e3), round(e * 1e3))
                        for start, (w, ds, e) in cover.items()
                    ],
                )
            self.conn.executemany(
                "INSERT INTO gaps VALUES (?, ?, ?)", [(g.start, g.end, g.reason) for g in gaps]
            )
            self.conn.executemany(
                "INSERT OR REPLACE INTO timeline VALUES (?, ?, ?)",
                [(t, int(whole), blob) for t, whole, blob in timeline],
            )
            self.conn.executemany(
                "INSERT INTO events VALUES (?, ?, ?, ?)",
                [(e.t, self._subject_id(e.subject), e.kind, e.detail) for e in events],
            )
            if last is not None and self.session_id is not None:
                self.conn.execute(
                    "UPDATE sessions SET last = ?, first = coalesce(first, ?) WHERE id = ?",
                    (last, first, self.session_id),
                )

    def prune(self, now: float) -> int:
        """Drop what each tier, the timeline and the events no longer keep; the rows dropped."""
        dropped = 0
        with self.transaction():
            for table, keep_s in (("timeline", TIMELINE_KEEP_S), ("events", EVENTS_KEEP_S)):
                cur = self.conn.execute(f"DELETE FROM {table} WHERE t < ?", (now - keep_s,))
                dropped += max(0, cur.rowcount)
            for tier, _, kept in TIERS:
                if kept is None:
                    continue
                for table in ("usage", "coverage"):
                    cur = self.conn.execute(
                        f"DELETE FROM {table} WHERE tier = ? AND start < ?",
                        (tier, int(now - kept)),
                    )
                    dropped += max(0, cur.rowcount)
        return dropped

    # -- reading --------------------------------------------------------------------------

    def _read(self, sql: str, params: Sequence[object] = (), *, one: bool = False) -> Any:
        """The rows of a read (the first row with ``one``).

        Raises:
            StoreError: the store cannot be read (damaged), one line naming it.
        """
        try:
            cursor = self.conn.execute(sql, params)
            return cursor.fetchone() if one else cursor.fetchall()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot read ledger store {self.path}: {exc}") from None

    @staticmethod
    def plan(since: float, until: float, now: float) -> list[tuple[int, int, int]]:
        """The bucket ranges a window is read from: ``(tier, first start, end)`` each.

        The coarsest buckets that fit wholly inside the window, and at its ragged edges the
        next finer tier that still holds them, down to 10 s: a 7-day window reads 168 hour
        rows per pair and a few hundred finer ones at its ends, not 10,080 minute rows, and
        its edges are as exact as the store still is. An edge no finer tier holds any more
        is read from the coarser tier's bucket around it (the window grows to that bucket).
        The ranges never overlap: each increment is counted once.
        """
        out: list[tuple[int, int, int]] = []

        def holds(level: int, t: float) -> bool:
            _, size, kept = TIERS[level]
            return kept is None or t >= now - kept + size

        def cover(lo: float, hi: float, level: int) -> None:
            tier, size, _ = TIERS[level]
            inner_lo, inner_hi = -(-int(lo) // size) * size, int(hi) // size * size
            edges = [(lo, hi)]
            if inner_lo < inner_hi:
                out.append((tier, inner_lo, inner_hi))
                edges = [(lo, inner_lo), (inner_hi, hi)]
            for edge_lo, edge_hi in edges:
                if edge_lo >= edge_hi:
                    continue
                if level > 0 and holds(level - 1, edge_lo):
                    cover(edge_lo, edge_hi, level - 1)
                else:
                    out.append((tier, bucket(edge_lo, size), math.ceil(edge_hi)))

        if until > since:
            cover(since, until, len(TIERS) - 1)
        return out

    def _ranges(self, since: float, until: float, now: float | None) -> tuple[str, list[int]]:
        """The ``WHERE`` of :meth:`plan`'s ranges, and its parameters (``u.`` columns)."""
        ranges = self.plan(since, until, time.time() if now is None else now)
        if not ranges:
            return "0", []
        where = " OR ".join(["(tier = ? AND start >= ? AND start < ?)"] * len(ranges))
        return where, [value for r in ranges for value in r]

    def usage(self, since: float, until: float, now: float | None = None) -> list[UsageRow]:
        """Every (device, subject) total over ``[since, until)`` (the buckets of :meth:`plan`).

        Raises:
            StoreError: the store cannot be read (damaged).
        """
        where, params = self._ranges(since, until, now)
        rows = self._read(
            "SELECT d.name, d.uuid, d.model, s.kind, s.key, s.name, s.image, s.project,"
            " s.service, s.pod, s.owner, sum(u.reserved_ms), sum(u.occupied_ms),"
            " sum(u.busy_ms), sum(u.mem_mib_s), max(u.mem_peak_mib), sum(u.idle_mj),"
            " sum(u.dynamic_mj) FROM (SELECT * FROM usage WHERE " + where + ") u"
            " JOIN devices d ON d.id = u.device JOIN subjects s ON s.id = u.subject"
            " GROUP BY u.device, u.subject",
            params,
        )
        out = []
        for r in rows:
            subject = Subject(r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10])
            amounts = Amounts(
                reserved_s=r[11] / 1e3,
                occupied_s=r[12] / 1e3,
                busy_s=r[13] / 1e3,
                mem_gib_s=r[14] / 1024.0,
                mem_peak_bytes=int(r[15]) * 1024**2,
                idle_j=r[16] / 1e3,
                dynamic_j=r[17] / 1e3,
            )
            out.append(UsageRow(r[0], r[1], r[2], subject, r[10], amounts))
        return out

    def series(self, since: float, until: float, slot_s: int) -> list[tuple[int, UsageRow]]:
        """Busy and reserved time per ``slot_s``-second slot (a day, an hour), from the hour tier.

        For sparklines: the hour tier keeps everything and a 30-day window has 720 rows per
        pair. Slot ``i`` is ``[since + i x slot_s, since + (i + 1) x slot_s)``, to the hour.

        Raises:
            StoreError: the store cannot be read (damaged).
        """
        slot_s = max(3600, int(slot_s))
        lo = bucket(since, 3600)
        rows = self._read(
            "SELECT (u.start - ?) / ?, d.name, d.uuid, d.model, s.kind, s.key, s.name,"
            " s.image, s.project, s.service, s.pod, s.owner, sum(u.reserved_ms),"
            " sum(u.busy_ms) FROM usage u JOIN devices d ON d.id = u.device"
            " JOIN subjects s ON s.id = u.subject"
            " WHERE u.tier = 2 AND u.start >= ? AND u.start < ?"
            " GROUP BY 1, u.device, u.subject",
            (lo, slot_s, lo, until),
        )
        out = []
        for r in rows:
            subject = Subject(r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11])
            amounts = Amounts(reserved_s=r[12] / 1e3, busy_s=r[13] / 1e3)
            out.append((int(r[0]), UsageRow(r[1], r[2], r[3], subject, r[11], amounts)))
        return out

    def coverage(self, since: float, until: float, now: float | None = None) -> Coverage:
        """What the buckets of ``[since, until)`` cover (see :meth:`usage`)."""
        where, params = self._ranges(since, until, now)
        row = self._read(
            "SELECT coalesce(sum(wall_ms), 0), coalesce(sum(device_ms), 0),"
            " coalesce(sum(energy_mj), 0) FROM coverage WHERE " + where,
            params,
            one=True,
        )
        return Coverage(row[0] / 1e3, row[1] / 1e3, row[2] / 1e3)

    def timeline_index(self, since: float, until: float) -> list[tuple[float, bool]]:
        """``(t, whole)`` of the timeline's snapshots in ``[since, until)``, oldest first.

        Raises:
            StoreError: the store cannot be read (damaged).
        """
        rows = self._read(
            "SELECT t, full FROM timeline WHERE t >= ? AND t < ? ORDER BY t LIMIT ?",
            (since, until, MAX_TIMELINE_ROWS),
        )
        return [(float(t), bool(full)) for t, full in rows]

    def timeline_blobs(self, first: float, last: float) -> list[tuple[float, bytes]]:
        """The compressed records from time ``first`` to ``last`` included, oldest first.

        Raises:
            StoreError: the store cannot be read (damaged).
        """
        rows = self._read(
            "SELECT t, record FROM timeline WHERE t >= ? AND t <= ? ORDER BY t LIMIT ?",
            (first, last, MAX_TIMELINE_ROWS),
        )
        return [(float(t), bytes(blob)) for t, blob in rows if isinstance(blob, bytes)]

    def events(self, since: float, until: float) -> list[LifecycleEvent]:
        """The containers' lifecycle events in ``[since, until)``, oldest first.

        Raises:
            StoreError: the store cannot be read (damaged).
        """
        rows = self._read(
            "SELECT e.t, s.kind, s.key, s.name, s.image, s.project, s.service, s.pod,"
            " s.owner, e.kind, e.detail FROM events e JOIN subjects s ON s.id = e.subject"
            " WHERE e.t >= ? AND e.t < ? ORDER BY e.t LIMIT ?",
            (since, until, MAX_TIMELINE_ROWS),
        )
        return [
            LifecycleEvent(
                float(r[0]),
                Subject(r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8]),
                str(r[9]),
                str(r[10] or ""),
            )
            for r in rows
        ]

    def gaps(self, since: float, until: float) -> list[Gap]:
        """The gaps overlapping ``[since, until)``, oldest first."""
        rows = self._read(
            "SELECT start, end, reason FROM gaps WHERE end > ? AND start < ? ORDER BY start",
            (since, until),
        )
        return [Gap(float(a), float(b), str(c)) for a, b, c in rows]

    def sessions(self) -> list[Session]:
        """Every writer's run, oldest first."""
        rows = self._read(
            "SELECT pid, program, started, first, last, ended FROM sessions ORDER BY id"
        )
        return [Session(int(p), str(g), float(s), f, la, e) for p, g, s, f, la, e in rows]

    def schema_version(self) -> int:
        """The store's schema version."""
        return int(self.conn.execute("SELECT max(version) FROM schema_version").fetchone()[0])


def _encode(a: Amounts) -> tuple[int, int, int, int, int, int, int]:
    return (
        round(a.reserved_s * 1e3),
        round(a.occupied_s * 1e3),
        round(a.busy_s * 1e3),
        round(a.mem_gib_s * 1024.0),
        math.ceil(a.mem_peak_bytes / 1024**2),
        round(a.idle_j * 1e3),
        round(a.dynamic_j * 1e3),
    )


def migrate(conn: sqlite3.Connection, target: int) -> int:
    """Bring the schema up to ``target``, one version per transaction; the version reached.

    An empty database gets the ``schema_version`` table and the application id first.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        if conn.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute(
                "CREATE TABLE schema_version (version INTEGER PRIMARY KEY,"
                " applied_at REAL NOT NULL, by TEXT NOT NULL)"
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    from gputui import __version__

    current = int(
        conn.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()[0]
    )
    for version in range(current + 1, target + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in MIGRATIONS[version]:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_version VALUES (?, ?, ?)",
                (version, time.time(), f"gputui {__version__}"),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        current = version
    return current


def _writer_of(path: Path) -> str:
    """`` (pid N, daemon, since …)`` for the running writer, read from the store; or ``""``."""
    with contextlib.suppress(StoreError, sqlite3.Error, OSError):
        store = Store.open_reader(path)
        try:
            sessions = [s for s in store.sessions() if s.ended is None]
        finally:
            store.close()
        if sessions:
            s = sessions[-1]
            started = time.strftime("%Y-%m-%d %H:%M", time.localtime(s.started))
            return f" (pid {s.pid}, {s.program}, since {started})"
    return ""


def alive(pid: int) -> bool:
    """Whether a process ``pid`` exists.

    A session left open by a writer killed with -9 has none (or, rarely, a reused pid).
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
