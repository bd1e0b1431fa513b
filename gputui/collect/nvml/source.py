"""The NVML source: every read of ``pynvml`` (``nvidia-ml-py``, loaded by ``early.load_pynvml``).

Costs measured on an H200 decide the structure (see docs/performance.md):

* core gauges (util, memory, temperature, power, clocks, reasons, process lists) cost microseconds
  and are read on every refresh;
* slow-changing facts (persistence, ECC, remapped rows, MIG mode, fan, power cap) are re-read on a
  medium cadence, like nvitop's 5 s TTL; so is the MIG layout (handles, ids, profiles), and only
  while MIG is enabled: a GPU without MIG costs one ``nvmlDeviceGetMigMode`` per medium tick (none
  once it answered ``NotSupported``), while MIG memory and process lists are read every refresh;
* PCIe throughput (≈21 ms per direction) and per-process utilization (≈2 ms) run on a *slow lane*:
  a background thread with its own cadence, so a refresh never waits for them. The same thread
  waits for XID events between slow ticks;
* GPM figures (SM activity, tensor and DRAM use; Hopper+) come from sample pairs taken by the
  *GPM lane* (``gpm.py``), a thread of its own with a 1 s cadence: a refresh picks up the last
  pair's figures and never waits for a GPM call;
* the total-energy counter (≈3.3 ms a call on H200) is read on the GPM lane's cadence too, and
  power is integrated into joules at every refresh (the figure for GPUs without the counter).

Every per-field failure becomes ``None``; ``NotSupported`` is remembered per (GPU, call) so the
source stops asking. ``GpuIsLost`` marks the whole GPU lost without touching the others.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from gputui.collect.nvml.early import load_pynvml
from gputui.collect.nvml.gpm import MIN_GAP_S, GpmLane
from gputui.collect.nvml.slow_lane import GpuLost, NvmlGone, SlowLane, error_name
from gputui.model.gpu import (
    GPM_MIG,
    MIG_GPM_FIELDS,
    GpuProcessSample,
    GpuReading,
    GpuSample,
    MigInstance,
)
from gputui.model.status import SourceStatus

__all__ = ["INIT_FIXES", "NvmlSource", "error_class", "error_name"]

T = TypeVar("T")

#: The profile at the end of a MIG device's name: ``NVIDIA H200 MIG 1g.18gb`` → ``1g.18gb``.
_MIG_PROFILE_RE = re.compile(r"MIG\s+(\S+)\s*$")
#: NVML's "no GPU/compute instance" id in process records of a GPU without MIG.
_NO_INSTANCE = 0xFFFFFFFF
#: GPU instance ids NVML hands out (A100/H100/H200: at most 7 instances, ids below 15).
_MAX_GPU_INSTANCE_ID = 14


#: Fix texts for NVML init failures, by error name.
INIT_FIXES: dict[str, str] = {
    "LibraryNotFound": (
        "NVIDIA driver not found: install the NVIDIA driver. Inside a container, run with "
        "--gpus all (or --runtime=nvidia) and NVIDIA_DRIVER_CAPABILITIES including utility."
    ),
    "DriverNotLoaded": (
        "The NVIDIA kernel module is not loaded: load it (modprobe nvidia) or reboot."
    ),
    "LibRmVersionMismatch": (
        "Driver/library version mismatch: the driver was upgraded but the old kernel module is "
        "still loaded. Reboot (or unload and reload the nvidia modules)."
    ),
    "NoPermission": "No permission to use NVML: check the permissions of /dev/nvidia*.",
    "Unknown": (
        "NVML failed with an unknown error. In a container this often follows a systemd "
        "daemon-reload with the systemd cgroup driver: restart the container (see the Health tab)."
    ),
}


#: Errors that mean NVML as a whole is gone (driver unloaded or replaced), not one field.
_SOURCE_ERRORS = frozenset(
    {"Uninitialized", "DriverNotLoaded", "LibraryNotFound", "LibRmVersionMismatch"}
)


def error_class(name: str) -> type[Exception]:
    """The real ``pynvml.NVMLError_<name>`` class, for stand-ins that must raise real errors."""
    cls: type[Exception] = getattr(load_pynvml(), f"NVMLError_{name}")
    return cls


class NvmlSource:
    """Reads every GPU through NVML.

    Args:
        nvml: A pynvml-shaped module; the real one when None (tests inject stand-ins that raise
            the real ``pynvml.NVMLError_*`` classes).
        clock: Monotonic clock for cadences.
        wall: Wall clock for XID timestamps.
        slow_interval: Seconds between slow reads: the slow lane's (PCIe throughput, process
            utilization) and the GPM lane's total-energy counter.
        medium_interval: Seconds between re-reads of slow-changing facts.
        background: Run the slow lane and XID waits in a daemon thread. When False (``--once``,
            tests) slow reads run inline when due, so one read is complete.
        retry_interval: Seconds between init attempts after NVML failed to initialise.
        gpm: Read GPM figures (off: the benchmark's "without GPM" cycle).
        gpm_interval: Seconds between GPM samples (each pair spans one interval).
        gpm_min_gap: The least spacing of a GPM pair (NVML's 100 ms; 0 for a stand-in).
        gpm_sleep: How inline mode waits for the second sample of its first pair.
    """

    def __init__(
        self,
        nvml: Any = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        slow_interval: float = 5.0,
        medium_interval: float = 5.0,
        background: bool = True,
        retry_interval: float = 10.0,
        remember_unsupported: bool = True,
        pcie: bool = True,
        gpm: bool = True,
        gpm_interval: float = 1.0,
        gpm_min_gap: float = MIN_GAP_S,
        gpm_sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._nvml = nvml
        self._clock = clock
        self._wall = wall
        self._slow_interval = slow_interval
        self._medium_interval = medium_interval
        self._background = background
        self._retry_interval = retry_interval
        self._remember_unsupported = remember_unsupported
        self._pcie = pcie
        self._initialised = False
        self._init_status = SourceStatus("nvml", ok=False, error="not initialised", kind="Pending")
        self._next_init = 0.0
        self._handles: list[Any] = []
        self._versions: tuple[str | None, str | None, str | None] = (None, None, None)
        self._static: dict[int, dict[str, Any]] = {}
        self._medium: dict[int, dict[str, Any]] = {}
        self._medium_due: dict[int, float] = {}
        self._unsupported: set[tuple[int, str]] = set()
        self._binding_problems: set[str] = set()
        self._slow: SlowLane | None = None
        self._gpm_on = gpm
        self._gpm_interval = gpm_interval
        self._gpm_min_gap = gpm_min_gap
        self._gpm_sleep = gpm_sleep
        self._gpm: GpmLane | None = None
        #: Per GPU: (monotonic time, watts) of the last power reading and the joules so far.
        self._energy: dict[int, tuple[float, float, float]] = {}

    # -- lifecycle -------------------------------------------------------------------------

    def _module(self) -> Any:
        if self._nvml is None:
            self._nvml = load_pynvml()
        return self._nvml

    def _ensure_init(self) -> bool:
        if self._initialised:
            return True
        now = self._clock()
        if now < self._next_init:
            return False
        self._next_init = now + self._retry_interval
        nv = self._module()
        try:
            nv.nvmlInit()
            count = nv.nvmlDeviceGetCount()
            self._handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except nv.NVMLError as exc:
            kind = error_name(exc)
            self._init_status = SourceStatus(
                "nvml", ok=False, error=str(exc), kind=kind, fix=INIT_FIXES.get(kind)
            )
            return False
        except OSError as exc:  # a broken libnvidia-ml.so can fail in ctypes itself
            self._init_status = SourceStatus("nvml", ok=False, error=str(exc), kind="OSError")
            return False
        self._versions = (
            self._system(nv.nvmlSystemGetDriverVersion),
            _cuda_version(self._system(nv.nvmlSystemGetCudaDriverVersion)),
            self._system(nv.nvmlSystemGetNVMLVersion),
        )
        self._static.clear()
        self._medium.clear()
        self._medium_due.clear()
        self._initialised = True
        self._init_status = SourceStatus("nvml", ok=True)
        if self._slow is None:
            self._slow = SlowLane(
                nv,
                self._q,
                lambda: self._handles,
                self._clock,
                self._wall,
                self._slow_interval,
                pcie=self._pcie,
            )
            if self._background:
                self._slow.start()
        if self._gpm_on and self._gpm is None:
            self._gpm = GpmLane(
                nv,
                self._clock,
                self._gpm_interval,
                min_gap=self._gpm_min_gap,
                sleep=self._gpm_sleep,
                energy_interval=self._slow_interval,
            )
            if self._background:
                self._gpm.start()
        return True

    def warm(self) -> None:
        """Start NVML now and, for inline reads, take the first GPM samples.

        A one-shot calls it from the command line's start (:class:`~gputui.collect.nvml.early.
        EarlyNvml`), so that the driver's start and the 100 ms a GPM pair spans pass while the
        rest of the program loads; :meth:`read` then finds both done.
        """
        if self._ensure_init() and not self._background:
            self._first_gpm_samples()

    def _first_gpm_samples(self) -> None:
        """Inline mode: the first GPM samples, once, before any core read.

        Taken before the GPUs are read, so that most of NVML's 100 ms between a pair's samples
        passes while they are.
        """
        lane = self._gpm
        if lane is not None and not lane.sampled:
            lane.set_targets(self._gpm_targets(None))
            lane.tick()

    def close(self) -> None:
        """Stop the slow lane and shut NVML down (idempotent)."""
        if self._slow is not None:
            self._slow.stop()
            self._slow = None
        if self._gpm is not None:
            self._gpm.stop()  # frees every GPM sample while NVML is still up
            self._gpm = None
        if self._initialised:
            self._initialised = False
            # Shutting down: an error here has no one to report to.
            with contextlib.suppress(Exception):
                self._module().nvmlShutdown()

    # -- reading ---------------------------------------------------------------------------

    def read(self) -> GpuReading:
        """Read every GPU once (never raises for NVML errors)."""
        if not self._ensure_init():
            return GpuReading(status=self._init_status)
        nv = self._module()
        slow = self._slow
        assert slow is not None  # created by a successful init
        if not self._background:
            slow.tick_if_due()
            self._first_gpm_samples()
        gpus: list[GpuSample] = []
        try:
            for index, handle in enumerate(self._handles):
                try:
                    gpus.append(self._read_gpu(nv, index, handle))
                except GpuLost as lost:
                    gpus.append(self._lost_sample(index, str(lost)))
        except NvmlGone as gone:
            # Start over: the next read re-initialises once the driver is back.
            self._initialised = False
            if self._gpm is not None:
                self._gpm.request_reset()  # samples of the old NVML session are void
            self._next_init = self._clock() + self._retry_interval
            self._init_status = SourceStatus(
                "nvml", ok=False, error=str(gone), kind=gone.kind, fix=INIT_FIXES.get(gone.kind)
            )
            return GpuReading(status=self._init_status)
        gpus = self._with_gpm_and_energy(gpus)
        xids = slow.xids()
        driver, cuda, nvml_version = self._versions
        return GpuReading(
            status=self._init_status,
            driver_version=driver,
            cuda_driver_version=cuda,
            nvml_version=nvml_version,
            gpus=tuple(gpus),
            xid_events=xids,
            binding_problems=tuple(sorted(self._binding_problems)),
        )

    def _with_gpm_and_energy(self, gpus: list[GpuSample]) -> list[GpuSample]:
        """The samples with the GPM lane's last figures and the integrated energy."""
        lane = self._gpm
        if lane is not None:
            lane.set_targets(self._gpm_targets(gpus))
            if not self._background:
                lane.tick_if_due()
        now = self._clock()
        out = []
        for gpu in gpus:
            if gpu.lost:
                self._energy.pop(gpu.index, None)
                out.append(gpu)
                continue
            changes: dict[str, Any] = {"energy_integrated_j": self._integrate(gpu, now)}
            if lane is not None:
                figures, note = lane.figures(gpu.index)
                changes.update(figures or {})
                changes["gpm_note"] = note
                migs = []
                for inst in gpu.mig_instances:
                    mig_figures, _ = lane.figures(gpu.index, inst.gpu_instance_id)
                    if mig_figures is None or inst.gpu_instance_id is None:
                        migs.append(inst)
                        continue
                    mig_changes: dict[str, Any] = {f: mig_figures.get(f) for f in MIG_GPM_FIELDS}
                    migs.append(replace(inst, **mig_changes))
                changes["mig_instances"] = tuple(migs)
                if figures is None and any(m.gpm_sm_active is not None for m in migs):
                    changes["gpm_note"] = GPM_MIG  # the figures are on its GPU instances
                changes["total_energy_mj"] = lane.energy_mj(gpu.index)
            out.append(replace(gpu, **changes))
        return out

    def _gpm_targets(
        self, gpus: list[GpuSample] | None
    ) -> tuple[tuple[int, Any, tuple[int, ...]], ...]:
        """What the GPM lane samples: each GPU not lost in ``gpus``, with its GPU instances."""
        return tuple(
            (index, handle, self._gpu_instance_ids(index))
            for index, handle in enumerate(self._handles)
            if gpus is None or (index < len(gpus) and not gpus[index].lost)
        )

    def _gpu_instance_ids(self, index: int) -> tuple[int, ...]:
        """The GPU instance ids of a MIG-enabled GPU's devices (from the cached layout)."""
        layout = self._medium.get(index, {}).get("mig_handles", [])
        return tuple(
            sorted(
                {
                    inst.gpu_instance_id
                    for mh, inst in layout
                    if mh is not None and inst.gpu_instance_id is not None
                }
            )
        )

    def _integrate(self, gpu: GpuSample, now: float) -> float | None:
        """Joules since this source first read the GPU's power (trapezoids between reads)."""
        last = self._energy.get(gpu.index)
        if gpu.power_w is None:
            return None if last is None else last[2]
        joules = 0.0
        if last is not None:
            joules = last[2] + (last[1] + gpu.power_w) / 2 * max(0.0, now - last[0])
        self._energy[gpu.index] = (now, gpu.power_w, joules)
        return joules

    def _lost_sample(self, index: int, error: str) -> GpuSample:
        static = self._static.get(index, {})
        return GpuSample(
            index=index,
            uuid=static.get("uuid"),
            name=static.get("name"),
            lost=True,
            error=error,
            pci_bus_id=static.get("pci_bus_id"),
        )

    def _system(self, fn: Callable[[], Any]) -> Any:
        nv = self._module()
        try:
            value = fn()
        except nv.NVMLError:
            return None
        return value.decode() if isinstance(value, bytes) else value

    def _q(self, index: int, fn: Callable[..., T], *args: Any, mig: bool = False) -> T | None:
        """Call one NVML getter for one GPU: value, or None when unavailable.

        ``mig`` marks a call on a MIG device handle: what its device does not support (memory
        info, utilization) is remembered apart from the parent GPU's answer to the same getter.

        Raises:
            GpuLost: the GPU fell off the bus; the caller marks the whole GPU lost.
        """
        name = getattr(fn, "__name__", repr(fn))
        key = (index, f"{name}@mig" if mig else name)
        if key in self._unsupported:
            return None
        nv = self._module()
        try:
            return fn(*args)
        except nv.NVMLError as exc:
            kind = error_name(exc)
            if kind == "GpuIsLost":
                raise GpuLost("GPU is lost (fallen off the bus): XID 79 likely") from exc
            if kind in _SOURCE_ERRORS:
                raise NvmlGone(kind, str(exc)) from exc
            if kind in ("NotSupported", "FunctionNotFound"):
                # Asking again costs up to 0.1 ms per call on H200 and will never succeed.
                if self._remember_unsupported:
                    self._unsupported.add(key)
                if kind == "FunctionNotFound":
                    self._binding_problems.add(name)
            return None
        except nv.NVMLLibraryMismatchError:
            # Not an NVMLError subclass: the binding calls a symbol this driver lacks.
            self._unsupported.add(key)
            self._binding_problems.add(name)
            return None

    def _read_static(self, nv: Any, index: int, handle: Any) -> dict[str, Any]:
        static = self._static.get(index)
        if static is None:
            name = self._q(index, nv.nvmlDeviceGetName, handle)
            uuid = self._q(index, nv.nvmlDeviceGetUUID, handle)
            static = {
                "name": name.decode() if isinstance(name, bytes) else name,
                "uuid": uuid.decode() if isinstance(uuid, bytes) else uuid,
                "sm_max": self._q(index, nv.nvmlDeviceGetMaxClockInfo, handle, nv.NVML_CLOCK_SM),
                "mem_max": self._q(index, nv.nvmlDeviceGetMaxClockInfo, handle, nv.NVML_CLOCK_MEM),
                "pci_bus_id": self._pci_bus_id(index, nv, handle),
            }
            self._static[index] = static
        return static

    def _pci_bus_id(self, index: int, nv: Any, handle: Any) -> str | None:
        """``00000000:3B:00.0``: how the kernel log's XID lines name this GPU (read once)."""
        getter = getattr(nv, "nvmlDeviceGetPciInfo", None)
        info = None if getter is None else self._q(index, getter, handle)
        bus_id = getattr(info, "busId", None)
        if isinstance(bus_id, bytes):
            bus_id = bus_id.decode(errors="replace")
        return bus_id[:32] if isinstance(bus_id, str) and bus_id else None

    def _read_medium(self, nv: Any, index: int, handle: Any) -> dict[str, Any]:
        now = self._clock()
        medium = self._medium.get(index)
        if medium is not None and now < self._medium_due.get(index, 0.0):
            return medium
        q = self._q
        ecc = q(index, nv.nvmlDeviceGetEccMode, handle)
        remap = q(index, nv.nvmlDeviceGetRemappedRows, handle)
        mig = q(index, nv.nvmlDeviceGetMigMode, handle)
        limit = q(index, nv.nvmlDeviceGetEnforcedPowerLimit, handle)
        persistence = q(index, nv.nvmlDeviceGetPersistenceMode, handle)
        medium = {
            "fan": q(index, nv.nvmlDeviceGetFanSpeed, handle),
            "persistence": None if persistence is None else bool(persistence),
            "ecc": (None, None) if ecc is None else (bool(ecc[0]), bool(ecc[1])),
            "ecc_unc": q(
                index,
                nv.nvmlDeviceGetTotalEccErrors,
                handle,
                nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                nv.NVML_VOLATILE_ECC,
            ),
            "remap": (None, None) if remap is None else (bool(remap[2]), bool(remap[3])),
            "mig": (None, None) if mig is None else (bool(mig[0]), bool(mig[1])),
            "power_limit": None if limit is None else limit / 1000.0,
        }
        medium["mig_handles"] = self._mig_layout(nv, index, handle) if medium["mig"][0] else []
        self._medium[index] = medium
        self._medium_due[index] = now + self._medium_interval
        return medium

    def _mig_layout(self, nv: Any, index: int, handle: Any) -> list[tuple[Any, MigInstance]]:
        """The MIG devices of a MIG-enabled GPU: handle and static facts (no memory yet)."""
        count = min(self._q(index, nv.nvmlDeviceGetMaxMigDeviceCount, handle) or 0, 64)
        layout: list[tuple[Any, MigInstance]] = []
        for i in range(count):
            try:
                mh = nv.nvmlDeviceGetMigDeviceHandleByIndex(handle, i)
            except nv.NVMLError as exc:  # NotFound / InvalidArgument: no instance in this slot
                if error_name(exc) == "GpuIsLost":
                    raise GpuLost("GPU is lost (fallen off the bus): XID 79 likely") from exc
                continue
            uuid = self._q(index, nv.nvmlDeviceGetUUID, mh, mig=True)
            name = self._q(index, nv.nvmlDeviceGetName, mh, mig=True)
            get_attributes = getattr(nv, "nvmlDeviceGetAttributes", None)
            attrs = None if get_attributes is None else self._q(index, get_attributes, mh, mig=True)
            layout.append(
                (
                    mh,
                    MigInstance(
                        index=i,
                        uuid=uuid.decode() if isinstance(uuid, bytes) else uuid,
                        gpu_instance_id=self._q(index, nv.nvmlDeviceGetGpuInstanceId, mh, mig=True),
                        compute_instance_id=self._q(
                            index, nv.nvmlDeviceGetComputeInstanceId, mh, mig=True
                        ),
                        memory_used_bytes=None,
                        memory_total_bytes=None,
                        profile=_mig_profile(name, attrs),
                        sm_count=_attr(attrs, "multiprocessorCount"),
                        slices=_attr(attrs, "gpuInstanceSliceCount"),
                    ),
                )
            )
        return layout + self._empty_gpu_instances(nv, index, handle, layout)

    def _empty_gpu_instances(
        self, nv: Any, index: int, handle: Any, layout: list[tuple[Any, MigInstance]]
    ) -> list[tuple[Any, MigInstance]]:
        """GPU instances without a compute instance: no MIG device, so nothing can run there.

        NVML lists MIG devices per compute instance, so such a GPU instance is found only by
        asking for GPU instance ids one by one (a few calls per medium tick, MIG GPUs only).
        """
        by_id = getattr(nv, "nvmlDeviceGetGpuInstanceById", None)
        memo = (index, "nvmlDeviceGetGpuInstanceById")
        if by_id is None or memo in self._unsupported:
            return []
        seen = {inst.gpu_instance_id for _, inst in layout}
        empty: list[tuple[Any, MigInstance]] = []
        for gi_id in range(_MAX_GPU_INSTANCE_ID + 1):
            if gi_id in seen:
                continue
            try:
                by_id(handle, gi_id)
            except nv.NVMLError as exc:
                kind = error_name(exc)
                if kind == "GpuIsLost":
                    raise GpuLost("GPU is lost (fallen off the bus): XID 79 likely") from exc
                if kind in ("NotSupported", "FunctionNotFound") and self._remember_unsupported:
                    self._unsupported.add(memo)
                if kind in ("NoPermission", "NotSupported", "FunctionNotFound"):
                    return []  # not visible to this user: unknown rather than "none"
                continue  # NotFound / InvalidArgument: no GPU instance with this id
            except nv.NVMLLibraryMismatchError:
                self._unsupported.add(memo)
                return []
            empty.append((None, MigInstance(-1, None, gi_id, None, None, None)))
        return empty

    def _read_gpu(self, nv: Any, index: int, handle: Any) -> GpuSample:
        q = self._q
        static = self._read_static(nv, index, handle)
        medium = self._read_medium(nv, index, handle)
        util = q(index, nv.nvmlDeviceGetUtilizationRates, handle)
        memory = q(index, nv.nvmlDeviceGetMemoryInfo, handle)
        power = q(index, nv.nvmlDeviceGetPowerUsage, handle)
        enc = q(index, nv.nvmlDeviceGetEncoderUtilization, handle)
        dec = q(index, nv.nvmlDeviceGetDecoderUtilization, handle)
        pcie = self._slow.pcie(index) if self._slow else (None, None)
        mig_instances, mig_procs = self._read_mig(nv, index, medium["mig_handles"])
        return GpuSample(
            index=index,
            uuid=static["uuid"],
            pci_bus_id=static.get("pci_bus_id"),
            name=static["name"],
            utilization_gpu=None if util is None else int(util.gpu),
            utilization_gpu_mean=self._slow.gpu_util_mean(index) if self._slow else None,
            utilization_memory=None if util is None else int(util.memory),
            memory_used_bytes=None if memory is None else int(memory.used),
            memory_total_bytes=None if memory is None else int(memory.total),
            temperature_c=q(index, nv.nvmlDeviceGetTemperature, handle, nv.NVML_TEMPERATURE_GPU),
            power_w=None if power is None else power / 1000.0,
            power_limit_w=medium["power_limit"],
            clock_sm_mhz=q(index, nv.nvmlDeviceGetClockInfo, handle, nv.NVML_CLOCK_SM),
            clock_mem_mhz=q(index, nv.nvmlDeviceGetClockInfo, handle, nv.NVML_CLOCK_MEM),
            clock_sm_max_mhz=static["sm_max"],
            clock_mem_max_mhz=static["mem_max"],
            pstate=q(index, nv.nvmlDeviceGetPerformanceState, handle),
            fan_percent=medium["fan"],
            pcie_rx_kbps=pcie[0],
            pcie_tx_kbps=pcie[1],
            throttle_reasons=q(index, nv.nvmlDeviceGetCurrentClocksEventReasons, handle),
            ecc_mode_current=medium["ecc"][0],
            ecc_mode_pending=medium["ecc"][1],
            ecc_uncorrected_volatile=medium["ecc_unc"],
            remapped_rows_pending=medium["remap"][0],
            remapped_rows_failure=medium["remap"][1],
            encoder_util=None if enc is None else int(enc[0]),
            decoder_util=None if dec is None else int(dec[0]),
            persistence_mode=medium["persistence"],
            mig_mode_current=medium["mig"][0],
            mig_mode_pending=medium["mig"][1],
            mig_instances=mig_instances,
            processes=self._merge_mig_processes(self._read_processes(nv, index, handle), mig_procs),
        )

    def _read_processes(
        self,
        nv: Any,
        index: int,
        handle: Any,
        mig: tuple[int, int] | None = None,
        mig_index: int | None = None,
    ) -> tuple[GpuProcessSample, ...]:
        """Compute, graphics and MPS lists merged by PID (a PID in both of the first is ``C+G``).

        MPS clients (``M+C``, as nvidia-smi calls them) are listed apart by NVML since Volta; on
        a GPU without an MPS daemon that list is empty and costs one call per refresh.
        """
        merged: dict[int, tuple[str, int | None]] = {}
        instance: dict[int, tuple[int, int]] = {}
        lists: list[tuple[str, Any]] = [
            ("C", nv.nvmlDeviceGetComputeRunningProcesses),
            ("G", nv.nvmlDeviceGetGraphicsRunningProcesses),
        ]
        mps_list = getattr(nv, "nvmlDeviceGetMPSComputeRunningProcesses", None)
        if mps_list is not None:
            lists.append(("M+C", mps_list))
        on_mig = mig is not None
        for kind, fn in lists:
            for proc in self._q(index, fn, handle, mig=on_mig) or ():
                pid, used = proc.pid, proc.usedGpuMemory
                if not on_mig:
                    gi = getattr(proc, "gpuInstanceId", _NO_INSTANCE)
                    if gi != _NO_INSTANCE and isinstance(gi, int):
                        # A parent handle listing MIG processes (root): keep the instance it
                        # names.
                        ci = getattr(proc, "computeInstanceId", _NO_INSTANCE)
                        instance[pid] = (gi, ci if isinstance(ci, int) else _NO_INSTANCE)
                seen = merged.get(pid)
                if seen is None:
                    merged[pid] = (kind, used)
                else:
                    old_kind, old_used = seen
                    # The same allocation is listed twice; keep the larger figure, not the sum.
                    best = max((u for u in (old_used, used) if u is not None), default=None)
                    merged[pid] = ("C+G" if {old_kind, kind} == {"C", "G"} else old_kind, best)
        util, util_known = self._slow.process_util(index) if self._slow else ({}, False)
        # No sample for a listed PID means it did nothing in the window (NVML only returns
        # active processes): 0, not unknown, once the query itself has worked. NVML measures no
        # per-process utilization on MIG devices: there absent is unknown, never 0 (a driver
        # that does report samples for the PID is believed).
        absent = (0, 0, 0, 0) if util_known and not on_mig else (None, None, None, None)
        if not util_known:
            util = {}
        at_mig = mig_index if on_mig else None
        samples: list[GpuProcessSample] = []
        append = samples.append
        # Positional, in GpuProcessSample's field order: this runs for every GPU process on
        # every refresh, and a keyword call costs more (a test compares whole samples).
        for pid, (kind, used) in sorted(merged.items()):
            ids = mig if on_mig else instance.get(pid)
            sm, mem, enc, dec = util.get(pid, absent)
            append(
                GpuProcessSample(
                    pid,
                    index,
                    None if used is None else int(used),
                    kind,
                    sm,
                    mem,
                    enc,
                    dec,
                    None if ids is None else ids[0],
                    None if ids is None or ids[1] == _NO_INSTANCE else ids[1],
                    kind == "M+C",
                    at_mig,
                )
            )
        return tuple(samples)

    def _read_mig(
        self, nv: Any, index: int, layout: list[tuple[Any, MigInstance]]
    ) -> tuple[tuple[MigInstance, ...], tuple[GpuProcessSample, ...]]:
        """Memory and processes of each MIG device (every refresh; the layout is cached)."""
        instances: list[MigInstance] = []
        procs: list[GpuProcessSample] = []
        for mh, static in layout:
            if mh is None:  # a GPU instance without a compute instance
                instances.append(static)
                continue
            mem = self._q(index, nv.nvmlDeviceGetMemoryInfo, mh, mig=True)
            instances.append(
                replace(
                    static,
                    memory_used_bytes=None if mem is None else int(mem.used),
                    memory_total_bytes=None if mem is None else int(mem.total),
                )
            )
            gi, ci = static.gpu_instance_id, static.compute_instance_id
            if gi is not None and ci is not None:
                procs.extend(
                    self._read_processes(nv, index, mh, mig=(gi, ci), mig_index=static.index)
                )
        return tuple(instances), tuple(procs)

    def _merge_mig_processes(
        self, parent: tuple[GpuProcessSample, ...], mig: tuple[GpuProcessSample, ...]
    ) -> tuple[GpuProcessSample, ...]:
        """The parent's list without the PIDs its MIG devices list (root sees both)."""
        if not mig:
            return parent
        on_mig = {p.pid for p in mig}
        return tuple(p for p in parent if p.pid not in on_mig) + mig


def _attr(struct: Any, name: str) -> int | None:
    value = getattr(struct, name, None)
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _mig_profile(name: Any, attrs: Any) -> str | None:
    """A MIG device's profile: from its NVML name, else from its slices and memory size."""
    text = name.decode(errors="replace") if isinstance(name, bytes) else name
    if isinstance(text, str):
        match = _MIG_PROFILE_RE.search(text)
        if match:
            return match.group(1)[:32]
    slices, memory_mb = _attr(attrs, "gpuInstanceSliceCount"), _attr(attrs, "memorySizeMB")
    if slices is None or memory_mb is None:
        return None
    return f"{slices}g.{round(memory_mb / 1024)}gb"


def _cuda_version(value: int | None) -> str | None:
    """NVML's integer CUDA version (13000) as text ("13.0")."""
    if value is None:
        return None
    return f"{value // 1000}.{(value % 1000) // 10}"
