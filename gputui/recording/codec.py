"""Lossless Snapshot <-> dict conversion, for recordings (``gputui record`` / ``replay``).

Generic over the frozen dataclasses of :mod:`gputui.model`: fields are found with
:func:`dataclasses.fields` and decoded by their type hints, so a field added to the model is
recorded and replayed without touching this module. Fields equal to their default are left out,
which keeps a recording line small (most ``None`` facts of a container vanish).

This is not the ``--once --json`` contract (:mod:`gputui.present.json_report`): that one is
shaped for people and scripts and drops facts (PIDs' container ids, per-process encoder
use...). Container environment values never reach a Snapshot, so they cannot reach a recording
either.
:func:`snapshot_from_report` reads a contract document back as well as that lossy format allows.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import types
import typing
from typing import Any, TypeVar, Union

from gputui.model import containers as model_containers
from gputui.model import faults as model_faults
from gputui.model import gauges, status
from gputui.model import gpu as model_gpu
from gputui.model import processes as model_processes
from gputui.model import snapshot as model_snapshot
from gputui.model.snapshot import Snapshot

#: Bumped on any change an older reader would misread; readers refuse newer versions.
FORMAT_VERSION = 1

T = TypeVar("T")


class SerializeError(ValueError):
    """A record that does not decode into a Snapshot; the message names where."""


def _hints(cls: type) -> dict[str, Any]:
    # The model uses postponed annotations: resolve them once per class.
    cached = _HINTS.get(cls)
    if cached is None:
        cached = typing.get_type_hints(cls)
        _HINTS[cls] = cached
    return cached


_HINTS: dict[type, dict[str, Any]] = {}


def _init_fields(cls_or_value: Any) -> tuple[dataclasses.Field[Any], ...]:
    """The fields a dataclass is built from: a cache kept outside ``__init__`` is not recorded."""
    return tuple(f for f in dataclasses.fields(cls_or_value) if f.init)


def encode(value: Any) -> Any:
    """A model value as JSON-ready data: dataclasses become dicts without default-valued fields."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        for f in _init_fields(value):
            item = getattr(value, f.name)
            if f.default is not dataclasses.MISSING and item == f.default:
                continue
            if f.default_factory is not dataclasses.MISSING and item == f.default_factory():
                continue
            out[f.name] = encode(item)
        return out
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    return value


def _fail(where: str, expected: str, value: Any) -> SerializeError:
    if isinstance(value, int) and abs(value) >= _INT_LIMIT:
        return SerializeError(f"{where}: expected {expected}, got an integer beyond 64 bits")
    if isinstance(value, (list, dict)):  # repr() of a deeply nested value overflows the stack
        return SerializeError(f"{where}: expected {expected}, got a {type(value).__name__}")
    shown = repr(value)
    return SerializeError(
        f"{where}: expected {expected}, got {shown[:40]}{'...' if len(shown) > 40 else ''}"
    )


#: Integers beyond 64 bits are no counter, id or size any source reports; they would overflow
#: float() and C conversions downstream.
_INT_LIMIT = 2**64


def _scalar(tp: type, value: Any, where: str) -> Any:
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) < _INT_LIMIT:
            return value
    elif tp is float:
        if isinstance(value, float) or (
            isinstance(value, int) and not isinstance(value, bool) and abs(value) < _INT_LIMIT
        ):
            return float(value)
    elif tp is str:
        if isinstance(value, str):
            return value
    else:
        raise SerializeError(f"{where}: cannot decode type {tp!r}")
    raise _fail(where, tp.__name__, value)


def _union_arm(args: tuple[Any, ...], value: Any) -> Any:
    """The arm of a union a JSON value belongs to, preferring exact types (an int stays an int)."""
    plain = [a for a in args if a is not type(None)]

    def base(a: Any) -> Any:
        return typing.get_origin(a) or a

    wanted: tuple[type, ...]
    if isinstance(value, bool):
        wanted = (bool,)
    elif isinstance(value, int):
        wanted = (int, float)
    elif isinstance(value, float):
        wanted = (float,)
    elif isinstance(value, str):
        wanted = (str,)
    elif isinstance(value, list):
        wanted = (tuple,)
    else:
        wanted = (dict,)
    for want in wanted:
        for arm in plain:
            b = base(arm)
            if b is want or (want is str and isinstance(b, type) and issubclass(b, enum.Enum)):
                return arm
            if want is dict and dataclasses.is_dataclass(b):
                return arm
    return plain[0] if plain else type(None)


def decode(tp: Any, value: Any, where: str = "snapshot") -> Any:
    """Rebuild a value of type ``tp`` from :func:`encode`'s output.

    Raises:
        SerializeError: the data does not fit the type; the message names the field.
    """
    origin = typing.get_origin(tp)
    if origin is Union or origin is types.UnionType:
        args = typing.get_args(tp)
        if value is None:
            if type(None) in args:
                return None
            raise _fail(where, "a value", value)
        return decode(_union_arm(args, value), value, where)
    if tp is type(None):
        if value is None:
            return None
        raise _fail(where, "null", value)
    if origin is tuple:
        args = typing.get_args(tp)
        if not isinstance(value, list):
            raise _fail(where, "a list", value)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(decode(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
        if len(args) != len(value):
            raise _fail(where, f"{len(args)} items", value)
        return tuple(
            decode(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value, strict=True))
        )
    if origin is dict:
        key_tp, value_tp = typing.get_args(tp)
        if not isinstance(value, dict):
            raise _fail(where, "an object", value)
        return {
            decode(key_tp, k, where): decode(value_tp, v, f"{where}.{k}") for k, v in value.items()
        }
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _decode_dataclass(tp, value, where)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError:
            raise _fail(where, f"one of {[m.value for m in tp]}", value) from None
    return _scalar(tp, value, where)


def _decode_dataclass(cls: type[T], value: Any, where: str) -> T:
    if not isinstance(value, dict):
        raise _fail(where, f"an object ({cls.__name__})", value)
    hints = _hints(cls)
    names = {f.name for f in _init_fields(cls)}
    unknown = set(value) - names
    if unknown:
        # A newer model field this reader does not know: refusing beats silently dropping it.
        raise SerializeError(f"{where}: unknown field {sorted(unknown)[0]!r} for {cls.__name__}")
    kwargs = {name: decode(hints[name], item, f"{where}.{name}") for name, item in value.items()}
    try:
        return cls(**kwargs)
    except TypeError as exc:  # a required field is missing
        raise SerializeError(f"{where}: {cls.__name__}: {exc}") from None


def snapshot_to_record(snapshot: Snapshot, previous: Snapshot | None = None) -> dict[str, Any]:
    """One recording line's content: the format version and the encoded snapshot.

    Args:
        snapshot: What to record.
        previous: The snapshot on the line before in the same file, if any. Top-level fields
            equal to its (health checks, engine facts: they change rarely and are half a line)
            are named under ``same`` instead of repeated.
    """
    body = encode(snapshot)
    record: dict[str, Any] = {"v": FORMAT_VERSION}
    if previous is not None:
        same = [
            f.name
            for f in _init_fields(snapshot)
            if f.name in body and getattr(snapshot, f.name) == getattr(previous, f.name)
        ]
        if same:
            record["same"] = same
            body = {k: v for k, v in body.items() if k not in same}
    record["snapshot"] = body
    return record


def snapshot_from_record(record: Any, previous: Snapshot | None = None) -> Snapshot:
    """The Snapshot a :func:`snapshot_to_record` dict describes.

    Args:
        record: One parsed recording line.
        previous: The snapshot decoded from the line before in the same file (needed when the
            record names fields under ``same``).

    Raises:
        SerializeError: not a record, a newer format version, or data that does not decode.
    """
    if not isinstance(record, dict) or "snapshot" not in record or "v" not in record:
        raise SerializeError("not a gputui recording line (expected {v, snapshot})")
    version = record["v"]
    if not isinstance(version, int) or version < 1:
        raise SerializeError(f"bad format version {version!r}")
    if version > FORMAT_VERSION:
        raise SerializeError(
            f"recorded with format version {version}; this gputui reads up to {FORMAT_VERSION}"
        )
    body = record["snapshot"]
    same = record.get("same", [])
    if not isinstance(body, dict) or not isinstance(same, list):
        raise SerializeError("snapshot must be an object and same a list")
    if same:
        if previous is None:
            raise SerializeError("the line repeats fields of a previous line, but it is the first")
        names = {f.name for f in _init_fields(Snapshot)}
        for name in same:
            if name not in names:
                raise SerializeError(f"same: unknown field {name!r}")
        body = {**encode({name: getattr(previous, name) for name in same}), **body}
    result: Snapshot = decode(Snapshot, body)
    _check_time(result.taken_at)
    return result


#: The times a snapshot may be taken at: the epoch to the end of year 9999 (what datetime shows).
MAX_TIME = 253402300799.0


def _check_time(taken_at: float) -> None:
    # NaN, infinities and 1e300 decode as floats but crash every clock display downstream.
    if not 0.0 <= taken_at <= MAX_TIME:
        raise SerializeError(f"taken_at: expected a time between 1970 and 9999, got {taken_at!r}")


# -- the --once --json contract, read back ---------------------------------------------------


def _epoch(text: Any) -> float | None:
    if text is None:
        return None
    if not isinstance(text, str):
        raise SerializeError(f"expected an ISO 8601 time, got {text!r}")
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise SerializeError(f"expected an ISO 8601 time, got {text!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.timezone.utc)
    return parsed.timestamp()


def _pick(cls: type[T], data: dict[str, Any], where: str, **overrides: Any) -> T:
    """``cls`` from the keys of ``data`` that name its fields (the contract's extras ignored)."""
    names = {f.name for f in _init_fields(cls)}
    picked = {k: v for k, v in data.items() if k in names}
    picked.update(overrides)
    return _decode_dataclass(cls, encode_plain(picked), where)


def encode_plain(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with dataclass values encoded (for :func:`_pick`'s already-built overrides)."""
    return {k: encode(v) for k, v in data.items()}


def _mig_index(device: Any) -> int | None:
    """The MIG device index of a report's ``mig_device`` (``"0:1"`` → 1), None when absent."""
    if not isinstance(device, str):
        return None
    _, sep, index = device.partition(":")
    return int(index) if sep and index.isdigit() and len(index) < 4 else None


def snapshot_from_report(doc: Any) -> Snapshot:
    """A Snapshot rebuilt from a ``gputui --once --json`` document (lossy, best effort).

    The contract leaves out facts a Snapshot has (per-process container ids are taken from
    the process's ``container`` reference; encoder use per process and the container
    environment are simply absent), so this is for looking at an old report again
    (``gputui --once --replay report.json``), not for archiving.

    Raises:
        SerializeError: the document is not a contract snapshot.
    """
    if not isinstance(doc, dict) or "gpus" not in doc or "taken_at" not in doc:
        raise SerializeError("not a gputui --once --json document (no taken_at / gpus)")
    taken_at = _epoch(doc["taken_at"])
    if taken_at is None:
        raise SerializeError("taken_at is null")
    _check_time(taken_at)
    procs_by_gpu: dict[int, list[model_gpu.GpuProcessSample]] = {}
    processes = []
    for i, p in enumerate(doc.get("processes", [])):
        where = f"processes[{i}]"
        sample = _pick(
            model_gpu.GpuProcessSample,
            p,
            where,
            used_memory_bytes=p.get("gpu_memory_bytes"),
            kind=p.get("type") or "C",
            mig_gi_id=p.get("gpu_instance_id"),
            mig_ci_id=p.get("compute_instance_id"),
            mps=p.get("mps_client") is True,
            mig_index=_mig_index(p.get("mig_device")),
        )
        procs_by_gpu.setdefault(sample.gpu_index, []).append(sample)
        ref = p.get("container")
        cid = ref["id"] if isinstance(ref, dict) else None
        info = _pick(
            model_processes.ProcessInfo,
            p,
            where,
            start_time=_epoch(p.get("start_time")),
            sampled_at=_epoch(p.get("cpu_rss_sampled_at")),
            container_id=cid,
            container_pid=p.get("container_pid"),
        )
        processes.append(model_processes.GpuProcess(sample, info, cid))
    gpus = []
    # The report names a gauge by its table row's JSON key, which may differ from the field.
    field_of = {gauge.json_key: gauge.field for gauge in gauges.GPU_GAUGES}
    for i, g in enumerate(doc["gpus"]):
        where = f"gpus[{i}]"
        migs = tuple(
            _pick(model_gpu.MigInstance, m, f"{where}.mig") for m in g.get("mig_instances", [])
        )
        fields = {field_of.get(key, key): value for key, value in g.items()}
        gpu = _pick(model_gpu.GpuSample, fields, where, mig_instances=migs)
        gpus.append(dataclasses.replace(gpu, processes=tuple(procs_by_gpu.get(gpu.index, ()))))
    containers = []
    for key in ("containers", "other_containers"):
        for i, c in enumerate(doc.get(key, [])):
            where = f"{key}[{i}]"
            cinfo = _pick(
                model_containers.ContainerInfo,
                c,
                where,
                image=c.get("image") or "",
                started_at=_epoch(c.get("started_at")),
                stats_sampled_at=_epoch(c.get("stats_sampled_at")),
            )
            usage = _pick(
                model_snapshot.ContainerUsage,
                c,
                where,
                info=cinfo,
                known_to_engine=key == "containers",
            )
            containers.append(usage)
    engine = doc.get("engine")
    stats = doc.get("host_stats")
    return Snapshot(
        taken_at=taken_at,
        mode=str(doc.get("mode", "live")),
        host=_pick(model_snapshot.HostInfo, doc.get("host", {"hostname": "?"}), "host"),
        sources={
            name: _pick(status.SourceStatus, s, f"sources.{name}", name=name)
            for name, s in doc.get("sources", {}).items()
        },
        gpus=tuple(gpus),
        processes=tuple(processes),
        containers=tuple(containers),
        engine=None if engine is None else _pick(model_containers.EngineInfo, engine, "engine"),
        visibility=_pick(model_processes.Visibility, doc.get("visibility", {}), "visibility"),
        health=tuple(
            _pick(status.HealthCheck, h, f"health[{i}]")
            for i, h in enumerate(doc.get("health", []))
        ),
        xid_events=tuple(
            model_gpu.XidEvent(int(e["gpu_index"]), int(e["xid"]), _epoch(e["at"]) or 0.0)
            for e in doc.get("xid_events", [])
        ),
        host_stats=None if stats is None else _pick(model_snapshot.HostStats, stats, "host_stats"),
        kernel_faults=_report_faults(doc),
        fault_counts=_report_fault_counts(doc),
    )


#: Kernel faults and counters read back from a report at most (what the collector keeps).
_MAX_REPORT_FAULTS = 256
_MAX_REPORT_COUNTS = 512


def _container_of(entry: dict[str, Any], where: str) -> dict[str, Any]:
    """``{"container": {id, name}}`` of the report as the dataclass's two fields."""
    container = entry.get("container")
    if container is None:
        return {"container_id": None, "container_name": None}
    if not isinstance(container, dict):
        raise SerializeError(f"{where}.container: expected an object or null")
    return {"container_id": container.get("id"), "container_name": container.get("name")}


def _entries(doc: dict[str, Any], key: str, limit: int) -> list[tuple[str, dict[str, Any]]]:
    items = doc.get(key, [])
    if not isinstance(items, list):
        raise SerializeError(f"{key}: expected a list")
    out = []
    for i, item in enumerate(items[-limit:]):
        if not isinstance(item, dict):
            raise SerializeError(f"{key}[{i}]: expected an object")
        out.append((f"{key}[{i}]", item))
    return out


def _report_faults(doc: dict[str, Any]) -> tuple[model_faults.KernelFault, ...]:
    """The report's ``kernel_faults`` (absent in reports before it: none)."""
    faults = []
    for where, f in _entries(doc, "kernel_faults", _MAX_REPORT_FAULTS):
        raw_candidates = f.get("candidates", [])
        if not isinstance(raw_candidates, list):
            raise SerializeError(f"{where}.candidates: expected a list")
        candidates = []
        for k, c in enumerate(raw_candidates[:64]):
            if not isinstance(c, dict):
                raise SerializeError(f"{where}.candidates[{k}]: expected an object")
            overrides = _container_of(c, f"{where}.candidates[{k}]")
            candidates.append(_pick(model_faults.FaultCandidate, c, where, **overrides))
        overrides = _container_of(f, where)
        faults.append(
            _pick(
                model_faults.KernelFault,
                f,
                where,
                at=_epoch(f.get("at")) or 0.0,
                fault_class=f.get("class"),
                candidates=tuple(candidates),
                **overrides,
            )
        )
    return tuple(faults)


def _report_fault_counts(doc: dict[str, Any]) -> tuple[model_faults.FaultCount, ...]:
    """The report's ``fault_counts`` (absent in reports before it: none)."""
    return tuple(
        _pick(
            model_faults.FaultCount, c, where, fault_class=c.get("class"), **_container_of(c, where)
        )
        for where, c in _entries(doc, "fault_counts", _MAX_REPORT_COUNTS)
    )
