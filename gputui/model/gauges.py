"""The GPU field table: one row per gauge.

The JSON report, the exporter's plain gauges, the scenario format and the NVML stand-in's
answers are generated from it.
"""

from __future__ import annotations

from collections.abc import Callable

from gputui.model.gpu import GpuSample
from gputui.model.records import record

# --- The GPU gauges and every name they go by ------------------------------------------------
#
# One row per gauge of GpuSample. The JSON report's GPU section, the exporter's per-GPU gauges,
# the scenario format's keys and bounds, the scenario stand-in's NVML getters and the demo GPUs'
# defaults are generated from GPU_GAUGES, so a new gauge is a GpuSample field, one row here, its
# read in the NVML adapter and the widget that shows it.

_MIB = 1024 * 1024


@record
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


@record
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


@record
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


@record
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
        "utilization_gpu_mean",
        "GPU utilization, mean since the previous read",
        "%",
        ScenarioKey("utilization_gpu_mean", (0, 100), default_from="utilization_gpu"),
        NvmlAnswer("nvmlDeviceGetSamples", args=("NVML_GPU_UTILIZATION_SAMPLES",)),
        (
            ExportedGauge(
                "gputui_gpu_utilization_mean_percent",
                "GPU utilization, the mean of every driver sample since the previous read.",
            ),
        ),
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
