"""The ledger's store: schema upgrades, one writer, and every bad store refused without loss.

Real SQLite files, real processes (``gputui daemon``, ``gputui ledger``, ``gputui record``),
a real full file system (a small tmpfs, where mounting is allowed) and a real unprivileged user
for the read-only directory. A bad store is one clear line and exit 2 on the command line, or a
status line while the monitor (here ``gputui record``) keeps running; the file itself is never
changed.
"""

from __future__ import annotations

import itertools
import os
import random
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from gputui.boundary.userfiles import open_user_database
from gputui.ledger.quantities import Amounts, Device, Subject
from gputui.ledger.store import (
    SCHEMA_VERSION,
    TIERS,
    Store,
    StoreBusyError,
    StoreError,
    migrate,
)
from gputui.ledger.writer import LedgerWriter
from gputui.model.containers import ContainerInfo
from gputui.model.gpu import GpuProcessSample, GpuSample
from gputui.model.processes import GpuProcess, ProcessInfo
from gputui.model.snapshot import ContainerUsage, HostInfo, Snapshot
from tests.support.paths import REPO

NOBODY = 65534
T0 = 1_790_000_000
ENV = {**os.environ, "PYTHONPATH": str(REPO), "GPUTUI_LEDGER": "on"}
DEADLINE_S = 120


def gputui(*args: str, user: int | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        text=True,
        capture_output=True,
        timeout=DEADLINE_S,
        env=ENV,
        cwd=REPO,
        user=user,
    )


def one_line_exit_2(result: subprocess.CompletedProcess[str], needle: str) -> str:
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert needle in lines[0], lines[0]
    return lines[0]


DEVICE = Device("0", "GPU-0000", "NVIDIA H200")
TRAINER = Subject("container", "c" * 64, "trainer", "img:1", "lab", "train", None)


def _write_some(store: Store, start: int = T0, seconds: float = 10.0) -> None:
    rows = {(start, DEVICE, TRAINER): Amounts(reserved_s=seconds, occupied_s=seconds, busy_s=5)}
    store.write(rows, {start: (seconds, seconds, 100.0)}, [], start + seconds)


def _store(path: Path) -> Path:
    store = Store.open_writer(path, "test")
    try:
        _write_some(store)
    finally:
        store.close()
    return path


def _ledger(path: Path, *more: str) -> subprocess.CompletedProcess[str]:
    return gputui("ledger", "--store", str(path), "--since", "2026-01-01", *more)


def _daemon(path: Path, *more: str) -> subprocess.CompletedProcess[str]:
    return gputui(
        "daemon", "--demo", "--store", str(path), "--interval", "0.1", "--count", "3", *more
    )


# -- schema ----------------------------------------------------------------------------------


def test_a_version_1_store_is_upgraded_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite"
    conn = open_user_database(path, "ledger store", write=True)
    conn.execute("PRAGMA journal_mode = WAL")
    assert migrate(conn, 1) == 1
    # What a gputui of schema 1 wrote: a device, a subject, a row in each tier, a session.
    conn.execute("INSERT INTO devices VALUES (1, '0', 'GPU-0000', 'NVIDIA H200')")
    conn.execute(
        "INSERT INTO subjects VALUES (1, 'container', ?, 'trainer', 'img:1', 'lab', 'train', NULL)",
        ("c" * 64,),
    )
    for tier, size, _ in TIERS:
        conn.execute(
            "INSERT INTO usage VALUES (?, ?, 1, 1, 7000, 7000, 3500, 0, 0, 9000, 1000)",
            (tier, T0 // size * size),
        )
    conn.execute(
        "INSERT INTO sessions VALUES (1, 1, 'daemon', ?, ?, ?, ?)", (T0, T0, T0 + 7, T0 + 7)
    )
    columns = {r[1] for r in conn.execute("PRAGMA table_info(subjects)")}
    assert "owner" not in columns
    conn.close()

    store = Store.open_writer(path, "test")
    try:
        assert store.schema_version() == SCHEMA_VERSION == 2
        versions = [r[0] for r in store.conn.execute("SELECT version FROM schema_version")]
        assert versions == [1, 2]
        columns = {r[1] for r in store.conn.execute("PRAGMA table_info(subjects)")}
        assert {"owner", "owner_evidence", "owner_confidence"} <= columns
        tables = {r[0] for r in store.conn.execute("SELECT name FROM sqlite_master")}
        assert {"timeline", "events"} <= tables
        _write_some(store, T0 + 5, 3.0)  # the same bucket: added to the old row
        (row,) = store.usage(T0 - 60, T0 + 60, now=T0 + 100)
        assert row.owner is None and row.subject.name == "trainer"
        assert row.amounts.reserved_s == pytest.approx(10.0)
        assert row.amounts.energy_j == pytest.approx(10.0)
    finally:
        store.close()


def test_a_store_of_a_newer_gputui_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = _store(tmp_path / "new.sqlite")
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_version VALUES (3, 0, 'gputui 9')")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="newer gputui"):
        Store.open_writer(path, "test")
    one_line_exit_2(_ledger(path), "written by a newer gputui (schema 3")
    one_line_exit_2(_daemon(path), "written by a newer gputui")
    assert path.read_bytes() == before


# -- one writer ------------------------------------------------------------------------------


def test_a_second_writer_is_refused_and_says_who_writes(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    first = Store.open_writer(path, "tui")
    try:
        with pytest.raises(StoreBusyError, match=rf"pid {os.getpid()}, tui"):
            Store.open_writer(path, "export")
        one_line_exit_2(_daemon(path), "is written by another gputui")
        # A reader runs beside the writer and names it.
        result = _ledger(path)
        assert result.returncode == 0, result.stderr
        assert f"written by pid {os.getpid()} (tui)" in result.stdout
    finally:
        first.close()
    second = Store.open_writer(path, "export")  # the lock went with the first writer
    second.close()


def test_a_monitor_that_cannot_write_runs_read_only_and_nothing_is_counted_twice(
    tmp_path: Path,
) -> None:
    path = tmp_path / "l.sqlite"
    writer = Store.open_writer(path, "daemon")
    try:
        result = gputui(
            "record",
            str(tmp_path / "rec.jsonl"),
            "--demo",
            "--interval",
            "0.1",
            "--count",
            "5",
            "--store",
            str(path),
        )
        assert result.returncode == 0, result.stderr
        assert "gputui record: ledger read-only: ledger store" in result.stderr
        assert "written by another gputui" in result.stderr
        assert "5 snapshot(s) written" in result.stderr  # the recording went on
        assert store_rows(writer) == 0  # the reader wrote nothing
    finally:
        writer.close()


def store_rows(store: Store) -> int:
    return int(store.conn.execute("SELECT count(*) FROM usage").fetchone()[0])


# -- bad files -------------------------------------------------------------------------------


def _corrupt(tmp: Path) -> Path:
    path = tmp / "corrupt.sqlite"
    path.write_bytes(os.urandom(8192))
    return path


def _truncated(tmp: Path) -> Path:
    path = tmp / "truncated.sqlite"
    store = Store.open_writer(path, "test")
    try:
        for i in range(400):
            _write_some(store, T0 + 10 * i)
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        store.close()
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.truncate(size // 2)
    return path


def _foreign(tmp: Path) -> Path:
    path = tmp / "foreign.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, data BLOB)")
    conn.execute("INSERT INTO photos VALUES (1, x'00')")
    conn.commit()
    conn.close()
    return path


@pytest.mark.parametrize(
    ("make", "reader_needle", "writer_needle"),
    [
        (_corrupt, "not a usable SQLite file", "not a usable SQLite file"),
        (_truncated, "", "malformed"),
        (_foreign, "a SQLite file of another program", "a SQLite file of another program"),
    ],
    ids=["corrupt", "truncated", "foreign"],
)
def test_a_bad_store_is_one_line_and_never_written(
    make: object, reader_needle: str, writer_needle: str, tmp_path: Path
) -> None:
    assert callable(make)
    path: Path = make(tmp_path)
    before = path.read_bytes()
    one_line_exit_2(_daemon(path), writer_needle)
    reading = _ledger(path)
    if reader_needle or reading.returncode != 0:
        # A truncated store may still answer for the part left, or be refused: never a
        # traceback, never a partial line.
        one_line_exit_2(reading, reader_needle)
    # The monitor goes on without a ledger, and says why.
    result = gputui(
        "record", str(tmp_path / "r.jsonl"), "--demo", "--count", "3", "--store", str(path)
    )
    assert result.returncode == 0, result.stderr
    assert "gputui record: ledger off: cannot write ledger store" in result.stderr
    assert path.read_bytes() == before


def test_a_planted_symlink_at_the_store_or_its_wal_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("root only\n")
    path = tmp_path / "l.sqlite"
    path.symlink_to(secret)
    os.lchown(path, NOBODY, NOBODY)
    one_line_exit_2(_daemon(path), "is a symbolic link")
    one_line_exit_2(_ledger(path), "is a symbolic link")
    assert secret.read_text() == "root only\n"
    path.unlink()
    _store(path)
    wal = tmp_path / "l.sqlite-wal"
    if wal.exists():
        wal.unlink()
    wal.symlink_to(secret)
    one_line_exit_2(_daemon(path), "l.sqlite-wal: is a symbolic link")
    one_line_exit_2(_ledger(path), "l.sqlite-wal: is a symbolic link")
    assert secret.read_text() == "root only\n"


def test_a_fifo_or_directory_at_the_store_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.sqlite"
    os.mkfifo(fifo)
    one_line_exit_2(_daemon(fifo), "FIFO")
    one_line_exit_2(_ledger(fifo), "FIFO")
    directory = tmp_path / "dir.sqlite"
    directory.mkdir()
    one_line_exit_2(_daemon(directory), "directory")


def test_a_missing_store_is_one_line_for_the_reader(tmp_path: Path) -> None:
    one_line_exit_2(_ledger(tmp_path / "none.sqlite"), "No such file or directory")


def test_a_read_only_directory_is_one_line_for_the_daemon_and_the_monitor_goes_on(
    tiny_fs: Path, tmp_path: Path
) -> None:
    # Root ignores a directory's mode bits: a file system mounted read-only stops it.
    kept = _store(tiny_fs / "kept.sqlite")
    before = kept.read_bytes()
    done = subprocess.run(
        ["mount", "-o", "remount,ro", str(tiny_fs)], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    one_line_exit_2(_daemon(tiny_fs / "new.sqlite"), "Read-only file system")
    one_line_exit_2(_daemon(kept), "Read-only file system")
    result = gputui(
        "record", str(tmp_path / "r.jsonl"), "--demo", "--count", "3", "--store", str(kept)
    )
    assert result.returncode == 0, result.stderr
    assert "gputui record: ledger off:" in result.stderr
    assert "3 snapshot(s) written" in result.stderr
    # What was recorded is still there, and readable.
    reading = _ledger(kept, "--format", "csv")
    assert reading.returncode == 0, reading.stderr
    assert reading.stdout.splitlines()[1].startswith("trainer,0.002778,")  # 10 s reserved
    assert sorted(p.name for p in tiny_fs.iterdir()) == ["kept.sqlite", "kept.sqlite.lock"]
    assert kept.read_bytes() == before


def _churn(t0: int, n: int) -> list[Snapshot]:
    """A new container with a GPU process on every refresh (a new subject each time)."""
    out = []
    for i in range(n):
        cid = f"{i:064x}"
        info = ContainerInfo(cid, f"job-{i}-" + "x" * 150, "img:" + "y" * 100, "running")
        proc = GpuProcess(
            GpuProcessSample(pid=1000 + i, gpu_index=0, used_memory_bytes=2**30, sm_util=50),
            ProcessInfo(pid=1000 + i, user="root"),
            cid,
        )
        gpu = GpuSample(0, "GPU-0000", "NVIDIA H200", utilization_gpu=50, total_energy_mj=i * 10**5)
        out.append(
            Snapshot(
                t0 + i,
                "scenario",
                HostInfo("node"),
                gpus=(gpu,),
                processes=(proc,),
                containers=(ContainerUsage(info, pids=(1000 + i,)),),
            )
        )
    return out


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs (skipped where mounting is not allowed)."""
    mount = tmp_path / f"fs-{uuid.uuid4().hex[:6]}"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()[:200]}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, timeout=30)


def test_a_full_disk_keeps_the_monitor_running_and_what_was_committed(tiny_fs: Path) -> None:
    path = tiny_fs / "l.sqlite"
    clock = [float(T0)]
    writer = LedgerWriter(path, "test", interval_s=1.0, commit_every_s=5, clock=lambda: clock[0])
    snapshots = _churn(T0, 100_000)
    committed_ok = 0
    failed_at = None
    for i, snapshot in enumerate(snapshots):
        clock[0] = snapshot.taken_at
        before = writer.error
        writer.observe(snapshot)
        if writer.error is None and before is None:
            committed_ok = i
        if writer.error is not None:
            failed_at = i
            break
    assert failed_at is not None, "the tmpfs never filled"
    assert "full" in (writer.error or ""), writer.error
    assert "cannot write" in writer.status and "kept in memory" in writer.status
    for snapshot in snapshots[failed_at + 1 : failed_at + 50]:  # it goes on, never raises
        clock[0] = snapshot.taken_at
        writer.observe(snapshot)
    writer.close()
    store = Store.open_reader(path)
    try:
        assert store.conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
        last = store.last_written()
        assert last is not None and last >= snapshots[max(0, committed_ok - 10)].taken_at
    finally:
        store.close()


# -- owners ----------------------------------------------------------------------------------


def test_owners_are_kept_a_known_one_is_not_forgotten_and_ledger_groups_by_them(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ledger.sqlite"
    alice = replace(
        TRAINER, owner="alice", owner_confidence="medium", owner_evidence="runs as --user 1000"
    )
    bob = Subject("container", "b" * 64, "notebook", "img:2", None, None, None, owner="bob")
    store = Store.open_writer(path, "test")
    try:
        rows = {
            (T0, DEVICE, alice): Amounts(reserved_s=10, occupied_s=6, busy_s=3),
            (T0, DEVICE, bob): Amounts(reserved_s=10, occupied_s=4, busy_s=2),
        }
        store.write(rows, {T0: (10.0, 10.0, 100.0)}, [], T0 + 10)
        # A later read could not tell (the engine went away, the lookups were paused): the
        # owner once known stays.
        later = {(T0 + 10, DEVICE, TRAINER): Amounts(reserved_s=10, occupied_s=10, busy_s=5)}
        store.write(later, {T0 + 10: (10.0, 10.0, 100.0)}, [], T0 + 20)
        owners = {r.subject.name: r.owner for r in store.usage(T0, T0 + 20, now=T0 + 30)}
        assert owners == {"trainer": "alice", "notebook": "bob"}
        evidence = store.conn.execute(
            "SELECT owner_confidence, owner_evidence FROM subjects WHERE name = 'trainer'"
        ).fetchone()
        assert evidence == ("medium", "runs as --user 1000")
    finally:
        store.close()
    result = _ledger(path, "--by", "owner", "--format", "csv")
    assert result.returncode == 0, result.stderr
    lines = {line.split(",")[0]: line for line in result.stdout.splitlines()[1:]}
    assert set(lines) >= {"alice", "bob"}, result.stdout
    assert "unknown" not in lines, result.stdout


# -- reading a window ------------------------------------------------------------------------


def test_a_window_reads_coarse_buckets_inside_and_exact_ones_at_its_edges(tmp_path: Path) -> None:
    """Against the 10 s tier summed by hand: any window aligned to 10 s comes back exact."""
    path = tmp_path / "ledger.sqlite"
    start, hours = T0 // 3600 * 3600, 30
    store = Store.open_writer(path, "test")
    try:
        for hour in range(hours):
            rows = {}
            cover = {}
            for step in range(360):
                t = start + hour * 3600 + step * 10
                # A different figure in every bucket, so a bucket read twice or missed shows.
                rows[(t, DEVICE, TRAINER)] = Amounts(occupied_s=10, busy_s=(t // 10) % 7)
                cover[t] = (10.0, 10.0, 1.0)
            store.write(rows, cover, [], start + (hour + 1) * 3600)
        now = start + hours * 3600
        rng = random.Random(7)
        for _ in range(40):
            lo = start + rng.randrange(0, hours * 360) * 10
            hi = lo + rng.randrange(1, hours * 360) * 10
            ranges = Store.plan(lo, hi, now)
            spans = sorted((r[1], r[2]) for r in ranges)
            assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans)), spans
            assert sum(r[0] == 2 for r in ranges) <= 1  # at most one run of hours
            (busy,) = store.conn.execute(
                "SELECT coalesce(sum(busy_ms), 0) FROM usage"
                " WHERE tier = 0 AND start >= ? AND start < ?",
                (lo, hi),
            ).fetchone()
            got = store.usage(lo, hi, now)
            assert sum(r.amounts.busy_s for r in got) == pytest.approx(busy / 1e3), (lo, hi)
            assert store.coverage(lo, hi, now).wall_s == pytest.approx(min(hi, now) - lo)
        # Past the 10 s tier's 48 h the edges are minutes: a window grows to them, never shrinks.
        later = now + 3 * 86400
        (row,) = store.usage(start + 65, start + 3600 + 65, later)
        assert row.amounts.occupied_s == pytest.approx(3600 + 60)
    finally:
        store.close()
