"""GPM figures and energy through the pynvml-shaped seam: the real adapter and its GPM lane.

The scenario stand-in answers ``nvmlGpmSampleAlloc/Get/Free``, ``nvmlGpmMigSampleGet``,
``nvmlGpmQueryDeviceSupport`` and ``nvmlGpmMetricsGet`` with pynvml's own structures, so the
adapter fills and reads the real ``c_nvmlGpmMetricsGet_t``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pynvml

from gputui.collect.nvml.gpm import GpmLane
from gputui.collect.nvml.source import NvmlSource
from gputui.collect.standins.scenario import ScenarioNvml, ScenarioSource
from gputui.collect.standins.scenario_format import validate_scenario
from gputui.model.gpu import GPM_DROPPED, GPM_LOST, GPM_MIG, GPM_PENDING, GPM_UNSUPPORTED, GpuSample

MIB = 1024 * 1024


def _hopper(**extra: Any) -> dict[str, Any]:
    return {
        "index": 0,
        "utilization_gpu": 100,
        "power_w": 300,
        "gpm_sm_active": [4, 6.5, 8],
        "gpm_sm_occupancy": 1,
        "gpm_tensor_active": 0,
        "gpm_dram_active": 2,
        "gpm_pcie_rx_mib_s": 1.5,
        **extra,
    }


def _source(data: dict[str, Any], nvml: ScenarioNvml | None = None, **options: Any) -> Any:
    validate_scenario(data)
    nv = nvml or ScenarioNvml(data)
    settings: dict[str, Any] = {
        "background": False,
        "slow_interval": 0.0,
        "medium_interval": 0.0,
        "remember_unsupported": False,
        "gpm_interval": 0.0,
        "gpm_min_gap": 0.0,
        **options,
    }
    return nv, NvmlSource(nv, **settings)


def _read(nv: ScenarioNvml, source: NvmlSource) -> tuple[GpuSample, ...]:
    gpus = source.read().gpus
    nv.step += 1
    return gpus


def test_a_hopper_gpu_has_gpm_figures_from_its_first_read_on() -> None:
    nv, source = _source({"gpus": [_hopper()]})
    first = _read(nv, source)[0]
    # The one-shot path completes its first pair inline: figures at once, none pending.
    assert first.gpm_note is None
    assert first.gpm_sm_active == 4.0 and first.gpm_sm_occupancy == 1.0
    assert first.gpm_tensor_active == 0.0 and first.gpm_dram_active == 2.0
    assert first.gpm_pcie_rx_bytes_per_s == 1.5 * MIB
    # A metric the GPU does not give is None on its own; the others are read.
    assert first.gpm_nvlink_tx_bytes_per_s is None and first.gpm_fp64_active is None
    # The next pair ends at the next step: its figures are that step's.
    assert _read(nv, source)[0].gpm_sm_active == 6.5
    assert _read(nv, source)[0].gpm_sm_active == 8.0
    # Utilization and SM activity are different figures, both kept.
    assert first.utilization_gpu == 100
    source.close()
    assert nv.live_gpm_samples == 0


def test_one_metric_failing_leaves_the_others() -> None:
    nv, source = _source({"gpus": [_hopper(errors={"gpm_dram_active": "NoPermission"})]})
    gpu = _read(nv, source)[0]
    assert gpu.gpm_dram_active is None and gpu.gpm_sm_active == 4.0


def test_a_gpu_without_gpm_says_so_and_is_not_sampled() -> None:
    nv, source = _source({"gpus": [{"index": 0, "utilization_gpu": 40}]})
    for _ in range(3):
        gpu = _read(nv, source)[0]
        assert gpu.gpm_sm_active is None and gpu.gpm_note == GPM_UNSUPPORTED
        assert gpu.utilization_gpu == 40
    assert nv.live_gpm_samples == 0
    assert "nvmlGpmSampleAlloc" not in (source._gpm.calls if source._gpm else {})


class _NoGpmDriver(ScenarioNvml):
    """A driver or GPU whose GPM query itself answers NotSupported (pre-Hopper, old driver)."""

    def nvmlGpmQueryDeviceSupport(self, handle: Any) -> Any:
        raise pynvml.NVMLError_NotSupported()


def test_gpm_query_not_supported_means_not_available() -> None:
    data = {"gpus": [_hopper()]}
    nv, source = _source(data, _NoGpmDriver(data))
    gpu = _read(nv, source)[0]
    assert gpu.gpm_sm_active is None and gpu.gpm_note == GPM_UNSUPPORTED
    assert nv.live_gpm_samples == 0


class _SampleNotSupported(ScenarioNvml):
    """A device that claims GPM support but whose sample call answers NotSupported."""

    def nvmlGpmSampleGet(self, handle: Any, sample: Any) -> Any:
        raise pynvml.NVMLError_NotSupported()


def test_a_sample_call_not_supported_is_not_asked_again() -> None:
    data = {"gpus": [_hopper()]}
    nv, source = _source(data, _SampleNotSupported(data))
    for _ in range(3):
        gpu = _read(nv, source)[0]
        assert gpu.gpm_sm_active is None and gpu.gpm_note == GPM_UNSUPPORTED
    assert source._gpm is not None and source._gpm.calls["nvmlGpmSampleAlloc"] == 1
    assert nv.live_gpm_samples == 0


def test_a_gpu_lost_between_the_two_samples() -> None:
    data = {"gpus": [_hopper(errors={"*": [None, "GpuIsLost", None]})]}
    nv, source = _source(data)
    assert _read(nv, source)[0].gpm_sm_active == 4.0
    assert nv.live_gpm_samples == 1  # the first sample of the next pair
    lost = _read(nv, source)[0]
    assert lost.lost and lost.gpm_sm_active is None
    # The lost GPU's sample is freed, not kept to pair with one taken after it came back.
    assert nv.live_gpm_samples == 0
    back = _read(nv, source)[0]
    assert not back.lost and back.gpm_sm_active == 8.0 and back.gpm_note is None


def test_a_gpu_lost_during_the_gpm_tick_only() -> None:
    # The core read worked; the GPM sample of the same refresh finds the GPU gone.
    data = {"gpus": [_hopper(errors={"gpm_sample": [None, "GpuIsLost", None]})]}
    nv, source = _source(data)
    _read(nv, source)
    gpu = _read(nv, source)[0]
    assert gpu.gpm_sm_active is None and gpu.gpm_note == GPM_LOST
    assert nv.live_gpm_samples == 0
    assert _read(nv, source)[0].gpm_sm_active == 8.0


def test_a_pair_across_a_counter_reset_is_dropped() -> None:
    data = {"gpus": [_hopper(errors={"gpm": [None, "Unknown", None]})]}
    nv, source = _source(data)
    assert _read(nv, source)[0].gpm_sm_active == 4.0
    dropped = _read(nv, source)[0]
    assert dropped.gpm_sm_active is None and dropped.gpm_note == GPM_DROPPED
    # The pair after it starts from the sample that ended the dropped one.
    assert _read(nv, source)[0].gpm_sm_active == 8.0
    assert nv.live_gpm_samples == 1


class _Backwards(ScenarioNvml):
    """Counters that went backwards between two samples: NVML computes a negative figure."""

    def nvmlGpmMetricsGet(self, request: Any) -> Any:
        super().nvmlGpmMetricsGet(request)
        if self.step == 1:
            request.metrics[1].value = -12.5
        return request


def test_a_negative_figure_drops_the_whole_pair() -> None:
    data = {"gpus": [_hopper()]}
    nv, source = _source(data, _Backwards(data))
    _read(nv, source)
    gpu = _read(nv, source)[0]
    assert gpu.gpm_note == GPM_DROPPED
    assert gpu.gpm_sm_active is None and gpu.gpm_dram_active is None
    assert _read(nv, source)[0].gpm_sm_active == 8.0


def _mig_gpu(mig_on: Any = True) -> dict[str, Any]:
    return {
        "index": 0,
        "power_w": 100,
        "mig_mode_current": mig_on,
        "errors": {"utilization": "NotSupported"},
        "mig_instances": [
            {
                "gi_id": 1,
                "ci_id": 0,
                "profile": "3g.71gb",
                "gpm_sm_active": [30, 40],
                "gpm_graphics_active": 55,
                "gpm_tensor_active": 12,
            },
            {"gi_id": 2, "ci_id": 0, "profile": "2g.35gb", "gpm_sm_active": 0},
            {"gi_id": 5, "ci_id": None},  # no compute instance: no MIG device, not sampled
        ],
    }


def test_mig_gpu_instances_have_their_own_figures() -> None:
    nv, source = _source({"gpus": [_mig_gpu()]})
    gpu = _read(nv, source)[0]
    by_gi = {m.gpu_instance_id: m for m in gpu.mig_instances}
    assert by_gi[1].gpm_sm_active == 30.0 and by_gi[1].gpm_graphics_active == 55.0
    assert by_gi[1].gpm_tensor_active == 12.0 and by_gi[1].gpm_dram_active is None
    assert by_gi[2].gpm_sm_active == 0.0
    assert by_gi[5].gpm_sm_active is None
    # The whole GPU is sampled per GPU instance only.
    assert gpu.gpm_sm_active is None and gpu.gpm_note == GPM_MIG
    assert {m.gpu_instance_id: m.gpm_sm_active for m in _read(nv, source)[0].mig_instances}[
        1
    ] == 40.0


def test_samples_of_vanished_gpu_instances_are_freed() -> None:
    nv, source = _source({"gpus": [_mig_gpu(mig_on=[True, False])]})
    _read(nv, source)
    assert nv.live_gpm_samples == 2  # one per GPU instance, waiting for its pair
    gpu = _read(nv, source)[0]
    assert not gpu.mig_instances
    assert nv.live_gpm_samples == 0
    source.close()
    assert nv.live_gpm_samples == 0


def test_every_sample_is_freed_at_shutdown() -> None:
    data = {"gpus": [_hopper(), {**_hopper(), "index": 1}]}
    nv, source = _source(data)
    for _ in range(3):
        _read(nv, source)
    assert nv.live_gpm_samples == 2
    source.close()
    assert nv.live_gpm_samples == 0


def test_a_pair_is_never_closer_than_the_minimum_gap() -> None:
    now = [100.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    data = {"gpus": [_hopper()]}
    nv, source = _source(
        data, clock=lambda: now[0], gpm_interval=1.0, gpm_min_gap=0.1, gpm_sleep=sleep
    )
    assert _read(nv, source)[0].gpm_sm_active == 4.0
    # The one-shot waited for the first pair, no longer than the gap.
    assert len(slept) == 1 and 0 < slept[0] <= 0.1
    now[0] += 0.05  # a refresh soon after: no new sample, the last pair's figures
    assert _read(nv, source)[0].gpm_sm_active == 4.0
    assert source._gpm is not None and source._gpm.calls["nvmlGpmSampleGet"] == 2
    now[0] += 1.0
    assert _read(nv, source)[0].gpm_sm_active == 8.0  # step 2's pair
    assert len(slept) == 1


class _SlowGpm(ScenarioNvml):
    """A GPM call stuck in the driver until the test lets it go."""

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(data)
        self.entered = threading.Event()
        self.release = threading.Event()

    def nvmlGpmMetricsGet(self, request: Any) -> Any:
        self.entered.set()
        self.release.wait(30.0)
        return super().nvmlGpmMetricsGet(request)


def test_a_slow_gpm_call_never_delays_a_refresh() -> None:
    data = {"gpus": [_hopper()]}
    validate_scenario(data)
    nv = _SlowGpm(data)
    source = NvmlSource(nv, background=True, slow_interval=60.0, gpm_interval=0.1, gpm_min_gap=0.1)
    try:
        first = source.read().gpus[0]  # hands the lane its targets
        assert first.gpm_sm_active is None and first.gpm_note == GPM_PENDING
        assert nv.entered.wait(30.0), "the lane never reached its metrics call"
        # The lane is stuck in nvmlGpmMetricsGet: refreshes still return, core gauges read.
        for _ in range(3):
            gpu = source.read().gpus[0]
            assert not nv.release.is_set()
            assert gpu.utilization_gpu == 100 and gpu.gpm_sm_active is None
        nv.release.set()
        deadline = time.monotonic() + 30.0
        while source.read().gpus[0].gpm_sm_active is None:
            assert time.monotonic() < deadline, "GPM figures never arrived"
            time.sleep(0.02)
    finally:
        nv.release.set()
        source.close()
    assert nv.live_gpm_samples == 0


def test_the_lane_alone_answers_pending_before_any_tick() -> None:
    lane = GpmLane(ScenarioNvml({"gpus": [_hopper()]}), time.monotonic, 1.0)
    assert lane.figures(0) == (None, GPM_PENDING)


# -- energy ------------------------------------------------------------------------------------


def test_the_energy_counter_and_integrated_power() -> None:
    now = [0.0]
    data = {
        "gpus": [
            _hopper(total_energy_mj=[5_000_000, 5_300_000, 5_600_000], power_w=[300, 300, 500]),
            {"index": 1, "power_w": 100},  # no counter (NotSupported): integrated power only
        ]
    }
    nv, source = _source(data, clock=lambda: now[0])
    gpus = _read(nv, source)
    assert gpus[0].total_energy_mj == 5_000_000 and gpus[0].energy_integrated_j == 0.0
    assert gpus[1].total_energy_mj is None and gpus[1].energy_integrated_j == 0.0
    now[0] += 2.0
    gpus = _read(nv, source)
    assert gpus[0].total_energy_mj == 5_300_000
    assert gpus[0].energy_integrated_j == 600.0 and gpus[1].energy_integrated_j == 200.0
    now[0] += 1.0
    gpus = _read(nv, source)
    assert gpus[0].energy_integrated_j == 600.0 + 400.0  # trapezoid: (300 + 500) / 2 W for 1 s


def test_the_energy_counter_is_read_on_the_slow_cadence() -> None:
    # The call costs milliseconds of the driver's CPU a GPU: read every slow_interval, the
    # snapshots in between carry the last reading (the ledger trues its estimates up to it).
    now = [0.0]
    counter = [1_000_000 * step for step in range(8)]
    nv, source = _source(
        {"gpus": [_hopper(total_energy_mj=counter)]}, clock=lambda: now[0], slow_interval=5.0
    )
    seen = []
    for _ in range(8):
        seen.append(_read(nv, source)[0].total_energy_mj)
        now[0] += 1.0
    assert seen == [0] * 5 + [5_000_000] * 3


class _CallOrder(ScenarioNvml):
    """Records the order of the GPM samples and the energy-counter reads."""

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(data)
        self.order: list[str] = []
        energy: Callable[[Any], Any] = vars(self)["nvmlDeviceGetTotalEnergyConsumption"]

        def counted(handle: Any) -> Any:
            self.order.append("energy")
            return energy(handle)

        # The stand-in made its getters per instance: the wrapper replaces this one's.
        vars(self)["nvmlDeviceGetTotalEnergyConsumption"] = counted

    def nvmlGpmSampleGet(self, handle: Any, sample: Any) -> Any:
        self.order.append("sample")
        return super().nvmlGpmSampleGet(handle, sample)


def test_every_gpu_is_sampled_before_any_energy_counter_is_read() -> None:
    # The counter costs ~3 ms a GPU on an H200: read first, it would hold back each first
    # pair's 100 ms (a one-shot waits that out) by the counters of the GPUs before it.
    gpus = [_hopper(index=i, total_energy_mj=[1_000_000]) for i in range(4)]
    nv = _CallOrder({"gpus": gpus})
    lane = GpmLane(nv, time.monotonic, 1.0, min_gap=0.0)
    lane.set_targets(tuple((i, nv.nvmlDeviceGetHandleByIndex(i), ()) for i in range(4)))
    lane.tick()
    assert nv.order == ["sample"] * 4 + ["energy"] * 4
    assert all(lane.energy_mj(i) == 1_000_000 for i in range(4))
    lane.stop()


def test_scenario_source_plays_gpm_and_energy() -> None:
    source = ScenarioSource({"gpus": [_hopper(total_energy_mj=7)]}, wall=lambda: 0.0)
    gpu = source.read().gpus[0]
    assert gpu.gpm_sm_active == 4.0 and gpu.total_energy_mj == 7
    source.close()
