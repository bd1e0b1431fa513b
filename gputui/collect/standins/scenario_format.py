"""The scenario-file format: loading and validation (documented in docs/scenario-format.md).

Validation is strict (unknown keys are errors) because a typo in a scenario would otherwise
silently mean "not supported", and the CLI turns :class:`ScenarioError` into one line and exit 2.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gputui.boundary.userfiles import SCENARIO_LIMIT, UserFileError, read_user_text
from gputui.model.gauges import GPU_GAUGES, GpuGauge
from gputui.model.gpu import MIG_GPM_FIELDS, is_nvml_uuid
from gputui.model.process_fields import scenario_bounds, scenario_keys
from gputui.model.records import record

_CUDA_VERSION_RE = re.compile(r"[0-9]{1,4}(\.[0-9]{1,2})?")

INIT_STATES = ("ok", "LibraryNotFound", "DriverNotLoaded", "NoPermission", "Unknown")
FIELD_ERRORS = ("NotSupported", "NoPermission", "GpuIsLost", "Unknown", "Timeout")

#: The keys of a scenario's GPU object that are no gauge, and the ``errors`` keys of the queries
#: that read no gauge (``*``: every query of the GPU).
FACT_KEYS = ("index", "uuid", "name", "errors", "processes", "mig_instances", "pci_bus_id")
FACT_ERROR_KEYS = (
    "*",
    "name",
    "uuid",
    "processes",
    "process_utilization",
    "mig_instances",
    "gpm_sample",
)


@record
class GpuKeys:
    """The scenario GPU keys of a field table (:data:`gputui.model.gauges.GPU_GAUGES`).

    Attributes:
        numbers: Keys holding a number (or a time series of numbers) and their bounds.
        booleans: Keys holding true/false (or a series of them).
        keys: Every key a GPU object may have.
        errors: Every key its ``errors`` object may have: each gauge's key, the query groups
            (``clocks``: every gauge of one NVML getter) and the queries that read no gauge.
    """

    numbers: dict[str, tuple[float, float]]
    booleans: tuple[str, ...]
    keys: frozenset[str]
    errors: frozenset[str]


@functools.lru_cache(maxsize=4)
def gpu_keys(gauges: tuple[GpuGauge, ...] = GPU_GAUGES) -> GpuKeys:
    """The scenario GPU keys of ``gauges``."""
    numbers = {g.scenario.key: g.scenario.bounds for g in gauges if g.scenario.bounds is not None}
    booleans = tuple(g.scenario.key for g in gauges if g.scenario.bounds is None)
    groups = {g.nvml.group for g in gauges if g.nvml.group is not None}
    return GpuKeys(
        numbers,
        booleans,
        frozenset({*FACT_KEYS, *numbers, *booleans}),
        frozenset({*FACT_ERROR_KEYS, *groups, *numbers, *booleans}),
    )


#: Scenario GPU keys holding a number (or a time series of numbers), and their checks.
NUMBER_FIELDS: dict[str, tuple[float, float]] = gpu_keys().numbers
#: Scenario GPU keys holding a boolean (or a time series of booleans).
BOOL_FIELDS: tuple[str, ...] = gpu_keys().booleans
GPU_KEYS: frozenset[str] = gpu_keys().keys
#: The keys of a scenario process object and the ranges of its numbers (from the per-process
#: field table, :data:`gputui.model.process_fields.PROCESS_FIELDS`).
PROCESS_KEYS: frozenset[str] = scenario_keys()
PROCESS_NUMBERS: dict[str, tuple[float, float]] = scenario_bounds()
#: The process types: compute, graphics, both, and an MPS client (NVML's MPS list).
PROCESS_TYPES = ("C", "G", "C+G", "M+C")
#: The keys of one ``mig_instances`` entry: a MIG device (a compute instance of a GPU
#: instance), or with ``ci_id`` null a GPU instance without a compute instance.
MIG_KEYS = {
    "gi_id",
    "ci_id",
    "profile",
    "uuid",
    "memory_total_mib",
    "memory_used_mib",
    "sm_count",
    "slices",
    "processes",
    # GPM figures of the instance's GPU instance (nvmlGpmMigSampleGet), percent each.
    *MIG_GPM_FIELDS,
}
#: At most this many MIG devices per GPU (A100/H100/H200 have 7).
MAX_MIG_INSTANCES = 16
MAX_INSTANCE_ID = 14
TOP_KEYS = {"nvml", "driver_version", "cuda_driver_version", "nvml_version", "gpus", "xid_events"}

#: Scenario error keys accepted in ``errors`` (a field name, a query group, or ``*`` for the
#: whole GPU).
ERROR_KEYS: frozenset[str] = gpu_keys().errors


class ScenarioError(ValueError):
    """An invalid scenario file; the message is one line naming the problem."""


def load_scenario(path: Path) -> dict[str, Any]:
    """Read and validate a scenario file (read through the bounded user-file reader).

    Raises:
        ScenarioError: unreadable, not a regular file, too large, not JSON, or not a valid
            scenario.
    """
    try:
        text = read_user_text(path, "scenario file", SCENARIO_LIMIT)
    except UserFileError as exc:
        raise ScenarioError(str(exc)) from None
    return parse_scenario(text, str(path))


def parse_scenario(text: str, origin: str = "scenario") -> dict[str, Any]:
    """Parse and validate the text of a scenario file.

    Raises:
        ScenarioError: not JSON (also nested too deep or holding an integer too long to
            convert), or not a valid scenario.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScenarioError(
            f"scenario file {origin} is not valid JSON: {exc.msg} at line {exc.lineno}"
        ) from None
    except RecursionError:
        raise ScenarioError(f"scenario file {origin}: nested too deeply") from None
    except ValueError:  # an integer over Python's int/str conversion limit (4300 digits)
        raise ScenarioError(f"scenario file {origin}: a number has too many digits") from None
    validate_scenario(data, origin)
    return data  # type: ignore[no-any-return]


def _series(value: Any, where: str, check: Callable[[Any], bool], what: str) -> None:
    items = value if isinstance(value, list) else [value]
    if not items:
        raise ScenarioError(f"{where}: a time series must not be empty")
    for item in items:
        if not check(item):
            raise ScenarioError(f"{where}: expected {what}, got {_shown(item)}")


def _shown(value: Any) -> str:
    """A short, escaped rendering of a bad value for an error message."""
    if isinstance(value, (list, dict)):
        # json.dumps of a deeply nested value can itself overflow the stack: name the type.
        return "a list" if isinstance(value, list) else "an object"
    return json.dumps(value)[:40]


#: Bounds of the scenario's integers: beyond them NVML and the kernel have no such values
#: (Linux PIDs stop at 2**22), and unbounded ones overflow C conversions further down.
MAX_PID = 2**22
MAX_GPU_INDEX = 1023
MAX_EVENT_INT = 2**31 - 1
#: At most this many GPUs in one scenario: NVML reports the GPUs of one host, and the largest
#: hosts have 8 to 16 (a few dozen at most behind PCIe switches); the TUI, the tree and the
#: history are sized for that, not for a thousand (see docs/scenario-format.md).
MAX_GPUS = 64
#: At most this many GPU processes in one scenario, over every GPU and MIG device: NVML lists
#: the processes holding a context, a few per GPU on a busy host; 10,000 is the size the
#: collector was measured at (docs/reliability.md, item 10) and the TUI stays usable at.
MAX_PROCESSES = 10_000


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v  # NaN != NaN


def _in_range(value: Any, *, low: float, high: float, nullable: bool) -> bool:
    if value is None:
        return nullable
    return _is_number(value) and low <= value <= high


def validate_scenario(
    data: Any, origin: str = "scenario", gauges: tuple[GpuGauge, ...] = GPU_GAUGES
) -> None:
    """Check a parsed scenario; raise :class:`ScenarioError` naming the first problem.

    Args:
        data: The parsed JSON.
        origin: What to call it in messages (the file name).
        gauges: The GPU field table whose scenario keys a GPU object may hold.
    """
    if not isinstance(data, dict):
        raise ScenarioError(f"{origin}: the top level must be a JSON object")
    unknown = set(data) - TOP_KEYS
    if unknown:
        raise ScenarioError(f"{origin}: unknown key {sorted(unknown)[0]!r}")
    _series(
        data.get("nvml", "ok"),
        f"{origin}: nvml",
        lambda v: v in INIT_STATES,
        "one of " + "/".join(INIT_STATES),
    )
    for key in ("driver_version", "cuda_driver_version", "nvml_version"):
        if key in data and not isinstance(data[key], str):
            raise ScenarioError(f"{origin}: {key} must be a string")
    # The adapter turns it into NVML's integer (13000): anything else crashed the first read.
    cuda = data.get("cuda_driver_version", "13.0")
    if not _CUDA_VERSION_RE.fullmatch(cuda):
        raise ScenarioError(
            f"{origin}: cuda_driver_version must look like 13.0 or 12, got {_shown(cuda)}"
        )
    gpus = data.get("gpus", [])
    if not isinstance(gpus, list):
        raise ScenarioError(f"{origin}: gpus must be a list")
    if len(gpus) > MAX_GPUS:
        raise ScenarioError(
            f"{origin}: at most {MAX_GPUS} GPUs (no host reports more through NVML), "
            f"got {len(gpus)}"
        )
    for i, gpu in enumerate(gpus):
        _validate_gpu(gpu, f"{origin}: gpus[{i}]", gpu_keys(gauges))
    indexes = [g.get("index", i) for i, g in enumerate(gpus)]
    if len(set(indexes)) != len(indexes):
        raise ScenarioError(f"{origin}: GPU indexes must be unique")
    processes = sum(
        len(g.get("processes", []))
        + sum(len(m.get("processes", [])) for m in g.get("mig_instances", []))
        for g in gpus
    )
    if processes > MAX_PROCESSES:
        raise ScenarioError(
            f"{origin}: at most {MAX_PROCESSES} GPU processes in all, got {processes}"
        )
    _check_uuids(gpus, origin)
    events = data.get("xid_events", [])
    if not isinstance(events, list):
        raise ScenarioError(f"{origin}: xid_events must be a list")
    for i, event in enumerate(events):
        where = f"{origin}: xid_events[{i}]"
        if not isinstance(event, dict) or set(event) - {"gpu", "xid", "at_refresh"}:
            raise ScenarioError(f"{where}: expected {{gpu, xid, at_refresh}}")
        if "xid" not in event:  # the player reads it unconditionally
            raise ScenarioError(f"{where}: xid is required")
        if not all(
            isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_EVENT_INT
            for v in (event.get(k, 0) for k in ("gpu", "xid", "at_refresh"))
        ):
            raise ScenarioError(
                f"{where}: gpu, xid and at_refresh must be integers in [0, {MAX_EVENT_INT}]"
            )


def _check_uuids(gpus: list[Any], origin: str) -> None:
    """Every GPU and MIG UUID in a form NVML gives, and none twice (validated GPUs)."""
    seen: dict[str, str] = {}
    named = [(f"gpus[{i}]", g.get("uuid")) for i, g in enumerate(gpus)]
    named += [
        (f"gpus[{i}].mig_instances[{k}]", m.get("uuid"))
        for i, g in enumerate(gpus)
        for k, m in enumerate(g.get("mig_instances", []))
    ]
    for where, uuid in named:
        if uuid is None:
            continue  # the stand-in makes one up, in NVML's form and unique
        if not is_nvml_uuid(uuid):
            raise ScenarioError(
                f"{origin}: {where}.uuid: expected GPU-<uuid> or MIG-<uuid> as NVML gives "
                f"(GPU-57d57e22-be4b-9496-673e-11cc7638ed19), got {_shown(uuid)}"
            )
        key = uuid.lower()
        if key in seen:
            raise ScenarioError(f"{origin}: {where}.uuid: {uuid} is also {seen[key]}'s UUID")
        seen[key] = where


def _validate_gpu(gpu: Any, where: str, keys: GpuKeys) -> None:
    if not isinstance(gpu, dict):
        raise ScenarioError(f"{where}: must be an object")
    unknown = set(gpu) - keys.keys
    if unknown:
        raise ScenarioError(f"{where}: unknown key {sorted(unknown)[0]!r}")
    index = gpu.get("index", 0)
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index <= MAX_GPU_INDEX:
        raise ScenarioError(f"{where}: index must be an integer in [0, {MAX_GPU_INDEX}]")
    for key in ("uuid", "name"):
        if key in gpu and not isinstance(gpu[key], str):
            raise ScenarioError(f"{where}: {key} must be a string")
    bus_id = gpu.get("pci_bus_id")
    if bus_id is not None and not (isinstance(bus_id, str) and 0 < len(bus_id) <= 32):
        raise ScenarioError(f"{where}: pci_bus_id must be a string of at most 32 characters")
    for key, (low, high) in keys.numbers.items():
        if key in gpu:
            _series(
                gpu[key],
                f"{where}.{key}",
                functools.partial(_in_range, low=low, high=high, nullable=False),
                f"a number in [{low:g}, {high:g}]",
            )
    for key in keys.booleans:
        if key in gpu:
            _series(gpu[key], f"{where}.{key}", lambda v: isinstance(v, bool), "true or false")
    errors = gpu.get("errors", {})
    if not isinstance(errors, dict):
        raise ScenarioError(f"{where}.errors: must be an object")
    for field, err in errors.items():
        if field not in keys.errors:
            raise ScenarioError(f"{where}.errors: unknown field {field!r}")
        _series(
            err,
            f"{where}.errors.{field}",
            lambda v: v is None or v in FIELD_ERRORS,
            "null or one of " + "/".join(FIELD_ERRORS),
        )
    _validate_processes(gpu.get("processes", []), f"{where}.processes")
    _validate_mig(gpu.get("mig_instances", []), f"{where}.mig_instances")


def _validate_mig(instances: Any, where: str) -> None:
    if not isinstance(instances, list):
        raise ScenarioError(f"{where}: must be a list")
    if len(instances) > MAX_MIG_INSTANCES:
        raise ScenarioError(f"{where}: at most {MAX_MIG_INSTANCES} instances")
    seen: set[tuple[Any, Any]] = set()
    for k, inst in enumerate(instances):
        iw = f"{where}[{k}]"
        if not isinstance(inst, dict) or "gi_id" not in inst:
            raise ScenarioError(f"{iw}: must be an object with a gi_id")
        if set(inst) - MIG_KEYS:
            raise ScenarioError(f"{iw}: unknown key {sorted(set(inst) - MIG_KEYS)[0]!r}")
        ids = (inst["gi_id"], inst.get("ci_id", 0))
        for name, value in zip(("gi_id", "ci_id"), ids, strict=True):
            if value is None and name == "ci_id":
                continue
            if not _is_int(value) or not 0 <= value <= MAX_INSTANCE_ID:
                raise ScenarioError(f"{iw}.{name}: must be an integer in [0, {MAX_INSTANCE_ID}]")
        if ids in seen:
            raise ScenarioError(f"{iw}: gi_id and ci_id must be unique")
        seen.add(ids)
        for key in ("profile", "uuid"):
            if key in inst and not isinstance(inst[key], str):
                raise ScenarioError(f"{iw}.{key}: must be a string")
        for key, hi in (("memory_total_mib", 1e9), ("memory_used_mib", 1e9)):
            if key in inst:
                _series(
                    inst[key],
                    f"{iw}.{key}",
                    functools.partial(_in_range, low=0, high=hi, nullable=False),
                    f"a number in [0, {hi:g}]",
                )
        for key in MIG_GPM_FIELDS:
            if key in inst:
                _series(
                    inst[key],
                    f"{iw}.{key}",
                    functools.partial(_in_range, low=0, high=100, nullable=False),
                    "a number in [0, 100]",
                )
        for key, hi in (("sm_count", 1024), ("slices", 8)):
            if key in inst and not (_is_int(inst[key]) and 0 <= inst[key] <= hi):
                raise ScenarioError(f"{iw}.{key}: must be an integer in [0, {hi}]")
        if inst.get("ci_id", 0) is None and inst.get("processes"):
            raise ScenarioError(f"{iw}: a GPU instance without a compute instance runs nothing")
        _validate_processes(inst.get("processes", []), f"{iw}.processes")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _validate_processes(processes: Any, where: str) -> None:
    if not isinstance(processes, list):
        raise ScenarioError(f"{where}: must be a list")
    for j, proc in enumerate(processes):
        pw = f"{where}[{j}]"
        if not isinstance(proc, dict) or "pid" not in proc:
            raise ScenarioError(f"{pw}: must be an object with a pid")
        if set(proc) - PROCESS_KEYS:
            raise ScenarioError(f"{pw}: unknown key {sorted(set(proc) - PROCESS_KEYS)[0]!r}")
        pid = proc["pid"]
        if not isinstance(pid, int) or isinstance(pid, bool) or not 0 < pid <= MAX_PID:
            raise ScenarioError(f"{pw}.pid: must be a positive integer up to {MAX_PID}")
        if proc.get("type", "C") not in PROCESS_TYPES:
            raise ScenarioError(f"{pw}.type: must be C, G, C+G or M+C")
        for key, (low, hi) in PROCESS_NUMBERS.items():
            if key in proc:
                _series(
                    proc[key],
                    f"{pw}.{key}",
                    functools.partial(_in_range, low=low, high=hi, nullable=True),
                    f"null or a number in [{low:g}, {hi:g}]",
                )


def at(value: Any, step: int) -> Any:
    """The value of a scalar-or-time-series at refresh ``step``."""
    if isinstance(value, list):
        return value[step % len(value)]
    return value
