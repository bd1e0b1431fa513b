"""The four GPUs of the simulated machine behind ``--demo``, as a scenario (deterministic)."""

from __future__ import annotations

import math
from typing import Any

_STEPS = 120


def _wave(
    base: float, amp: float, period: float, phase: float = 0.0, lo: float = 0, hi: float = 100
) -> list[float]:
    return [
        round(min(hi, max(lo, base + amp * math.sin(2 * math.pi * (i / period) + phase))), 1)
        for i in range(_STEPS)
    ]


DEMO_SCENARIO: dict[str, Any] = {
    "nvml": "ok",
    "driver_version": "580.159.04",
    "cuda_driver_version": "13.0",
    "gpus": [
        {
            "index": 0,
            "uuid": "GPU-57d57e22-be4b-9496-673e-11cc7638ed19",
            "name": "NVIDIA H200",
            "memory_total_mib": 143771,
            "memory_used_mib": [67584 + int(v) for v in _wave(200, 150, 30)],
            "utilization_gpu": _wave(90, 8, 17),
            "utilization_memory": _wave(55, 10, 23),
            "temperature_c": [int(v) for v in _wave(66, 3, 40, lo=0, hi=200)],
            "power_w": _wave(610, 60, 17, lo=0, hi=1000),
            "power_limit_w": 700,
            "clock_sm_mhz": 1980,
            "clock_mem_mhz": 3201,
            "clock_sm_max_mhz": 1980,
            "clock_mem_max_mhz": 3201,
            "pstate": 0,
            "pcie_rx_kbps": 812000,
            "pcie_tx_kbps": 95000,
            "throttle_reasons": 0,
            "ecc_mode_current": True,
            "ecc_uncorrected_volatile": 0,
            "remapped_rows_pending": False,
            "encoder_util": 0,
            "decoder_util": 0,
            "persistence_mode": True,
            "mig_mode_current": False,
            "errors": {"fan_speed": "NotSupported"},
            "processes": [
                {"pid": 48211, "used_memory_mib": 63488, "sm_util": _wave(84, 8, 17)},
                {"pid": 48290, "used_memory_mib": 2048, "sm_util": 3},
            ],
        },
        {
            "index": 1,
            "uuid": "GPU-0b7a4f3e-2f6c-4e1d-9a55-4f0d7c2e8a11",
            "name": "NVIDIA H200",
            "memory_total_mib": 143771,
            "memory_used_mib": [25088 + int(v) for v in _wave(0, 600, 45, lo=-2000, hi=2000)],
            "utilization_gpu": _wave(35, 25, 11),
            "utilization_memory": _wave(18, 10, 11),
            "temperature_c": [int(v) for v in _wave(51, 4, 30, lo=0, hi=200)],
            "power_w": _wave(260, 90, 11, lo=0, hi=1000),
            "power_limit_w": 700,
            "clock_sm_mhz": 1755,
            "clock_mem_mhz": 3201,
            "clock_sm_max_mhz": 1980,
            "clock_mem_max_mhz": 3201,
            "pstate": 0,
            "pcie_rx_kbps": 21000,
            "pcie_tx_kbps": 8000,
            "throttle_reasons": 0,
            "ecc_mode_current": True,
            "ecc_uncorrected_volatile": 0,
            "remapped_rows_pending": False,
            "encoder_util": 0,
            "decoder_util": 0,
            "persistence_mode": True,
            "mig_mode_current": False,
            "errors": {"fan_speed": "NotSupported"},
            "processes": [
                {"pid": 50102, "used_memory_mib": 18432, "sm_util": _wave(30, 22, 11)},
                {"pid": 3121, "used_memory_mib": 6144, "sm_util": _wave(4, 4, 7, lo=0)},
            ],
        },
        {
            "index": 2,
            "uuid": "GPU-c3e1a9d2-77b4-4c0e-8f21-9d6a5b3c1e07",
            "name": "NVIDIA H200",
            "memory_total_mib": 143771,
            "memory_used_mib": 123904,
            "utilization_gpu": _wave(97, 3, 9),
            "utilization_memory": _wave(71, 6, 9),
            "temperature_c": [int(v) for v in _wave(83, 2, 25, lo=0, hi=200)],
            "power_w": _wave(688, 10, 9, lo=0, hi=1000),
            "power_limit_w": 700,
            "clock_sm_mhz": 1665,
            "clock_mem_mhz": 3201,
            "clock_sm_max_mhz": 1980,
            "clock_mem_max_mhz": 3201,
            "pstate": 0,
            "pcie_rx_kbps": 45000,
            "pcie_tx_kbps": 388000,
            "throttle_reasons": 0x4,
            "ecc_mode_current": True,
            "ecc_uncorrected_volatile": 0,
            "remapped_rows_pending": False,
            "encoder_util": 0,
            "decoder_util": 0,
            "persistence_mode": True,
            "mig_mode_current": False,
            "errors": {"fan_speed": "NotSupported"},
            "processes": [{"pid": 51234, "used_memory_mib": 122880, "sm_util": _wave(93, 4, 9)}],
        },
        {
            "index": 3,
            "uuid": "GPU-9f2d6c41-0a3b-4e7d-b1c8-2e5f7a9d0c34",
            "name": "NVIDIA H200",
            "memory_total_mib": 143771,
            "memory_used_mib": 6656,
            "utilization_gpu": _wave(6, 5, 13, lo=0),
            "utilization_memory": 1,
            "temperature_c": 38,
            "power_w": _wave(118, 12, 13, lo=0, hi=1000),
            "power_limit_w": 700,
            "clock_sm_mhz": 345,
            "clock_mem_mhz": 3201,
            "clock_sm_max_mhz": 1980,
            "clock_mem_max_mhz": 3201,
            "pstate": 0,
            "pcie_rx_kbps": 0,
            "pcie_tx_kbps": 0,
            "throttle_reasons": 0x1,
            "ecc_mode_current": True,
            "ecc_uncorrected_volatile": 0,
            "remapped_rows_pending": False,
            "encoder_util": 0,
            "decoder_util": 0,
            "persistence_mode": False,
            "mig_mode_current": False,
            "errors": {"fan_speed": "NotSupported"},
            "processes": [
                {"pid": 52001, "used_memory_mib": 4608, "sm_util": _wave(5, 5, 13, lo=0)},
                # Nobody owns this one: an allocation left by a process that no longer exists.
                {"pid": 999999, "used_memory_mib": 1536, "sm_util": 0},
            ],
        },
    ],
}
