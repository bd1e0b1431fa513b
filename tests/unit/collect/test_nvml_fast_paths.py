"""The cheap paths of the NVML read: sample averaging, and the scenario stand-in's replayed replies.

Both exist for speed only, so each is checked against the plain way of computing the same thing.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.collect.nvml.slow_lane import average_samples
from gputui.collect.standins import scenario as scenario_module
from gputui.collect.standins.scenario import ScenarioNvml, ScenarioSource


def _reference_average(samples: list[Any], since: int) -> tuple[dict[int, Any], int]:
    """The straightforward averaging (per PID, each field clamped to 0-100, floor mean)."""
    sums: dict[int, list[int]] = {}
    newest = since
    for s in samples:
        newest = max(newest, int(s.timeStamp))
        acc = sums.setdefault(int(s.pid), [0, 0, 0, 0, 0])
        for i, v in enumerate((s.smUtil, s.memUtil, s.encUtil, s.decUtil)):
            acc[i] += min(100, max(0, int(v)))
        acc[4] += 1
    return {
        pid: (a[0] // a[4], a[1] // a[4], a[2] // a[4], a[3] // a[4]) for pid, a in sums.items()
    }, newest


util = st.integers(-(2**32), 2**32)
sample = st.builds(
    SimpleNamespace,
    pid=st.integers(1, 6),
    timeStamp=st.integers(0, 2**40),
    smUtil=util,
    memUtil=util,
    encUtil=util,
    decUtil=util,
)


@settings(max_examples=400)
@given(st.lists(sample, max_size=30), st.integers(0, 2**40))
def test_average_samples_is_the_plain_average(samples: list[Any], since: int) -> None:
    assert average_samples(samples, since) == _reference_average(samples, since)


def _scenario() -> dict[str, Any]:
    procs = [
        {"pid": 1000 + k, "used_memory_mib": [100 + k, 200, 300][: 2 + k % 2], "sm_util": [k, 0, 7]}
        for k in range(6)
    ]
    procs.append({"pid": 2000, "used_memory_mib": 50, "sm_util": 0, "type": "G"})
    procs.append({"pid": 2001, "used_memory_mib": [1, 2, 3, 4, 5], "type": "C+G", "mem_util": 9})
    return {
        "gpus": [
            {"index": 0, "uuid": "GPU-0000000a-0000-0000-0000-000000000000", "processes": procs},
            {
                "index": 1,
                "uuid": "GPU-0000000b-0000-0000-0000-000000000000",
                "processes": [{"pid": 3000, "sm_util": [0, 0]}],
            },
        ]
    }


def _replies(nv: ScenarioNvml, steps: int) -> list[Any]:
    out: list[Any] = []
    for step in range(steps):
        nv.step = step
        for pos in range(2):
            handle = nv.nvmlDeviceGetHandleByIndex(pos)
            for fn in (nv.nvmlDeviceGetComputeRunningProcesses,
                       nv.nvmlDeviceGetGraphicsRunningProcesses):  # fmt: skip
                out.append([sorted(vars(p).items()) for p in fn(handle)])
            try:
                samples = nv.nvmlDeviceGetProcessUtilization(handle, 1000 * step)
            except nv.NVMLError as exc:
                out.append(type(exc).__name__)
            else:
                out.append([sorted(vars(s).items()) for s in samples])
    return out


def test_scenario_replies_are_the_same_replayed_or_built(monkeypatch: pytest.MonkeyPatch) -> None:
    replayed = _replies(ScenarioNvml(_scenario()), 40)
    monkeypatch.setattr(scenario_module, "_MAX_PHASES", 0)  # build every reply afresh
    built = _replies(ScenarioNvml(_scenario()), 40)
    assert replayed == built
    # The series really move: the replies are not all one.
    assert len({repr(r) for r in built}) > 6


def test_a_reply_kept_by_the_caller_is_not_changed_by_the_next_call() -> None:
    nv = ScenarioNvml(_scenario())
    handle = nv.nvmlDeviceGetHandleByIndex(0)
    first = nv.nvmlDeviceGetComputeRunningProcesses(handle)
    count = len(first)
    nv.step = 6  # the same phase of every series: the kept reply is replayed
    again = nv.nvmlDeviceGetComputeRunningProcesses(handle)
    again.clear()
    assert len(first) == count


def test_scenario_source_reads_the_same_with_or_without_replay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def fixed() -> float:
        return 1_800_000_000.0

    fast = ScenarioSource(_scenario(), wall=fixed)
    fast_reads = [fast.read().gpus for _ in range(12)]
    monkeypatch.setattr(scenario_module, "_MAX_PHASES", 0)
    plain = ScenarioSource(_scenario(), wall=fixed)
    plain_reads = [plain.read().gpus for _ in range(12)]
    assert [[g.processes for g in r] for r in fast_reads] == [
        [g.processes for g in r] for r in plain_reads
    ]
