"""Runtime-health checks about each GPU's state and the driver's XID events.

Per GPU: persistence, ECC, row remapping, throttling, MIG and loss.

Per-GPU checks take the :class:`CheckContext` and the :class:`GpuSample` they judge; they read only
what the NVML source put in the :class:`GpuReading`.
"""

from __future__ import annotations

from gputui import timestamps
from gputui.health.base import (
    DOCS_MEMORY_ERRORS,
    DOCS_MIG,
    DOCS_PERSISTENCE,
    DOCS_XID,
    FAIL,
    INFO,
    PASS,
    SKIP,
    WARN,
    CheckContext,
    nvml_skip,
)
from gputui.model import THROTTLE_REASONS, GpuSample, HealthCheck

# --------------------------------------------------------------------------------------------
# Per-GPU checks


def _gpu_id(base: str, gpu: GpuSample) -> str:
    return f"{base}:{gpu.index}"


def _gpu_name(gpu: GpuSample) -> str:
    return f"GPU {gpu.index} ({gpu.name or 'unknown model'})"


def check_gpu_persistence(ctx: CheckContext, gpu: GpuSample) -> HealthCheck:
    """Persistence mode: off means every new client re-initialises the driver (seconds)."""
    check_id = _gpu_id("gpu.persistence", gpu)
    subject = str(gpu.index)
    if gpu.persistence_mode is None:
        return HealthCheck(
            id=check_id, status=SKIP, summary="Persistence mode not reported", subject=subject
        )
    if gpu.persistence_mode:
        return HealthCheck(id=check_id, status=PASS, summary="Persistence mode on", subject=subject)
    return HealthCheck(
        id=check_id,
        status=WARN,
        summary="Persistence mode off: every new GPU client re-initialises the driver",
        details=(f"{_gpu_name(gpu)}: persistence mode disabled",),
        fix=(
            "sudo systemctl enable --now nvidia-persistenced\n"
            f"(or, until the next reboot: sudo nvidia-smi -i {gpu.index} -pm 1)"
        ),
        docs=DOCS_PERSISTENCE,
        subject=subject,
    )


def check_gpu_ecc(ctx: CheckContext, gpu: GpuSample) -> HealthCheck:
    """ECC mode changes waiting for a reboot, and uncorrectable ECC errors."""
    check_id = _gpu_id("gpu.ecc", gpu)
    subject = str(gpu.index)
    current, pending = gpu.ecc_mode_current, gpu.ecc_mode_pending
    errors = gpu.ecc_uncorrected_volatile
    details = (
        f"ECC mode current={_on_off(current)} pending={_on_off(pending)}",
        f"uncorrected volatile ECC errors: {'n/a' if errors is None else errors}",
    )
    if errors is not None and errors > 0:
        return HealthCheck(
            id=check_id,
            status=FAIL,
            summary=f"{errors} uncorrectable ECC error(s) since the driver loaded",
            details=details,
            fix=(
                "Drain the GPU (stop its containers), then reset it "
                f"(`sudo nvidia-smi -r -i {gpu.index}`) or reboot. If errors recur, the GPU "
                "needs replacing (RMA)."
            ),
            docs=DOCS_MEMORY_ERRORS,
            subject=subject,
        )
    if current is not None and pending is not None and current != pending:
        return HealthCheck(
            id=check_id,
            status=WARN,
            summary=f"ECC mode change pending ({_on_off(current)} → {_on_off(pending)})",
            details=details,
            fix=f"Reboot, or reset the idle GPU: sudo nvidia-smi -r -i {gpu.index}",
            docs=DOCS_MEMORY_ERRORS,
            subject=subject,
        )
    if current is None and errors is None:
        return HealthCheck(
            id=check_id, status=SKIP, summary="ECC not supported on this GPU", subject=subject
        )
    if current is False:
        return HealthCheck(
            id=check_id, status=INFO, summary="ECC disabled", details=details, subject=subject
        )
    return HealthCheck(
        id=check_id,
        status=PASS,
        summary="ECC on, no uncorrectable errors",
        details=details,
        subject=subject,
    )


def _on_off(value: bool | None) -> str:
    return "n/a" if value is None else ("on" if value else "off")


def check_gpu_remap(ctx: CheckContext, gpu: GpuSample) -> HealthCheck:
    """Row remapping: pending needs a reset, failure means the memory is out of spare rows."""
    check_id = _gpu_id("gpu.remap", gpu)
    subject = str(gpu.index)
    pending, failure = gpu.remapped_rows_pending, gpu.remapped_rows_failure
    if pending is None and failure is None:
        return HealthCheck(
            id=check_id,
            status=SKIP,
            summary="Row remapping not supported (pre-Ampere GPUs retire pages instead)",
            subject=subject,
        )
    details = (f"remap pending={_yes_no(pending)} failure={_yes_no(failure)}",)
    if failure:
        return HealthCheck(
            id=check_id,
            status=FAIL,
            summary="Row remapping failed: no spare memory rows left",
            details=details,
            fix="Take the GPU out of service and replace it (RMA).",
            docs=DOCS_MEMORY_ERRORS,
            subject=subject,
        )
    if pending:
        return HealthCheck(
            id=check_id,
            status=WARN,
            summary="Row remap pending: reset the GPU to apply it",
            details=details,
            fix=f"When the GPU is idle: sudo nvidia-smi -r -i {gpu.index} (or reboot)",
            docs=DOCS_MEMORY_ERRORS,
            subject=subject,
        )
    return HealthCheck(
        id=check_id, status=PASS, summary="No row remapping pending", subject=subject
    )


def _yes_no(value: bool | None) -> str:
    return "n/a" if value is None else ("yes" if value else "no")


#: Throttle bits that call for action, with the fix.
_THROTTLE_ACTION: dict[int, str] = {
    0x40: "Check cooling: airflow, fans, inlet temperature, dust (`nvidia-smi -q -d TEMPERATURE`).",
    0x20: "Check cooling: the driver slows the GPU to stay under its temperature target.",
    0x08: "Hardware slowdown (thermal or power-supply signal): check cooling and the PSU.",
    0x80: "Power brake asserted by the system: check the power supply / rack power budget.",
}


def check_gpu_throttle(ctx: CheckContext, gpu: GpuSample) -> HealthCheck:
    """Clock-event (throttle) reasons: thermal and power problems slow the GPU down."""
    check_id = _gpu_id("gpu.throttle", gpu)
    subject = str(gpu.index)
    reasons = gpu.throttle_reasons
    if reasons is None:
        return HealthCheck(
            id=check_id, status=SKIP, summary="Throttle reasons not reported", subject=subject
        )
    names = [name for bit, name in THROTTLE_REASONS if reasons & bit]
    seen = [f"clock event reasons 0x{reasons:x}: {', '.join(names) or 'none'}"]
    if gpu.temperature_c is not None:
        seen.append(f"temperature {gpu.temperature_c} °C")
    if gpu.power_w is not None and gpu.power_limit_w is not None:
        seen.append(f"power {gpu.power_w:.0f} W of {gpu.power_limit_w:.0f} W")
    details = tuple(seen)
    serious = [bit for bit in _THROTTLE_ACTION if reasons & bit]
    if serious:
        labels = [name for bit, name in THROTTLE_REASONS if bit in serious]
        return HealthCheck(
            id=check_id,
            status=WARN,
            summary=f"Throttled: {', '.join(labels)}",
            details=details,
            fix="\n".join(_THROTTLE_ACTION[bit] for bit in serious),
            subject=subject,
        )
    if reasons & 0x04:
        return HealthCheck(
            id=check_id,
            status=INFO,
            summary="At its power limit (SW power cap): normal under full load",
            details=details,
            fix=(
                "Only if unexpected: check the limit with `nvidia-smi -q -d POWER`; raise it "
                f"with `sudo nvidia-smi -i {gpu.index} -pl <watts>`."
            ),
            subject=subject,
        )
    summary = "Idle" if reasons & 0x01 else "Not throttled"
    return HealthCheck(id=check_id, status=PASS, summary=summary, details=details, subject=subject)


def check_gpu_mig(ctx: CheckContext, gpu: GpuSample) -> HealthCheck:
    """MIG mode, and a MIG change waiting for a GPU reset."""
    check_id = _gpu_id("gpu.mig", gpu)
    subject = str(gpu.index)
    current, pending = gpu.mig_mode_current, gpu.mig_mode_pending
    if current is None:
        return HealthCheck(
            id=check_id, status=SKIP, summary="MIG not supported on this GPU", subject=subject
        )
    details = (
        f"MIG current={_on_off(current)} pending={_on_off(pending)}",
        f"{len(gpu.mig_instances)} MIG device(s)",
    )
    if pending is not None and pending != current:
        return HealthCheck(
            id=check_id,
            status=WARN,
            summary=f"MIG mode change pending ({_on_off(current)} → {_on_off(pending)})",
            details=details,
            fix=(
                "Stop every process on the GPU (including nvidia-persistenced / DCGM), then "
                f"`sudo nvidia-smi -r -i {gpu.index}`, or reboot."
            ),
            docs=DOCS_MIG,
            subject=subject,
        )
    if current:
        return HealthCheck(
            id=check_id,
            status=INFO,
            summary="MIG enabled: per-GPU and per-process utilization are not available",
            details=details,
            docs=DOCS_MIG,
            subject=subject,
        )
    return HealthCheck(id=check_id, status=PASS, summary="MIG disabled", subject=subject)


def check_gpu_lost(ctx: CheckContext, gpu: GpuSample) -> HealthCheck:
    """A GPU whose every query fails has fallen off the bus."""
    check_id = _gpu_id("gpu.lost", gpu)
    subject = str(gpu.index)
    if not gpu.lost:
        return HealthCheck(id=check_id, status=PASS, summary="GPU responds", subject=subject)
    xid79 = [e for e in ctx.inputs.gpu.xid_events if e.gpu_index == gpu.index and e.xid == 79]
    details = [f"{_gpu_name(gpu)} does not answer NVML"]
    if gpu.error:
        details.append(f"error: {gpu.error}")
    if xid79:
        details.append(f"XID 79 (fallen off the bus) at {_when(xid79[-1].at)}")
    return HealthCheck(
        id=check_id,
        status=FAIL,
        summary="GPU lost (fallen off the bus)" + (" after XID 79" if xid79 else ""),
        details=tuple(details),
        fix=(
            f"Stop its containers, try `sudo nvidia-smi -r -i {gpu.index}`; usually a reboot is "
            "needed. If it recurs: check PCIe seating, power and temperatures, then RMA."
        ),
        docs=DOCS_XID,
        subject=subject,
    )


# --------------------------------------------------------------------------------------------
# gpu.xid

#: XID numbers that mean hardware trouble or a GPU needing a reset (not an application bug).
CRITICAL_XIDS = frozenset({48, 63, 64, 74, 79, 92, 94, 95})

#: Short meanings of common XIDs (NVIDIA XID catalog).
XID_MEANINGS: dict[int, str] = {
    13: "graphics engine exception (usually the application)",
    31: "GPU memory page fault (usually the application)",
    43: "GPU stopped processing (usually the application)",
    45: "preemptive cleanup after a killed process",
    48: "double-bit ECC error",
    61: "internal micro-controller breakpoint/warning",
    62: "internal micro-controller halt",
    63: "ECC page retirement / row remap recorded",
    64: "ECC page retirement / row remap failure",
    68: "video processor exception",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
}


def _when(at: float) -> str:
    return timestamps.utc(at)


def check_gpu_xid(ctx: CheckContext) -> HealthCheck:
    """Recent XID (driver error) events, critical ones failing the check."""
    if not ctx.nvml_ok:
        return nvml_skip(ctx, "gpu.xid")
    events = ctx.inputs.gpu.xid_events
    if not events:
        return HealthCheck(id="gpu.xid", status=PASS, summary="No XID errors seen")
    details = tuple(
        f"GPU {e.gpu_index}: XID {e.xid} at {_when(e.at)}"
        + (f" ({XID_MEANINGS[e.xid]})" if e.xid in XID_MEANINGS else "")
        for e in events
    )
    critical = sorted({e.xid for e in events if e.xid in CRITICAL_XIDS})
    numbers = ", ".join(str(x) for x in sorted({e.xid for e in events}))
    if critical:
        return HealthCheck(
            id="gpu.xid",
            status=FAIL,
            summary=(
                f"Critical XID error(s) {', '.join(map(str, critical))} ({len(events)} event(s))"
            ),
            details=details,
            fix=(
                "Look each XID up in the NVIDIA XID catalog; drain the affected GPU, reset it "
                "(`sudo nvidia-smi -r -i <index>`) or reboot; recurring ECC/bus XIDs mean RMA. "
                "Kernel log: `sudo dmesg | grep -i xid`."
            ),
            docs=DOCS_XID,
        )
    return HealthCheck(
        id="gpu.xid",
        status=WARN,
        summary=f"XID error(s) {numbers} ({len(events)} event(s))",
        details=details,
        fix=(
            "These XIDs usually come from an application fault (bad kernel, killed process): "
            "check the logs of the containers on that GPU; `sudo dmesg | grep -i xid`."
        ),
        docs=DOCS_XID,
    )
