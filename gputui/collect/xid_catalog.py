"""NVIDIA's XID catalogue as gputui acts on it: each XID's class, meaning and the fix to apply.

From NVIDIA's "XID Errors" catalogue (docs.nvidia.com/deploy/xid-errors, r535 to r590) and its
memory-error-management guide. The class says whom a fault concerns: an ``application`` XID is
the program's bug (an illegal address, a bad kernel) and never marks the GPU as broken; the
hardware classes (``memory``, ``bus``, ``nvlink``) concern the GPU or the node and say how to
take it out of service. An XID missing from the table is ``unknown``, never hardware.
"""

from __future__ import annotations

from gputui.model.records import record

__all__ = ["CLASSES", "HARDWARE_CLASSES", "OOM_FIX", "XID_TABLE", "XidClass", "classify"]


@record
class XidClass:
    """What one XID means and what to do about it.

    Attributes:
        xid: The XID number.
        fault_class: ``application``, ``memory``, ``bus``, ``nvlink``, ``gsp``, ``driver`` or
            ``unknown``.
        meaning: A short meaning, for people.
        fix: What to do, for people.
    """

    xid: int
    fault_class: str
    meaning: str
    fix: str


_APP_FIX = "fix or restart the container; the GPU is fine"
_DRIVER_FIX = "restart the application; if it recurs in several containers, update the driver"
_NVLINK_FIX = (
    "drain the GPUs on that link and reset them; if it recurs on the same link, check the "
    "link (reseat, run field diagnostics)"
)
_GSP_FIX = "reset the GPU when idle (or reboot); update the driver if it recurs"

#: Classes that concern the GPU or the node (never assigned to an application XID).
HARDWARE_CLASSES = frozenset({"memory", "bus", "nvlink"})
#: Every class, in the order outputs list them.
CLASSES = ("application", "memory", "bus", "nvlink", "gsp", "driver", "unknown")

#: The fix for a container killed for memory by the kernel.
OOM_FIX = "the container hit its memory limit: raise its limit (--memory) or lower its use"

_ROWS: tuple[tuple[int, str, str, str], ...] = (
    (8, "driver", "GPU stopped processing (timeout)", _DRIVER_FIX),
    (13, "application", "graphics engine exception (illegal instruction or address)", _APP_FIX),
    (31, "application", "GPU memory page fault (illegal memory access)", _APP_FIX),
    (32, "driver", "invalid or corrupted push buffer stream", _DRIVER_FIX),
    (38, "driver", "driver firmware error", _DRIVER_FIX),
    (43, "application", "GPU stopped processing the application's work", _APP_FIX),
    (
        45,
        "application",
        "preemptive cleanup of the application's channels",
        "the driver stopped the process (after a killed process or a previous XID): restart "
        "the container; if the line names a previous XID, that fault tells whether the GPU is "
        "fine",
    ),
    (
        48,
        "memory",
        "double-bit (uncorrectable) ECC error",
        "drain the GPU and reset it when idle (nvidia-smi -r -i N); if it recurs, RMA",
    ),
    (61, "gsp", "internal micro-controller breakpoint or warning", _GSP_FIX),
    (62, "gsp", "internal micro-controller halt", _GSP_FIX),
    (
        63,
        "memory",
        "memory row remapping (or page retirement) pending",
        "reset the GPU when idle: the remapping takes effect at the next reset",
    ),
    (
        64,
        "memory",
        "memory row remapping (or page retirement) failed",
        "drain the GPU and contact support (RMA criterion)",
    ),
    (68, "application", "video decoder (NVDEC) exception", _APP_FIX),
    (69, "driver", "graphics engine class error", _DRIVER_FIX),
    (74, "nvlink", "NVLink error", _NVLINK_FIX),
    (
        79,
        "bus",
        "the GPU has fallen off the bus",
        "the node: drain it, check power, cooling and the PCIe slot, then reboot",
    ),
    (
        92,
        "memory",
        "high single-bit ECC error rate",
        "reset the GPU when idle; if it recurs, run diagnostics and RMA",
    ),
    (
        94,
        "memory",
        "contained ECC error (only the process using the memory was stopped)",
        "restart the affected job; reset the GPU when idle so the page is remapped",
    ),
    (
        95,
        "memory",
        "uncontained ECC error (every process on the GPU is affected)",
        "drain the GPU and reset it",
    ),
    (109, "driver", "context switch timeout", _DRIVER_FIX),
    (119, "gsp", "GSP RPC timeout", _GSP_FIX),
    (120, "gsp", "GSP error", _GSP_FIX),
    (121, "nvlink", "C2C link error", _NVLINK_FIX),
    (123, "bus", "SPI PMU RPC failure (board firmware)", "drain the GPU; reboot the node"),
    (140, "memory", "unrecovered ECC error", "drain the GPU and reset it"),
    (
        154,
        "gsp",
        "the driver asks for a recovery action",
        "do what the line says (GPU reset, node reboot or drain)",
    ),
    (144, "nvlink", "NVLink SAW error", _NVLINK_FIX),
    (145, "nvlink", "NVLink RLW error", _NVLINK_FIX),
    (146, "nvlink", "NVLink TLW error", _NVLINK_FIX),
    (147, "nvlink", "NVLink TREX error", _NVLINK_FIX),
    (148, "nvlink", "NVLink NVLPW_CTRL error", _NVLINK_FIX),
    (149, "nvlink", "NVLink NETIR error", _NVLINK_FIX),
    (150, "nvlink", "NVLink MSE error", _NVLINK_FIX),
)

#: The catalogue, by XID.
XID_TABLE: dict[int, XidClass] = {row[0]: XidClass(*row) for row in _ROWS}


def classify(xid: int) -> XidClass:
    """The class of an XID; ``unknown`` (never a hardware class) for one not in the table."""
    known = XID_TABLE.get(xid)
    if known is not None:
        return known
    return XidClass(
        xid,
        "unknown",
        "not in gputui's XID table",
        "look the XID up in NVIDIA's XID catalogue",
    )
