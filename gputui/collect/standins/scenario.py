"""Scenario files: NVML replaced by a JSON description, everything else real.

A scenario is loaded into :class:`ScenarioNvml`, a stand-in with the *shape of the pynvml module*
that raises the real ``pynvml.NVMLError_*`` classes. :class:`ScenarioSource` feeds it to the
real :class:`~gputui.collect.nvml.source.NvmlSource`, so a scenario exercises exactly the code that
reads a real GPU: per-field errors, lost GPUs, init failures and time series all take one path.

The format is documented in docs/scenario-format.md.
"""

from __future__ import annotations

import ctypes
import math
import types
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from gputui.collect.nvml.early import load_pynvml
from gputui.collect.nvml.source import NvmlSource, error_class
from gputui.collect.standins.scenario_format import (
    ScenarioError,
    at,
    load_scenario,
    validate_scenario,
)
from gputui.model.gauges import GPU_GAUGES, GpuGauge, ScenarioKey
from gputui.model.gpu import MIG_GPM_FIELDS, GpuReading

__all__ = [
    "ScenarioError",
    "ScenarioNvml",
    "ScenarioSource",
    "at",
    "load_scenario",
    "validate_scenario",
]

_MIB = 1024 * 1024
#: Process lists are built once per phase of their time series and replayed after that (their
#: values repeat every least-common-multiple of the series' lengths); beyond this many phases
#: they are built on every call.
_MAX_PHASES = 64


def _period(listed: Sequence[Mapping[str, Any]], keys: tuple[str, ...]) -> int | None:
    """After how many steps the ``keys`` time series of ``listed`` repeat; None: too many."""
    period = 1
    for proc in listed:
        for key in keys:
            value = proc.get(key)
            if isinstance(value, list) and value:
                period = period * len(value) // math.gcd(period, len(value))
                if period > _MAX_PHASES:
                    return None
    return period


class _Handle:
    """A device handle: which GPU of the scenario it points at."""

    __slots__ = ("pos",)

    def __init__(self, pos: int) -> None:
        self.pos = pos


class _MigHandle(_Handle):
    """A MIG device handle: a GPU of the scenario and one of its ``mig_instances``."""

    __slots__ = ("slot",)

    def __init__(self, pos: int, slot: int) -> None:
        super().__init__(pos)
        self.slot = slot


class _GpuInstance:
    """A GPU instance handle (``nvmlDeviceGetGpuInstanceById``)."""

    __slots__ = ("gi_id",)

    def __init__(self, gi_id: int) -> None:
        self.gi_id = gi_id


#: pynvml's "no instance" id in the process records of a GPU without MIG.
_NO_INSTANCE = 0xFFFFFFFF
#: The getter of the field table's GPM rows.
_GPM = "nvmlGpmMetricsGet"
#: The getter of the utilization mean: a list of samples, not a reply shape of the table.
_SAMPLES = "nvmlDeviceGetSamples"


def _getter(name: str, gauges: tuple[GpuGauge, ...]) -> Callable[..., Any]:
    """The stand-in's ``name``: pynvml's getter of ``gauges``, answered from the scenario."""

    def getter(self: ScenarioNvml, handle: _Handle, *args: Any, **_options: Any) -> Any:
        # Options such as pynvml's memory-info ``version`` change no scenario value.
        return self._answer(name, gauges, handle, args)

    # NvmlSource names a getter by __name__ (unsupported calls, binding problems).
    getter.__name__ = name
    getter.__qualname__ = f"ScenarioNvml.{name}"
    return getter


#: Attributes of a struct reply that follow from its gauges (pynvml's memory info has ``free``).
_DERIVED_PARTS: dict[str, Callable[[SimpleNamespace], dict[str, int]]] = {
    "nvmlDeviceGetMemoryInfo": lambda reply: {"free": max(0, reply.total - reply.used)},
}


class ScenarioNvml:
    """A pynvml-shaped module serving a scenario (the real error classes and constants).

    Its ``nvml*`` methods mirror pynvml's functions of the same names and are documented there.
    The getters of GPU gauges are made from the field table
    (:data:`gputui.model.gauges.GPU_GAUGES`):
    each answers its gauges' scenario keys in the reply shape the table gives, fails with the
    error a scenario sets on a gauge's key or on the getter's group, and with ``NotSupported``
    for a gauge the scenario leaves out (unless the key has a default).

    Args:
        data: A validated scenario.
        gauges: The field table to answer from.
    """

    def __init__(self, data: Mapping[str, Any], gauges: Sequence[GpuGauge] = GPU_GAUGES) -> None:
        real = load_pynvml()
        self._data = data
        self.step = 0
        self.NVMLError = real.NVMLError
        self.NVMLLibraryMismatchError = real.NVMLLibraryMismatchError
        self._keys = {g.scenario.key: g.scenario for g in gauges}
        self._args: dict[str, tuple[Any, ...]] = {}
        for gauge in gauges:
            for const in gauge.nvml.args:
                # The adapter passes the module's constants: the stand-in's are the real values.
                setattr(self, const, getattr(real, const))
            self._args[gauge.field] = tuple(getattr(real, const) for const in gauge.nvml.args)
        by_getter: dict[str, list[GpuGauge]] = {}
        for gauge in gauges:
            by_getter.setdefault(gauge.nvml.getter, []).append(gauge)
        # GPM metrics are no getter of their own: nvmlGpmMetricsGet answers them from a pair.
        self._gpm_gauges = {int(getattr(real, g.nvml.args[0])): g for g in by_getter.pop(_GPM, [])}
        self._samples_gauges = by_getter.pop(_SAMPLES, [])
        self.NVML_VALUE_TYPE_UNSIGNED_INT = real.NVML_VALUE_TYPE_UNSIGNED_INT
        for getter, read in by_getter.items():
            setattr(self, getter, types.MethodType(_getter(getter, tuple(read)), self))
        # The real structures, so the adapter fills what NVML reads (versions, sizes, names).
        self.c_nvmlGpmMetricsGet_t = real.c_nvmlGpmMetricsGet_t
        self.NVML_GPM_METRICS_GET_VERSION = real.NVML_GPM_METRICS_GET_VERSION
        self.NVML_SUCCESS = real.NVML_SUCCESS
        self._sample_type = real.c_nvmlGpmSample_t
        #: Live GPM samples by address: (buffer kept alive, (pos, gi id or None, step) or None).
        self._gpm_samples: dict[int, tuple[Any, tuple[int, int | None, int] | None]] = {}
        self._error_codes = {
            name: int(getattr(real, const))
            for name, const in (
                ("NotSupported", "NVML_ERROR_NOT_SUPPORTED"),
                ("NoPermission", "NVML_ERROR_NO_PERMISSION"),
                ("GpuIsLost", "NVML_ERROR_GPU_IS_LOST"),
                ("Unknown", "NVML_ERROR_UNKNOWN"),
                ("Timeout", "NVML_ERROR_TIMEOUT"),
            )
        }
        self._gpus: list[Mapping[str, Any]] = list(data.get("gpus", []))
        #: Process replies per (list, query, phase): the same scenario answers alike each period.
        self._replies: dict[tuple[Any, ...], list[SimpleNamespace]] = {}
        self._periods: dict[tuple[int, tuple[str, ...]], int | None] = {}
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

    def _scenario_value(self, gpu: Mapping[str, Any], key: ScenarioKey) -> Any:
        """A gauge's value at this step: the scenario's, else its default (None: unsupported)."""
        if key.key in gpu:
            return at(gpu[key.key], self.step)
        if key.default_from is not None:
            return self._scenario_value(gpu, self._keys[key.default_from])
        return key.default

    def _answer(self, getter: str, gauges: tuple[GpuGauge, ...], handle: _Handle, args: Any) -> Any:
        """Answer ``getter(handle, *args)`` for the ``gauges`` it reads."""
        if isinstance(handle, _MigHandle):
            return self._mig_answer(getter, handle)
        selected = any(g.nvml.args for g in gauges)
        asked = [g for g in gauges if not selected or self._args[g.field] == tuple(args)]
        if not asked:
            # A sensor, clock or counter the scenario does not describe.
            raise error_class("NotSupported")()
        groups = dict.fromkeys(g.nvml.group for g in asked if g.nvml.group is not None)
        gpu = self._gpu(handle, *(g.scenario.key for g in asked), *groups)
        values = []
        for gauge in asked:
            value = self._scenario_value(gpu, gauge.scenario)
            if value is None:
                raise error_class("NotSupported")()
            values.append((gauge.nvml.part, int(value * gauge.nvml.scale)))
        shape = asked[0].nvml
        if shape.part is None:
            return values[0][1]
        if isinstance(shape.part, str):
            reply = SimpleNamespace(**{str(part): value for part, value in values})
            derived = _DERIVED_PARTS.get(getter)
            if derived is not None:
                vars(reply).update(derived(reply))
            return reply
        positions = list(shape.reply)
        for part, value in values:
            if isinstance(part, int):
                positions[part] = value
        return tuple(positions)

    # -- MIG -------------------------------------------------------------------------------

    def _devices(self, pos: int) -> list[Mapping[str, Any]]:
        """The MIG devices of a GPU: its instances that have a compute instance (MIG on only)."""
        gpu = self._gpus[pos]
        if not at(gpu.get("mig_mode_current", False), self.step):
            return []
        return [m for m in gpu.get("mig_instances", []) if m.get("ci_id", 0) is not None]

    def _mig(self, handle: _MigHandle, *fields: str) -> Mapping[str, Any]:
        self._gpu(handle, "mig_instances", *fields)
        devices = self._devices(handle.pos)
        if handle.slot >= len(devices):  # the layout changed under a cached handle
            raise error_class("InvalidArgument")()
        return devices[handle.slot]

    def _mig_answer(self, getter: str, handle: _MigHandle) -> Any:
        """A gauge getter on a MIG device: memory is the instance's, the rest unsupported.

        NVML measures no utilization, power, clocks or temperature per MIG device.
        """
        if getter != "nvmlDeviceGetMemoryInfo":
            raise error_class("NotSupported")()
        inst = self._mig(handle, "memory")
        total = int(at(inst.get("memory_total_mib", 0), self.step) * _MIB)
        used = int(at(inst.get("memory_used_mib", 0), self.step) * _MIB)
        return SimpleNamespace(total=total, used=used, free=max(0, total - used))

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: _Handle) -> int:
        gpu = self._gpu(handle, "mig_instances")
        if "mig_mode_current" not in gpu:
            raise error_class("NotSupported")()
        # An H200 without MIG answers 0, as measured; with MIG on, its 7 slots.
        return max(7, len(self._devices(handle.pos))) if self._devices(handle.pos) else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: _Handle, index: int) -> _MigHandle:
        self._gpu(handle, "mig_instances")
        if not 0 <= index < len(self._devices(handle.pos)):
            raise error_class("NotFound")()
        return _MigHandle(handle.pos, index)

    def nvmlDeviceIsMigDeviceHandle(self, handle: _Handle) -> int:
        return int(isinstance(handle, _MigHandle))

    def nvmlDeviceGetGpuInstanceId(self, handle: _Handle) -> int:
        if not isinstance(handle, _MigHandle):
            raise error_class("InvalidArgument")()
        return int(self._mig(handle)["gi_id"])

    def nvmlDeviceGetComputeInstanceId(self, handle: _Handle) -> int:
        if not isinstance(handle, _MigHandle):
            raise error_class("InvalidArgument")()
        return int(self._mig(handle).get("ci_id", 0))

    def nvmlDeviceGetAttributes(self, handle: _Handle) -> SimpleNamespace:
        if not isinstance(handle, _MigHandle):
            raise error_class("NotSupported")()
        inst = self._mig(handle)
        if "sm_count" not in inst and "slices" not in inst:
            raise error_class("NotSupported")()
        return SimpleNamespace(
            multiprocessorCount=inst.get("sm_count", 0),
            gpuInstanceSliceCount=inst.get("slices", 0),
            computeInstanceSliceCount=inst.get("slices", 0),
            memorySizeMB=int(at(inst.get("memory_total_mib", 0), self.step)),
        )

    def nvmlDeviceGetGpuInstanceById(self, handle: _Handle, gi_id: int) -> _GpuInstance:
        gpu = self._gpu(handle, "mig_instances")
        if not at(gpu.get("mig_mode_current", False), self.step):
            raise error_class("NotSupported")()
        if not any(m["gi_id"] == gi_id for m in gpu.get("mig_instances", [])):
            raise error_class("NotFound")()
        return _GpuInstance(gi_id)

    # -- GPM -------------------------------------------------------------------------------

    def _gpm_supported(self, gpu: Mapping[str, Any]) -> bool:
        """A GPU supports GPM when its scenario gives any GPM figure (a Hopper GPU)."""
        return any(g.scenario.key in gpu for g in self._gpm_gauges.values()) or any(
            key in inst for inst in gpu.get("mig_instances", []) for key in MIG_GPM_FIELDS
        )

    @property
    def live_gpm_samples(self) -> int:
        """GPM samples allocated and not freed (a leak test's count)."""
        return len(self._gpm_samples)

    def nvmlGpmQueryDeviceSupport(self, handle: _Handle) -> SimpleNamespace:
        gpu = self._gpu(handle)
        return SimpleNamespace(version=1, isSupportedDevice=int(self._gpm_supported(gpu)))

    def nvmlGpmSampleAlloc(self) -> Any:
        buffer = ctypes.create_string_buffer(8)
        self._gpm_samples[ctypes.addressof(buffer)] = (buffer, None)
        return ctypes.cast(buffer, self._sample_type)

    def _gpm_slot(self, sample: Any) -> int:
        address = ctypes.cast(sample, ctypes.c_void_p).value
        if address is None or address not in self._gpm_samples:
            raise error_class("InvalidArgument")()  # freed, or never allocated
        return address

    def nvmlGpmSampleFree(self, sample: Any) -> None:
        del self._gpm_samples[self._gpm_slot(sample)]

    def _gpm_record(self, handle: _Handle, gi: int | None, sample: Any) -> Any:
        gpu = self._gpu(handle, "gpm_sample")
        if not self._gpm_supported(gpu):
            raise error_class("NotSupported")()
        slot = self._gpm_slot(sample)
        self._gpm_samples[slot] = (self._gpm_samples[slot][0], (handle.pos, gi, self.step))
        return sample

    def nvmlGpmSampleGet(self, handle: _Handle, sample: Any) -> Any:
        gpu = self._gpus[handle.pos]
        if at(gpu.get("mig_mode_current", False), self.step) and self._devices(handle.pos):
            # As on a MIG-enabled H200: GPM samples are per GPU instance.
            self._gpu(handle)
            raise error_class("NotSupported")()
        return self._gpm_record(handle, None, sample)

    def nvmlGpmMigSampleGet(self, handle: _Handle, gpu_instance_id: int, sample: Any) -> Any:
        gis = {int(m["gi_id"]) for m in self._devices(handle.pos)}
        if gpu_instance_id not in gis:
            self._gpu(handle)
            raise error_class("NotFound")()
        return self._gpm_record(handle, gpu_instance_id, sample)

    def nvmlGpmMetricsGet(self, request: Any) -> Any:
        """The figures of the pair's second sample's step, each metric with its return code."""
        first = self._gpm_samples[self._gpm_slot(request.sample1)][1]
        second = self._gpm_samples[self._gpm_slot(request.sample2)][1]
        if first is None or second is None or first[:2] != second[:2]:
            raise error_class("InvalidArgument")()
        pos, gi, step = second
        gpu = self._gpu(_Handle(pos), "gpm")
        errors = gpu.get("errors", {})
        source: Mapping[str, Any] = gpu
        if gi is not None:
            source = next(m for m in self._devices(pos) if int(m["gi_id"]) == gi)
        for i in range(int(request.numMetrics)):
            metric = request.metrics[i]
            gauge = self._gpm_gauges.get(int(metric.metricId))
            key = None if gauge is None else (gauge.field if gi is not None else gauge.scenario.key)
            err = None if key is None else at(errors.get(key), step)
            value = None if key is None else at(source.get(key), step)
            if err:
                metric.nvmlReturn = self._error_codes[str(err)]
            elif value is None:
                metric.nvmlReturn = self._error_codes["NotSupported"]
            else:
                metric.nvmlReturn = self.NVML_SUCCESS
                metric.value = float(value)
        return request

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
        name = str(self._gpu(handle, "name").get("name", "NVIDIA H200"))
        if isinstance(handle, _MigHandle):
            profile = self._mig(handle).get("profile")
            return f"{name} MIG {profile}" if profile else f"{name} MIG"
        return name

    def nvmlDeviceGetUUID(self, handle: _Handle) -> str:
        if isinstance(handle, _MigHandle):
            inst = self._mig(handle, "uuid")
            default = f"MIG-00000000-0000-0000-{handle.pos:04d}-{handle.slot:012d}"
            return str(inst.get("uuid", default))
        default = f"GPU-00000000-0000-0000-0000-{handle.pos:012d}"
        return str(self._gpu(handle, "uuid").get("uuid", default))

    def nvmlDeviceGetPciInfo(self, handle: _Handle) -> SimpleNamespace:
        bus_id = self._gpu(handle, "pci_bus_id").get("pci_bus_id")
        if bus_id is None:
            raise error_class("NotSupported")()
        return SimpleNamespace(busId=str(bus_id))

    def _procs(self, handle: _Handle, kinds: tuple[str, ...]) -> list[SimpleNamespace]:
        gpu = self._gpu(handle, "processes")
        listed = gpu.get("processes", [])
        ids = (_NO_INSTANCE, _NO_INSTANCE)
        if isinstance(handle, _MigHandle):
            inst = self._mig(handle)
            listed = inst.get("processes", [])
            ids = (int(inst["gi_id"]), int(inst.get("ci_id", 0)))
        memo = self._memo_key(listed, ("used_memory_mib",), (kinds, ids))
        cached = None if memo is None else self._replies.get(memo)
        if cached is not None:
            return list(cached)
        out = []
        for proc in listed:
            if proc.get("type", "C") in kinds:
                used = at(proc.get("used_memory_mib", 0), self.step)
                out.append(
                    SimpleNamespace(
                        pid=proc["pid"],
                        usedGpuMemory=None if used is None else int(used * _MIB),
                        gpuInstanceId=ids[0],
                        computeInstanceId=ids[1],
                    )
                )
        if memo is not None:
            self._replies[memo] = out
            return list(out)
        return out

    def _memo_key(
        self, listed: Sequence[Mapping[str, Any]], keys: tuple[str, ...], query: tuple[Any, ...]
    ) -> tuple[Any, ...] | None:
        """Where a reply built from ``listed`` at this step is kept; None: not kept.

        The replies' objects are shared between calls: the adapter reads them and keeps none.
        """
        if not listed:  # a default ``[]`` is a new list per call: its id names nothing
            return None
        where = (id(listed), keys)
        if where not in self._periods:
            self._periods[where] = _period(listed, keys)
        period = self._periods[where]
        if period is None:
            return None
        return (*where, query, self.step % period)

    def nvmlDeviceGetSamples(
        self, handle: _Handle, sampling_type: int, since: int
    ) -> tuple[int, list[SimpleNamespace]]:
        gauges = [g for g in self._samples_gauges if self._args[g.field] == (sampling_type,)]
        if isinstance(handle, _MigHandle) or not gauges:
            raise error_class("NotSupported")()
        gauge = gauges[0]
        value = self._scenario_value(self._gpu(handle, gauge.scenario.key), gauge.scenario)
        if value is None:
            raise error_class("NotSupported")()
        # One sample newer than ``since``: the mean of the samples is the scenario's value.
        sample = SimpleNamespace(timeStamp=since + 1, sampleValue=SimpleNamespace(uiVal=int(value)))
        return self.NVML_VALUE_TYPE_UNSIGNED_INT, [sample]

    def nvmlDeviceGetComputeRunningProcesses(self, handle: _Handle) -> list[SimpleNamespace]:
        return self._procs(handle, ("C", "C+G"))

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: _Handle) -> list[SimpleNamespace]:
        return self._procs(handle, ("G", "C+G"))

    def nvmlDeviceGetMPSComputeRunningProcesses(self, handle: _Handle) -> list[SimpleNamespace]:
        return self._procs(handle, ("M+C",))

    def nvmlDeviceGetProcessUtilization(self, handle: _Handle, since: int) -> list[SimpleNamespace]:
        gpu = self._gpu(handle, "process_utilization")
        listed = gpu.get("processes", [])
        memo = self._memo_key(listed, ("sm_util", "mem_util"), ("util",))
        cached = None if memo is None else self._replies.get(memo)
        if cached is not None:
            for sample in cached:  # NVML answers samples newer than ``since``
                sample.timeStamp = since + 1
            if not cached:
                raise error_class("NotFound")()
            return list(cached)
        samples = []
        for proc in listed:
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
        if memo is not None:
            self._replies[memo] = samples
        if not samples:
            raise error_class("NotFound")()
        return list(samples)

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

    def __init__(
        self,
        data: Mapping[str, Any],
        wall: Callable[[], float] | None = None,
        *,
        live_cadences: bool = False,
    ) -> None:
        """Play ``data`` (a checked scenario).

        Args:
            data: The scenario.
            wall: Wall clock for XID time stamps.
            live_cadences: Read as the live monitor reads a real driver: the slow lane
                (per-process utilization, PCIe) and the GPM lane on their own threads at the
                live intervals, slow-changing facts every few seconds. Off (the default),
                every read reads everything inline, so that a scenario is deterministic.
        """
        import time

        self.nvml = ScenarioNvml(data)
        self._wall = wall or time.time
        if live_cadences:
            # The live defaults, but no 100 ms GPM gap: a stand-in's counters need none.
            self._source = NvmlSource(self.nvml, gpm_min_gap=0.0)
        else:
            self._source = NvmlSource(
                self.nvml,
                background=False,
                slow_interval=0.0,
                medium_interval=0.0,
                retry_interval=0.0,
                remember_unsupported=False,
                # A scenario's GPM pair is two steps, not 100 ms of counters: no gap to wait for.
                gpm_interval=0.0,
                gpm_min_gap=0.0,
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

        from gputui.model.gpu import XidEvent

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
        """Stop the adapter (and, with live cadences, its lanes' threads)."""
        self._source.close()
