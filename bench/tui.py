"""TUI steady-state CPU and RSS in a 160x50 pty (gputui and a peer, alternated); first frame."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import socket
import sys
import tempfile
import time
from typing import Any

from bench import common
from bench.pty_run import PtyRun, split, steady_state


def gputui_argv(args: argparse.Namespace, *extra: str) -> list[str]:
    if args.gputui:
        return split(args.gputui) + list(extra)
    return [sys.executable, "-m", "gputui", *extra]


def peer_available(argv: list[str]) -> str | None:
    """None when the peer can run, else why not (it is then left out, not failed)."""
    if not argv:
        return "no peer command"
    if argv[0] in (sys.executable, "python", "python3") and argv[1:2] == ["-m"]:
        import importlib.util

        module = argv[2] if len(argv) > 2 else ""
        if importlib.util.find_spec(module) is None:
            return f"python module {module!r} is not installed"
        return None
    if shutil.which(argv[0]) is None:
        return f"{argv[0]!r} is not on PATH"
    return None


def run_tui(argv: list[str], warmup: float, seconds: float, cols: int, rows: int) -> dict[str, Any]:
    run = PtyRun(argv, cols=cols, rows=rows)
    run.start()
    try:
        run.sample_for(warmup + seconds)
    finally:
        alive = run.alive()
        run.stop()
    result: dict[str, Any] = dict(steady_state(run, warmup))
    result.update(
        command=" ".join(argv),
        exited_early=not alive,
        last_output=run.last_text()[-600:] if not alive else "",
        exit_status=run.exit_status,
        peak_rss_mb=run.max_rss / 1e6,
    )
    return result


def _over(a: float, b: float) -> float:
    """``a / b``, a zero ``b`` (an idle program) counted as a nanopercent."""
    return a / max(b, 1e-9)


def cmd_tui(args: argparse.Namespace) -> dict[str, Any]:
    interval = f"{args.interval:g}"
    programs = {
        "gputui": gputui_argv(args, "--interval", interval),
        "peer": split(args.peer) if args.peer else [],
        "floor": [*split(args.floor), "--interval", interval] if args.floor else [],
    }
    for count in filter(None, (c.strip() for c in args.floor_lines.split(","))):
        if args.floor:
            programs[f"floor-{int(count)}"] = [*programs["floor"], "--lines", str(int(count))]
    missing = {name: peer_available(argv) for name, argv in programs.items() if name != "gputui"}
    for name, why in missing.items():
        if why:
            print(f"{name} {' '.join(programs[name]) or '-'}: not run ({why})", flush=True)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in programs}
    for r in range(args.rounds):
        order = [name for name in programs if not missing.get(name)]
        if r % 2:  # alternate who goes first, so a drifting load favours none
            order.reverse()
        for name in order:
            common.log(
                f"tui round {r + 1}/{args.rounds}: {name} for {args.warmup + args.seconds:g} s"
            )
            res = run_tui(programs[name], args.warmup, args.seconds, args.cols, args.rows)
            runs[name].append(res)
            if res["exited_early"]:
                print(f"WARNING: {name} exited early (status {res['exit_status']}); it printed:\n"
                      f"{res['last_output']}", flush=True)  # fmt: skip
    rows = []
    for name, results in runs.items():
        for i, res in enumerate(results):
            rows.append(
                [name, i + 1, res["cpu_pct"], res.get("main_cpu_pct"), res["rss_mb"],
                 res["rss_max_mb"], res["peak_rss_mb"], res["out_kb_s"], res.get("rows_s"),
                 res["seconds"]]
            )  # fmt: skip
    summary: dict[str, Any] = {
        "runs": runs,
        "interval": args.interval,
        "size": [args.cols, args.rows],
    }
    for name, done in runs.items():
        summary[name] = {
            "cpu_pct": common.median([x["cpu_pct"] for x in done]),
            "main_cpu_pct": common.median([x.get("main_cpu_pct", 0.0) for x in done]),
            "rss_mb": common.median([x["rss_mb"] for x in done]),
        } if done else None  # fmt: skip
    text = common.table(
        ["program", "run", "CPU %", "main thread %", "RSS MB", "RSS max", "peak RSS", "out kB/s",
         "rows/s", "s"], rows,
    )  # fmt: skip
    text += "\ncommands: " + "; ".join(
        f"{name} = {' '.join(argv) or '-'}" for name, argv in programs.items()
    )
    text += (
        "\nrows/s: screen rows a second addressed by cursor-position sequences, as Textual moves"
        " to each changed span (curses moves otherwise: not comparable for the peer)"
    )
    ours, peer, floor = summary["gputui"], summary["peer"], summary["floor"]
    if peer:
        cpu_r = _over(ours["cpu_pct"], peer["cpu_pct"])
        rss_r = _over(ours["rss_mb"], peer["rss_mb"])
        summary["cpu_ratio"], summary["rss_ratio"] = cpu_r, rss_r
        text += (
            f"\nCPU ratio gputui/peer = {cpu_r:.2f} (target <= 0.8: {common.verdict(cpu_r <= 0.8)})"
            f"; RSS ratio = {rss_r:.2f}"
        )
    if floor:
        # The floor is one Textual line of the same NVML and psutil figures: gputui above it is
        # gputui's own cost; a floor above the peer is what a Textual UI costs by itself.
        cpu_r = _over(ours["cpu_pct"], floor["cpu_pct"])
        rss_r = _over(ours["rss_mb"], floor["rss_mb"])
        ratios = {"gputui/floor_cpu": cpu_r, "gputui/floor_rss": rss_r}
        text += (
            f"\nfloor (one Textual line): CPU {floor['cpu_pct']:.2f} %, RSS {floor['rss_mb']:.1f}"
            f" MB; gputui/floor CPU {cpu_r:.2f}, RSS {rss_r:.2f}"
        )
        for name in (n for n in runs if n.startswith("floor") and summary[n] and peer):
            cpu_r = _over(summary[name]["cpu_pct"], peer["cpu_pct"])
            rss_r = _over(summary[name]["rss_mb"], peer["rss_mb"])
            ratios[f"{name}/peer_cpu"], ratios[f"{name}/peer_rss"] = cpu_r, rss_r
            text += f"\n{name}/peer: CPU {cpu_r:.2f}, RSS {rss_r:.2f}"
        summary["floor_ratios"] = ratios
    common.emit(
        f"TUI steady state, {args.cols}x{args.rows} pty, {args.interval:g} s interval", text
    )
    common.save_json(args.out, "tui", summary)
    return summary


def default_marker() -> str:
    # The header shows the host name then "driver" only once a snapshot has been applied;
    # before that it says "collecting…". Both are separate segments of one line, so they reach
    # the terminal next to each other once escape sequences are stripped.
    return re.escape(socket.gethostname()) + r"\s+driver"


_PHASE_NOTES = (
    "cli: interpreter started, gputui.cli imported; nvml-started: nvmlInit and the first GPM "
    "samples done (on their own thread); config-loaded: the config file read (its modules "
    "imported); collector-built: the sources made (a one-shot's); nvml-read: the first GPU "
    "reading (NVML's start included); docker-read: the engine's first answer; health-checks: "
    "the first run; "
    "textual-imported: the UI modules loaded (in parallel with the collection); app-mounted: "
    "the screen exists; snapshot-applied / snapshot-painted: the first snapshot on the "
    "widgets / rendered."
)


def _read_trace(path: str, launched: float) -> list[tuple[str, float]]:
    """(phase, seconds after launch) from a start-up trace file, in file order."""
    out: list[tuple[str, float]] = []
    with open(path, encoding="ascii", errors="replace") as fh:
        for line in fh:
            stamp, _, phase = line.strip().partition(" ")
            with contextlib.suppress(ValueError):
                out.append((phase, float(stamp) - launched))
    return out


def cmd_first_frame(args: argparse.Namespace) -> dict[str, Any]:
    marker = re.compile((args.marker or default_marker()).encode())
    times: list[float] = []
    misses = 0
    argv = gputui_argv(args, "--interval", "1")
    phases: dict[str, list[float]] = {}
    for i in range(args.runs):
        # gputui writes its start-up phase marks (gputui/startup_trace.py) to this file.
        fd, trace = tempfile.mkstemp(prefix="gputui-startup-", suffix=".txt")
        os.close(fd)
        os.environ["GPUTUI_STARTUP_TRACE"] = trace
        run = PtyRun(argv, cols=args.cols, rows=args.rows, marker=marker)
        try:
            run.start()
            launched = time.time() - (time.monotonic() - run.started)
            try:
                at = run.wait_marker(args.timeout)
            finally:
                run.stop()
            for phase, offset in _read_trace(trace, launched):
                phases.setdefault(phase, []).append(offset)
        finally:
            del os.environ["GPUTUI_STARTUP_TRACE"]
            os.unlink(trace)
        if at is None:
            misses += 1
            common.log(f"first frame run {i + 1}: marker {marker.pattern!r} not seen")
        else:
            times.append(at)
            phases.setdefault("first frame on the terminal", []).append(at)
        time.sleep(0.2)
    med = common.median(times)
    summary = {
        "runs_s": times,
        "median_s": med,
        "misses": misses,
        "marker": marker.pattern.decode(),
        "command": " ".join(argv),
    }
    text = common.table(
        ["runs", "median s", "min s", "max s", "marker missed"],
        [
            [
                len(times),
                med,
                min(times, default=float("nan")),
                max(times, default=float("nan")),
                misses,
            ]
        ],
    )
    text += f"\nlaunch -> first frame with data (marker /{marker.pattern.decode()}/ in the pty)"
    if times:
        text += f"; target <= 1 s: {common.verdict(med <= 1.0)}"
    if phases:
        order = sorted(phases, key=lambda name: common.median(phases[name]))
        summary["phases_s"] = {name: phases[name] for name in order}
        text += "\n\nStart-up timeline (s after launch, median of the runs; the program's marks):\n"
        text += common.table(
            ["phase", "median s", "min s", "max s", "runs"],
            [[name, common.median(phases[name]), min(phases[name]), max(phases[name]),
              len(phases[name])] for name in order],
        )  # fmt: skip
        text += f"\n{_PHASE_NOTES}"
    common.emit("TUI first frame", text)
    common.save_json(args.out, "first-frame", summary)
    return summary
