"""On a real GPU: gputui's GPM figures beside a direct ``nvmlGpmMetricsGet`` of the same pair.

    python -m bench.gpm_check [--seconds 5] [--interval 1.0]

Part 1 runs gputui's NVML adapter on the real pynvml, through a recording wrapper: whenever the
adapter takes a GPM sample, the wrapper takes one of its own right after it, and whenever the
adapter computes a pair's metrics, the wrapper computes the same metric ids from its own two
samples with a fresh ``c_nvmlGpmMetricsGet_t``. The table prints, per GPU (and MIG GPU
instance), each figure as gputui reports it next to the direct read, and the difference (the
issue's bar: within 2 points).

Part 2 runs the whole collector (NVML, /proc, Docker) for the same time and prints, for the
last snapshot, each GPU's ``DCGM_FI_PROF_*`` exporter series next to the JSON report's figure
(they must be equal: ratio = percent / 100), the energy counter in both, and each device's
per-party SM activity estimates summed next to the device's figure.

Needs a GPU with GPM (Hopper or later) for figures; elsewhere it says "not available".
"""

from __future__ import annotations

import argparse
import ctypes
import re
import sys
import time
from typing import Any

import pynvml
from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry

from gputui.collect.nvml.gpm import gpm_metrics
from gputui.collect.nvml.source import NvmlSource
from gputui.derive.activity import activity_estimates
from gputui.exporter.families import gpu_families
from gputui.model.gpu import MIG_GPM_FIELDS, GpuSample
from gputui.model.settings import Settings
from gputui.model.snapshot import Snapshot
from gputui.present.json_report import snapshot_to_json
from gputui.wiring.compose import build_collector

_MIB = 1024 * 1024


def _address(sample: Any) -> int | None:
    return ctypes.cast(sample, ctypes.c_void_p).value


#: The NVML the check reads: the real pynvml, or the demo machine's stand-in (``--demo``).
NV: Any = pynvml
DEMO = False


class Recording:
    """pynvml, with a direct GPM read beside each of the adapter's (every other call passes)."""

    def __init__(self) -> None:
        self._real = NV
        #: The adapter's sample address -> (own sample, device index, GPU instance id or None).
        self._own: dict[int, tuple[Any, int, int | None]] = {}
        #: (device index, GI id or None) -> {metric id: (adapter's raw value, direct raw value)}.
        self.last: dict[tuple[int, int | None], dict[int, tuple[float | None, float | None]]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def _shadow(self, handle: Any, gi: int | None, sample: Any) -> None:
        own = NV.nvmlGpmSampleAlloc()
        if gi is None:
            NV.nvmlGpmSampleGet(handle, own)
        else:
            NV.nvmlGpmMigSampleGet(handle, gi, own)
        address = _address(sample)
        if address is not None:
            old = self._own.pop(address, None)
            if old is not None:
                NV.nvmlGpmSampleFree(old[0])
            self._own[address] = (own, int(NV.nvmlDeviceGetIndex(handle)), gi)

    def nvmlGpmSampleGet(self, handle: Any, sample: Any) -> Any:
        result = NV.nvmlGpmSampleGet(handle, sample)
        self._shadow(handle, None, sample)
        return result

    def nvmlGpmMigSampleGet(self, handle: Any, gi: int, sample: Any) -> Any:
        result = NV.nvmlGpmMigSampleGet(handle, gi, sample)
        self._shadow(handle, gi, sample)
        return result

    def nvmlGpmSampleFree(self, sample: Any) -> None:
        address = _address(sample)
        own = self._own.pop(address, None) if address is not None else None
        if own is not None:
            NV.nvmlGpmSampleFree(own[0])
        NV.nvmlGpmSampleFree(sample)

    def nvmlGpmMetricsGet(self, request: Any) -> Any:
        result = NV.nvmlGpmMetricsGet(request)
        first = self._own.get(_address(request.sample1) or 0)
        second = self._own.get(_address(request.sample2) or 0)
        if first is None or second is None:
            return result
        direct = NV.c_nvmlGpmMetricsGet_t()
        direct.version = NV.NVML_GPM_METRICS_GET_VERSION
        direct.numMetrics = request.numMetrics
        direct.sample1, direct.sample2 = first[0], second[0]
        for i in range(request.numMetrics):
            direct.metrics[i].metricId = request.metrics[i].metricId
        NV.nvmlGpmMetricsGet(direct)
        figures: dict[int, tuple[float | None, float | None]] = {}
        for i in range(request.numMetrics):
            mine, theirs = request.metrics[i], direct.metrics[i]
            figures[int(mine.metricId)] = (
                float(mine.value) if mine.nvmlReturn == NV.NVML_SUCCESS else None,
                float(theirs.value) if theirs.nvmlReturn == NV.NVML_SUCCESS else None,
            )
        self.last[(second[1], second[2])] = figures
        return result


def _fmt(value: float | None) -> str:
    return f"{'n/a':>10}" if value is None else f"{value:10.2f}"


def adapter_vs_direct(seconds: float, interval: float) -> None:
    """Part 1: the adapter's figures and a direct read of the same interval, per device."""
    recording = Recording()
    source = NvmlSource(recording, background=False, gpm_interval=interval, pcie=False)
    end = time.monotonic() + seconds
    reading = source.read()
    while time.monotonic() < end:
        time.sleep(interval)
        if DEMO:
            NV.step += 1  # the stand-in's next refresh
        reading = source.read()
    if not reading.status.ok:
        print(f"NVML: {reading.status.error}")
        return
    metrics = {int(getattr(pynvml, m.constant)): m for m in gpm_metrics()}
    worst = 0.0
    print("== gputui's GPM figures vs a direct nvmlGpmMetricsGet of the same interval ==")
    for gpu in reading.gpus:
        print(f"\nGPU {gpu.index} {gpu.name}  util {gpu.utilization_gpu}%  note: {gpu.gpm_note}")
        keys = [(gpu.index, None)] + [
            (gpu.index, m.gpu_instance_id) for m in gpu.mig_instances if m.index >= 0
        ]
        for key in keys:
            pair = recording.last.get(key)
            if pair is None:
                continue
            where = "whole GPU" if key[1] is None else f"GPU instance {key[1]}"
            print(f"  {where}:  metric  gputui  direct  diff (percent points, or MiB/s)")
            inst = next((m for m in gpu.mig_instances if m.gpu_instance_id == key[1]), None)
            for metric_id, (_, direct) in sorted(pair.items()):
                metric = metrics[metric_id]
                if key[1] is not None and metric.field not in MIG_GPM_FIELDS:
                    continue  # not carried per MIG device
                holder: Any = gpu if key[1] is None else inst
                shown = getattr(holder, metric.field, None) if holder is not None else None
                if shown is not None and metric.factor != 1.0:
                    shown /= metric.factor  # bytes/s back to NVML's MiB/s
                diff = None if shown is None or direct is None else shown - direct
                if diff is not None and metric.percent:
                    worst = max(worst, abs(diff))
                print(f"    {metric.field:28} {_fmt(shown)} {_fmt(direct)} {_fmt(diff)}")
    print(f"\nlargest difference of a percent figure: {worst:.2f} points (bar: 2)")
    source.close()


def _exported(text: str, name: str, gpu: GpuSample) -> float | None:
    pattern = rf"^{name}\{{([^}}]*)\}} (\S+)$"
    for match in re.finditer(pattern, text, re.M):
        labels = match.group(1)
        if f'gpu="{gpu.index}"' in labels and "mig_device" not in labels:
            return float(match.group(2))
    return None


def json_vs_exporter(seconds: float, interval: float) -> None:
    """Part 2: the exporter's series of one snapshot next to its JSON, and the estimates' sums."""
    collector = build_collector(Settings(demo=DEMO), once=False)
    end = time.monotonic() + seconds
    snapshot: Snapshot = collector.collect()
    while time.monotonic() < end:
        time.sleep(interval)
        snapshot = collector.collect()
    doc = snapshot_to_json(snapshot)
    registry = CollectorRegistry(auto_describe=False)

    class _Families:
        def collect(self) -> Any:
            return gpu_families(snapshot)

    registry.register(_Families())  # type: ignore[arg-type,unused-ignore]
    text = generate_latest(registry).decode()
    pairs = (
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gpm_graphics_active", 0.01),
        ("DCGM_FI_PROF_SM_ACTIVE", "gpm_sm_active", 0.01),
        ("DCGM_FI_PROF_SM_OCCUPANCY", "gpm_sm_occupancy", 0.01),
        ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gpm_tensor_active", 0.01),
        ("DCGM_FI_PROF_DRAM_ACTIVE", "gpm_dram_active", 0.01),
        ("DCGM_FI_PROF_PCIE_RX_BYTES", "gpm_pcie_rx_bytes_per_s", 1.0),
        ("DCGM_FI_PROF_PCIE_TX_BYTES", "gpm_pcie_tx_bytes_per_s", 1.0),
        ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "total_energy_mj", 1.0),
    )
    print("\n== The exporter's series vs the JSON report, one snapshot ==")
    mismatches = 0
    for gpu, gpu_doc in zip(snapshot.gpus, doc["gpus"], strict=True):
        print(f"\nGPU {gpu.index}:  series  exporter  JSON (scaled)  equal")
        for name, key, scale in pairs:
            exported = _exported(text, name, gpu)
            value = gpu_doc.get(key)
            want = None if value is None else value * scale
            equal = (exported is None and want is None) or (
                exported is not None
                and want is not None
                and abs(exported - want) < 1e-6 * max(1, abs(want))
            )
            mismatches += not equal
            print(f"  {name:38} {exported!s:>14} {want!s:>14}  {'yes' if equal else 'NO'}")
    print("\n== Per-party SM activity estimates, summed per device ==")
    sums: dict[str, float] = {}
    for activity in activity_estimates(snapshot):
        sums[activity.device] = sums.get(activity.device, 0.0) + activity.sm_active
        kind = "exact" if activity.exact else f"estimate ({activity.share:.0%} of SM time)"
        print(f"  {activity.device:5} {activity.label[:40]:40} {activity.sm_active:6.2f}%  {kind}")
    for gpu in snapshot.gpus:
        if str(gpu.index) in sums:
            print(
                f"  GPU {gpu.index}: parties sum to {sums[str(gpu.index)]:.2f}%, "
                f"the GPU's SM activity is {gpu.gpm_sm_active}%"
            )
    print(f"\nexporter vs JSON mismatches: {mismatches}")
    collector.gpu.close()


def main(argv: list[str] | None = None) -> int:
    """Run both parts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument(
        "--demo", action="store_true", help="the demo machine instead of this one's GPUs"
    )
    args = parser.parse_args(argv)
    if args.demo:
        global NV, DEMO
        from gputui.collect.standins.demo import DEMO_SCENARIO
        from gputui.collect.standins.scenario import ScenarioNvml

        NV, DEMO = ScenarioNvml(DEMO_SCENARIO), True
    adapter_vs_direct(args.seconds, args.interval)
    json_vs_exporter(args.seconds, args.interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
