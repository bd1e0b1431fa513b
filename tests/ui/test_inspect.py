"""The inspect screen (``i``): a container's configuration and every one of its processes,
against real containers (Docker, its cgroups and /proc are real; NVML is a scenario), and its
snapshot on prepared facts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.pilot import Pilot

from gputui.collect.collector import Collector
from gputui.collect.docker.source import DockerSource
from gputui.collect.linux.proc_reader import ProcSource
from gputui.collect.standins.scenario import ScenarioSource
from gputui.model.containers import ContainerDetails, ContainerProcess, ContainerProcesses, Mount
from gputui.model.settings import Settings
from gputui.ui.app import GpuTuiApp
from gputui.ui.screens.inspect import InspectScreen
from tests.support import factories
from tests.support.pilot import current_screen, ready, screen_lines, select_container, wait_until

SCENARIO: dict[str, Any] = {"nvml": "ok", "driver_version": "580.159.04", "gpus": []}
SECRET = "s3cr3t-value-never-on-screen"


def _app(free_run_id: str, **settings: Any) -> tuple[GpuTuiApp, Collector]:
    collector = Collector(
        ScenarioSource(SCENARIO),
        ProcSource(),
        DockerSource(label=f"gputui-test={free_run_id}"),
        mode="scenario",
        read_only=bool(settings.get("read_only", False)),
        health=None,
    )
    return GpuTuiApp(collector, Settings(interval=60.0, **settings)), collector


def _text(app: GpuTuiApp) -> str:
    screen = current_screen(app)
    assert isinstance(screen, InspectScreen)
    return f"{screen.details_body.render()}\n{screen.processes_body.render()}"


@pytest.mark.parametrize("read_only", [False, True], ids=["rw", "read-only"])
async def test_i_shows_mounts_labels_env_names_and_every_process_refreshing(
    run_container: Callable[..., Any], free_run_id: str, tmp_path: Path, read_only: bool
) -> None:
    container = run_container(
        ["sh", "-c", "sleep 301 & sleep 302 & wait"],
        name=f"ui-inspect-{free_run_id}",
        network_mode="none",
        environment={"HF_TOKEN": SECRET},
        labels={"team": "vision\x1b[31m"},
        restart_policy={"Name": "always"},
        volumes={str(tmp_path): {"bind": "/data", "mode": "ro"}},
    )
    app, collector = _app(free_run_id, read_only=read_only)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await ready(pilot, tries=500)
            await select_container(app, pilot, container.id)
            await pilot.press("i")
            await pilot.pause()
            screen = current_screen(app)
            assert isinstance(screen, InspectScreen)
            await wait_until(pilot, lambda: screen.details is not None, "the details")
            await wait_until(pilot, lambda: screen.processes is not None, "the processes")
            text = _text(app)
            assert "HF_TOKEN" in text and SECRET not in text
            assert f"{tmp_path} → /data  ro" in text
            assert "team = vision" in text and "\x1b" not in text
            assert "restart     always" in text and "networks    none" in text
            assert "sleep 301" in text and "sleep 302" in text and "sh -c" in text
            assert "Processes  3 · every 2 s" in text
            # A process started later shows on a later refresh, with its in-container PID.
            container.exec_run(["sleep", "303"], detach=True)

            def started() -> bool:
                return "sleep 303" in _text(app)

            await wait_until(pilot, started, "the new process", seconds=10)
            assert any("Inspect" in line for line in screen_lines(app))
            assert SECRET not in "\n".join(screen_lines(app))
            await pilot.press("escape")
            await pilot.pause()
            assert current_screen(app) is app.main
    finally:
        collector.close()


async def test_a_source_without_inspect_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo's containers are simulated: ``i`` says its engine does not inspect."""
    app = factories.demo_app(refreshes=3)
    async with app.run_test(size=(120, 30)) as pilot:
        await ready(pilot)
        await pilot.press("i")
        await pilot.pause()
        assert current_screen(app) is app.main
        notes = [n.message for n in app._notifications]
        assert any("does not offer container inspect" in n for n in notes), notes


# ------------------------------------------------------------- the screen on its own

DETAILS = ContainerDetails(
    id=factories.cid(1),
    image="nvcr.io/nvidia/pytorch:24.05-py3",
    command=("torchrun", "--nproc-per-node=2", "train.py", "--epochs", "90"),
    created_at=1_773_480_000.0,
    started_at=1_773_480_030.0,
    restart_policy="on-failure:3",
    mounts=(
        Mount("bind", "/srv/datasets/imagenet", "/data", True),
        Mount("volume", "trainer-ckpt", "/checkpoints", False),
        Mount("bind", "/dev/shm", "/dev/shm", False),
    ),
    labels=(
        ("com.docker.compose.project", "vision"),
        ("com.docker.compose.service", "trainer"),
        ("gputui.owner", "alice"),
    ),
    env_names=("CUDA_VISIBLE_DEVICES", "HF_TOKEN", "NCCL_DEBUG", "PATH", "WANDB_API_KEY"),
    networks=("bridge",),
    more=(("labels", 9),),
)
PROCESSES = ContainerProcesses(
    processes=(
        ContainerProcess(4101, 1, "root", 0.0, 12 << 20, "torchrun --nproc-per-node=2 train.py"),
        ContainerProcess(4188, 27, "root", 98.5, 6 << 30, "python train.py --local-rank=0", "R"),
        ContainerProcess(4189, 28, "root", 97.1, 6 << 30, "python train.py --local-rank=1", "R"),
        ContainerProcess(4230, 61, "1000", None, 3 << 20, "sh -c tail -f /dev/null", "S"),
    ),
    total=4,
)


class InspectApp(App[None]):
    """Only the inspect screen, on prepared facts."""

    def __init__(self) -> None:
        super().__init__()
        usage = factories.container(1, "trainer", image=DETAILS.image)
        self.inspect = InspectScreen(
            usage,
            "docker",
            lambda: DETAILS,
            lambda: PROCESSES,
            crumbs=("Containers", "trainer", "Inspect"),
        )

    def on_mount(self) -> None:
        self.push_screen(self.inspect)


@pytest.fixture
def utc_times(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The snapshot's times in UTC, whatever the machine's zone."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("size", [(80, 24), (160, 50)], ids=["80x24", "160x50"])
def test_snapshot_inspect_screen(snap_compare: Any, size: tuple[int, int], utc_times: None) -> None:
    app = InspectApp()

    async def run_before(pilot: Pilot[None]) -> None:
        await wait_until(
            pilot,
            lambda: app.inspect.details is not None and app.inspect.processes is not None,
            "the facts",
        )
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)
