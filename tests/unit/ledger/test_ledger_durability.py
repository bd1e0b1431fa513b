"""The ledger survives ``kill -9``: at most the commit interval is lost, and the loss is a gap.

A real ``gputui daemon`` child writes a real store at a fast interval (0.1 s, commits every
0.5 s: the default 30 s commit bounds a loss to under a minute) and is killed with SIGKILL at
random points. After each kill the store passes SQLite's integrity check, what was committed is
there, the next writer records the time nobody wrote as a gap, and the store's credited wall
time plus its gaps is the whole span: nothing lost without a gap, nothing counted twice.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.paths import REPO

ENV = {**os.environ, "PYTHONPATH": str(REPO)}
COMMIT_EVERY_S = 0.5
INTERVAL_S = 0.1
#: What a kill may lose: the commit interval, plus a collection and a slow machine's delay.
LOSS_BOUND_S = COMMIT_EVERY_S + 3.0
DEADLINE_S = 60.0


def _scenario(tmp: Path) -> Path:
    path = tmp / "two-gpus.json"
    gpus = [
        {
            "index": i,
            "memory_total_mib": 143771,
            "utilization_gpu": [10, 90],
            "power_w": 300,
            "total_energy_mj": [10**9 + k * 30_000 for k in range(200)],
        }
        for i in range(2)
    ]
    path.write_text(json.dumps({"gpus": gpus}))
    return path


def _daemon(store: Path, scenario: Path, *more: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gputui",
            "daemon",
            "--scenario",
            str(scenario),
            "--store",
            str(store),
            "--interval",
            str(INTERVAL_S),
            "--commit-every",
            str(COMMIT_EVERY_S),
            *more,
        ],
        env=ENV,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _query(store: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=10)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _last_commit(store: Path, session: int) -> float | None:
    if not store.exists():
        return None
    try:
        rows = _query(store, f"SELECT last FROM sessions WHERE id = {session}")
    except sqlite3.OperationalError:  # not created yet
        return None
    return None if not rows or rows[0][0] is None else float(str(rows[0][0]))


def _wait_for_commits(store: Path, session: int, child: subprocess.Popen[str]) -> float:
    """The session's last commit once it has made two (the deadline fails the test)."""
    deadline = time.monotonic() + DEADLINE_S
    first = None
    while time.monotonic() < deadline:
        assert child.poll() is None, child.stderr.read() if child.stderr else ""
        last = _last_commit(store, session)
        if last is not None:
            if first is None:
                first = last
            elif last > first:
                return last
        time.sleep(0.05)
    pytest.fail("the daemon committed nothing within 60 s")


def test_kill_9_at_random_points_loses_at_most_a_commit_and_shows_the_gap(
    tmp_path: Path,
) -> None:
    rng = random.Random()
    seed = rng.randrange(10**6)
    rng.seed(seed)
    store = tmp_path / "ledger.sqlite"
    scenario = _scenario(tmp_path)
    kills: list[tuple[float, float]] = []  # (killed at, last commit then)
    for session in (1, 2, 3):
        child = _daemon(store, scenario)
        try:
            _wait_for_commits(store, session, child)
            time.sleep(rng.uniform(0.0, 2.0))  # a random point of the writer's cycle
            child.send_signal(signal.SIGKILL)
            killed_at = time.time()
            child.wait(timeout=DEADLINE_S)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(timeout=DEADLINE_S)
        last = _last_commit(store, session)
        assert last is not None
        assert killed_at - last <= LOSS_BOUND_S, (seed, killed_at - last)
        assert _query(store, "PRAGMA quick_check")[0][0] == "ok"
        kills.append((killed_at, last))
    # A last writer that ends normally: it records the gap the third kill left.
    final = _daemon(store, scenario, "--count", "20")
    assert final.wait(timeout=DEADLINE_S) == 0, final.stderr.read() if final.stderr else ""

    sessions = _query(store, "SELECT id, first, last, ended FROM sessions ORDER BY id")
    assert [s[0] for s in sessions] == [1, 2, 3, 4]
    for session_row, (_, committed) in zip(sessions[:3], kills, strict=True):
        # A killed writer ended at its last commit.
        assert session_row[3] == session_row[2] == committed
    gaps = _query(store, "SELECT start, end, reason FROM gaps ORDER BY start")
    resumed = [g for g in gaps if g[2] == "nothing was writing"]
    assert len(resumed) == 3, gaps
    for (start, end, _), (killed_at, committed) in zip(resumed, kills, strict=True):
        assert start == committed  # the gap starts where the store's time ends...
        assert float(str(end)) >= killed_at  # ...and covers the time lost with the kill
    # Every second from the first snapshot to the last commit is credited or a gap, once.
    (wall_ms,) = _query(store, "SELECT sum(wall_ms) FROM coverage WHERE tier = 2")[0]
    gap_s = sum(float(str(g[1])) - float(str(g[0])) for g in gaps)
    span = float(str(sessions[-1][2])) - float(str(sessions[0][1]))
    credited = float(str(wall_ms)) / 1000
    # Rounding: milliseconds per 10 s bucket.
    assert credited + gap_s == pytest.approx(span, abs=0.05), (credited, gap_s, span)
