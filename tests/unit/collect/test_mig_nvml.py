"""The NVML adapter's MIG path: what a GPU without MIG costs, and MIG handles apart from their GPU.

The stand-in is the scenario's pynvml-shaped module (raising the real ``pynvml.NVMLError_*``)
with every ``nvmlDevice*`` call counted, on a clock the test moves.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pynvml
import pytest

from gputui.collect.nvml.source import NvmlSource
from gputui.collect.standins.scenario import ScenarioNvml
from tests.support.paths import FIXTURES

FIXTURE = FIXTURES / "mig-three-instances.json"
#: The calls the MIG layout takes; none of them may run for a GPU without MIG.
LAYOUT_CALLS = (
    "nvmlDeviceGetMaxMigDeviceCount",
    "nvmlDeviceGetMigDeviceHandleByIndex",
    "nvmlDeviceGetGpuInstanceId",
    "nvmlDeviceGetComputeInstanceId",
    "nvmlDeviceGetAttributes",
    "nvmlDeviceGetGpuInstanceById",
)


class _Counted:
    """``ScenarioNvml`` with every ``nvmlDevice*`` call counted; ``mig_mode`` overrides NVML's."""

    def __init__(self, data: dict[str, Any], mig_mode: Any = None) -> None:
        self.inner = ScenarioNvml(data)
        self.calls: Counter[str] = Counter()
        self.mig_mode = mig_mode

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.inner, name)
        if not name.startswith("nvmlDevice") or not callable(value):
            return value

        def counted(*args: Any, **kw: Any) -> Any:
            self.calls[name] += 1
            if name == "nvmlDeviceGetMigMode" and self.mig_mode is not None:
                if isinstance(self.mig_mode, type):
                    raise self.mig_mode()
                return list(self.mig_mode)
            return value(*args, **kw)

        counted.__name__ = name
        return counted


def _plain_h200() -> dict[str, Any]:
    return {"gpus": [{"index": 0, "name": "NVIDIA H200", "utilization_gpu": 3}]}


@pytest.mark.parametrize(
    ("mig_mode", "expected"),
    [(pynvml.NVMLError_NotSupported, None), ((0, 0), False)],
)
def test_a_gpu_without_mig_costs_at_most_one_mig_call_per_medium_tick(
    mig_mode: Any, expected: bool | None
) -> None:
    nv = _Counted(_plain_h200(), mig_mode)
    clock = [0.0]
    source = NvmlSource(
        nv, background=False, clock=lambda: clock[0], slow_interval=60.0, medium_interval=5.0
    )
    first = source.read()
    gpu = first.gpus[0]
    assert (gpu.mig_mode_current, gpu.mig_mode_pending) == (expected, expected)
    assert gpu.mig_instances == () and gpu.utilization_gpu == 3
    assert first.binding_problems == ()
    baseline = Counter(nv.calls)
    for second in range(1, 5):  # four refreshes inside the medium interval
        clock[0] = float(second)
        source.read()
    per_refresh = {k: (v - baseline[k]) / 4 for k, v in nv.calls.items()}
    assert per_refresh.get("nvmlDeviceGetMigMode", 0) == 0
    for name in LAYOUT_CALLS:
        assert nv.calls[name] == 0, name
    # The only call MIG/MPS support adds to every refresh: the MPS client list.
    assert per_refresh["nvmlDeviceGetMPSComputeRunningProcesses"] == 1
    clock[0] = 10.0
    before = nv.calls["nvmlDeviceGetMigMode"]
    source.read()
    # A new medium tick asks again, unless NVML said NotSupported (remembered, never asked again).
    assert nv.calls["nvmlDeviceGetMigMode"] - before == (0 if expected is None else 1)
    source.close()


def test_an_unsupported_answer_on_a_mig_device_is_not_remembered_for_its_gpu() -> None:
    data = json.loads(FIXTURE.read_text())
    nv = _Counted(data)
    source = NvmlSource(nv, background=False, medium_interval=0.0, slow_interval=60.0)
    for _ in range(2):
        reading = source.read()
    gpu = reading.gpus[0]
    # The MIG devices answer memory; their GPU's own memory query keeps being answered too.
    assert gpu.memory_used_bytes == 30000 * 1024 * 1024
    assert [m.memory_used_bytes for m in gpu.mig_instances if m.index >= 0] == [
        20000 * 1024 * 1024,
        10000 * 1024 * 1024,
        0,
    ]
    # Utilization is unsupported on a MIG GPU: N/A, never 0.
    assert gpu.utilization_gpu is None
    source.close()


def test_a_lost_gpu_during_the_mig_layout_marks_only_that_gpu_lost() -> None:
    data = json.loads(FIXTURE.read_text())
    data["gpus"][0]["errors"] = {"mig_instances": [None, "GpuIsLost"]}
    nv = ScenarioNvml(data)
    source = NvmlSource(nv, background=False, medium_interval=0.0)
    assert not source.read().gpus[0].lost
    nv.step = 1
    second = source.read()
    assert second.gpus[0].lost and not second.gpus[1].lost
    source.close()


def test_processes_name_their_mig_device_and_keep_it_through_a_report() -> None:
    from gputui.collect.collector import Collector
    from gputui.collect.standins import demo
    from gputui.collect.standins.scenario import ScenarioSource
    from gputui.present.json_report import snapshot_to_json
    from gputui.recording.codec import snapshot_from_report

    data = json.loads(FIXTURE.read_text())
    data["gpus"][0]["mig_instances"][2]["processes"] = [{"pid": 77, "used_memory_mib": 5}]
    collector = Collector(
        ScenarioSource(data), demo.DemoProcesses(), demo.DemoContainers(), mode="scenario"
    )
    snapshot = collector.collect()
    collector.close()
    by_pid = {p.pid: p.sample for p in snapshot.processes}
    assert (by_pid[77].mig_index, by_pid[77].mig_gi_id, by_pid[77].mig_ci_id) == (2, 3, 0)
    assert by_pid[4000001].mig_index == 0
    back = snapshot_from_report(json.loads(json.dumps(snapshot_to_json(snapshot))))
    assert {p.pid: p.sample.mig_index for p in back.processes} == {
        p.pid: p.sample.mig_index for p in snapshot.processes
    }
