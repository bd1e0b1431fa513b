"""CPU time of each of gputui's threads, by name, while the monitor runs in a pty.

``python -m bench.thread_cpu --seconds 30 --cols 160 --rows 50 [-- GPUTUI ARGS...]`` runs the
monitor in a pty (as ``bench tui`` does) with a sampler thread inside its process: after
``--warmup`` seconds it reads every thread's CPU time (``/proc/self/task/<tid>/stat``, named by
``threading.enumerate()``; threads that are not Python's, such as NVML's own, are counted under
``(native)``), again after ``--seconds``, and prints each one's share of a core. ``bench tui``
gives the process's total and its main thread; this says which of the other threads costs what
(the collector, NVML's slow lane and GPM lane, the kernel-log reader, the engines' readers, the
ledger's writer, Textual's input thread).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

from bench.pty_run import PtyRun

_TICK = os.sysconf("SC_CLK_TCK")


def _task_cpu(tid: int) -> float:
    """utime + stime of one thread of this process, in seconds (0 when it is gone)."""
    try:
        with open(f"/proc/self/task/{tid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def _sample() -> dict[int, float]:
    return {int(tid): _task_cpu(int(tid)) for tid in os.listdir("/proc/self/task")}


def _names() -> dict[int, str]:
    return {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}


def _sampler(out: Path, warmup: float, seconds: float) -> None:
    time.sleep(warmup)
    names = _names()
    first, t0 = _sample(), time.monotonic()
    time.sleep(seconds)
    last, span = _sample(), time.monotonic() - t0
    names.update(_names())
    main = threading.main_thread().native_id
    shares: dict[str, float] = {}
    for tid, cpu in last.items():
        name = "main (event loop)" if tid == main else names.get(tid, "(native)")
        shares[name] = shares.get(name, 0.0) + 100.0 * (cpu - first.get(tid, 0.0)) / span
    out.write_text(json.dumps({"seconds": span, "percent": shares}))


def child(out: Path, warmup: float, seconds: float, args: list[str]) -> None:
    """Inside the pty: start the sampler, then run the monitor until it is quit."""
    threading.Thread(
        target=_sampler, args=(out, warmup, seconds), name="bench-sampler", daemon=True
    ).start()
    from gputui.cli.main import main as gputui_main

    gputui_main(args)


def main(argv: list[str] | None = None) -> int:
    """Run the monitor in a pty and print its threads' CPU."""
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    p = argparse.ArgumentParser(prog="python -m bench.thread_cpu", description=__doc__)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--warmup", type=float, default=6.0)
    p.add_argument("--cols", type=int, default=160)
    p.add_argument("--rows", type=int, default=50)
    p.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    if args.child is not None:
        child(args.child, args.warmup, args.seconds, extra)
        return 0
    out = Path(f"/tmp/gputui-thread-cpu-{os.getpid()}.json")
    timing = ["--warmup", str(args.warmup), "--seconds", str(args.seconds)]
    command = [sys.executable, "-m", "bench.thread_cpu", "--child", str(out), *timing, "--", *extra]
    run = PtyRun(command, cols=args.cols, rows=args.rows)
    run.start()
    try:
        deadline = time.monotonic() + args.warmup + args.seconds + 10
        while not out.exists() and run.alive() and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        run.stop()
    if not out.exists():
        print(f"no figures: the monitor ended early: {run.last_text()[-300:]}")
        return 1
    result = json.loads(out.read_text())
    out.unlink()
    shares = result["percent"]
    print(f"gputui {' '.join(extra)} at {args.cols}x{args.rows}, {result['seconds']:.0f} s")
    for name, pct in sorted(shares.items(), key=lambda kv: -kv[1]):
        if name != "bench-sampler":
            print(f"  {pct:6.3f} %  {name}")
    print(f"  {sum(v for k, v in shares.items() if k != 'bench-sampler'):6.3f} %  total")
    return 0


if __name__ == "__main__":
    sys.exit(main())
