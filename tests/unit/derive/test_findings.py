"""Findings: sharing, memory growth, idle reservations and CPU-side evidence."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from gputui.collect.collector import Collector, attribute_containers, join_processes
from gputui.collect.linux.proc_reader import ProcSource
from gputui.collect.standins.demo import DemoContainers
from gputui.collect.standins.scenario import ScenarioSource
from gputui.derive.findings import (
    FindingRules,
    FindingsEngine,
    ThrottleTracker,
    gpu_shares,
    grows_without_falling,
    slope_per_s,
)
from gputui.model.containers import ContainerInfo, ContainerReading
from gputui.model.gpu import GpuProcessSample, GpuReading, GpuSample
from gputui.model.processes import ProcessInfo
from gputui.model.snapshot import HostInfo, HostStats, Snapshot
from gputui.model.status import Finding, SourceStatus

MIB = 1024 * 1024
CID_A, CID_B = "a" * 64, "b" * 64


def snap(
    t: float,
    procs: list[tuple[int, str | None, int, int | None]],
    containers: tuple[ContainerInfo, ...] = (),
    total_mib: int = 10000,
) -> Snapshot:
    """Snapshot at time t; procs are (pid, container id, MiB, sm)."""
    samples = tuple(GpuProcessSample(pid, 0, mib * MIB, sm_util=sm) for pid, _, mib, sm in procs)
    used = sum(m for _, _, m, _ in procs) * MIB
    reading = GpuReading(
        SourceStatus("nvml", ok=True),
        gpus=(
            GpuSample(
                0,
                "GPU-0",
                "H200",
                memory_used_bytes=used,
                memory_total_bytes=total_mib * MIB,
                processes=samples,
            ),
        ),
    )
    infos = {
        pid: ProcessInfo(pid, name="python", start_time=1.0, container_id=cid)
        for pid, cid, _, _ in procs
    }
    processes = join_processes(reading, infos)
    docker = ContainerReading(SourceStatus("docker", ok=True), containers)
    return Snapshot(
        taken_at=t,
        mode="scenario",
        host=HostInfo("h"),
        gpus=reading.gpus,
        processes=processes,
        containers=attribute_containers(docker, processes),
        host_stats=HostStats(memory_total_bytes=512 * 2**30),
    )


def ctr(cid: str, name: str, **extra: object) -> ContainerInfo:
    return ContainerInfo(cid, name, "img", extra.pop("status", "running"), **extra)  # type: ignore[arg-type]


def test_sharing_names_each_party_with_its_share() -> None:
    s = snap(
        0,
        [(1, CID_A, 600, 60), (2, CID_B, 300, 30), (3, None, 100, None)],
        (ctr(CID_A, "a"), ctr(CID_B, "b")),
    )
    shares = gpu_shares(s)[0]
    assert [(x.label, round(x.memory_share, 2), x.sm_util) for x in shares] == [
        ("a", 0.6, 60),
        ("b", 0.3, 30),
        ("host", 0.1, None),
    ]
    (finding,) = [f for f in FindingsEngine().update(s) if f.kind == "gpu_shared"]
    assert finding.subject == "gpu:0"
    assert finding.figure("parties") == 3
    assert finding.figure("memory_share:a") == 0.6
    assert "a 60% (SM 60%)" in finding.summary


def test_one_party_is_not_sharing() -> None:
    s = snap(0, [(1, CID_A, 600, 60), (2, CID_A, 300, 30)], (ctr(CID_A, "a"),))
    assert not [f for f in FindingsEngine().update(s) if f.kind == "gpu_shared"]


def test_rising_memory_fires_growth_with_rate_and_time_to_fill() -> None:
    engine = FindingsEngine(FindingRules(growth_min_span_s=60))
    found: tuple[Finding, ...] = ()
    for i in range(13):  # +50 MiB every 10 s = 300 MiB/min
        found = engine.update(snap(i * 10.0, [(7, None, 1000 + 50 * i, 90)]))
    (growth,) = [f for f in found if f.kind == "memory_growth"]
    assert growth.subject == "pid:7"
    assert growth.figure("rate_mib_per_min") == pytest.approx(300, rel=0.01)
    free_mib = 10000 - (1000 + 50 * 12)
    assert growth.figure("time_to_fill_s") == pytest.approx(free_mib / 300 * 60, rel=0.02)


def test_sawtooth_and_flat_memory_do_not_fire() -> None:
    engine = FindingsEngine(FindingRules(growth_min_span_s=60))
    saw = itertools.cycle([1000, 1400, 1800, 1000])
    flat_found: tuple[Finding, ...] = ()
    saw_found: tuple[Finding, ...] = ()
    for i in range(20):
        saw_found = engine.update(snap(i * 10.0, [(8, None, next(saw), 50), (9, None, 500, 50)]))
        flat_found = saw_found
    assert not [f for f in saw_found + flat_found if f.kind == "memory_growth"]


def test_growth_detector_helpers() -> None:
    assert slope_per_s([(0, 0), (1, 2), (2, 4)]) == pytest.approx(2)
    assert slope_per_s([(0, 5)]) == 0
    assert grows_without_falling([1, 2, 2, 3], 0.02)
    assert not grows_without_falling([1, 5, 3, 6], 0.02)


def test_idle_reservation_counts_how_long() -> None:
    notebook = ctr(CID_A, "notebook", gpu_request=("3",), started_at=0.0)
    engine = FindingsEngine(FindingRules(idle_min_s=300))
    assert not [
        f for f in engine.update(snap(100, [], (notebook,))) if f.kind == "idle_reservation"
    ]
    (idle,) = [f for f in engine.update(snap(500, [], (notebook,))) if f.kind == "idle_reservation"]
    assert idle.figure("idle_seconds") == 400
    assert "runs no GPU process" in idle.summary
    # A GPU process that works ends the idle period.
    busy = snap(600, [(5, CID_A, 100, 80)], (notebook,))
    assert not [f for f in engine.update(busy) if f.kind == "idle_reservation"]


def test_low_utilisation_reservation_and_never_started() -> None:
    lazy = ctr(CID_A, "lazy", gpu_request="all")
    created = ctr(CID_B, "created", gpu_request="all", status="created")
    engine = FindingsEngine(FindingRules(low_util_min_s=600))
    found = engine.update(snap(0, [(5, CID_A, 100, 1)], (lazy, created)))
    # A moment of low SM is normal; only the never-started reservation is reported at once.
    summaries = sorted(f.summary for f in found if f.kind == "idle_reservation")
    assert summaries == ["created: reserved GPU all but was never started"]
    found = engine.update(snap(700, [(5, CID_A, 100, 1)], (lazy, created)))
    summaries = sorted(f.summary for f in found if f.kind == "idle_reservation")
    assert summaries == [
        "created: reserved GPU all but was never started",
        "lazy: holds GPU all at 1% SM for 11m",
    ]


def test_cpu_throttling_uses_deltas_between_refreshes() -> None:
    engine = FindingsEngine()
    before = ctr(CID_A, "cpu", cpu_periods=1000, cpu_throttled_periods=10, cpu_quota_cpus=0.1)
    after = ctr(CID_A, "cpu", cpu_periods=1100, cpu_throttled_periods=90, cpu_quota_cpus=0.1)
    assert not [f for f in engine.update(snap(0, [], (before,))) if f.kind == "cpu_throttled"]
    (thr,) = [f for f in engine.update(snap(1, [], (after,))) if f.kind == "cpu_throttled"]
    assert thr.figure("throttled_ratio") == 0.8
    assert thr.figure("window_s") == 1.0
    assert thr.summary == "cpu: CPU throttled 80% of CPU periods over 1 s at its limit of 0.1 CPUs"


#: Throttled periods counted per refresh: 2 of 10 on average (20 %), but bunched as real
#: counters read a few ms apart are: one refresh's ratio swings 0 -> 60 -> 0 -> 40 -> 80 %.
_BURSTS = (0, 6, 0, 0, 4, 0, 0, 2, 0, 8)


def _steady(step: int) -> ContainerInfo:
    periods = 10_000 + 10 * step
    throttled = 2_000 + 20 * (step // 10) + sum(_BURSTS[: step % 10])
    return ctr(
        CID_A, "steady", cpu_periods=periods, cpu_throttled_periods=throttled, cpu_quota_cpus=1.0
    )


def test_steady_throttling_is_one_stable_figure_over_the_window() -> None:
    engine = FindingsEngine()
    percents, windows, summaries = [], [], set()
    for step in range(130):
        found = engine.update(snap(float(step), [], (_steady(step),)))
        figure = engine.throttling.get(CID_A)
        if step == 0:
            assert figure is None  # one reading of a cumulative counter says nothing yet
            continue
        assert figure is not None
        if step >= 60:
            percents.append(figure.percent)
            windows.append(figure.span_s)
            (thr,) = [f for f in found if f.kind == "cpu_throttled"]
            assert thr.figure("throttled_percent") == figure.percent
            summaries.add(thr.summary)
    # Over 60 s the bunching of single refreshes averages out: one steady figure.
    assert set(percents) == {20}
    assert set(windows) == {60.0}
    assert summaries == {"steady: CPU throttled 20% of CPU periods over 60 s at its limit of 1 CPU"}


def test_throttling_window_fills_then_slides_and_restarts_with_the_container() -> None:
    tracker = ThrottleTracker(window_s=60.0)
    assert tracker.update(CID_A, 0.0, 100, 0) is None
    early = tracker.update(CID_A, 12.0, 220, 60)
    assert early is not None
    assert (early.throttled, early.periods, early.span) == (60, 120, "12 s")
    assert early.text() == "throttled 50% of CPU periods over 12 s"
    for t in range(13, 200):  # no more throttling: the old periods leave the window
        figure = tracker.update(CID_A, float(t), 220 + 10 * (t - 12), 60)
    assert figure is not None
    assert (figure.percent, figure.span_s) == (0, 60.0)
    # Counters that go back mean a new cgroup: start again instead of a negative difference.
    assert tracker.update(CID_A, 200.0, 5, 1) is None
    again = tracker.update(CID_A, 201.0, 15, 6)
    assert again is not None and again.percent == 50
    tracker.forget(set())
    assert tracker.update(CID_A, 202.0, 25, 6) is None


def test_memory_pressure_oom_and_restarts() -> None:
    tight = ctr(CID_A, "tight", memory_used_bytes=95 * MIB, memory_limit_bytes=100 * MIB)
    killed = ctr(CID_B, "killed", status="exited", oom_killed=True, exit_code=137, restart_count=4)
    kinds = {(f.kind, f.severity) for f in FindingsEngine().update(snap(0, [], (tight, killed)))}
    assert {("memory_pressure", "warn"), ("oom_killed", "fail"), ("restarting", "warn")} <= kinds
    unlimited = ctr(CID_A, "free", memory_used_bytes=95 * MIB, memory_limit_bytes=512 * 2**30)
    assert not [
        f for f in FindingsEngine().update(snap(0, [], (unlimited,))) if f.kind == "memory_pressure"
    ]


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


def test_scenario_time_series_rising_fires_and_sawtooth_does_not(
    child: subprocess.Popen[bytes],
) -> None:
    # Real PIDs through the real process source; NVML replaced by a scenario time series.
    rising = [1000 + 40 * i for i in range(12)]
    sawtooth = [1000, 1300, 1600, 900] * 3
    source = ScenarioSource(
        {
            "gpus": [
                {
                    "index": 0,
                    "memory_total_mib": 80000,
                    "memory_used_mib": 5000,
                    "processes": [
                        {"pid": os.getpid(), "used_memory_mib": rising, "sm_util": 50},
                        {"pid": child.pid, "used_memory_mib": sawtooth, "sm_util": 50},
                    ],
                }
            ]
        }
    )
    ticks = itertools.count(0.0, 10.0)
    collector = Collector(source, ProcSource(), DemoContainers(), clock=lambda: next(ticks))
    engine = FindingsEngine(FindingRules(growth_min_span_s=60))
    found: tuple[Finding, ...] = ()
    for _ in range(12):
        found = engine.update(collector.collect())
    growth = {f.subject: f for f in found if f.kind == "memory_growth"}
    assert set(growth) == {f"pid:{os.getpid()}"}
    assert growth[f"pid:{os.getpid()}"].figure("rate_mib_per_min") == pytest.approx(240, rel=0.01)
