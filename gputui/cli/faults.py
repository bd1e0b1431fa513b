"""``gputui faults``: the XID errors and OOM kills the kernel log still holds, attributed.

The kernel keeps its log in a ring buffer (typically 1-16 MiB, days to weeks on a quiet GPU
server); ``--since`` picks the span. Each fault is attributed as the live monitor does it: the
GPU by PCI address, the process by PID if it is still alive and started before the line, the
container from its cgroup (or, for an OOM kill, from the killed cgroup). A process that has gone
since cannot be placed after the fact: those faults say ``pid_only``.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence

from gputui.boundary import sanitise
from gputui.collect.fault_attribution import FaultAttributor
from gputui.collect.linux.kmsg import KMSG_PATH, read_history
from gputui.config.values import ConfigError, parse_duration
from gputui.model.faults import KernelFault
from gputui.model.settings import Settings
from gputui.present.json_report import fault_to_json, iso
from gputui.wiring.compose import build_collector

__all__ = ["faults_main", "faults_text"]

#: Faults printed at most (the newest; a flood of one XID is the same story many times).
MAX_FAULTS = 10_000


def faults_text(faults: Sequence[KernelFault]) -> str:
    """The plain-text table: one line per fault, every external string sanitised."""
    if not faults:
        return "No XID errors or OOM kills in the kernel log for this span.\n"
    rows = [["WHEN", "GPU", "FAULT", "CLASS", "CONTAINER", "PID", "PROCESS", "FIX"]]
    for f in faults:
        what = f"XID {f.xid}" if f.kind == "xid" else "OOM kill"
        if f.container_id is not None:
            container = f.container_name or f.container_id[:12]
        elif f.candidates:
            container = "candidates: " + ", ".join(
                c.container_name or (c.container_id or "host")[:12] for c in f.candidates[:3]
            )
        else:
            container = "-"
        rows.append(
            [
                iso(f.at) or "-",
                "-" if f.gpu_index is None else str(f.mig_device or f.gpu_index),
                what,
                f.fault_class,
                sanitise.safe_text(container, 40),
                "-" if f.pid is None else str(f.pid),
                sanitise.safe_text(f.process_name, 20, na="-"),
                sanitise.safe_text(f.fix, 90),
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1] for r in rows
    ]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def faults_main(since_text: str, *, as_json: bool, kernel_log: str | None) -> int:
    """Run ``gputui faults``.

    Returns:
        0, 1 when the kernel log could not be read (the reason and the fix on stderr), 2 for a
        bad ``--since``.
    """
    try:
        span = parse_duration(since_text.strip(), "--since")
    except ConfigError as exc:
        print(f"gputui: error: {sanitise.safe_text(str(exc), 300)}", file=sys.stderr)
        return 2
    since = time.time() - span
    lines, status = read_history(since, kernel_log or KMSG_PATH)
    # One refresh of this machine (GPUs for the PCI addresses, processes and container names),
    # without its own kernel-log reader: the history is read above.
    collector = build_collector(Settings(read_only=True, kernel_log="off"), once=True, health=False)
    try:
        snapshot = collector.collect()
    finally:
        collector.close()
    attributor = FaultAttributor(max_faults=MAX_FAULTS)
    attributor.observe(snapshot.processes, (u.info for u in snapshot.containers), snapshot.taken_at)
    attributor.attribute(lines[-MAX_FAULTS:], snapshot.gpus)
    faults = attributor.faults()
    if as_json:
        doc = {
            "since": iso(since),
            "kernel_log": {"ok": status.ok, "error": status.error, "kind": status.kind},
            "faults": [fault_to_json(f) for f in faults],
        }
        print(json.dumps(doc, indent=2))
    else:
        sys.stdout.write(faults_text(faults))
    if not status.ok:
        print(
            f"gputui: cannot read the kernel log: {sanitise.safe_text(status.error, 300)}\n"
            f"{sanitise.safe_text(status.fix, 400)}",
            file=sys.stderr,
        )
        return 1
    return 0
