"""The command line: bad input exits 2 with one line; --once works without Textual."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gputui.collect.standins.scenario import ScenarioError, validate_scenario


def gputui(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--interval", "0.05"], "at least 0.1"),
        (["--interval", "fast"], "not a number"),
        (["--interval", "nan"], "at least 0.1"),
        (["--bogus"], "unrecognized arguments"),
        (["--demo", "--scenario", "x.json"], "cannot be combined"),
        (["--scenario", "/nonexistent/s.json", "--once"], "cannot read scenario file"),
        (["doctor", "--nope"], "unrecognized arguments"),
    ],
)
def test_bad_arguments_one_line_exit_2(args: list[str], needle: str) -> None:
    result = gputui(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert needle in lines[0]
    assert "Traceback" not in result.stderr


BAD_SCENARIOS = [
    ("{", "not valid JSON"),
    ("[]", "top level must be a JSON object"),
    ('{"gpus": [{"utilization_gpu": 150}]}', "utilization_gpu"),
    ('{"gpus": [{"utilisation_gpu": 5}]}', "unknown key 'utilisation_gpu'"),
    ('{"nvml": "Broken"}', "nvml"),
    ('{"gpus": [{"errors": {"fan_speed": "Exploded"}}]}', "errors.fan_speed"),
    ('{"gpus": [{"errors": {"warp_drive": "Unknown"}}]}', "unknown field 'warp_drive'"),
    ('{"gpus": [{"processes": [{"pid": -3}]}]}', "pid"),
    ('{"gpus": [{"processes": [{"pid": 5, "type": "X"}]}]}', "type"),
    ('{"gpus": [{"memory_used_mib": []}]}', "must not be empty"),
    ('{"gpus": [{"index": 0}, {"index": 0}]}', "unique"),
    ('{"xid_events": [{"gpu": 0, "xid": "79"}]}', "integers"),
]


@pytest.mark.parametrize(("text", "needle"), BAD_SCENARIOS)
def test_invalid_scenario_files_exit_2(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "s.json"
    path.write_text(text)
    result = gputui("--scenario", str(path), "--once")
    assert result.returncode == 2, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], result.stderr


def test_scenario_from_environment_is_validated_too(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text('{"gpus": "many"}')
    result = gputui("--once", env={"GPUTUI_SCENARIO": str(path)})
    assert result.returncode == 2 and "gpus must be a list" in result.stderr


def test_validate_accepts_the_contract_example() -> None:
    example: dict[str, Any] = {
        "nvml": "ok",
        "driver_version": "580.159.04",
        "cuda_driver_version": "13.0",
        "gpus": [
            {
                "index": 0,
                "uuid": "GPU-57d57e22-be4b-9496-673e-11cc7638ed19",
                "name": "NVIDIA H200",
                "memory_total_mib": 143771,
                "memory_used_mib": [20434, 20500],
                "utilization_gpu": [97, 100, 95],
                "temperature_c": 62,
                "power_w": 683.5,
                "power_limit_w": 700,
                "errors": {"fan_speed": "NotSupported"},
                "processes": [{"pid": 611, "used_memory_mib": 13290, "sm_util": 60}],
            }
        ],
    }
    validate_scenario(example)
    with pytest.raises(ScenarioError):
        validate_scenario({**example, "gpus": [{**example["gpus"][0], "power_w": "hot"}]})


def test_version() -> None:
    result = gputui("--version")
    assert result.returncode == 0 and result.stdout.startswith("gputui ")


def test_demo_once_json_is_the_contract_schema() -> None:
    result = gputui("--demo", "--once", "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert {"version", "taken_at", "sources", "gpus", "processes", "containers", "health"} <= set(
        doc
    )
    assert doc["sources"]["nvml"] == {"ok": True, "error": None, "kind": None, "fix": None}
    assert len(doc["gpus"]) == 4
    for gpu in doc["gpus"]:
        assert {"index", "uuid", "name", "utilization_gpu", "memory_used_bytes"} <= set(gpu)
        assert {"memory_total_bytes", "temperature_c", "power_w", "power_limit_w"} <= set(gpu)
    trainer = next(c for c in doc["containers"] if c["name"] == "llm-trainer-1")
    assert trainer["gpu_memory_bytes"] == (63488 + 2048) * 2**20
    assert trainer["pids"] == [48211, 48290] and trainer["gpu_request"] == ["0"]
    orphan = next(p for p in doc["processes"] if p["pid"] == 999999)
    assert orphan["command"] is None and orphan["container"] is None
    host = next(p for p in doc["processes"] if p["pid"] == 3121)
    assert host["container"] is None and host["container_pid"] is None
    assert all(not c["name"].startswith("/") for c in doc["containers"])
    assert {h["status"] for h in doc["health"]} <= {"pass", "warn", "fail", "info", "skip"}


def test_a_one_shot_ends_the_process_only_after_its_whole_report_is_written(
    tmp_path: Path,
) -> None:
    # The console command ends a one-shot with os._exit once main() flushed its output: a
    # report to a file or a pipe is whole, and the status is main()'s.
    out = tmp_path / "report.json"
    with out.open("w") as handle:
        done = subprocess.run(
            [sys.executable, "-m", "gputui", "--demo", "--once", "--json"],
            stdout=handle,
            stderr=subprocess.PIPE,
            timeout=60,
        )
    assert done.returncode == 0, done.stderr
    assert len(json.loads(out.read_text())["gpus"]) == 4
    text = gputui("--demo", "--once")
    assert text.returncode == 0 and text.stdout.rstrip().splitlines()[-1].strip()
    assert "Containers" in text.stdout and "Health" in text.stdout
    bad = gputui("--demo", "--once", "--only", "9")  # a one-shot refused: status 2, one line
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_once_text_report_does_not_import_textual() -> None:
    code = (
        "import sys, io, contextlib\n"
        "from gputui.cli.main import main\n"
        "buf = io.StringIO()\n"
        "with contextlib.redirect_stdout(buf):\n"
        "    rc = main(['--demo', '--once'])\n"
        "assert rc == 0, rc\n"
        "assert 'llm-trainer-1' in buf.getvalue()\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('textual', 'rich')]\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr


def test_no_driver_no_docker_still_runs_and_says_what_is_missing(tmp_path: Path) -> None:
    # This machine has no NVIDIA driver; point Docker at a socket that does not exist.
    result = gputui("--once", env={"DOCKER_HOST": f"unix://{tmp_path}/none.sock", "TERM": "dumb"})
    assert result.returncode == 0, result.stderr
    assert "NVML: NVML" in result.stdout or "NVML: ok" in result.stdout
    assert "Docker:" in result.stdout and "\x1b" not in result.stdout


def test_doctor_exits_nonzero_on_failures_and_lists_every_check() -> None:
    result = gputui("doctor", "--demo")
    assert result.returncode == 0, result.stdout  # the demo machine has warnings, no failures
    assert "cgroup.nvml_hazard" in result.stdout
    assert "pass" in result.stdout.splitlines()[-1]
    failing = gputui("doctor", "--json")  # this machine: no NVIDIA driver -> nvml.loadable fails
    doc = json.loads(failing.stdout)
    by_id = {c["id"]: c["status"] for c in doc["health"]}
    if by_id.get("nvml.loadable") == "fail":
        assert failing.returncode == 1


@pytest.mark.parametrize(
    "args",
    [["--demo"], ["--demo", "--read-only"], ["replay", "tests/fixtures/h200-lab-recording.jsonl"]],
)
def test_the_monitor_refuses_to_start_without_a_terminal(args: list[str]) -> None:
    """stdout to a pipe: one line pointing to --once, status 2, no escape codes written."""
    result = subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "needs a terminal" in lines[0] and "--once" in lines[0]


def test_ui_preferences_are_validated_before_anything_starts(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[ui]\ntheme = "neon"\n')
    result = gputui("--demo", "--config", str(config))
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "ui.theme: 'neon' is not one of" in result.stderr
    config.write_text('[ui]\ntheme = "nord"\ninterval = 2\n')
    assert gputui("--once", "--demo", "--config", str(config)).returncode == 0
