"""The habits nvitop, htop and k9s users reach for: SIGINT and a signal menu, tags, GPU scope.

Signals go to real child processes through the real write path
(:func:`gputui.collect.linux.signals.send_signal`, which checks each PID's start time), and the
test reads what each child saw: only the confirmed signal, only to the processes asked for.
"""

from __future__ import annotations

import select
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from gputui.collect.linux import psutil_facts
from gputui.collect.linux.signals import send_signal
from gputui.model.processes import GpuProcess
from gputui.model.snapshot import Snapshot
from gputui.ui.app import GpuTuiApp
from gputui.ui.machine_actions import READ_ONLY_REFUSAL
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.help import HelpScreen
from tests.support.factories import FakeCollector, cid, container, gpu, proc, snapshot
from tests.support.pilot import AppFactory, current_screen, ready

#: A child that reports each signal it is sent and exits 3 on SIGINT (as a training loop whose
#: KeyboardInterrupt handler saves and stops).
CHILD = r"""
import signal, sys, time
def said(signum, frame):
    print(signal.Signals(signum).name, flush=True)
for s in (signal.SIGUSR1, signal.SIGHUP, signal.SIGTERM):
    signal.signal(s, said)
print("ready", flush=True)
try:
    while True:
        time.sleep(0.05)
except KeyboardInterrupt:
    print("SIGINT", flush=True)
    sys.exit(3)
"""


@dataclass
class Child:
    """One real process, with the start time gputui pins it by."""

    proc: subprocess.Popen[str]
    start_time: float

    @property
    def pid(self) -> int:
        return self.proc.pid

    def heard(self, timeout: float = 5.0) -> str:
        """The next signal name the child printed ("" when it printed none in ``timeout`` s)."""
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        return self.proc.stdout.readline().strip() if ready else ""

    def state(self) -> str:
        return Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


@pytest.fixture
def children() -> Iterator[list[Child]]:
    """Three real children (killed at the end)."""
    made: list[Child] = []
    for _ in range(3):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True, bufsize=1
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        made.append(Child(child, psutil_facts.create_time(child.pid) or 0.0))
    yield made
    for kid in made:
        if kid.proc.poll() is None:
            kid.proc.kill()
        kid.proc.wait(5)
        if kid.proc.stdout is not None:
            kid.proc.stdout.close()


class RealSignals(FakeCollector):
    """Prepared snapshots, and signals sent for real (the one write path, start time checked)."""

    def signal_process(self, pid: int, signum: int, start_time: float | None) -> str | None:
        self.signals.append((pid, signum, start_time))
        return send_signal(pid, signum, start_time, host_pid_namespace=lambda: True)


def _real(process: GpuProcess, child: Child) -> GpuProcess:
    info = replace(process.info, start_time=child.start_time)
    return replace(process, info=info)


def scene(kids: list[Child]) -> Snapshot:
    """Two of the children in one container (ranks of one job, GPUs 0 and 1), one on the host."""
    a, b, c = kids
    processes = [
        _real(proc(a.pid, 0, 4000, cid(1), "python3 train.py --rank 0"), a),
        _real(proc(b.pid, 1, 4000, cid(1), "python3 train.py --rank 1"), b),
        _real(proc(c.pid, 1, 900, None, "python3 notebook.py"), c),
    ]
    containers = [
        container(1, "trainer", processes),
        container(3, "reserved-idle", processes, gpu_request=("0",)),
    ]
    return snapshot(gpus=(gpu(0), gpu(1)), processes=processes, containers=containers)


def _last(app: GpuTuiApp) -> str:
    messages = [n.message for n in app._notifications]
    return messages[-1] if messages else ""


async def _select(app: GpuTuiApp, pilot: Pilot[None], key: str) -> None:
    tree = app.main.ctree
    tree.move_cursor(tree.nodes_by_key[key])
    await pilot.pause()
    await pilot.pause()


async def _sent(app: GpuTuiApp, pilot: Pilot[None]) -> None:
    """Wait until the signal worker has reported."""
    for _ in range(200):
        if not [w for w in app.workers if w.group == "signal" and not w.is_finished]:
            break
        await pilot.pause(0.02)
    await pilot.pause()


def _wait_exit(child: Child, timeout: float = 5.0) -> int | None:
    try:
        return child.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        return None


# ----------------------------------------------------------------------- SIGINT and the menu


async def test_i_sends_sigint_after_asking(make_app: AppFactory, children: list[Child]) -> None:
    a, b, c = children
    collector = RealSignals([scene(children)])
    app = make_app(collector)
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await _select(app, pilot, f"p:{a.pid}:0")
        await pilot.press("I")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        assert f"Send SIGINT to PID {a.pid}?" in app.screen.body.plain
        await pilot.press("n")
        await pilot.pause()
        assert collector.signals == [] and a.proc.poll() is None
        await pilot.press("I")
        await pilot.pause()
        await pilot.press("y")
        await _sent(app, pilot)
        assert a.heard() == "SIGINT"
        assert _wait_exit(a) == 3  # KeyboardInterrupt: the job's own clean stop
        assert f"Sent SIGINT to PID {a.pid}." in _last(app)
        assert b.proc.poll() is None and c.proc.poll() is None


async def test_f9_menu_sends_the_picked_signal(make_app: AppFactory, children: list[Child]) -> None:
    from gputui.ui.screens.signal_menu import SIGNAL_MENU, SignalMenuScreen

    a, *_ = children
    collector = RealSignals([scene(children)])
    app = make_app(collector)
    names = [s.name for s, _ in SIGNAL_MENU]
    assert {"SIGTERM", "SIGINT", "SIGHUP", "SIGKILL", "SIGUSR1", "SIGUSR2"} <= set(names)
    assert {"SIGSTOP", "SIGCONT", "SIGQUIT"} <= set(names)
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await _select(app, pilot, f"p:{a.pid}:0")

        async def pick(name: str) -> None:
            await pilot.press("f9")
            await pilot.pause()
            assert isinstance(app.screen, SignalMenuScreen)
            assert str(a.pid) in app.screen.target
            await pilot.press(*["down"] * names.index(name), "enter")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmScreen)  # the menu never sends by itself
            assert f"Send {name} to PID {a.pid}?" in app.screen.body.plain
            await pilot.press("y")
            await _sent(app, pilot)

        await pick("SIGUSR1")
        assert a.heard() == "SIGUSR1"
        await pick("SIGSTOP")
        for _ in range(100):
            if a.state() == "T":
                break
            time.sleep(0.02)
        assert a.state() == "T"
        await pick("SIGCONT")
        for _ in range(100):
            if a.state() != "T":
                break
            time.sleep(0.02)
        assert a.state() != "T"
        await pick("SIGHUP")
        assert a.heard() == "SIGHUP"
        # Escape leaves the menu with nothing sent.
        before = list(collector.signals)
        await pilot.press("f9")
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        assert current_screen(app) is app.main
        assert collector.signals == before
        assert a.proc.poll() is None


async def test_a_reused_pid_is_not_signalled(make_app: AppFactory, children: list[Child]) -> None:
    a, *_ = children
    snap = scene(children)
    stale = [
        replace(p, info=replace(p.info, start_time=p.info.start_time - 50.0))
        if p.pid == a.pid and p.info.start_time is not None
        else p
        for p in snap.processes
    ]
    collector = RealSignals([replace(snap, processes=tuple(stale))])
    app = make_app(collector)
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await _select(app, pilot, f"p:{a.pid}:0")
        await pilot.press("I")
        await pilot.pause()
        await pilot.press("y")
        await _sent(app, pilot)
        assert "now belongs to another process" in _last(app)
        assert a.proc.poll() is None


async def test_read_only_has_no_sigint_menu_or_tags(
    make_app: AppFactory, children: list[Child]
) -> None:
    a, *_ = children
    collector = RealSignals([scene(children)])
    app = make_app(collector, read_only=True)
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await _select(app, pilot, f"p:{a.pid}:0")
        for action in ("signal", "signal_menu", "tag", "untag_all"):
            assert app.check_action(action, ()) is False, action
        for key in ("I", "f9"):
            await pilot.press(key)
            await pilot.pause()
            assert current_screen(app) is app.main, key
            assert _last(app) == READ_ONLY_REFUSAL, key
        await pilot.press("space")
        await pilot.pause()
        assert app.main.tags == {}
        app.action_signal_menu()
        app.action_tag()
        await pilot.pause()
        assert current_screen(app) is app.main and app.main.tags == {}
        assert collector.signals == [] and a.proc.poll() is None


# ---------------------------------------------------------------------- containers and tags


async def test_a_container_row_signals_its_gpu_processes(
    make_app: AppFactory, children: list[Child]
) -> None:
    a, b, c = children
    collector = RealSignals([scene(children)])
    app = make_app(collector)
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await _select(app, pilot, f"c:{cid(1)}")
        await pilot.press("I")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        body = app.screen.body.plain
        assert "SIGINT to 2 processes (the GPU processes of trainer)?" in body
        assert f"PID {a.pid}" in body and f"PID {b.pid}" in body and str(c.pid) not in body
        await pilot.press("y")
        await _sent(app, pilot)
        assert _wait_exit(a) == 3 and _wait_exit(b) == 3
        assert c.proc.poll() is None
        assert f"Sent SIGINT to 2 processes: PIDs {a.pid}, {b.pid}." in _last(app)
        # A container without a GPU process: nothing to signal, and it says so.
        await _select(app, pilot, f"c:{cid(3)}")
        await pilot.press("T")
        await pilot.pause()
        assert current_screen(app) is app.main
        assert "has no GPU process to signal" in _last(app)


async def test_space_tags_and_the_signal_goes_to_every_tagged_process(
    make_app: AppFactory, children: list[Child]
) -> None:
    a, b, c = children
    collector = RealSignals([scene(children)])
    app = make_app(collector)
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        tree = app.main.ctree
        # Space on a container keeps the tree's meaning: expand / collapse, no tag.
        await _select(app, pilot, f"c:{cid(1)}")
        node = tree.nodes_by_key[f"c:{cid(1)}"]
        assert node.is_expanded
        await pilot.press("space")
        await pilot.pause()
        assert not node.is_expanded and app.main.tags == {}
        await pilot.press("space")
        await pilot.pause()
        assert node.is_expanded
        # Space on a process tags it and moves down (htop), a second Space tags the next one.
        await _select(app, pilot, f"p:{a.pid}:0")
        await pilot.press("space")
        await pilot.pause()
        assert set(app.main.tags) == {a.pid}
        assert app.main.selection()[1] is not None
        assert app.main.selection()[1].pid == b.pid
        await _select(app, pilot, f"p:{c.pid}:1")
        await pilot.press("space")
        await pilot.pause()
        assert set(app.main.tags) == {a.pid, c.pid}
        # The mark is on the tagged rows, the count on the status line.
        line = tree.render_label(
            tree.nodes_by_key[f"p:{a.pid}:0"], tree.rich_style, tree.rich_style
        )
        assert line.plain.startswith("*")
        line = tree.render_label(
            tree.nodes_by_key[f"p:{b.pid}:1"], tree.rich_style, tree.rich_style
        )
        assert not line.plain.startswith("*")
        assert "2 tagged" in app.main.cpane.status_text
        await pilot.press("2")
        await pilot.pause()
        table = app.main.table
        assert table.tagged == {a.pid, c.pid}
        strip = table._row_strip(table.get_row_index(f"{a.pid}:0"))
        assert f"*{a.pid}" in strip.text
        assert "2 tagged" in str(app.main.proc_status.content)
        # One signal, one question naming both, both signalled; the untagged rank runs on.
        await pilot.press("I")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        body = app.screen.body.plain
        assert "SIGINT to 2 processes (the tagged processes)?" in body
        assert f"PID {a.pid}" in body and f"PID {c.pid}" in body and str(b.pid) not in body
        await pilot.press("y")
        await _sent(app, pilot)
        assert _wait_exit(a) == 3 and _wait_exit(c) == 3
        assert b.proc.poll() is None
        # u untags all.
        await pilot.press("u")
        await pilot.pause()
        assert app.main.tags == {} and table.tagged == frozenset()
        assert "tagged" not in str(app.main.proc_status.content)


async def test_space_in_a_filter_types_a_space(make_app: AppFactory, children: list[Child]) -> None:
    app = make_app(RealSignals([scene(children)]))
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await pilot.press("2", "slash", *"train", "space", *"py")
        await pilot.pause()
        assert app.main.filter_input.value == "train py"
        assert app.main.tags == {}


async def test_tags_of_exited_processes_go(make_app: AppFactory, children: list[Child]) -> None:
    a = children[0]
    first = scene(children)
    gone = replace(first, processes=tuple(p for p in first.processes if p.pid != a.pid))
    collector = RealSignals([first, gone])
    app = make_app(collector)
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await _select(app, pilot, f"p:{a.pid}:0")
        await pilot.press("space")
        await pilot.pause()
        assert set(app.main.tags) == {a.pid}
        from tests.support.pilot import push

        await push(pilot, gone)
        assert app.main.tags == {}


# ----------------------------------------------------------------------- who is on GPU N?


async def test_filter_gpu_tokens_and_the_gpu_column(
    make_app: AppFactory, children: list[Child]
) -> None:
    a, b, c = children
    app = make_app(RealSignals([scene(children)]))
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await pilot.press("2", "slash", *"gpu:1")
        await pilot.pause()
        table = app.main.table
        assert sorted(table.row_keys()) == sorted([f"{b.pid}:1", f"{c.pid}:1"])
        app.main.filter_input.value = "gpu:0,1"
        await pilot.pause()
        assert table.row_count == 3
        app.main.filter_input.value = "gpu:1 notebook"
        await pilot.pause()
        assert table.row_keys() == [f"{c.pid}:1"]
        # The Containers tab: the same token keeps what runs on (or reserved) GPU 0.
        await pilot.press("escape", "1", "slash", *"gpu:0")
        await pilot.pause()
        tree = app.main.ctree
        keys = set(tree.nodes_by_key)
        assert f"p:{a.pid}:0" in keys and f"p:{b.pid}:1" not in keys
        assert f"p:{c.pid}:1" not in keys
        assert f"c:{cid(3)}" in keys  # the idle reservation of GPU 0 answers "who is on GPU 0"


async def test_sort_by_gpu(make_app: AppFactory, children: list[Child]) -> None:
    a = children[0]
    app = make_app(RealSignals([scene(children)]))
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await pilot.press("2")
        table = app.main.table
        for _ in range(10):
            if table.sort_label.startswith("GPU ") and "mem" not in table.sort_label:
                break
            await pilot.press("s")
        assert table.sort_label == "GPU ▲"
        assert table.row_keys()[0] == f"{a.pid}:0"
        await pilot.press("1")
        tree = app.main.ctree
        for _ in range(12):
            if tree.sort.key == "gpu":
                break
            await pilot.press("s")
        assert tree.sort_label == "GPU ▲"


async def test_f_and_a_click_scope_the_tree_and_table_to_one_gpu(
    make_app: AppFactory, children: list[Child]
) -> None:
    a, b, c = children
    app = make_app(RealSignals([scene(children)]))
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        main = app.main
        tree, table = main.ctree, main.table
        await pilot.press("f")
        await pilot.pause()
        assert main.gpu_scope == 0
        assert f"p:{a.pid}:0" in tree.nodes_by_key and f"p:{b.pid}:1" not in tree.nodes_by_key
        assert "GPU 0 only" in main.cpane.status_text
        assert main.gpus.cards[0].has_class("-scoped") and not main.gpus.cards[1].has_class(
            "-scoped"
        )
        await pilot.press("f")
        await pilot.pause()
        assert main.gpu_scope == 1
        await pilot.press("2")
        await pilot.pause()
        assert sorted(table.row_keys()) == sorted([f"{b.pid}:1", f"{c.pid}:1"])
        assert "GPU 1 only" in str(main.proc_status.content)
        await pilot.press("f")  # after the last GPU: every GPU again
        await pilot.pause()
        assert main.gpu_scope is None and table.row_count == 3
        # A click on a GPU scopes to it; Escape (no filter open) goes back to every GPU.
        await pilot.click("#gpu-1")
        await pilot.pause()
        assert main.gpu_scope == 1 and table.row_count == 2
        await pilot.press("escape")
        await pilot.pause()
        assert main.gpu_scope is None and table.row_count == 3
        await pilot.click("#gpu-0")
        await pilot.pause()
        await pilot.click("#gpu-0")  # the scoped GPU again: every GPU
        await pilot.pause()
        assert main.gpu_scope is None


# ------------------------------------------------------------ collapse, help, quit, :, paths


async def test_collapse_all_and_expand_all(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        tree = app.main.ctree
        expandable = [n for n in tree.root.children if n.allow_expand]
        assert any(n.is_expanded for n in expandable)
        await pilot.press("C")
        await pilot.pause()
        assert not any(n.is_expanded for n in expandable)
        await pilot.press("C")
        await pilot.pause()
        assert all(n.is_expanded for n in expandable)
        await pilot.press("2", "C")  # the Containers tab's key: it says where it acts
        await pilot.pause()
        assert "Containers tab" in _last(app)


@pytest.mark.parametrize("key", ["f1", "h", "question_mark"])
async def test_f1_and_h_open_the_help(make_app: AppFactory, key: str) -> None:
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await pilot.press(key)
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        texts = {text: keys for keys, text in app.screen.rows}
        assert texts["List every key"] == "?/f1/h"
        assert "f9" in texts[next(t for t in texts if t.startswith("Pick a signal"))]
        await pilot.press("escape")


async def test_f10_quits(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await pilot.press("f10")
        await pilot.pause()
    assert app.return_code == 0


async def test_colon_opens_the_command_palette(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await pilot.press("colon")
        await pilot.pause()
        assert app.screen.__class__.__name__ == "CommandPalette"
        await pilot.press(*"Cycle sort", "enter")
        await pilot.pause(0.3)
        assert app.main.ctree.sort_index == 1
        # In a filter, ":" is a character.
        await pilot.press("2", "slash", *"a:b")
        await pilot.pause()
        assert app.main.filter_input.value == "a:b"


async def test_breadcrumbs_on_the_drill_down_screens(
    make_app: AppFactory, children: list[Child]
) -> None:
    from gputui.ui.widgets.crumbs import SEPARATOR as SEP

    a, _, c = children
    app = make_app(RealSignals([scene(children)]))
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await _select(app, pilot, f"p:{a.pid}:0")
        await pilot.press("enter")
        await pilot.pause()
        screen: Any = current_screen(app)
        assert screen.crumbs.text == f"Containers{SEP}trainer{SEP}PID {a.pid}"
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("e")
        await pilot.pause()
        screen = current_screen(app)
        assert screen.crumbs.text == f"Containers{SEP}trainer{SEP}Evidence"
        await pilot.press("escape", "2")
        await pilot.pause()
        for _ in range(5):
            process = app.main.selection()[1]
            if process is not None and process.pid == c.pid:
                break
            await pilot.press("j")
        await pilot.press("enter")
        await pilot.pause()
        screen = current_screen(app)
        assert screen.crumbs.text == f"Processes{SEP}host{SEP}PID {c.pid}"


async def test_sigint_and_f9_on_the_drill_down_act_on_its_process(
    make_app: AppFactory, children: list[Child]
) -> None:
    from gputui.ui.screens.signal_menu import SignalMenuScreen

    a, b, c = children
    collector = RealSignals([scene(children)])
    app = make_app(collector)
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await _select(app, pilot, f"p:{b.pid}:1")
        await pilot.press("space")  # a tag elsewhere does not redirect the drill-down's keys
        await _select(app, pilot, f"p:{a.pid}:0")
        await pilot.press("enter")
        await pilot.pause()
        detail = current_screen(app)
        await pilot.press("f9")
        await pilot.pause()
        assert isinstance(app.screen, SignalMenuScreen)
        assert app.screen.target.startswith(f"PID {a.pid} ")
        await pilot.press("escape")
        await pilot.pause()
        assert current_screen(app) is detail
        await pilot.press("I")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        assert f"Send SIGINT to PID {a.pid}?" in app.screen.body.plain
        await pilot.press("y")
        await _sent(app, pilot)
        assert _wait_exit(a) == 3
        assert b.proc.poll() is None and c.proc.poll() is None


async def test_a_gpu_nobody_is_on_says_so(make_app: AppFactory, children: list[Child]) -> None:
    three = replace(scene(children), gpus=(gpu(0), gpu(1), gpu(2)))
    app = make_app(RealSignals([three]))
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        main = app.main
        await pilot.press("f", "f", "f")
        await pilot.pause()
        assert main.gpu_scope == 2
        assert not main.ctree.root.children
        assert main.cpane.empty.text.startswith("Nothing runs on GPU 2 (of 2 containers).")
        await pilot.press("2")
        await pilot.pause()
        assert main.table.row_count == 0
        assert main.proc_empty.text.startswith("Nothing runs on GPU 2 (of 3 GPU processes).")
        await pilot.press("escape")
        await pilot.pause()
        assert main.table.row_count == 3 and main.proc_empty.text == ""
