"""Scale: collection-cycle time and UI frame-apply time at growing GPU, container, process counts.

GPUs are simulated (scenario dicts through the real NVML adapter); containers are real busybox
containers on the local engine; processes are real ``sleep`` processes named as GPU PIDs, so the
process source reads real /proc files. Each dimension grows alone from a fixed base, and the
target point (8 GPUs / 200 containers / 2,000 processes) is measured with all three at once.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import common
from bench.fixtures import Containers, Sleepers

_HEALTH_OFF = 1e9  # health runs are timed on their own, not inside the warm cycles
#: Seconds between the starts of two timed cycles, as the TUI's default refresh: beyond a few
#: hundred GPU processes (or 50 running containers) a refresh reads a share sized by this interval.
REFRESH_S = 1.0


def scenario(n_gpus: int, pids: Sequence[int]) -> dict[str, Any]:
    """A plausible H200 box: every core gauge set, values that move each refresh."""
    gpus: list[dict[str, Any]] = []
    for i in range(n_gpus):
        gpus.append({
            "index": i, "uuid": f"GPU-0000{i:04d}-0000-0000-0000-{0:012d}", "name": "NVIDIA H200",
            "memory_total_mib": 143771, "memory_used_mib": [20000 + i, 21000 + i, 22000],
            "utilization_gpu": [10, 55, 98], "utilization_memory": [5, 30, 60],
            "temperature_c": [40, 45, 50], "power_w": [120.5, 400.0, 690.0], "power_limit_w": 700,
            "clock_sm_mhz": [1200, 1980], "clock_mem_mhz": 3201, "clock_sm_max_mhz": 1980,
            "clock_mem_max_mhz": 3201, "pstate": 0, "pcie_rx_kbps": [100, 5000],
            "pcie_tx_kbps": [50, 900], "throttle_reasons": [0, 4], "ecc_mode_current": True,
            "ecc_uncorrected_volatile": 0, "remapped_rows_pending": False, "persistence_mode": True,
            "mig_mode_current": False, "errors": {"fan_speed": "NotSupported"}, "processes": [],
            # GPM figures, as an H200's (the product reads them on every Hopper GPU).
            "gpm_sm_active": [12.5, 60.0, 95.3], "gpm_sm_occupancy": [10, 40, 80],
            "gpm_tensor_active": [0, 30, 70], "gpm_dram_active": [5, 20, 40],
            "total_energy_mj": [1_000_000 + i, 1_400_000 + i],
        })  # fmt: skip
    for k, pid in enumerate(pids):
        gpus[k % n_gpus]["processes"].append(
            {
                "pid": pid,
                "used_memory_mib": [100 + k % 500, 120 + k % 500],
                "sm_util": [k % 100, (k + 37) % 100],
            }
        )
    data = {"driver_version": "580.159.04", "cuda_driver_version": "13.0", "gpus": gpus}
    # The dict goes to ScenarioSource directly, which reads the keys it knows and no others:
    # checked as a scenario file is, a misspelt key fails here instead of going unmeasured.
    from gputui.collect.standins.scenario_format import validate_scenario

    validate_scenario(data, "bench scenario")
    return data


class Timed:
    """Wraps a source and records how long each ``read`` takes."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.times: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def read(self, *args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self.inner.read(*args)
        finally:
            self.times.append(time.perf_counter() - t0)


def measure_point(
    n_gpus: int,
    container_pids: Sequence[int],
    proc_pids: Sequence[int],
    cycles: int,
    interval: float = REFRESH_S,
    store_dir: str | None = None,
    inline_lanes: bool = False,
) -> tuple[dict[str, Any], list[Any]]:
    """Collect ``cycles`` warm cycles at one point; returns figures and a few snapshots.

    A cycle starts every ``interval`` seconds (0: back to back), as the TUI refreshes. The
    monitor's loop is measured whole, as shipped: the collection with GPM figures and the
    kernel-log reader (``/dev/kmsg`` where readable), then the analysis and the ledger's writer
    on a store in ``store_dir`` (a temporary one when None), each timed on its own.

    The GPUs are read at the live monitor's cadences: NVML's slow lane (per-process utilization,
    PCIe) and GPM lane on their own threads, whose CPU per second is reported apart
    (``lanes_ms_s``); ``inline_lanes`` reads everything on every cycle instead, as a scenario
    file does (the figures of this benchmark before 2026-12-03).
    """
    from gputui.collect.collector import Collector
    from gputui.collect.docker.source import DockerSource
    from gputui.collect.gc_policy import MonitorGc
    from gputui.collect.linux.proc_reader import ProcSource
    from gputui.collect.standins.scenario import ScenarioSource
    from gputui.health import runner as health

    # The TUI's collect loop applies this after each refresh; the cycles here are a monitor's.
    monitor_gc = MonitorGc()
    pids = [*container_pids, *proc_pids]
    source = ScenarioSource(scenario(n_gpus, pids), live_cadences=not inline_lanes)
    gpu, procs = Timed(source), Timed(ProcSource())
    docker = DockerSource()
    dock = Timed(docker)
    health_times: list[float] = []

    def timed_health(inputs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return health.run_checks(inputs)
        finally:
            health_times.append(time.perf_counter() - t0)

    import tempfile

    from gputui.collect.fault_attribution import KernelFaultTracker
    from gputui.collect.linux.kmsg import KMSG_PATH, KmsgReader
    from gputui.derive.analysis import Analyzer
    from gputui.ledger.writer import LedgerWriter

    faults = KernelFaultTracker(KmsgReader(KMSG_PATH, background=True))
    coll = Collector(gpu, procs, dock, mode="scenario", health=timed_health,
                     health_interval=_HEALTH_OFF, faults=faults)  # fmt: skip
    analyzer = Analyzer(())
    tmp = tempfile.TemporaryDirectory(prefix="gputui-scale-", dir=store_dir)
    writer = LedgerWriter(Path(tmp.name) / "ledger.db", "tui", interval_s=interval or REFRESH_S)
    writer.start()
    analysis_times: list[float] = []
    ledger_times: list[float] = []
    try:
        t0 = time.perf_counter()
        coll.collect()  # cold: engine connection, list + inspects, psutil handles, health
        monitor_gc.after_refresh()
        cold = time.perf_counter() - t0
        coll.request_health()
        coll.collect()  # one warm health run, timed by timed_health
        monitor_gc.after_refresh()
        for timed in (gpu, procs, dock):
            timed.times.clear()
        calls0 = docker.api_calls
        snapshots, totals = [], []
        procs_read: list[int] = []
        ctrs_read: list[int] = []
        ages: list[float] = []
        sampler = getattr(docker, "_sampler", None)
        lanes0, wall0 = _lanes_cpu(), time.perf_counter()
        for i in range(cycles):
            time.sleep(max(0.0, t0 + interval - time.perf_counter()))
            t0 = time.perf_counter()
            snap = coll.collect()
            totals.append(time.perf_counter() - t0)
            t1 = time.perf_counter()
            analysis = analyzer.analyse(snap)
            t2 = time.perf_counter()
            writer.observe(snap, analysis)
            ledger_times.append(time.perf_counter() - t2)
            analysis_times.append(t2 - t1)
            monitor_gc.after_refresh()
            procs_read.append(getattr(procs.inner, "last_read_count", len(pids)))
            ctrs_read.append(getattr(sampler, "last_read_count", 0))
            ages += [snap.taken_at - at for p in snap.processes
                     if (at := getattr(p.info, "sampled_at", None)) is not None]  # fmt: skip
            if i >= cycles - 4:
                snapshots.append(snap)
        calls = docker.api_calls - calls0
        lanes_ms_s = (_lanes_cpu() - lanes0) / (time.perf_counter() - wall0) * 1e3
        attributed = sum(1 for c in snap.containers if c.pids)
        missing = sum(1 for p in snap.processes if not p.info.exists)
        engine_containers = len(snap.containers)
    finally:
        coll.close()
        writer.close()
        tmp.cleanup()
    med = statistics.median
    rest = [
        t - g - p - d for t, g, p, d in zip(totals, gpu.times, procs.times, dock.times, strict=True)
    ]
    return {
        "gpus": n_gpus, "containers": len(container_pids), "processes": len(pids),
        "cold_ms": cold * 1e3, "warm_ms": med(totals) * 1e3, "p95_ms": common.pct(totals, 95) * 1e3,
        "gpu_ms": med(gpu.times) * 1e3, "procs_ms": med(procs.times) * 1e3,
        "docker_ms": med(dock.times) * 1e3, "join_ms": med(rest) * 1e3,
        "analysis_ms": med(analysis_times) * 1e3, "ledger_ms": med(ledger_times) * 1e3,
        "ledger_p95_ms": common.pct(ledger_times, 95) * 1e3,
        "lanes_ms_s": lanes_ms_s, "inline_lanes": inline_lanes,
        "loop_ms": med([t + a + w for t, a, w in zip(totals, analysis_times, ledger_times,
                                                       strict=True)]) * 1e3,
        "kmsg_ok": (kmsg := snap.sources.get("kmsg")) is not None and kmsg.ok,
        "health_cold_ms": health_times[0] * 1e3 if health_times else None,
        "health_warm_ms": health_times[1] * 1e3 if len(health_times) > 1 else None,
        "api_calls_per_cycle": calls / cycles, "attributed_containers": attributed,
        "procs_read": med(procs_read), "ctrs_read": med(ctrs_read),
        "max_age_s": max(ages) if ages else 0.0, "interval_s": interval,
        "missing_pids": missing, "engine_containers": engine_containers,
    }, snapshots  # fmt: skip


def _lanes_cpu() -> float:
    """CPU seconds NVML's slow and GPM lanes' threads have used so far (0 when not running)."""
    import threading

    return sum(
        common.thread_cpu_seconds(os.getpid(), t.native_id)
        for t in threading.enumerate()
        if t.name in ("gputui-nvml-slow", "gputui-nvml-gpm") and t.native_id is not None
    )


POINTS = {
    "gpus": [1, 8, 64],
    "containers": [10, 200, 1000],
    "processes": [100, 2000, 10000],
}


def cmd_scale(args: argparse.Namespace) -> dict[str, Any]:
    dims = args.dims.split(",")
    points = {d: [int(x) for x in getattr(args, d).split(",")] for d in POINTS}
    sleepers = Sleepers()
    containers = None
    need_containers = "containers" in dims or "target" in dims
    if need_containers:
        import docker as docker_sdk  # only here: the GPU and process points need no engine

        containers = Containers(docker_sdk.from_env(timeout=60))
    results: dict[str, list[dict[str, Any]]] = {}
    ui_rows: list[dict[str, Any]] = []
    want_ui = not args.no_ui
    try:
        plan: list[tuple[str, int, int, int]] = []  # (dim, gpus, containers, processes)
        for d in dims:
            if d == "gpus":
                plan += [(d, n, 0, n) for n in points["gpus"]]  # one process per GPU
            elif d == "containers":
                plan += [(d, 8, n, 0) for n in points["containers"]]
            elif d == "processes":
                plan += [(d, 8, 0, n) for n in points["processes"]]
            elif d == "target":
                plan.append((d, 8, 200, 1800))  # 200 container PIDs + 1,800 host PIDs = 2,000
        # Containers are only ever added (removing hundreds costs minutes), so points run in
        # order of container count: a point never sees more engine containers than it names.
        plan.sort(key=lambda p: p[2])
        room = Sleepers.headroom()
        for dim, n_gpus, n_cont, n_proc in plan:
            if n_proc > room:
                common.log(f"only room for {room} more processes; {dim} point capped")
                n_proc = room
            sleepers.grow_to(n_proc)
            cpids: list[int] = []
            if n_cont and containers is not None:
                containers.grow_to(n_cont)
                cpids = list(containers.pids.values())[:n_cont]
            common.log(f"scale {dim}: {n_gpus} GPUs, {n_cont} containers, {n_proc} host PIDs")
            interval = getattr(args, "interval", REFRESH_S)
            inline = getattr(args, "inline_lanes", False)
            res, snaps = measure_point(
                n_gpus, cpids, sleepers.pids[:n_proc], args.cycles, interval, inline_lanes=inline
            )
            res["dim"] = dim
            results.setdefault(dim, []).append(res)
            if want_ui:
                from bench.ui_apply import measure_frames

                for tab, fig in measure_frames(snaps, args.frames).items():
                    ui_rows.append({"dim": dim, "gpus": n_gpus, "containers": res["containers"],
                                    "processes": res["processes"], "tab": tab, **fig})  # fmt: skip
    finally:
        sleepers.kill_all()
        if containers is not None:
            containers.remove_all()
    report(results, ui_rows)
    summary = {"collection": results, "ui": ui_rows, "cycles": args.cycles, "cpus": os.cpu_count()}
    common.save_json(args.out, "scale", summary)
    return summary


def _unit(res: dict[str, Any], dim: str) -> int:
    return int({"gpus": res["gpus"], "containers": res["containers"]}.get(dim, res["processes"]))


def report(results: dict[str, list[dict[str, Any]]], ui_rows: list[dict[str, Any]]) -> None:
    rows = []
    for dim, items in results.items():
        for r in items:
            n = _unit(r, dim)
            rows.append([dim, r["gpus"], r["containers"], r["processes"], r["cold_ms"],
                         r["warm_ms"], r["p95_ms"], r["warm_ms"] * 1e3 / max(n, 1), r["gpu_ms"],
                         r["procs_ms"], r["docker_ms"], r["join_ms"], r["health_warm_ms"],
                         r["api_calls_per_cycle"], r["procs_read"], r["ctrs_read"],
                         r["max_age_s"], r["analysis_ms"], r["ledger_ms"], r["loop_ms"],
                         r.get("lanes_ms_s", 0.0), r["kmsg_ok"]])  # fmt: skip
    text = common.table(
        ["dim", "GPUs", "ctrs", "procs", "cold ms", "warm ms", "p95 ms", "us/unit", "gpu ms",
         "procs ms", "docker ms", "join ms", "health ms", "API/cycle", "procs read",
         "ctrs read", "max age s", "analysis ms", "ledger ms", "loop ms", "lanes ms/s", "kmsg"],
        rows,
    )  # fmt: skip
    target = results.get("target")
    if target:
        ms = target[0]["warm_ms"]
        text += (
            f"\ntarget point collection cycle {ms:.1f} ms (<= 25 ms: {common.verdict(ms <= 25)})"
        )
    text += "\n(us/unit = warm cycle / GPUs, containers or processes of that dimension)"
    text += (
        "\n(warm ms = the collection, GPM figures and the kernel-log reader included; analysis "
        "ms and ledger ms = the loop's Analyzer and the ledger writer's observe on a real "
        "store; loop ms = all three, what the monitor's loop thread does per refresh)"
    )
    inline = any(r.get("inline_lanes") for items in results.values() for r in items)
    text += (
        "\n(lanes ms/s = CPU per second of NVML's slow and GPM lanes, on their own threads as "
        "the live monitor runs them; "
        + ("--inline-lanes: read inline by every cycle instead, in gpu ms)" if inline else
           "their reads are not in gpu ms)")
    )  # fmt: skip
    interval = next((r.get("interval_s") for items in results.values() for r in items), REFRESH_S)
    text += (
        "\n(procs read, ctrs read = processes and running containers whose /proc or cgroup "
        "files a cycle read, median; max age s = oldest per-process CPU/RSS figure shown; "
        f"one cycle every {interval} s)"
    )
    common.emit("Collection cycle at scale (warm = median of the timed cycles)", text)
    if ui_rows:
        rows = [[u["dim"], u["gpus"], u["containers"], u["processes"], u["tab"], u["first_ms"],
                 u["apply_ms"], u["apply_p95_ms"], u["frame_cpu_ms"],
                 u["frame_cpu_ms"] * 1e3 / max(_unit(u, u["dim"]), 1)]
                for u in ui_rows]  # fmt: skip
        text = common.table(
            ["dim", "GPUs", "ctrs", "procs", "tab", "1st apply ms", "apply ms", "p95",
             "frame CPU ms", "us/unit"], rows,
        )  # fmt: skip
        for u in ui_rows:
            if u["dim"] == "target":
                ok = u["apply_ms"] <= 16
                text += (
                    f"\ntarget point, {u['tab']} tab: apply {u['apply_ms']:.1f} ms, frame "
                    f"CPU {u['frame_cpu_ms']:.1f} ms (apply <= 16 ms: {common.verdict(ok)})"
                )
        text += (
            "\napply = on_snapshot_ready on the UI thread (widgets updated); frame CPU = "
            "UI-thread CPU from posting to idle (apply + layout + render, headless)"
        )
        common.emit("UI frame apply (GpuTuiApp headless, 160x50)", text)


def cmd_live(args: argparse.Namespace) -> dict[str, Any]:
    """The real collector of this machine (NVML, /proc, Docker), as ``gputui`` builds it."""
    from gputui.collect.gc_policy import MonitorGc
    from gputui.model.settings import Settings
    from gputui.wiring.compose import build_collector

    monitor_gc = MonitorGc()  # as the TUI's collect loop applies it
    coll = build_collector(Settings(health_interval=_HEALTH_OFF))
    gpu, procs, dock = Timed(coll.gpu), Timed(coll.procs), Timed(coll.container_sources[0])
    coll.gpu, coll.procs, coll.container_sources = gpu, procs, (dock,)
    try:
        t0 = time.perf_counter()
        snap = coll.collect()  # cold, with the health checks
        monitor_gc.after_refresh()
        cold = time.perf_counter() - t0
        time.sleep(1.0)
        for timed in (gpu, procs, dock):
            timed.times.clear()
        calls0 = getattr(dock.inner, "api_calls", 0)
        totals = []
        for _ in range(args.cycles):
            t0 = time.perf_counter()
            snap = coll.collect()
            monitor_gc.after_refresh()
            totals.append(time.perf_counter() - t0)
            time.sleep(args.pause)  # let the slow lane run between cycles, as in the TUI
        calls = getattr(dock.inner, "api_calls", 0) - calls0
    finally:
        coll.close()
    med = statistics.median
    res = {
        "gpus": len(snap.gpus), "gpu_processes": len(snap.processes),
        "containers": len(snap.containers), "nvml_ok": snap.sources["nvml"].ok,
        "docker_ok": snap.sources["docker"].ok, "cold_ms": cold * 1e3,
        "warm_ms": med(totals) * 1e3, "p95_ms": common.pct(totals, 95) * 1e3,
        "max_ms": max(totals) * 1e3, "gpu_ms": med(gpu.times) * 1e3,
        "procs_ms": med(procs.times) * 1e3, "docker_ms": med(dock.times) * 1e3,
        "api_calls": calls, "cycles": args.cycles,
    }  # fmt: skip
    text = common.table(list(res), [list(res.values())])
    text += "\ncold = first collect (NVML init, engine connection, health checks)"
    common.emit("Live collection cycle on this machine", text)
    common.save_json(args.out, "live", res)
    return res
