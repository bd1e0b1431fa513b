"""Every front-end carries the same findings and alert states as the TUI, on one scenario.

Real containers (two sharing GPU 0, one idle reservation); NVML replaced by a scenario file; an
alert rule that fires at once (``for = 0``) and one that stays pending (``for = 5m``). The
findings and alert states of ``--once --json``, ``export --once``, a recording (``record`` for
two refreshes, read back with ``replay --once --json``) and the TUI's own Analysis must be equal.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker.types
from prometheus_client.parser import text_string_to_metric_families

from gputui.config.file import load_config
from gputui.derive.analysis import Analysis
from gputui.model.settings import Settings
from gputui.ui.app import GpuTuiApp
from gputui.wiring.compose import build_collector

CONFIG = """
[alerts]
defaults = false

[[alerts.rules]]
id = "util-now"
metric = "gpu_util"
threshold = 50
for = 0
severity = "critical"

[[alerts.rules]]
id = "util-later"
metric = "gpu_util"
threshold = 50
for = "5m"
"""

Facts = tuple[frozenset[tuple[str, ...]], frozenset[tuple[str, ...]]]


def _gputui(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def _from_json(text: str, ours: set[str]) -> Facts:
    doc: dict[str, Any] = json.loads(text)
    findings = {
        (f["kind"], f["subject"], f["severity"]) for f in doc["findings"] if f["subject"] in ours
    }
    alerts = {(a["rule"], a["subject"], a["severity"], a["state"]) for a in doc["alerts"]}
    return frozenset(findings), frozenset(alerts)


def _from_exposition(text: str, ours: set[str]) -> Facts:
    findings: set[tuple[str, ...]] = set()
    alerts: set[tuple[str, ...]] = set()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            if sample.name == "gputui_finding" and labels["subject"] in ours:
                findings.add((labels["kind"], labels["subject"], labels["severity"]))
            elif sample.name == "gputui_alert":
                alerts.add((labels["rule"], labels["subject"], labels["severity"], labels["state"]))
    return frozenset(findings), frozenset(alerts)


def _from_analysis(analysis: Analysis, ours: set[str]) -> Facts:
    findings = {(f.kind, f.subject, f.severity) for f in analysis.findings if f.subject in ours}
    assert analysis.alerts is not None
    alerts = {(a.rule, a.subject, a.severity, a.phase.value) for a in analysis.alerts.active}
    return frozenset(findings), frozenset(alerts)


async def _tui_facts(settings: Settings, ours: set[str], want: Facts) -> Facts:
    app = GpuTuiApp(build_collector(settings), settings, config=load_config(settings.config))
    facts: Facts = (frozenset(), frozenset())
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            deadline = time.monotonic() + 30
            # Two refreshes at least (as recorded); a slow first Docker read may need a third.
            while time.monotonic() < deadline:
                await pilot.pause(0.05)
                if app.analysis is not None and app.loop.delivered >= 2:
                    facts = _from_analysis(app.analysis, ours)
                    if facts == want:
                        break
    finally:
        app.collector.close()
    return facts


async def test_once_export_recording_and_tui_agree(
    run_container: Callable[..., Any], free_run_id: str, tmp_path: Path
) -> None:
    a = run_container(["sleep", "300"], name=f"agree-a-{free_run_id}")
    b = run_container(["sleep", "300"], name=f"agree-b-{free_run_id}")
    idle = run_container(
        ["sleep", "300"],
        start=False,
        name=f"agree-idle-{free_run_id}",
        device_requests=[docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])],
    )
    pids = []
    for container in (a, b):
        container.reload()
        pids.append(int(container.attrs["State"]["Pid"]))
    scenario = tmp_path / "scenario.json"
    scenario.write_text(
        json.dumps(
            {
                "gpus": [
                    {
                        "index": 0,
                        "memory_total_mib": 80000,
                        "memory_used_mib": 4000,
                        "utilization_gpu": 80,
                        "processes": [
                            {"pid": pids[0], "used_memory_mib": 3000, "sm_util": 60},
                            {"pid": pids[1], "used_memory_mib": 1000, "sm_util": 20},
                        ],
                    }
                ]
            }
        )
    )
    config = tmp_path / "config.toml"
    config.write_text(CONFIG)
    ours = {"gpu:0", *(f"container:{c.id}" for c in (a, b, idle)), *(f"pid:{p}" for p in pids)}
    want: Facts = (
        frozenset(
            {
                ("gpu_shared", "gpu:0", "info"),
                ("idle_reservation", f"container:{idle.id}", "warn"),
            }
        ),
        frozenset(
            {
                ("util-now", "gpu0", "critical", "firing"),
                ("util-later", "gpu0", "warning", "pending"),
            }
        ),
    )

    once = _from_json(
        _gputui("--scenario", str(scenario), "--config", str(config), "--once", "--json"), ours
    )
    exported = _from_exposition(
        _gputui("export", "--once", "--scenario", str(scenario), "--config", str(config)), ours
    )
    recording = tmp_path / "rec.jsonl"
    _gputui(
        "record", str(recording), "--count", "2", "--interval", "0.5", "--scenario", str(scenario)
    )
    assert len(recording.read_text().splitlines()) == 2
    replayed = _from_json(
        _gputui("replay", str(recording), "--once", "--json", "--config", str(config)), ours
    )
    settings = Settings(interval=0.2, read_only=True, scenario=scenario, config=config)
    tui = await _tui_facts(settings, ours, want)

    assert once == want
    assert exported == want
    assert replayed == want
    assert tui == want
