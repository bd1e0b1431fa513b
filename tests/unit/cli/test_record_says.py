"""``gputui record`` says where it records, how often and how to stop, as it starts."""

from __future__ import annotations

import datetime as dt
import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

ENV = {**os.environ, "XDG_CONFIG_HOME": "/nonexistent", "GPUTUI_SCENARIO": ""}


def test_record_says_where_how_often_and_how_to_stop_before_the_first_snapshot(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gputui", "record", str(path), "--demo", "--interval", "0.5"],
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    try:
        assert proc.stderr is not None
        # While it records: said at the start, not at the end.
        ready, _, _ = select.select([proc.stderr], [], [], 30)
        assert ready, "nothing said on stderr within 30 s of starting"
        first = proc.stderr.readline()
        assert proc.poll() is None
        assert first == (
            f"gputui record: recording to {path} every 0.5s (rotated at 256MiB into "
            f"{path}.1..3); stop with Ctrl-C\n"
        )
        proc.send_signal(signal.SIGINT)
        rest = proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    assert "snapshot(s) written to" in rest


def test_record_with_a_count_says_it_stops_by_itself(tmp_path: Path) -> None:
    path = tmp_path / "two.jsonl"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "gputui",
            "record",
            str(path),
            "--demo",
            "--count",
            "2",
            "--interval",
            "0.1",
            "--max-size",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=ENV,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0] == (
        f"gputui record: recording to {path} every 0.1s (one file, never rotated); "
        "stops after 2 snapshots (--count) or Ctrl-C"
    )
    assert len(path.read_text().splitlines()) == 2


def test_replay_once_at_the_end_prints_the_snapshot_and_nothing_about_the_end(
    tmp_path: Path,
) -> None:
    path = tmp_path / "three.jsonl"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "gputui",
            "record",
            str(path),
            "--demo",
            "--count",
            "3",
            "--interval",
            "0.1",
        ],
        capture_output=True,
        timeout=60,
        env=ENV,
        check=True,
    )
    last = json.loads(path.read_text().splitlines()[-1])["snapshot"]["taken_at"]
    at_end = subprocess.run(
        [sys.executable, "-m", "gputui", "--replay", str(path), "--once", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        env=ENV,
    )
    assert at_end.returncode == 0, at_end.stderr
    assert at_end.stderr == "" and "end of recording" not in at_end.stdout
    shown = dt.datetime.fromtimestamp(last, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    assert json.loads(at_end.stdout)["taken_at"].startswith(shown)  # the last snapshot
