"""The least a one-shot GPU report can cost: the floor under ``gputui --once``.

``python -m bench.floor_once`` starts Python, imports nvidia-ml-py and psutil (as gputui and
nvitop do), starts NVML, reads each GPU's name, utilisation, memory, temperature, power and
compute processes once, prints one line per GPU and exits. ``bench once`` times it next to
gputui and the peer: no one-shot that reports every GPU can finish before it does.

``--gpm`` adds what a report of how busy the SMs really are needs (gputui's ``SM active``;
``utilization.gpu`` only says a kernel ran): a GPM sample of each GPU right after NVML's start,
a second one NVML's 100 ms later, and the SM-activity metric of the pair. The wait is the
driver's, not the program's: no one-shot that reports SM activity finishes before this one.
"""

from __future__ import annotations

import sys
import time

import psutil  # noqa: F401  (imported, as by both tools: its import is part of the floor)
import pynvml

#: NVML's least spacing of a GPM pair.
GPM_GAP_S = 0.1


def _first_samples(handles: list[object]) -> list[object | None]:
    """A GPM sample of each GPU that has GPM (None for one that has not)."""
    firsts: list[object | None] = []
    for handle in handles:
        try:
            if not pynvml.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice:
                firsts.append(None)
                continue
            sample = pynvml.nvmlGpmSampleAlloc()
            pynvml.nvmlGpmSampleGet(handle, sample)
            firsts.append(sample)
        except pynvml.NVMLError:
            firsts.append(None)
    return firsts


def _sm_active(handle: object, first: object) -> str:
    """The pair's SM activity (%), from a second sample taken now."""
    second = pynvml.nvmlGpmSampleAlloc()
    try:
        pynvml.nvmlGpmSampleGet(handle, second)
        request = pynvml.c_nvmlGpmMetricsGet_t()
        request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = 1
        request.sample1, request.sample2 = first, second
        request.metrics[0].metricId = pynvml.NVML_GPM_METRIC_SM_UTIL
        pynvml.nvmlGpmMetricsGet(request)
        return f" SM active {request.metrics[0].value:.1f}%"
    finally:
        pynvml.nvmlGpmSampleFree(second)
        pynvml.nvmlGpmSampleFree(first)


def main() -> int:
    """Print one line per GPU; 1 when NVML cannot start."""
    gpm = "--gpm" in sys.argv[1:]
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        print(f"NVML not available: {exc}", file=sys.stderr)
        return 1
    try:
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        firsts = _first_samples(handles) if gpm else [None] * len(handles)
        started = time.monotonic()
        lines = []
        for i, handle in enumerate(handles):
            name = pynvml.nvmlDeviceGetName(handle)
            util = pynvml.nvmlDeviceGetUtilizationRates(handle).gpu
            mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
            temp = pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)
            power = pynvml.nvmlDeviceGetPowerUsage(handle) // 1000
            procs = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
            lines.append(f"{i} {name} {util}% {mem.used >> 20}/{mem.total >> 20}MiB {temp}C "
                         f"{power}W {len(procs)} processes")  # fmt: skip
        if gpm:
            time.sleep(max(0.0, started + GPM_GAP_S - time.monotonic()))
            for i, (handle, first) in enumerate(zip(handles, firsts, strict=True)):
                if first is not None:
                    lines[i] += _sm_active(handle, first)
        print("\n".join(lines))
    finally:
        pynvml.nvmlShutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
