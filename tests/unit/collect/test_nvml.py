"""The NVML adapter against pynvml-shaped stand-ins raising the real ``pynvml.NVMLError_*``."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from gputui.collect.nvml.source import NvmlSource
from gputui.collect.standins.scenario import ScenarioNvml, ScenarioSource
from gputui.model.gpu import GpuProcessSample

MIB = 1024 * 1024


def _gpu(**extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "index": 0,
        "uuid": "GPU-57d57e22-be4b-9496-673e-11cc7638ed19",
        "name": "NVIDIA H200",
        "memory_total_mib": 143771,
        "memory_used_mib": 20434,
        "utilization_gpu": 97,
        "utilization_memory": 40,
        "temperature_c": 62,
        "power_w": 683.5,
        "power_limit_w": 700,
        "clock_sm_mhz": 1980,
        "clock_mem_mhz": 3201,
        "clock_sm_max_mhz": 1980,
        "clock_mem_max_mhz": 3201,
        "pstate": 0,
        "fan_speed": 30,
        "pcie_rx_kbps": 1000,
        "pcie_tx_kbps": 2000,
        "throttle_reasons": 0x44,
        "ecc_mode_current": True,
        "ecc_mode_pending": False,
        "ecc_uncorrected_volatile": 2,
        "remapped_rows_pending": True,
        "remapped_rows_failure": False,
        "encoder_util": 5,
        "decoder_util": 6,
        "persistence_mode": True,
        "mig_mode_current": False,
        "processes": [{"pid": 611, "used_memory_mib": 13290, "sm_util": 60, "mem_util": 20}],
    }
    base.update(extra)
    return base


def test_every_field_maps_from_nvml() -> None:
    reading = ScenarioSource({"gpus": [_gpu()], "driver_version": "580.159.04"}).read()
    assert reading.status.ok
    assert (reading.driver_version, reading.cuda_driver_version) == ("580.159.04", "13.0")
    g = reading.gpus[0]
    assert g.uuid == "GPU-57d57e22-be4b-9496-673e-11cc7638ed19"
    assert (g.utilization_gpu, g.utilization_memory) == (97, 40)
    assert (g.memory_used_bytes, g.memory_total_bytes) == (20434 * MIB, 143771 * MIB)
    assert (g.temperature_c, g.power_w, g.power_limit_w) == (62, 683.5, 700.0)
    assert (g.clock_sm_mhz, g.clock_mem_mhz, g.clock_sm_max_mhz) == (1980, 3201, 1980)
    assert (g.pstate, g.fan_percent, g.pcie_rx_kbps, g.pcie_tx_kbps) == (0, 30, 1000, 2000)
    assert g.throttle_reasons == 0x44
    assert (g.ecc_mode_current, g.ecc_mode_pending, g.ecc_uncorrected_volatile) == (True, False, 2)
    assert (g.remapped_rows_pending, g.remapped_rows_failure) == (True, False)
    assert (g.encoder_util, g.decoder_util, g.persistence_mode) == (5, 6, True)
    assert (g.mig_mode_current, g.mig_mode_pending) == (False, False)
    (p,) = g.processes
    assert (p.pid, p.used_memory_bytes, p.kind, p.sm_util, p.mem_util) == (
        611,
        13290 * MIB,
        "C",
        60,
        20,
    )


@pytest.mark.parametrize("error", ["NotSupported", "NoPermission", "Unknown", "Timeout"])
def test_a_failing_field_is_none_and_the_rest_survive(error: str) -> None:
    reading = ScenarioSource(
        {"gpus": [_gpu(errors={"temperature_c": error, "power_w": error, "pcie": error})]}
    ).read()
    g = reading.gpus[0]
    assert g.temperature_c is None and g.power_w is None
    assert g.pcie_rx_kbps is None and g.pcie_tx_kbps is None
    assert g.utilization_gpu == 97 and not g.lost


def test_lost_gpu_is_flagged_and_others_keep_working() -> None:
    source = ScenarioSource(
        {"gpus": [_gpu(), _gpu(index=1, errors={"*": [None, "GpuIsLost", None]})]}
    )
    first, lost, back = source.read(), source.read(), source.read()
    assert not first.gpus[1].lost
    assert lost.gpus[1].lost and "lost" in (lost.gpus[1].error or "")
    assert lost.gpus[1].uuid == first.gpus[1].uuid  # identity kept from before the loss
    assert lost.gpus[0].utilization_gpu == 97
    assert not back.gpus[1].lost and back.gpus[1].utilization_gpu == 97


@pytest.mark.parametrize("state", ["LibraryNotFound", "DriverNotLoaded", "NoPermission", "Unknown"])
def test_init_failures_become_a_source_status(state: str) -> None:
    reading = ScenarioSource({"nvml": state, "gpus": [_gpu()]}).read()
    assert not reading.status.ok
    assert reading.status.kind == state
    assert reading.gpus == ()


def test_driver_vanishing_mid_run_and_coming_back() -> None:
    source = ScenarioSource({"nvml": ["ok", "DriverNotLoaded", "ok"], "gpus": [_gpu()]})
    ok, gone, back = source.read(), source.read(), source.read()
    assert ok.status.ok and len(ok.gpus) == 1
    assert not gone.status.ok and gone.status.kind == "DriverNotLoaded" and gone.status.fix
    assert back.status.ok and back.gpus[0].utilization_gpu == 97


def test_time_series_advance_per_refresh() -> None:
    source = ScenarioSource({"gpus": [_gpu(utilization_gpu=[10, 20, 30])]})
    assert [source.read().gpus[0].utilization_gpu for _ in range(4)] == [10, 20, 30, 10]


def test_compute_and_graphics_lists_merge_by_pid() -> None:
    reading = ScenarioSource(
        {
            "gpus": [
                _gpu(
                    processes=[
                        {"pid": 10, "used_memory_mib": 100, "type": "C+G"},
                        {"pid": 11, "used_memory_mib": 5, "type": "G"},
                    ]
                )
            ]
        }
    ).read()
    kinds = {p.pid: (p.kind, p.used_memory_bytes) for p in reading.gpus[0].processes}
    assert kinds == {10: ("C+G", 100 * MIB), 11: ("G", 5 * MIB)}


def test_idle_process_has_zero_sm_not_unknown() -> None:
    # NVML returns NotFound when no process was active since the timestamp: that is 0 %.
    reading = ScenarioSource({"gpus": [_gpu(processes=[{"pid": 5, "used_memory_mib": 1}])]}).read()
    assert reading.gpus[0].processes[0].sm_util == 0


class _FakeNvml:
    """A minimal pynvml-shaped module for the paths scenarios do not model."""

    NVMLError = pynvml.NVMLError
    NVMLLibraryMismatchError = pynvml.NVMLLibraryMismatchError
    NVML_CLOCK_SM = pynvml.NVML_CLOCK_SM
    NVML_CLOCK_MEM = pynvml.NVML_CLOCK_MEM
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    NVML_VOLATILE_ECC = pynvml.NVML_VOLATILE_ECC
    NVML_PCIE_UTIL_RX_BYTES = pynvml.NVML_PCIE_UTIL_RX_BYTES
    NVML_PCIE_UTIL_TX_BYTES = pynvml.NVML_PCIE_UTIL_TX_BYTES

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.util_since: list[int] = []
        self.events: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("nvml"):
            raise AttributeError(name)

        def unsupported(*args: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            raise pynvml.NVMLError_NotSupported()

        unsupported.__name__ = name
        return unsupported

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, i: int) -> str:
        return "parent"

    def nvmlSystemGetDriverVersion(self) -> str:
        return "535.104.05"

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return 12020

    def nvmlDeviceGetComputeRunningProcesses(self, h: str) -> Any:
        if h == "parent":
            # The real wrapper turns a missing _v3 symbol into this non-NVMLError exception.
            raise pynvml.NVMLLibraryMismatchError("use a versioned function")
        return [SimpleNamespace(pid=77 if h == "mig0" else 78, usedGpuMemory=None)]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h: str) -> Any:
        return []

    def nvmlDeviceGetMigMode(self, h: str) -> tuple[int, int]:
        return (1, 1)

    def nvmlDeviceGetMaxMigDeviceCount(self, h: str) -> int:
        return 3

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: str, i: int) -> str:
        if i == 1:
            raise pynvml.NVMLError_NotFound()
        return f"mig{i}"

    def nvmlDeviceGetGpuInstanceId(self, h: str) -> int:
        return {"mig0": 1, "mig2": 2}[h]

    def nvmlDeviceGetComputeInstanceId(self, h: str) -> int:
        return 0

    def nvmlDeviceGetMemoryInfo(self, h: str, version: Any = None) -> Any:
        return SimpleNamespace(total=10 * MIB, used=MIB, free=9 * MIB)

    def nvmlDeviceGetProcessUtilization(self, h: str, since: int) -> Any:
        self.util_since.append(since)
        if len(self.util_since) == 1:
            return [
                SimpleNamespace(
                    pid=77, timeStamp=since + 10, smUtil=50, memUtil=5, encUtil=0, decUtil=0
                ),
                SimpleNamespace(
                    pid=77, timeStamp=since + 20, smUtil=250, memUtil=5, encUtil=0, decUtil=0
                ),
            ]
        raise pynvml.NVMLError_NotFound()


def test_mig_instances_binding_mismatch_and_unsupported_memo() -> None:
    nv = _FakeNvml()
    source = NvmlSource(nv, background=False, slow_interval=0.0, medium_interval=0.0)
    first = source.read()
    g = first.gpus[0]
    assert first.status.ok and first.cuda_driver_version == "12.2"
    assert g.mig_mode_current is True
    assert [(m.gpu_instance_id, m.compute_instance_id) for m in g.mig_instances] == [(1, 0), (2, 0)]
    assert {(p.pid, p.mig_gi_id, p.used_memory_bytes) for p in g.processes} == {
        (77, 1, None),
        (78, 2, None),
    }
    # Samples averaged per PID and clamped to 100; the next call continues from the newest one.
    assert {p.pid: p.sm_util for p in g.processes}[77] == 75
    assert "nvmlDeviceGetComputeRunningProcesses" in first.binding_problems
    assert g.temperature_c is None and g.fan_percent is None
    calls_after_first = dict(nv.calls)
    source.read()
    assert nv.calls == calls_after_first, "NotSupported fields must not be asked again"
    assert nv.util_since[1] == nv.util_since[0] + 20


def test_no_driver_path_with_the_real_binding() -> None:
    # The CI machine has no NVIDIA driver: the real nvidia-ml-py must report it, not crash.
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:  # pragma: no cover - only on a GPU machine
        pynvml.nvmlShutdown()
        pytest.skip("an NVIDIA driver is present here")
    reading = NvmlSource(background=False).read()
    assert not reading.status.ok
    assert reading.status.kind in ("LibraryNotFound", "DriverNotLoaded")
    assert reading.status.fix


def test_background_slow_lane_fills_pcie_without_blocking_reads() -> None:
    nvml = ScenarioNvml({"gpus": [_gpu()]})
    source = NvmlSource(nvml, background=True, slow_interval=0.05)
    try:
        deadline = time.monotonic() + 5
        reading = source.read()
        while reading.gpus[0].pcie_rx_kbps is None and time.monotonic() < deadline:
            time.sleep(0.02)
            reading = source.read()
        assert reading.gpus[0].pcie_rx_kbps == 1000
        assert reading.gpus[0].processes[0].sm_util == 60
    finally:
        source.close()


def test_process_samples_carry_every_field_in_place() -> None:
    # The adapter builds samples positionally: each field must land where its name says.
    gpu = _gpu(
        processes=[
            {"pid": 40, "used_memory_mib": 7, "type": "G", "sm_util": 33, "mem_util": 4},
            {"pid": 41, "used_memory_mib": 9, "type": "M+C"},
        ]
    )
    source = ScenarioSource({"gpus": [gpu]})
    source.read()
    samples = source.read().gpus[0].processes
    assert samples == (
        GpuProcessSample(pid=40, gpu_index=0, used_memory_bytes=7 * MIB, kind="G", sm_util=33,
                         mem_util=4, enc_util=0, dec_util=0),
        GpuProcessSample(pid=41, gpu_index=0, used_memory_bytes=9 * MIB, kind="M+C", sm_util=0,
                         mem_util=0, enc_util=0, dec_util=0, mps=True),
    )  # fmt: skip
