"""``gputui --once --json`` against ``nvitop --once``: wall time and peak RSS, alternated."""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from typing import Any

from bench import common
from bench.pty_run import split
from bench.tui import _PHASE_NOTES, _read_trace, gputui_argv, peer_available


def timed_run(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, int, int]:
    """(wall seconds, peak RSS bytes, exit status) of one run, from ``wait4`` on that child.

    ``wait4`` gives this child's own ru_maxrss; RUSAGE_CHILDREN would report the largest of all
    children so far, which hides a smaller program run after a bigger one.
    """
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=None if env is None else {**os.environ, **env},
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)  # so Popen does not wait again
    return wall, usage.ru_maxrss * 1024, proc.returncode


def cmd_once(args: argparse.Namespace) -> dict[str, Any]:
    ours = gputui_argv(args, "--once", "--json")
    peer = split(args.peer_once) if args.peer_once else []
    missing = peer_available(peer)
    if missing:
        print(f"peer {' '.join(peer) or '-'}: not run ({missing}); gputui alone", flush=True)
    floor = split(args.floor_once) if args.floor_once else []
    floor_gpm = split(args.floor_once_gpm) if getattr(args, "floor_once_gpm", "") else []
    programs = [("gputui", ours)] + ([] if missing else [("peer", peer)])
    if floor and not peer_available(floor):
        programs.append(("floor", floor))
    if floor_gpm and not peer_available(floor_gpm):
        programs.append(("floor+gpm", floor_gpm))
    for _, argv in programs:  # one untimed run each: page cache and .pyc files warm for both
        timed_run(argv)
    results: dict[str, list[tuple[float, int, int]]] = {name: [] for name, _ in programs}
    for i in range(args.runs):
        order = programs if i % 2 == 0 else programs[::-1]
        for name, argv in order:
            results[name].append(timed_run(argv))
    commands = {n: " ".join(a) for n, a in programs}
    rows: list[list[Any]] = []
    summary: dict[str, Any] = {"commands": commands, "runs": results}
    for name, res in results.items():
        walls, rss = [r[0] for r in res], [r[1] / 1e6 for r in res]
        summary[name] = {"wall_s": common.median(walls), "rss_mb": common.median(rss),
                         "exit": sorted({r[2] for r in res})}  # fmt: skip
        rows.append([name, len(res), common.median(walls), min(walls), max(walls),
                     common.median(rss), max(rss), summary[name]["exit"]])  # fmt: skip
    phases = _once_phases(ours, args.runs)
    summary["phases_s"] = phases
    text = common.table(
        ["program", "runs", "wall s (med)", "min", "max", "peak RSS MB (med)", "max", "exit"], rows
    )
    text += "".join(f"\n{n}: {c}" for n, c in commands.items())
    if "peer" in results:
        wr = summary["gputui"]["wall_s"] / summary["peer"]["wall_s"]
        rr = summary["gputui"]["rss_mb"] / summary["peer"]["rss_mb"]
        summary["wall_ratio"], summary["rss_ratio"] = wr, rr
        text += (
            f"\nwall ratio gputui/peer = {wr:.2f} (target <= 0.7: {common.verdict(wr <= 0.7)}); "
            f"RSS ratio = {rr:.2f} (target <= 1.0: {common.verdict(rr <= 1.0)})"
        )
    if "floor" in results:
        # Python, psutil, nvidia-ml-py and one NVML reading of each GPU: no one-shot is faster.
        floor_wall = summary["floor"]["wall_s"]
        ratios = {"gputui/floor": summary["gputui"]["wall_s"] / floor_wall}
        text += f"\nfloor (one NVML reading of each GPU): {floor_wall:.3f} s; gputui/floor = "
        text += f"{ratios['gputui/floor']:.2f}"
        if "peer" in results:
            ratios["floor/peer"] = floor_wall / summary["peer"]["wall_s"]
            text += f"; floor/peer = {ratios['floor/peer']:.2f}"
        summary["floor_ratios"] = ratios
    if "floor+gpm" in results:
        # The same with a GPM pair: what a report of SM activity waits for at the least.
        gpm_wall = summary["floor+gpm"]["wall_s"]
        text += f"\nfloor with a GPM pair (SM activity): {gpm_wall:.3f} s; gputui/that = "
        text += f"{summary['gputui']['wall_s'] / gpm_wall:.2f}"
        if "peer" in results:
            summary["floor_gpm_per_peer"] = gpm_wall / summary["peer"]["wall_s"]
            text += f"; that/peer = {summary['floor_gpm_per_peer']:.2f}"
    if phases:
        text += "\n\ngputui --once timeline (s after launch, median; the program's marks):\n"
        text += common.table(
            ["phase", "median s", "min s", "max s"],
            [[name, common.median(v), min(v), max(v)] for name, v in phases.items()],
        )
        text += f"\n{_PHASE_NOTES} collected: the snapshot is complete; report-written: printed."
    common.emit("--once: wall time and peak RSS (median, alternated runs)", text)
    common.save_json(args.out, "once", summary)
    return summary


def _once_phases(argv: list[str], runs: int) -> dict[str, list[float]]:
    """Start-up marks of ``runs`` traced runs (separate from the timed ones), by phase."""
    phases: dict[str, list[float]] = {}
    for _ in range(runs):
        fd, trace = tempfile.mkstemp(prefix="gputui-once-", suffix=".txt")
        os.close(fd)
        try:
            launched = time.time()
            wall, _, _ = timed_run(argv, {"GPUTUI_STARTUP_TRACE": trace})
            for phase, offset in _read_trace(trace, launched):
                phases.setdefault(phase, []).append(offset)
            phases.setdefault("exited", []).append(wall)
        finally:
            os.unlink(trace)
    return phases
