"""Scenario files: NVML replaced by a JSON description, everything else real.

A scenario is loaded into :class:`ScenarioNvml`, a stand-in with the *shape of the pynvml module*
that raises the real ``pynvml.NVMLError_*`` classes. :class:`ScenarioSource` feeds it to the
real :class:`~gputui.collect.nvml.source.NvmlSource`, so a scenario exercises exactly the code that
reads a real GPU: per-field errors, lost GPUs, init failures and time series all take one path.

The format is documented in docs/scenario-format.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from gputui.collect.nvml.source import NvmlSource, error_class, load_pynvml
from gputui.collect.standins.scenario_format import (
    ScenarioError,
    at,
    load_scenario,
    validate_scenario,
)
from gputui.model import GpuReading

__all__ = [
    "ScenarioError",
    "ScenarioNvml",
    "ScenarioSource",
    "at",
    "load_scenario",
    "validate_scenario",
]

_MIB = 1024 * 1024


class _Handle:
    """A device handle: which GPU of the scenario it points at."""

    __slots__ = ("pos",)

    def __init__(self, pos: int) -> None:
        self.pos = pos


class ScenarioNvml:
    """A pynvml-shaped module serving a scenario (the real error classes and constants).

    Its ``nvml*`` methods mirror pynvml's functions of the same names and are documented there.
    """

    NVML_CLOCK_SM: int
    NVML_CLOCK_MEM: int
    NVML_TEMPERATURE_GPU: int
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED: int
    NVML_VOLATILE_ECC: int
    NVML_PCIE_UTIL_RX_BYTES: int
    NVML_PCIE_UTIL_TX_BYTES: int

    def __init__(self, data: Mapping[str, Any]) -> None:
        real = load_pynvml()
        self._data = data
        self.step = 0
        self.NVMLError = real.NVMLError
        self.NVMLLibraryMismatchError = real.NVMLLibraryMismatchError
        for const in (
            "NVML_CLOCK_SM",
            "NVML_CLOCK_MEM",
            "NVML_TEMPERATURE_GPU",
            "NVML_MEMORY_ERROR_TYPE_UNCORRECTED",
            "NVML_VOLATILE_ECC",
            "NVML_PCIE_UTIL_RX_BYTES",
            "NVML_PCIE_UTIL_TX_BYTES",
        ):
            setattr(self, const, getattr(real, const))
        self._gpus: list[Mapping[str, Any]] = list(data.get("gpus", []))
        self._gpus.sort(key=lambda g: int(g.get("index", 0)))

    # -- helpers ---------------------------------------------------------------------------

    def _init_state(self) -> str:
        return str(at(self._data.get("nvml", "ok"), self.step))

    def _check_driver(self) -> None:
        state = self._init_state()
        if state != "ok":
            # The driver vanished mid-run: every call fails the way a fresh init would.
            raise error_class(state)()

    def _gpu(self, handle: _Handle, *fields: str) -> Mapping[str, Any]:
        self._check_driver()
        gpu = self._gpus[handle.pos]
        errors = gpu.get("errors", {})
        for key in ("*", *fields):
            err = at(errors.get(key), self.step)
            if err:
                raise error_class(err)()
        return gpu

    def _value(self, handle: _Handle, field: str, *aliases: str) -> Any:
        value = at(self._gpu(handle, field, *aliases).get(field), self.step)
        if value is None:
            raise error_class("NotSupported")()
        return value

    # -- the pynvml surface NvmlSource uses ------------------------------------------------

    def nvmlInit(self) -> None:
        state = self._init_state()
        if state != "ok":
            raise error_class(state)()

    def nvmlShutdown(self) -> None:
        return None

    def nvmlSystemGetDriverVersion(self) -> str:
        return str(self._data.get("driver_version", "580.159.04"))

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        major, _, minor = str(self._data.get("cuda_driver_version", "13.0")).partition(".")
        return int(major) * 1000 + int(minor or 0) * 10

    def nvmlSystemGetNVMLVersion(self) -> str:
        return str(self._data.get("nvml_version", "13." + self.nvmlSystemGetDriverVersion()))

    def nvmlDeviceGetCount(self) -> int:
        self._check_driver()
        return len(self._gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        return _Handle(index)

    def nvmlDeviceGetIndex(self, handle: _Handle) -> int:
        return int(self._gpus[handle.pos].get("index", handle.pos))

    def nvmlDeviceGetName(self, handle: _Handle) -> str:
        return str(self._gpu(handle, "name").get("name", "NVIDIA H200"))

    def nvmlDeviceGetUUID(self, handle: _Handle) -> str:
        default = f"GPU-00000000-0000-0000-0000-{handle.pos:012d}"
        return str(self._gpu(handle, "uuid").get("uuid", default))

    def nvmlDeviceGetUtilizationRates(self, handle: _Handle) -> SimpleNamespace:
        gpu = self._gpu(handle, "utilization", "utilization_gpu", "utilization_memory")
        util = at(gpu.get("utilization_gpu"), self.step)
        if util is None:
            raise error_class("NotSupported")()
        return SimpleNamespace(gpu=util, memory=at(gpu.get("utilization_memory", 0), self.step))

    def nvmlDeviceGetMemoryInfo(self, handle: _Handle, version: Any = None) -> SimpleNamespace:
        gpu = self._gpu(handle, "memory", "memory_used_mib", "memory_total_mib")
        total = int(at(gpu.get("memory_total_mib", 143771), self.step) * _MIB)
        used = int(at(gpu.get("memory_used_mib", 0), self.step) * _MIB)
        return SimpleNamespace(total=total, used=used, free=max(0, total - used))

    def nvmlDeviceGetTemperature(self, handle: _Handle, sensor: int) -> int:
        return int(self._value(handle, "temperature_c"))

    def nvmlDeviceGetPowerUsage(self, handle: _Handle) -> int:
        return int(self._value(handle, "power_w") * 1000)

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: _Handle) -> int:
        return int(self._value(handle, "power_limit_w") * 1000)

    def nvmlDeviceGetClockInfo(self, handle: _Handle, clock: int) -> int:
        field = "clock_sm_mhz" if clock == self.NVML_CLOCK_SM else "clock_mem_mhz"
        return int(self._value(handle, field, "clocks"))

    def nvmlDeviceGetMaxClockInfo(self, handle: _Handle, clock: int) -> int:
        field = "clock_sm_max_mhz" if clock == self.NVML_CLOCK_SM else "clock_mem_max_mhz"
        return int(self._value(handle, field, "max_clocks"))

    def nvmlDeviceGetPerformanceState(self, handle: _Handle) -> int:
        return int(self._value(handle, "pstate"))

    def nvmlDeviceGetFanSpeed(self, handle: _Handle) -> int:
        return int(self._value(handle, "fan_speed"))

    def nvmlDeviceGetPcieThroughput(self, handle: _Handle, counter: int) -> int:
        field = "pcie_rx_kbps" if counter == self.NVML_PCIE_UTIL_RX_BYTES else "pcie_tx_kbps"
        return int(self._value(handle, field, "pcie"))

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: _Handle) -> int:
        return int(self._value(handle, "throttle_reasons"))

    def nvmlDeviceGetEccMode(self, handle: _Handle) -> tuple[int, int]:
        gpu = self._gpu(handle, "ecc_mode")
        current = at(gpu.get("ecc_mode_current"), self.step)
        if current is None:
            raise error_class("NotSupported")()
        pending = at(gpu.get("ecc_mode_pending", current), self.step)
        return int(current), int(pending)

    def nvmlDeviceGetTotalEccErrors(self, handle: _Handle, kind: int, counter: int) -> int:
        return int(self._value(handle, "ecc_uncorrected_volatile"))

    def nvmlDeviceGetRemappedRows(self, handle: _Handle) -> tuple[int, int, int, int]:
        gpu = self._gpu(handle, "remapped_rows")
        pending = at(gpu.get("remapped_rows_pending"), self.step)
        if pending is None:
            raise error_class("NotSupported")()
        failure = at(gpu.get("remapped_rows_failure", False), self.step)
        return 0, 0, int(pending), int(failure)

    def nvmlDeviceGetEncoderUtilization(self, handle: _Handle) -> tuple[int, int]:
        return int(self._value(handle, "encoder_util")), 167000

    def nvmlDeviceGetDecoderUtilization(self, handle: _Handle) -> tuple[int, int]:
        return int(self._value(handle, "decoder_util")), 167000

    def nvmlDeviceGetPersistenceMode(self, handle: _Handle) -> int:
        return int(self._value(handle, "persistence_mode"))

    def nvmlDeviceGetMigMode(self, handle: _Handle) -> tuple[int, int]:
        gpu = self._gpu(handle, "mig_mode")
        current = at(gpu.get("mig_mode_current"), self.step)
        if current is None:
            raise error_class("NotSupported")()
        return int(current), int(at(gpu.get("mig_mode_pending", current), self.step))

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: _Handle) -> int:
        return 0  # MIG instances are not modelled by scenario files

    def _procs(self, handle: _Handle, kinds: tuple[str, ...]) -> list[SimpleNamespace]:
        gpu = self._gpu(handle, "processes")
        out = []
        for proc in gpu.get("processes", []):
            if proc.get("type", "C") in kinds:
                used = at(proc.get("used_memory_mib", 0), self.step)
                out.append(
                    SimpleNamespace(
                        pid=proc["pid"], usedGpuMemory=None if used is None else int(used * _MIB)
                    )
                )
        return out

    def nvmlDeviceGetComputeRunningProcesses(self, handle: _Handle) -> list[SimpleNamespace]:
        return self._procs(handle, ("C", "C+G"))

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: _Handle) -> list[SimpleNamespace]:
        return self._procs(handle, ("G", "C+G"))

    def nvmlDeviceGetProcessUtilization(self, handle: _Handle, since: int) -> list[SimpleNamespace]:
        gpu = self._gpu(handle, "process_utilization")
        samples = []
        for proc in gpu.get("processes", []):
            sm = at(proc.get("sm_util"), self.step)
            if sm:  # NVML only returns processes that were active
                mem = at(proc.get("mem_util", 0), self.step) or 0
                samples.append(
                    SimpleNamespace(
                        pid=proc["pid"],
                        timeStamp=since + 1,
                        smUtil=sm,
                        memUtil=mem,
                        encUtil=0,
                        decUtil=0,
                    )
                )
        if not samples:
            raise error_class("NotFound")()
        return samples

    def events_at(self, step: int) -> list[tuple[int, int]]:
        """(gpu, xid) pairs the scenario injects at refresh ``step``."""
        return [
            (int(e.get("gpu", 0)), int(e["xid"]))
            for e in self._data.get("xid_events", [])
            if int(e.get("at_refresh", 0)) == step
        ]


class ScenarioSource:
    """A :class:`GpuSource` that plays a scenario through the real NVML adapter.

    Each :meth:`read` is one refresh: time series advance by one element per read.
    """

    def __init__(self, data: Mapping[str, Any], wall: Callable[[], float] | None = None) -> None:
        import time

        self.nvml = ScenarioNvml(data)
        self._wall = wall or time.time
        # background=False: slow reads happen inline on every read, so a scenario is deterministic.
        self._source = NvmlSource(
            self.nvml,
            background=False,
            slow_interval=0.0,
            medium_interval=0.0,
            retry_interval=0.0,
            remember_unsupported=False,
        )
        self._xids: list[tuple[int, int, float]] = []

    @classmethod
    def from_file(cls, path: Path) -> ScenarioSource:
        """Load and validate ``path``.

        Raises:
            ScenarioError: the file is unreadable or invalid.
        """
        return cls(load_scenario(path))

    def read(self) -> GpuReading:
        """One refresh of the scenario."""
        from dataclasses import replace

        from gputui.model import XidEvent

        step = self.nvml.step
        for gpu, xid in self.nvml.events_at(step):
            self._xids.append((gpu, xid, self._wall()))
        reading = self._source.read()
        self.nvml.step = step + 1
        if self._xids:
            events = tuple(XidEvent(g, x, t) for g, x, t in self._xids[-64:])
            reading = replace(reading, xid_events=events)
        return reading

    def close(self) -> None:
        """Nothing to release."""
        self._source.close()
