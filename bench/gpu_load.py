"""GPU loads of a known shape for the lab checks: tensor-bound, memory-bound or a duty cycle.

Run on a machine with PyTorch and a GPU (the H200 lab's containers have both)::

    python3 bench/gpu_load.py tensor 4 300     # bf16 matmuls back to back: tensor pipes busy
    python3 bench/gpu_load.py copy 4 300       # device-to-device copies: DRAM bandwidth busy
    python3 bench/gpu_load.py duty:0.25 4 300  # matmuls 25 % of each second, idle the rest

The arguments are the mode, the GiB of GPU memory to hold and the seconds to run. The figures a
monitor shows for each mode are then known in direction: ``tensor`` has high tensor activity
and low DRAM bandwidth, ``copy`` the reverse, and ``duty:F`` is busy about F of the time.
``tensor`` and ``duty:F`` end by printing one JSON line: the kernel time they measured with CUDA
events (``kernel_busy_s``), the number of bursts, and the wall times of the first and last.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any


def run_duty(torch: Any, x: Any, duty: float, end: float) -> tuple[float, int, float | None]:
    """bf16 matmul bursts for ``duty`` of each second until ``end`` (monotonic), each timed.

    The truth a monitor's busy time is checked against: the GPU's own clock around each burst
    (CUDA events), not the script's intent. A burst's matmuls run back to back, so the time
    between its first kernel's start and its last one's end is kernel time.

    Returns:
        ``(kernel ms, bursts, wall time of the first burst or None)``.
    """
    busy_ms, bursts, first_at = 0.0, 0, None
    while time.monotonic() < end:
        started = time.monotonic()
        while time.monotonic() - started < duty:
            begin = torch.cuda.Event(enable_timing=True)
            done = torch.cuda.Event(enable_timing=True)
            begin.record()
            for _ in range(8):
                _ = x @ x
            done.record()
            done.synchronize()
            busy_ms += begin.elapsed_time(done)
            bursts += 1
            if first_at is None:
                first_at = time.time()
        if duty < 1.0:
            time.sleep(max(0.0, 1.0 - (time.monotonic() - started)))
    return busy_ms, bursts, first_at


def main(argv: list[str]) -> int:
    """Run the load named by ``argv`` (mode, GiB held, seconds) until its time is up.

    Args:
        argv: ``[mode, gib, seconds]``; mode is ``tensor``, ``copy`` or ``duty:F`` (0 < F ≤ 1).

    Returns:
        The exit status: 0, or 2 for bad arguments.
    """
    if len(argv) != 3:
        print("usage: gpu_load.py tensor|copy|duty:F GIB SECONDS", file=sys.stderr)
        return 2
    mode, gib, seconds = argv[0], float(argv[1]), float(argv[2])
    duty = 1.0
    if mode.startswith("duty:"):
        duty = float(mode.split(":", 1)[1])
        if not 0.0 < duty <= 1.0:
            print("gpu_load.py: the duty cycle must be in (0, 1]", file=sys.stderr)
            return 2
    elif mode not in ("tensor", "copy"):
        print(f"gpu_load.py: unknown mode {mode!r}", file=sys.stderr)
        return 2

    # Imported here: only the GPU machine has it, and only after the arguments are checked.
    import torch  # type: ignore[import-not-found]

    hold = torch.empty(max(int(gib * 2**30) // 2, 1), dtype=torch.bfloat16, device="cuda")
    end = time.monotonic() + seconds
    if mode == "copy":
        # Two 2 GiB buffers copied back and forth: the copies stream through DRAM and use no
        # tensor or FP pipe, so bandwidth is high and tensor activity zero.
        src = torch.empty(2**30, dtype=torch.float16, device="cuda")
        dst = torch.empty_like(src)
        while time.monotonic() < end:
            for _ in range(20):
                dst.copy_(src)
                src.copy_(dst)
            torch.cuda.synchronize()
    else:
        x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        busy_ms, bursts, first_at = run_duty(torch, x, duty, end)
        truth = {"kernel_busy_s": busy_ms / 1000, "bursts": bursts, "first_kernel_at": first_at,
                 "last_kernel_at": time.time()}  # fmt: skip
        print(json.dumps(truth), flush=True)
    del hold
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
