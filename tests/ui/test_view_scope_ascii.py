"""The monitor under nvitop's ``--only``, ``--user``, ``--pid`` and ``--ascii`` (demo machine).

The scope is applied on the collector's thread (the analysis), so every view draws only what is
in scope: the GPU panel, the container tree, the process table and the users; ``--ascii``
draws every line, gputui's glyphs and Textual's alike, in ASCII of the same width.
"""

from __future__ import annotations

import pytest

from gputui.model.settings import ViewScope
from tests.support.factories import demo_app
from tests.support.pilot import ready, screen_lines, tree_keys


def _pids(lines: list[str], candidates: tuple[int, ...]) -> set[int]:
    return {pid for pid in candidates if any(f" {pid} " in f" {line} " for line in lines)}


DEMO_PIDS = (48211, 48290, 50102, 3121, 51234, 52001)


@pytest.mark.parametrize("size", [(120, 30), (80, 24)])
async def test_ascii_draws_every_line_in_ascii(size: tuple[int, int]) -> None:
    plain, ascii_ = demo_app(refreshes=5), demo_app(refreshes=5, ascii=True)
    async with plain.run_test(size=size) as pilot:
        await ready(pilot)
        unicode_lines = screen_lines(plain)
    async with ascii_.run_test(size=size) as pilot:
        await ready(pilot)
        lines = screen_lines(ascii_)
        for tab in ("2", "3", "4"):  # processes, health, users
            await pilot.press(tab)
            await pilot.pause()
            lines += screen_lines(ascii_)
    assert any(not line.isascii() for line in unicode_lines)  # bars, borders, markers
    bad = [line for line in lines if not line.isascii()]
    assert not bad, "\n".join(bad)
    assert any("#" in line and "util" in line for line in lines)  # the gauges are drawn


async def test_only_shows_those_gpus_and_what_runs_on_them() -> None:
    app = demo_app(refreshes=5, scope=ViewScope(gpus=(1,)))
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        snapshot = app.main.snapshot
        assert snapshot is not None
        assert [g.index for g in snapshot.gpus] == [1]
        lines = screen_lines(app)
        assert any(" 1 H200" in line for line in lines)
        assert not any(" 0 H200" in line or " 2 H200" in line for line in lines)
        tree = "\n".join(lines)
        assert "bert" in tree and "llm-trainer-1" not in tree and "vllm-server" not in tree
        await pilot.press("2")
        await pilot.pause()
        assert _pids(screen_lines(app), DEMO_PIDS) == {50102, 3121}
    # What is judged is still the whole machine: the alert engine saw every GPU.
    assert app.analyzer.scope is not None


async def test_user_and_pid_narrow_the_process_and_container_views() -> None:
    app = demo_app(refreshes=5, scope=ViewScope(users=("root",), pids=(48211, 51234, 3121)))
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        snapshot = app.main.snapshot
        assert snapshot is not None and len(snapshot.gpus) == 4  # GPUs are not narrowed
        keys = tree_keys(app)
        names = {u.info.id: u.info.name for u in snapshot.containers}
        assert sorted(names[k.removeprefix("c:")] for k in keys) == [
            "llm-trainer-1",
            "vllm-server",
        ]
        trainer = next(u for u in snapshot.containers if u.info.name == "llm-trainer-1")
        assert trainer.pids == (48211,)  # its worker 48290 is not asked for
        await pilot.press("2")
        await pilot.pause()
        assert _pids(screen_lines(app), DEMO_PIDS) == {48211, 51234}  # alice's 3121: not root


@pytest.mark.parametrize("size", [(160, 50), (60, 15)])
async def test_the_header_says_what_the_views_are_narrowed_to(size: tuple[int, int]) -> None:
    app = demo_app(refreshes=5, scope=ViewScope(gpus=(0, 2), users=("root",)))
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        header = app.main.header.text
        wide = " ONLY GPU 0,2 · user root "
        assert (wide if size[0] >= 160 else " ONLY ") in header, header
    plain = demo_app(refreshes=5)
    async with plain.run_test(size=size) as pilot:
        await ready(pilot)
        assert "ONLY" not in plain.main.header.text
