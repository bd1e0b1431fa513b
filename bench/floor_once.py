"""The least a one-shot GPU report can cost: the floor under ``gputui --once``.

``python -m bench.floor_once`` starts Python, imports nvidia-ml-py and psutil (as gputui and
nvitop do), starts NVML, reads each GPU's name, utilisation, memory, temperature, power and
compute processes once, prints one line per GPU and exits. ``bench once`` times it next to
gputui and the peer: no one-shot that reports every GPU can finish before it does.
"""

from __future__ import annotations

import sys

import psutil  # noqa: F401  (imported, as by both tools: its import is part of the floor)
import pynvml


def main() -> int:
    """Print one line per GPU; 1 when NVML cannot start."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        print(f"NVML not available: {exc}", file=sys.stderr)
        return 1
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(handle)
            util = pynvml.nvmlDeviceGetUtilizationRates(handle).gpu
            mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
            temp = pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)
            power = pynvml.nvmlDeviceGetPowerUsage(handle) // 1000
            procs = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
            print(f"{i} {name} {util}% {mem.used >> 20}/{mem.total >> 20}MiB {temp}C {power}W "
                  f"{len(procs)} processes")  # fmt: skip
    finally:
        pynvml.nvmlShutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
