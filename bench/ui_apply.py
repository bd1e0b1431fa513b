"""UI frame-apply time: GpuTuiApp headless (``run_test``), fed snapshots directly.

Two figures per frame:

* apply: wall time of ``GpuTuiApp.on_snapshot_ready`` on the UI thread (history record and every
  visible widget's diff-update, inside ``batch_update``);
* frame CPU: CPU time of the UI thread from the apply until the app is idle again, which adds
  Textual's layout and rendering of what changed (headless: minus writing to the terminal),
  less the CPU an idle pause costs by itself.
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections.abc import Sequence
from typing import Any

from bench import common

SIZE = (160, 50)


class StubCollector:
    """Hands the app one snapshot, then blocks until released (the bench posts the rest)."""

    mode = "scenario"
    player = None

    def __init__(self, first: Any) -> None:
        self.first: Any = first
        self.last: Any = first
        self.release = threading.Event()

    def collect(self) -> Any:
        if self.first is not None:
            snap, self.first = self.first, None
            return snap
        # Block the app's collector loop so only the benchmark's snapshots reach the UI; once
        # released (closing), hand back something valid so the loop ends normally.
        self.release.wait()
        return self.last

    def request_health(self) -> None:
        return None

    def exec_in_container(self, *args: Any) -> Any:
        raise NotImplementedError

    def interactive_exec_argv(self, *args: Any) -> None:
        return None

    def signal_process(self, *args: Any) -> str:
        return "benchmark"


async def _frames(snaps: Sequence[Any], frames: int, tabs: Sequence[str]) -> dict[str, Any]:
    from gputui.settings import Settings
    from gputui.ui.app import GpuTuiApp
    from gputui.ui.messages import SnapshotReady

    stub = StubCollector(snaps[0])
    app = GpuTuiApp(stub, Settings(interval=1.0, read_only=True))
    out: dict[str, Any] = {}
    try:
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause(0.3)
            # What an idle pause costs the UI thread, to subtract from each frame.
            idle = []
            for _ in range(5):
                c0 = time.thread_time()
                await pilot.pause()
                idle.append(time.thread_time() - c0)
            idle_cpu = statistics.median(idle)
            for tab in tabs:
                app.main.show_tab(tab)
                await pilot.pause()
                applies, cpus = [], []
                first_ms = None
                for i in range(frames):
                    snap = snaps[(i + 1) % len(snaps)]
                    c0, t0 = time.thread_time(), time.perf_counter()
                    app.on_snapshot_ready(SnapshotReady(snap))
                    t1 = time.perf_counter()
                    await pilot.pause()
                    cpu = max(0.0, time.thread_time() - c0 - idle_cpu)
                    if first_ms is None:
                        first_ms = (
                            t1 - t0
                        ) * 1e3  # the first apply after the tab switch (its own sync)
                        continue
                    applies.append(t1 - t0)
                    cpus.append(cpu)
                out[tab] = {
                    "first_ms": first_ms,
                    "apply_ms": common.median(applies) * 1e3,
                    "apply_p95_ms": common.pct(applies, 95) * 1e3,
                    "frame_cpu_ms": common.median(cpus) * 1e3,
                }
            stub.release.set()
    finally:
        stub.release.set()
    return out


def measure_frames(
    snaps: Sequence[Any], frames: int, tabs: Sequence[str] = ("containers", "processes")
) -> dict[str, Any]:
    """Per tab: first sync, median and p95 apply, median frame CPU (milliseconds)."""
    return asyncio.run(_frames(snaps, max(frames, 2), tabs))
