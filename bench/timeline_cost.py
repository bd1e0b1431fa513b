"""Timeline cost: bytes and CPU per kept snapshot, structural deltas against zlib's zdict.

Figures, never pass/fail. Three hosts, each a run of kept snapshots (one every 10 s, so 8,640 a
day, kept 7 days) encoded as the writer does (:class:`~gputui.ledger.timeline.TimelineEncoder`,
a whole record every 30th) and as gputui did before (each record compressed with the previous
one's JSON as zlib's preset dictionary):

* ``demo``: ``--demo``'s snapshots, every 10th of a run at 1 s (as the timeline keeps them);
* ``busy model``: :func:`tests.support.factories.busy_host`, 8 GPUs, 220 processes and 30
  containers whose figures move every refresh (utilisation, power, every process's CPU % and
  SM share, some memory) and whose jobs come and go;
* ``busy scenario``: ``bench.scale.scenario`` (the soak's 8 GPUs with a GPU process on each of
  220 of this machine's PIDs, whose GPU memory and SM share step every refresh) read by the
  real collector (real /proc, the real Docker engine), a refresh a second.

Prints, per host: the record's JSON bytes, bytes per kept snapshot (over whole 30-record
cycles, the whole one included) before and after, MB a day and over the 7 days, the encoder's
CPU per kept snapshot (the record's JSON included; it runs on the collector's thread) and the
CPU of a replay's worst seek (29 deltas from the whole record).

Usage: ``python -m bench.timeline_cost [--cycles 2] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import zlib
from dataclasses import replace
from typing import Any

from bench import common
from gputui.ledger.timeline import KEY_EVERY, TimelineEncoder, decode_record
from gputui.model.snapshot import Snapshot
from gputui.recording.codec import snapshot_to_record

PER_DAY = 86_400 / 10
KEEP_DAYS = 7


def demo(n: int) -> list[Snapshot]:
    """``n`` kept snapshots of ``--demo`` (every 10th refresh)."""
    from gputui.model.settings import Settings
    from gputui.wiring.compose import build_collector

    collector = build_collector(Settings(demo=True))
    try:
        kept = [collector.collect() for _ in range(n * 10)][::10]
    finally:
        collector.close()
    return [replace(s, taken_at=1_790_000_000.0 + 10 * i) for i, s in enumerate(kept)]


def busy_scenario(n: int) -> list[Snapshot]:
    """``n`` refreshes of the soak's 8-GPU scenario on 220 of this machine's PIDs, 1 s apart."""
    from bench.scale import scenario
    from bench.soak import _collector

    pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())[:220]
    collector = _collector(scenario(8, pids))
    out = []
    try:
        for _ in range(n):
            out.append(collector.collect())
            time.sleep(1.0)
    finally:
        collector.close()
    return [replace(s, taken_at=1_790_000_000.0 + 10 * i) for i, s in enumerate(out)]


def before(snapshots: list[Snapshot]) -> list[int]:
    """Blob sizes as gputui wrote them before: zlib with the previous JSON as preset dictionary."""
    sizes = []
    previous = b""
    for i, snapshot in enumerate(snapshots):
        raw = json.dumps(snapshot_to_record(snapshot), separators=(",", ":")).encode()
        if i % KEY_EVERY == 0:
            packer = zlib.compressobj(6)
        else:
            packer = zlib.compressobj(6, zlib.DEFLATED, 15, 8, zlib.Z_DEFAULT_STRATEGY, previous)
        sizes.append(len(packer.compress(raw) + packer.flush()))
        previous = raw
    return sizes


def measure(snapshots: list[Snapshot]) -> dict[str, Any]:
    """One host's figures."""
    encoder = TimelineEncoder(every_s=0)
    blobs: list[tuple[bool, bytes]] = []
    cpu = []
    for snapshot in snapshots:
        started = time.process_time()
        kept = encoder.take(snapshot)
        cpu.append(time.process_time() - started)
        assert kept is not None
        blobs.append((kept[1], kept[2]))
    old_cpu = time.process_time()
    old = before(snapshots)
    old_cpu = time.process_time() - old_cpu
    started = time.process_time()
    state = None
    for whole, blob in blobs[:KEY_EVERY]:
        state = decode_record(blob, whole, state)
    seek = time.process_time() - started
    new = [len(blob) for _, blob in blobs]
    record = len(json.dumps(snapshot_to_record(snapshots[-1]), separators=(",", ":")))
    deltas = [len(b) for w, b in blobs if not w]
    old_deltas = [s for i, s in enumerate(old) if i % KEY_EVERY]
    return {
        "snapshots": len(snapshots),
        "record_bytes": record,
        "whole_bytes": new[0],
        "delta_bytes_before": sum(old_deltas) / len(old_deltas),
        "delta_bytes_after": sum(deltas) / len(deltas),
        "bytes_per_snapshot_before": sum(old) / len(old),
        "bytes_per_snapshot_after": sum(new) / len(new),
        "encode_cpu_ms_before": old_cpu / len(snapshots) * 1000,
        "encode_cpu_ms_after": sum(cpu) / len(cpu) * 1000,
        "encode_cpu_ms_after_p95": common.pct(cpu, 95) * 1000,
        "worst_seek_cpu_ms": seek * 1000,
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its table."""
    from tests.support.factories import busy_host

    parser = argparse.ArgumentParser(prog="python -m bench.timeline_cost")
    parser.add_argument("--cycles", type=int, default=2, help="30-record cycles per host")
    parser.add_argument("--out", default=None, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    n = args.cycles * KEY_EVERY
    hosts = {}
    common.log("demo")
    hosts["demo"] = measure(demo(n))
    common.log("busy model")
    hosts["busy model"] = measure(busy_host(n))
    common.log("busy scenario (a refresh a second)")
    hosts["busy scenario"] = measure(busy_scenario(n))
    rows = []
    for name, f in hosts.items():
        b, a = f["bytes_per_snapshot_before"], f["bytes_per_snapshot_after"]
        rows.append((
            name,
            f"{f['record_bytes'] / 1000:.1f} KB",
            f"{f['delta_bytes_before'] / 1000:.2f} → {f['delta_bytes_after'] / 1000:.2f} KB",
            f"{b / 1000:.2f} → {a / 1000:.2f} KB",
            f"{b * PER_DAY / 1e6:.1f} → {a * PER_DAY / 1e6:.1f} MB",
            f"{b * PER_DAY * KEEP_DAYS / 1e6:.0f} → {a * PER_DAY * KEEP_DAYS / 1e6:.0f} MB",
            f"{f['encode_cpu_ms_before']:.1f} → {f['encode_cpu_ms_after']:.1f} ms",
            f"{f['worst_seek_cpu_ms']:.0f} ms",
        ))  # fmt: skip
    common.emit(
        "timeline cost, one kept snapshot every 10 s (before → after)",
        common.table(
            (
                "host",
                "record JSON",
                "a delta",
                "per kept snapshot",
                "a day",
                "7 days",
                "encode CPU",
                "worst seek",
            ),
            rows,
        ),
    )
    common.save_json(args.out, "timeline_cost", hosts)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
