"""GPM figures and energy in every output: findings, per-party activity, JSON, text, exporter."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry

from gputui.boundary import sanitise
from gputui.collect.standins.demo import DEMO_SCENARIO
from gputui.collect.standins.scenario import ScenarioSource
from gputui.derive import units
from gputui.derive.activity import activity_estimates
from gputui.derive.findings import FindingsEngine, gpm_findings
from gputui.exporter.families import gpu_families
from gputui.model.gpu import GpuProcessSample, GpuSample
from gputui.model.processes import GpuProcess, ProcessInfo
from gputui.model.settings import Settings
from gputui.model.snapshot import HostInfo, Snapshot
from gputui.present.json_report import snapshot_to_json
from gputui.present.text_report import snapshot_to_text
from gputui.wiring.compose import build_collector


def _gpu(**fields: Any) -> GpuSample:
    return GpuSample(index=0, uuid="GPU-a", name="NVIDIA H200", **fields)


def _snapshot(*gpus: GpuSample, processes: tuple[GpuProcess, ...] = ()) -> Snapshot:
    return Snapshot(
        taken_at=0.0, mode="scenario", host=HostInfo("h"), gpus=gpus, processes=processes
    )


def _proc(pid: int, sm: int | None, cid: str | None = None, gpu: int = 0) -> GpuProcess:
    sample = GpuProcessSample(pid=pid, gpu_index=gpu, used_memory_bytes=1 << 30, sm_util=sm)
    return GpuProcess(sample, ProcessInfo(pid=pid, exists=True, name="python"), cid)


def _kinds(snapshot: Snapshot) -> set[str]:
    return {f.kind for f in gpm_findings(snapshot)}


def test_busy_but_idle_between_kernels_needs_gpm() -> None:
    busy = _gpu(utilization_gpu=100, gpm_sm_active=4.0, gpm_tensor_active=0.0, gpm_dram_active=1.0)
    findings = gpm_findings(_snapshot(busy))
    assert [f.kind for f in findings] == ["gpu_idle_between_kernels"]
    assert "busy 100% but SM activity 4%" in findings[0].summary
    assert "input pipeline" in findings[0].summary and "try" in findings[0].summary
    # The same util without GPM figures says nothing: util alone cannot tell.
    assert _kinds(_snapshot(_gpu(utilization_gpu=100))) == set()
    # Busy SMs at the same util: no finding.
    assert _kinds(_snapshot(replace(busy, gpm_sm_active=70.0))) == set()


def test_fp32_matmuls_and_memory_bound_jobs() -> None:
    fp32 = _gpu(utilization_gpu=99, gpm_sm_active=80.0, gpm_tensor_active=0.0, gpm_fp32_active=45.0)
    assert _kinds(_snapshot(fp32)) == {"tensor_cores_unused"}
    assert "TF32" in gpm_findings(_snapshot(fp32))[0].summary
    bound = _gpu(
        utilization_gpu=97, gpm_sm_active=70.0, gpm_tensor_active=12.0, gpm_dram_active=91.0
    )
    assert _kinds(_snapshot(bound)) == {"memory_bandwidth_bound"}
    # Tensor-bound work with a busy memory is no bandwidth finding.
    tensor = replace(bound, gpm_tensor_active=85.0)
    assert _kinds(_snapshot(tensor)) == set()


def test_the_engine_raises_gpm_findings_for_the_demo() -> None:
    source = ScenarioSource(DEMO_SCENARIO, wall=lambda: 0.0)
    snapshot = _snapshot(*source.read().gpus)
    found = {(f.kind, f.subject) for f in FindingsEngine().update(snapshot)}
    assert ("gpu_idle_between_kernels", "gpu:1") in found  # batch-1 serving
    assert ("memory_bandwidth_bound", "gpu:2") in found  # LLM decoding
    assert not any(subject == "gpu:0" for kind, subject in found if kind.startswith("gpu_idle"))


def test_activity_estimates_split_and_sum_to_the_gpu() -> None:
    gpu = _gpu(utilization_gpu=90, gpm_sm_active=60.0, gpm_tensor_active=30.0)
    shared = _snapshot(gpu, processes=(_proc(1, 30, "a" * 64), _proc(2, 10, "b" * 64)))
    rows = activity_estimates(shared)
    assert [(r.party[:1], round(r.sm_active, 6), r.exact) for r in rows] == [
        ("a", 45.0, False),
        ("b", 15.0, False),
    ]
    assert abs(sum(r.sm_active for r in rows) - 60.0) < 1e-9
    # Tensor activity is not split by SM time: on a shared device nobody gets a share of it.
    assert [r.tensor_active for r in rows] == [None, None]
    # Alone on the GPU: exact, whatever the per-process figure.
    alone = activity_estimates(_snapshot(gpu, processes=(_proc(1, None, "a" * 64),)))
    assert [(r.sm_active, r.tensor_active, r.exact) for r in alone] == [(60.0, 30.0, True)]
    # Shared with a share unknown: no estimate rather than a wrong one.
    unknown = _snapshot(gpu, processes=(_proc(1, 30, "a" * 64), _proc(2, None, "b" * 64)))
    assert activity_estimates(unknown) == ()
    # Without GPM: nothing.
    assert activity_estimates(_snapshot(_gpu(utilization_gpu=90), processes=(_proc(1, 30),))) == ()


def _demo_snapshot() -> tuple[Snapshot, Any]:
    collector = build_collector(Settings(demo=True), once=True)
    snapshot = collector.collect()
    return snapshot, collector


def test_json_and_text_carry_gpm_energy_and_mig_utilization() -> None:
    snapshot, _ = _demo_snapshot()
    doc = snapshot_to_json(snapshot)
    gpu0 = doc["gpus"][0]
    assert gpu0["gpm_sm_active"] is not None and gpu0["gpm_note"] is None
    assert gpu0["total_energy_mj"] > 0 and gpu0["energy_integrated_j"] is not None
    mig = doc["gpus"][3]["mig_instances"][0]
    # NVML has no utilization per MIG device: GPM's graphics activity of its GPU instance.
    assert mig["utilization_gpu"] == round(mig["gpm_graphics_active"])
    assert mig["utilization_na_reason"] is None
    assert doc["gpus"][3]["gpm_note"] == "per GPU instance (MIG enabled)"
    by_device: dict[str, float] = {}
    for row in doc["gpu_activity"]:
        by_device[row["device"]] = by_device.get(row["device"], 0.0) + row["sm_active"]
    for gpu in doc["gpus"]:
        if str(gpu["index"]) in by_device:
            assert abs(by_device[str(gpu["index"])] - gpu["gpm_sm_active"]) < 0.05
    assert {row["estimate"] for row in doc["gpu_activity"] if row["device"] == "1"} == {True}
    text = snapshot_to_text(snapshot)
    assert "GPU activity (util = a kernel was running; SM act = share of SMs working" in text
    assert "exact (alone on it)" in text and "estimate (" in text


def test_exporter_serves_dcgm_profiling_ratios_and_the_energy_counter() -> None:
    snapshot, _ = _demo_snapshot()
    registry = CollectorRegistry(auto_describe=False)

    class _Families:
        def collect(self) -> Any:
            return gpu_families(snapshot)

    registry.register(_Families())  # type: ignore[arg-type,unused-ignore]
    text = generate_latest(registry).decode()
    gpu0 = snapshot.gpus[0]
    assert gpu0.gpm_sm_active is not None and gpu0.gpm_pcie_rx_bytes_per_s is not None
    sm = re.search(r'^DCGM_FI_PROF_SM_ACTIVE\{[^}]*gpu="0"[^}]*\} (\S+)$', text, re.M)
    assert sm is not None and float(sm.group(1)) == gpu0.gpm_sm_active / 100
    rx = re.search(r'^DCGM_FI_PROF_PCIE_RX_BYTES\{[^}]*gpu="0"[^}]*\} (\S+)$', text, re.M)
    assert rx is not None and float(rx.group(1)) == gpu0.gpm_pcie_rx_bytes_per_s
    # Per MIG device, with dcgm-exporter's GPU instance labels.
    assert re.search(r'^DCGM_FI_PROF_SM_ACTIVE\{GPU_I_ID="1",GPU_I_PROFILE="3g.71gb"', text, re.M)
    # The counter keeps DCGM's bare name (no _total), untyped.
    assert "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION untyped" in text
    energy = re.search(
        r'^DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION\{[^}]*gpu="0"[^}]*\} (\S+)$', text, re.M
    )
    assert energy is not None and float(energy.group(1)) == gpu0.total_energy_mj
    # A GPU without GPM has no profiling sample, never a 0.
    plain = _snapshot(_gpu(utilization_gpu=50))
    registry2 = CollectorRegistry(auto_describe=False)

    class _Plain:
        def collect(self) -> Any:
            return gpu_families(plain)

    registry2.register(_Plain())  # type: ignore[arg-type,unused-ignore]
    assert not re.search(r"^DCGM_FI_PROF_SM_ACTIVE\{", generate_latest(registry2).decode(), re.M)


def test_energy_keeps_three_significant_figures() -> None:
    # A counter of 94 kJ since the driver loaded read "0.0kWh" in the text report.
    assert units.energy(94_262.071) == "94.3kJ"
    assert units.energy(850.0) == "850J"
    assert units.energy(45.36e6) == "12.6kWh"
    assert units.energy(None) == sanitise.NA
