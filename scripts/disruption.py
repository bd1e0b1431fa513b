"""The disruption suite: engine restarts, container churn and 10,000 processes, with figures.

Bounded and repeatable; prints a summary and writes one JSON file per run (``--out DIR``).
Run from the repository root as root, with gputui's environment:

    python -m scripts.disruption restarts [--restarts 10] [--engine private|host]
    python -m scripts.disruption churn [--containers 500]
    python -m scripts.disruption procs [--processes 10000]

``restarts`` stops and starts a real dockerd while three things watch it: the Collector
in-process (recovery measured per refresh), a ``gputui --once --json`` loop, and the TUI in a
pseudo-terminal. ``--engine private`` (default) uses a second dockerd of its own (own socket,
data root, bridge; ``--live-restore``), so nobody else's containers on this machine stop;
``--engine host`` restarts the machine's own dockerd the way it was started and refuses while
containers it did not start are running (``--force`` overrides). A running engine is always
left behind (finally blocks, atexit, SIGTERM/SIGHUP/SIGINT turned into an orderly exit).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import pty
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import docker
import psutil

from gputui.collect.collector import Collector
from gputui.collect.docker.source import DockerSource
from gputui.collect.linux.proc_reader import ProcSource
from gputui.collect.standins.scenario import ScenarioSource
from gputui.model.snapshot import Snapshot
from scripts.engine_control import IMAGE, HostEngine, PrivateEngine, import_image

RUN_ID = f"{os.getpid()}-{uuid.uuid4().hex[:6]}"
REPO = Path(__file__).resolve().parents[1]


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def _exit_on_signals() -> None:
    def _exit(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _exit)


def _scenario(pids: list[int], n_gpus: int = 1) -> dict[str, Any]:
    gpus = [
        {
            "index": i, "uuid": f"GPU-0000{i:04d}-0000-0000-0000-{0:012d}", "name": "NVIDIA H200",
            "memory_total_mib": 143771, "memory_used_mib": [20000, 21000],
            "utilization_gpu": [10, 90], "temperature_c": 50, "power_w": 300.0,
            "power_limit_w": 700, "clock_sm_mhz": 1980, "processes": [],
        }
        for i in range(n_gpus)
    ]  # fmt: skip
    for k, pid in enumerate(pids):
        gpus[k % n_gpus]["processes"].append({"pid": pid, "used_memory_mib": 100, "sm_util": 5})
    return {"driver_version": "580.159.04", "cuda_driver_version": "13.0", "gpus": gpus}


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def _save(out: Path | None, name: str, figures: dict[str, Any]) -> None:
    print(json.dumps(figures, indent=2))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{name}.json").write_text(json.dumps(figures, indent=2) + "\n")
        log(f"figures written to {out / (name + '.json')}")


# -- the TUI in a pseudo-terminal ------------------------------------------------------------


class PtyApp:
    """``python -m gputui ARGS`` in a 120x40 pty; output drained (and kept) by a thread."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        import fcntl
        import struct
        import termios

        pid, fd = pty.fork()
        if pid == 0:  # the child: becomes gputui
            os.chdir(REPO)
            os.execve(sys.executable, [sys.executable, "-m", "gputui", *args], env)
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self.pid, self.fd = pid, fd
        self.output = bytearray()
        self.exit_status: int | None = None
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            self.output += chunk
            del self.output[: max(0, len(self.output) - 4_000_000)]  # bounded

    def alive(self) -> bool:
        if self.exit_status is None:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self.exit_status = status
        return self.exit_status is None

    def quit(self) -> None:
        if self.alive():
            with contextlib.suppress(OSError):
                os.write(self.fd, b"q")
            deadline = time.monotonic() + 5
            while self.alive() and time.monotonic() < deadline:
                time.sleep(0.05)
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            self.exit_status = -9
        with contextlib.suppress(OSError):
            os.close(self.fd)


# -- restarts ----------------------------------------------------------------------------------


def _correct(snap: Snapshot, expected: dict[str, int]) -> bool:
    if not snap.sources["docker"].ok:
        return False
    for cid, pid in expected.items():
        usage = snap.container(cid)
        if usage is None or usage.info.status != "running" or pid not in usage.pids:
            return False
    return True


def _once_correct(report: dict[str, Any], expected: dict[str, int]) -> bool:
    if not report["sources"]["docker"]["ok"]:
        return False
    rows = {c["id"]: c for c in report["containers"]}
    return all(
        cid in rows and rows[cid]["status"] == "running" and pid in rows[cid]["pids"]
        for cid, pid in expected.items()
    )


def cmd_restarts(args: argparse.Namespace) -> dict[str, Any]:
    engine: PrivateEngine | HostEngine
    if args.engine == "private":
        engine = PrivateEngine(live_restore=not args.no_live_restore)
        engine.start()
    else:
        engine = HostEngine()
        atexit.register(engine.ensure_running)
    client = docker.DockerClient(base_url=engine.url, timeout=30)
    workdir = Path(tempfile.mkdtemp(prefix="gputui-disrupt-"))
    scenario_file = workdir / "scenario.json"
    label = {"gputui-disrupt": RUN_ID}
    stop = threading.Event()
    lock = threading.Lock()
    expected: dict[str, int] = {}
    coll_samples: list[dict[str, Any]] = []
    once_samples: list[dict[str, Any]] = []
    tui: PtyApp | None = None
    figures: dict[str, Any] = {"run_id": RUN_ID, "engine": args.engine, "interval": args.interval}
    try:
        if args.engine == "host" and not args.force:
            foreign = [c.name for c in client.containers.list() if c.labels.get("gputui-disrupt")
                       != RUN_ID]  # fmt: skip
            if foreign:
                raise SystemExit(f"refusing: running containers would stop: {foreign[:5]}")
        import_image(client)
        policy = {"Name": "always"} if args.engine == "host" else None
        for i in range(args.containers):
            c = client.containers.run(
                IMAGE, ["sleep", "3600"], detach=True, network_mode="none", labels=label,
                name=f"gputui-disrupt-{RUN_ID}-{i}", restart_policy=policy,
            )  # fmt: skip
            c.reload()
            expected[c.id] = int(c.attrs["State"]["Pid"])
        _write_json(scenario_file, _scenario(list(expected.values())))
        env = {**os.environ, "DOCKER_HOST": engine.url, "TERM": "xterm-256color"}
        figures["live_restore"] = args.engine == "private" and not args.no_live_restore

        scenario = ScenarioSource(_scenario(list(expected.values())))
        collector = Collector(scenario, ProcSource(), DockerSource(base_url=engine.url))

        def collect_loop() -> None:
            while not stop.is_set():
                t0 = time.monotonic()
                sample: dict[str, Any] = {"t": t0}
                try:
                    snap = collector.collect()
                    with lock:
                        want = dict(expected)
                    sample.update(
                        ok=snap.sources["docker"].ok, kind=snap.sources["docker"].kind,
                        correct=_correct(snap, want), containers=len(snap.containers),
                        cycle_s=time.monotonic() - t0,
                    )  # fmt: skip
                except Exception as exc:  # counted, never fatal: that is what is measured
                    sample["exception"] = f"{type(exc).__name__}: {exc}"
                coll_samples.append(sample)
                stop.wait(max(0.0, args.interval - (time.monotonic() - t0)))

        def once_loop() -> None:
            while not stop.is_set():
                t0 = time.monotonic()
                out = subprocess.run(
                    [sys.executable, "-m", "gputui", "--once", "--json", "--scenario",
                     str(scenario_file)],
                    capture_output=True, env=env, cwd=REPO, timeout=120,
                )  # fmt: skip
                sample: dict[str, Any] = {"t0": t0, "t1": time.monotonic(), "rc": out.returncode}
                sample["traceback"] = b"Traceback" in out.stderr
                try:
                    report = json.loads(out.stdout)
                    with lock:
                        want = dict(expected)
                    sample["ok"] = report["sources"]["docker"]["ok"]
                    sample["correct"] = _once_correct(report, want)
                except (ValueError, KeyError) as exc:
                    sample["bad_json"] = str(exc)[:200]
                once_samples.append(sample)

        threads = [threading.Thread(target=fn, daemon=True) for fn in (collect_loop, once_loop)]
        for t in threads:
            t.start()
        tui = PtyApp(["--scenario", str(scenario_file), "--interval", str(args.interval)], env)
        per_restart = []
        for r in range(args.restarts):
            deadline = time.monotonic() + 60
            while not (coll_samples and coll_samples[-1].get("correct")):
                if time.monotonic() > deadline:
                    raise RuntimeError("the collector never became correct before a restart")
                time.sleep(0.05)
            t_stop = time.monotonic()
            stop_s = engine.stop()
            t_down = time.monotonic()
            time.sleep(args.down)
            start_s = engine.start()
            t_answer = time.monotonic()
            if args.engine == "host":  # containers restarted by their policy: new PIDs
                time.sleep(0.5)
                with lock:
                    for cid in expected:
                        expected[cid] = int(client.api.inspect_container(cid)["State"]["Pid"])
                _write_json(scenario_file, _scenario(list(expected.values())))
                scenario.nvml._gpus[0]["processes"] = _scenario(list(expected.values()))["gpus"][0][
                    "processes"
                ]  # type: ignore[index]
            deadline = time.monotonic() + 60
            while True:
                after = [s for s in coll_samples if s["t"] >= t_answer]
                good = [s for s in after if s.get("correct")]
                if good or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            during = [s for s in coll_samples if t_down <= s["t"] < t_answer]
            once_during = [s for s in once_samples if s["t0"] >= t_down and s["t1"] < t_answer]
            time.sleep(args.interval * 2)
            once_good = [s for s in once_samples if s["t0"] >= t_answer and s.get("correct")]
            row = {
                "restart": r + 1,
                "engine_stop_s": round(stop_s, 3),
                "engine_down_s": round(t_answer - t_down, 3),
                "engine_start_s": round(start_s, 3),
                "collector_outage_seen": any(s.get("ok") is False for s in during),
                "collector_state_kept": all(
                    s.get("containers", 0) >= len(expected) for s in during
                ),
                "collector_recovery_s": round(good[0]["t"] + good[0]["cycle_s"] - t_answer, 3)
                if good
                else None,
                "collector_recovery_refreshes": after.index(good[0]) + 1 if good else None,
                "once_runs_during_outage": len(once_during),
                "once_outage_shown": all(s.get("ok") is False for s in once_during),
                "once_first_correct_after_answer_s": round(once_good[0]["t1"] - t_answer, 3)
                if once_good
                else None,
                "tui_alive": tui.alive(),
                "stop_to_down_s": round(t_down - t_stop, 3),
            }
            per_restart.append(row)
            log(json.dumps(row))
        stop.set()
        for t in threads:
            t.join(timeout=150)
        tui_alive_at_end = tui.alive()
        tui.quit()
        collector.close()
        text = bytes(tui.output)
        # The header's source segment reads "Docker ok" or "Docker <reason>" (Textual may
        # interleave cursor moves, so this is a lower bound on what was on screen).
        plain = re.sub(rb"\x1b\[[0-9;?]*[ -/]*[@-~]", b"", text)
        figures.update(
            tui_outage_text_seen=bool(re.search(rb"Docker (?!ok)[a-z]", plain)),
            restarts=per_restart,
            collector_cycles=len(coll_samples),
            collector_exceptions=[s["exception"] for s in coll_samples if "exception" in s],
            once_runs=len(once_samples),
            once_crashes=sum(1 for s in once_samples if s["rc"] != 0 or s["traceback"]),
            once_bad_json=sum(1 for s in once_samples if "bad_json" in s),
            tui_crashed=not tui_alive_at_end or b"Traceback" in text,
            tui_exit_status=tui.exit_status,
            tui_output_bytes=len(text),
            max_recovery_refreshes=max(
                (r["collector_recovery_refreshes"] or 99 for r in per_restart), default=None
            ),
        )
        return figures
    finally:
        stop.set()
        if tui is not None and tui.exit_status is None:
            tui.quit()
        if isinstance(engine, HostEngine):
            engine.ensure_running()
            for c in client.containers.list(
                all=True, filters={"label": f"gputui-disrupt={RUN_ID}"}
            ):
                with contextlib.suppress(Exception):
                    c.remove(force=True)
        else:
            if not engine.running():
                engine.start()
            engine.close(client)
        client.close()
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)


# -- churn -------------------------------------------------------------------------------------


def _rss_mb() -> float:
    return psutil.Process().memory_info().rss / 1e6


def _cache_sizes(docker_source: DockerSource, procs: ProcSource) -> dict[str, int]:
    sizes = {f"docker_{name}": len(ids) for name, ids in docker_source.tracked_ids().items()}
    sizes.update({f"procs_{name}": len(pids) for name, pids in procs.tracked_pids().items()})
    return sizes


def cmd_churn(args: argparse.Namespace) -> dict[str, Any]:
    client = docker.from_env(timeout=60)
    import_image(client)
    label_key = "gputui-churn"
    lock = threading.Lock()
    running: dict[str, int] = {}
    removed_at: dict[str, float] = {}
    created: list[str] = []
    errors: list[str] = []
    rng = random.Random(args.seed)
    lifetimes = [rng.uniform(args.min_life, args.max_life) for _ in range(args.containers)]

    def churn(i: int) -> None:
        try:
            c = client.containers.create(
                IMAGE, ["sleep", "3600"], name=f"gputui-churn-{RUN_ID}-{i}",
                labels={label_key: RUN_ID}, network_mode="none",
            )  # fmt: skip
            with lock:
                created.append(c.id)
            c.start()
            pid = int(client.api.inspect_container(c.id)["State"]["Pid"])
            with lock:
                running[c.id] = pid
            time.sleep(lifetimes[i])
            with lock:
                running.pop(c.id, None)
            c.remove(force=True)
            with lock:
                removed_at[c.id] = time.monotonic()
        except Exception as exc:  # the engine's own failures are figures too
            errors.append(f"{type(exc).__name__}: {exc}"[:300])

    scenario = ScenarioSource(_scenario([]))
    dsrc, procs = DockerSource(), ProcSource()
    collector = Collector(scenario, procs, dsrc, mode="scenario")
    samples: list[tuple[float, set[str], dict[int, str | None], dict[str, int]]] = []
    exceptions: list[str] = []
    wrong: list[tuple[int, str | None, str]] = []
    rss: list[float] = []

    def one_cycle() -> None:
        with lock:
            named = dict(running)
        scenario.nvml._gpus[0]["processes"] = [  # type: ignore[index]
            {"pid": pid, "used_memory_mib": 10} for pid in named.values()
        ]
        t0 = time.monotonic()
        try:
            snap = collector.collect()
        except Exception as exc:
            exceptions.append(f"{type(exc).__name__}: {exc}")
            return
        by_pid = {pid: cid for cid, pid in named.items()}
        for p in snap.processes:
            if p.info.exists and p.pid in by_pid and p.container_id != by_pid[p.pid]:
                wrong.append((p.pid, p.container_id, by_pid[p.pid]))
        samples.append((t0, {u.info.id for u in snap.containers}, {}, _cache_sizes(dsrc, procs)))
        rss.append(_rss_mb())

    try:
        for _ in range(3):
            one_cycle()
            time.sleep(args.interval)
        baseline = _cache_sizes(dsrc, procs)
        rss_before = _rss_mb()
        log(f"churning {args.containers} containers, {args.workers} at a time")
        t_start = time.monotonic()
        with ThreadPoolExecutor(args.workers) as pool:
            futures = [pool.submit(churn, i) for i in range(args.containers)]
            while not all(f.done() for f in futures):
                t0 = time.monotonic()
                one_cycle()
                time.sleep(max(0.0, args.interval - (time.monotonic() - t0)))
        churn_s = time.monotonic() - t_start
        for _ in range(3):
            time.sleep(args.interval)
            one_cycle()
        churned = set(removed_at)
        stale = sorted(
            {cid for t, ids, _, _ in samples for cid in ids & churned
             if t >= removed_at[cid] + 2 * args.interval}
        )  # fmt: skip
        left = {name: len(ids & churned) for name, ids in dsrc.tracked_ids().items()}
        peak = {k: max(s[3][k] for s in samples) for k in baseline}
        return {
            "run_id": RUN_ID,
            "containers_churned": len(churned),
            "engine_errors": errors[:10],
            "engine_error_count": len(errors),
            "churn_seconds": round(churn_s, 1),
            "interval": args.interval,
            "cycles": len(samples),
            "collector_exceptions": exceptions,
            "wrong_attributions": wrong[:10],
            "stale_after_2_intervals": len(stale),
            "caches_baseline": baseline,
            "caches_peak": peak,
            "caches_end": _cache_sizes(dsrc, procs),
            "churned_ids_left_in_docker_caches": left,
            "rss_mb_before": round(rss_before, 1),
            "rss_mb_peak": round(max(rss), 1),
            "rss_mb_after": round(_rss_mb(), 1),
        }
    finally:
        collector.close()
        mine = client.containers.list(
            all=True, sparse=True, filters={"label": f"{label_key}={RUN_ID}"}
        )
        ids = {*created, *(c.id for c in mine)} - set(removed_at)
        for cid in ids:
            with contextlib.suppress(Exception):
                client.api.remove_container(cid, force=True)
        log(f"cleanup: removed {len(ids)} leftover churn containers")
        client.close()


# -- many processes ----------------------------------------------------------------------------


def cmd_procs(args: argparse.Namespace) -> dict[str, Any]:
    from bench.fixtures import Sleepers, run_cleanups
    from bench.scale import Timed

    sleepers = Sleepers()
    try:
        headroom = Sleepers.headroom()
        n = min(args.processes, headroom)
        t0 = time.monotonic()
        sleepers.grow_to(n)
        log(f"spawned {n} sleep processes in {time.monotonic() - t0:.1f} s")
        data = _scenario(sleepers.pids, n_gpus=8)
        gpu, procs, dock = Timed(ScenarioSource(data)), Timed(ProcSource()), Timed(DockerSource())
        collector = Collector(gpu, procs, dock, mode="scenario")  # type: ignore[arg-type]
        t0 = time.perf_counter()
        collector.collect()
        cold = time.perf_counter() - t0
        for timed in (gpu, procs, dock):
            timed.times.clear()
        totals = []
        for _ in range(args.cycles):
            t0 = time.perf_counter()
            snap = collector.collect()
            totals.append(time.perf_counter() - t0)
            time.sleep(args.interval_pause)
        collector.close()
        resolved = sum(1 for p in snap.processes if p.info.exists)
        scenario_file = Path(tempfile.mkdtemp(prefix="gputui-procs-")) / "s.json"
        _write_json(scenario_file, data)
        once = []
        for _ in range(3):
            t0 = time.perf_counter()
            argv = ["-m", "gputui", "--once", "--json", "--scenario", str(scenario_file)]
            out = subprocess.run(
                [sys.executable, *argv], capture_output=True, cwd=REPO, timeout=300
            )
            once.append(time.perf_counter() - t0)
            assert out.returncode == 0, out.stderr[-2000:]
        med = statistics.median
        ms = lambda v: round(v * 1000, 1)  # noqa: E731
        return {
            "processes": n,
            "gpus": 8,
            "resolved": resolved,
            "cycles": args.cycles,
            "cold_ms": ms(cold),
            "warm_median_ms": ms(med(totals)),
            "warm_p95_ms": ms(sorted(totals)[int(0.95 * (len(totals) - 1))]),
            "warm_max_ms": ms(max(totals)),
            "gpu_ms": ms(med(gpu.times)),
            "procs_ms": ms(med(procs.times)),
            "docker_ms": ms(med(dock.times)),
            "us_per_process": round(med(totals) / n * 1e6, 1),
            "once_json_s": [round(v, 2) for v in once],
            "rss_mb": round(_rss_mb(), 1),
        }
    finally:
        run_cleanups()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.disruption", description=__doc__)
    parser.add_argument("--out", type=Path, help="write <subcommand>.json here")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("restarts", help="stop/start a real dockerd under the monitor")
    p.add_argument("--restarts", type=int, default=10)
    p.add_argument("--engine", choices=("private", "host"), default="private")
    p.add_argument("--no-live-restore", action="store_true", help="private engine without it")
    p.add_argument("--force", action="store_true", help="host engine even with others' containers")
    p.add_argument("--containers", type=int, default=3)
    p.add_argument("--interval", type=float, default=1.0)
    p.add_argument("--down", type=float, default=3.0, help="seconds the engine stays down")
    p = sub.add_parser("churn", help="create and remove containers while monitoring")
    p.add_argument("--containers", type=int, default=500)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--interval", type=float, default=1.0)
    p.add_argument("--min-life", type=float, default=0.2)
    p.add_argument("--max-life", type=float, default=3.0)
    p.add_argument("--seed", type=int, default=7)
    p = sub.add_parser("procs", help="collection cycle with N GPU processes")
    p.add_argument("--processes", type=int, default=10_000)
    p.add_argument("--cycles", type=int, default=20)
    p.add_argument("--interval-pause", type=float, default=0.2)
    args = parser.parse_args(argv)
    if os.geteuid() != 0 and args.cmd == "restarts":
        parser.error("restarts needs root (it stops and starts dockerd)")
    _exit_on_signals()
    started = time.monotonic()
    figures = {"restarts": cmd_restarts, "churn": cmd_churn, "procs": cmd_procs}[args.cmd](args)
    figures["wall_s"] = round(time.monotonic() - started, 1)
    figures["machine"] = {
        "cpus": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 1e9, 1),
        "kernel": os.uname().release,
        "python": sys.version.split()[0],
    }
    _save(args.out, args.cmd, figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
