"""Age texts and status notes for figures read in turn (gputui.derive.freshness)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from gputui.collect.collector import join_processes
from gputui.collect.linux.proc_reader import ProcSource
from gputui.derive.freshness import (
    age_text,
    container_stats_note,
    figure_age,
    process_figures_note,
)
from gputui.model.containers import ContainerInfo
from gputui.model.gpu import GpuProcessSample, GpuReading, GpuSample
from gputui.model.snapshot import ContainerUsage, HostInfo, Snapshot
from gputui.model.status import SourceStatus

EPOCH = 1_800_000_000.0


@pytest.mark.parametrize(
    ("taken", "sampled", "text"),
    [
        (EPOCH, None, ""),
        (EPOCH, EPOCH, ""),
        (EPOCH + 0.6, EPOCH, ""),
        (EPOCH + 3.6, EPOCH, "4s"),
        (EPOCH + 99.0, EPOCH, "99s"),
        (EPOCH + 150.0, EPOCH, "2m"),
        (EPOCH - 2.0, EPOCH, ""),  # a clock step backwards: never a negative age
    ],
)
def test_age_text(taken: float, sampled: float | None, text: str) -> None:
    assert age_text(taken, sampled) == text


def test_figure_age() -> None:
    assert figure_age(EPOCH + 2.5, EPOCH) == 2.5
    assert figure_age(EPOCH, None) is None


@pytest.fixture
def sleepers() -> Iterator[list[int]]:
    children = [subprocess.Popen(["sleep", "60"]) for _ in range(8)]
    yield [c.pid for c in children]
    for child in children:
        child.kill()
        child.wait()


def _snapshot(pids: list[int], source: ProcSource, taken_at: float) -> Snapshot:
    gpus = tuple(
        GpuSample(index=g, uuid=f"GPU-{g}", name="NVIDIA H200",
                  processes=tuple(GpuProcessSample(p, g, 1 << 20) for p in pids))
        for g in range(2)
    )  # fmt: skip
    reading = GpuReading(SourceStatus("nvml", ok=True), gpus=gpus)
    return Snapshot(
        taken_at=taken_at,
        mode="scenario",
        host=HostInfo(hostname="h"),
        gpus=gpus,
        processes=join_processes(reading, source.read(pids)),
    )


def test_process_note_only_when_figures_are_read_in_turn(sleepers: list[int]) -> None:
    now = [100.0]
    every = ProcSource(clock=lambda: now[0], wall=lambda: EPOCH + now[0])
    assert process_figures_note(_snapshot(sleepers, every, EPOCH + now[0])) is None
    rotating = ProcSource(
        clock=lambda: now[0], wall=lambda: EPOCH + now[0], full_read_max=2, sample_window=4.0
    )
    notes = []
    for _ in range(8):
        now[0] += 1.0
        notes.append(process_figures_note(_snapshot(sleepers, rotating, EPOCH + now[0])))
    # Each process on two GPUs counts once; the oldest figure is 3 s old at 1 s refreshes.
    assert notes[-1] == "CPU/RSS of 8 processes read in turn: up to 3 s old"
    every.close()
    rotating.close()


def test_container_note() -> None:
    def usage(n: int, at: float | None) -> ContainerUsage:
        info = ContainerInfo(id=f"{n:064x}", name=f"c{n}", image="i", status="running",
                             stats_sampled_at=at)  # fmt: skip
        return ContainerUsage(info=info)

    usages = (usage(1, EPOCH + 6), usage(2, EPOCH + 10), usage(3, None))
    snap = Snapshot(
        taken_at=EPOCH + 10, mode="live", host=HostInfo(hostname="h"), containers=usages
    )
    assert container_stats_note(snap) == "CPU/memory of 2 containers read in turn: up to 4 s old"
    plain = Snapshot(taken_at=EPOCH, mode="live", host=HostInfo(hostname="h"),
                     containers=(usage(1, None),))  # fmt: skip
    assert container_stats_note(plain) is None
