"""Docker API calls per refresh, and the soak: RSS slope at 10 Hz for the collector and the TUI."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
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
        # replace(), not the slots: the snapshot's container index is no init argument.
        hist.record(dataclasses.replace(snap, taken_at=t + (i + 1) * interval))
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return grown / 200


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


def collector_child(scenario_file: str, hz: float, store: str | None = None) -> None:
    """``python -m bench.soak SCENARIO HZ [STORE]``: the soak's collector, until SIGTERM.

    The product's collect loop (:class:`~gputui.collect.loop.CollectLoop`, with its garbage
    collector policy) runs the collector; with ``STORE`` a ledger writer made by ``writer_for``
    (a store named explicitly, as ``export --store`` names it) is the loop's observer, as in
    ``gputui export``: it commits every 30 s from ``observe`` and once more on ``close``.
    Prints ``{"cycles": N}`` when it ends.
    """
    with open(scenario_file, encoding="utf-8") as fh:
        data = json.load(fh)
    from gputui.collect.loop import CollectLoop

    coll = _collector(data)
    writer = None
    if store is not None:
        from gputui.ledger.writer import announcing, writer_for

        writer = writer_for("soak", mode=coll.mode, interval_s=1.0 / hz, store=Path(store),
                            explicit=True)  # fmt: skip
        if writer is None:
            coll.close()
            raise SystemExit("bench.soak: the ledger is switched off (GPUTUI_LEDGER)")
    observe = (
        None
        if writer is None
        else announcing(writer, lambda line: print(f"soak collector: {line}", file=sys.stderr))
    )
    loop: CollectLoop[None] = CollectLoop(
        coll, lambda _snap: None, lambda _snap, _a: None, interval=1.0 / hz, observe=observe
    )
    signal.signal(signal.SIGTERM, lambda *_: loop.stop())
    try:
        loop.run()
    finally:
        coll.close()
        if writer is not None:
            writer.close()  # what export does after its loop: the last commit
    print(json.dumps({"cycles": loop.delivered}), flush=True)


# -- the ledger store's size -------------------------------------------------------------------


def _retention() -> dict[str, float | None]:
    """Each class of rows and the days the store keeps it (None: for ever), as it prunes."""
    from gputui.ledger.store import EVENTS_KEEP_S, TIERS, TIMELINE_KEEP_S

    kept: dict[str, float | None] = {}
    for _tier, size, keep_s in TIERS:
        days = None if keep_s is None else keep_s / 86400
        kept[f"usage {size} s"] = days
        kept[f"coverage {size} s"] = days
    kept["timeline"] = TIMELINE_KEEP_S / 86400
    kept["events"] = EVENTS_KEEP_S / 86400
    for table in ("subjects", "devices", "gaps", "sessions", "meta"):
        kept[table] = None  # never pruned
    return kept


def store_files_bytes(path: Path) -> tuple[int, int]:
    """(SQLite file, its -wal) sizes in bytes; 0 for one that does not exist."""
    sizes = []
    for p in (path, path.with_name(path.name + "-wal")):
        try:
            sizes.append(p.stat().st_size)
        except OSError:
            sizes.append(0)
    return sizes[0], sizes[1]


def store_breakdown(path: Path) -> dict[str, int]:
    """Bytes of the store's pages by class of rows (``usage`` and ``coverage`` by tier).

    Read-only, through SQLite's ``dbstat`` (pages in the WAL included: what a reader sees).
    ``usage`` and ``coverage`` hold every tier in one table: their bytes are split by row count
    (the rows of all tiers are alike). Indexes count with their table; ``free`` is the free list.
    """
    import sqlite3

    from gputui.ledger.store import TIERS

    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        owner = dict(conn.execute("SELECT name, tbl_name FROM sqlite_master"))
        tables: dict[str, int] = {}
        for name, size in conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"):
            table = owner.get(name, name)
            tables[table] = tables.get(table, 0) + int(size)
        out: dict[str, int] = {}
        sizes = {tier: size for tier, size, _ in TIERS}
        for table in ("usage", "coverage"):
            counts = dict(conn.execute(f"SELECT tier, COUNT(*) FROM {table} GROUP BY tier"))
            total = sum(counts.values()) or 1
            whole = tables.pop(table, 0)
            for tier, size in sizes.items():
                out[f"{table} {size} s"] = round(whole * counts.get(tier, 0) / total)
        page = int(conn.execute("PRAGMA page_size").fetchone()[0])
        free = int(conn.execute("PRAGMA freelist_count").fetchone()[0]) * page
        for table, size in tables.items():
            if table not in ("sqlite_schema", "sqlite_master"):
                out[table] = out.get(table, 0) + size
        out["free"] = free
        out["rows: usage"] = int(conn.execute("SELECT COUNT(*) FROM usage").fetchone()[0])
        out["rows: timeline"] = int(conn.execute("SELECT COUNT(*) FROM timeline").fetchone()[0])
        out["rows: events"] = int(conn.execute("SELECT COUNT(*) FROM events").fetchone()[0])
        out["rows: subjects"] = int(conn.execute("SELECT COUNT(*) FROM subjects").fetchone()[0])
        return out
    finally:
        conn.close()


def store_projection(
    samples: list[tuple[float, int, int]],
    early: tuple[float, dict[str, int]] | None,
    final: tuple[float, dict[str, int]] | None,
    skip: float,
) -> dict[str, Any]:
    """What a store's sizes say: growth per hour after ``skip`` s, and days ahead.

    ``samples`` are ``(t, db bytes, wal bytes)`` once a minute; ``early`` and ``final`` are
    :func:`store_breakdown` at ``skip`` and after the writer closed. Each class of rows grows
    at its measured rate until the store keeps no more of it (``_retention``): the file then
    stops growing by it (SQLite reuses the freed pages; the file never shrinks).
    """
    pts = [(t, db + wal) for t, db, wal in samples if t >= skip] or [
        (t, db + wal) for t, db, wal in samples
    ]
    slope_b_s = common.slope([t for t, _ in pts], [b for _, b in pts])
    out: dict[str, Any] = {
        "mb_per_h": slope_b_s * 3600 / 1e6,
        "mb_per_day": slope_b_s * 86400 / 1e6,
        "last_mb": (samples[-1][1] + samples[-1][2]) / 1e6 if samples else float("nan"),
        "wal_max_mb": max((w for _, _, w in samples), default=0) / 1e6,
    }
    if early is None or final is None or final[0] <= early[0]:
        return out
    span = final[0] - early[0]
    kept = _retention()
    rates = {
        name: max(0.0, (final[1].get(name, 0) - early[1].get(name, 0)) / span) for name in kept
    }
    out["mb_per_day_by_class"] = {k: v * 86400 / 1e6 for k, v in rates.items() if v > 0}
    run_days = final[0] / 86400
    wal_max = float(max((w for _, _, w in samples), default=0))  # the WAL keeps its size
    base = sum(v for k, v in final[1].items() if not k.startswith("rows: ")) + wal_max

    def size_at(days: float) -> float:
        """MB of the file ``days`` days after the writer started."""
        grow = 0.0
        for name, rate in rates.items():
            keep = kept[name]
            until = days if keep is None else min(days, keep)
            grow += rate * max(0.0, until - run_days) * 86400
        return (base + grow) / 1e6

    def per_day(days: float) -> float:
        """MB a day the file grows by ``days`` days on: the classes still kept then."""
        growing = 0.0
        for name, rate in rates.items():
            keep = kept[name]
            if keep is None or keep > days:
                growing += rate
        return growing * 86400 / 1e6

    out["model"] = {
        "mb_per_day_until_2_days": per_day(0),
        "mb_per_day_days_2_to_7": per_day(2.5),
        "mb_per_day_days_7_to_30": per_day(8),
        "mb_per_day_after_30_days": per_day(31),
        "mb_at_days": {d: size_at(d) for d in (1, 2, 7, 30, 365)},
    }
    out["final_breakdown"] = final[1]
    return out


def _served_port(log: Path) -> int | None:
    """The port of export's ``serving http://HOST:PORT/metrics`` line, once it is written."""
    try:
        found = re.search(rb"serving http://\S+?:([0-9]+)/metrics", log.read_bytes())
    except OSError:
        return None
    return int(found.group(1)) if found else None


def _scrape(port: int) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            resp.read()
            return bool(resp.status == 200)
    except OSError:
        return False


def _log_minute(
    now: float,
    collector: subprocess.Popen[str] | None,
    export: subprocess.Popen[bytes] | None,
    tui: PtyRun | None,
    stores: dict[str, list[tuple[float, int, int]]],
) -> None:
    parts = [f"minute {now / 60:.0f}"]
    for name, proc in (("collector", collector), ("export", export)):
        if proc is not None:
            parts.append(f"{name} RSS {common.rss_bytes([proc.pid]) / 1e6:.1f} MB")
    if tui is not None and tui.samples:
        parts.append(f"TUI RSS {tui.samples[-1].rss / 1e6:.1f} MB")
    for name, samples in stores.items():
        _, db, wal = samples[-1]
        parts.append(f"{name} store {db / 1e6:.2f} + wal {wal / 1e6:.2f} MB")
    common.log(", ".join(parts))


def _store_text(
    name: str, proj: dict[str, Any], samples: list[tuple[float, int, int]], skip: float
) -> str:
    per_minute = "  ".join(f"{t / 60:.0f}: {(db + wal) / 1e6:.2f}" for t, db, wal in samples)
    lines = [
        f"{name}'s ledger store (SQLite file + -wal), MB at each minute: {per_minute}",
        f"  after {skip / 60:.0f} min: {proj['mb_per_h']:.2f} MB/h = {proj['mb_per_day']:.1f} MB"
        f" per day (until the 10 s tier is pruned, after 2 days); WAL at most"
        f" {proj['wal_max_mb']:.2f} MB",
    ]
    model = proj.get("model")
    if model:
        by = ", ".join(f"{k} {v:.2f}" for k, v in sorted(proj["mb_per_day_by_class"].items(),
                                                           key=lambda kv: -kv[1]))  # fmt: skip
        at = ", ".join(f"{d} d: {mb:.0f}" for d, mb in model["mb_at_days"].items())
        lines += [
            f"  MB per day by rows: {by}",
            f"  by retention: {model['mb_per_day_until_2_days']:.1f} MB/day until day 2,"
            f" {model['mb_per_day_days_2_to_7']:.1f} days 2-7,"
            f" {model['mb_per_day_days_7_to_30']:.1f} days 7-30,"
            f" {model['mb_per_day_after_30_days']:.2f} after day 30",
            f"  size (MB) at {at}",
        ]
    return "\n".join(lines)


def cmd_soak(args: argparse.Namespace) -> dict[str, Any]:
    import docker as docker_sdk

    what = set(args.what.split(","))
    if "both" in what:  # the documented spelling for collector and TUI together
        what = (what - {"both"}) | {"collector", "tui"}
    if "all" in what:
        what = (what - {"all"}) | {"collector", "tui", "export"}
    unknown = what - {"collector", "tui", "export"}
    if unknown:
        raise SystemExit(f"soak --what: unknown {', '.join(sorted(unknown))}")
    seconds, period = args.minutes * 60, 1.0 / args.hz
    lifetime = int(seconds) + 600  # the load outlives the run; a killed run's ends 10 min later
    sleepers = Sleepers(lifetime)
    containers = (
        Containers(docker_sdk.from_env(timeout=60), lifetime_s=lifetime)
        if args.soak_containers
        else None
    )
    result: dict[str, Any] = {"minutes": args.minutes, "hz": args.hz, "store": args.store}
    scen_file = None
    collector: subprocess.Popen[str] | None = None
    export: subprocess.Popen[bytes] | None = None
    # Each writer its own store (one writer per store: the second would be read-only).
    store_dir = Path(tempfile.mkdtemp(prefix="gputui-bench-store-"))
    stores: dict[str, Path] = {}
    if args.store:
        stores = {p: store_dir / f"{p}.sqlite" for p in ("collector", "export") if p in what}
    store_samples: dict[str, list[tuple[float, int, int]]] = {p: [] for p in stores}
    store_early: dict[str, tuple[float, dict[str, int]]] = {}
    store_final: dict[str, tuple[float, dict[str, int]]] = {}
    store_skip = min(600.0, seconds / 3)  # growth "after the first 10 minutes"
    export_log = store_dir / "export.stderr"
    export_samples: list[tuple[float, int]] = []
    export_maps: list[tuple[float, dict[str, int]]] = []
    scrapes, scrape_errors, port = 0, 0, None
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
            store_argv = [str(stores["collector"])] if "collector" in stores else []
            collector = subprocess.Popen(
                [sys.executable, "-m", "bench.soak", scen_file, f"{args.hz:g}", *store_argv],
                stdout=subprocess.PIPE,
                text=True,
            )
        if "export" in what:
            # The product process that writes a store for days: `gputui export --store`
            # (the TUI writes only a live host's snapshots, into the default store).
            argv = gputui_argv(args, "export", "--scenario", scen_file, "--interval",
                               f"{period:g}", "--listen", "127.0.0.1:0")  # fmt: skip
            if "export" in stores:
                argv += ["--store", str(stores["export"])]
            with open(export_log, "wb") as err:
                export = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
        if "tui" in what:
            tui = PtyRun(gputui_argv(args, "--scenario", scen_file, "--interval", f"{period:g}"),
                         cols=args.cols, rows=args.rows)  # fmt: skip
            tui.start()
        if containers is not None and args.churn_every > 0:
            containers.grow_to(args.soak_containers + args.churn_containers)
        t0 = time.monotonic()
        next_map = next_store = next_scrape = 0.0
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
            if export is not None and export.poll() is None:
                export_samples.append((now, common.rss_bytes([export.pid])))
                if port is None:
                    port = _served_port(export_log)
                if port is not None and now >= next_scrape:
                    # Scraped as Prometheus would (every --scrape-every s): the exposition
                    # is rebuilt and served, as on a host that is monitored for days.
                    next_scrape = now + args.scrape_every
                    if _scrape(port):
                        scrapes += 1
                    else:
                        scrape_errors += 1
            if tui is not None and tui.alive():
                tui.sample()
            if now >= next_map:  # which allocator holds the growth: once a minute
                if tui is not None and tui.alive():
                    tui_maps.append((now, common.memory_split(tui.pid)))
                if export is not None and export.poll() is None:
                    export_maps.append((now, common.memory_split(export.pid)))
                next_map += 60.0
            if now >= next_store:
                for name, path in stores.items():
                    db, wal = store_files_bytes(path)
                    store_samples[name].append((now, db, wal))
                    if name not in store_early and now >= store_skip and db + wal:
                        with contextlib.suppress(Exception):  # a busy store: the next minute
                            store_early[name] = (now, store_breakdown(path))
                _log_minute(now, collector, export, tui, store_samples)
                next_store += 60.0
            time.sleep(1.0)
        if collector is not None:
            collector.send_signal(signal.SIGTERM)
            out, _ = collector.communicate(timeout=30)
            with contextlib.suppress(ValueError, IndexError, KeyError):
                cycles = int(json.loads(out.strip().splitlines()[-1])["cycles"])
        if export is not None:
            export.send_signal(signal.SIGTERM)
            export.wait(timeout=30)
            result["export_exit"] = export.returncode
        ended = time.monotonic() - t0
        for name, path in stores.items():  # the writers have closed: their last commit is in
            db, wal = store_files_bytes(path)
            store_samples[name].append((ended, db, wal))
            try:
                store_final[name] = (ended, store_breakdown(path))
            except Exception as exc:  # the samples are still worth their report
                result.setdefault("store_errors", {})[name] = repr(exc)
        if tui is not None:
            tui.stop()
            snap = _one_snapshot(data)  # while the scenario's processes still run
    finally:
        if collector is not None and collector.poll() is None:
            collector.kill()
            collector.wait()
        if export is not None and export.poll() is None:
            export.kill()
            export.wait()
        with contextlib.suppress(OSError):
            result["export_stderr"] = export_log.read_text(errors="replace")[-2000:]
        shutil.rmtree(store_dir, ignore_errors=True)
        sleepers.kill_all()
        if containers is not None:
            containers.remove_all()
        if scen_file:
            os.unlink(scen_file)
    result["churns"] = churns
    # The raw samples first: a long run's figures survive a fault in what is derived below.
    common.save_json(args.out, "soak-samples", {
        "collector": coll_samples, "export": export_samples,
        "tui": [(s.at, s.rss) for s in tui.samples] if tui is not None else [],
        "stores": store_samples, "store_early": store_early, "store_final": store_final,
    })  # fmt: skip
    # Imports, caches and the first health run settle in the first 30 s; the history ring
    # buffers fill for their whole window, so a slope meant for "after they fill" starts later.
    skip = args.fit_after_minutes * 60 if args.fit_after_minutes else min(30.0, seconds / 4)
    rows = []
    if coll_samples:
        slope, first, last = _slope_mb_per_h(coll_samples, skip)
        result["collector"] = {"slope_mb_h": slope, "first_mb": first, "last_mb": last,
                               "cycles": cycles, "samples": coll_samples}  # fmt: skip
        rows.append(["collector (own process)", cycles, first, last, slope, slope * 24])
    if export_samples:
        slope, first, last = _slope_mb_per_h(export_samples, skip)
        result["export"] = {"slope_mb_h": slope, "first_mb": first, "last_mb": last,
                            "scrapes": scrapes, "scrape_errors": scrape_errors,
                            "samples": export_samples, "maps": export_maps}  # fmt: skip
        rows.append(["export (own process)", "-", first, last, slope, slope * 24])
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
    if export_samples:
        text += f"\nexport scraped {scrapes} times every {args.scrape_every:g} s"
        text += f" ({scrape_errors} failed)" if scrape_errors else ""
    for name in stores:
        proj = store_projection(
            store_samples[name], store_early.get(name), store_final.get(name), store_skip
        )
        result.setdefault("stores", {})[name] = {**proj, "samples": store_samples[name]}
        text += "\n" + _store_text(name, proj, store_samples[name], store_skip)
    if "tui" in what and args.store:
        text += "\n(the TUI writes no store on a scenario: writer_for writes only a live host's)"
    text += "\ntarget: <= 5 MB per 24 h once buffers are full"
    common.emit("Soak: RSS growth", text)
    common.save_json(args.out, "soak", result)
    return result


if __name__ == "__main__":
    collector_child(sys.argv[1], float(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)
