"""Recording (rotation, partial lines), the replay player (step, seek, pause), and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from gputui.collect.docker.logs import LogReader, LogStreamError
from gputui.collect.linux.parent_chain import ParentLink
from gputui.collect.sources import ContainerOwner
from gputui.model.containers import ContainerDetails, ContainerProcesses, ExecResult
from gputui.model.snapshot import HostInfo, Snapshot
from gputui.present.json_report import iso
from gputui.recording.player import ReplayCollector, parse_time
from gputui.recording.reader import read_recording
from gputui.recording.writer import RecordingError, RecordWriter, record, rotated_path
from tests.support.contract import as_old
from tests.support.paths import FIXTURES

FIXTURE = FIXTURES / "h200-lab-once.json"
T0 = 1_800_000_000.0


def snap(i: int, *, health_id: str = "x") -> Snapshot:
    from gputui.model.status import HealthCheck, HealthStatus

    check = HealthCheck(health_id, HealthStatus.PASS, "fine " * 20)
    return Snapshot(T0 + i * 10, "live", HostInfo("h"), health=(check,))


class Counting:
    """A collector (the whole protocol) whose n-th snapshot is ``snap(n)``."""

    mode = "live"
    player = None

    def __init__(self) -> None:
        self.n = 0

    def collect(self) -> Snapshot:
        self.n += 1
        return snap(self.n - 1)

    def request_health(self) -> None:
        pass

    def exec_in_container(
        self, container_id: str, argv: Sequence[str], timeout_s: float
    ) -> ExecResult:
        return ExecResult(tuple(argv), None, error="not a container")

    def interactive_exec_argv(self, container_id: str, argv: Sequence[str]) -> list[str] | None:
        return None

    def signal_process(self, pid: int, signum: int, start_time: float | None) -> str | None:
        return "not a process"

    def container_owner(self, container_id: str) -> ContainerOwner | None:
        return None

    def open_container_logs(self, container_id: str, *, tail: int, follow: bool) -> LogReader:
        raise LogStreamError("no logs here")

    def container_action(self, container_id: str, action: str) -> str | None:
        return "no containers here"

    def container_details(self, container_id: str) -> ContainerDetails:
        return ContainerDetails(container_id, error="no containers here")

    def container_processes(self, container_id: str) -> ContainerProcesses:
        return ContainerProcesses(error="no containers here")

    def parent_chain(
        self, pid: int, start_time: float | None
    ) -> tuple[tuple[ParentLink, ...], str | None]:
        return (), "no processes here"

    def close(self) -> None:
        pass


def test_record_writes_one_compact_line_per_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    written = record(Counting(), RecordWriter(path), interval=0.0, count=4)
    assert written == 4
    lines = path.read_text().splitlines()
    assert len(lines) == 4
    assert ": " not in lines[0] and ", " not in lines[0].split('"summary"')[0]
    assert "same" not in json.loads(lines[0])
    assert json.loads(lines[1])["same"] == ["mode", "host", "health"]
    assert read_recording(path) == [snap(i) for i in range(4)]


def test_record_stops_on_the_event(tmp_path: Path) -> None:
    stop = threading.Event()
    stop.set()
    assert record(Counting(), RecordWriter(tmp_path / "r"), interval=0.0, stop=stop) == 0


def test_rotation_by_size_keeps_n_files_each_standing_alone(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    full = len(RecordWriter._line(snap(0), None))
    short = len(RecordWriter._line(snap(1), snap(0)))
    limit = full + 2 * short  # a full line and two short ones per file
    writer = RecordWriter(path, max_bytes=limit, keep=2)
    for i in range(12):
        writer.write(snap(i))
    files = [path, rotated_path(path, 1), rotated_path(path, 2)]
    assert all(f.exists() for f in files)
    assert not rotated_path(path, 3).exists()
    for f in files:
        assert f.stat().st_size <= limit
        first = json.loads(f.read_text().splitlines()[0])
        assert "same" not in first  # each file starts with a full snapshot
    got = read_recording(path)
    # Oldest lost to rotation, the rest in order, newest last.
    assert got == [snap(i) for i in range(3, 12)]  # 3 files of 3 lines


def test_appending_to_an_existing_recording_starts_with_a_full_line(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    with RecordWriter(path) as writer:
        writer.write(snap(0))
    with RecordWriter(path) as writer:  # a second `gputui record` run on the same file
        writer.write(snap(1))
    assert "same" not in json.loads(path.read_text().splitlines()[1])
    assert read_recording(path) == [snap(0), snap(1)]


def test_cut_and_corrupt_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    with RecordWriter(path) as writer:
        for i in range(3):
            writer.write(snap(i))
    text = path.read_text()
    path.write_text(text + text.splitlines()[0][:50])  # killed mid-write
    assert len(read_recording(path)) == 3
    lines = text.splitlines()
    # A corrupt line: skipped, and so is the line repeating its fields (`same`) until the next
    # full line (what a new recorder writes first).
    path.write_text("\n".join([lines[0], "{oops", lines[2], lines[0], lines[1], lines[2]]) + "\n")
    player = ReplayCollector.from_file(path)
    got = [player.snapshot_at(i) for i in range(len(player))]
    assert got == [snap(0), snap(0), snap(1), snap(2)]
    assert player.skipped == 2
    player.close()
    path.write_text("")
    with pytest.raises(RecordingError, match="holds no snapshot"):
        read_recording(path)
    path.write_text("{oops\n")
    with pytest.raises(RecordingError, match=r"holds no snapshot \(1 unreadable line"):
        read_recording(path)
    with pytest.raises(RecordingError, match="No such file"):
        read_recording(tmp_path / "missing")


def test_a_once_json_report_reads_as_a_one_snapshot_recording() -> None:
    (only,) = read_recording(FIXTURE)
    assert only.host.hostname == "vm"
    assert iso(only.taken_at) == "2026-11-29T16:36:20Z"


def test_player_plays_in_order_and_stays_at_the_end() -> None:
    player = ReplayCollector([snap(i) for i in range(3)])
    assert player.mode == "replay"
    got = [player.collect().taken_at for _ in range(5)]
    assert got == [T0, T0 + 10, T0 + 20, T0 + 20, T0 + 20]
    assert player.at_end


def test_player_pause_step_and_seek() -> None:
    player = ReplayCollector([snap(i) for i in range(10)])
    player.collect()
    player.pause()
    assert player.collect().taken_at == T0
    assert player.step(3).taken_at == T0 + 30
    assert player.collect().taken_at == T0 + 30  # paused: no advance
    assert player.step(-10).taken_at == T0  # clamped
    assert player.step(+99).taken_at == T0 + 90
    assert player.seek(T0 + 45).taken_at == T0 + 40  # the last one at or before
    assert player.position == 4
    player.resume()
    assert player.collect().taken_at == T0 + 50
    with pytest.raises(RecordingError, match="outside the recording"):
        player.seek(T0 - 1)
    with pytest.raises(RecordingError, match="outside the recording"):
        player.seek(T0 + 91)


def test_player_refuses_actions() -> None:
    player = ReplayCollector([snap(0)])
    assert player.exec_in_container("a" * 64, ["nvidia-smi"], 5).error
    assert player.signal_process(1, 15, None)
    assert player.interactive_exec_argv("a" * 64, ["sh"]) is None
    assert player.container_action("a" * 64, "pause")
    # Inspect reads the machine: a recording's containers are not here to read.
    assert "recording" in (player.container_details("a" * 64).error or "")
    assert "recording" in (player.container_processes("a" * 64).error or "")


def test_player_is_safe_to_drive_from_two_threads() -> None:
    player = ReplayCollector([snap(i) for i in range(1000)])
    stop = threading.Event()

    def ui() -> None:
        while not stop.is_set():
            player.step(-1)
            player.seek(T0 + 5000)

    thread = threading.Thread(target=ui)
    thread.start()
    try:
        for _ in range(2000):
            assert 0 <= player.collect().taken_at - T0 <= 9990
    finally:
        stop.set()
        thread.join()


def test_parse_time_forms() -> None:
    assert parse_time("+90", T0) == T0 + 90
    assert parse_time("+5m", T0) == T0 + 300
    assert parse_time("+1.5h", T0) == T0 + 5400
    assert parse_time(str(T0 + 7), T0) == T0 + 7
    assert parse_time(iso(T0 + 60) or "", T0) == T0 + 60
    assert parse_time("2027-01-15T08:00:00", T0) == parse_time("2027-01-15T08:00:00Z", T0)
    with pytest.raises(RecordingError, match="expected ISO 8601"):
        parse_time("yesterday", T0)


@pytest.mark.parametrize(
    "text", ["1e20", "inf", "-inf", "nan", "+99999999999999h", "-5", "1" * 5000, "+1" + "0" * 400]
)
def test_parse_time_refuses_times_no_recording_holds(text: str) -> None:
    # Each was an OverflowError traceback (or, for nan, silently accepted) before.
    with pytest.raises(RecordingError, match="not a time between 1970 and 9999"):
        parse_time(text, T0)


def test_a_player_refuses_a_nan_seek() -> None:
    player = ReplayCollector([snap(i) for i in range(3)])
    with pytest.raises(RecordingError, match="outside the recording"):
        player.seek(float("nan"))


# -- the command line -----------------------------------------------------------------------


def gputui(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "XDG_CONFIG_HOME": "/nonexistent"},
    )


@pytest.fixture(scope="module")
def demo_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rec") / "demo.jsonl"
    result = gputui("record", str(path), "--demo", "--count", "4", "--interval", "0.1")
    assert result.returncode == 0, result.stderr
    assert "4 snapshot(s) written" in result.stderr
    return path


def test_once_on_a_recording_at_a_time(demo_recording: Path) -> None:
    snapshots = read_recording(demo_recording)
    assert len(snapshots) == 4
    second = snapshots[1]
    result = gputui(
        "--once", "--json", "--replay", str(demo_recording), "--at", iso(second.taken_at) or ""
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["taken_at"] == iso(second.taken_at)
    assert doc["mode"] == "demo"
    assert [g["utilization_gpu"] for g in doc["gpus"]] == [g.utilization_gpu for g in second.gpus]
    latest = json.loads(gputui("--once", "--json", "--replay", str(demo_recording)).stdout)
    assert latest["taken_at"] == iso(snapshots[-1].taken_at)
    text = gputui("replay", str(demo_recording), "--once", "--at", "+1s")
    assert text.returncode == 0 and "llm-trainer-1" in text.stdout


def test_once_on_a_report_gives_the_report_back() -> None:
    result = gputui("--once", "--json", "--replay", str(FIXTURE))
    assert result.returncode == 0, result.stderr
    doc, fixture = json.loads(result.stdout), json.loads(FIXTURE.read_text())
    assert as_old(doc, fixture) == fixture


def test_recorded_lines_round_trip_to_the_same_report(demo_recording: Path) -> None:
    from gputui.present.json_report import snapshot_to_json
    from gputui.recording.codec import snapshot_from_record

    first = json.loads(demo_recording.read_text().splitlines()[0])
    snapshot = snapshot_from_record(first)
    assert snapshot_to_json(snapshot) == snapshot_to_json(read_recording(demo_recording)[0])
    assert replace(snapshot, mode="x") != snapshot


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--once", "--at", "+5m"], "--at needs --replay"),
        (["--once", "--demo", "--replay", "x.jsonl"], "cannot be combined"),
        (["--once", "--replay", "/nonexistent/rec.jsonl"], "cannot read recording"),
        (["--once", "--replay", "{rec}", "--at", "yesterday"], "expected ISO 8601"),
        (["--once", "--replay", "{rec}", "--at", "1999-01-01T00:00:00Z"], "outside the recording"),
        # Without FILE: this host's ledger store, which this test's state directory lacks.
        (["replay"], "cannot read recording or ledger store"),
        (["replay", "/nonexistent/rec.jsonl"], "cannot read recording"),
        (["record", "/nonexistent/dir/rec.jsonl", "--demo", "--count", "1"], "no directory"),
        (["record", "{tmp}/r.jsonl", "--count", "0"], "positive integer"),
        (["record", "{tmp}/r.jsonl", "--max-bytes", "lots"], "expected bytes"),
        (["record", "{tmp}/r.jsonl", "--demo", "--scenario", "s.json"], "cannot be combined"),
    ],
)
def test_bad_arguments_one_line_exit_2(
    args: list[str], needle: str, demo_recording: Path, tmp_path: Path
) -> None:
    args = [a.replace("{rec}", str(demo_recording)).replace("{tmp}", str(tmp_path)) for a in args]
    result = gputui(*args)
    assert result.returncode == 2, result.stdout
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert needle in lines[0]
