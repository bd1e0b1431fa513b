"""A scenario resembling the H200 lab: two H200s, one container process and one host process.

``python -m bench.lab_scenario FILE [--container-pid PID] [--host-pid PID]`` writes it; then
``python -m bench.run --gputui "python -m gputui --scenario FILE" tui`` measures the TUI on it.

GPU 0 runs one process of a container (8 GiB, SM 30-90 % moving every refresh) and GPU 1 one
host process (4 GiB, a light load); utilization, power, temperature, memory, clocks and PCIe
figures move every second as under a real load (a seeded random walk, so runs are comparable).
The PIDs must be live for the processes to be attributed: pass a container's init PID
(``docker inspect -f '{{.State.Pid}}' NAME``) and any host process. Without them the module
starts ``sleep`` processes of its own, detached, which end by themselves after 30 minutes (the
"container" process then shows as a host process when no container holds it).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
from pathlib import Path
from typing import Any

#: Refreshes before the series repeat (a minute at 1 s: longer than a benchmark's window).
PERIOD = 120
H200_MIB = 143771
SLEEP_SECONDS = "1800"


def _walk(rng: random.Random, low: float, high: float, step: float, n: int) -> list[float]:
    """A bounded random walk: a load's figures drift rather than jump."""
    value = (low + high) / 2
    out = []
    for _ in range(n):
        value = min(high, max(low, value + rng.uniform(-step, step)))
        out.append(round(value, 1))
    return out


def _gpu(rng: random.Random, index: int, busy: bool, pid: int, mib: int) -> dict[str, Any]:
    util = (
        [round(v) for v in _walk(rng, 30, 90, 15, PERIOD)]
        if busy
        else [round(v) for v in _walk(rng, 0, 12, 4, PERIOD)]
    )
    power = [round(120 + 6.2 * u + rng.uniform(-15, 15), 1) for u in util]
    temp = [round(v) for v in _walk(rng, 38, 61 if busy else 44, 1.0, PERIOD)]
    extra = [round(v) for v in _walk(rng, 0, 300, 60, PERIOD)]
    return {
        "index": index,
        "uuid": f"GPU-5a1b2c3d-0000-4000-8000-00000000000{index}",
        "name": "NVIDIA H200",
        "memory_total_mib": H200_MIB,
        "memory_used_mib": [mib + 520 + e for e in extra],
        "utilization_gpu": util,
        "utilization_memory": [max(0, u // 3 + rng.randint(-3, 3)) for u in util],
        "temperature_c": temp,
        "power_w": power,
        "power_limit_w": 700,
        "clock_sm_mhz": [1980 if u > 20 else rng.choice((1755, 1980)) for u in util],
        "clock_mem_mhz": 3201,
        "clock_sm_max_mhz": 1980,
        "clock_mem_max_mhz": 3201,
        "pstate": 0,
        "pcie_rx_kbps": [round(v) for v in _walk(rng, 1000, 900000, 150000, PERIOD)],
        "pcie_tx_kbps": [round(v) for v in _walk(rng, 1000, 300000, 60000, PERIOD)],
        "throttle_reasons": 0,
        "ecc_mode_current": True,
        "ecc_uncorrected_volatile": 0,
        "encoder_util": 0,
        "decoder_util": 0,
        "persistence_mode": True,
        "mig_mode_current": False,
        "errors": {"fan_speed": "NotSupported"},
        "processes": [
            {
                "pid": pid,
                "used_memory_mib": [mib + e for e in extra],
                "sm_util": [max(1, u - rng.randint(0, 5)) for u in util],
                "mem_util": [max(0, u // 3) for u in util],
            }
        ],
    }


def lab_scenario(container_pid: int, host_pid: int, seed: int = 7) -> dict[str, Any]:
    """The scenario document (see docs/scenario-format.md).

    Args:
        container_pid: The host PID of a process in a container (8 GiB on GPU 0, busy).
        host_pid: The PID of a host process (4 GiB on GPU 1, light).
        seed: The random walk's seed.

    Returns:
        A valid scenario: ``gputui.collect.standins.scenario_format.parse_scenario`` accepts it.
    """
    rng = random.Random(seed)
    return {
        "nvml": "ok",
        "driver_version": "580.95.05",
        "cuda_driver_version": "13.0",
        "gpus": [
            _gpu(rng, 0, True, container_pid, 8192),
            _gpu(rng, 1, False, host_pid, 4096),
        ],
    }


def busy_scenario(pids: list[int], seed: int = 7) -> dict[str, Any]:
    """One H200 shared by ``pids``, as ``bench/lab.sh``'s busy host (``LAB_LOAD=busy``) runs it.

    The processes hold 6, 4, 3, 2 and 4 GiB in turn, each with its own SM % walk; the third
    grows by 256 MiB every 5 refreshes (the leak). Pass the host PIDs of the lab's container
    processes and of a host process (``docker top``), so they are attributed as there.
    """
    rng = random.Random(seed)
    gpu = _gpu(rng, 0, True, pids[0], 6144)
    sizes = [6144, 4096, 2048, 3072, 2048, 4096]
    processes = []
    for i, pid in enumerate(pids):
        mib = sizes[i % len(sizes)]
        used = [mib + (256 * (t // 5) if i == 2 else 0) for t in range(PERIOD)]
        processes.append({
            "pid": pid,
            "used_memory_mib": used,
            "sm_util": [round(v) for v in _walk(rng, 0, 12, 3, PERIOD)],
            "mem_util": [round(v) for v in _walk(rng, 0, 4, 1, PERIOD)],
        })  # fmt: skip
    gpu["processes"] = processes
    gpu["memory_used_mib"] = [
        520 + sum(p["used_memory_mib"][t] for p in processes) for t in range(PERIOD)
    ]
    return {"nvml": "ok", "driver_version": "580.95.05", "cuda_driver_version": "13.0",
            "gpus": [gpu]}  # fmt: skip


def _spawn_sleep() -> int:
    sleep = shutil.which("sleep") or "/bin/sleep"
    # posix_spawn with setsid: not killed with this module's process group; never waited on
    # here (the module exits right away), so init adopts and reaps it.
    return os.posix_spawn(sleep, ["sleep", SLEEP_SECONDS], os.environ, setsid=True)


def main(argv: list[str] | None = None) -> int:
    """Write the scenario file."""
    parser = argparse.ArgumentParser(prog="python -m bench.lab_scenario", description=__doc__)
    parser.add_argument("file", type=Path)
    parser.add_argument("--container-pid", type=int, default=None)
    parser.add_argument("--host-pid", type=int, default=None)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--busy", metavar="PID,PID,...", help="the busy host instead: one GPU shared by these PIDs"
    )
    args = parser.parse_args(argv)
    if args.busy:
        pids = [int(p) for p in args.busy.split(",") if p.strip()]
        args.file.write_text(json.dumps(busy_scenario(pids, args.seed), indent=1))
        print(f"{args.file}: GPU 0 shared by {len(pids)} processes")
        return 0
    container = args.container_pid if args.container_pid is not None else _spawn_sleep()
    host = args.host_pid if args.host_pid is not None else _spawn_sleep()
    args.file.write_text(json.dumps(lab_scenario(container, host, args.seed), indent=1))
    print(f"{args.file}: GPU 0 pid {container} (8 GiB), GPU 1 pid {host} (4 GiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
