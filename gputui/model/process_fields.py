"""Every per-process field and every name it goes by, in one table (as ``GPU_GAUGES`` for GPUs).

One row per field of a GPU process. The JSON report's ``processes[]`` (key order and values), the
scenario format's process keys and their bounds, the Processes table's columns (order, header,
width, the raw value behind a cell) and its sort orders (what ``s`` cycles through, the ``[ui]
sort`` names) are generated from :data:`PROCESS_FIELDS`. A new per-process figure is a field on
:class:`~gputui.model.gpu.GpuProcessSample` or :class:`~gputui.model.processes.ProcessInfo`,
its read in the adapter, and one row here (plus, for a styled cell, its builder in the table
widget).

Nothing here formats for a screen: a column's raw value sorts and decides when its cell is
redrawn; its text (for a column the table has no builder of its own for) is passed through the
sanitiser by the widget that draws it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gputui.boundary import timestamps
from gputui.model.gpu import GpuSample, MigInstance
from gputui.model.mig import mig_device_name, mig_instance_of
from gputui.model.processes import GpuProcess
from gputui.model.records import record
from gputui.model.snapshot import Snapshot

#: A raw value a column sorts by: a number, a text (sorted case-blind), or None (no value).
SortValue = float | str | None


@record
class ProcessSortOrder:
    """One order ``s`` cycles through on the Processes table.

    Its name in ``[ui] sort`` and the state file is its column's key (``mem``).

    Attributes:
        label: The status line's name for it (``GPU mem``).
        descending: Its natural direction (biggest first); ``S`` reverses it.
        position: Its place in the cycle (smallest first).
    """

    label: str
    descending: bool
    position: int


@record
class ProcessColumn:
    """How a field shows as a column of the Processes table.

    Attributes:
        key: The column key (``mem``); a sort order's name is its column's key.
        header: The header (``GPU MEM``).
        width: Cells, room for the sort arrow included; None for the variable-width last one.
        position: Its place from the left (smallest first).
        value: The raw value behind the cell, given the process and its container's shown
            name: what the column sorts by, and (with the text) what redraws the cell.
        text: The cell's text for a column the table has no builder of its own for (None:
            the value as text, empty for None).
        numeric: Right-justified, as numbers are.
        sort: Its place among the orders ``s`` cycles through (None: not a sort order).
    """

    key: str
    header: str
    width: int | None
    position: int
    value: Callable[[GpuProcess, str], SortValue]
    text: Callable[[GpuProcess], str] | None = None
    numeric: bool = True
    sort: ProcessSortOrder | None = None

    def cell_text(self, process: GpuProcess, container: str) -> str:
        """The generic cell's text (not sanitised: the widget does that)."""
        if self.text is not None:
            return self.text(process)
        value = self.value(process, container)
        return "" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


@record
class ProcessScenarioKey:
    """How a scenario file gives a field in a process object (docs/scenario-format.md).

    Attributes:
        key: Its name in the process object.
        bounds: The inclusive range of a number (or a time series of numbers, null allowed);
            None for a key checked on its own (the PID, the type).
    """

    key: str
    bounds: tuple[float, float] | None = None


@record
class ProcessField:
    """One per-process field and every name it goes by: one row of :data:`PROCESS_FIELDS`.

    Attributes:
        key: Its key in the JSON report's ``processes[]`` (rows give the keys' order).
        name: What it is, for people.
        json: Its JSON value, given the snapshot the process is in (None: JSON null).
        scenario: Its key in a scenario's process objects (None: not given by scenarios).
        column: Its column in the Processes table (None: not a column).
    """

    key: str
    name: str
    json: Callable[[Snapshot, GpuProcess], Any]
    scenario: ProcessScenarioKey | None = None
    column: ProcessColumn | None = None


def process_gpu(snapshot: Snapshot, process: GpuProcess) -> GpuSample | None:
    """The GPU (physical, for MIG) the process is listed on, None when it is not in the snapshot."""
    return next((g for g in snapshot.gpus if g.index == process.sample.gpu_index), None)


def process_mig(snapshot: Snapshot, process: GpuProcess) -> MigInstance | None:
    """The MIG device the process runs on, None off MIG (or when it cannot be told)."""
    if process.sample.mig_gi_id is None:
        return None
    gpu = process_gpu(snapshot, process)
    return None if gpu is None else mig_instance_of(gpu, process.sample)


def gpu_order(process: GpuProcess) -> float:
    """The GPU column's sort value: by GPU, then by MIG device (whole-GPU rows first)."""
    sample = process.sample
    mig = -1 if sample.mig_index is None else sample.mig_index
    return sample.gpu_index + (mig + 1) / 1000  # MIG device indexes stay well under 1,000


def iso(ts: float | None) -> str | None:
    """Seconds since the epoch as ISO 8601 UTC with a ``Z``; None when there is no such time."""
    text = timestamps.utc(ts, na="")
    return text or None


def container_ref(snapshot: Snapshot, container_id: str | None) -> dict[str, Any] | None:
    """The JSON ``container`` of a process: id, name, image, whether the engine knows it."""
    if container_id is None:
        return None
    usage = snapshot.container(container_id)
    info = usage.info if usage else None
    return {
        "id": container_id,
        "name": info.name if info else None,
        "image": (info.image or None) if info else None,
        "known_to_engine": bool(usage and usage.known_to_engine),
    }


def _mig_device(snapshot: Snapshot, p: GpuProcess) -> str | None:
    mig = process_mig(snapshot, p)
    return None if mig is None else mig_device_name(p.sample.gpu_index, mig.index)


def _mig_uuid(snapshot: Snapshot, p: GpuProcess) -> str | None:
    mig = process_mig(snapshot, p)
    return None if mig is None else mig.uuid


def _gpu_uuid(snapshot: Snapshot, p: GpuProcess) -> str | None:
    gpu = process_gpu(snapshot, p)
    return gpu.uuid if gpu else None


def _command(p: GpuProcess, container: str) -> str:
    info = p.info
    return info.command or info.name or ""


def _elapsed(p: GpuProcess, container: str) -> float | None:
    # Sorted by start time (earliest = longest running), which does not move between refreshes.
    start = p.info.start_time
    return None if start is None else -start


#: Every per-process field, in the JSON report's key order.
PROCESS_FIELDS: tuple[ProcessField, ...] = (
    ProcessField(
        "pid",
        "host PID",
        lambda s, p: p.pid,
        ProcessScenarioKey("pid"),
        ProcessColumn(
            "pid", "PID", 7, 0, lambda p, c: p.pid, sort=ProcessSortOrder("PID", False, 3)
        ),
    ),
    ProcessField(
        "container_pid",
        "PID inside its container",
        lambda s, p: p.info.container_pid if p.container_id else None,
        column=ProcessColumn("cpid", "CPID", 7, 70, lambda p, c: p.info.container_pid),
    ),
    ProcessField(
        "gpu_index",
        "GPU index (the physical GPU of a MIG device)",
        lambda s, p: p.sample.gpu_index,
        column=ProcessColumn(
            "gpu",
            "GPU",
            5,
            20,
            lambda p, c: gpu_order(p),
            # "Who is on GPU 3?": the rows by GPU (then MIG device), GPU 0 first.
            sort=ProcessSortOrder("GPU", False, 6),
        ),
    ),
    ProcessField("gpu_uuid", "GPU UUID", _gpu_uuid),
    ProcessField(
        "gpu_memory_bytes",
        "GPU memory held",
        lambda s, p: p.sample.used_memory_bytes,
        ProcessScenarioKey("used_memory_mib", (0, 1e9)),
        ProcessColumn(
            "mem",
            "GPU MEM",
            10,
            30,
            lambda p, c: p.sample.used_memory_bytes,
            sort=ProcessSortOrder("GPU mem", True, 0),
        ),
    ),
    ProcessField(
        "sm_util",
        "SM utilization",
        lambda s, p: p.sample.sm_util,
        ProcessScenarioKey("sm_util", (0, 100)),
        ProcessColumn(
            "sm",
            "SM%",
            5,
            40,
            lambda p, c: p.sample.sm_util,
            sort=ProcessSortOrder("SM %", True, 1),
        ),
    ),
    ProcessField(
        "mem_util",
        "memory-controller utilization",
        lambda s, p: p.sample.mem_util,
        ProcessScenarioKey("mem_util", (0, 100)),
    ),
    ProcessField("type", "C, G, C+G", lambda s, p: p.sample.kind, ProcessScenarioKey("type")),
    ProcessField("mps_client", "an MPS client", lambda s, p: p.sample.mps),
    ProcessField("mig_device", "MIG device (0:1)", _mig_device),
    ProcessField("mig_uuid", "MIG device UUID", _mig_uuid),
    ProcessField("gpu_instance_id", "MIG GPU instance id", lambda s, p: p.sample.mig_gi_id),
    ProcessField("compute_instance_id", "MIG compute instance id", lambda s, p: p.sample.mig_ci_id),
    ProcessField("exists", "its PID is in /proc", lambda s, p: p.info.exists),
    ProcessField(
        "command",
        "command line",
        lambda s, p: p.info.command if p.info.exists else None,
        column=ProcessColumn("command", "COMMAND", None, 1000, _command, numeric=False),
    ),
    ProcessField("name", "process name", lambda s, p: p.info.name),
    ProcessField(
        "user",
        "owner",
        lambda s, p: p.info.user,
        column=ProcessColumn("user", "USER", 8, 60, lambda p, c: p.info.user, numeric=False),
    ),
    ProcessField(
        "cpu_percent",
        "CPU % (100 = one core)",
        lambda s, p: p.info.cpu_percent,
        column=ProcessColumn(
            "cpu",
            "CPU%",
            6,
            50,
            lambda p, c: p.info.cpu_percent,
            sort=ProcessSortOrder("CPU %", True, 2),
        ),
    ),
    ProcessField(
        "rss_bytes",
        "resident memory",
        lambda s, p: p.info.rss_bytes,
        column=ProcessColumn("rss", "RSS", 9, 80, lambda p, c: p.info.rss_bytes),
    ),
    # When CPU % and RSS were read, if before this snapshot (many processes are read in turn);
    # null: read by this refresh.
    ProcessField(
        "cpu_rss_sampled_at", "when CPU % and RSS were read", lambda s, p: iso(p.info.sampled_at)
    ),
    ProcessField(
        "start_time",
        "process start",
        lambda s, p: iso(p.info.start_time),
        column=ProcessColumn(
            "elapsed",
            "ELAPSED",
            9,
            90,
            _elapsed,
            sort=ProcessSortOrder("elapsed", True, 5),
        ),
    ),
    ProcessField("runtime", "container runtime its cgroup names", lambda s, p: p.info.runtime),
    ProcessField("pod_uid", "Kubernetes pod UID", lambda s, p: p.info.pod_uid),
    ProcessField(
        "container",
        "its container",
        lambda s, p: container_ref(s, p.container_id),
        column=ProcessColumn(
            "container",
            "CONTAINER",
            14,
            10,
            lambda p, c: c,
            numeric=False,
            sort=ProcessSortOrder("container", False, 4),
        ),
    ),
)


def columns(fields: Sequence[ProcessField] = PROCESS_FIELDS) -> tuple[ProcessColumn, ...]:
    """The Processes table's columns, left to right.

    Raises:
        ValueError: Two columns share a key, or the variable-width column is not the last.
    """
    found = sorted((f.column for f in fields if f.column is not None), key=lambda c: c.position)
    keys = [c.key for c in found]
    if len(set(keys)) != len(keys):
        raise ValueError(f"process column keys must be unique: {keys}")
    if any(c.width is None for c in found[:-1]) or (found and found[-1].width is not None):
        raise ValueError("exactly the last process column has no width (it takes what is left)")
    return tuple(found)


def sort_orders(
    fields: Sequence[ProcessField] = PROCESS_FIELDS,
) -> tuple[tuple[ProcessColumn, ProcessSortOrder], ...]:
    """The orders ``s`` cycles through on the Processes table, in order, with their columns."""
    orders = [(c, c.sort) for c in columns(fields) if c.sort is not None]
    return tuple(sorted(orders, key=lambda pair: pair[1].position))


def sort_names(fields: Sequence[ProcessField] = PROCESS_FIELDS) -> tuple[str, ...]:
    """The names of the sort orders (``[ui] sort``), in the cycle's order."""
    return tuple(column.key for column, _ in sort_orders(fields))


def process_to_json(
    snapshot: Snapshot, process: GpuProcess, fields: Sequence[ProcessField] = PROCESS_FIELDS
) -> dict[str, Any]:
    """One process in the JSON schema's ``processes[]`` shape, in the table's key order."""
    return {f.key: f.json(snapshot, process) for f in fields}


def scenario_keys(fields: Sequence[ProcessField] = PROCESS_FIELDS) -> frozenset[str]:
    """Every key a scenario's process object may hold."""
    return frozenset(f.scenario.key for f in fields if f.scenario is not None)


def scenario_bounds(
    fields: Sequence[ProcessField] = PROCESS_FIELDS,
) -> dict[str, tuple[float, float]]:
    """The scenario process keys that hold a number (or a series of them), and their ranges."""
    return {
        f.scenario.key: f.scenario.bounds
        for f in fields
        if f.scenario is not None and f.scenario.bounds is not None
    }
