"""History keeps one memory series per MIG device, bounded, and forgets devices that go."""

from __future__ import annotations

from dataclasses import replace

from gputui.derive.history import UNITS, History, gpu_key, mig_devices, mig_key
from gputui.model.gpu import GpuSample, MigInstance
from gputui.model.snapshot import HostInfo, Snapshot

GIB = 1 << 30


def _inst(index: int, used_gib: float | None, profile: str = "1g.18gb") -> MigInstance:
    return MigInstance(
        index=index,
        uuid=f"MIG-{index:08d}",
        gpu_instance_id=index + 1,
        compute_instance_id=0 if index >= 0 else None,
        memory_used_bytes=None if used_gib is None else int(used_gib * GIB),
        memory_total_bytes=18 * GIB,
        profile=profile,
    )


def _gpu(index: int, *instances: MigInstance, lost: bool = False) -> GpuSample:
    return GpuSample(
        index=index,
        uuid=f"GPU-{index}",
        name="NVIDIA H200",
        memory_used_bytes=4 * GIB,
        memory_total_bytes=141 * GIB,
        mig_mode_current=bool(instances),
        mig_instances=instances,
        lost=lost,
    )


def _snap(at: float, *gpus: GpuSample) -> Snapshot:
    return Snapshot(taken_at=at, mode="scenario", host=HostInfo("node"), gpus=gpus)


def test_each_mig_device_gets_a_memory_series_and_a_plain_gpu_none() -> None:
    mig = _gpu(3, _inst(0, 1.0), _inst(1, None), _inst(-1, 0.0))
    plain = _gpu(0)
    history = History(60.0, 1.0)
    for step in range(5):
        devices = (_inst(0, 1.0 + step), _inst(1, None), _inst(-1, 0.0))
        history.record(_snap(100.0 + step, plain, replace(mig, mig_instances=devices)))
    key = mig_key(mig, _inst(0, 0.0))
    assert key == ("mig", "GPU-3:0", "mem")
    assert history.series(key, 60.0) == tuple(float((1 + s) * GIB) for s in range(5))
    assert UNITS[("mig", "mem")] == "B"
    # N/A memory is skipped, not drawn as zero; a GI without a CI is no device at all.
    assert [d.index for d in mig_devices(mig)] == [0, 1]
    mig_series = sorted(k for k in list(history.keys()) if k[0] == "mig")
    assert mig_series == [key]
    assert history.series(gpu_key(plain, "mem"), 60.0)  # the plain GPU still recorded


def test_mig_series_are_bounded_like_the_others() -> None:
    gpu = _gpu(1, _inst(0, 2.0))
    history = History(20.0, 1.0)
    for step in range(200):
        history.record(_snap(1000.0 + step, gpu))
    key = mig_key(gpu, _inst(0, 0.0))
    assert len(history.series(key, 1e9)) == history.maxlen == 20
    assert len(history._series[key].cols) <= 20 + 20 // 8


def test_a_device_its_gpu_stops_listing_is_dropped_but_a_lost_gpu_keeps_its_devices() -> None:
    history = History(60.0, 1.0)
    history.record(_snap(1.0, _gpu(0, _inst(0, 1.0), _inst(1, 2.0)), _gpu(1, _inst(0, 3.0))))
    gone = mig_key(_gpu(0), _inst(1, 0.0))
    kept = mig_key(_gpu(0), _inst(0, 0.0))
    other = mig_key(_gpu(1), _inst(0, 0.0))
    assert {gone, kept, other} <= set(history.keys())
    # MIG reconfigured on GPU 0 (device 1 destroyed); GPU 1 lost: its history waits.
    history.record(_snap(2.0, _gpu(0, _inst(0, 1.5)), _gpu(1, lost=True)))
    keys = set(history.keys())
    assert gone not in keys
    assert kept in keys and other in keys
    # MIG turned off on GPU 0: every device series of it goes.
    history.record(_snap(3.0, _gpu(0), _gpu(1, _inst(0, 3.0))))
    keys = set(history.keys())
    assert kept not in keys and other in keys
    # A GPU gone for good takes its devices with it after the horizon, like its own series.
    history.record(_snap(100.0, _gpu(0)))
    assert not [k for k in list(history.keys()) if k[0] == "mig"]
