"""Actions that show what can hold secrets (container logs) are gone with ``hide_sensitive``
(``--no-logs``, what ``gputui serve``'s read-only tabs run with), as write actions are with
``--read-only``: the action table's policy, one place for keys, footer, palette and help.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from textual.pilot import Pilot

from gputui.cli.args import run_settings
from gputui.cli.main import build_parser
from gputui.collect.collector import Collector
from gputui.collect.docker.source import DockerSource
from gputui.collect.linux.proc_reader import ProcSource
from gputui.collect.standins.scenario import ScenarioSource
from gputui.model.settings import Settings
from gputui.ui.action_table import ACTIONS
from gputui.ui.app import GpuTuiApp
from gputui.ui.screens.logs import LogsScreen
from tests.support.pilot import AppFactory, current_screen, ready
from tests.ui.test_action_table import _surfaces

SCENARIO: dict[str, Any] = {
    "nvml": "ok",
    "driver_version": "580.159.04",
    "gpus": [
        {
            "index": 0,
            "uuid": "GPU-57d57e22-be4b-9496-673e-11cc7638ed19",
            "name": "NVIDIA H200",
            "memory_total_mib": 143771,
            "memory_used_mib": 0,
            "utilization_gpu": 0,
            "processes": [],
        }
    ],
}


def test_no_logs_flag_sets_hide_sensitive() -> None:
    parser = build_parser()
    assert run_settings(parser.parse_args(["--no-logs", "--read-only"])).hide_sensitive is True
    assert run_settings(parser.parse_args(["--read-only"])).hide_sensitive is False


async def test_hide_sensitive_removes_every_sensitive_action_everywhere(
    make_app: AppFactory,
) -> None:
    app = make_app(read_only=True, hide_sensitive=True)
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        keys, footer, palette, texts = await _surfaces(pilot)
        sensitive = [row for row in ACTIONS if row.sensitive]
        assert [row.name for row in sensitive] == ["logs"]
        for row in sensitive:
            assert app.check_action(row.action_name, ()) is False
            assert row.action not in keys and row.action not in footer, row
            assert row.title not in palette and row.help not in texts, row
        for row in ACTIONS:  # what only reads and shows no secrets stays
            if not (row.write or row.sensitive or row.replay or row.action == "resume"):
                assert row.action in keys and row.help in texts, row


async def _wait(pilot: Pilot[None], check: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + 30
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await pilot.pause(0.05)


@pytest.mark.parametrize("hide", [True, False])
async def test_l_opens_no_logs_of_a_real_container(
    run_container: Callable[..., Any], free_run_id: str, hide: bool
) -> None:
    """A real container printing a secret: with ``hide_sensitive``, ``l`` on it opens nothing
    (nor does the action reached some other way); without, the same key opens its logs."""
    container = run_container(
        ["sh", "-c", "echo API_KEY=s3cr3t; exec sleep 300"], name=f"ui-nologs-{free_run_id}"
    )
    collector = Collector(
        ScenarioSource(SCENARIO),
        ProcSource(),
        DockerSource(label=f"gputui-test={free_run_id}"),
        mode="scenario",
        read_only=True,
        health=None,
    )
    app = GpuTuiApp(collector, Settings(interval=60.0, read_only=True, hide_sensitive=hide))
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await ready(pilot, tries=500)
            key = f"c:{container.id}"
            tree = app.main.ctree
            await _wait(pilot, lambda: key in tree.nodes_by_key, f"{key} in the tree")
            node = tree.nodes_by_key[key]
            if node.parent is not None and not node.parent.is_expanded:
                node.parent.expand()
                await pilot.pause()
            tree.move_cursor(node)
            await pilot.pause()
            selected, _ = app.main.selection()
            assert selected is not None and selected.info.id == container.id
            await pilot.press("l")
            await pilot.pause()
            await pilot.pause()
            assert isinstance(current_screen(app), LogsScreen) is not hide
            if hide:
                app.machine.logs()  # the action itself, as if reached some other way
                await pilot.pause()
                assert current_screen(app) is app.main
    finally:
        collector.close()
