"""Docker API calls per refresh, and the soak: RSS slope at 10 Hz for the collector and the TUI."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from typing import Any

from bench import common
from bench.fixtures import Containers, Sleepers
from bench.pty_run import PtyRun
from bench.scale import scenario
from bench.tui import gputui_argv


def cmd_api_calls(args: argparse.Namespace) -> dict[str, Any]:
    import docker as docker_sdk

    from gputui.collect.docker.source import DockerSource

    containers = Containers(docker_sdk.from_env(timeout=60))
    try:
        containers.grow_to(args.api_containers)
        src = DockerSource()
        try:
            src.read()
            cold = src.api_calls
            time.sleep(0.5)  # let the events of our own starts drain before counting
            src.read()
            base = src.api_calls
            for _ in range(args.refreshes):
                src.read()
            steady = src.api_calls - base
            containers.grow_to(args.api_containers + 1)  # one change: a create and a start
            time.sleep(0.5)
            before = src.api_calls
            src.read()
            on_change = src.api_calls - before
            listed = len(src.read().containers)
        finally:
            src.close()
    finally:
        containers.remove_all()
    summary = {"containers_listed": listed, "cold_calls": cold, "refreshes": args.refreshes,
               "calls_unchanged": steady, "per_refresh": steady / args.refreshes,
               "calls_after_one_new_container": on_change}  # fmt: skip
    text = common.table(
        ["containers", "first read", "refreshes", "calls (unchanged)", "per refresh",
         "calls after 1 new container"],
        [[listed, cold, args.refreshes, steady, steady / args.refreshes, on_change]],
    )  # fmt: skip
    text += f"\ntarget: no call per refresh with an unchanged set: {common.verdict(steady == 0)}"
    text += "\n(other containers changing on this engine meanwhile show up here as inspects)"
    common.emit("Docker API calls per refresh (DockerSource.api_calls)", text)
    common.save_json(args.out, "api-calls", summary)
    return summary


def _history_bytes_per_record(snap: Any, interval: float) -> float:
    """Bytes one History.record adds while the ring buffers are filling (tracemalloc)."""
    from gputui.derive.history import History

    hist = History(1800.0, interval)
    hist.record(snap)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    t = snap.taken_at
    for i in range(200):
        hist.record(snap.__class__(**{**_fields(snap), "taken_at": t + (i + 1) * interval}))
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return grown / 200


def _fields(obj: Any) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__slots__}


def _slope_mb_per_h(samples: list[tuple[float, int]], skip: float) -> tuple[float, float, float]:
    """(slope MB/h, first MB, last MB) over samples after ``skip`` seconds."""
    pts = [(t, r) for t, r in samples if t >= skip] or samples
    xs, ys = [t for t, _ in pts], [r / 1e6 for _, r in pts]
    return common.slope(xs, ys) * 3600, ys[0], ys[-1]


def _collector(data: dict[str, Any]) -> Any:
    from gputui.collect.collector import Collector
    from gputui.collect.docker.source import DockerSource
    from gputui.collect.linux.proc_reader import ProcSource
    from gputui.collect.standins.scenario import ScenarioSource
    from gputui.health import runner as health

    return Collector(ScenarioSource(data), ProcSource(), DockerSource(), mode="scenario",
                     health=health.run_checks)  # fmt: skip


def _one_snapshot(data: dict[str, Any]) -> Any:
    """A snapshot of the soak's scenario, for the history's bytes per refresh."""
    coll = _collector(data)
    try:
        return coll.collect()
    finally:
        coll.close()


def collector_child(scenario_file: str, hz: float) -> None:
    """``python -m bench.soak SCENARIO HZ``: the soak's collector, until SIGTERM.

    Prints ``{"cycles": N}`` when it ends.
    """
    with open(scenario_file, encoding="utf-8") as fh:
        data = json.load(fh)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    from gputui.collect.gc_policy import MonitorGc

    coll, cycles, period = _collector(data), 0, 1.0 / hz
    monitor_gc = MonitorGc()  # what the collect loop of a long-lived monitor applies
    try:
        nxt = time.monotonic()
        while not stop.is_set():
            coll.collect()
            monitor_gc.after_refresh()
            cycles += 1
            nxt += period
            stop.wait(max(0.0, nxt - time.monotonic()))
    finally:
        coll.close()
    print(json.dumps({"cycles": cycles}), flush=True)


def cmd_soak(args: argparse.Namespace) -> dict[str, Any]:
    import docker as docker_sdk

    what = set(args.what.split(","))
    if "both" in what:  # the documented spelling for collector and TUI together
        what = {"collector", "tui"}
    seconds, period = args.minutes * 60, 1.0 / args.hz
    lifetime = int(seconds) + 600  # the load outlives the run; a killed run's ends 10 min later
    sleepers = Sleepers(lifetime)
    containers = (
        Containers(docker_sdk.from_env(timeout=60), lifetime_s=lifetime)
        if args.soak_containers
        else None
    )
    result: dict[str, Any] = {"minutes": args.minutes, "hz": args.hz}
    scen_file = None
    collector: subprocess.Popen[str] | None = None
    tui: PtyRun | None = None
    cycles, snap = 0, None
    try:
        sleepers.grow_to(args.soak_processes)
        cpids: list[int] = []
        if containers is not None:
            containers.grow_to(args.soak_containers)
            cpids = list(containers.pids.values())
        data = scenario(8, [*cpids, *sleepers.pids])
        fd, scen_file = tempfile.mkstemp(prefix="gputui-bench-", suffix=".json")
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh)
        coll_samples: list[tuple[float, int]] = []
        if "collector" in what:
            # In a process of its own, so that its resident memory is the collector's alone
            # (here it would also hold this benchmark's samples and Docker SDK client).
            collector = subprocess.Popen(
                [sys.executable, "-m", "bench.soak", scen_file, f"{args.hz:g}"],
                stdout=subprocess.PIPE,
                text=True,
            )
        if "tui" in what:
            tui = PtyRun(gputui_argv(args, "--scenario", scen_file, "--interval", f"{period:g}"),
                         cols=args.cols, rows=args.rows)  # fmt: skip
            tui.start()
        if containers is not None and args.churn_every > 0:
            containers.grow_to(args.soak_containers + args.churn_containers)
        t0 = time.monotonic()
        next_map = 0.0
        tui_maps: list[tuple[float, dict[str, int]]] = []
        next_churn = args.churn_every
        churns = 0
        common.log(f"soak: {args.minutes:g} min at {args.hz:g} Hz ({', '.join(sorted(what))})")
        while time.monotonic() - t0 < seconds:
            now = time.monotonic() - t0
            if containers is not None and args.churn_every > 0 and now >= next_churn:
                # Replace some containers the scenario does not name: events, inspects and
                # kept cgroup files come and go all run long, as on a busy shared host.
                containers.churn(args.soak_containers, args.churn_count)
                churns += 1
                next_churn += args.churn_every
            if collector is not None and collector.poll() is None:
                coll_samples.append((now, common.rss_bytes([collector.pid])))
            if tui is not None and tui.alive():
                tui.sample()
                if now >= next_map:  # which allocator holds the growth: once a minute
                    tui_maps.append((now, common.memory_split(tui.pid)))
                    next_map += 60.0
            time.sleep(1.0)
        if collector is not None:
            collector.send_signal(signal.SIGTERM)
            out, _ = collector.communicate(timeout=30)
            with contextlib.suppress(ValueError, IndexError, KeyError):
                cycles = int(json.loads(out.strip().splitlines()[-1])["cycles"])
        if tui is not None:
            tui.stop()
            snap = _one_snapshot(data)  # while the scenario's processes still run
    finally:
        if collector is not None and collector.poll() is None:
            collector.kill()
            collector.wait()
        sleepers.kill_all()
        if containers is not None:
            containers.remove_all()
        if scen_file:
            os.unlink(scen_file)
    result["churns"] = churns
    # Imports, caches and the first health run settle in the first 30 s; the history ring
    # buffers fill for their whole window, so a slope meant for "after they fill" starts later.
    skip = args.fit_after_minutes * 60 if args.fit_after_minutes else min(30.0, seconds / 4)
    rows = []
    if coll_samples:
        slope, first, last = _slope_mb_per_h(coll_samples, skip)
        result["collector"] = {"slope_mb_h": slope, "first_mb": first, "last_mb": last,
                               "cycles": cycles, "samples": coll_samples}  # fmt: skip
        rows.append(["collector (own process)", cycles, first, last, slope, slope * 24])
    if tui is not None and tui.samples:
        pts = [(s.at, s.rss) for s in tui.samples]
        slope, first, last = _slope_mb_per_h(pts, skip)
        result["tui"] = {"slope_mb_h": slope, "first_mb": first, "last_mb": last,
                         "exit": tui.exit_status, "samples": pts, "maps": tui_maps}  # fmt: skip
        rows.append(["TUI (pty)", "-", first, last, slope, slope * 24])
        fitted = [m for t, m in tui_maps if t >= skip] or [m for _, m in tui_maps]
        if fitted:
            split = ", ".join(
                f"{k} {fitted[0][k] / 1e6:.1f} -> {fitted[-1][k] / 1e6:.1f} MB" for k in fitted[0]
            )
            text_maps = f"\nTUI resident memory by mapping after {skip:.0f} s: {split}"
            result["tui"]["maps_text"] = text_maps
    text = common.table(["process", "cycles", "RSS MB first", "last", "MB/h", "MB/24h"], rows)
    text += f"\n{args.minutes:g} min at {args.hz:g} Hz; slope = least squares after {skip:.0f} s"
    if churns:
        text += f"; {churns} churns of {args.churn_count} containers every {args.churn_every:g} s"
    if snap is not None and tui is not None:
        per = _history_bytes_per_record(snap, period)
        fill_h = per * min(3600 * args.hz, 1800 * args.hz) / 1e6
        result["history_bytes_per_record"] = per
        text += (
            f"\nTUI history ring buffers (bounded by design, full after 30 min): "
            f"{per:.0f} B per refresh = {per * args.hz * 3600 / 1e6:.1f} MB/h while filling, "
            f"{fill_h:.1f} MB when full at {args.hz:g} Hz"
        )
    text += result.get("tui", {}).get("maps_text", "")
    text += "\ntarget: <= 5 MB per 24 h once buffers are full"
    common.emit("Soak: RSS growth", text)
    common.save_json(args.out, "soak", result)
    return result


if __name__ == "__main__":
    collector_child(sys.argv[1], float(sys.argv[2]))
