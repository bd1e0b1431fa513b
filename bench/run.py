"""gputui benchmarks: ``python -m bench.run {tui,first-frame,once,live,scale,api-calls,soak,all}``.

``python -m bench.run fleet`` (not part of ``all``: it needs Debian's prometheus) times the fleet
view over a Prometheus holding 500 synthetic hosts.

Figures only: nothing here passes or fails; targets are printed next to the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import sys
import time
from typing import Any

from bench import common, fixtures


def _machine() -> dict[str, Any]:
    import importlib.metadata as md

    info: dict[str, Any] = {
        "python": platform.python_version(),
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
    }
    with contextlib.suppress(OSError, StopIteration), open("/proc/cpuinfo") as fh:
        info["cpu_model"] = next(
            line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")
        )
    for dist in ("textual", "docker", "psutil", "nvidia-ml-py", "nvitop"):
        try:
            info[dist] = md.version(dist)
        except md.PackageNotFoundError:
            info[dist] = None
    return info


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    p.add_argument("--out", metavar="DIR", help="also write each result as DIR/<name>.json")
    p.add_argument(
        "--gputui",
        metavar="CMD",
        help="gputui command (default: this python -m gputui), e.g. 'python3 -m gputui --demo'",
    )
    sub = p.add_subparsers(dest="cmd", required=True)

    def tui_opts(q: argparse.ArgumentParser) -> None:
        q.add_argument("--cols", type=int, default=160)
        q.add_argument("--rows", type=int, default=50)

    q = sub.add_parser("tui", help="steady-state CPU and RSS in a pty, gputui vs a peer")
    tui_opts(q)
    q.add_argument("--peer", default="nvitop --interval 1", help="peer TUI command ('' = none)")
    q.add_argument(
        "--floor",
        default=f"{sys.executable} -m bench.floor_app",
        help="the floor program, run with --interval ('' = none; default: bench/floor_app.py,"
        " one Textual line of NVML and psutil figures)",
    )
    q.add_argument(
        "--floor-lines",
        default="",
        help="also the floor program with this many lines changing at each refresh, as"
        " 'floor-N' (comma-separated counts, e.g. 10,15; '' = none)",
    )
    q.add_argument("--interval", type=float, default=1.0)
    q.add_argument("--seconds", type=float, default=60.0, help="measured seconds per run")
    q.add_argument("--warmup", type=float, default=5.0, help="seconds skipped after launch")
    q.add_argument("--rounds", type=int, default=1, help="alternated runs of each program")

    q = sub.add_parser("first-frame", help="launch -> first frame with data, in a pty")
    tui_opts(q)
    q.add_argument("--runs", type=int, default=5)
    q.add_argument("--timeout", type=float, default=15.0)
    q.add_argument("--marker", help="regex the first real frame prints (default: host + driver)")

    q = sub.add_parser("once", help="gputui --once --json vs a peer's --once")
    q.add_argument("--peer-once", default="nvitop --once", help="peer command ('' = none)")
    q.add_argument(
        "--floor-once",
        default=f"{sys.executable} -m bench.floor_once",
        help="the floor program ('' = none; default: bench/floor_once.py, one NVML reading)",
    )
    q.add_argument(
        "--floor-once-gpm",
        default=f"{sys.executable} -m bench.floor_once --gpm",
        help="the floor of a report with SM activity ('' = none; one NVML reading, a GPM pair)",
    )
    q.add_argument("--runs", type=int, default=7)

    def scale_opts(q: argparse.ArgumentParser) -> None:
        q.add_argument("--dims", default="gpus,processes,containers,target")
        q.add_argument("--gpus", default="1,8,64")
        q.add_argument("--containers", default="10,200,1000")
        q.add_argument("--processes", default="100,2000,10000")
        q.add_argument("--cycles", type=int, default=20, help="timed warm cycles per point")
        q.add_argument("--frames", type=int, default=12, help="UI frames per point and tab")
        q.add_argument("--no-ui", action="store_true", help="collection only")
        q.add_argument(
            "--inline-lanes",
            action="store_true",
            help="NVML's slow and GPM lanes read inline by every cycle (as a scenario file is) "
            "instead of on their threads at the live cadences",
        )

    q = sub.add_parser("scale", help="collection and UI apply at 1/8/64 GPUs, ...")
    scale_opts(q)
    # Only here: `all` has the TUI's --interval, which the scale cycles then follow too.
    q.add_argument("--interval", type=float, default=1.0,
                   help="refresh interval the cycles are paced at (s)")  # fmt: skip

    q = sub.add_parser("live", help="the real collector of this machine: cycle time, API calls")
    q.add_argument("--cycles", type=int, default=30)
    q.add_argument("--pause", type=float, default=0.2, help="seconds between cycles")

    q = sub.add_parser("api-calls", help="Docker API calls per refresh, unchanged container set")
    q.add_argument("--api-containers", type=int, default=20)
    q.add_argument("--refreshes", type=int, default=50)

    def soak_opts(q: argparse.ArgumentParser) -> None:
        q.add_argument("--minutes", type=float, default=10.0)
        q.add_argument("--hz", type=float, default=10.0)
        q.add_argument("--soak-containers", type=int, default=20)
        q.add_argument("--soak-processes", type=int, default=200)
        q.add_argument("--what", default="collector,tui",
                       help="comma-separated: collector, tui, export (gputui export --scenario,"
                       " its own process); both = collector,tui; all = all three")  # fmt: skip
        q.add_argument("--store", action="store_true",
                       help="the collector and export each write a ledger store (a temp"
                       " dir): its size each minute, growth, MB per day, 30 days")  # fmt: skip
        q.add_argument("--scrape-every", type=float, default=15.0,
                       help="seconds between scrapes of export's /metrics")  # fmt: skip
        q.add_argument("--churn-every", type=float, default=0.0,
                       help="seconds between container churns (0 = none)")  # fmt: skip
        q.add_argument("--churn-count", type=int, default=3, help="containers replaced per churn")
        q.add_argument("--churn-containers", type=int, default=10,
                       help="extra containers, not named by the scenario, that churn")  # fmt: skip
        q.add_argument("--fit-after-minutes", type=float, default=0.0,
                       help="fit the RSS slope from this minute on (0 = after 30 s)")  # fmt: skip

    q = sub.add_parser("soak", help="RSS slope per hour at 10 Hz; with --store the store's size")
    soak_opts(q)
    tui_opts(q)

    from bench.fleet import add_parser as add_fleet_parser

    add_fleet_parser(sub)  # not in `all`: it needs Debian's prometheus

    q = sub.add_parser("all", help="every benchmark above, with their defaults")
    q.add_argument("--peer", default="nvitop --interval 1")
    q.add_argument("--peer-once", default="nvitop --once")
    q.add_argument("--interval", type=float, default=1.0)
    q.add_argument("--seconds", type=float, default=60.0)
    q.add_argument("--warmup", type=float, default=5.0)
    q.add_argument("--rounds", type=int, default=1)
    q.add_argument("--runs", type=int, default=7)
    q.add_argument("--timeout", type=float, default=15.0)
    q.add_argument("--marker")
    q.add_argument("--refreshes", type=int, default=50)
    q.add_argument("--api-containers", type=int, default=20)
    q.add_argument("--pause", type=float, default=0.2)
    tui_opts(q)
    scale_opts(q)
    soak_opts(q)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    fixtures.install_cleanup_handlers()
    machine = _machine()
    common.emit("machine", "  ".join(f"{k}={v}" for k, v in machine.items()))
    common.save_json(args.out, "machine", machine)
    t0 = time.monotonic()
    try:
        if args.cmd == "all":
            _all(args)
        else:
            _dispatch(args.cmd, args)
    except KeyboardInterrupt:
        common.log("interrupted: cleaning up")
        return 130
    finally:
        fixtures.run_cleanups()
        common.log(f"done in {time.monotonic() - t0:.0f} s")
    return 0


def _dispatch(cmd: str, args: argparse.Namespace) -> Any:
    if cmd == "tui":
        from bench.tui import cmd_tui

        return cmd_tui(args)
    if cmd == "first-frame":
        from bench.tui import cmd_first_frame

        return cmd_first_frame(args)
    if cmd == "once":
        from bench.once import cmd_once

        return cmd_once(args)
    if cmd == "scale":
        from bench.scale import cmd_scale

        return cmd_scale(args)
    if cmd == "live":
        from bench.scale import cmd_live

        return cmd_live(args)
    if cmd == "api-calls":
        from bench.soak import cmd_api_calls

        return cmd_api_calls(args)
    if cmd == "soak":
        from bench.soak import cmd_soak

        return cmd_soak(args)
    if cmd == "fleet":
        from bench.fleet import cmd_fleet

        return cmd_fleet(args)
    raise SystemExit(f"unknown benchmark {cmd}")


def _all(args: argparse.Namespace) -> None:
    for cmd in ("once", "first-frame", "live", "api-calls", "scale", "tui", "soak"):
        _dispatch(cmd, args)


if __name__ == "__main__":
    sys.exit(main())
