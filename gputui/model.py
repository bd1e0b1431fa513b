"""The vocabulary of gputui: frozen, slotted dataclasses shared by every layer.

Numbers stay numbers here (bytes, percent, watts, MHz); the UI and the text report format them.
``None`` always means "not available" (unsupported, no permission, source down), never zero.
No third-party imports: this module is imported by the data layer and the UI alike.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum

__all__ = [
    "FINDING_RANK",
    "GPM_DROPPED",
    "GPM_LOST",
    "GPM_MIG",
    "GPM_PENDING",
    "GPM_UNSUPPORTED",
    "GPU_GAUGES",
    "GPU_SAMPLE_FACTS",
    "MIG_GPM_FIELDS",
    "MIG_UTILIZATION_NA",
    "NVML_UUID_RE",
    "STATUS_RANK",
    "THROTTLE_REASONS",
    "AlertSeverity",
    "ContainerInfo",
    "ContainerReading",
    "ContainerUsage",
    "EngineInfo",
    "ExecResult",
    "ExportedGauge",
    "FaultCandidate",
    "FaultCount",
    "Finding",
    "FindingSeverity",
    "GpuGauge",
    "GpuProcess",
    "GpuProcessSample",
    "GpuReading",
    "GpuSample",
    "HealthCheck",
    "HealthStatus",
    "HostInfo",
    "HostStats",
    "KernelFault",
    "MigInstance",
    "NvmlAnswer",
    "ProcessInfo",
    "ScenarioKey",
    "Snapshot",
    "SourceStatus",
    "Visibility",
    "XidEvent",
    "gpm_known",
    "is_mig_token",
    "is_nvml_uuid",
    "mig_device_name",
    "mig_instance_of",
    "mig_request",
    "worst_status",
]

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


@dataclass(frozen=True, slots=True)
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


def mig_device_name(gpu_index: int, mig_index: int) -> str:
    """The name a MIG device goes by in ``--gpus device=…`` and in gputui: ``0:1``."""
    return f"{gpu_index}:{mig_index}"


def mig_request(token: str, gpus: Iterable[GpuSample]) -> tuple[GpuSample, MigInstance] | None:
    """The MIG device one GPU-request token names, None for a whole GPU or nothing known.

    Understands what the NVIDIA container toolkit accepts for a MIG device: ``0:1`` (GPU index
    and MIG device index, from ``--gpus device=0:1`` or CDI ``nvidia.com/gpu=0:1``), a
    ``MIG-<uuid>`` and the older ``MIG-GPU-<uuid>/<gi>/<ci>``.

    Args:
        token: One entry of a container's ``gpu_request``.
        gpus: The GPUs of the refresh.
    """
    text = token.strip()
    gpus = tuple(gpus)
    gpu_part, sep, mig_part = text.partition(":")
    if sep and gpu_part.isdigit() and mig_part.isdigit() and len(text) <= 12:
        for gpu in gpus:
            if gpu.index == int(gpu_part):
                for inst in gpu.mig_instances:
                    if inst.index == int(mig_part):
                        return gpu, inst
        return None
    if text[:4].upper() != "MIG-":
        return None
    lowered = text.lower()
    for gpu in gpus:
        for inst in gpu.mig_instances:
            if inst.uuid and inst.uuid.lower() == lowered:
                return gpu, inst
    legacy = lowered[4:].split("/")
    if len(legacy) == 3 and legacy[1].isdigit() and legacy[2].isdigit():
        for gpu in gpus:
            if (gpu.uuid or "").lower() != legacy[0]:
                continue
            for inst in gpu.mig_instances:
                if inst.index >= 0 and (inst.gpu_instance_id, inst.compute_instance_id) == (
                    int(legacy[1]),
                    int(legacy[2]),
                ):
                    return gpu, inst
    return None


def is_mig_token(token: str) -> bool:
    """True when a GPU-request token names a MIG device (``0:1``, ``MIG-…``), known or not."""
    text = token.strip()
    gpu_part, sep, mig_part = text.partition(":")
    return text[:4].upper() == "MIG-" or bool(sep and gpu_part.isdigit() and mig_part.isdigit())


def mig_instance_of(gpu: GpuSample, sample: GpuProcessSample) -> MigInstance | None:
    """The MIG device a process runs on (matched by GI and CI id), None off MIG."""
    if sample.mig_gi_id is None:
        return None
    for inst in gpu.mig_instances:
        if (
            inst.index >= 0
            and inst.gpu_instance_id == sample.mig_gi_id
            and (sample.mig_ci_id is None or inst.compute_instance_id == sample.mig_ci_id)
        ):
            return inst
    return None


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


def gpm_known(gpu: GpuSample) -> bool:
    """True when the GPU has GPM figures this refresh (SM activity read from a sample pair)."""
    return gpu.gpm_sm_active is not None


# --- The GPU gauges and every name they go by ------------------------------------------------
#
# One row per gauge of GpuSample. The JSON report's GPU section, the exporter's per-GPU gauges,
# the scenario format's keys and bounds, the scenario stand-in's NVML getters and the demo GPUs'
# defaults are generated from GPU_GAUGES, so a new gauge is a GpuSample field, one row here, its
# read in the NVML adapter and the widget that shows it.

_MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ExportedGauge:
    """A per-GPU Prometheus gauge of ``gputui export`` (labels: gpu, UUID, device, modelName...).

    Attributes:
        name: Metric name: dcgm-exporter's ``DCGM_FI_*`` where it has one (its dashboards keep
            working), else ``gputui_gpu_*``.
        help: The HELP text.
        divisor: The exported value is the field floor-divided by this (MiB of a byte count).
        compute: Computes the value from the whole sample instead of the field (a derived gauge
            such as the free framebuffer); None returns "no sample".
        counter: A counter in dcgm-exporter (energy since boot), not a gauge: served untyped,
            as prometheus_client would rename a counter family to ``…_total``.
    """

    name: str
    help: str
    divisor: int = 1
    compute: Callable[[GpuSample], float | None] | None = None
    counter: bool = False


@dataclass(frozen=True, slots=True)
class NvmlAnswer:
    """The NVML getter that reads a gauge and the shape of its reply.

    The scenario stand-in answers the getter from this description, so a scenario exercises the
    adapter's real read of the gauge.

    Attributes:
        getter: The pynvml function, e.g. ``nvmlDeviceGetClockInfo``.
        args: Names of the pynvml constants the adapter passes after the handle
            (``NVML_CLOCK_SM``); gauges read by one getter differ by these or by ``part``.
        part: Where the gauge sits in the reply: an attribute of a struct reply (``"gpu"``), a
            position in a tuple reply (``0``), or None when the reply is the number itself.
        reply: A tuple reply as the getter returns it, the gauge's ``part`` to be filled in (the
            other positions: the sampling period after an encoder utilization, unused counters).
        scale: NVML's unit per scenario unit: 1000 for milliwatts of a scenario's watts, a MiB
            for bytes of a scenario's MiB.
        group: The scenario ``errors`` key that makes the getter fail for all its gauges
            (``clocks``), besides each gauge's own key; None when it reads one gauge only.
    """

    getter: str
    args: tuple[str, ...] = ()
    part: str | int | None = None
    reply: tuple[int, ...] = ()
    scale: int = 1
    group: str | None = None


@dataclass(frozen=True, slots=True)
class ScenarioKey:
    """How a scenario file gives a gauge (docs/scenario-format.md).

    Attributes:
        key: Its name in a scenario's GPU object.
        bounds: The inclusive range of a number; None for a boolean.
        default: The value when the key is left out; None makes the getter fail with
            ``NotSupported``, as NVML does for a gauge a GPU lacks.
        default_from: Left out, the gauge takes this other key's value (ECC pending: current).
        demo: The value of the ``--demo`` GPUs unless one says otherwise (an idle H200's).
    """

    key: str
    bounds: tuple[float, float] | None
    default: float | bool | None = None
    default_from: str | None = None
    demo: float | bool | None = None


@dataclass(frozen=True, slots=True)
class GpuGauge:
    """One gauge of :class:`GpuSample` and every name it goes by: one row of :data:`GPU_GAUGES`.

    Attributes:
        field: The :class:`GpuSample` attribute.
        name: What it is, for people.
        unit: Its unit in the sample (``%``, ``B``, ``W``...; empty for a yes/no).
        scenario: Its key in scenario files.
        nvml: The NVML getter that reads it.
        exported: The exporter's gauges of it (none: it is not exported).
        json_key: Its key in the JSON report's ``gpus[]`` (the field's name unless given).
    """

    field: str
    name: str
    unit: str
    scenario: ScenarioKey
    nvml: NvmlAnswer
    exported: tuple[ExportedGauge, ...] = ()
    json_key: str = ""

    def __post_init__(self) -> None:
        if not self.json_key:
            object.__setattr__(self, "json_key", self.field)


def _ratio(field_name: str) -> Callable[[GpuSample], float | None]:
    """A percent field as dcgm-exporter's 0-1 ratio (``DCGM_FI_PROF_*``)."""

    def ratio(g: GpuSample) -> float | None:
        value: float | None = getattr(g, field_name)
        return None if value is None else value / 100.0

    return ratio


def _gpm(
    field_name: str,
    name: str,
    metric: str,
    dcgm: str,
    help_text: str,
    *,
    demo: float | None = 0,
) -> GpuGauge:
    """A GPM percent gauge: read from a sample pair, exported as DCGM's 0-1 ratio."""
    return GpuGauge(
        field_name,
        name,
        "%",
        ScenarioKey(field_name, (0, 100), demo=demo),
        NvmlAnswer("nvmlGpmMetricsGet", args=(metric,), group="gpm"),
        (ExportedGauge(dcgm, help_text, compute=_ratio(field_name)),),
    )


def _gpm_bytes(field_name: str, key: str, name: str, metric: str, dcgm: str) -> GpuGauge:
    """A GPM throughput gauge: NVML's MiB/s (a scenario's unit), bytes/s in the sample."""
    return GpuGauge(
        field_name,
        name,
        "B/s",
        ScenarioKey(key, (0, 1e9), demo=0),
        NvmlAnswer("nvmlGpmMetricsGet", args=(metric,), group="gpm"),
        (ExportedGauge(dcgm, f"{name[0].upper()}{name[1:]} (in B/s)."),),
    )


def _fb_free_mib(g: GpuSample) -> float | None:
    if g.memory_used_bytes is None or g.memory_total_bytes is None:
        return None
    return max(0, g.memory_total_bytes - g.memory_used_bytes) // _MIB


#: Every gauge of :class:`GpuSample`, in the order of the exporter's families (dcgm-exporter's
#: gauges come first, then gputui's own, each in this order). The JSON report keeps
#: :class:`GpuSample`'s field order.
GPU_GAUGES: tuple[GpuGauge, ...] = (
    GpuGauge(
        "utilization_gpu",
        "GPU utilization",
        "%",
        ScenarioKey("utilization_gpu", (0, 100)),
        NvmlAnswer("nvmlDeviceGetUtilizationRates", part="gpu", group="utilization"),
        (ExportedGauge("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %)."),),
    ),
    GpuGauge(
        "utilization_memory",
        "memory-controller utilization",
        "%",
        ScenarioKey("utilization_memory", (0, 100), default=0),
        NvmlAnswer("nvmlDeviceGetUtilizationRates", part="memory", group="utilization"),
        (ExportedGauge("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %)."),),
    ),
    GpuGauge(
        "power_limit_w",
        "enforced power limit",
        "W",
        ScenarioKey("power_limit_w", (0, 1e5), demo=700),
        NvmlAnswer("nvmlDeviceGetEnforcedPowerLimit", scale=1000),
        (ExportedGauge("gputui_gpu_power_limit_watts", "Enforced power limit."),),
    ),
    GpuGauge(
        "memory_total_bytes",
        "GPU memory",
        "B",
        ScenarioKey("memory_total_mib", (0, 1e9), default=143771, demo=143771),
        NvmlAnswer("nvmlDeviceGetMemoryInfo", part="total", scale=_MIB, group="memory"),
        (ExportedGauge("gputui_gpu_memory_total_bytes", "GPU memory."),),
    ),
    GpuGauge(
        "memory_used_bytes",
        "GPU memory in use",
        "B",
        ScenarioKey("memory_used_mib", (0, 1e9), default=0),
        NvmlAnswer("nvmlDeviceGetMemoryInfo", part="used", scale=_MIB, group="memory"),
        (
            ExportedGauge("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", _MIB),
            ExportedGauge(
                "DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", compute=_fb_free_mib
            ),
            ExportedGauge("gputui_gpu_memory_used_bytes", "GPU memory in use."),
        ),
    ),
    GpuGauge(
        "temperature_c",
        "GPU temperature",
        "°C",
        ScenarioKey("temperature_c", (-50, 200)),
        NvmlAnswer("nvmlDeviceGetTemperature", args=("NVML_TEMPERATURE_GPU",)),
        (ExportedGauge("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C)."),),
    ),
    GpuGauge(
        "power_w",
        "power draw",
        "W",
        ScenarioKey("power_w", (0, 1e5)),
        NvmlAnswer("nvmlDeviceGetPowerUsage", scale=1000),
        (ExportedGauge("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W)."),),
    ),
    GpuGauge(
        "clock_sm_mhz",
        "SM clock",
        "MHz",
        ScenarioKey("clock_sm_mhz", (0, 1e5)),
        NvmlAnswer("nvmlDeviceGetClockInfo", args=("NVML_CLOCK_SM",), group="clocks"),
        (ExportedGauge("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz)."),),
    ),
    GpuGauge(
        "clock_mem_mhz",
        "memory clock",
        "MHz",
        ScenarioKey("clock_mem_mhz", (0, 1e5), demo=3201),
        NvmlAnswer("nvmlDeviceGetClockInfo", args=("NVML_CLOCK_MEM",), group="clocks"),
        (ExportedGauge("DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz)."),),
    ),
    GpuGauge(
        "encoder_util",
        "encoder utilization",
        "%",
        ScenarioKey("encoder_util", (0, 100), demo=0),
        NvmlAnswer("nvmlDeviceGetEncoderUtilization", part=0, reply=(0, 167000)),
        (ExportedGauge("DCGM_FI_DEV_ENC_UTIL", "Encoder utilization (in %)."),),
    ),
    GpuGauge(
        "decoder_util",
        "decoder utilization",
        "%",
        ScenarioKey("decoder_util", (0, 100), demo=0),
        NvmlAnswer("nvmlDeviceGetDecoderUtilization", part=0, reply=(0, 167000)),
        (ExportedGauge("DCGM_FI_DEV_DEC_UTIL", "Decoder utilization (in %)."),),
    ),
    GpuGauge(
        "fan_percent",
        "fan speed",
        "%",
        ScenarioKey("fan_speed", (0, 100)),
        NvmlAnswer("nvmlDeviceGetFanSpeed"),
        (ExportedGauge("DCGM_FI_DEV_FAN_SPEED", "Fan speed (in %)."),),
    ),
    GpuGauge(
        "pcie_tx_kbps",
        "PCIe TX throughput",
        "KB/s",
        ScenarioKey("pcie_tx_kbps", (0, 1e12)),
        NvmlAnswer("nvmlDeviceGetPcieThroughput", args=("NVML_PCIE_UTIL_TX_BYTES",), group="pcie"),
        (ExportedGauge("DCGM_FI_DEV_PCIE_TX_THROUGHPUT", "PCIe TX throughput (in KB/s)."),),
    ),
    GpuGauge(
        "pcie_rx_kbps",
        "PCIe RX throughput",
        "KB/s",
        ScenarioKey("pcie_rx_kbps", (0, 1e12)),
        NvmlAnswer("nvmlDeviceGetPcieThroughput", args=("NVML_PCIE_UTIL_RX_BYTES",), group="pcie"),
        (ExportedGauge("DCGM_FI_DEV_PCIE_RX_THROUGHPUT", "PCIe RX throughput (in KB/s)."),),
    ),
    GpuGauge(
        "ecc_uncorrected_volatile",
        "uncorrected ECC errors since the driver loaded",
        "errors",
        ScenarioKey("ecc_uncorrected_volatile", (0, 2**63), demo=0),
        NvmlAnswer(
            "nvmlDeviceGetTotalEccErrors",
            args=("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", "NVML_VOLATILE_ECC"),
        ),
        (
            ExportedGauge(
                "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Uncorrected (double-bit) volatile ECC errors."
            ),
        ),
    ),
    GpuGauge(
        "throttle_reasons",
        "clock-event (throttle) reasons",
        "bitmask",
        ScenarioKey("throttle_reasons", (0, 2**63), demo=0),
        NvmlAnswer("nvmlDeviceGetCurrentClocksEventReasons"),
        (ExportedGauge("gputui_gpu_throttle_reasons", "NVML clock-event reason bitmask."),),
    ),
    GpuGauge(
        "pstate",
        "performance state",
        "P-state",
        ScenarioKey("pstate", (0, 32), demo=0),
        NvmlAnswer("nvmlDeviceGetPerformanceState"),
        (ExportedGauge("gputui_gpu_pstate", "Performance state (0 = P0)."),),
    ),
    GpuGauge(
        "total_energy_mj",
        "energy used since the driver loaded",
        "mJ",
        ScenarioKey("total_energy_mj", (0, 2**63)),
        NvmlAnswer("nvmlDeviceGetTotalEnergyConsumption"),
        (
            ExportedGauge(
                "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
                "Total energy consumption since boot (in mJ).",
                counter=True,
            ),
        ),
    ),
    _gpm(
        "gpm_graphics_active",
        "graphics engine active (any kernel running)",
        "NVML_GPM_METRIC_GRAPHICS_UTIL",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "Ratio of time the graphics engine is active.",
    ),
    _gpm(
        "gpm_sm_active",
        "SM activity",
        "NVML_GPM_METRIC_SM_UTIL",
        "DCGM_FI_PROF_SM_ACTIVE",
        "The ratio of cycles an SM has at least 1 warp assigned.",
    ),
    _gpm(
        "gpm_sm_occupancy",
        "SM occupancy",
        "NVML_GPM_METRIC_SM_OCCUPANCY",
        "DCGM_FI_PROF_SM_OCCUPANCY",
        "The ratio of number of warps resident on an SM.",
    ),
    _gpm(
        "gpm_tensor_active",
        "tensor pipes active (any precision)",
        "NVML_GPM_METRIC_ANY_TENSOR_UTIL",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
    ),
    _gpm(
        "gpm_tensor_hmma_active",
        "half-precision tensor pipe active (HMMA: FP16/BF16)",
        "NVML_GPM_METRIC_HMMA_TENSOR_UTIL",
        "DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE",
        "Ratio of cycles the HMMA (FP16/BF16) tensor pipe is active.",
    ),
    _gpm(
        "gpm_tensor_imma_active",
        "integer tensor pipe active (IMMA)",
        "NVML_GPM_METRIC_IMMA_TENSOR_UTIL",
        "DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE",
        "Ratio of cycles the IMMA (integer) tensor pipe is active.",
    ),
    _gpm(
        "gpm_tensor_dfma_active",
        "FP64 tensor pipe active (DFMA)",
        "NVML_GPM_METRIC_DFMA_TENSOR_UTIL",
        "DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE",
        "Ratio of cycles the FP64 (DFMA) tensor pipe is active.",
    ),
    _gpm(
        "gpm_fp64_active",
        "FP64 pipe active (non-tensor)",
        "NVML_GPM_METRIC_FP64_UTIL",
        "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
        "Ratio of cycles the fp64 pipes are active.",
    ),
    _gpm(
        "gpm_fp32_active",
        "FP32 pipe active (non-tensor)",
        "NVML_GPM_METRIC_FP32_UTIL",
        "DCGM_FI_PROF_PIPE_FP32_ACTIVE",
        "Ratio of cycles the fp32 pipes are active.",
    ),
    _gpm(
        "gpm_fp16_active",
        "FP16 pipe active (non-tensor)",
        "NVML_GPM_METRIC_FP16_UTIL",
        "DCGM_FI_PROF_PIPE_FP16_ACTIVE",
        "Ratio of cycles the fp16 pipes are active.",
    ),
    _gpm(
        "gpm_dram_active",
        "DRAM bandwidth used",
        "NVML_GPM_METRIC_DRAM_BW_UTIL",
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
    ),
    _gpm_bytes(
        "gpm_pcie_tx_bytes_per_s",
        "gpm_pcie_tx_mib_s",
        "PCIe bytes sent by the GPU",
        "NVML_GPM_METRIC_PCIE_TX_PER_SEC",
        "DCGM_FI_PROF_PCIE_TX_BYTES",
    ),
    _gpm_bytes(
        "gpm_pcie_rx_bytes_per_s",
        "gpm_pcie_rx_mib_s",
        "PCIe bytes received by the GPU",
        "NVML_GPM_METRIC_PCIE_RX_PER_SEC",
        "DCGM_FI_PROF_PCIE_RX_BYTES",
    ),
    _gpm_bytes(
        "gpm_nvlink_tx_bytes_per_s",
        "gpm_nvlink_tx_mib_s",
        "NVLink bytes sent by the GPU (all links)",
        "NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC",
        "DCGM_FI_PROF_NVLINK_TX_BYTES",
    ),
    _gpm_bytes(
        "gpm_nvlink_rx_bytes_per_s",
        "gpm_nvlink_rx_mib_s",
        "NVLink bytes received by the GPU (all links)",
        "NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC",
        "DCGM_FI_PROF_NVLINK_RX_BYTES",
    ),
    GpuGauge(
        "clock_sm_max_mhz",
        "maximum SM clock",
        "MHz",
        ScenarioKey("clock_sm_max_mhz", (0, 1e5), demo=1980),
        NvmlAnswer("nvmlDeviceGetMaxClockInfo", args=("NVML_CLOCK_SM",), group="max_clocks"),
    ),
    GpuGauge(
        "clock_mem_max_mhz",
        "maximum memory clock",
        "MHz",
        ScenarioKey("clock_mem_max_mhz", (0, 1e5), demo=3201),
        NvmlAnswer("nvmlDeviceGetMaxClockInfo", args=("NVML_CLOCK_MEM",), group="max_clocks"),
    ),
    GpuGauge(
        "ecc_mode_current",
        "ECC enabled",
        "",
        ScenarioKey("ecc_mode_current", None, demo=True),
        NvmlAnswer("nvmlDeviceGetEccMode", part=0, reply=(0, 0), group="ecc_mode"),
    ),
    GpuGauge(
        "ecc_mode_pending",
        "ECC enabled after the next reboot",
        "",
        ScenarioKey("ecc_mode_pending", None, default_from="ecc_mode_current"),
        NvmlAnswer("nvmlDeviceGetEccMode", part=1, reply=(0, 0), group="ecc_mode"),
    ),
    GpuGauge(
        "remapped_rows_pending",
        "row remapping pending (reset the GPU)",
        "",
        ScenarioKey("remapped_rows_pending", None, demo=False),
        NvmlAnswer("nvmlDeviceGetRemappedRows", part=2, reply=(0, 0, 0, 0), group="remapped_rows"),
    ),
    GpuGauge(
        "remapped_rows_failure",
        "row remapping failed",
        "",
        ScenarioKey("remapped_rows_failure", None, default=False),
        NvmlAnswer("nvmlDeviceGetRemappedRows", part=3, reply=(0, 0, 0, 0), group="remapped_rows"),
    ),
    GpuGauge(
        "persistence_mode",
        "persistence mode",
        "",
        ScenarioKey("persistence_mode", None, demo=True),
        NvmlAnswer("nvmlDeviceGetPersistenceMode"),
    ),
    GpuGauge(
        "mig_mode_current",
        "MIG mode",
        "",
        ScenarioKey("mig_mode_current", None, demo=False),
        NvmlAnswer("nvmlDeviceGetMigMode", part=0, reply=(0, 0), group="mig_mode"),
    ),
    GpuGauge(
        "mig_mode_pending",
        "MIG mode after the next reset",
        "",
        ScenarioKey("mig_mode_pending", None, default_from="mig_mode_current"),
        NvmlAnswer("nvmlDeviceGetMigMode", part=1, reply=(0, 0), group="mig_mode"),
    ),
)

#: The :class:`GpuSample` fields that are not gauges: identity, state, and nested lists (each
#: has its own shape in every output).
GPU_SAMPLE_FACTS: tuple[str, ...] = (
    "index",
    "uuid",
    "name",
    "lost",
    "error",
    "gpm_note",
    "energy_integrated_j",
    "mig_instances",
    "processes",
    "pci_bus_id",
)


@dataclass(frozen=True, slots=True)
class XidEvent:
    """A critical XID error reported by the driver for one GPU."""

    gpu_index: int
    xid: int
    at: float


@dataclass(frozen=True, slots=True)
class FaultCandidate:
    """A process that was on the faulting GPU when a fault named no process.

    Attributes:
        pid: Host PID.
        process_name: Its name, None when unknown.
        container_id: Its container, None for a host process (or one nobody could place).
        container_name: The container's name, None when unknown.
    """

    pid: int
    process_name: str | None = None
    container_id: str | None = None
    container_name: str | None = None


@dataclass(frozen=True, slots=True)
class KernelFault:
    """One fault from the kernel log (an NVIDIA XID line or an OOM kill), attributed.

    Attributes:
        kind: ``xid`` or ``oom``.
        at: When the kernel logged it (seconds since the epoch, from the record's time stamp).
        seq: The kernel log record's sequence number.
        raw: The kernel's line as logged (at most 1024 characters; sanitise before showing).
        fault_class: ``application``, ``memory``, ``bus``, ``nvlink``, ``gsp``, ``driver``,
            ``unknown`` for an XID (gputui's XID catalogue); ``memory_limit`` for a cgroup OOM
            kill, ``host_memory`` for the host running out.
        meaning: What it means, for people.
        fix: What to do, for people.
        xid: The XID number, None for an OOM kill.
        pci_bus_id: The GPU's PCI address as the line gives it (``0000:3b:00``).
        gpu_index: The GPU with that address, None when no GPU of this refresh has it.
        mig_device: The MIG device (``0:1``) the line's GPU and compute instance name.
        gpu_instance: The line's MIG GPU instance id (``GPU-I:``).
        compute_instance: The line's MIG compute instance id (``GPU-CI:``).
        pid: The host PID the line names, None when it names none.
        process_name: The process's name (the line's, or the one gputui saw).
        container_id: The container the process (or the OOM-killed cgroup) belongs to.
        container_name: That container's name, None when unknown.
        attribution: How the process and container were found: ``process`` (the PID was
            alive and had started before the line), ``recent_process`` (it had exited; gputui
            saw it within the last minute), ``pid_only`` (a PID nobody saw), ``cgroup`` (the OOM
            line's memory cgroup), ``candidates`` (no PID: the processes on that GPU then),
            ``none``.
        candidates: With ``attribution == "candidates"``: the processes on that GPU (or MIG
            device) at that moment; none of them is known to be the one.
        injected: True when a program wrote the line into ``/dev/kmsg`` (syslog facility not
            the kernel's): a test or an operator, not the driver.
    """

    kind: str
    at: float
    seq: int
    raw: str
    fault_class: str
    meaning: str
    fix: str
    xid: int | None = None
    pci_bus_id: str | None = None
    gpu_index: int | None = None
    mig_device: str | None = None
    gpu_instance: int | None = None
    compute_instance: int | None = None
    pid: int | None = None
    process_name: str | None = None
    container_id: str | None = None
    container_name: str | None = None
    attribution: str = "none"
    candidates: tuple[FaultCandidate, ...] = ()
    injected: bool = False


@dataclass(frozen=True, slots=True)
class FaultCount:
    """How many kernel faults of one kind gputui has seen since it started (a counter).

    Attributes:
        kind: ``xid`` or ``oom``.
        gpu_index: The GPU, None when not known (every OOM kill).
        xid: The XID, None for OOM kills.
        fault_class: The fault's class.
        container_id: The container it was attributed to, None for none.
        container_name: That container's name, None when unknown.
        count: Faults seen.
    """

    kind: str
    gpu_index: int | None
    xid: int | None
    fault_class: str
    container_id: str | None
    container_name: str | None
    count: int


class HealthStatus(str, Enum):
    """Outcome of one runtime-health check, ordered from worst to best by :data:`STATUS_RANK`."""

    FAIL = "fail"
    WARN = "warn"
    INFO = "info"
    PASS = "pass"
    SKIP = "skip"


#: Lower is worse; used to pick the worst status for a tab title or an exit code.
STATUS_RANK: dict[HealthStatus, int] = {
    HealthStatus.FAIL: 0,
    HealthStatus.WARN: 1,
    HealthStatus.INFO: 2,
    HealthStatus.PASS: 3,
    HealthStatus.SKIP: 4,
}


class FindingSeverity(str, Enum):
    """How bad a :class:`Finding` is; a ``str`` whose text is the value (``warn``) everywhere."""

    FAIL = "fail"
    WARN = "warn"
    INFO = "info"

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        # Python 3.10 and 3.11 format a str-mixin member as its value, 3.12 as __str__: the
        # value either way, so f-strings print ``warn``.
        return format(str(self.value), spec)


#: Lower is worse; findings are listed (and kept when capped) worst first.
FINDING_RANK: dict[FindingSeverity, int] = {
    FindingSeverity.FAIL: 0,
    FindingSeverity.WARN: 1,
    FindingSeverity.INFO: 2,
}


class AlertSeverity(str, Enum):
    """The severity of an alert rule (docs/alerts.md); a ``str`` whose text is the value."""

    CRITICAL = "critical"
    WARNING = "warning"

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


@dataclass(frozen=True, slots=True)
class SourceStatus:
    """Whether one data source (``nvml``, ``docker``, ``procs``) answered, and if not, why.

    Attributes:
        name: The source's name.
        ok: True when the last read succeeded.
        error: One-line description of the failure, or None.
        kind: Machine-readable failure kind, e.g. ``LibraryNotFound``, ``DriverNotLoaded``,
            ``permission``, ``unreachable``, ``not_found``; None when ok.
        fix: What the user can do about it, or None.
    """

    name: str
    ok: bool
    error: str | None = None
    kind: str | None = None
    fix: str | None = None


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    """Host-side facts about one PID (from /proc and psutil).

    Attributes:
        pid: Host PID.
        exists: False when the PID is not (or no longer) present in /proc.
        command: Full command line joined by spaces (or the process name), None if unknown.
        name: Process name.
        user: Owner's user name (or uid as text when it has no name).
        cpu_percent: CPU % since the previous refresh (100 = one core), None on the first sample.
        rss_bytes: Resident set size.
        start_time: Process start, seconds since the epoch.
        container_id: 64-hex container id found in /proc/<pid>/cgroup, or None (host).
        runtime: Which runtime's cgroup naming matched (``docker``, ``containerd``, ``crio``,
            ``podman``, ``kubernetes``), or None.
        pod_uid: Kubernetes pod UID from the cgroup path, or None.
        container_pid: The PID inside the process's own PID namespace (last ``NSpid`` field).
        access_denied: True when some facts could not be read for permission reasons.
        proc_hidden: True when the process exists but ``/proc`` hides it from gputui (``hidepid``
            mount option): its GPU memory is held by a process of another user, not an orphan.
        sampled_at: When ``cpu_percent`` and ``rss_bytes`` were read (seconds since the epoch),
            set only when a refresh reads a rotating share of many GPU processes; None means
            this refresh read them.
    """

    pid: int
    exists: bool = True
    command: str | None = None
    name: str | None = None
    user: str | None = None
    cpu_percent: float | None = None
    rss_bytes: int | None = None
    start_time: float | None = None
    container_id: str | None = None
    runtime: str | None = None
    pod_uid: str | None = None
    container_pid: int | None = None
    access_denied: bool = False
    proc_hidden: bool = False
    sampled_at: float | None = None


@dataclass(frozen=True, slots=True)
class Visibility:
    """What gputui itself can see of the host.

    Attributes:
        host_pid_namespace: True when gputui shares the host's PID namespace (NVML PIDs resolve),
            None when unknown.
        private_cgroup_namespace: True when other processes' cgroup paths show ``..`` (gputui runs
            in its own cgroup namespace), None when unknown.
        proc_hidepid: The ``hidepid=`` value of the ``/proc`` mount (``2``, ``invisible``...) when
            it hides other users' processes from gputui; None when it hides nothing (or unknown).
    """

    host_pid_namespace: bool | None = None
    private_cgroup_namespace: bool | None = None
    proc_hidepid: str | None = None


@dataclass(frozen=True, slots=True)
class ContainerInfo:
    """One container as the Docker engine describes it (environment values never kept).

    Attributes:
        id: Full 64-hex id.
        name: Name without the leading ``/``.
        image: Image reference as the container was created with.
        status: ``running``, ``exited``, ``paused``, ``created``, ``restarting``, ``dead``...
        pid: Host PID of the container's init process (0/None when not running).
        compose_project: ``com.docker.compose.project`` label.
        compose_service: ``com.docker.compose.service`` label.
        k8s_pod: ``io.kubernetes.pod.name`` label.
        k8s_namespace: ``io.kubernetes.pod.namespace`` label.
        gpu_request: ``"all"``, a tuple of GPU indexes/UUIDs, or None (no GPU asked for).
        gpu_request_via: How the GPU was requested: ``device_requests``, ``cdi``, ``runtime``,
            ``env`` or ``devices`` (``--device /dev/nvidiaN``).
        runtime: ``HostConfig.Runtime`` (``runc``, ``nvidia``...).
        gpu_device_paths: ``/dev/nvidia*`` paths passed with ``--device``.
        nvidia_capabilities: Parsed ``NVIDIA_DRIVER_CAPABILITIES``, e.g. ``("compute", "utility")``.
        cuda_version: ``CUDA_VERSION`` of the image, e.g. ``"12.4.1"``.
        cuda_requirement: ``NVIDIA_REQUIRE_CUDA`` constraint, e.g. ``"cuda>=12.4"``.
        started_at: Start time, seconds since the epoch.
        restart_count: From inspect.
        oom_killed: ``State.OOMKilled``.
        exit_code: ``State.ExitCode`` for a stopped container.
        cpu_percent: CPU % the way ``docker stats`` computes it (100 = one core).
        memory_used_bytes: Memory the way ``docker stats`` computes it (usage minus inactive file).
        memory_limit_bytes: The container's memory limit (host memory when unlimited).
        cpu_quota_cpus: CPU limit in CPUs (``--cpus``), None when unlimited.
        cpu_periods: CFS enforcement periods so far (cgroup ``cpu.stat nr_periods``).
        cpu_throttled_periods: Periods in which the container was throttled (``nr_throttled``).
        cpu_throttled_seconds: Total time throttled (``throttled_usec`` / ``throttled_time``).
        mps_pipe_directory: ``CUDA_MPS_PIPE_DIRECTORY`` of the container's config (a path; None
            when unset: MPS clients then use ``/tmp/nvidia-mps``).
        mps_thread_percentage: ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` (0-100), None when unset.
        mps_pipe_source: The host path bind-mounted at the container's MPS pipe directory, None
            when nothing is mounted there.
        ipc_mode: ``HostConfig.IpcMode`` (``host``, ``private``, ``shareable``...).
        stats_sampled_at: When the CPU, memory and throttling figures were read from the cgroup
            files (seconds since the epoch), set only when they are read on their own cadence
            (many running containers); None means this refresh read them.
        inspect_problem: Why the engine's full description is missing (its inspect reply was
            over the size cap): the container is a stub made from the list reply (name, image,
            state, compose/k8s labels), and what only inspect tells (GPU request, runtime,
            environment, PID) is unknown. None for a fully inspected container.
        policy_labels: The container's ``gputui.*`` labels (``gputui.owner``,
            ``gputui.idle-policy``), sorted by key: what the idle-GPU policy and alert delivery
            read of its labels (at most 16, each bounded by the parser); other labels are not
            kept.
    """

    id: str
    name: str
    image: str
    status: str
    pid: int | None = None
    compose_project: str | None = None
    compose_service: str | None = None
    k8s_pod: str | None = None
    k8s_namespace: str | None = None
    gpu_request: str | tuple[str, ...] | None = None
    gpu_request_via: str | None = None
    runtime: str | None = None
    gpu_device_paths: tuple[str, ...] = ()
    nvidia_capabilities: tuple[str, ...] | None = None
    cuda_version: str | None = None
    cuda_requirement: str | None = None
    started_at: float | None = None
    restart_count: int | None = None
    oom_killed: bool | None = None
    exit_code: int | None = None
    cpu_percent: float | None = None
    memory_used_bytes: int | None = None
    memory_limit_bytes: int | None = None
    cpu_quota_cpus: float | None = None
    cpu_periods: int | None = None
    cpu_throttled_periods: int | None = None
    cpu_throttled_seconds: float | None = None
    mps_pipe_directory: str | None = None
    mps_thread_percentage: int | None = None
    mps_pipe_source: str | None = None
    ipc_mode: str | None = None
    stats_sampled_at: float | None = None
    inspect_problem: str | None = None
    policy_labels: tuple[tuple[str, str], ...] = ()

    def label(self, key: str) -> str | None:
        """One of :attr:`policy_labels` by key, None when the container does not carry it."""
        return next((v for k, v in self.policy_labels if k == key), None)

    @property
    def short_id(self) -> str:
        """The 12-character id the docker CLI shows."""
        return self.id[:12]

    @property
    def running(self) -> bool:
        """True while the container's processes can run (running or restarting)."""
        return self.status in ("running", "restarting")


@dataclass(frozen=True, slots=True)
class EngineInfo:
    """Facts about the Docker engine relevant to GPUs (from ``docker info``/``version``).

    Attributes:
        endpoint: The URL the client talks to (``unix:///var/run/docker.sock``...).
        context: Name of the active docker CLI context, if one was used.
        server_version: Engine version.
        api_version: Negotiated API version.
        runtimes: Registered OCI runtimes (``runc``, ``nvidia``...).
        default_runtime: The runtime containers get unless they ask otherwise.
        cgroup_driver: ``cgroupfs`` or ``systemd``.
        cgroup_version: ``"1"`` or ``"2"``.
        cdi_spec_dirs: Directories the engine reads CDI specs from; empty when CDI is disabled,
            None when the engine does not report it (older engines).
        host_memory_bytes: Total memory of the engine's host.
    """

    endpoint: str | None = None
    context: str | None = None
    server_version: str | None = None
    api_version: str | None = None
    runtimes: tuple[str, ...] = ()
    default_runtime: str | None = None
    cgroup_driver: str | None = None
    cgroup_version: str | None = None
    cdi_spec_dirs: tuple[str, ...] | None = None
    host_memory_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class ContainerReading:
    """Everything one read of the container source returns."""

    status: SourceStatus
    containers: tuple[ContainerInfo, ...] = ()
    engine: EngineInfo | None = None


@dataclass(frozen=True, slots=True)
class ExecResult:
    """Outcome of running a command inside a container.

    Attributes:
        argv: The command that ran (never through a shell).
        exit_code: Its exit status, None when it never started or timed out.
        stdout: Captured standard output (decoded, replacement characters for bad bytes).
        stderr: Captured standard error.
        duration_s: Wall time.
        error: A one-line explanation when it could not run or failed in a known way.
        timed_out: True when it was abandoned after the timeout.
        output_cut_bytes: The output cap when the command printed more and the rest was
            dropped; None when the whole output was kept.
    """

    argv: tuple[str, ...]
    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    error: str | None = None
    timed_out: bool = False
    output_cut_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class HealthCheck:
    """One runtime-health finding.

    Attributes:
        id: Stable dotted id, e.g. ``docker.nvidia_runtime`` (per-subject checks append
            ``:<subject>``, e.g. ``container.gpu_visible:trainer-a``).
        status: pass/warn/fail/info/skip.
        summary: One line.
        details: What the check saw, one fact per line.
        fix: What to run or change, None when nothing needs doing.
        docs: A documentation URL, when one exists.
        subject: What the check is about (a GPU index, a container name), None for host checks.
    """

    id: str
    status: HealthStatus
    summary: str
    details: tuple[str, ...] = ()
    fix: str | None = None
    docs: str | None = None
    subject: str | None = None


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """One GPU process joined with its host process facts and its container.

    Attributes:
        sample: What NVML said.
        info: What /proc and psutil said (``info.exists`` False: nobody can find the PID).
        container_id: The container owning the process, None for a host process and for one
            whose ``/proc`` entry could not be read (see :attr:`on_host`). It may name a
            container the Docker engine does not know (another runtime such as containerd).
    """

    sample: GpuProcessSample
    info: ProcessInfo
    container_id: str | None = None

    @property
    def pid(self) -> int:
        """Host PID."""
        return self.sample.pid

    @property
    def on_host(self) -> bool:
        """True only for a process ``/proc`` showed to be in no container.

        No container id does not mean "the host": a PID nobody can find, or one ``hidepid``
        hides, may well run in a container, and gputui cannot tell. Every front-end (text
        report, tree, Users tab, exporter, ``free --explain``) places a process through this
        one rule, so none calls an unknown process a host one.
        """
        return self.container_id is None and self.info.exists and not self.info.proc_hidden


def per_gpu_sm(processes: Iterable[GpuProcess]) -> int | None:
    """The SM % of a set of GPU processes as one GPU would read it: the mean over their GPUs.

    Processes on one GPU (or MIG device) share its SMs, so their figures add up there (at most
    100 %); a container on three busy GPUs is 90 %, not 270 %. GPUs without a reading are left
    out; None when no GPU reported one. The tree, the Users tab, the report and the JSON output
    all show this figure.

    Args:
        processes: Rows of one container, user or project (one row per process and GPU).

    Returns:
        The whole-percent mean over the GPUs used, or None.
    """
    by_gpu: dict[tuple[int, int | None], int] = {}
    for process in processes:
        sample = process.sample
        if sample.sm_util is not None:
            device = (sample.gpu_index, sample.mig_index)
            by_gpu[device] = min(100, by_gpu.get(device, 0) + max(0, sample.sm_util))
    if not by_gpu:
        return None
    return round(sum(by_gpu.values()) / len(by_gpu))


@dataclass(frozen=True, slots=True)
class ContainerUsage:
    """A container with the GPU usage gputui attributed to it.

    Attributes:
        info: The engine's view of the container; a stub (status ``unknown``) when the id came only
            from a cgroup path and the engine does not know it.
        gpu_memory_bytes: Sum of GPU memory over its GPU processes.
        pids: Host PIDs of its GPU processes (each once).
        gpu_indexes: GPUs its processes use.
        sm_util: SM % of its processes, per GPU: the mean over the GPUs they use
            (:func:`per_gpu_sm`; None when none reported any).
        known_to_engine: False for ids seen only in cgroups (containerd, CRI-O, podman...).
        gpu_data: False when NVML gave no process list (no library, no permission, driver
            gone): nobody can tell then whether the container uses its GPUs.
        mig_devices: The MIG devices its processes run on, by name (``0:1``).
        engine_answered: False while the Docker engine is unreachable: ``known_to_engine``
            False then means "unknown", not "not a Docker container".
        cgroup_runtime: For a container no connected source lists (a stub), the runtime its
            cgroup path names (``containerd``, ``podman``, ``kubernetes``), None when unnamed;
            None for a listed container.
    """

    info: ContainerInfo
    gpu_memory_bytes: int = 0
    pids: tuple[int, ...] = ()
    gpu_indexes: tuple[int, ...] = ()
    sm_util: int | None = None
    known_to_engine: bool = True
    gpu_data: bool = True
    mig_devices: tuple[str, ...] = ()
    engine_answered: bool = True
    cgroup_runtime: str | None = None

    @property
    def not_in_engine(self) -> bool:
        """True when the engine answered and does not know this container (cgroups only).

        The one verdict "not in Docker" rests on: without the engine's answer it is unknown.
        """
        return self.engine_answered and not self.known_to_engine

    @property
    def idle_reserved(self) -> bool:
        """True for a running container that asked for GPUs but runs no GPU process.

        Never True without GPU data: a broken driver must not turn every GPU container into an
        "idle reservation" alarm at the moment it breaks.
        """
        return (
            self.gpu_data
            and self.info.running
            and self.info.gpu_request is not None
            and not self.pids
        )


@dataclass(frozen=True, slots=True)
class HostStats:
    """The host's own load, as nvitop's host panel shows it.

    Attributes:
        cpu_percent: All CPUs, 0-100, since the previous refresh (None on the first).
        cpu_count: Logical CPUs.
        load_avg: 1, 5 and 15 minute load averages.
        memory_used_bytes: Used memory (total minus available).
        memory_total_bytes: Total memory.
        swap_used_bytes: Used swap.
        swap_total_bytes: Total swap.
    """

    cpu_percent: float | None = None
    cpu_count: int | None = None
    load_avg: tuple[float, float, float] | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    swap_used_bytes: int | None = None
    swap_total_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class Finding:
    """A conclusion drawn from several snapshots: sharing, leaks, idle reservations, throttling.

    Attributes:
        kind: ``gpu_shared``, ``memory_growth``, ``idle_reservation``, ``cpu_throttled``,
            ``memory_pressure``, ``oom_killed``, ``restarting``, and from GPM figures
            ``gpu_idle_between_kernels``, ``memory_bandwidth_bound``, ``tensor_cores_unused``.
        subject: What it is about: ``gpu:0``, ``container:<id>``, ``pid:<pid>``.
        severity: info, warn or fail (its text, e.g. ``"warn"``, is taken as the enum).
        summary: One line for people.
        figures: The numbers behind it (rates, shares, durations), by name.
    """

    kind: str
    subject: str
    severity: FindingSeverity
    summary: str
    figures: tuple[tuple[str, float | int | str], ...] = ()

    def __post_init__(self) -> None:
        # One type whoever builds it: a plain "warn" (a test, a newer caller) becomes the enum.
        if not isinstance(self.severity, FindingSeverity):
            object.__setattr__(self, "severity", FindingSeverity(self.severity))

    def figure(self, name: str) -> float | int | str | None:
        """One figure by name, None when absent."""
        return next((v for k, v in self.figures if k == name), None)


@dataclass(frozen=True, slots=True)
class HostInfo:
    """The machine gputui runs on."""

    hostname: str
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    nvml_version: str | None = None


# Snapshot.container() is called once per process by every consumer (reports, findings, UI
# rows); a linear scan made that O(processes x containers). The index lives beside the frozen
# snapshot rather than in it, so serialisation and equality never see it; a few entries cover
# the snapshots in flight (collector thread, UI thread, an exporter scrape).
_INDEX_LOCK = threading.Lock()
_INDEX: dict[int, tuple[tuple[ContainerUsage, ...], dict[str, ContainerUsage]]] = {}
_INDEX_SIZE = 8


def _container_index(containers: tuple[ContainerUsage, ...]) -> dict[str, ContainerUsage]:
    with _INDEX_LOCK:
        hit = _INDEX.get(id(containers))
        # The tuple itself is kept in the entry, so its id cannot be reused while it is cached.
        if hit is not None and hit[0] is containers:
            return hit[1]
        index = {u.info.id: u for u in containers}
        _INDEX[id(containers)] = (containers, index)
        while len(_INDEX) > _INDEX_SIZE:
            del _INDEX[next(iter(_INDEX))]
        return index


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything gputui knows at one refresh: the single object the UI and reports consume.

    Attributes:
        taken_at: Seconds since the epoch.
        mode: ``live``, ``scenario`` or ``demo``.
        host: Host name and NVIDIA versions.
        sources: Status of each source, by name.
        gpus: One sample per GPU.
        processes: Every GPU process (one entry per process and GPU).
        containers: Every container the engine reports plus cgroup-only ones, GPU users first.
        engine: Docker engine facts, None when unreachable.
        visibility: Whether gputui can resolve host PIDs and cgroups.
        health: The latest runtime-health checks (refreshed on their own cadence).
        xid_events: Recent XID events.
        host_stats: The host's CPU, load, memory and swap.
        kernel_faults: Faults read from the kernel log (XID lines, OOM kills), attributed to
            the process and container, oldest first (bounded).
        fault_counts: Kernel faults seen since gputui started, by kind, GPU, XID, class and
            container (counters; bounded).
    """

    taken_at: float
    mode: str
    host: HostInfo
    sources: dict[str, SourceStatus] = field(default_factory=dict)
    gpus: tuple[GpuSample, ...] = ()
    processes: tuple[GpuProcess, ...] = ()
    containers: tuple[ContainerUsage, ...] = ()
    engine: EngineInfo | None = None
    visibility: Visibility = Visibility()
    health: tuple[HealthCheck, ...] = ()
    xid_events: tuple[XidEvent, ...] = ()
    host_stats: HostStats | None = None
    kernel_faults: tuple[KernelFault, ...] = ()
    fault_counts: tuple[FaultCount, ...] = ()

    def container(self, container_id: str) -> ContainerUsage | None:
        """The container with this id, or None (O(1): the id index is built once per snapshot)."""
        return _container_index(self.containers).get(container_id)

    @property
    def orphan_processes(self) -> tuple[GpuProcess, ...]:
        """GPU memory held by PIDs that do not exist (in this PID namespace)."""
        return tuple(p for p in self.processes if not p.info.exists)


def worst_status(checks: Iterable[HealthCheck]) -> HealthStatus | None:
    """The worst status among ``checks`` (``fail`` < ``warn`` < ``info`` < ``pass`` < ``skip``).

    Returns:
        None for no checks at all: nothing was judged.
    """
    return min((c.status for c in checks), key=STATUS_RANK.__getitem__, default=None)
