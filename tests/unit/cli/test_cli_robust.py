"""Hostile files, values and output streams through the real command line.

Each case must end in bounded time with one line on stderr and exit status 2 (or, for a closed
pipe, a quiet 141), never a traceback, a hang or unbounded memory; a recording must never lose
the snapshots it already holds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gputui.recording.reader import read_recording
from gputui.recording.writer import DEFAULT_MAX_BYTES, RecordWriter, rotated_path
from tests.support.paths import FIXTURES, REPO

ENV = {**os.environ, "XDG_CONFIG_HOME": "/nonexistent", "PYTHONIOENCODING": "utf-8:strict"}
T0 = 1_795_000_000.0


def run(*args: str, timeout: float = 60, **kw: Any) -> subprocess.CompletedProcess[str]:
    env = {**ENV, **kw.pop("env", {})}
    if "stdout" not in kw:
        kw["capture_output"] = True
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        text=True,
        timeout=timeout,
        env=env,
        cwd=REPO,
        **kw,
    )


def one_line_exit_2(result: subprocess.CompletedProcess[str], needle: str) -> None:
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr[-2000:]
    assert needle in lines[0], lines[0]
    assert len(lines[0]) < 1200


@pytest.fixture(scope="module")
def demo_lines(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    path = tmp_path_factory.mktemp("demo") / "demo.jsonl"
    result = run("record", str(path), "--demo", "--count", "3", "--interval", "0.1")
    assert result.returncode == 0, result.stderr
    return path.read_text().splitlines()


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


# -- bad files: scenario, config, recording --------------------------------------------------

DEEP_JSON = "[" * 200_000 + "]" * 200_000
HUGE_INT_JSON = '{"gpus": [{"index": ' + "9" * 5000 + "}]}"
DEEP_TOML = "x = " + "[" * 100_000 + "]" * 100_000 + "\n"
HUGE_INT_TOML = "[[alerts.rules]]\nid='a'\nmetric='gpu_util'\nthreshold=" + "9" * 5000 + "\n"
HEX_INT_TOML = "[[alerts.rules]]\nid='a'\nmetric='gpu_util'\nthreshold=0x" + "f" * 5000 + "\n"


def _hostile_file(tmp_path: Path, kind: str, fifo_path: Path) -> Path:
    path = tmp_path / f"{kind}.in"
    if kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        return fifo_path
    elif kind == "oversize":
        with path.open("wb") as fh:  # sparse: 1 GiB on paper, no disk used
            fh.truncate(1024**3)
    return path


@pytest.mark.parametrize(
    ("kind", "needle"),
    [
        ("dev-zero", "not a regular file"),
        ("fifo", "not a regular file"),
        ("oversize", "larger than"),
    ],
)
def test_scenario_that_is_no_regular_small_file(
    tmp_path: Path, fifo: Path, kind: str, needle: str
) -> None:
    # /dev/zero was a MemoryError after gigabytes, a FIFO a hang, 1 GB 2 GB of RSS.
    path = _hostile_file(tmp_path, kind, fifo)
    one_line_exit_2(run("--once", "--scenario", str(path), timeout=30), needle)


@pytest.mark.parametrize(
    ("kind", "needle"),
    [("dev-zero", "not a regular file"), ("fifo", "not a regular file"), ("oversize", "larger")],
)
def test_config_that_is_no_regular_small_file(
    tmp_path: Path, fifo: Path, kind: str, needle: str
) -> None:
    path = _hostile_file(tmp_path, kind, fifo)
    one_line_exit_2(run("--once", "--demo", "--config", str(path), timeout=30), needle)


@pytest.mark.parametrize(
    ("kind", "needle"), [("dev-zero", "not a regular file"), ("fifo", "not a regular file")]
)
def test_recording_that_is_no_regular_file(
    tmp_path: Path, fifo: Path, kind: str, needle: str
) -> None:
    path = _hostile_file(tmp_path, kind, fifo)
    one_line_exit_2(run("--once", "--replay", str(path), timeout=30), needle)


@pytest.mark.parametrize(
    ("text", "needle"),
    [(DEEP_JSON, "nested too deeply"), (HUGE_INT_JSON, "too many digits")],
    ids=["deep", "huge-int"],
)
def test_scenario_deep_or_huge_json(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "s.json"
    path.write_text(text)
    one_line_exit_2(run("--once", "--scenario", str(path), timeout=30), needle)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (DEEP_TOML, "nested too deeply"),
        (HUGE_INT_TOML, "too many digits"),
        (HEX_INT_TOML, "expected a number (finite, within ±1e18), got an integer too large"),
        ("[[alerts.rules]]\nid='a'\nmetric='gpu_util'\nthreshold=1\nfor=1e400\n", "finite"),
        ("[[alerts.rules]]\nid='a'\nmetric='gpu_util'\nthreshold=1\nfor='9999999h'\n", "at most"),
    ],
    ids=["deep", "huge-int", "huge-hex", "inf-duration", "huge-duration"],
)
def test_config_deep_huge_or_unbounded(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text)
    one_line_exit_2(run("--once", "--demo", "--config", str(path), timeout=30), needle)


@pytest.mark.parametrize(
    "bad_time",
    ["NaN", "Infinity", "-Infinity", "1e300", "-5", '"soon"', "9" * 5000],
    ids=["nan", "inf", "-inf", "1e300", "negative", "string", "huge-int"],
)
def test_recording_with_unshowable_times_is_skipped_not_a_crash(
    tmp_path: Path, demo_lines: list[str], bad_time: str
) -> None:
    record = json.loads(demo_lines[0])
    line = json.dumps(record, separators=(",", ":")).replace(
        f'"taken_at":{record["snapshot"]["taken_at"]}', f'"taken_at":{bad_time}', 1
    )
    assert bad_time in line
    path = tmp_path / "r.jsonl"
    path.write_text(line + "\n")
    one_line_exit_2(run("--once", "--replay", str(path), timeout=30), "holds no snapshot")
    path.write_text(line + "\n" + demo_lines[0] + "\n")  # the good line still plays
    result = run("--once", "--json", "--replay", str(path), timeout=30)
    assert result.returncode == 0, result.stderr
    assert "1 unreadable line(s)" in result.stderr


def test_recording_line_nested_too_deeply_is_skipped(tmp_path: Path, demo_lines: list[str]) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(demo_lines[0] + "\n" + DEEP_JSON + "\n" + demo_lines[0] + "\n")
    result = run("--once", "--replay", str(path), timeout=30)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "1 unreadable line(s)" in result.stderr


# -- bad values on the command line ------------------------------------------------------------


@pytest.mark.parametrize(
    "at",
    ["1e20", "inf", "nan", "+99999999999999h", "-1", "9" * 5000],
    ids=["1e20", "inf", "nan", "huge-offset", "negative", "huge-int"],
)
def test_at_values_out_of_any_recording(demo_lines: list[str], tmp_path: Path, at: str) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(demo_lines) + "\n")
    # --at=VALUE: with -1 an option (--once), a lone "-1" after --at is that option, not a value
    one_line_exit_2(run("--once", "--replay", str(path), f"--at={at}"), "not a time between")


@pytest.mark.parametrize("interval", ["1e10", "9223372037", "inf", "-inf", "nan", "1e400"])
def test_interval_is_bounded(interval: str) -> None:
    # Above threading.TIMEOUT_MAX this was an OverflowError in the first wait.
    option = f"--interval={interval}"
    one_line_exit_2(run("--demo", "--once", option), "at most 86400")
    one_line_exit_2(run("export", "--once", "--demo", option), "at most 86400")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--count", "9" * 5000], "positive integer"),
        (["--count", "\u00b2"], "positive integer"),  # str.isdigit() is True for "²"
        (["--max-size", "9" * 5000], "expected bytes"),
        (["--max-size", "\u00b2M"], "expected bytes"),
        (["--keep", "99999999"], "from 0 to 100"),
        (["--keep", "-1"], "from 0 to 100"),
    ],
    ids=[
        "count-huge",
        "count-superscript",
        "size-huge",
        "size-superscript",
        "keep-huge",
        "keep-neg",
    ],
)
def test_record_numbers_are_bounded(tmp_path: Path, args: list[str], needle: str) -> None:
    one_line_exit_2(run("record", str(tmp_path / "r.jsonl"), "--demo", *args), needle)


# -- recordings keep their data ----------------------------------------------------------------


def test_appending_after_a_cut_line_keeps_every_snapshot_readable(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    assert run("record", str(path), "--demo", "--count", "3", "--interval", "0.1").returncode == 0
    with path.open("a") as fh:
        fh.write(path.read_text().splitlines()[1][:80])  # a recorder killed mid-write
    assert run("record", str(path), "--demo", "--count", "2", "--interval", "0.1").returncode == 0
    # Before: the new first line was glued to the cut one, and the whole file became unreadable.
    assert len(read_recording(path)) == 5
    result = run("--once", "--json", "--replay", str(path))
    assert result.returncode == 0, result.stderr
    assert "1 unreadable line(s)" in result.stderr


def test_a_second_recorder_on_the_same_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    first = subprocess.Popen(
        [sys.executable, "-m", "gputui", "record", str(path), "--demo", "--interval", "0.1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        cwd=REPO,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (
            not path.exists() or path.read_bytes().count(b"\n") < 2
        ):
            time.sleep(0.05)
        second = run("record", str(path), "--demo", "--count", "3", "--interval", "0.1")
        one_line_exit_2(second, "another gputui record is writing it")
    finally:
        first.send_signal(signal.SIGTERM)
        _, err = first.communicate(timeout=30)
    assert first.returncode == 0, err
    snapshots = read_recording(path)
    assert len(snapshots) >= 2
    assert {s.mode for s in snapshots} == {"demo"}
    times = [s.taken_at for s in snapshots]
    assert times == sorted(times) and len(set(times)) == len(times)


def test_record_into_a_fifo_is_refused_at_once(fifo: Path) -> None:
    # Before: open() blocked for a reader, and SIGTERM / Ctrl-C could not end it.
    one_line_exit_2(run("record", str(fifo), "--demo", "--count", "1", timeout=30), "regular")


def test_record_rotates_by_default_and_with_max_size(tmp_path: Path) -> None:
    assert RecordWriter(tmp_path / "x").max_bytes == DEFAULT_MAX_BYTES > 0
    path = tmp_path / "r.jsonl"
    result = run("record", str(path), "--demo", "--count", "3", "--interval", "0.1", "--max-size",
                 "1K", "--keep", "5")  # fmt: skip
    assert result.returncode == 0, result.stderr
    # Every line is over 1K: each rotation leaves one snapshot per file.
    assert rotated_path(path, 2).exists() and not rotated_path(path, 3).exists()
    assert len(read_recording(path)) == 3
    assert "--max-size" in run("record", "--help").stdout


def test_once_on_a_large_recording_is_fast_and_small(tmp_path: Path, demo_lines: list[str]) -> None:
    path = tmp_path / "big.jsonl"
    full, rest = json.loads(demo_lines[0]), [json.loads(x) for x in demo_lines[1:]]
    t, size = T0, 0
    with path.open("w") as fh:
        while size < 40_000_000:
            for rec in [full, *rest * 50]:
                rec["snapshot"]["taken_at"] = t
                t += 1.0
                size += fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
    # VmHWM is the peak of this process's own memory since its exec. ru_maxrss is not: after a
    # vfork-and-exec it carries the parent's peak too, here a test worker's hundreds of MiB.
    code = (
        "import re, sys\nfrom gputui.cli.main import main\nrc = main(sys.argv[1:])\n"
        "status = open('/proc/self/status').read()\n"
        "print(re.search(r'VmHWM:\\s+(\\d+)', status).group(1), file=sys.stderr)\n"
        "raise SystemExit(rc)\n"
    )
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", code, "--once", "--json", "--replay", str(path), "--at", "+60"],
        capture_output=True, text=True, timeout=120, env=ENV, cwd=REPO,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    max_rss_mib = int(result.stderr.split()[-1]) // 1024
    # Before: every snapshot decoded and kept (~300 MiB and 24 s for 60 MB).
    assert max_rss_mib < 120, max_rss_mib
    assert time.monotonic() - started < 60
    assert json.loads(result.stdout)["taken_at"] is not None


# -- output streams ----------------------------------------------------------------------------


@pytest.mark.parametrize("args", [["--demo", "--once"], ["--demo", "--json"], ["doctor", "--demo"]])
def test_stdout_to_a_closed_pipe_is_a_quiet_exit(args: list[str]) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # `| head -1` that has already gone
    try:
        result = subprocess.run(
            [sys.executable, "-m", "gputui", *args],
            stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60, env=ENV, cwd=REPO,
        )  # fmt: skip
    finally:
        os.close(write_end)
    assert result.returncode == 141, result.stderr
    assert result.stderr == ""


@pytest.mark.parametrize("args", [["--demo", "--once"], ["doctor", "--demo", "--json"]])
def test_stdout_to_dev_full_is_one_line(args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        result = run(*args, stdout=full, stderr=subprocess.PIPE)
    one_line_exit_2(result, "cannot write output: No space left on device")


def test_closed_stdout_is_one_line() -> None:
    result = run("--demo", "--once", stderr=subprocess.PIPE, stdout=None,
                 preexec_fn=lambda: os.close(1))  # fmt: skip
    one_line_exit_2(result, "standard output is closed")


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
@pytest.mark.parametrize("args", [["--demo", "--once"], ["doctor", "--demo"]])
def test_a_narrow_locale_never_fails_on_encoding(encoding: str, args: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        capture_output=True, timeout=60, cwd=REPO,
        env={**ENV, "PYTHONIOENCODING": encoding, "LC_ALL": "C"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert b"Traceback" not in result.stderr
    assert b" pass, " in result.stdout or b"NVIDIA H200" in result.stdout


# -- escape injection ----------------------------------------------------------------------------

HOSTILE = "580\x1b]0;pwned\x07\x1b]52;c;cHduZWQ=\x07\x1b[2J\u202eevil\x9b31m"


def test_host_strings_of_a_recording_are_inert_in_text_and_exact_in_json(
    tmp_path: Path, demo_lines: list[str]
) -> None:
    record = json.loads(demo_lines[0])
    host = record["snapshot"]["host"]
    host.update(driver_version=HOSTILE, cuda_driver_version=HOSTILE, nvml_version=HOSTILE)
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(record) + "\n")
    text = subprocess.run(
        [sys.executable, "-m", "gputui", "--once", "--replay", str(path)],
        capture_output=True, timeout=60, env=ENV, cwd=REPO,
    )  # fmt: skip
    assert text.returncode == 0, text.stderr
    out = text.stdout.decode()
    assert not [c for c in out if (ord(c) < 32 and c != "\n") or 0x7F <= ord(c) <= 0x9F]
    assert "\u202e" not in out and "driver 580" in out
    raw = run("--once", "--json", "--replay", str(path)).stdout
    assert raw.isascii() and "\\u202e" in raw and "\\u001b" in raw
    assert json.loads(raw)["host"]["driver_version"] == HOSTILE


def test_tui_exit_status_is_passed_on(monkeypatch: pytest.MonkeyPatch) -> None:
    import gputui.ui.run
    from gputui.cli import main

    results: list[int | None] = [None, 3]
    monkeypatch.setattr(gputui.ui.run, "run_tui", lambda *a, **k: results.pop(0))
    monkeypatch.setattr(main, "on_terminal", lambda: True)  # pytest's stdout is not one
    monkeypatch.setenv("XDG_CONFIG_HOME", "/nonexistent")
    assert main.main(["--demo"]) == 0  # None: a clean exit
    assert main.main(["--demo"]) == 3  # a crash's status reaches the shell


@pytest.mark.parametrize(
    "argv",
    [
        ["--demo"],
        ["--replay", "{recording}"],
        ["replay", "{recording}"],
    ],
)
def test_the_tui_gets_the_config_the_command_line_loaded(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Read once, by the command line: the monitor is handed that, never the path to read again.
    import gputui.ui.run
    from gputui.cli import main, replay
    from gputui.config.file import Config

    path = tmp_path / "config.toml"
    path.write_text(
        '[alerts]\ndefaults = false\n\n[[alerts.rules]]\nid = "mine"\nmetric = "gpu_util"\n'
        "threshold = 70\n",
        encoding="utf-8",
    )
    handed: list[Config | None] = []

    def fake_run_tui(*_args: Any, config: Config | None = None, **_kw: Any) -> None:
        handed.append(config)

    monkeypatch.setattr(gputui.ui.run, "run_tui", fake_run_tui)
    for module in (main, replay):
        monkeypatch.setattr(module, "on_terminal", lambda: True)  # pytest's stdout is not one
    recording = str(FIXTURES / "h200-lab-recording.jsonl")
    args = [a.format(recording=recording) for a in argv]
    assert main.main([*args, "--config", str(path)]) == 0
    (config,) = handed
    assert config is not None and config.path == path
    assert [r.id for r in config.alert_rules] == ["mine"]
