"""Per-party GPU activity: a container's part of its GPU's SM activity (NVML GPM).

GPM measures a whole GPU (or one MIG GPU instance); NVML's per-process SM figure
(``nvmlDeviceGetProcessUtilization``) says how the busy time splits between processes. A
party's activity is its processes' share of that per-process SM time times the GPU's GPM
figure: an **estimate** where several parties share the GPU, **exact** where one party has the
GPU or the MIG instance to itself. Where the split is unknown (no per-process figures, as on
MIG devices, shared by several parties) no estimate is made.

Pure: a function of one snapshot.
"""

from __future__ import annotations

from gputui.derive.findings import party_of
from gputui.model.gpu import GpuSample
from gputui.model.mig import mig_device_name, mig_instance_of
from gputui.model.records import record
from gputui.model.snapshot import Snapshot


@record
class Activity:
    """One party's part of one GPU's (or MIG device's) GPM figures.

    Attributes:
        device: ``0`` for a GPU, ``0:1`` for a MIG device.
        party: The party's key (container id, ``host``, ``unknown``).
        label: The party's name for people.
        share: Its part of the device's SM time (0-1).
        sm_active: Its part of the device's SM activity, percent of the device.
        tensor_active: The device's tensor activity when the party is alone on it (None when
            shared or not read: SM time says nothing about whose kernels used tensor cores; a
            copy loop beside a bf16 matmul job would be credited with tensor work).
        exact: True when the party is alone on the device (no estimate involved).
    """

    device: str
    party: str
    label: str
    share: float
    sm_active: float
    tensor_active: float | None
    exact: bool


def _split(
    device: str,
    parties: dict[str, tuple[str, int | None]],
    sm_active: float,
    tensor_active: float | None,
) -> list[Activity]:
    """Split one device's figures by each party's SM time (``None``: unknown for that party)."""
    if len(parties) == 1:
        ((key, (label, _)),) = parties.items()
        return [Activity(device, key, label, 1.0, sm_active, tensor_active, True)]
    if any(sm is None for _, sm in parties.values()):
        return []  # one party's share unknown: the others' would be wrong too
    total = sum(sm or 0 for _, sm in parties.values())
    if total <= 0:
        return []  # nobody measured busy: no basis for a split
    out = []
    for key, (label, sm) in parties.items():
        share = (sm or 0) / total
        out.append(
            Activity(
                device,
                key,
                label,
                share,
                share * sm_active,
                None,
                False,
            )
        )
    return out


def activity_estimates(snapshot: Snapshot) -> tuple[Activity, ...]:
    """Each party's part of each device's GPM activity, by device then biggest first."""
    by_gpu: dict[str, dict[str, tuple[str, int | None]]] = {}
    figures: dict[str, tuple[float, float | None]] = {}
    gpus: dict[int, GpuSample] = {g.index: g for g in snapshot.gpus if not g.lost}
    for gpu in gpus.values():
        if gpu.gpm_sm_active is not None:
            figures[str(gpu.index)] = (gpu.gpm_sm_active, gpu.gpm_tensor_active)
        for inst in gpu.mig_instances:
            if inst.index >= 0 and inst.gpm_sm_active is not None:
                name = mig_device_name(gpu.index, inst.index)
                figures[name] = (inst.gpm_sm_active, inst.gpm_tensor_active)
    for proc in snapshot.processes:
        owner = gpus.get(proc.sample.gpu_index)
        if owner is None:
            continue
        on = mig_instance_of(owner, proc.sample)
        device = str(owner.index) if on is None else mig_device_name(owner.index, on.index)
        if device not in figures:
            continue
        key, label = party_of(snapshot, proc)
        parties = by_gpu.setdefault(device, {})
        old = parties.get(key)
        sm = proc.sample.sm_util
        if old is not None:
            sm = None if old[1] is None or sm is None else old[1] + sm
        parties[key] = (label, sm)
    out: list[Activity] = []
    for device in sorted(by_gpu, key=lambda d: tuple(int(p) for p in d.split(":"))):
        sm_active, tensor_active = figures[device]
        rows = _split(device, by_gpu[device], sm_active, tensor_active)
        out += sorted(rows, key=lambda a: (-a.sm_active, a.label))
    return tuple(out)
