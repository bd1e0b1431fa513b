"""Figures read in turn: the status notes, the drill-down's age and the help line say so."""

from __future__ import annotations

from dataclasses import replace

import pytest
from textual.pilot import Pilot

from gputui.model.processes import GpuProcess
from gputui.model.snapshot import Snapshot
from gputui.ui.app import GpuTuiApp
from gputui.ui.screens.help import HelpScreen
from gputui.ui.screens.process_detail import ProcessDetailScreen
from tests.support.factories import FakeCollector, cid, container, proc, snapshot, standard
from tests.support.pilot import AppFactory, current_screen, push, ready, screen_lines

T0 = 1_000_000.0
SIZES = [(80, 24), (160, 50)]
PROCESS_NOTE = "CPU/RSS of 2 processes read in turn: up to 3 s old"
CONTAINER_NOTE = "CPU/memory of 2 containers read in turn: up to 4 s old"


def _stamped(process: GpuProcess, age: float) -> GpuProcess:
    """The process with CPU/RSS read ``age`` seconds before the snapshot."""
    return replace(process, info=replace(process.info, sampled_at=T0 - age))


def in_turn() -> Snapshot:
    """The standard machine with the CPU/RSS of PIDs 611 (3 s) and 700 (2 s) read earlier."""
    base = standard(T0)
    ages = {611: 3.0, 700: 2.0}
    processes = tuple(_stamped(p, ages[p.pid]) if p.pid in ages else p for p in base.processes)
    return replace(base, processes=processes)


def busy_containers() -> Snapshot:
    """Three running containers, two of them with CPU/memory read earlier (4 s and 1.5 s)."""
    processes = [proc(611, 0, 2000, cid(1)), proc(700, 1, 1000, cid(2))]
    containers = [
        container(1, "trainer-a", processes, stats_sampled_at=T0 - 4.0),
        container(2, "inference", processes, stats_sampled_at=T0 - 1.5),
        container(3, "web", processes, gpu_request=None),
    ]
    return snapshot(T0, processes=processes, containers=containers)


def _line(app: GpuTuiApp, needle: str) -> str | None:
    """The drawn screen line holding ``needle``, right-stripped; None when none does."""
    for line in screen_lines(app):
        if needle in line:
            return line.rstrip()
    return None


async def _processes_tab(pilot: Pilot[None]) -> GpuTuiApp:
    app = await ready(pilot)
    await pilot.press("2")
    await pilot.pause()
    return app


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_process_status_line_says_figures_were_read_in_turn(
    make_app: AppFactory, size: tuple[int, int]
) -> None:
    app = make_app(FakeCollector([in_turn()]))
    async with app.run_test(size=size) as pilot:
        await _processes_tab(pilot)
        assert PROCESS_NOTE in str(app.main.proc_status.content)
        line = _line(app, "GPU processes")
        assert line is not None
        assert "6 of 6 GPU processes" in line
        assert len(line) <= size[0]
        if size[0] >= 160:
            # Room for all of it: the note, then the key hint.
            assert f"·  {PROCESS_NOTE}   (s/S: sort  /: filter)" in line
        else:
            # Cut with an ellipsis on its one line, never wrapped onto the table's titles.
            assert "CPU/RSS of 2 processes" in line
            assert line.endswith("…")
            assert _line(app, "up to 3 s old") is None


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_containers_tab_says_figures_were_read_in_turn(
    make_app: AppFactory, size: tuple[int, int]
) -> None:
    app = make_app(FakeCollector([busy_containers()]))
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        assert app.main.active_tab == "containers"
        assert app.main.tree_note_text == CONTAINER_NOTE
        line = _line(app, "CPU/memory of")
        assert line is not None and line.strip() == CONTAINER_NOTE
        assert len(line) <= size[0]
        # The note sits above the tree, whose rows are all still drawn.
        for name in ("trainer-a", "inference", "other containers"):
            assert _line(app, name) is not None, name


async def test_long_container_note_is_cut_at_80_columns(make_app: AppFactory) -> None:
    base = busy_containers()
    app = make_app(FakeCollector([base]))
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        many = replace(
            base,
            containers=tuple(
                replace(u, info=replace(u.info, stats_sampled_at=T0 - 2.0)) for u in base.containers
            ),
        )
        await push(pilot, many)
        note = app.main.tree_note_text
        assert note == "CPU/memory of 3 containers read in turn: up to 2 s old"
        line = _line(app, "CPU/memory of")
        assert line is not None and line.strip() == note  # fits 80 columns whole
        # In a narrower terminal it is cut on its one line.
        await pilot.resize_terminal(44, 24)
        await pilot.pause()
        line = _line(app, "CPU/memory of")
        assert line is not None and line.endswith("…") and len(line) <= 44


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_no_note_while_every_figure_is_current(
    make_app: AppFactory, size: tuple[int, int]
) -> None:
    app = make_app(FakeCollector([in_turn()]))
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        # Container figures first read in turn, then current again: the note goes.
        await push(pilot, busy_containers())
        assert app.main.tree_note_text is not None
        await push(pilot, standard(T0 + 1))
        assert app.main.tree_note_text is None
        assert not app.main.tree_note.display
        assert _line(app, "read in turn") is None
        await pilot.press("2")
        await pilot.pause()
        status = str(app.main.proc_status.content)
        assert status.endswith("6 of 6 GPU processes   (s/S: sort  /: filter)"), status
        assert not app.main.proc_status.has_class("-noted")
        assert _line(app, "read in turn") is None


async def _open_detail(app: GpuTuiApp, pilot: Pilot[None], pid: int) -> ProcessDetailScreen:
    for key in ("k",) * 10 + ("j",) * 10:
        _, process = app.main.selection()
        if process is not None and process.pid == pid:
            break
        await pilot.press(key)
        await pilot.pause()
    _, process = app.main.selection()
    assert process is not None and process.pid == pid
    await pilot.press("enter")
    await pilot.pause()
    screen = current_screen(app)
    assert isinstance(screen, ProcessDetailScreen), screen
    return screen


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_process_detail_says_how_old_cpu_and_rss_are(
    make_app: AppFactory, size: tuple[int, int]
) -> None:
    app = make_app(FakeCollector([in_turn()]))
    async with app.run_test(size=size) as pilot:
        await _processes_tab(pilot)
        screen = await _open_detail(app, pilot, 611)
        body = str(screen.body.content)
        assert "CPU/RSS read 3s ago" in body
        line = _line(app, "RSS")
        assert line is not None and "12%" in line and "CPU/RSS read 3s ago" in line
        # Read by this refresh: nothing said.
        await push(pilot, standard(T0 + 1))
        assert "read" not in str(screen.body.content).split("RSS", 1)[1].split("\n", 1)[0]
        assert _line(app, "CPU/RSS read") is None
        await pilot.press("escape")
        await pilot.pause()
        screen = await _open_detail(app, pilot, 612)
        assert "CPU/RSS read" not in str(screen.body.content)


async def test_help_explains_figures_read_in_turn(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        help_screen = current_screen(app)
        assert isinstance(help_screen, HelpScreen)
        help_screen.query_one("#help-dialog").scroll_end(animate=False)
        await pilot.pause()
        text = "\n".join(screen_lines(app))
        assert "“read in turn”: beyond 300 GPU processes (50 running containers)" in text
