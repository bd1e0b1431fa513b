"""The process drill-down: Enter on a process, its history, identity, exit, parents, signals."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from gputui.derive.process_history import process_identity
from gputui.model.settings import Settings
from gputui.model.status import SourceStatus
from gputui.ui.app import GpuTuiApp
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.main import MainScreen
from gputui.ui.screens.process_detail import ProcessDetailScreen
from gputui.ui.widgets.crumbs import SEPARATOR
from tests.support.factories import (
    FakeCollector,
    demo_app,
    proc,
    snapshot,
    standard,
)
from tests.support.pilot import AppFactory, current_screen, push, ready, screen_lines


def _messages(app: GpuTuiApp) -> list[str]:
    return [n.message for n in app._notifications]


async def _select_pid(app: GpuTuiApp, pilot: Pilot[None], pid: int) -> None:
    """Move the cursor (j / k, as a user does) until the selection is ``pid``."""
    for key in ("k",) * 40 + ("j",) * 40:
        _, process = app.main.selection()
        if process is not None and process.pid == pid:
            return
        await pilot.press(key)
        await pilot.pause()
    raise AssertionError(f"PID {pid} not reachable with j / k")


def _detail(app: GpuTuiApp) -> ProcessDetailScreen:
    screen = current_screen(app)
    assert isinstance(screen, ProcessDetailScreen), screen
    return screen


async def _open(app: GpuTuiApp, pilot: Pilot[None], pid: int, tab: str = "2") -> None:
    await pilot.press(tab)
    await pilot.pause()
    await _select_pid(app, pilot, pid)
    await pilot.press("enter")
    await pilot.pause()


async def _settle(pilot: Pilot[None], done: Callable[[], bool], tries: int = 100) -> None:
    """Wait (bounded) for a worker's result to land."""
    for _ in range(tries):
        if done():
            return
        await pilot.pause(0.02)
    raise AssertionError("the worker's result never landed")


def _values(screen: ProcessDetailScreen, metric: str) -> tuple[float, ...]:
    """A sparkline's samples (un-narrowed: each refresh changes them)."""
    return screen.series[metric].values


def _text(screen: ProcessDetailScreen) -> str:
    return "\n".join(str(part.content) for part in (screen.title_line, screen.body, screen.command))


async def test_enter_on_a_process_row_opens_its_details(make_app: AppFactory) -> None:
    later = standard(1_000_010.0)
    app = make_app(FakeCollector([standard(1_000_000.0)]))
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        await _open(app, pilot, 611)
        screen = _detail(app)
        text = _text(screen)
        for fact in (
            "Process  611  python3  root",
            "611  on the host,  1  in its container",  # host and in-container PID
            "trainer-a  running  010101010101  lab:latest",
            "lab/trainer",
            "GPU 0",
            "13.0GiB",
            "SM 30%",
            "(running for 11d13h)",  # elapsed, to the snapshot's time
            "python3 /lab/load.py 12 120",
        ):
            assert fact in text, fact
        assert _values(screen, "mem") == (13290.0 * 1024**2,)
        assert _values(screen, "sm") == (30.0,)
        # It refreshes with the snapshots: one more sample each.
        await push(pilot, later)
        assert _values(screen, "sm") == (30.0, 30.0)
        assert "last 10s of 5 min" in str(screen.history_title.content)
        # w changes the window here too.
        await pilot.press("w")
        await pilot.pause()
        assert "of 30 min" in str(screen.history_title.content)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(current_screen(app), MainScreen)


async def test_enter_in_the_tree_opens_a_process_and_expands_a_container(
    make_app: AppFactory,
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await ready(pilot)
        container_row, process = app.main.selection()
        assert container_row is not None and process is None  # the first container's node
        assert app.check_action("process_detail", ()) is None
        expanded = app.main.ctree.cursor_node
        assert expanded is not None and expanded.is_expanded
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(current_screen(app), MainScreen)
        assert not expanded.is_expanded  # Enter on a container still collapses it
        assert _messages(app) == []  # and says nothing
        await pilot.press("enter")
        await pilot.pause()
        assert expanded.is_expanded
        await _select_pid(app, pilot, 612)
        assert app.check_action("process_detail", ()) is True
        # The History tab charts the tree's selection without showing it: Enter opens nothing.
        await pilot.press("4")
        await pilot.pause()
        assert app.check_action("process_detail", ()) is None
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(current_screen(app), MainScreen)
        await pilot.press("1")
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert _detail(app).pid == 612
        assert "7  in its container" in _text(_detail(app))


async def test_enter_in_the_filter_still_submits_it(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("2", "slash", "s", "e", "r", "v", "e")
        await pilot.pause()
        assert app.main.filter_input.has_focus
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(current_screen(app), MainScreen)
        assert not app.main.filter_input.has_focus
        assert app.main.table.filter_text == "serve"


async def test_it_follows_the_process_by_identity_and_keeps_it_after_exit(
    make_app: AppFactory,
) -> None:
    app = make_app(FakeCollector([standard(1_000_000.0)]))
    async with app.run_test(size=(160, 50), notifications=True) as pilot:
        await ready(pilot)
        await _open(app, pilot, 700)
        screen = _detail(app)
        # PID 700 again, but started later: another process under a reused PID.
        base = standard(1_000_010.0)
        reused = [
            replace(p, info=replace(p.info, start_time=5_000.0)) if p.pid == 700 else p
            for p in base.processes
        ]
        await push(pilot, replace(base, processes=tuple(reused)))
        assert screen.exited_at == 1_000_000.0
        # /proc has no PID 700 that started then: the check read says it exited.
        await _settle(pilot, lambda: screen.exit_confirmed)
        title = str(screen.title_line.content)
        assert "EXITED: last seen" in title and "last known figures" in title
        assert "python3 serve.py --port 8000" in _text(screen)  # the last figures stay
        assert "4.0GiB" in _text(screen)
        assert "the process has exited: no signals" in str(screen.keys_line.content)
        await pilot.press("T")
        await pilot.pause()
        assert isinstance(current_screen(app), ProcessDetailScreen)  # no dialog
        assert "PID 700 has exited: nothing to signal." in _messages(app)
        # History is kept for the viewed process (and stays after it exits, within the window).
        assert process_identity(700, 1700.0) in app.process_history


async def test_a_process_that_only_left_the_gpus_is_gone_not_exited(
    make_app: AppFactory,
) -> None:
    me = os.getpid()
    from gputui.collect.linux.proc_reader import ProcSource

    start = ProcSource().read([me])[me].start_time
    mine = replace(proc(me, 0, 100, None, "pytest"), info=replace(proc(me).info, start_time=start))
    first = snapshot(1_000_000.0, processes=[mine])
    app = make_app(FakeCollector([first]))
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await _open(app, pilot, me)
        screen = _detail(app)
        # The real parents of this test's process, read from /proc on a worker.
        await _settle(pilot, lambda: screen.chain is not None)
        assert screen.chain is not None
        assert screen.chain[0].pid == os.getppid()
        assert f"{os.getppid()}" in _text(screen)
        # NVML lost: no process list, which says nothing about this process.
        lost = {"nvml": SourceStatus("nvml", False, "driver gone")}
        await push(pilot, snapshot(1_000_005.0, sources=lost))
        assert screen.exited_at is None
        await push(pilot, snapshot(1_000_010.0))  # no GPU processes any more
        await _settle(
            pilot,
            lambda: (
                screen._exit_checked
                and screen._chain_worker is not None
                and screen._chain_worker.is_finished
            ),
        )
        await pilot.pause()
        assert screen.exited_at == 1_000_000.0
        assert not screen.exit_confirmed  # it still runs: it only freed its GPU memory
        assert "GONE from the GPUs" in str(screen.title_line.content)
        assert screen.target() is not None  # signals still offered (start time checked)


async def test_signals_from_the_details_act_on_its_process(make_app: AppFactory) -> None:
    collector = FakeCollector()
    app = make_app(collector)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await _open(app, pilot, 612, tab="1")
        assert app.check_action("signal", (15,)) is True
        assert "T SIGTERM  K SIGKILL" in str(_detail(app).keys_line.content)
        await pilot.press("K")
        await pilot.pause()
        dialog = current_screen(app)
        assert isinstance(dialog, ConfirmScreen)
        assert dialog.title_text == "SIGKILL process 612"
        await pilot.press("y")
        await pilot.pause()
        await _settle(pilot, lambda: bool(collector.signals))
        assert collector.signals == [(612, 9, 1612.0)]
        assert isinstance(current_screen(app), ProcessDetailScreen)


async def test_read_only_details_have_no_signals(make_app: AppFactory) -> None:
    collector = FakeCollector()
    app = make_app(collector, read_only=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await _open(app, pilot, 611)
        screen = _detail(app)
        assert app.check_action("signal", (15,)) is False
        assert app.check_action("signal", (9,)) is False
        assert "signals are off (read-only)" in str(screen.keys_line.content)
        titles = {c.title for c in app.get_system_commands(screen)}
        assert "SIGTERM process" not in titles and "SIGKILL process" not in titles
        await pilot.press("T", "K")
        await pilot.pause()
        assert isinstance(current_screen(app), ProcessDetailScreen)
        app.action_signal(15)  # reached anyway: refused in code
        await pilot.pause()
        assert collector.signals == []
        assert isinstance(current_screen(app), ProcessDetailScreen)


async def test_palette_entry_and_the_tabs_without_a_process(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        titles = {c.title for c in app.get_system_commands(app.main)}
        assert "Process details" in titles
        assert app.refusal("process_detail") is not None  # a container node is selected
        await pilot.press("3")
        await pilot.pause()
        why = app.refusal("process_detail")
        assert why is not None and "press 1 or 2" in why
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(current_screen(app), MainScreen)


async def test_hostile_command_and_names_are_sanitised(make_app: AppFactory) -> None:
    evil = "python3 -c x\x1b]0;pwned\x07\x1b[31m\nrm -rf /\u202eevil\u200b " + "a" * 20_000
    hostile = proc(4242, 0, 100, None, evil, user="r\x1b[2Joot")
    app = make_app(FakeCollector([snapshot(processes=[hostile])]))
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await _open(app, pilot, 4242)
        screen = _detail(app)
        text = _text(screen)
        for bad in ("\x1b", "\x07", "\u202e", "\u200b", "\n rm"):
            assert bad not in text
        assert "rm -rf /?evil?" in text
        assert len(str(screen.command.content)) <= 8192  # bounded, and it wraps
        lines = screen_lines(app)
        assert all("\x1b" not in line for line in lines)


@pytest.mark.parametrize("size", [(80, 24), (160, 50)])
async def test_layout_at_small_and_large_terminals(
    make_app: AppFactory, size: tuple[int, int]
) -> None:
    app = make_app()
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        await _open(app, pilot, 611)
        await pilot.pause()
        lines = screen_lines(app)
        sep = SEPARATOR.strip()
        assert lines[0].split() == ["Processes", sep, "trainer-a", sep, "PID", "611"]
        assert lines[1].lstrip().startswith("Process  611  python3")
        assert any(line.lstrip().startswith("GPU memory") for line in lines)
        assert any(line.lstrip().startswith("SM %") for line in lines)
        assert any("T SIGTERM" in line and "I SIGINT" in line for line in lines)
        assert all(len(line) == size[0] for line in lines)


async def test_demo_and_hidden_processes_do_not_read_proc(make_app: AppFactory) -> None:
    app = make_app(FakeCollector(mode="demo"))
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await _open(app, pilot, 611)
        screen = _detail(app)
        assert screen.chain_reader is None
        assert "not read: a demo's or a recording's PIDs" in _text(screen)
    hidden = proc(5150, 0, 100, None, "x")
    hidden = replace(hidden, info=replace(hidden.info, proc_hidden=True, command=None))
    app = make_app(FakeCollector([snapshot(processes=[hidden])]))
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await _open(app, pilot, 5150)
        screen = _detail(app)
        assert screen.chain_reader is None
        assert "hidden by /proc (hidepid)" in _text(screen)


def test_snapshot_process_detail(snap_compare: Any) -> None:
    """The demo's trainer process, with its history filled from earlier refreshes."""
    app = demo_app()  # its analyzer recorded the earlier refreshes' per-process history

    async def run_before(pilot: Any) -> None:
        await ready(pilot)
        await pilot.press("2")
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(100, 30), run_before=run_before)


@pytest.mark.docker
async def test_a_real_container_process_with_its_parents(
    run_container: Callable[..., Any], free_run_id: str, tmp_path: Path
) -> None:
    """A container's process found through the engine and /proc: container, PIDs, parents."""
    box = run_container(["sh", "-c", "sleep 300 & wait"], name=f"detail-{free_run_id}")
    deadline = time.monotonic() + 10
    pids: list[int] = []
    while len(pids) < 2 and time.monotonic() < deadline:
        top = box.top()
        column = top["Titles"].index("PID")
        pids = sorted(int(row[column]) for row in top["Processes"])
        time.sleep(0.1)
    shell, child = pids
    scenario = {
        "nvml": "ok",
        "gpus": [
            {
                "index": 0,
                "name": "NVIDIA H200",
                "memory_total_mib": 143771,
                "memory_used_mib": 3000,
                "processes": [{"pid": child, "used_memory_mib": 2000, "sm_util": 40}],
            }
        ],
    }
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(scenario))
    from gputui.wiring.compose import build_collector

    settings = Settings(scenario=path, interval=60.0)
    app = GpuTuiApp(build_collector(settings), settings)
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        for _ in range(100):  # the engine's answer may land a refresh late
            snap = app.main.snapshot
            usage = snap.container(box.id) if snap is not None else None
            if usage is not None and usage.known_to_engine:
                break
            app.loop.wake()
            await pilot.pause(0.05)
        await _open(app, pilot, child)
        screen = _detail(app)
        await _settle(pilot, lambda: screen.chain is not None, tries=250)
        assert screen.chain is not None
        assert screen.chain[0].pid == shell  # sh started it
        assert any(link.pid == 1 for link in screen.chain) or screen.chain_note
        text = _text(screen)
        assert f"detail-{free_run_id}" in text
        assert f"{child}  on the host," in text  # and its own PID in the container
        assert "sleep 300" in text
        box.kill()
        box.wait(timeout=30)
        await push(
            pilot, replace(screen.snapshot, taken_at=screen.snapshot.taken_at + 5, processes=())
        )
        await _settle(pilot, lambda: screen.exit_confirmed, tries=250)
        assert "EXITED" in str(screen.title_line.content)


async def test_enter_in_the_command_palette_picks_its_entry(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("2")
        await pilot.pause()
        await _select_pid(app, pilot, 611)
        # A process is selected, yet Enter in the palette runs the palette's entry.
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Show Health tab")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert isinstance(current_screen(app), MainScreen)
        assert app.main.active_tab == "health"
        # And the palette's own entry opens the drill-down of the selection.
        await pilot.press("2")
        await pilot.pause()
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Process details")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert _detail(app).pid == 611
