"""Runtime-health check of gputui's own access to the kernel log (XID lines and OOM kills)."""

from __future__ import annotations

from gputui.health.context import CheckContext
from gputui.health.registry import HOST, check
from gputui.health.result import Result

#: NVIDIA's XID catalogue: what each XID in the kernel log means.
DOCS_XID_CATALOG = "https://docs.nvidia.com/deploy/xid-errors/index.html"


@check("host.kernel_log", scope=HOST)
def check_kernel_log(ctx: CheckContext) -> Result:
    """Can gputui read ``/dev/kmsg``, where the driver's XID lines and OOM kills are logged?"""
    status = ctx.inputs.kmsg
    if status is None:
        return Result.skip("The kernel log is not read (a scenario, the demo or --kernel-log off)")
    if status.ok:
        return Result.passed("Kernel log readable: XID lines and OOM kills are attributed")
    details = (status.error or "unknown error", f"kind: {status.kind}")
    return Result.warn(
        "Cannot read the kernel log: XID errors and OOM kills are not attributed to containers",
        details=(
            *details,
            "needs CAP_SYSLOG when kernel.dmesg_restrict=1 (the default on most distributions)",
        ),
        fix=status.fix,
        docs=DOCS_XID_CATALOG,
    )
