"""The per-GPU part of gputui's vocabulary (re-exported by :mod:`gputui.model`).

Frozen, slotted dataclasses; numbers stay numbers; ``None`` means "not available".
No third-party imports.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GpuProcessSample:
    """One process on one GPU as NVML reports it (host PID namespace).

    Attributes:
        pid: Host PID.
        gpu_index: Index of the GPU (the parent GPU for MIG).
        used_memory_bytes: GPU memory held by the process, None when NVML says N/A.
        kind: ``"C"`` (compute), ``"G"`` (graphics) or ``"C+G"``.
        sm_util: SM utilization 0-100 from the last process-utilization sample, None if never seen.
        mem_util: Memory-controller utilization 0-100, likewise.
        enc_util: Encoder utilization 0-100, likewise.
        dec_util: Decoder utilization 0-100, likewise.
        mig_gi_id: GPU instance id on a MIG GPU, else None.
        mig_ci_id: Compute instance id on a MIG GPU, else None.
    """

    pid: int
    gpu_index: int
    used_memory_bytes: int | None
    kind: str = "C"
    sm_util: int | None = None
    mem_util: int | None = None
    enc_util: int | None = None
    dec_util: int | None = None
    mig_gi_id: int | None = None
    mig_ci_id: int | None = None


@dataclass(frozen=True, slots=True)
class MigInstance:
    """A MIG device under a physical GPU."""

    index: int
    uuid: str | None
    gpu_instance_id: int | None
    compute_instance_id: int | None
    memory_used_bytes: int | None
    memory_total_bytes: int | None


@dataclass(frozen=True, slots=True)
class GpuSample:
    """Every gauge of one physical GPU at one refresh.

    Attributes that NVML could not provide are None. ``lost`` marks a GPU whose every query fails
    (fallen off the bus, ``GpuIsLost``); ``error`` then says how.
    """

    index: int
    uuid: str | None
    name: str | None
    lost: bool = False
    error: str | None = None
    utilization_gpu: int | None = None
    utilization_memory: int | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    temperature_c: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    clock_sm_mhz: int | None = None
    clock_mem_mhz: int | None = None
    clock_sm_max_mhz: int | None = None
    clock_mem_max_mhz: int | None = None
    pstate: int | None = None
    fan_percent: int | None = None
    pcie_rx_kbps: int | None = None
    pcie_tx_kbps: int | None = None
    throttle_reasons: int | None = None
    ecc_mode_current: bool | None = None
    ecc_mode_pending: bool | None = None
    ecc_uncorrected_volatile: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    encoder_util: int | None = None
    decoder_util: int | None = None
    persistence_mode: bool | None = None
    mig_mode_current: bool | None = None
    mig_mode_pending: bool | None = None
    mig_instances: tuple[MigInstance, ...] = ()
    processes: tuple[GpuProcessSample, ...] = ()


@dataclass(frozen=True, slots=True)
class XidEvent:
    """A critical XID error reported by the driver for one GPU."""

    gpu_index: int
    xid: int
    at: float
