"""UI frame-apply time: GpuTuiApp headless (``run_test``), fed snapshots directly.

Two figures per frame:

* apply: wall time of ``GpuTuiApp.on_snapshot_ready`` on the UI thread (every visible widget's
  diff-update, inside ``batch_update``; the history is recorded by the analysis, which the bench
  runs outside the timed region as the collector's thread does), and its CPU time
  (``apply_cpu_ms``: the figure to read on a machine shared with other work, where wall time
  includes waiting for a core), and the CPU time of the visible tab's own sync within it
  (``tab_sync_cpu_ms``);
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
from typing import TYPE_CHECKING, Any

from bench import common
from gputui.collect.docker.logs import LogStreamError
from gputui.model.containers import ContainerDetails, ContainerProcesses

if TYPE_CHECKING:
    from gputui.collect.docker.logs import LogReader
    from gputui.collect.linux.parent_chain import ParentLink
    from gputui.collect.sources import ContainerOwner

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

    def signal_process(self, pid: int, signum: int, start_time: float | None) -> str | None:
        return "benchmark"

    # Nothing is connected: a benchmark's containers have no source (the wide pane asks for
    # their owner and logs when a row is highlighted, as the monitor does).
    def container_owner(self, container_id: str) -> ContainerOwner | None:
        return None

    def open_container_logs(self, container_id: str, *, tail: int, follow: bool) -> LogReader:
        raise LogStreamError("benchmark: no container source")

    def container_action(self, container_id: str, action: str) -> str | None:
        return "benchmark"

    def container_details(self, container_id: str) -> ContainerDetails:
        return ContainerDetails(container_id, error="benchmark: no container source")

    def container_processes(self, container_id: str) -> ContainerProcesses:
        return ContainerProcesses(error="benchmark: no container source")

    def parent_chain(
        self, pid: int, start_time: float | None
    ) -> tuple[tuple[ParentLink, ...], str | None]:
        return (), "benchmark"

    def close(self) -> None:
        self.release.set()


async def _frames(snaps: Sequence[Any], frames: int, tabs: Sequence[str]) -> dict[str, Any]:
    from gputui.derive.analysis import Analyzer
    from gputui.model.settings import Settings
    from gputui.ui.app import GpuTuiApp
    from gputui.ui.messages import SnapshotReady

    stub = StubCollector(snaps[0])
    app = GpuTuiApp(stub, Settings(interval=1.0, read_only=True))
    # The app's own kind of analyzer (history kept), fed here in place of its collector thread.
    analyzer = Analyzer((), history_seconds=app.settings.history_seconds, interval=1.0)
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
            # The visible tab's own sync (the tree's or the table's), apart from the rest of the
            # apply (history, header, GPU panel), which other widgets and modules own.
            syncs: list[float] = []
            sync_tab = app.main.sync_tab

            def timed_sync(tab: str, force: bool = False) -> None:
                c0 = time.thread_time()
                sync_tab(tab, force)
                syncs.append(time.thread_time() - c0)

            app.main.sync_tab = timed_sync  # type: ignore[method-assign]
            for tab in tabs:
                app.main.show_tab(tab)
                await pilot.pause()
                applies, apply_cpus, cpus = [], [], []
                syncs.clear()
                first_ms = None
                for i in range(frames):
                    snap = snaps[(i + 1) % len(snaps)]
                    # Built outside the timed region: the analysis (history included) runs on
                    # the collector's thread, never on the UI's.
                    message = SnapshotReady(snap, analyzer.analyse(snap))
                    c0, t0 = time.thread_time(), time.perf_counter()
                    app.on_snapshot_ready(message)
                    t1, c1 = time.perf_counter(), time.thread_time()
                    await pilot.pause()
                    cpu = max(0.0, time.thread_time() - c0 - idle_cpu)
                    if first_ms is None:
                        first_ms = (
                            t1 - t0
                        ) * 1e3  # the first apply after the tab switch (its own sync)
                        continue
                    applies.append(t1 - t0)
                    apply_cpus.append(c1 - c0)
                    cpus.append(cpu)
                out[tab] = {
                    "first_ms": first_ms,
                    "apply_ms": common.median(applies) * 1e3,
                    "apply_p95_ms": common.pct(applies, 95) * 1e3,
                    "apply_cpu_ms": common.median(apply_cpus) * 1e3,
                    "tab_sync_cpu_ms": common.median(syncs[2:] or [0.0]) * 1e3,
                    "frame_cpu_ms": common.median(cpus) * 1e3,
                }
            stub.release.set()
    finally:
        stub.release.set()
    return out


async def _first_frame(snap: Any, size: tuple[int, int]) -> dict[str, float]:
    from gputui.model.settings import Settings
    from gputui.ui.app import GpuTuiApp

    c_start = time.thread_time()
    app = GpuTuiApp(StubCollector(snap), Settings(interval=1.0, read_only=True))
    marks: dict[str, float] = {"built": time.thread_time()}
    first_paint, on_ready = app._first_paint_done, app.on_snapshot_ready

    def painted() -> None:
        marks.setdefault("empty_painted", time.thread_time())
        first_paint()

    def ready(message: Any) -> None:
        c0 = time.thread_time()
        on_ready(message)
        if app._painted and "apply_start" not in marks:
            marks["apply_start"], marks["applied"] = c0, time.thread_time()

    app._first_paint_done = painted  # type: ignore[method-assign]
    app.on_snapshot_ready = ready  # type: ignore[method-assign]
    try:
        async with app.run_test(size=size) as pilot:
            for _ in range(200):
                if "applied" in marks:
                    break
                await pilot.pause(0.01)
            await pilot.pause()
            marks["idle"] = time.thread_time()
    finally:
        app.collector.release.set()  # type: ignore[attr-defined]

    def ms(a: str, b: str) -> float:
        return (marks[b] - marks[a]) * 1e3 if a in marks and b in marks else float("nan")

    marks["start"] = c_start
    return {
        "app_built_cpu_ms": ms("start", "built"),
        "to_empty_paint_cpu_ms": ms("built", "empty_painted"),
        "first_apply_cpu_ms": ms("apply_start", "applied"),
        "first_frame_cpu_ms": ms("apply_start", "idle"),
    }


def measure_first_frame(runs: int = 5, size: tuple[int, int] = SIZE) -> dict[str, float]:
    """UI-thread CPU up to the first frame with data, a busy host's snapshot (medians, ms).

    The app is built, composed, mounted and painted empty (``to_empty_paint``), then the first
    snapshot is applied (``first_apply``) and drawn (``first_frame``: apply to idle). Each run
    in this process: modules are imported by the first run, so only ``app_built`` of run 1
    differs; imports are measured with ``python -X importtime`` instead.
    """
    snap = synthetic_snaps(gpus=2, containers=5, processes=7, count=1)[0]
    rows = [asyncio.run(_first_frame(snap, size)) for _ in range(runs)]
    return {key: statistics.median(row[key] for row in rows[1:] or rows) for key in rows[0]}


def measure_frames(
    snaps: Sequence[Any], frames: int, tabs: Sequence[str] = ("containers", "processes")
) -> dict[str, Any]:
    """Per tab: first sync, median and p95 apply, median frame CPU (milliseconds)."""
    return asyncio.run(_frames(snaps, max(frames, 2), tabs))


def synthetic_snaps(
    gpus: int = 8, containers: int = 200, processes: int = 2000, moving: bool = True, count: int = 4
) -> list[Any]:
    """Snapshots of a synthetic host, built without containers or processes of this machine.

    Every container holds ``processes // containers`` GPU processes. ``moving``: every process's
    SM % and CPU % (and every GPU's load) change from one snapshot to the next, as in the scale
    bench's scenario; otherwise only the time moves.
    """
    from gputui.model.containers import ContainerInfo
    from gputui.model.gpu import GpuProcessSample, GpuSample
    from gputui.model.processes import GpuProcess, ProcessInfo, Visibility
    from gputui.model.snapshot import ContainerUsage, HostInfo, Snapshot
    from gputui.model.status import SourceStatus

    gib, mib = 1024**3, 1024**2
    ids = [f"{n:04x}" * 16 for n in range(containers)]
    out: list[Any] = []
    for frame in range(count):
        step = frame if moving else 0
        procs = []
        for i in range(processes):
            pid = 10_000 + i
            owner = ids[i % containers] if containers else None
            procs.append(
                GpuProcess(
                    sample=GpuProcessSample(
                        pid=pid,
                        gpu_index=i % gpus,
                        used_memory_bytes=(500 + i % 97) * mib,
                        sm_util=(i * 7 + step * 13) % 101,
                    ),
                    info=ProcessInfo(
                        pid=pid,
                        exists=True,
                        command=f"python3 train.py --rank {i}",
                        name="python3",
                        user="root",
                        cpu_percent=float((i * 3 + step * 11) % 400),
                        rss_bytes=(512 + i % 13) * mib,
                        start_time=1000.0 + i,
                        container_id=owner,
                        container_pid=i % 50 + 1,
                    ),
                    container_id=owner,
                )
            )
        usages = []
        for n, ident in enumerate(ids):
            mine = procs[n::containers]
            usages.append(
                ContainerUsage(
                    info=ContainerInfo(
                        id=ident,
                        name=f"job-{n:03d}",
                        image="lab:latest",
                        status="running",
                        gpu_request="all",
                    ),
                    gpu_memory_bytes=sum(p.sample.used_memory_bytes or 0 for p in mine),
                    pids=tuple(p.pid for p in mine),
                    gpu_indexes=tuple(sorted({p.sample.gpu_index for p in mine})),
                    sm_util=sum(p.sample.sm_util or 0 for p in mine),
                    known_to_engine=True,
                )
            )
        gpu_samples = tuple(
            GpuSample(
                index=g,
                uuid=f"GPU-{g:08d}-0000-0000-0000-000000000000",
                name="NVIDIA H200",
                utilization_gpu=(40 + g + step * 9) % 101,
                utilization_memory=(20 + step * 5) % 101,
                memory_used_bytes=(60 + g) * gib,
                memory_total_bytes=141 * gib,
                temperature_c=40 + g,
                power_w=300.0 + g + step,
                power_limit_w=700.0,
                clock_sm_mhz=1980,
                clock_mem_mhz=3201,
                throttle_reasons=0,
                pstate=0,
            )
            for g in range(gpus)
        )
        snap = Snapshot(
            taken_at=1_000_000.0 + frame,
            mode="scenario",
            host=HostInfo(hostname="bench", driver_version="580", cuda_driver_version="13.0"),
            sources={name: SourceStatus(name, True) for name in ("nvml", "docker", "procs")},
            gpus=gpu_samples,
            processes=tuple(procs),
            containers=tuple(usages),
            health=(),
            visibility=Visibility(host_pid_namespace=True),
        )
        out.append(snap)
    return out


def main() -> None:
    """``python -m bench.ui_apply [frames] [--processes N,N]``: moving and static, both tabs."""
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="python -m bench.ui_apply")
    parser.add_argument("frames", nargs="?", type=int, default=12)
    parser.add_argument(
        "--processes",
        default="2000",
        help="comma-separated process counts (8 GPUs, 200 containers each): growth with size",
    )
    parser.add_argument(
        "--first",
        action="store_true",
        help="the first frame instead: UI-thread CPU to the empty paint and the first apply",
    )
    args = parser.parse_args()
    if args.first:
        print(json.dumps({f"{w}x{h}": measure_first_frame(size=(w, h)) for w, h in ((160, 50),
                                                                                    (120, 30))},
                         indent=1))  # fmt: skip
        return
    counts = [int(n) for n in args.processes.split(",") if n.strip()]
    result: dict[str, Any] = {}
    for count in counts:
        figures = {
            data: measure_frames(
                synthetic_snaps(processes=count, moving=data == "moving"), args.frames
            )
            for data in ("moving", "static")
        }
        # One process count: the figures as before; several: keyed by the count.
        result.update(figures if len(counts) == 1 else {str(count): figures})
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
