"""Per-GPU checks (persistence, ECC, remap, throttle, MIG, lost) and gpu.xid."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gputui.model.gpu import MigInstance, XidEvent
from gputui.model.status import HealthCheck, HealthStatus
from tests.support.health import gpu, gpu_reading, inputs, make_roots, run

S = HealthStatus


def _gpu_check(tmp_path: Path, check_id: str, **changes: Any) -> HealthCheck:
    reading = gpu_reading(gpu(3, **changes))
    return run(inputs(reading), make_roots(tmp_path))[f"{check_id}:3"]


# --- gpu.persistence ----------------------------------------------------------------------------


def test_persistence(tmp_path: Path) -> None:
    assert _gpu_check(tmp_path, "gpu.persistence").status is S.PASS
    off = _gpu_check(tmp_path, "gpu.persistence", persistence_mode=False)
    assert off.status is S.WARN
    assert off.fix is not None
    assert "nvidia-persistenced" in off.fix
    assert "-i 3 -pm 1" in off.fix
    assert off.docs is not None
    assert "persistence" in off.docs
    assert off.subject == "3"
    assert _gpu_check(tmp_path, "gpu.persistence", persistence_mode=None).status is S.SKIP


# --- gpu.ecc ------------------------------------------------------------------------------------


def test_ecc_pass(tmp_path: Path) -> None:
    assert _gpu_check(tmp_path, "gpu.ecc").status is S.PASS


def test_ecc_pending_mode_change_warns(tmp_path: Path) -> None:
    check = _gpu_check(tmp_path, "gpu.ecc", ecc_mode_pending=False)
    assert check.status is S.WARN
    assert "pending (on → off)" in check.summary
    assert check.fix is not None
    assert "Reboot" in check.fix


def test_ecc_uncorrected_errors_fail(tmp_path: Path) -> None:
    check = _gpu_check(tmp_path, "gpu.ecc", ecc_uncorrected_volatile=1, ecc_mode_pending=False)
    assert check.status is S.FAIL  # errors outrank the pending mode change
    assert check.summary.startswith("1 uncorrectable ECC error(s)")
    assert check.fix is not None
    assert "RMA" in check.fix


def test_ecc_disabled_is_info_and_unsupported_skips(tmp_path: Path) -> None:
    disabled = _gpu_check(tmp_path, "gpu.ecc", ecc_mode_current=False, ecc_mode_pending=False)
    assert disabled.status is S.INFO
    unsupported = _gpu_check(
        tmp_path,
        "gpu.ecc",
        ecc_mode_current=None,
        ecc_mode_pending=None,
        ecc_uncorrected_volatile=None,
    )
    assert unsupported.status is S.SKIP


# --- gpu.remap ----------------------------------------------------------------------------------


def test_remap(tmp_path: Path) -> None:
    assert _gpu_check(tmp_path, "gpu.remap").status is S.PASS
    pending = _gpu_check(tmp_path, "gpu.remap", remapped_rows_pending=True)
    assert pending.status is S.WARN
    assert pending.fix is not None
    assert "nvidia-smi -r -i 3" in pending.fix
    failed = _gpu_check(
        tmp_path, "gpu.remap", remapped_rows_pending=True, remapped_rows_failure=True
    )
    assert failed.status is S.FAIL
    assert failed.fix is not None
    assert "RMA" in failed.fix
    unsupported = _gpu_check(
        tmp_path, "gpu.remap", remapped_rows_pending=None, remapped_rows_failure=None
    )
    assert unsupported.status is S.SKIP


# --- gpu.throttle -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reasons", "status", "summary_part", "fix_part"),
    [
        (0x0, S.PASS, "Not throttled", None),
        (0x1, S.PASS, "Idle", None),
        (0x2, S.PASS, "Not throttled", None),
        (0x4, S.INFO, "SW power cap", "-pl"),
        (0x40, S.WARN, "HW thermal", "cooling"),
        (0x20, S.WARN, "SW thermal", "cooling"),
        (0x8, S.WARN, "HW slowdown", "PSU"),
        (0x80, S.WARN, "HW power brake", "power supply"),
        (0x44, S.WARN, "HW thermal", "cooling"),
    ],
)
def test_throttle(
    tmp_path: Path, reasons: int, status: HealthStatus, summary_part: str, fix_part: str | None
) -> None:
    check = _gpu_check(tmp_path, "gpu.throttle", throttle_reasons=reasons)
    assert check.status is status
    assert summary_part in check.summary
    if fix_part is None:
        assert check.fix is None
    else:
        assert check.fix is not None
        assert fix_part in check.fix
    assert f"0x{reasons:x}" in check.details[0]


def test_throttle_skip_when_unknown(tmp_path: Path) -> None:
    assert _gpu_check(tmp_path, "gpu.throttle", throttle_reasons=None).status is S.SKIP


# --- gpu.mig ------------------------------------------------------------------------------------


def test_mig(tmp_path: Path) -> None:
    assert _gpu_check(tmp_path, "gpu.mig").status is S.PASS
    instance = MigInstance(0, "MIG-0", 1, 0, 0, 10 << 30)
    enabled = _gpu_check(
        tmp_path,
        "gpu.mig",
        mig_mode_current=True,
        mig_mode_pending=True,
        mig_instances=(instance,),
    )
    assert enabled.status is S.INFO
    assert "per-process utilization are not available" in enabled.summary
    assert "1 MIG device(s)" in enabled.details
    pending = _gpu_check(tmp_path, "gpu.mig", mig_mode_pending=True)
    assert pending.status is S.WARN
    assert pending.fix is not None
    assert "nvidia-smi -r -i 3" in pending.fix
    unsupported = _gpu_check(tmp_path, "gpu.mig", mig_mode_current=None, mig_mode_pending=None)
    assert unsupported.status is S.SKIP


# --- gpu.lost -----------------------------------------------------------------------------------


def test_lost(tmp_path: Path) -> None:
    assert _gpu_check(tmp_path, "gpu.lost").status is S.PASS
    lost = _gpu_check(tmp_path, "gpu.lost", lost=True, error="GPU is lost")
    assert lost.status is S.FAIL
    assert lost.summary == "GPU lost (fallen off the bus)"
    assert "error: GPU is lost" in lost.details
    assert lost.fix is not None
    assert "reboot" in lost.fix


def test_lost_pairs_with_xid_79(tmp_path: Path) -> None:
    reading = gpu_reading(
        gpu(0, lost=True),
        gpu(1),
        xids=(XidEvent(gpu_index=1, xid=79, at=1.0), XidEvent(gpu_index=0, xid=79, at=2.0)),
    )
    checks = run(inputs(reading), make_roots(tmp_path))
    assert checks["gpu.lost:0"].summary.endswith("after XID 79")
    assert any("XID 79" in d for d in checks["gpu.lost:0"].details)
    assert checks["gpu.lost:1"].status is S.PASS


# --- gpu.xid ------------------------------------------------------------------------------------


def _xid(tmp_path: Path, *events: XidEvent) -> HealthCheck:
    return run(inputs(gpu_reading(xids=events)), make_roots(tmp_path))["gpu.xid"]


def test_xid_pass_when_none(tmp_path: Path) -> None:
    assert _xid(tmp_path).status is S.PASS


def test_xid_application_errors_warn(tmp_path: Path) -> None:
    check = _xid(tmp_path, XidEvent(0, 13, 1_700_000_000.0), XidEvent(0, 31, 1_700_000_100.0))
    assert check.status is S.WARN
    assert "13, 31" in check.summary
    assert check.details[0].startswith("GPU 0: XID 13 at ")
    assert "graphics engine exception" in check.details[0]
    assert check.docs is not None
    assert "xid-errors" in check.docs


@pytest.mark.parametrize("xid", [79, 48, 63, 64, 74, 92, 94, 95])
def test_xid_critical_fail(tmp_path: Path, xid: int) -> None:
    check = _xid(tmp_path, XidEvent(0, 13, 1.0), XidEvent(1, xid, 2.0))
    assert check.status is S.FAIL
    assert f"Critical XID error(s) {xid} (2 event(s))" == check.summary
    assert check.details[1].startswith(f"GPU 1: XID {xid} at ")
