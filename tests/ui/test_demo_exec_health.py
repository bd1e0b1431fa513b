"""The demo's nvidia-smi follows the selected container; exec output scrolls sideways; the
demo's health paths read as on the simulated host."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.containers import ScrollableContainer
from textual.widgets import Static

from gputui.collect.standins import demo
from gputui.model.containers import ExecResult
from gputui.model.settings import Settings
from gputui.ui.screens.exec_modal import PID_NAMESPACE_NOTE, ExecRun, ExecScreen
from gputui.wiring.compose import build_collector


def _smi(container_id: str, reads: int = 3) -> str:
    containers = demo.DemoContainers()
    for _ in range(reads):
        containers.read()
    result = containers.exec(container_id, ["nvidia-smi"], 5.0)
    assert result.exit_code == 0
    return result.stdout


def _gpu_rows(text: str) -> list[int]:
    return [int(line[1:5]) for line in text.splitlines() if "NVIDIA H200" in line]


def _process_rows(text: str) -> list[tuple[int, int, str]]:
    rows = []
    for line in text.splitlines():
        cells = line.strip("|").split()
        if len(cells) == 7 and cells[1:3] == ["N/A", "N/A"] and cells[4] == "C":
            rows.append((int(cells[0]), int(cells[3]), cells[6]))
    return rows


def test_demo_exec_of_a_gpu1_container_shows_gpu1_and_its_own_processes() -> None:
    text = _smi(demo.BERT)
    assert text.splitlines()[0] == "(simulated: demo machine; nvidia-smi was not run)"
    assert _gpu_rows(text) == [1]
    assert "00000000:2A:00.0" in text
    # Its one process, by in-container PID 1 with its own 18432 MiB: not GPU 0's trainer.
    assert _process_rows(text) == [(1, 1, "18432MiB")]
    # Every table line has the width of nvidia-smi's (the header row is no longer short).
    widths = {len(line) for line in text.splitlines()[1:] if line}
    assert widths == {91}


def test_demo_exec_of_the_trainer_follows_the_refresh() -> None:
    early, later = _smi(demo.TRAINER, 1), _smi(demo.TRAINER, 9)
    assert _gpu_rows(early) == [0]
    assert _process_rows(early) == [(0, 1, "63488MiB"), (0, 57, "2048MiB")]
    # GPU 0's memory and utilisation move with the scenario, like the monitor's GPU card.
    assert early.splitlines()[8] != later.splitlines()[8]


class _Host(App[None]):
    def compose(self) -> ComposeResult:
        yield Static("monitor")

    def on_mount(self) -> None:
        run = ExecRun(
            demo.BERT, "bert", 5.0, result=ExecResult(("nvidia-smi",), 0, stdout=_smi(demo.BERT))
        )
        self.push_screen(ExecScreen(run))


async def test_exec_output_scrolls_sideways_at_80x24() -> None:
    app = _Host()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        scroll = app.screen.query_one("#exec-scroll", ScrollableContainer)
        output = app.screen.query_one("#exec-output", Static)
        # The 91-column table is not wrapped: the output is wider than the view, which scrolls.
        assert output.size.width >= 91
        assert scroll.size.width < 91
        assert scroll.max_scroll_x > 0
        text = str(output.content)
        assert "| GPU  Name                 Persistence-M |" in text
        scroll.scroll_to(x=scroll.max_scroll_x, animate=False)
        await pilot.pause()
        assert scroll.scroll_x == scroll.max_scroll_x
    assert "in parentheses after it in the tree, e.g. 48211 (7)" in PID_NAMESPACE_NOTE
    assert "brackets" not in PID_NAMESPACE_NOTE


def test_demo_health_paths_read_as_on_the_simulated_host() -> None:
    collector = build_collector(Settings(demo=True), once=True)
    try:
        checks = collector.collect().health
    finally:
        collector.close()
    texts = [
        text
        for check in checks
        for text in (check.summary, *check.details, check.fix or "", check.subject or "")
    ]
    assert not [t for t in texts if "nonexistent" in t or "gputui-demo" in t or "/tmp" in t]
    by_id = {check.id: check for check in checks}
    assert "/etc/docker/daemon.json: readable" in by_id["docker.nvidia_runtime"].details
    assert by_id["nvml.version_mismatch"].summary == (
        "Kernel module and driver library agree (580.159.04)"
    )
    assert "/dev/char NVIDIA symlinks: 0" in by_id["cgroup.nvml_hazard"].details
