"""End to end: the TUI's ``x`` key against real containers through a scenario-mode collector.

NVML is replaced by a scenario naming the containers' real host PIDs; Docker, /proc and exec are
real. The test image ships a fake ``/usr/bin/nvidia-smi`` (see tests/conftest.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.widgets import Static

from gputui.model.settings import Settings
from gputui.ui.app import GpuTuiApp
from gputui.ui.screens.exec_modal import ExecScreen
from gputui.wiring.compose import build_collector
from tests.support.pilot import ready


def _host_pid(container: Any) -> int:
    deadline = time.monotonic() + 10
    while True:
        top = container.top()
        column = top["Titles"].index("PID")
        pids = sorted(int(row[column]) for row in top["Processes"])
        if pids or time.monotonic() > deadline:
            return pids[0]
        time.sleep(0.1)


def _scenario(tmp_path: Path, pids: list[int]) -> Path:
    path = tmp_path / "scenario.json"
    path.write_text(
        json.dumps(
            {
                "nvml": "ok",
                "driver_version": "580.159.04",
                "cuda_driver_version": "13.0",
                "gpus": [
                    {
                        "index": 0,
                        "uuid": "GPU-57d57e22-be4b-9496-673e-11cc7638ed19",
                        "name": "NVIDIA H200",
                        "memory_total_mib": 143771,
                        "memory_used_mib": 20000,
                        "utilization_gpu": 50,
                        "processes": [{"pid": pid, "used_memory_mib": 1000} for pid in pids],
                    }
                ],
            }
        )
    )
    return path


async def _run_x(app: GpuTuiApp, pilot: Any, container_id: str) -> tuple[Any, str]:
    tree = app.main.ctree
    for _ in range(100):
        if f"c:{container_id}" in tree.nodes_by_key:
            break
        await pilot.pause(0.05)
    tree.move_cursor(tree.nodes_by_key[f"c:{container_id}"])
    await pilot.pause()
    await pilot.pause()
    await pilot.press("x")
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, ExecScreen)
    for _ in range(400):
        if screen.result is not None:
            break
        await pilot.pause(0.05)
    assert screen.result is not None
    text = str(screen.query_one("#exec-output", Static).content)
    await pilot.press("escape")
    await pilot.pause()
    return screen.result, text


async def test_x_runs_real_exec_fake_smi_missing_binary_and_stopped(
    run_container: Callable[..., Any], free_run_id: str, tmp_path: Path
) -> None:
    good = run_container(["sleep", "300"], name=f"ui-smi-{free_run_id}")
    bare = run_container(
        ["sh", "-c", "rm /usr/bin/nvidia-smi; exec sleep 300"], name=f"ui-nosmi-{free_run_id}"
    )
    doomed = run_container(["sleep", "300"], name=f"ui-stop-{free_run_id}")
    pids = [_host_pid(c) for c in (good, bare, doomed)]
    settings = Settings(scenario=_scenario(tmp_path, pids), interval=60.0, exec_timeout=20.0)
    collector = build_collector(settings)
    app = GpuTuiApp(collector, settings)
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await ready(pilot, tries=500)
            result, text = await _run_x(app, pilot, good.id)
            assert result.exit_code == 0, text
            assert "NVIDIA-SMI 580.159.04" in text
            assert "NSpid" in text  # ran inside the container's PID namespace
            assert "PID namespace" in text

            result, text = await _run_x(app, pilot, bare.id)
            assert result.exit_code != 0
            assert result.error, text
            assert "nvidia-smi" in text

            doomed.stop(timeout=1)  # stopped after the snapshot showed it running
            result, text = await _run_x(app, pilot, doomed.id)
            assert result.exit_code != 0
            assert result.error, text
    finally:
        collector.close()
