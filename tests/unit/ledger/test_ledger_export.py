"""The exporter's ledger counters: ``gputui_gpu_seconds_total`` and ``gputui_energy_joules_total``.

Published snapshots through the exporter's own
:class:`~gputui.exporter.families.SnapshotMetrics`, read back with Prometheus's parser; a
real ``gputui export`` scraped over HTTP on loopback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gputui.exporter.families import SnapshotMetrics
from gputui.model.containers import ContainerInfo
from gputui.model.gpu import GpuProcessSample, GpuSample
from gputui.model.processes import GpuProcess, ProcessInfo
from gputui.model.snapshot import ContainerUsage, HostInfo, Snapshot
from tests.support.paths import REPO

MIB = 1024 * 1024
CID = "c" * 64
IDLE = "d" * 64


def _snap(t: float, energy_mj: int, name: str = "trainer") -> Snapshot:
    trainer = ContainerInfo(CID, name, "pytorch:25", "running", compose_project="llm")
    idle = ContainerInfo(IDLE, "idle", "cuda:12", "running", gpu_request=("1",))
    proc = GpuProcess(
        GpuProcessSample(11, 0, 1000 * MIB, sm_util=40), ProcessInfo(11, user="root"), CID
    )
    gpus = tuple(
        GpuSample(i, f"GPU-{i}", "NVIDIA H200", utilization_gpu=50 * (1 - i), total_energy_mj=e)
        for i, e in ((0, energy_mj), (1, energy_mj // 2))
    )
    return Snapshot(
        t,
        "scenario",
        HostInfo("node-7"),
        gpus=gpus,
        processes=(proc,),
        containers=(ContainerUsage(trainer, pids=(11,)), ContainerUsage(idle)),
    )


def _series(body: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            if s.name.startswith(("gputui_gpu_seconds", "gputui_energy_joules")):
                labels = tuple(sorted((k, v) for k, v in s.labels.items() if v))
                out[(s.name, labels)] = s.value
    return out


def _value(
    series: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **want: str
) -> float:
    found = [
        v for (n, labels), v in series.items() if n == name and set(want.items()) <= set(labels)
    ]
    assert len(found) == 1, (name, want, series)
    return found[0]


def test_counters_grow_by_each_interval_and_split_the_energy_counter() -> None:
    metrics = SnapshotMetrics(interval=1.0)
    metrics.publish(_snap(1000.0, 10**6))
    metrics.rebuild()
    assert _series(metrics.exposition()) == {}  # one snapshot: no interval yet
    for k in range(1, 6):
        metrics.publish(_snap(1000.0 + 2 * k, 10**6 + k * 800_000))
    metrics.rebuild()
    series = _series(metrics.exposition())
    seconds = "gputui_gpu_seconds_total"
    assert _value(series, seconds, kind="occupied", container="trainer", gpu="0") == 10
    assert _value(series, seconds, kind="busy", container="trainer", gpu="0") == 5
    assert _value(series, seconds, kind="reserved", container="idle", gpu="1") == 10
    assert _value(series, seconds, kind="occupied", party="unallocated", gpu="1") == 10
    assert _value(series, seconds, kind="reserved", container="trainer", gpu="0") == 0
    energy = sum(v for (n, _), v in series.items() if n == "gputui_energy_joules_total")
    assert energy == pytest.approx(5 * 800 + 5 * 400)  # both GPUs' counter deltas
    labels = dict(
        next(lab for (n, lab) in series if n == seconds and ("container", "trainer") in lab)
    )
    assert labels["compose_project"] == "llm" and labels["Hostname"] == "node-7"
    assert labels["container_id"] == CID and labels["party"] == "container"


def test_a_hostile_container_name_is_one_inert_label() -> None:
    metrics = SnapshotMetrics(interval=1.0)
    hostile = 'a"b\\c\nd\x1b]0;pwned\x07'
    metrics.publish(_snap(1000.0, 0, hostile))
    metrics.publish(_snap(1001.0, 100_000, hostile))
    metrics.rebuild()
    names = {
        dict(labels).get("container")
        for (n, labels) in _series(metrics.exposition())
        if n == "gputui_gpu_seconds_total"
    }
    names.discard(None)
    assert names - {"idle"}
    for name in names - {"idle"}:
        assert name is not None and "\x1b" not in name and "\x07" not in name and "\n" not in name


def test_a_real_exporter_serves_the_counters(tmp_path: Path) -> None:
    scenario = tmp_path / "s.json"
    scenario.write_text(
        json.dumps(
            {
                "gpus": [
                    {
                        "index": 0,
                        "utilization_gpu": 40,
                        "total_energy_mj": [k * 100_000 for k in range(500)],
                    }
                ]
            }
        )
    )
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gputui",
            "export",
            "--scenario",
            str(scenario),
            "--listen",
            "127.0.0.1:0",
            "--interval",
            "0.2",
        ],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stderr is not None
        line = child.stderr.readline()
        url = line.split("serving ", 1)[1].split()[0]
        deadline = time.monotonic() + 60
        while True:
            body = urllib.request.urlopen(url, timeout=10).read()
            series = _series(body)
            if (
                series
                and _value(series, "gputui_gpu_seconds_total", kind="busy", party="unknown") > 0
            ):
                break
            assert time.monotonic() < deadline, body.decode()[-2000:]
            time.sleep(0.2)
        assert _value(series, "gputui_gpu_seconds_total", kind="occupied", party="unallocated") > 0
        # A scenario is not this host: no store is written without --store.
        assert "ledger" not in line
    finally:
        child.terminate()
        child.wait(timeout=60)
