"""Which GPUs a new job can use now (``gputui free``), and why each other GPU cannot.

A GPU qualifies when nothing holds it and no container has claimed it:

* it answers NVML (not lost) and is not in MIG mode (a MIG GPU is used through its MIG devices,
  judged one by one below);
* no container that is running, restarting, paused or created (it will take its GPUs when it
  starts) asked for it, by index, by UUID or with ``all``;
* no process holds memory on it: a process of the host or of a container, a process ``/proc``
  hides from gputui, or a PID nobody can find (memory held by something that no longer exists
  here, typically a process in another PID namespace or a leaked context);
* its memory in use is known and no more than the driver's own share: memory in use beyond
  :data:`UNEXPLAINED_MIN_BYTES` (or :data:`UNEXPLAINED_MIN_RATIO` of the GPU) with no process
  listed means someone NVML cannot name is using it;
* it has at least the asked free memory and at most the asked utilization.

Qualifying GPUs come first, most free memory first, then by index.

**MIG devices.** Each MIG device of a GPU in MIG mode is judged by the same rules: not reserved
(a container that asked for it by ``0:1`` or ``MIG-…``, or for its whole GPU or ``all``), no
process on it, no memory in use that no process explains, the asked free memory and
utilization (GPM's graphics activity; unknown without GPM). A CUDA process uses one MIG device
(NVIDIA's MIG user guide: one device is enumerated per process), so a MIG device is offered to
a one-device job only, when no whole GPU qualifies; it is named by its ``MIG-…`` UUID, the form
``CUDA_VISIBLE_DEVICES`` takes. Pure: no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from gputui.boundary import sanitise
from gputui.derive import units
from gputui.derive.findings import party_of
from gputui.model.gpu import GpuSample, MigInstance, busy_percent, is_nvml_uuid
from gputui.model.mig import mig_device_name, mig_instance_of, mig_request
from gputui.model.processes import GpuProcess
from gputui.model.records import record
from gputui.model.snapshot import ContainerUsage, Snapshot
from gputui.model.status import Finding

__all__ = [
    "RESERVING_STATES",
    "UNEXPLAINED_MIN_BYTES",
    "UNEXPLAINED_MIN_RATIO",
    "Exclusion",
    "FreeAnswer",
    "FreeRules",
    "GpuChoice",
    "device_list",
    "free_gpus",
    "reserves",
]

#: Container states whose GPU request keeps the GPU from a new job.
RESERVING_STATES = ("running", "restarting", "paused", "created")

#: Memory in use with no process listed below this is the driver's own (contexts, ECC pages).
UNEXPLAINED_MIN_BYTES = 1024**3
#: ... or below this share of the GPU's memory, whichever is larger.
UNEXPLAINED_MIN_RATIO = 0.01

#: At most this many processes are named in one exclusion; the rest are counted.
_NAMED = 3


@record
class FreeRules:
    """What a GPU must offer besides being unclaimed.

    Attributes:
        min_free_memory_bytes: Free memory at least this (0: any).
        max_util: Busy at most this percent of the last interval (None: not checked).
    """

    min_free_memory_bytes: int = 0
    max_util: int | None = None


@record
class Exclusion:
    """One reason a GPU does not qualify.

    Attributes:
        code: ``lost``, ``mig``, ``reserved``, ``processes``, ``orphan``, ``hidden``,
            ``memory_unknown``, ``unexplained_memory``, ``low_memory``, ``busy``, or (a MIG
            device) ``uuid``.
        text: For people: ``reserved by idle container notebook-3 (up 2h00m)``.
        container: The container's name for ``reserved``, else None.
    """

    code: str
    text: str
    container: str | None = None


@record
class GpuChoice:
    """One GPU and the verdict on it.

    Attributes:
        index: NVML index (what ``CUDA_VISIBLE_DEVICES`` takes with the default PCI order).
        uuid: The GPU's UUID.
        name: Its model name.
        free_memory_bytes: Total minus used, None when unknown.
        total_memory_bytes: Its memory.
        utilization_gpu: NVML's ``utilization.gpu`` point read %, None when unknown.
        exclusions: Why it does not qualify; empty when it does.
        mig_device: For a MIG device, its name (``0:2``; ``index`` is its GPU's, ``uuid`` its
            ``MIG-…`` UUID, ``name`` the GPU's with the profile); None for a whole GPU.
        busy_percent: The percent of the last interval a kernel ran
            (:func:`gputui.model.gpu.busy_percent`): what ``--max-util`` judges. A point read
            covers the driver's last sample period only and reads 0 % all through a load busy
            part of each second.
    """

    index: int
    uuid: str | None
    name: str | None
    free_memory_bytes: int | None
    total_memory_bytes: int | None
    utilization_gpu: int | None
    exclusions: tuple[Exclusion, ...] = ()
    mig_device: str | None = None
    busy_percent: float | None = None

    @property
    def usable(self) -> bool:
        """True when a new job can use the GPU now."""
        return not self.exclusions


@record
class FreeAnswer:
    """The verdict on every GPU of one snapshot.

    Attributes:
        gpus: Every GPU, qualifying ones first (most free memory, then index), then the others
            by index.
        caveats: What the answer could not take into account (Docker did not answer...).
        mig: The MIG devices of the GPUs in MIG mode, qualifying ones first (most free memory,
            then by name), then the others by name.
    """

    gpus: tuple[GpuChoice, ...]
    caveats: tuple[str, ...] = ()
    mig: tuple[GpuChoice, ...] = ()

    @property
    def usable(self) -> tuple[GpuChoice, ...]:
        """The qualifying GPUs, best first."""
        return tuple(g for g in self.gpus if g.usable)

    @property
    def excluded(self) -> tuple[GpuChoice, ...]:
        """The other GPUs, by index."""
        return tuple(g for g in self.gpus if not g.usable)

    @property
    def usable_mig(self) -> tuple[GpuChoice, ...]:
        """The qualifying MIG devices, best first."""
        return tuple(m for m in self.mig if m.usable)

    def choose(self, count: int | None) -> tuple[GpuChoice, ...]:
        """The devices to print for ``-n count`` (None: every qualifying GPU), or none.

        Whole GPUs first; a MIG device only for one device (a CUDA process uses one) and only
        when no whole GPU qualifies.
        """
        usable = self.usable
        wanted = count if count is not None else max(1, len(usable))
        if len(usable) >= wanted:
            return usable[:wanted]
        if wanted == 1 and self.usable_mig:
            return self.usable_mig[:1]
        return ()


def device_list(
    chosen: Sequence[GpuChoice], every: Sequence[GpuChoice], uuids: bool
) -> tuple[str, tuple[str, ...]]:
    """The value for ``CUDA_VISIBLE_DEVICES``, and a line for each GPU printed by index instead.

    A MIG device is printed by its ``MIG-…`` UUID (it qualifies only with one in NVML's form).
    Only values safe in a comma list are printed: an index, or a UUID in a form NVML gives
    (:func:`~gputui.model.gpu.is_nvml_uuid`: no comma, space or control character) that no other
    GPU shares. A UUID that is neither (a broken driver, a stand-in) is never printed: the
    GPU's index takes its place and the line says why, the UUID shown through ``safe_text``.

    Args:
        chosen: The GPUs to print, in order.
        every: Every GPU of the answer (a UUID two GPUs share names neither).
        uuids: UUIDs asked for (``--uuid``); indexes otherwise.

    Returns:
        ``"0,3"`` or ``"GPU-…,GPU-…"``, and the lines for stderr.
    """
    if not uuids and not any(g.mig_device for g in chosen):
        return ",".join(str(g.index) for g in chosen), ()
    counts = Counter((g.uuid or "").lower() for g in every if g.uuid)
    values: list[str] = []
    notes: list[str] = []
    for g in chosen:
        if g.mig_device is not None:
            # Always by UUID (CUDA takes no index for a MIG device); only a valid one qualifies.
            values.append(g.uuid or "")
            continue
        if not uuids:
            values.append(str(g.index))
            continue
        if g.uuid is not None and is_nvml_uuid(g.uuid) and counts[g.uuid.lower()] == 1:
            values.append(g.uuid)
            continue
        values.append(str(g.index))
        if g.uuid is None:
            why = "NVML gave no UUID"
        elif not is_nvml_uuid(g.uuid):
            why = f"its UUID {sanitise.safe_text(g.uuid, 60)} is not in NVML's GPU-<uuid> form"
        else:
            why = f"its UUID {g.uuid} is also another GPU's"
        notes.append(f"GPU {g.index}: {why}: printed its index instead")
    return ",".join(values), tuple(notes)


def reserves(usage: ContainerUsage, gpu: GpuSample) -> bool:
    """Whether a container's GPU request claims ``gpu`` while it is in a reserving state.

    Args:
        usage: The container.
        gpu: The GPU.
    """
    info = usage.info
    request = info.gpu_request
    if request is None or info.status not in RESERVING_STATES:
        return False
    if isinstance(request, str):
        return request == "all"
    uuid = (gpu.uuid or "").lower()
    return any(r == str(gpu.index) or (uuid and r.lower() == uuid) for r in request)


def _reservation(snapshot: Snapshot, usage: ContainerUsage, idle: dict[str, Finding]) -> str:
    info = usage.info
    name = sanitise.safe_text(info.name, 60)
    if info.status == "created":
        return f"reserved by container {name} (created, never started)"
    if info.status == "paused":
        return f"reserved by paused container {name}"
    if usage.pids:
        n = len(usage.pids)
        return f"reserved by container {name} ({n} GPU process{'' if n == 1 else 'es'})"
    if not usage.gpu_data:
        return f"reserved by container {name}"
    finding = idle.get(info.id)
    idle_s = finding.figure("idle_seconds") if finding is not None else None
    if isinstance(idle_s, (int, float)) and idle_s > 0:
        return f"reserved by idle container {name} for {units.duration(idle_s)}"
    if info.started_at:
        up = units.duration(snapshot.taken_at - info.started_at)
        return f"reserved by idle container {name} (up {up}, no GPU process)"
    return f"reserved by idle container {name} (no GPU process)"


def _pids(pids: list[int]) -> str:
    shown = ", ".join(str(p) for p in pids[:_NAMED])
    more = len(pids) - _NAMED
    return shown + (f" and {more} more" if more > 0 else "")


def _process_exclusions(snapshot: Snapshot, processes: Sequence[GpuProcess]) -> list[Exclusion]:
    held: dict[str, list[int]] = {}
    memory: dict[str, int] = {}
    labels: dict[str, str] = {}
    for proc in processes:
        if not proc.info.exists:
            code = "orphan"
        elif proc.info.proc_hidden:
            code = "hidden"
        else:
            code = "processes"
            key, label = party_of(snapshot, proc)
            labels[key] = label
        held.setdefault(code, []).append(proc.pid)
        memory[code] = memory.get(code, 0) + max(0, proc.sample.used_memory_bytes or 0)
    out = []
    if "processes" in held:
        pids = sorted(set(held["processes"]))
        n = len(pids)
        where = ", ".join(sorted(sanitise.safe_text(v, 40) for v in set(labels.values())))
        out.append(
            Exclusion(
                "processes",
                f"used by {n} process{'' if n == 1 else 'es'} ({units.size(memory['processes'])}, "
                f"{where}): PID {_pids(pids)}",
            )
        )
    if "hidden" in held:
        pids = sorted(set(held["hidden"]))
        out.append(
            Exclusion(
                "hidden",
                f"held by another user's PID {_pids(pids)} ({units.size(memory['hidden'])}; "
                "/proc hides it from gputui)",
            )
        )
    if "orphan" in held:
        pids = sorted(set(held["orphan"]))
        out.append(
            Exclusion(
                "orphan",
                f"{units.size(memory['orphan'])} held by PID {_pids(pids)} nobody can see "
                "(no such process here)",
            )
        )
    return out


def _judge(
    snapshot: Snapshot, gpu: GpuSample, rules: FreeRules, idle: dict[str, Finding]
) -> GpuChoice:
    total, used = gpu.memory_total_bytes, gpu.memory_used_bytes
    free = None if total is None or used is None else max(0, total - used)
    choice = GpuChoice(
        gpu.index, gpu.uuid, gpu.name, free, total, gpu.utilization_gpu,
        busy_percent=busy_percent(gpu),
    )  # fmt: skip
    if gpu.lost:
        reason = sanitise.safe_text(gpu.error, 120, na="every query fails")
        return _with(choice, [Exclusion("lost", f"lost: {reason}")])
    out: list[Exclusion] = []
    if gpu.mig_mode_current:
        out.append(Exclusion("mig", "MIG mode is on: a job uses one of its MIG devices"))
    for usage in snapshot.containers:
        if reserves(usage, gpu):
            text = _reservation(snapshot, usage, idle)
            out.append(Exclusion("reserved", text, usage.info.name))
    on_it = [p for p in snapshot.processes if p.sample.gpu_index == gpu.index]
    out += _process_exclusions(snapshot, on_it)
    out += _memory_and_load(choice, used, on_it, rules)
    return _with(choice, out)


def _memory_and_load(
    choice: GpuChoice, used: int | None, on_it: Sequence[GpuProcess], rules: FreeRules
) -> list[Exclusion]:
    """The rules on memory and utilization, for a GPU or a MIG device."""
    out: list[Exclusion] = []
    total, free = choice.total_memory_bytes, choice.free_memory_bytes
    if free is None:
        out.append(Exclusion("memory_unknown", "memory in use unknown (NVML gives N/A)"))
    else:
        listed = sum(max(0, p.sample.used_memory_bytes or 0) for p in on_it)
        floor = max(UNEXPLAINED_MIN_BYTES, int((total or 0) * UNEXPLAINED_MIN_RATIO))
        if used is not None and not listed and used > floor:
            out.append(
                Exclusion(
                    "unexplained_memory",
                    f"{units.size(used)} in use by no process NVML lists",
                )
            )
        if free < rules.min_free_memory_bytes:
            out.append(
                Exclusion(
                    "low_memory",
                    f"only {units.size(free)} free "
                    f"(asked for {units.size(rules.min_free_memory_bytes)})",
                )
            )
    if rules.max_util is not None:
        busy = choice.busy_percent
        if busy is None:
            na = "no GPM figure for the MIG device" if choice.mig_device else "NVML gives N/A"
            out.append(Exclusion("busy", f"utilization unknown ({na})"))
        elif round(busy) > rules.max_util:  # judged as shown: 10.4 % is within 10 %
            out.append(Exclusion("busy", f"{round(busy)}% busy (at most {rules.max_util}% asked)"))
    return out


def _reserves_mig(usage: ContainerUsage, gpu: GpuSample, inst: MigInstance) -> bool:
    """Whether a container in a reserving state asked for this MIG device or its whole GPU."""
    if reserves(usage, gpu):  # "all", the GPU's index or UUID: every MIG device of it
        return True
    request = usage.info.gpu_request
    if isinstance(request, str) or request is None or usage.info.status not in RESERVING_STATES:
        return False
    for token in request:
        named = mig_request(token, (gpu,))
        if named is not None and named[1] == inst:
            return True
    return False


def _judge_mig(
    snapshot: Snapshot,
    gpu: GpuSample,
    inst: MigInstance,
    rules: FreeRules,
    idle: dict[str, Finding],
) -> GpuChoice:
    name = mig_device_name(gpu.index, inst.index)
    total, used = inst.memory_total_bytes, inst.memory_used_bytes
    free = None if total is None or used is None else max(0, total - used)
    util = None if inst.gpm_graphics_active is None else round(inst.gpm_graphics_active)
    model = sanitise.safe_text(gpu.name, 40, na="GPU")
    profile = sanitise.safe_text(inst.profile, 20, na="")
    label = f"{model} MIG {profile}".strip()
    choice = GpuChoice(
        gpu.index, inst.uuid, label, free, total, util, (), name, busy_percent(gpu, inst)
    )
    out: list[Exclusion] = []
    if inst.uuid is None or not is_nvml_uuid(inst.uuid) or not inst.uuid.upper().startswith("MIG-"):
        shown = sanitise.safe_text(inst.uuid, 60)
        out.append(
            Exclusion(
                "uuid",
                f"its UUID {shown} is not NVML's MIG-<uuid>: CUDA_VISIBLE_DEVICES cannot name it",
            )
        )
    for usage in snapshot.containers:
        if _reserves_mig(usage, gpu, inst):
            out.append(Exclusion("reserved", _reservation(snapshot, usage, idle), usage.info.name))
    on_it = [
        p
        for p in snapshot.processes
        if p.sample.gpu_index == gpu.index and mig_instance_of(gpu, p.sample) == inst
    ]
    out += _process_exclusions(snapshot, on_it)
    out += _memory_and_load(choice, used, on_it, rules)
    return _with(choice, out)


def _with(choice: GpuChoice, exclusions: list[Exclusion]) -> GpuChoice:
    return replace(choice, exclusions=tuple(exclusions))


def _caveats(snapshot: Snapshot) -> tuple[str, ...]:
    out = []
    nvml = snapshot.sources.get("nvml")
    if nvml is not None and not nvml.ok:
        out.append(f"NVML: {sanitise.safe_text(nvml.error, 200)}")
    docker = snapshot.sources.get("docker")
    if docker is not None and not docker.ok and docker.kind != "not_found":
        out.append(
            f"Docker did not answer ({sanitise.safe_text(docker.error, 160)}): "
            "containers' GPU reservations are not known"
        )
    unknown = sorted(
        u.info.name
        for u in snapshot.containers
        if u.info.inspect_problem and u.info.status in RESERVING_STATES
    )
    if unknown:
        # A stub from the list reply (inspect over the size cap): its GPU request is unknown,
        # so a GPU it holds may be judged free. Said, never silently assumed "no request".
        named = ", ".join(sanitise.safe_text(n, 40) for n in unknown[:3])
        more = f" and {len(unknown) - 3} more" if len(unknown) > 3 else ""
        out.append(
            f"the GPU request of container {named}{more} is unknown (its engine description "
            "is over the size cap): a GPU it reserves may be listed as free"
        )
    if snapshot.visibility.host_pid_namespace is False:
        out.append(
            "gputui is not in the host PID namespace: every GPU process looks like a PID "
            "nobody can see"
        )
    return tuple(out)


def free_gpus(
    snapshot: Snapshot, rules: FreeRules | None = None, findings: tuple[Finding, ...] = ()
) -> FreeAnswer:
    """The verdict on every GPU of ``snapshot``.

    Args:
        snapshot: One refresh (with the Docker engine's answer: reservations come from it).
        rules: Free memory and utilization bounds.
        findings: The snapshot's findings; an ``idle_reservation`` one says how long a container
            has been idle (without it, its uptime is given).

    Returns:
        Every GPU with its exclusions, qualifying ones first, and every MIG device.
    """
    rules = rules or FreeRules()
    idle = {
        f.subject.removeprefix("container:"): f for f in findings if f.kind == "idle_reservation"
    }
    choices = [_judge(snapshot, g, rules, idle) for g in snapshot.gpus]
    usable = sorted(
        (c for c in choices if c.usable), key=lambda c: (-(c.free_memory_bytes or 0), c.index)
    )
    others = sorted((c for c in choices if not c.usable), key=lambda c: c.index)
    devices = [
        _judge_mig(snapshot, g, inst, rules, idle)
        for g in snapshot.gpus
        if g.mig_mode_current and not g.lost
        for inst in g.mig_instances
        if inst.index >= 0  # a GPU instance without a compute instance runs nothing
    ]
    order = {m.mig_device: n for n, m in enumerate(devices)}  # NVML's order: by GPU, index
    mig_usable = sorted(
        (m for m in devices if m.usable),
        key=lambda m: (-(m.free_memory_bytes or 0), order[m.mig_device]),
    )
    mig_others = [m for m in devices if not m.usable]
    return FreeAnswer((*usable, *others), _caveats(snapshot), (*mig_usable, *mig_others))
