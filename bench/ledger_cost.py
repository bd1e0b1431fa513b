"""Ledger cost: writing at 1 Hz with 8 GPUs / 200 containers, disk per day, a 30-day query.

Figures, never pass/fail. Snapshots are built from the model (8 H200s; 200 containers: 16
running GPU jobs, two per GPU, 24 idle reservations, 160 without a GPU; a host process and a
PID nobody can find), each refresh with new figures. The writer runs exactly as in the monitor
(:class:`~gputui.ledger.writer.LedgerWriter`: accounting, a commit every 30 s) against a real
store in a temporary directory, on a simulated clock, so a day at 1 Hz takes minutes, not a day.

Prints:

* CPU time per snapshot (accounting + the commits' share) and so % of one core at 1 Hz
  (target <= 1 %);
* the store's size after a simulated day, rows per tier, bytes per row, and the steady-state
  size (48 h of 10 s buckets, 30 days of minutes, a year of hours; target <= 100 MB a year);
* the store's bytes per snapshot next to today's JSONL recording line of the same snapshots;
* the time of a 30-day query (``gputui ledger --since 30d``'s reads and sums: the hour tier)
  and of a 7-day one (the minute tier) on a store holding 30 days (target <= 300 ms).

Usage: ``python -m bench.ledger_cost [--hours 24] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

from bench import common
from gputui.ledger.quantities import Amounts, Device, Subject
from gputui.ledger.report import summarise
from gputui.ledger.store import Store
from gputui.ledger.writer import LedgerWriter
from gputui.model.containers import ContainerInfo
from gputui.model.gpu import GpuProcessSample, GpuSample
from gputui.model.processes import GpuProcess, ProcessInfo
from gputui.model.settings import Prices
from gputui.model.snapshot import ContainerUsage, HostInfo, Snapshot
from gputui.recording.codec import snapshot_to_record

GIB = 1024**3
T0 = 1_790_000_000.0
N_GPUS = 8


def _cid(i: int) -> str:
    return f"{i:064x}"


def snapshots(n: int, seed: int = 1) -> list[Snapshot]:
    """``n`` refreshes a second apart of the 8-GPU / 200-container host (figures change)."""
    rng = random.Random(seed)
    containers = []
    for i in range(200):
        if i < 16:
            request: tuple[str, ...] | None = (str(i // 2),)
        elif i < 40:
            request = (str((i - 16) // 3),)
        else:
            request = None
        containers.append(
            ContainerInfo(
                _cid(i),
                f"job-{i:03d}",
                f"registry.example/team/image-{i % 17}:v{i % 5}",
                "running",
                compose_project=f"project-{i % 11}",
                compose_service=f"svc-{i % 7}",
                gpu_request=request,
            )
        )
    energy = [10**9] * N_GPUS
    out = []
    for k in range(n):
        procs = []
        for i in range(16):
            for j in range(2):
                pid = 10_000 + 2 * i + j
                procs.append(
                    GpuProcess(
                        GpuProcessSample(
                            pid,
                            i // 2,
                            rng.randrange(1, 40) * GIB,
                            sm_util=rng.randrange(0, 50),
                        ),
                        ProcessInfo(pid, name="python", user="root", container_id=_cid(i)),
                        _cid(i),
                    )
                )
        procs.append(
            GpuProcess(
                GpuProcessSample(500, 7, 2 * GIB, sm_util=3),
                ProcessInfo(500, name="python", user="alice"),
            )
        )
        procs.append(
            GpuProcess(GpuProcessSample(4_000_000, 6, GIB), ProcessInfo(4_000_000, exists=False))
        )
        gpus = []
        for g in range(N_GPUS):
            energy[g] += rng.randrange(100_000, 700_000)
            gpus.append(
                GpuSample(
                    g,
                    f"GPU-{g:08d}-0000-0000-0000-000000000000",
                    "NVIDIA H200",
                    utilization_gpu=rng.randrange(0, 101),
                    memory_used_bytes=60 * GIB,
                    memory_total_bytes=141 * GIB,
                    power_w=rng.uniform(80, 700),
                    gpm_sm_active=rng.uniform(0, 100),
                    total_energy_mj=energy[g],
                    processes=tuple(p.sample for p in procs if p.sample.gpu_index == g),
                )
            )
        usages = tuple(
            ContainerUsage(
                info,
                pids=tuple(p.pid for p in procs if p.container_id == info.id),
                gpu_indexes=(int(info.gpu_request[0]),) if info.gpu_request else (),
            )
            for info in containers
        )
        out.append(
            Snapshot(
                T0 + k,
                "live",
                HostInfo("gpu-host", driver_version="580.159.04"),
                gpus=tuple(gpus),
                processes=tuple(procs),
                containers=usages,
            )
        )
    return out


def write_day(store: Path, hours: float, pool: list[Snapshot]) -> dict[str, float]:
    """Write ``hours`` of 1 Hz snapshots (cycling through ``pool`` with new times)."""
    clock = [T0]
    writer = LedgerWriter(store, "bench", interval_s=1.0, clock=lambda: clock[0])
    n = int(hours * 3600)
    cpu = 0.0
    for k in range(n):
        base = pool[k % len(pool)]
        snapshot = Snapshot(
            T0 + k,
            base.mode,
            base.host,
            gpus=base.gpus,
            processes=base.processes,
            containers=base.containers,
        )
        clock[0] = snapshot.taken_at
        started = time.process_time()
        writer.observe(snapshot)
        cpu += time.process_time() - started
    started = time.process_time()
    writer.close()
    cpu += time.process_time() - started
    return {"snapshots": n, "cpu_s": cpu}


def jsonl_bytes(pool: list[Snapshot]) -> float:
    """Mean bytes of a ``gputui record`` line over ``pool`` (with its unchanged-part references)."""
    total = 0
    previous = None
    for snapshot in pool:
        total += len(json.dumps(snapshot_to_record(snapshot, previous), separators=(",", ":"))) + 1
        previous = snapshot
    return total / len(pool)


def month_store(path: Path) -> None:
    """A store holding 30 days of minute buckets of the same host (rows as the writer makes)."""
    store = Store.open_writer(path, "bench")
    devices = [Device(str(g), f"GPU-{g}", "NVIDIA H200") for g in range(N_GPUS)]
    subjects = [
        Subject("container", _cid(i), f"job-{i:03d}", f"image-{i % 17}", f"project-{i % 11}")
        for i in range(40)
    ]
    extra = [Subject("unallocated", "", "unallocated"), Subject("user", "alice", "alice")]
    try:
        day = 86400
        for d in range(30):
            rows: dict[tuple[int, Device, Subject], Amounts] = {}
            cover = {}
            for minute in range(0, day, 60):
                t = int(T0) + d * day + minute
                for i, subject in enumerate(subjects):
                    rows[(t, devices[(i // 2 if i < 16 else (i - 16) // 3) % N_GPUS], subject)] = (
                        Amounts(60.0, 30.0, 12.0, 600.0, 20 * GIB, 3000.0, 9000.0)
                    )
                for dev in devices[:2]:
                    rows[(t, dev, extra[0])] = Amounts(0, 60.0, 0, 0, 0, 100.0, 0)
                rows[(t, devices[7], extra[1])] = Amounts(0, 1.0, 0.1, 1.0, GIB, 1.0, 1.0)
                cover[t] = (60.0, 480.0, 100_000.0)
            store.write(rows, cover, [], t + 60)
        # Only the minute and hour tiers reach back 30 days: the 10 s tier keeps 48 h.
        store.prune(T0 + 30 * day)
    finally:
        store.close()


def query_ms(path: Path, days: float, repeats: int = 7) -> tuple[float, float]:
    """Median wall and CPU milliseconds of a ``days`` window's read and sums (opening included).

    The CPU figure is the one to compare on a loaded machine: the wall one waits for the cores.
    """
    times = []
    cpu = []
    now = T0 + 30 * 86400
    for _ in range(repeats):
        started = time.perf_counter()
        started_cpu = time.process_time()
        store = Store.open_reader(path)
        try:
            rows = store.usage(now - days * 86400, now, now)
            store.coverage(now - days * 86400, now, now)
            summarise(rows, "container", Prices())
        finally:
            store.close()
        times.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - started_cpu) * 1000)
    return common.median(times), common.median(cpu)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(prog="python -m bench.ledger_cost")
    parser.add_argument("--hours", type=float, default=24.0, help="simulated hours at 1 Hz")
    parser.add_argument("--out", default=None, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    common.log("building snapshots")
    pool = snapshots(600)
    with tempfile.TemporaryDirectory(prefix="gputui-bench-ledger-") as tmp:
        path = Path(tmp) / "ledger.sqlite"
        common.log(f"writing {args.hours:g} simulated hours at 1 Hz")
        written = write_day(path, args.hours, pool)
        size = path.stat().st_size
        store = Store.open_reader(path)
        try:
            tiers = dict(
                store.conn.execute("SELECT tier, count(*) FROM usage GROUP BY tier").fetchall()
            )
        finally:
            store.close()
        rows = sum(tiers.values())
        per_row = size / max(1, rows)
        scale = 24.0 / args.hours
        per_day = {t: n * scale for t, n in tiers.items()}
        steady = per_row * (per_day.get(0, 0) * 2 + per_day.get(1, 0) * 30)
        per_year = per_row * per_day.get(2, 0) * 365
        minute_year = per_row * per_day.get(1, 0) * 365
        common.log("building a 30-day store")
        month = Path(tmp) / "month.sqlite"
        month_store(month)
        q, q_cpu = query_ms(month, 30)
        q7, q7_cpu = query_ms(month, 7)
        month_size = month.stat().st_size
    cpu_per = written["cpu_s"] / written["snapshots"]
    line = jsonl_bytes(pool[:300])
    figures = {
        "cpu_ms_per_snapshot": cpu_per * 1000,
        "cpu_pct_of_core_at_1hz": cpu_per * 100,
        "store_bytes_after_hours": size,
        "hours": args.hours,
        "rows_per_day_by_tier": per_day,
        "bytes_per_row": per_row,
        "steady_state_mb_10s_and_1min_tiers": steady / 1e6,
        "mb_per_year_hour_tier": per_year / 1e6,
        "mb_per_year_if_minute_tier_kept": minute_year / 1e6,
        "disk_mb_per_day": size * scale / 1e6,
        "store_bytes_per_snapshot": size / written["snapshots"],
        "jsonl_bytes_per_snapshot": line,
        "query_30d_ms": q,
        "query_30d_cpu_ms": q_cpu,
        "query_7d_ms": q7,
        "query_7d_cpu_ms": q7_cpu,
        "month_store_mb": month_size / 1e6,
    }
    rows_out = [
        ("CPU per snapshot (accounting + commits)", f"{cpu_per * 1000:.2f} ms", ""),
        ("CPU at 1 Hz", f"{cpu_per * 100:.2f} % of a core", "<= 1 %"),
        ("disk per day (all tiers)", f"{size * scale / 1e6:.1f} MB", ""),
        (
            "rows per day: 10 s / 1 min / 1 h",
            " / ".join(f"{per_day.get(t, 0):.0f}" for t in (0, 1, 2)),
            "",
        ),
        ("bytes per row", f"{per_row:.0f}", ""),
        ("steady state: 48 h of 10 s + 30 d of 1 min", f"{steady / 1e6:.0f} MB", ""),
        ("each year at the 1 h tier", f"{per_year / 1e6:.1f} MB", "<= 100 MB"),
        ("a year at the 1 min tier (if it were kept)", f"{minute_year / 1e6:.0f} MB", "(100 MB)"),
        ("store bytes per snapshot", f"{size / written['snapshots']:.0f}", ""),
        ("JSONL record bytes per snapshot", f"{line:.0f}", ">= 10x the store's"),
        ("30-day query (hour tier)", f"{q:.0f} ms ({q_cpu:.0f} ms CPU)", "<= 300 ms"),
        ("7-day query (minute tier)", f"{q7:.0f} ms ({q7_cpu:.0f} ms CPU)", ""),
        ("30-day store (minute + hour tiers)", f"{month_size / 1e6:.0f} MB", ""),
    ]
    common.emit(
        "ledger cost, 8 GPUs / 200 containers at 1 Hz",
        common.table(("figure", "value", "target"), rows_out),
    )
    common.save_json(args.out, "ledger_cost", figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
