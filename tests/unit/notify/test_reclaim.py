"""``gputui reclaim`` through the real command line, on a real container and a real audit file.

The audit file holds what the idle policy wrote (notice, escalate, reclaim, with the
evidence); the command checks each container against a fresh snapshot (the scenario gives
NVML's answer: a GPU and no process) and stops one only after its name is typed back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gputui.derive.idle_policy import Notice, Stage
from gputui.notify.audit import AuditLog, notice_record, read_audit
from tests.support.paths import REPO

#: How the test containers reserve GPU 0 without the NVIDIA runtime.
GPU_ENV = {"NVIDIA_VISIBLE_DEVICES": "0"}
GPUTUI = (sys.executable, "-m", "gputui")


def reclaim(tmp: Path, *args: str, typed: str = "") -> subprocess.CompletedProcess[str]:
    scenario = tmp / "scenario.json"
    scenario.write_text(json.dumps({"gpus": [{"index": 0, "memory_total_mib": 80000}]}))
    return subprocess.run(
        [sys.executable, "-m", "gputui", "reclaim", "--scenario", str(scenario), *args],
        input=typed,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "XDG_CONFIG_HOME": str(tmp / "xdg"), "XDG_STATE_HOME": str(tmp)},
        cwd=REPO,
    )


def _due(audit: Path, container: Any, name: str) -> None:
    log = AuditLog(audit)
    evidence = (("observed_s", 14400.0), ("active_s", 0.0), ("gpu_request", "0"))
    for at, stage in ((1.0e9, Stage.NOTICE), (1.0e9 + 3600, Stage.ESCALATE)):
        log.append(notice_record(Notice(stage, container.id, name, "alice", at), "h"))
    notice = Notice(Stage.RECLAIM, container.id, name, "alice", 1.0e9 + 7200, False, evidence)
    log.append(notice_record(notice, "h"))


def _events(audit: Path, container: Any) -> list[str]:
    return [r["event"] for r in read_audit(audit)[0] if r["container_id"] == container.id]


def test_lists_due_containers_and_stops_only_after_the_name_is_typed(
    run_container: Callable[..., Any], free_run_id: str, tmp_path: Path
) -> None:
    name = f"reclaim-{free_run_id}"
    container = run_container(
        ["sleep", "300"],
        name=name,
        network_mode="none",
        environment={"NVIDIA_VISIBLE_DEVICES": "0"},
    )
    audit = tmp_path / "gputui" / "idle-audit.jsonl"  # the default under XDG_STATE_HOME
    _due(audit, container, name)

    listed = reclaim(tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert name in listed.stdout and "still idle" in listed.stdout and "alice" in listed.stdout

    wrong = reclaim(tmp_path, "--stop", name, typed="yes\n")
    assert wrong.returncode == 1 and "did not match: nothing was stopped" in wrong.stderr
    container.reload()
    assert container.status == "running"

    refused = reclaim(tmp_path, "--stop", name, "--read-only", typed=name + "\n")
    assert refused.returncode == 2
    assert (
        refused.stderr.strip()
        .splitlines()[-1]
        .endswith("read-only mode: actions are disabled (nothing was stopped)")
    )
    container.reload()
    assert container.status == "running"

    done = reclaim(tmp_path, "--stop", name, typed=name + "\n")
    assert done.returncode == 0, done.stderr
    assert f"stopped {name}" in done.stdout
    container.reload()
    assert container.status == "exited"

    records = [r for r in read_audit(audit)[0] if r["name"] == name]
    assert [r["event"] for r in records] == [
        "notice",
        "escalate",
        "reclaim",
        "stop-refused",
        "stop-refused",
        "stop",
    ]
    assert [r["result"] for r in records[3:]] == [
        "confirmation did not match",
        "read-only mode",
        "stopped",
    ]
    stop = records[-1]
    assert stop["by"].startswith("gputui reclaim")
    assert stop["evidence"]["observed_s"] == 14400.0  # the verdict's evidence, with the action
    # Stopped: no longer due.
    after = reclaim(tmp_path)
    assert after.returncode == 0 and "no container is due" in after.stdout


def test_a_container_in_use_now_is_not_stopped(
    run_container: Callable[..., Any], free_run_id: str, tmp_path: Path
) -> None:
    name = f"reclaim-busy-{free_run_id}"
    container = run_container(
        ["sleep", "300"],
        name=name,
        network_mode="none",
        environment={"NVIDIA_VISIBLE_DEVICES": "0"},
    )
    audit = tmp_path / "audit.jsonl"
    _due(audit, container, name)
    pid = int(container.attrs["State"]["Pid"])
    scenario = {
        "gpus": [
            {
                "index": 0,
                "memory_total_mib": 80000,
                "processes": [{"pid": pid, "used_memory_mib": 4000, "sm_util": 80}],
            }
        ]
    }
    path = tmp_path / "busy.json"
    path.write_text(json.dumps(scenario))
    result = subprocess.run(
        [*GPUTUI, "reclaim", "--audit", str(audit), "--scenario", str(path), "--stop", name],
        input=name + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "xdg")},
        cwd=REPO,
    )
    assert result.returncode == 1 and "in use or gone now" in result.stderr
    container.reload()
    assert container.status == "running"
    assert _events(audit, container)[-1] == "stop-refused"


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = reclaim(tmp_path, "--stop", "nobody-here")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "nobody-here is not due for reclaim" in lines[0]
    bad = subprocess.run(
        [sys.executable, "-m", "gputui", "reclaim", "--demo", "--scenario", "x"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
