"""A command ``x`` started in a container does not outlive what gputui does with it.

Docker cannot stop an exec'd process, so a flooding ``nvidia-smi`` cut at 1 MiB kept running
(six presses of ``x``: six copies, ~130 % of two cores, minutes after gputui quit). Now gputui
stops the exec's process (the host PID the engine names, checked to be still the exec's) when it
cuts the output, when the deadline passes, and when the source closes. Real containers, the real
exec path; the container's ``nvidia-smi`` is replaced by the command under test.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gputui.collect.docker.source import DockerSource
from gputui.model.settings import Settings
from gputui.ui.app import GpuTuiApp
from gputui.ui.screens.exec_modal import ExecScreen
from gputui.wiring.compose import build_collector
from tests.support.pilot import ready

#: Replaces the image's fake nvidia-smi: a flood (cut at 1 MiB), or a command that never ends.
FLOOD = "#!/bin/sh\nexec yes runaway-flood-line\n"
SILENT = "#!/bin/sh\nexec sleep 1000\n"


def _container(run_container: Callable[..., Any], name: str, script: str) -> Any:
    container = run_container(["sleep", "300"], name=name, network_mode="none")
    # printf in the container: the script's bytes reach the file verbatim, mode kept (755).
    quoted = script.replace("\n", "\\n")
    code, _ = container.exec_run(["sh", "-c", f"printf '{quoted}' > /usr/bin/nvidia-smi"])
    assert code == 0
    return container


def _running(container: Any, word: str) -> list[str]:
    """The container's processes whose command line has ``word`` (``docker top``)."""
    top = container.top()
    column = top["Titles"].index("CMD")
    return [row[column] for row in top["Processes"] if word in row[column]]


def _until_none_run(container: Any, word: str, s: float = 10.0) -> None:
    deadline = time.monotonic() + s
    while (left := _running(container, word)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"still running in the container: {left}"


def _source(free_run_id: str) -> DockerSource:
    source = DockerSource(label=f"gputui-test={free_run_id}")
    assert source.read().status.ok
    return source


def test_a_cut_flood_and_a_timeout_stop_the_command(
    run_container: Callable[..., Any], free_run_id: str
) -> None:
    flood = _container(run_container, f"runaway-flood-{free_run_id}", FLOOD)
    silent = _container(run_container, f"runaway-silent-{free_run_id}", SILENT)
    source = _source(free_run_id)
    try:
        result = source.exec(flood.id, ["nvidia-smi"], 20.0)
        assert result.output_cut_bytes == 1 << 20
        assert "gputui stopped it in the container" in (result.error or ""), result.error
        _until_none_run(flood, "yes")

        result = source.exec(silent.id, ["nvidia-smi"], 1.5)
        assert result.timed_out
        assert "gputui stopped it in the container" in (result.error or ""), result.error
        _until_none_run(silent, "sleep 1000")
    finally:
        source.close()


def test_closing_the_source_stops_an_exec_in_flight(
    run_container: Callable[..., Any], free_run_id: str
) -> None:
    silent = _container(run_container, f"runaway-quit-{free_run_id}", SILENT)
    source = _source(free_run_id)
    results: list[Any] = []
    thread = threading.Thread(
        target=lambda: results.append(source.exec(silent.id, ["nvidia-smi"], 60.0)), daemon=True
    )
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not _running(silent, "sleep 1000") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _running(silent, "sleep 1000")
    finally:
        source.close()  # what quitting the app does (run_tui closes the collector)
    _until_none_run(silent, "sleep 1000")
    thread.join(10)  # the stream ended with the process: the exec returns
    assert not thread.is_alive()


def _scenario(tmp_path: Path, container: Any) -> Path:
    """One GPU whose one process is the container's: the tree shows and selects it."""
    top = container.top()
    pid = int(top["Processes"][0][top["Titles"].index("PID")])
    path = tmp_path / "scenario.json"
    gpu = {
        "index": 0,
        "uuid": "GPU-57d57e22-be4b-9496-673e-11cc7638ed19",
        "name": "NVIDIA H200",
        "memory_total_mib": 143771,
        "memory_used_mib": 1000,
        "utilization_gpu": 0,
        "processes": [{"pid": pid, "used_memory_mib": 1000}],
    }
    doc = {"nvml": "ok", "driver_version": "580.159.04", "cuda_driver_version": "13.0"}
    path.write_text(json.dumps({**doc, "gpus": [gpu]}))
    return path


async def test_six_presses_of_x_on_a_flood_leave_nothing_running(
    run_container: Callable[..., Any], free_run_id: str, tmp_path: Path
) -> None:
    flood = _container(run_container, f"runaway-x-{free_run_id}", FLOOD)
    settings = Settings(scenario=_scenario(tmp_path, flood), interval=60.0, exec_timeout=20.0)
    collector = build_collector(settings)
    app = GpuTuiApp(collector, settings)
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await ready(pilot, tries=500)
            tree = app.main.ctree
            for _ in range(200):
                if f"c:{flood.id}" in tree.nodes_by_key:
                    break
                await pilot.pause(0.05)
            tree.move_cursor(tree.nodes_by_key[f"c:{flood.id}"])
            await pilot.pause()
            await pilot.pause()
            for press in range(6):
                await pilot.press("x")
                await pilot.pause()
                screen = app.screen
                notes = [n.message for n in app._notifications]
                assert isinstance(screen, ExecScreen), (press, notes)
                for _ in range(600):
                    if screen.result is not None:
                        break
                    await pilot.pause(0.05)
                assert screen.result is not None
                assert screen.result.output_cut_bytes == 1 << 20
                assert "gputui stopped it" in (screen.result.error or "")
                await pilot.press("escape")
                await pilot.pause()
            _until_none_run(flood, "yes")
    finally:
        collector.close()
