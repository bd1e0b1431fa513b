"""Runtime-health checks about each GPU's state and the driver's XID events.

Per GPU: loss, persistence, ECC, row remapping, throttling and MIG; for the host: XID events.

Per-GPU checks take the :class:`CheckContext` and the :class:`GpuSample` they judge; they read only
what the NVML source put in the :class:`GpuReading`.
"""

from __future__ import annotations

from gputui.boundary import timestamps
from gputui.health.context import CheckContext
from gputui.health.docs import DOCS_MEMORY_ERRORS, DOCS_MIG, DOCS_PERSISTENCE, DOCS_XID
from gputui.health.registry import GPU, HOST, check
from gputui.health.result import Result
from gputui.model.gpu import THROTTLE_REASONS, GpuSample

# --------------------------------------------------------------------------------------------
# Per-GPU checks


def _gpu_name(gpu: GpuSample) -> str:
    return f"GPU {gpu.index} ({gpu.name or 'unknown model'})"


@check("gpu.lost", scope=GPU, on_lost_gpu=True)
def check_gpu_lost(ctx: CheckContext, gpu: GpuSample) -> Result:
    """A GPU whose every query fails has fallen off the bus."""
    if not gpu.lost:
        return Result.passed("GPU responds")
    xid79 = [e for e in ctx.inputs.gpu.xid_events if e.gpu_index == gpu.index and e.xid == 79]
    details = [f"{_gpu_name(gpu)} does not answer NVML"]
    if gpu.error:
        details.append(f"error: {gpu.error}")
    if xid79:
        details.append(f"XID 79 (fallen off the bus) at {_when(xid79[-1].at)}")
    return Result.fail(
        "GPU lost (fallen off the bus)" + (" after XID 79" if xid79 else ""),
        details=tuple(details),
        fix=(
            f"Stop its containers, try `sudo nvidia-smi -r -i {gpu.index}`; usually a reboot is "
            "needed. If it recurs: check PCIe seating, power and temperatures, then RMA."
        ),
        docs=DOCS_XID,
    )


@check("gpu.persistence", scope=GPU)
def check_gpu_persistence(ctx: CheckContext, gpu: GpuSample) -> Result:
    """Persistence mode: off means every new client re-initialises the driver (seconds)."""
    if gpu.persistence_mode is None:
        return Result.skip("Persistence mode not reported")
    if gpu.persistence_mode:
        return Result.passed("Persistence mode on")
    return Result.warn(
        "Persistence mode off: every new GPU client re-initialises the driver",
        details=(f"{_gpu_name(gpu)}: persistence mode disabled",),
        fix=(
            "sudo systemctl enable --now nvidia-persistenced\n"
            f"(or, until the next reboot: sudo nvidia-smi -i {gpu.index} -pm 1)"
        ),
        docs=DOCS_PERSISTENCE,
    )


@check("gpu.ecc", scope=GPU)
def check_gpu_ecc(ctx: CheckContext, gpu: GpuSample) -> Result:
    """ECC mode changes waiting for a reboot, and uncorrectable ECC errors."""
    current, pending = gpu.ecc_mode_current, gpu.ecc_mode_pending
    errors = gpu.ecc_uncorrected_volatile
    details = (
        f"ECC mode current={_on_off(current)} pending={_on_off(pending)}",
        f"uncorrected volatile ECC errors: {'n/a' if errors is None else errors}",
    )
    if errors is not None and errors > 0:
        return Result.fail(
            f"{errors} uncorrectable ECC error(s) since the driver loaded",
            details=details,
            fix=(
                "Drain the GPU (stop its containers), then reset it "
                f"(`sudo nvidia-smi -r -i {gpu.index}`) or reboot. If errors recur, the GPU "
                "needs replacing (RMA)."
            ),
            docs=DOCS_MEMORY_ERRORS,
        )
    if current is not None and pending is not None and current != pending:
        return Result.warn(
            f"ECC mode change pending ({_on_off(current)} → {_on_off(pending)})",
            details=details,
            fix=f"Reboot, or reset the idle GPU: sudo nvidia-smi -r -i {gpu.index}",
            docs=DOCS_MEMORY_ERRORS,
        )
    if current is None and errors is None:
        return Result.skip("ECC not supported on this GPU")
    if current is False:
        return Result.info("ECC disabled", details=details)
    return Result.passed("ECC on, no uncorrectable errors", details=details)


def _on_off(value: bool | None) -> str:
    return "n/a" if value is None else ("on" if value else "off")


@check("gpu.remap", scope=GPU)
def check_gpu_remap(ctx: CheckContext, gpu: GpuSample) -> Result:
    """Row remapping: pending needs a reset, failure means the memory is out of spare rows."""
    pending, failure = gpu.remapped_rows_pending, gpu.remapped_rows_failure
    if pending is None and failure is None:
        return Result.skip("Row remapping not supported (pre-Ampere GPUs retire pages instead)")
    details = (f"remap pending={_yes_no(pending)} failure={_yes_no(failure)}",)
    if failure:
        return Result.fail(
            "Row remapping failed: no spare memory rows left",
            details=details,
            fix="Take the GPU out of service and replace it (RMA).",
            docs=DOCS_MEMORY_ERRORS,
        )
    if pending:
        return Result.warn(
            "Row remap pending: reset the GPU to apply it",
            details=details,
            fix=f"When the GPU is idle: sudo nvidia-smi -r -i {gpu.index} (or reboot)",
            docs=DOCS_MEMORY_ERRORS,
        )
    return Result.passed("No row remapping pending")


def _yes_no(value: bool | None) -> str:
    return "n/a" if value is None else ("yes" if value else "no")


#: Throttle bits that call for action, with the fix.
_THROTTLE_ACTION: dict[int, str] = {
    0x40: "Check cooling: airflow, fans, inlet temperature, dust (`nvidia-smi -q -d TEMPERATURE`).",
    0x20: "Check cooling: the driver slows the GPU to stay under its temperature target.",
    0x08: "Hardware slowdown (thermal or power-supply signal): check cooling and the PSU.",
    0x80: "Power brake asserted by the system: check the power supply / rack power budget.",
}


@check("gpu.throttle", scope=GPU)
def check_gpu_throttle(ctx: CheckContext, gpu: GpuSample) -> Result:
    """Clock-event (throttle) reasons: thermal and power problems slow the GPU down."""
    reasons = gpu.throttle_reasons
    if reasons is None:
        return Result.skip("Throttle reasons not reported")
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
        return Result.warn(
            f"Throttled: {', '.join(labels)}",
            details=details,
            fix="\n".join(_THROTTLE_ACTION[bit] for bit in serious),
        )
    if reasons & 0x04:
        return Result.info(
            "At its power limit (SW power cap): normal under full load",
            details=details,
            fix=(
                "Only if unexpected: check the limit with `nvidia-smi -q -d POWER`; raise it "
                f"with `sudo nvidia-smi -i {gpu.index} -pl <watts>`."
            ),
        )
    summary = "Idle" if reasons & 0x01 else "Not throttled"
    return Result.passed(summary, details=details)


@check("gpu.mig", scope=GPU)
def check_gpu_mig(ctx: CheckContext, gpu: GpuSample) -> Result:
    """MIG mode, and a MIG change waiting for a GPU reset."""
    current, pending = gpu.mig_mode_current, gpu.mig_mode_pending
    if current is None:
        return Result.skip("MIG not supported on this GPU")
    details = (
        f"MIG current={_on_off(current)} pending={_on_off(pending)}",
        f"{len(gpu.mig_instances)} MIG device(s)",
    )
    if pending is not None and pending != current:
        return Result.warn(
            f"MIG mode change pending ({_on_off(current)} → {_on_off(pending)})",
            details=details,
            fix=(
                "Stop every process on the GPU (including nvidia-persistenced / DCGM), then "
                f"`sudo nvidia-smi -r -i {gpu.index}`, or reboot."
            ),
            docs=DOCS_MIG,
        )
    if current:
        return Result.info(
            "MIG enabled: per-GPU and per-process utilization are not available",
            details=details,
            docs=DOCS_MIG,
        )
    return Result.passed("MIG disabled")


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


@check("gpu.xid", scope=HOST)
def check_gpu_xid(ctx: CheckContext) -> Result:
    """Recent XID (driver error) events, critical ones failing the check."""
    if not ctx.nvml_ok:
        return ctx.nvml_skip()
    events = ctx.inputs.gpu.xid_events
    if not events:
        return Result.passed("No XID errors seen")
    details = tuple(
        f"GPU {e.gpu_index}: XID {e.xid} at {_when(e.at)}"
        + (f" ({XID_MEANINGS[e.xid]})" if e.xid in XID_MEANINGS else "")
        for e in events
    )
    critical = sorted({e.xid for e in events if e.xid in CRITICAL_XIDS})
    numbers = ", ".join(str(x) for x in sorted({e.xid for e in events}))
    if critical:
        return Result.fail(
            f"Critical XID error(s) {', '.join(map(str, critical))} ({len(events)} event(s))",
            details=details,
            fix=(
                "Look each XID up in the NVIDIA XID catalog; drain the affected GPU, reset it "
                "(`sudo nvidia-smi -r -i <index>`) or reboot; recurring ECC/bus XIDs mean RMA. "
                "Kernel log: `sudo dmesg | grep -i xid`."
            ),
            docs=DOCS_XID,
        )
    return Result.warn(
        f"XID error(s) {numbers} ({len(events)} event(s))",
        details=details,
        fix=(
            "These XIDs usually come from an application fault (bad kernel, killed process): "
            "check the logs of the containers on that GPU; `sudo dmesg | grep -i xid`."
        ),
        docs=DOCS_XID,
    )
