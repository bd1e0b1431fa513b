"""Write screenshots/*.svg: every tab, the evidence view and help on the demo machine, the
120-column layout, a first run on a machine without a GPU, and the fleet view.

Headless and deterministic: the demo runs on a fixed clock, the history is filled from the
earlier refreshes, and the app then re-applies the last refresh (which changes nothing).

    python scripts/screenshots.py [OUT_DIR]
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import threading
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import Footer

from gputui.collect.collector import Collector
from gputui.collect.docker.logs import LogLine
from gputui.collect.linux.parent_chain import ParentLink
from gputui.collect.sources import ContainerOwner
from gputui.collect.standins import demo
from gputui.collect.standins.scenario import ScenarioSource
from gputui.model.containers import ContainerDetails, ContainerProcesses, ExecResult
from gputui.model.settings import Settings
from gputui.model.snapshot import Snapshot
from gputui.ui.app import GpuTuiApp
from gputui.wiring import demo_host

SIZES = {"narrow": (80, 24), "wide": (160, 50)}
#: Extra sizes for some views: (file stem, size name, size).
EXTRA_SIZES: tuple[tuple[str, str, tuple[int, int]], ...] = (
    ("containers", "medium", (120, 30)),
    ("processes", "medium", (120, 30)),
)
#: (file stem, keys pressed from a fresh start)
VIEWS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("containers", ()),
    ("processes", ("2",)),
    ("health", ("3",)),
    ("history", ("j", "j", "4")),
    ("alerts", ("5",)),
    # GPU use per user (a uid without a host name shown with its container) and per project.
    ("users", ("6",)),
    # Five lines down: the inference server sharing GPU 1 with the host, restarted 3 times.
    ("evidence", ("j", "j", "j", "j", "j", "e")),
    # The drill-down of the first process of the Processes tab (the vLLM server).
    ("process", ("2", "enter")),
    ("help", ("question_mark",)),
    # The demo's simulated week per owner (its own store, read on the tab's worker).
    ("ledger", ("7",)),
    # The same inference server's logs (the demo's canned lines, see DEMO_LOGS).
    ("logs", ("j", "j", "j", "j", "j", "l")),
)
#: Recorded Prometheus answers for a 12-host fleet (the fleet view needs no Prometheus then).
FLEET_ANSWERS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "fleet-answers.json"
#: Enough refreshes (one per simulated second) for the 5-minute GPU-utilization alert to fire.
REFRESHES = 330


#: What the logs screen shows on the demo machine: (stream, seconds after the first, text).
DEMO_LOGS: tuple[tuple[str, float, str], ...] = (
    ("stdout", 0.0, "INFO  Starting inference server (model bert-large-uncased, tp=2)"),
    ("stdout", 0.4, "INFO  CUDA devices: 0,1 (NVIDIA H200, 141 GiB each)"),
    ("stderr", 1.2, "WARN  NCCL_P2P_LEVEL not set; using the driver's default"),
    ("stdout", 9.8, "INFO  Loaded weights in 2.1 s (1.3 GiB across 2 GPUs)"),
    ("stdout", 10.1, "INFO  KV cache: 18.2 GiB per GPU, 74,112 blocks"),
    ("stdout", 10.6, "INFO  Listening on 0.0.0.0:8000"),
    ("stdout", 31.0, "INFO  POST /v1/chat/completions 200 1.84s tokens=512"),
    ("stdout", 33.5, "INFO  POST /v1/chat/completions 200 2.10s tokens=640"),
    ("stderr", 47.2, "ERROR CUDA out of memory: tried to allocate 2.00 GiB (GPU 1)"),
    ("stderr", 47.2, "ERROR Request 7f3a aborted; batch size lowered to 24"),
    ("stdout", 52.9, "INFO  POST /v1/chat/completions 200 1.97s tokens=498"),
    ("stdout", 61.3, "INFO  Throughput 1,912 tokens/s, 41 running, 3 waiting"),
)


class CannedLogs:
    """A logs stream of :data:`DEMO_LOGS` that then stays open, following, until closed."""

    tty = False

    def __init__(self) -> None:
        self._sent = False
        self._closed = threading.Event()

    def read(self) -> list[LogLine] | None:
        if not self._sent:
            self._sent = True
            start = datetime(2026, 3, 14, 9, 12, 0, tzinfo=timezone.utc).timestamp()
            return [
                LogLine(
                    "stderr" if stream == "stderr" else "stdout",
                    text,
                    datetime.fromtimestamp(start + at, timezone.utc).strftime(
                        "%Y-%m-%dT%H:%M:%S.%fZ"
                    ),
                )
                for stream, at, text in DEMO_LOGS
            ]
        self._closed.wait()
        return None

    def close(self) -> None:
        self._closed.set()


class ReplayCollector:
    """Hands the app the last demo refresh forever; actions go to a demo collector."""

    mode = "demo"
    player = None

    def __init__(self, last: Snapshot, live: Collector) -> None:
        self.last = last
        self.live = live

    def collect(self) -> Snapshot:
        return self.last

    def request_health(self) -> None:
        pass

    def exec_in_container(
        self, container_id: str, argv: Sequence[str], timeout_s: float
    ) -> ExecResult:
        return self.live.exec_in_container(container_id, argv, timeout_s)

    def interactive_exec_argv(self, container_id: str, argv: Sequence[str]) -> list[str] | None:
        return None

    def signal_process(self, pid: int, signum: int, start_time: float | None) -> str | None:
        return self.live.signal_process(pid, signum, start_time)

    def open_logs(self, container_id: str, *, tail: int, follow: bool) -> CannedLogs:
        return CannedLogs()

    def open_container_logs(self, container_id: str, *, tail: int, follow: bool) -> CannedLogs:
        return CannedLogs()

    def container_owner(self, container_id: str) -> ContainerOwner | None:
        return self.live.container_owner(container_id)

    def parent_chain(
        self, pid: int, start_time: float | None
    ) -> tuple[tuple[ParentLink, ...], str | None]:
        return self.live.parent_chain(pid, start_time)

    def container_details(self, container_id: str) -> ContainerDetails:
        return self.live.container_details(container_id)

    def container_processes(self, container_id: str) -> ContainerProcesses:
        return self.live.container_processes(container_id)

    def container_action(self, container_id: str, action: str) -> str | None:
        return "not on the demo machine"

    def close(self) -> None:
        self.live.close()


def demo_collector(scenario: dict[str, object] | None = None) -> Collector:
    clock = demo.demo_clock()
    return Collector(
        ScenarioSource(demo.DEMO_SCENARIO if scenario is None else scenario, wall=clock),
        demo.DemoProcesses(),
        demo.DemoContainers(),
        mode="demo",
        health=demo_host.demo_health,
        hostname="demo-gpu-node",
        clock=clock,
    )


async def shoot(
    out: Path,
    snapshots: list[Snapshot],
    name: str,
    keys: tuple[str, ...],
    sizes: dict[str, tuple[int, int]] = SIZES,
) -> None:
    for size_name, size in sizes.items():
        collector = ReplayCollector(snapshots[-1], demo_collector())
        app = GpuTuiApp(collector, Settings(demo=True, interval=1.0))
        for snapshot in snapshots[:-1]:
            # History, trends and alert durations, as if it had run.
            app.analyzer.analyse(snapshot)
        async with app.run_test(size=size) as pilot:
            for _ in range(200):
                if app.main.snapshot is not None and app.main.health_title:
                    break
                await pilot.pause(0.02)
            await pilot.pause()
            if keys:
                await pilot.press(*keys)
            await pilot.pause(0.2)
            await _footer_drawn(pilot)
            await _ledger_read(pilot)
            print(app.save_screenshot(filename=f"{name}-{size_name}.svg", path=str(out)))
        collector.close()


async def _ledger_read(pilot: Pilot[None]) -> None:
    """Wait (6 s at most) until a Ledger tab that is shown has read its store."""
    from gputui.ui.widgets.ledger_view import LedgerView

    views = [v for v in pilot.app.screen.query(LedgerView) if v.display and v.is_on_screen]
    for _ in range(300):
        if all(v.board is not None and not v.loading for v in views):
            break
        await pilot.pause(0.02)
    await pilot.pause()


async def _footer_drawn(pilot: Pilot[None]) -> None:
    """Wait (5 s at most) until the screen's footer shows its keys.

    A screen opened by a key is imported then, and its footer fills in a refresh after it shows.
    """
    for _ in range(250):
        footers = list(pilot.app.screen.query(Footer))
        if all(footer.children for footer in footers):
            break
        await pilot.pause(0.02)
    await pilot.pause()


async def shoot_fleet(out: Path) -> None:
    """``gputui fleet`` on recorded answers: the host table, and the host with most problems."""
    from gputui.fleet.command import FleetOptions
    from gputui.fleet.source import RecordedFleet
    from gputui.ui.fleet_app import FleetApp

    for name, keys in (("fleet", ()), ("fleet-host", ("enter",))):
        for size_name, size in SIZES.items():
            source = RecordedFleet(FLEET_ANSWERS)
            app = FleetApp(source, FleetOptions(sort="problems"), interval=3600)
            async with app.run_test(size=size) as pilot:
                wanted = 1
                for press in (None, *keys):
                    if press is not None:
                        await pilot.press(press)
                        wanted += 1
                    for _ in range(250):
                        if app.refreshes >= wanted:
                            break
                        await pilot.pause(0.02)
                await pilot.pause(0.2)
                print(app.save_screenshot(filename=f"{name}-{size_name}.svg", path=str(out)))


async def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    # The default alert rules, whatever the config of whoever runs the script says.
    os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="gputui-screenshots-")
    collector = demo_collector()
    snapshots = [collector.collect() for _ in range(REFRESHES)]
    collector.close()
    for name, keys in VIEWS:
        await shoot(out, snapshots, name, keys)
    for name, size_name, size in EXTRA_SIZES:
        keys = dict(VIEWS)[name]
        await shoot(out, snapshots, name, keys, {size_name: size})
    # A first run where there is no NVIDIA driver: what the screen says and where to look.
    collector = demo_collector({"nvml": "LibraryNotFound"})
    no_gpu = [collector.collect() for _ in range(3)]
    collector.close()
    await shoot(out, no_gpu, "no-gpu", (), {"narrow": SIZES["narrow"], "medium": (120, 30)})
    await shoot_fleet(out)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("screenshots")))
