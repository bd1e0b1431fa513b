"""``gputui free`` on MIG-partitioned GPUs, and sizes that must carry a unit.

A free MIG device is offered by its ``MIG-…`` UUID (what ``CUDA_VISIBLE_DEVICES`` takes) when
one device is wanted and no whole GPU is free; a device that a container reserves or a process
runs on is not. The rules are checked on model snapshots; the command runs on a scenario over
the real Docker engine, with a real container reserving one MIG device and another running the
process of a second one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gputui.derive.free import FreeRules, free_gpus
from gputui.model.containers import ContainerInfo
from gputui.model.gpu import GpuProcessSample, GpuSample, MigInstance
from gputui.model.processes import GpuProcess, ProcessInfo
from gputui.model.snapshot import ContainerUsage, HostInfo, Snapshot
from tests.support.gputui_process import run_free

GIB = 1024**3
MIG_UUIDS = [
    f"MIG-{n}{n}{n}{n}{n}{n}{n}{n}-{n}{n}{n}{n}-5{n}{n}{n}-8{n}{n}{n}-{n * 12}" for n in "123"
]


def _mig_gpu(used_gib: tuple[int, int, int] = (0, 0, 0)) -> GpuSample:
    instances = tuple(
        MigInstance(
            index=i,
            uuid=MIG_UUIDS[i],
            gpu_instance_id=i + 1,
            compute_instance_id=0,
            memory_used_bytes=used_gib[i] * GIB,
            memory_total_bytes=total * GIB,
            profile=profile,
        )
        for i, (total, profile) in enumerate(((70, "3g.71gb"), (35, "2g.35gb"), (17, "1g.18gb")))
    )
    empty_gi = MigInstance(-1, None, 5, None, None, None)
    return GpuSample(
        index=0,
        uuid="GPU-57d57e22-be4b-9496-673e-11cc7638ed19",
        name="NVIDIA H200",
        memory_used_bytes=sum(used_gib) * GIB,
        memory_total_bytes=140 * GIB,
        mig_mode_current=True,
        mig_instances=(*instances, empty_gi),
    )


def _container(name: str, request: tuple[str, ...] | str) -> ContainerUsage:
    info = ContainerInfo(
        id=(name.encode().hex() * 64)[:64],
        name=name,
        image="img",
        status="running",
        gpu_request=request,
    )
    return ContainerUsage(info)


def _proc_on(device: int, pid: int = 4242) -> GpuProcess:
    sample = GpuProcessSample(
        pid=pid, gpu_index=0, used_memory_bytes=2 * GIB, mig_gi_id=device + 1, mig_ci_id=0
    )
    return GpuProcess(sample, ProcessInfo(pid=pid, name="python", user="root"), None)


def _snap(*gpus: GpuSample, **kw: Any) -> Snapshot:
    return Snapshot(1_750_000_000.0, "scenario", HostInfo("node"), gpus=gpus, **kw)


def _mig_codes(snapshot: Snapshot, rules: FreeRules | None = None) -> dict[str, list[str]]:
    return {
        str(m.mig_device): [e.code for e in m.exclusions] for m in free_gpus(snapshot, rules).mig
    }


def test_each_mig_device_is_judged_and_the_free_one_is_offered_by_its_uuid() -> None:
    snap = _snap(
        _mig_gpu((2, 0, 0)),
        processes=(_proc_on(0),),
        containers=(_container("notebook", ("0:1",)),),
    )
    answer = free_gpus(snap)
    assert _mig_codes(snap) == {"0:2": [], "0:0": ["processes"], "0:1": ["reserved"]}
    assert [g.index for g in answer.usable] == []  # the GPU itself is in MIG mode
    (chosen,) = answer.choose(None)
    assert (chosen.mig_device, chosen.uuid) == ("0:2", MIG_UUIDS[2])
    assert answer.choose(1) == (chosen,)
    assert answer.choose(2) == ()  # a CUDA process uses one MIG device
    # A size bound applies to the device's own memory.
    assert _mig_codes(snap, FreeRules(min_free_memory_bytes=20 * GIB))["0:2"] == ["low_memory"]


@pytest.mark.parametrize(
    "request_",
    [("MIG-33333333-3333-5333-8333-333333333333",), ("0",), "all", ("0:2",)],
    ids=["mig-uuid", "its-gpu", "all", "mig-name"],
)
def test_a_container_reserving_the_device_or_its_gpu_holds_it(
    request_: tuple[str, ...] | str,
) -> None:
    snap = _snap(_mig_gpu(), containers=(_container("holder", request_),))
    assert _mig_codes(snap)["0:2"] == ["reserved"]
    whole_gpu = request_ in (("0",), "all")
    offered = [m.mig_device for m in free_gpus(snap).choose(None)]
    # The whole GPU (or every GPU) reserved holds every MIG device of it; one device, only it:
    # the biggest other one is offered.
    assert offered == ([] if whole_gpu else ["0:0"])


def test_a_whole_free_gpu_comes_before_any_mig_device() -> None:
    whole = GpuSample(
        index=1,
        uuid="GPU-9e4a7b1c-0000-4000-8000-000000000001",
        name="NVIDIA H200",
        memory_used_bytes=0,
        memory_total_bytes=140 * GIB,
    )
    (chosen,) = free_gpus(_snap(_mig_gpu(), whole)).choose(None)
    assert chosen.mig_device is None and chosen.index == 1


# -- the command ---------------------------------------------------------------------------------


@pytest.mark.parametrize("size", ["40", "40.5", " 7 "])
def test_a_size_without_a_unit_is_refused(size: str) -> None:
    result = run_free("--demo", "--min-free-memory", size)
    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert "has no unit: write e.g." in line and "GiB" in line


@pytest.mark.parametrize(("size", "qualifies"), [("16GiB", True), ("17G", False), ("512B", True)])
def test_a_size_with_a_unit_still_works(size: str, qualifies: bool, tmp_path: Path) -> None:
    path = tmp_path / "one-free.json"
    path.write_text(json.dumps({"gpus": [{"index": 0, "memory_total_mib": 16384}]}))
    result = run_free("--scenario", str(path), "--min-free-memory", size)
    assert (result.returncode == 0) is qualifies, result.stderr


def _host_pid(container: Any) -> int:
    container.reload()
    return int(container.attrs["State"]["Pid"])


def test_free_offers_the_free_mig_device_of_a_partitioned_gpu(
    sole_gpu_reservations: None,
    run_container: Callable[..., Any],
    free_run_id: str,
    tmp_path: Path,
) -> None:
    fixture = json.loads(
        (Path(__file__).parents[1] / "fixtures/mig-three-instances.json").read_text()
    )
    gpu = fixture["gpus"][0]  # 0:0, 0:1, 0:2 and an empty GPU instance; GPU 1 dropped
    reserved = f"mig-notebook-{free_run_id}"
    run_container(
        ["sleep", "300"], name=reserved, environment={"NVIDIA_VISIBLE_DEVICES": MIG_UUIDS[1]}
    )
    busy = run_container(["sleep", "300"], name=f"mig-busy-{free_run_id}")
    gpu["mig_instances"][0]["processes"] = [{"pid": _host_pid(busy), "used_memory_mib": 19000}]
    gpu["mig_instances"][1]["processes"] = []
    gpu["mig_instances"][1]["memory_used_mib"] = 0
    path = tmp_path / "mig.json"
    path.write_text(json.dumps({"nvml": "ok", "gpus": [gpu]}))
    scope = f"gputui-test={free_run_id}"

    result = run_free("--scenario", str(path), "--explain", label=scope)
    assert result.returncode == 0, result.stderr
    assert result.stdout == MIG_UUIDS[2] + "\n"
    assert "MIG device 0:2 (NVIDIA H200 MIG 1g.18gb, 16.5GiB free) qualifies" in result.stderr
    assert f"MIG device 0:1: reserved by idle container {reserved}" in result.stderr
    assert "MIG device 0:0: used by 1 process" in result.stderr

    doc = json.loads(run_free("--scenario", str(path), "--json", label=scope).stdout)
    assert doc["enough"] is True and doc["selected"] == []
    assert doc["selected_mig_devices"] == ["0:2"]
    assert doc["cuda_visible_devices"] == MIG_UUIDS[2]
    verdicts = {m["device"]: [e["code"] for e in m["excluded_because"]] for m in doc["mig_devices"]}
    assert verdicts == {"0:2": [], "0:0": ["processes"], "0:1": ["reserved"]}
    assert [g["index"] for g in doc["gpus"]] == [0]  # the whole GPUs' list keeps its shape

    two = run_free("--scenario", str(path), "-n", "2", label=scope)
    assert two.returncode == 1 and two.stdout == ""
    assert "a CUDA process uses one MIG device" in two.stderr
