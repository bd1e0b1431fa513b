"""What NVML says about a GPU: samples, MIG instances, processes NVML names, XID events."""

from __future__ import annotations

import re

from gputui.model.records import record
from gputui.model.status import SourceStatus

# --- GPUs, as NVML reports them ------------------------------------------------------------

_HEX_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
#: The UUID forms NVML gives: ``GPU-<uuid>``, ``MIG-<uuid>`` (driver R470 and later) and the
#: older ``MIG-GPU-<uuid>/<gi>/<ci>``. None holds a comma, a space or a control character, so
#: each is safe in a comma list such as ``CUDA_VISIBLE_DEVICES``.
NVML_UUID_RE = re.compile(
    rf"GPU-{_HEX_UUID}|MIG-{_HEX_UUID}|MIG-GPU-{_HEX_UUID}/\d{{1,2}}/\d{{1,2}}"
)


def is_nvml_uuid(value: object) -> bool:
    """True for a GPU or MIG UUID in a form NVML gives (see :data:`NVML_UUID_RE`)."""
    return isinstance(value, str) and NVML_UUID_RE.fullmatch(value) is not None


#: NVML clock-event (throttle) reason bits and their short names, most severe first.
THROTTLE_REASONS: tuple[tuple[int, str], ...] = (
    (0x40, "HW thermal"),
    (0x08, "HW slowdown"),
    (0x80, "HW power brake"),
    (0x20, "SW thermal"),
    (0x04, "SW power cap"),
    (0x10, "sync boost"),
    (0x02, "app clocks"),
    (0x100, "display clock"),
    (0x01, "idle"),
)


@record
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
        mps: True for an MPS client (NVML's MPS process list; ``M+C`` in nvidia-smi).
        mig_index: The MIG device it runs on (its index on the GPU: ``0:<mig_index>``), None
            off MIG or when only the GI/CI ids are known.
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
    mps: bool = False
    mig_index: int | None = None


#: Why a MIG device has no utilization figures: NVML (and DCGM) do not measure them per MIG
#: device; the JSON and the UI say this instead of a misleading 0 %.
MIG_UTILIZATION_NA = "not supported on MIG devices (NVML)"


@record
class MigInstance:
    """A MIG device (one compute instance of one GPU instance) under a physical GPU.

    Attributes:
        index: The MIG device index on its GPU, as ``--gpus device=<gpu>:<index>`` and
            ``nvidia-smi -L`` count it; -1 for a GPU instance without a compute instance (no
            MIG device: nothing can run on it, and it has no UUID).
        uuid: ``MIG-…``.
        gpu_instance_id: GPU instance (GI) id.
        compute_instance_id: Compute instance (CI) id within the GI.
        memory_used_bytes: Memory in use in the instance.
        memory_total_bytes: The instance's memory.
        profile: Profile name such as ``1g.18gb`` (``1c.2g.35gb`` for a CI smaller than its GI).
        sm_count: Streaming multiprocessors of the instance.
        slices: GPU slices of its GPU instance (the ``1`` of ``1g``).
        gpm_graphics_active: Percent of time any kernel ran in its GPU instance (NVML GPM,
            ``nvmlGpmMigSampleGet``: the MIG device's "utilization"); None where GPM is not
            available (before Hopper, or before the first sample pair).
        gpm_sm_active: Percent of the instance's SMs busy (GPM), likewise.
        gpm_sm_occupancy: Percent of resident warps against the maximum (GPM), likewise.
        gpm_tensor_active: Percent of time the tensor pipes were busy (GPM), likewise.
        gpm_dram_active: Percent of DRAM bandwidth used (GPM), likewise.
    """

    index: int
    uuid: str | None
    gpu_instance_id: int | None
    compute_instance_id: int | None
    memory_used_bytes: int | None
    memory_total_bytes: int | None
    profile: str | None = None
    sm_count: int | None = None
    slices: int | None = None
    gpm_graphics_active: float | None = None
    gpm_sm_active: float | None = None
    gpm_sm_occupancy: float | None = None
    gpm_tensor_active: float | None = None
    gpm_dram_active: float | None = None


#: The GPM figures a :class:`MigInstance` carries (fields of the same names on GpuSample).
MIG_GPM_FIELDS: tuple[str, ...] = (
    "gpm_graphics_active",
    "gpm_sm_active",
    "gpm_sm_occupancy",
    "gpm_tensor_active",
    "gpm_dram_active",
)


@record
class GpuSample:
    """Every gauge of one physical GPU at one refresh.

    Attributes that NVML could not provide are None. ``lost`` marks a GPU whose every query fails
    (fallen off the bus, ``GpuIsLost``); ``error`` then says how. ``utilization_gpu`` is
    NVML's point read (the driver's last sample period, 1/6 to 1 s); ``utilization_gpu_mean``
    the mean of every sample since the slow lane's previous read (``nvmlDeviceGetSamples``),
    which no periodic load escapes.
    """

    index: int
    uuid: str | None
    name: str | None
    lost: bool = False
    error: str | None = None
    utilization_gpu: int | None = None
    utilization_gpu_mean: float | None = None
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
    gpm_graphics_active: float | None = None
    gpm_sm_active: float | None = None
    gpm_sm_occupancy: float | None = None
    gpm_tensor_active: float | None = None
    gpm_tensor_hmma_active: float | None = None
    gpm_tensor_imma_active: float | None = None
    gpm_tensor_dfma_active: float | None = None
    gpm_fp64_active: float | None = None
    gpm_fp32_active: float | None = None
    gpm_fp16_active: float | None = None
    gpm_dram_active: float | None = None
    gpm_pcie_tx_bytes_per_s: float | None = None
    gpm_pcie_rx_bytes_per_s: float | None = None
    gpm_nvlink_tx_bytes_per_s: float | None = None
    gpm_nvlink_rx_bytes_per_s: float | None = None
    gpm_note: str | None = None
    total_energy_mj: int | None = None
    energy_integrated_j: float | None = None
    mig_instances: tuple[MigInstance, ...] = ()
    processes: tuple[GpuProcessSample, ...] = ()
    pci_bus_id: str | None = None


#: Why a GPU has no GPM figures (``GpuSample.gpm_note``).
GPM_UNSUPPORTED = "not available on this GPU (NVML GPM: Hopper or later)"
GPM_PENDING = "waiting for the second GPM sample"
GPM_LOST = "GPU lost between GPM samples"
GPM_DROPPED = "GPM sample pair dropped (counters reset)"
GPM_MIG = "per GPU instance (MIG enabled)"


def busy_percent(gpu: GpuSample, inst: MigInstance | None = None) -> float | None:
    """The percent of the last interval a kernel ran on a GPU (or one MIG device of it).

    Busy is time, not how much of the GPU the kernels filled: GPM's graphics-engine activity
    (the time any kernel ran, integrated by the GPU over the whole sample pair) where read,
    else the mean of the driver's utilization samples since the previous read (every sample
    period counted once), else the ``utilization.gpu`` point read. GPM SM activity reads
    lower than kernel time by how full the SMs were and is no measure of time: 76 % of the
    kernel time of 250 ms matmul bursts, 95 % of a saturating loop, on an H200. A point read
    of ``utilization.gpu`` covers the driver's last sample period only (200 ms on an H200) and
    misses periodic loads: it read 0 % all through a 25 %-duty load read at 1 Hz.

    Args:
        gpu: The GPU.
        inst: One of its MIG devices, or None for the whole GPU.

    Returns:
        The percent, None when nothing measures it.
    """
    if inst is not None:
        return inst.gpm_graphics_active
    if gpu.gpm_graphics_active is not None:
        return gpu.gpm_graphics_active
    if gpu.utilization_gpu_mean is not None:
        return gpu.utilization_gpu_mean
    return gpu.utilization_gpu


def gpm_known(gpu: GpuSample) -> bool:
    """True when the GPU has GPM figures this refresh (SM activity read from a sample pair)."""
    return gpu.gpm_sm_active is not None


@record
class XidEvent:
    """A critical XID error reported by the driver for one GPU."""

    gpu_index: int
    xid: int
    at: float


@record
class GpuReading:
    """Everything one read of the GPU source returns.

    Attributes:
        status: Whether NVML is usable; ``status.kind`` carries the NVML init error name.
        driver_version: e.g. ``"580.159.04"``.
        cuda_driver_version: Highest CUDA the driver supports, e.g. ``"13.0"``.
        nvml_version: e.g. ``"13.580.159.04"``.
        gpus: One sample per physical GPU, by index.
        xid_events: Recent XID events, oldest first (bounded).
        binding_problems: Names of NVML symbols missing from the installed library (binding skew).
    """

    status: SourceStatus
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    nvml_version: str | None = None
    gpus: tuple[GpuSample, ...] = ()
    xid_events: tuple[XidEvent, ...] = ()
    binding_problems: tuple[str, ...] = ()
