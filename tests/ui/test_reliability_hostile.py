"""Reliability review: hostile container and process strings render inert on every view."""

from __future__ import annotations

import re

from conftest import AppFactory
from pilot_helpers import ready, screen_lines
from textual.pilot import Pilot
from textual.widgets import Static
from ui_factories import FakeCollector, cid, container, proc, snapshot

from gputui.model import ExecResult
from gputui.ui.app import GpuTuiApp
from gputui.ui.screens.evidence import EvidenceScreen
from gputui.ui.screens.exec_modal import ExecScreen

#: C0 and C1 control characters and DEL: none may reach a rendered cell.
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


async def _settle(pilot: Pilot[None]) -> None:
    await pilot.pause()
    await pilot.pause()


# ----------------------------------------------------------------------- 6. hostile strings

MARKUP = "[bold red]x[/]"
ANSI = "\x1b[31m"
OSC = "\x1b]0;pwned\x07"
C0_C1 = "\x01\x07\x08\x0b\x0c\x0d\x1b\x7f\x85\x9b"
LONG = "L" * 20_000
#: What surrogateescape makes of non-UTF-8 bytes (psutil, os.fsdecode): shown as U+FFFD.
BAD_BYTES = b"\xff\xfe".decode("utf-8", "surrogateescape")


def hostile(tag: str) -> str:
    return f"{MARKUP}{tag}{BAD_BYTES}{ANSI}{OSC}{C0_C1}{LONG}"


def _hostile_snapshot() -> object:
    processes = [
        proc(611, 0, 4096, cid(1), hostile("cmd"), user=hostile("user")[:32]),
        proc(612, 1, 1024, cid(1), f"{MARKUP} {ANSI}python3{OSC} {BAD_BYTES}"),
    ]
    containers = [
        container(
            1,
            hostile("name"),
            processes,
            image=hostile("image"),
            compose_project=hostile("proj"),
            compose_service=hostile("svc"),
            k8s_pod=hostile("pod"),
            k8s_namespace=hostile("ns"),
        ),
        container(4, hostile("other"), processes, gpu_request=None, image=hostile("img2")),
    ]
    return snapshot(processes=processes, containers=containers)


def _assert_inert(app: GpuTuiApp, where: str) -> str:
    lines = screen_lines(app)
    for line in lines:
        assert not CONTROL.search(line), (where, repr(line[:200]))
        assert not any(0xD800 <= ord(c) <= 0xDFFF for c in line), where
    svg = app.export_screenshot()
    assert "\x1b" not in svg and not CONTROL.search(svg.replace("\n", "")), where
    text = "\n".join(lines)
    assert "pwned" not in text, where  # the OSC sequence is stripped whole, never shown
    return text


async def test_hostile_strings_render_inert_everywhere(make_app: AppFactory) -> None:
    exec_result = ExecResult(("nvidia-smi",), 0, stdout=hostile("stdout") + "\nok\n")
    collector = FakeCollector([_hostile_snapshot()], exec_result=exec_result)  # type: ignore[list-item]
    app = make_app(collector)
    async with app.run_test(size=(200, 50)) as pilot:
        await ready(pilot)
        await _settle(pilot)
        tree = app.main.ctree
        tree.nodes_by_key["g:others"].expand()
        await _settle(pilot)
        text = _assert_inert(app, "containers tab")
        assert f"{MARKUP}name\ufffd" in text  # markup shown literally, bad bytes as U+FFFD
        assert f"{MARKUP}cmd\ufffd" in text
        assert f"{MARKUP}other" in text
        for node in tree.nodes_by_key.values():  # the labels themselves, off screen too
            assert not CONTROL.search(node.label.plain), repr(node.label.plain[:120])
            assert len(node.label.plain) < 1000  # 20,000 characters never reach a row

        await pilot.press("2")
        await _settle(pilot)
        text = _assert_inert(app, "processes tab")
        assert f"{MARKUP}cmd\ufffd" in text or f"{MARKUP}name" in text, text

        await pilot.press("1")
        await _settle(pilot)
        tree.move_cursor(tree.nodes_by_key[f"c:{cid(1)}"])
        await _settle(pilot)
        await pilot.press("e")
        await _settle(pilot)
        assert isinstance(app.screen, EvidenceScreen)
        text = _assert_inert(app, "evidence view")
        assert f"{MARKUP}name\ufffd" in text
        await pilot.press("escape")
        await _settle(pilot)

        tree.move_cursor(tree.nodes_by_key[f"c:{cid(1)}"])
        await _settle(pilot)
        await pilot.press("x")
        for _ in range(100):
            if isinstance(app.screen, ExecScreen) and app.screen.result is not None:
                break
            await pilot.pause(0.02)
        assert isinstance(app.screen, ExecScreen)
        title = app.screen.query_one(".dialog-title", Static).render()
        assert not CONTROL.search(str(title))
        assert f"{MARKUP}name\ufffd" in str(title)
        text = _assert_inert(app, "exec modal")
        assert f"nvidia-smi in {MARKUP}name" in text
        assert f"{MARKUP}stdout" in text
