"""What NVML GPM costs gputui at N GPUs: the refresh with and without it, and the GPM lane's tick.

The GPUs are a scenario played through the real NVML adapter (``ScenarioNvml``), whose GPM and
energy calls wait as long as the same calls took on an H200 (docs/performance.md:
``nvmlGpmSampleGet`` 0.2 ms, ``nvmlGpmMetricsGet`` 1.1 ms, ``nvmlDeviceGetTotalEnergyConsumption``
3.3 ms; waits, not busy loops, since a real NVML call releases the GIL in the driver). A second
pass with no waits gives the adapter's own Python cost.

    python -m bench.gpm_cost [--gpus 8] [--cycles 100] [--out DIR]

Figures only, no verdict: the refresh must not grow with GPM (the lane runs on its own thread),
and the lane's tick must stay far below its 1 s period.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from bench.common import emit, save_json, table
from gputui.collect.nvml.source import NvmlSource
from gputui.collect.standins.scenario import ScenarioNvml

#: Seconds per call measured on the H200 lab (driver 580.159.04).
H200_COSTS: dict[str, float] = {
    "nvmlGpmSampleGet": 0.0002,
    "nvmlGpmMigSampleGet": 0.0002,
    "nvmlGpmMetricsGet": 0.0011,
    "nvmlDeviceGetTotalEnergyConsumption": 0.0033,
}


class CostedNvml(ScenarioNvml):
    """The scenario stand-in with the H200's per-call GPM and energy costs (or none)."""

    def __init__(self, data: dict[str, Any], costs: dict[str, float]) -> None:
        super().__init__(data)
        self._costs = costs
        energy: Any = getattr(self, "nvmlDeviceGetTotalEnergyConsumption")  # noqa: B009

        def costed_energy(handle: Any) -> Any:
            self._wait("nvmlDeviceGetTotalEnergyConsumption")
            return energy(handle)

        # The getter is made from the field table at run time: replace it the same way.
        setattr(self, "nvmlDeviceGetTotalEnergyConsumption", costed_energy)  # noqa: B010

    def _wait(self, name: str) -> None:
        cost = self._costs.get(name, 0.0)
        if cost:
            time.sleep(cost)

    def nvmlGpmSampleGet(self, handle: Any, sample: Any) -> Any:
        self._wait("nvmlGpmSampleGet")
        return super().nvmlGpmSampleGet(handle, sample)

    def nvmlGpmMetricsGet(self, request: Any) -> Any:
        self._wait("nvmlGpmMetricsGet")
        return super().nvmlGpmMetricsGet(request)


def scenario(gpus: int) -> dict[str, Any]:
    """``gpus`` H200s under load, GPM figures and energy counters included."""
    return {
        "gpus": [
            {
                "index": i,
                "utilization_gpu": 90,
                "memory_used_mib": 60000,
                "power_w": 600,
                "temperature_c": 60,
                "clock_sm_mhz": 1980,
                "total_energy_mj": [1_000_000 * (i + 1) + 600_000 * k for k in range(10)],
                "gpm_graphics_active": 90,
                "gpm_sm_active": [70, 75, 80],
                "gpm_sm_occupancy": 40,
                "gpm_tensor_active": 60,
                "gpm_tensor_hmma_active": 60,
                "gpm_fp32_active": 5,
                "gpm_dram_active": 35,
                "gpm_pcie_rx_mib_s": 800,
                "gpm_pcie_tx_mib_s": 90,
                "processes": [{"pid": 1000 + i, "used_memory_mib": 60000, "sm_util": 85}],
            }
            for i in range(gpus)
        ]
    }


def _refresh_ms(source: NvmlSource, cycles: int) -> list[float]:
    """The core read (what a refresh waits for) of each of ``cycles`` refreshes, in ms."""
    out = []
    for _ in range(cycles):
        start = time.perf_counter()
        source.read()
        out.append((time.perf_counter() - start) * 1000)
    return out


def _lane_tick(nvml: ScenarioNvml, gpus: int, ticks: int) -> tuple[list[float], list[float]]:
    """Wall and CPU ms of the GPM lane's tick (every GPU sampled, pairs computed)."""
    source = NvmlSource(nvml, background=False, gpm_interval=0.0, gpm_min_gap=0.0, pcie=False)
    source.read()  # init, handles, and a first pair
    lane = source._gpm  # the benchmark looks inside: the tick is the lane's whole cost
    assert lane is not None
    wall, cpu = [], []
    for _ in range(ticks):
        nvml.step += 1
        start, start_cpu = time.perf_counter(), time.thread_time()
        lane.tick()
        wall.append((time.perf_counter() - start) * 1000)
        cpu.append((time.thread_time() - start_cpu) * 1000)
    source.close()
    return wall, cpu


def measure(gpus: int, cycles: int) -> dict[str, Any]:
    """Every figure of one run."""
    data = scenario(gpus)
    results: dict[str, Any] = {"gpus": gpus, "cycles": cycles, "costs_s": H200_COSTS}
    for label, gpm, interval in (
        ("without GPM", False, 1.0),
        ("with GPM, lane idle", True, 3600.0),
        ("with GPM, lane ticking 1/s", True, 1.0),
    ):
        nvml = CostedNvml(data, H200_COSTS)
        # The TUI's source: slow lane and GPM lane on their own threads. An idle lane (its
        # next tick an hour away) leaves the refresh's own cost: picking up the figures.
        source = NvmlSource(
            nvml, background=True, gpm=gpm, slow_interval=5.0, gpm_interval=interval
        )
        source.read()
        deadline = time.monotonic() + 30.0
        while gpm and source.read().gpus[0].gpm_sm_active is None:  # the first pairs are in
            if time.monotonic() > deadline:
                raise SystemExit("the GPM lane gave no figures within 30 s")
            time.sleep(0.05)
        times = _refresh_ms(source, cycles)
        source.close()
        results[label] = {
            "refresh_median_ms": statistics.median(times),
            "refresh_p95_ms": sorted(times)[int(0.95 * (len(times) - 1))],
        }
    for label, costs in (("H200 call costs", H200_COSTS), ("adapter only", {})):
        wall, cpu = _lane_tick(CostedNvml(data, costs), gpus, max(20, cycles // 5))
        results[f"tick, {label}"] = {
            "tick_median_ms": statistics.median(wall),
            "tick_cpu_median_ms": statistics.median(cpu),
        }
    # A one-shot (--once) completes its first pair inline: NVML's 100 ms gap is its cost.
    for label, gpm in (("once_read_ms_without_gpm", False), ("once_read_ms", True)):
        once = NvmlSource(CostedNvml(data, H200_COSTS), background=False, pcie=False, gpm=gpm)
        start = time.perf_counter()
        once.read()
        results[label] = (time.perf_counter() - start) * 1000
        once.close()
    return results


def report(results: dict[str, Any]) -> None:
    """Print the figures."""
    rows = [
        [
            label,
            f"{results[label]['refresh_median_ms']:.2f}",
            f"{results[label]['refresh_p95_ms']:.2f}",
        ]
        for label in ("without GPM", "with GPM, lane idle", "with GPM, lane ticking 1/s")
    ]
    emit(
        f"Core NVML read per refresh, {results['gpus']} GPUs (lanes on their own threads)",
        table(["", "median ms", "p95 ms"], rows),
    )
    rows = [
        [
            label,
            f"{results[label]['tick_median_ms']:.2f}",
            f"{results[label]['tick_cpu_median_ms']:.2f}",
        ]
        for label in ("tick, H200 call costs", "tick, adapter only")
    ]
    emit(
        f"GPM lane tick, {results['gpus']} GPUs (once a second, off the refresh)",
        table(["", "wall ms", "CPU ms"], rows),
    )
    emit(
        "One-shot NVML read (init included; with GPM its first pair is completed inline)",
        f"without GPM {results['once_read_ms_without_gpm']:.1f} ms, "
        f"with GPM {results['once_read_ms']:.1f} ms",
    )


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--cycles", type=int, default=100)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    results = measure(args.gpus, args.cycles)
    report(results)
    save_json(args.out, "gpm_cost", results)


if __name__ == "__main__":
    main()
