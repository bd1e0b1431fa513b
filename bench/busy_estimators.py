"""Which NVML figure measures a GPU's busy time? Each estimator beside CUDA-event kernel time.

Run on a machine with PyTorch, nvidia-ml-py and an idle GPU (the H200 lab)::

    python3 -m bench.busy_estimators [SECONDS_PER_DUTY] [DUTIES]   # e.g. 40 0.25,0.5,1.0

For each duty cycle the main thread runs bf16 matmul bursts for that fraction of each second
and times every burst with CUDA events (``bench.gpu_load.run_duty``, as ``duty:F`` runs it);
a sampler thread reads, once a second over exactly that run:

* ``gpm_graphics_active``: GPM graphics-engine activity (the time any kernel ran) of
  consecutive sample pairs (each covers the whole second);
* ``gpm_sm_active``: GPM SM activity of consecutive sample pairs (each covers the whole second);
* ``util_point``: ``nvmlDeviceGetUtilizationRates().gpu`` (the driver's last sample period);
* ``util_samples``: every ``nvmlDeviceGetSamples(GPU_UTILIZATION_SAMPLES)`` value since the
  newest one seen, averaged (the driver's sample periods, none counted twice, none missed);
* ``proc_sm``: every ``nvmlDeviceGetProcessUtilization`` sample of this process since the
  newest one seen, averaged.

It prints one JSON line per duty cycle: the kernel-time fraction and each estimator's mean, so
the ledger's busy time can be checked against the GPU's own clock, not against a script's intent.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

from bench.gpu_load import run_duty


def _gpm_pair(nv: Any, first: Any, second: Any) -> tuple[float | None, float | None]:
    """Graphics-engine activity and SM activity of one sample pair (None: not given)."""
    metrics = nv.c_nvmlGpmMetricsGet_t()
    metrics.version = nv.NVML_GPM_METRICS_GET_VERSION
    metrics.numMetrics = 2
    metrics.sample1 = first
    metrics.sample2 = second
    metrics.metrics[0].metricId = nv.NVML_GPM_METRIC_GRAPHICS_UTIL
    metrics.metrics[1].metricId = nv.NVML_GPM_METRIC_SM_UTIL
    nv.nvmlGpmMetricsGet(metrics)
    got = [None if m.nvmlReturn != 0 else float(m.value) for m in metrics.metrics[:2]]
    return got[0], got[1]


class Sampler(threading.Thread):
    """Reads every estimator once a second until stopped."""

    def __init__(self, nv: Any, handle: Any) -> None:
        super().__init__(daemon=True)
        self.nv, self.handle = nv, handle
        self.stop = threading.Event()
        self.series: dict[str, list[float]] = {
            "gpm_graphics_active": [],
            "gpm_sm_active": [],
            "util_point": [],
            "util_samples": [],
            "proc_sm": [],
        }
        self.gpm_gaps: list[float] = []

    def run(self) -> None:
        nv, handle = self.nv, self.handle
        pid = os.getpid()
        last_util = last_proc = int(time.time() * 1e6)
        prev = nv.nvmlGpmSampleAlloc()
        nv.nvmlGpmSampleGet(handle, prev)
        prev_at = time.monotonic()
        due = prev_at + 1.0
        while not self.stop.wait(max(0.0, due - time.monotonic())):
            due += 1.0
            cur = nv.nvmlGpmSampleAlloc()
            nv.nvmlGpmSampleGet(handle, cur)
            now = time.monotonic()
            graphics, sm = _gpm_pair(nv, prev, cur)
            if graphics is not None:
                self.series["gpm_graphics_active"].append(graphics)
            if sm is not None:
                self.series["gpm_sm_active"].append(sm)
            self.gpm_gaps.append(now - prev_at)
            nv.nvmlGpmSampleFree(prev)
            prev, prev_at = cur, now
            self.series["util_point"].append(float(nv.nvmlDeviceGetUtilizationRates(handle).gpu))
            try:
                _kind, samples = nv.nvmlDeviceGetSamples(
                    handle, nv.NVML_GPU_UTILIZATION_SAMPLES, last_util
                )
            except nv.NVMLError:
                samples = []
            for sample in samples:
                if sample.timeStamp > last_util:
                    self.series["util_samples"].append(float(sample.sampleValue.uiVal))
                    last_util = sample.timeStamp
            try:
                procs = nv.nvmlDeviceGetProcessUtilization(handle, last_proc)
            except nv.NVMLError:
                procs = []
            for proc in procs:
                if proc.timeStamp > last_proc and proc.pid == pid:
                    self.series["proc_sm"].append(float(proc.smUtil))
            last_proc = max([last_proc, *(p.timeStamp for p in procs)])
        nv.nvmlGpmSampleFree(prev)


def main(argv: list[str]) -> int:
    """Run each duty cycle and print its line.

    Args:
        argv: ``[seconds per duty cycle, comma-separated duty cycles]``, both optional.

    Returns:
        The exit status.
    """
    seconds = float(argv[0]) if argv else 40.0
    duties = [float(d) for d in (argv[1] if len(argv) > 1 else "0.25,0.5,1.0").split(",")]
    import pynvml as nv  # type: ignore[import-not-found]
    import torch  # type: ignore[import-not-found]

    nv.nvmlInit()
    handle = nv.nvmlDeviceGetHandleByIndex(0)
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(20):  # warm: cuBLAS picks its kernels before anything is timed
        _ = x @ x
    torch.cuda.synchronize()
    time.sleep(3.0)
    for duty in duties:
        sampler = Sampler(nv, handle)
        sampler.start()
        begun = time.monotonic()
        busy_ms, _bursts, _first = run_duty(torch, x, duty, begun + seconds)
        wall = time.monotonic() - begun
        sampler.stop.set()
        sampler.join()
        line: dict[str, Any] = {"duty": duty, "wall_s": round(wall, 2)}
        line["kernel_pct"] = round(100 * busy_ms / 1000 / wall, 2)
        for name, values in sampler.series.items():
            mean = sum(values) / len(values) if values else None
            line[name] = None if mean is None else round(mean, 2)
            line[f"{name}_n"] = len(values)
            line[f"{name}_sum"] = round(sum(values), 1)
        gaps = sampler.gpm_gaps
        line["gpm_window_s"] = round(sum(gaps) / len(gaps), 4) if gaps else None
        print(json.dumps(line), flush=True)
        time.sleep(3.0)
    nv.nvmlShutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
