"""The fault attributor's memory of GPU processes: kept for a while, bounded, newest first."""

from __future__ import annotations

import pytest

from gputui.collect import fault_attribution
from gputui.collect.fault_attribution import FaultAttributor
from gputui.collect.linux.kernel_faults import KmsgRecord, XidLine, parse_line
from gputui.collect.linux.kmsg import FaultLine
from gputui.model.gpu import GpuProcessSample, GpuSample
from gputui.model.processes import GpuProcess, ProcessInfo

_GPU = GpuSample(index=0, uuid="GPU-0", name="H200", pci_bus_id="00000000:3B:00.0")
_CONTAINER = "c" * 64


def _proc(pid: int, start: float = 1.0) -> GpuProcess:
    sample = GpuProcessSample(pid=pid, gpu_index=0, used_memory_bytes=1 << 30)
    return GpuProcess(sample, ProcessInfo(pid, name=f"job{pid}", start_time=start), _CONTAINER)


def _line(at: float, pid: int | None = None) -> FaultLine:
    named = "" if pid is None else f" pid={pid}, name=job{pid},"
    message = f"NVRM: Xid (PCI:0000:3b:00): 31,{named} Ch 00000010, intr 10000000"
    parsed = parse_line(message)
    assert isinstance(parsed, XidLine)
    return FaultLine(KmsgRecord(3, int(at), int(at * 1e6), 0, message), at, parsed)


def _attributor() -> FaultAttributor:
    # The PIDs here are not running: every fault is judged from the memory alone.
    return FaultAttributor(live=lambda pid: None)


def test_a_process_gone_within_the_memory_is_named_after_it_is_forgotten_not() -> None:
    attributor = _attributor()
    attributor.observe([_proc(10), _proc(11)], [], now=100.0)
    attributor.observe([_proc(11)], [], now=130.0)  # 10 left after 100 s
    attributor.attribute([_line(130.0, pid=10)], [_GPU])
    assert attributor.faults()[-1].attribution == "recent_process"
    assert attributor.faults()[-1].container_id == _CONTAINER
    attributor.observe([_proc(11)], [], now=200.0)  # 100 s after 10 was last seen
    attributor.attribute([_line(200.0, pid=10)], [_GPU])
    assert attributor.faults()[-1].attribution == "pid_only"


def test_candidates_are_the_processes_on_the_gpu_at_the_line() -> None:
    attributor = _attributor()
    attributor.observe([_proc(10), _proc(11)], [], now=100.0)
    attributor.observe([_proc(11)], [], now=120.0)
    attributor.attribute([_line(120.0)], [_GPU])
    fault = attributor.faults()[-1]
    assert fault.attribution == "candidates"
    assert [c.pid for c in fault.candidates] == [11]


def test_the_most_recently_seen_are_the_candidates_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fault_attribution, "MAX_CANDIDATES", 1)
    attributor = _attributor()
    attributor.observe([_proc(10), _proc(11)], [], now=100.0)
    attributor.observe([_proc(10)], [], now=103.0)  # 11, remembered later, was seen earlier
    attributor.attribute([_line(103.0)], [_GPU])
    assert [c.pid for c in attributor.faults()[-1].candidates] == [10]


def test_the_memory_is_bounded_and_makes_room_as_processes_age(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fault_attribution, "MAX_REMEMBERED", 3)
    attributor = _attributor()
    attributor.observe([_proc(pid) for pid in range(10, 15)], [], now=100.0)
    attributor.attribute([_line(100.0)], [_GPU])
    assert [c.pid for c in attributor.faults()[-1].candidates] == [10, 11, 12]
    # A minute and more later, the first three are gone: the newcomers find room.
    attributor.observe([_proc(20), _proc(21)], [], now=200.0)
    attributor.attribute([_line(200.0)], [_GPU])
    assert [c.pid for c in attributor.faults()[-1].candidates] == [20, 21]


def test_a_refresh_without_kernel_log_lines_attributes_nothing() -> None:
    attributor = _attributor()
    attributor.observe([_proc(10)], [], now=100.0)
    attributor.attribute([], [_GPU])
    assert attributor.faults() == () and attributor.counts() == ()
