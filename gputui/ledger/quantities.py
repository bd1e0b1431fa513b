"""Per-subject increments of one interval: two consecutive snapshots in, ledger rows out.

A *device* is a GPU, or a MIG device (``0:1``) of a GPU in MIG mode (its GPU then is not a
device of its own: the MIG devices split it). A *subject* is who a device's time is credited
to: a container, the host processes of one user, PIDs nobody can find (``unknown``), or
nobody (``unallocated``). For an interval ``(t0, t1]`` between two snapshots the state seen
at ``t1`` is credited for the whole interval (NVML's utilization and GPM figures describe the
time just before they are read), except energy, which is the GPU energy counter's delta.

Per device and interval of ``wall`` seconds:

* **occupied**: the device's wall time split between the parties with a process on it: each
  party's own busy time, plus a share of the rest (the time nobody kept it busy) by GPU
  memory (equally when no memory is known). A device without a process is ``unallocated``
  but for the time it was active (``unknown``'s). So Σ occupied + unallocated = devices x
  wall exactly, and no party's busy exceeds its occupied (efficiency ≤ 100 %).
* **reserved**: ``wall`` to each container whose GPU request names the device (or ``all``)
  while it runs, restarts or is paused. Several containers may reserve one device.
* **busy**: ``wall`` x the part of it a kernel ran on the device
  (:func:`~gputui.model.gpu.busy_percent`: GPM graphics-engine activity where read, else NVML
  utilization) split by the parties' per-process SM % (by GPU memory when one is unknown).
  Activity with no process listed goes to the parties of the previous snapshot (the figures
  lag the process list: a job that just exited ran in the window they describe), else to
  ``unknown``.
* **memory**: GiB x seconds of GPU memory held, and the peak.
* **energy**: the counter's delta (power x wall when the counter is missing or went back:
  :attr:`Interval.estimated_energy`). The counter is read on a slower cadence than the
  refresh (it costs milliseconds a call), so an interval in which it did not move gets power x
  wall, and the interval in which it moves gets its delta less what those estimates credited:
  over the counter's period the energy is the counter's. Idle power x wall of it goes to the
  reservation holders (the occupants when nobody reserved it, else ``unallocated``), the rest,
  dynamic energy, by busy share. Idle power is configured per GPU model, else the lowest power
  seen on that GPU so far. The split is an estimate; its sum is the counter.

Longer intervals than :func:`gap_cap` are gaps: nothing is credited for them.

Pure apart from :class:`Accountant`'s small state (the previous snapshot and each GPU's lowest
power).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from gputui.model.gpu import GpuSample, MigInstance, busy_percent
from gputui.model.mig import mig_device_name, mig_instance_of, mig_request
from gputui.model.processes import GpuProcess
from gputui.model.records import record
from gputui.model.snapshot import ContainerUsage, Snapshot

#: Container states whose GPU request reserves the device (``created`` has not started yet).
RESERVING = ("running", "restarting", "paused")
#: The shortest gap: an interval longer than this and :data:`GAP_INTERVALS` intervals is one.
MIN_GAP_S = 30.0
#: How many collection intervals a gap must exceed.
GAP_INTERVALS = 3
#: The energy counter's delta is believed only up to this many watts on average (a counter
#: reset by a driver reload, or a corrupt reading, would credit megajoules to one interval).
MAX_PLAUSIBLE_W = 5000.0

_GIB = 1024.0**3


def gap_cap(interval_s: float) -> float:
    """The longest interval credited for a collection interval of ``interval_s`` seconds."""
    return max(MIN_GAP_S, GAP_INTERVALS * interval_s)


@record
class Subject:
    """Who a device's time is credited to.

    Attributes:
        kind: ``container``, ``user`` (host processes of one user), ``unknown`` (PIDs nobody
            can find, or activity with no process listed) or ``unallocated``.
        key: The container id, the user name, or ``""``.
        name: The container's name (the user name, ``unknown``, ``unallocated``).
        image: The container's image.
        project: Its compose project.
        service: Its compose service.
        pod: ``namespace/pod`` of a Kubernetes container.
        owner: The person credited (a container's :class:`~gputui.model.containers.Owner`,
            the user of host processes); None when unknown.
        owner_confidence: ``high``, ``medium``, ``low`` or ``none``.
        owner_evidence: What named the owner, one line.
    """

    kind: str
    key: str
    name: str
    image: str | None = None
    project: str | None = None
    service: str | None = None
    pod: str | None = None
    owner: str | None = None
    owner_confidence: str | None = None
    owner_evidence: str | None = None


UNALLOCATED = Subject("unallocated", "", "unallocated")
UNKNOWN = Subject("unknown", "", "unknown")


@record
class Device:
    """One device the ledger keeps time for.

    Attributes:
        name: ``0`` for a GPU, ``0:1`` for a MIG device.
        uuid: The GPU's (or MIG device's) UUID.
        model: The GPU's model name (prices are per model).
    """

    name: str
    uuid: str | None
    model: str | None


@dataclass(slots=True)
class Amounts:
    """What one subject used of one device (seconds, GiB-seconds, bytes, joules)."""

    reserved_s: float = 0.0
    occupied_s: float = 0.0
    busy_s: float = 0.0
    mem_gib_s: float = 0.0
    mem_peak_bytes: int = 0
    idle_j: float = 0.0
    dynamic_j: float = 0.0

    def add(self, other: Amounts) -> None:
        """Add ``other`` into this (the peak is the larger one)."""
        self.reserved_s += other.reserved_s
        self.occupied_s += other.occupied_s
        self.busy_s += other.busy_s
        self.mem_gib_s += other.mem_gib_s
        self.mem_peak_bytes = max(self.mem_peak_bytes, other.mem_peak_bytes)
        self.idle_j += other.idle_j
        self.dynamic_j += other.dynamic_j

    @property
    def energy_j(self) -> float:
        """Idle plus dynamic energy."""
        return self.idle_j + self.dynamic_j


@record
class Interval:
    """The increments of one interval.

    Attributes:
        start: ``t0``, seconds since the epoch.
        end: ``t1``.
        rows: (device, subject) → amounts.
        devices: The devices of the interval (each covered for ``end - start``).
        energy_j: Σ of the GPUs' energy over the interval (what the rows' energy sums to).
        estimated_energy: GPUs whose energy is power x wall, not the counter's delta.
        lost: GPUs lost in the interval (no time credited for them).
    """

    start: float
    end: float
    rows: dict[tuple[Device, Subject], Amounts]
    devices: tuple[Device, ...]
    energy_j: float = 0.0
    estimated_energy: tuple[str, ...] = ()
    lost: tuple[str, ...] = ()

    @property
    def wall_s(self) -> float:
        """The interval's length."""
        return self.end - self.start


@record
class Gap:
    """An interval too long to credit: nothing was collected in between.

    Attributes:
        start: The last snapshot before it.
        end: The first snapshot after it.
        reason: For people.
    """

    start: float
    end: float
    reason: str


def subject_of(snapshot: Snapshot, proc: GpuProcess) -> Subject:
    """The subject a GPU process is credited to (the one placement rule of ``on_host``)."""
    if proc.container_id is not None:
        usage = snapshot.container(proc.container_id)
        if usage is None:
            return Subject("container", proc.container_id, proc.container_id[:12])
        return container_subject(usage)
    if not proc.on_host:
        return UNKNOWN
    user = proc.info.user or "?"
    if user == "?":
        return Subject("user", user, user)
    return Subject("user", user, user, owner=user, owner_confidence="high", owner_evidence="user")


def container_subject(usage: ContainerUsage) -> Subject:
    """A container as a subject (name, image, compose project/service, pod)."""
    info = usage.info
    pod = None
    if info.k8s_pod:
        pod = f"{info.k8s_namespace}/{info.k8s_pod}" if info.k8s_namespace else info.k8s_pod
    owner = info.owner
    return Subject(
        "container",
        info.id,
        info.name,
        info.image,
        info.compose_project,
        info.compose_service,
        pod,
        None if owner is None else owner.name,
        None if owner is None else owner.confidence,
        None if owner is None else owner.evidence,
    )


@dataclass(slots=True)
class _DeviceState:
    device: Device
    gpu: GpuSample
    inst: MigInstance | None
    weight: float  # its part of its GPU (slices of a MIG GPU; 1 for a whole GPU)
    parties: dict[Subject, list[float | None]] = field(default_factory=dict)  # mem, sm
    holders: list[Subject] = field(default_factory=list)  # reserving containers
    activity: float = 0.0  # 0-1
    # Busy weights of the parties the previous snapshot listed, when none is listed now but the
    # device was active: the figures describe the time before they were read, when those ran.
    lagging: dict[Subject, float] = field(default_factory=dict)


def _busy_weights(parties: Mapping[Subject, list[float | None]]) -> dict[Subject, float]:
    """How busy time splits between parties: by SM % where every one is known, else by memory."""
    sms = [v[1] for v in parties.values()]
    if all(sm is not None for sm in sms) and sum(sm or 0.0 for sm in sms) > 0:
        return {k: v[1] or 0.0 for k, v in parties.items()}
    return {k: v[0] or 0.0 for k, v in parties.items()}


def _place(snapshot: Snapshot, states: Mapping[int, list[_DeviceState]]) -> dict[str, _DeviceState]:
    """The devices by name, each with the snapshot's processes on it added to its parties."""
    by_name = {s.device.name: s for group in states.values() for s in group}
    for proc in snapshot.processes:
        group = states.get(proc.sample.gpu_index)
        if not group:
            continue
        inst = mig_instance_of(group[0].gpu, proc.sample)
        if group[0].inst is None:
            state = group[0]
        elif inst is not None:
            state = by_name.get(mig_device_name(group[0].gpu.index, inst.index), group[0])
        else:
            continue  # a process of a MIG GPU whose device is unknown: not placed
        subject = subject_of(snapshot, proc)
        mem = proc.sample.used_memory_bytes
        sm = proc.sample.sm_util
        entry = state.parties.setdefault(subject, [0.0, 0.0])
        entry[0] = None if entry[0] is None or mem is None else entry[0] + max(0, mem)
        entry[1] = None if entry[1] is None or sm is None else entry[1] + max(0, sm)
    return by_name


def _devices(gpu: GpuSample) -> list[_DeviceState]:
    model = gpu.name
    insts = [i for i in gpu.mig_instances if i.index >= 0]
    if gpu.mig_mode_current and insts:
        out = []
        for inst in insts:
            name = mig_device_name(gpu.index, inst.index)
            weight = float(inst.slices) if inst.slices and inst.slices > 0 else 1.0
            out.append(_DeviceState(Device(name, inst.uuid or gpu.uuid, model), gpu, inst, weight))
        return out
    return [_DeviceState(Device(str(gpu.index), gpu.uuid, model), gpu, None, 1.0)]


def _percent(value: float | int | None) -> float | None:
    if value is None or value != value:  # NaN
        return None
    return min(1.0, max(0.0, float(value) / 100.0))


def _reserves(usage: ContainerUsage, state: _DeviceState, gpus: tuple[GpuSample, ...]) -> bool:
    request = usage.info.gpu_request
    if request is None or usage.info.status not in RESERVING:
        return False
    if isinstance(request, str):
        return request == "all"
    gpu = state.gpu
    uuid = (gpu.uuid or "").lower()
    for token in request:
        token = token.strip()
        if token == str(gpu.index) or (uuid and token.lower() == uuid):
            return True  # the whole GPU: each of its MIG devices too
        found = mig_request(token, gpus)
        if (
            found is not None
            and state.inst is not None
            and (found[0].index, found[1].index) == (gpu.index, state.inst.index)
        ):
            return True
    return False


def _split(total: float, weights: Mapping[Subject, float]) -> dict[Subject, float]:
    """``total`` in proportion to ``weights`` (equally when they sum to nothing)."""
    if not weights:
        return {}
    s = sum(weights.values())
    if s <= 0:
        return {k: total / len(weights) for k in weights}
    return {k: total * w / s for k, w in weights.items()}


def _power_j(prev: GpuSample | None, cur: GpuSample, wall: float) -> float:
    """Power x wall: the mean of the two readings believed (0 J when neither is)."""
    powers = [g.power_w for g in (prev, cur) if g is not None and g.power_w is not None]
    powers = [p for p in powers if 0 <= p <= MAX_PLAUSIBLE_W]
    if not powers:
        return 0.0
    return sum(powers) / len(powers) * wall


@dataclass(slots=True)
class _Unsettled:
    """Power estimates credited since a GPU's energy counter last moved (to true up)."""

    joules: float = 0.0
    wall: float = 0.0


class Accountant:
    """Turns each new snapshot into the increments since the one before.

    Args:
        interval_s: The collection interval (what a gap is measured against).
        idle_power_w: Idle power per GPU model name; a model not named uses the lowest power
            seen on that GPU so far.
    """

    def __init__(self, interval_s: float, idle_power_w: Mapping[str, float] | None = None) -> None:
        self.cap_s = gap_cap(interval_s)
        self.idle_power_w = dict(idle_power_w or {})
        self._previous: Snapshot | None = None
        self._lowest_w: dict[str | None, float] = {}
        #: Per GPU (uuid, else index): the estimates since its counter last moved.
        self._unsettled: dict[str, _Unsettled] = {}

    @property
    def previous(self) -> Snapshot | None:
        """The last snapshot taken in (None before the first)."""
        return self._previous

    def take(self, snapshot: Snapshot) -> Interval | Gap | None:
        """The increments from the previous snapshot to ``snapshot`` (None for the first).

        A snapshot not later than the previous one is ignored (a clock step back): None.
        """
        prev = self._previous
        if prev is not None and snapshot.taken_at <= prev.taken_at:
            return None
        self._previous = snapshot
        if prev is None:
            return None
        wall = snapshot.taken_at - prev.taken_at
        if wall > self.cap_s:
            self._unsettled.clear()  # the counter's delta across a gap is credited to no one
            return Gap(prev.taken_at, snapshot.taken_at, f"no snapshot for {wall:.0f} s")
        return self.interval(prev, snapshot)

    def _energy_j(self, prev: GpuSample | None, cur: GpuSample, wall: float) -> tuple[float, bool]:
        """The GPU's energy over the interval and whether it is an estimate (power x wall).

        The counter (mJ) is read every few refreshes: while it reads the same as in the
        previous snapshot the interval gets power x wall, and those estimates are remembered;
        when it moves, the interval gets the delta less what they credited (never below 0), so
        the energy over the counter's period is the counter's. A counter missing, gone back
        or implausibly far ahead gives power x wall and forgets the estimates.
        """
        key = cur.uuid or str(cur.index)
        estimate = _power_j(prev, cur, wall)
        if (
            prev is None
            or prev.uuid != cur.uuid
            or prev.total_energy_mj is None
            or cur.total_energy_mj is None
        ):
            self._unsettled.pop(key, None)
            return estimate, True
        if cur.total_energy_mj == prev.total_energy_mj:
            # Not read again since the previous snapshot (no GPU draws 0 W for a period).
            unsettled = self._unsettled.setdefault(key, _Unsettled())
            unsettled.joules += estimate
            unsettled.wall += wall
            return estimate, True
        unsettled = self._unsettled.pop(key, _Unsettled())
        delta = (cur.total_energy_mj - prev.total_energy_mj) / 1000.0
        if 0 <= delta <= MAX_PLAUSIBLE_W * (wall + unsettled.wall):
            return max(0.0, delta - unsettled.joules), False
        return estimate, True

    def _idle_w(self, gpu: GpuSample) -> float:
        configured = self.idle_power_w.get(gpu.name or "")
        if configured is not None:
            return configured
        key = gpu.uuid or str(gpu.index)
        power = gpu.power_w
        if power is not None and 0 <= power <= MAX_PLAUSIBLE_W:
            self._lowest_w[key] = min(self._lowest_w.get(key, power), power)
        return self._lowest_w.get(key, 0.0)

    def interval(self, prev: Snapshot, cur: Snapshot) -> Interval:
        """The increments credited for ``(prev.taken_at, cur.taken_at]``."""
        wall = cur.taken_at - prev.taken_at
        rows: dict[tuple[Device, Subject], Amounts] = {}

        def row(device: Device, subject: Subject) -> Amounts:
            found = rows.get((device, subject))
            if found is None:
                found = rows[(device, subject)] = Amounts()
            return found

        previous_gpus = {g.index: g for g in prev.gpus}
        states: dict[int, list[_DeviceState]] = {}
        lost = []
        for gpu in cur.gpus:
            if gpu.lost:
                lost.append(str(gpu.index))
                continue
            states[gpu.index] = _devices(gpu)
        by_name = _place(cur, states)
        earlier: dict[str, _DeviceState] | None = None  # the previous snapshot's, when needed
        for usage in cur.containers:
            if usage.info.gpu_request is None:
                continue
            for state in by_name.values():
                if _reserves(usage, state, cur.gpus):
                    state.holders.append(container_subject(usage))
        for state in by_name.values():
            gpu, inst = state.gpu, state.inst
            state.activity = _percent(busy_percent(gpu, inst)) or 0.0
            device = state.device
            for holder in state.holders:
                row(device, holder).reserved_s += wall
            if state.parties:
                mems = {k: v[0] or 0.0 for k, v in state.parties.items()}
                busy_by = _split(wall * state.activity, _busy_weights(state.parties))
                # Each party occupies the time it kept the device busy plus a share (by GPU
                # memory) of the time nobody did: busy never exceeds occupied, and the
                # device's wall is still split exactly.
                rest_by = _split(wall - sum(busy_by.values()), mems)
                for subject, seconds in rest_by.items():
                    amounts = row(device, subject)
                    amounts.busy_s += busy_by[subject]
                    amounts.occupied_s += busy_by[subject] + seconds
                    held = state.parties[subject][0]
                    if held:
                        amounts.mem_gib_s += held / _GIB * wall
                        amounts.mem_peak_bytes = max(amounts.mem_peak_bytes, int(held))
            else:
                active = wall * state.activity
                if active > 0 and earlier is None:
                    earlier = _place(prev, {g.index: _devices(g) for g in prev.gpus if not g.lost})
                before = earlier.get(device.name) if active > 0 and earlier else None
                if before is not None and before.parties:
                    # The figures lag the process list (GPM's pair ended up to an interval
                    # before this snapshot): the processes that just exited kept it busy.
                    state.lagging = _busy_weights(before.parties)
                    for subject, seconds in _split(active, state.lagging).items():
                        amounts = row(device, subject)
                        amounts.busy_s += seconds
                        amounts.occupied_s += seconds
                elif active > 0:
                    # Activity with no process listed now or before (a process in a PID
                    # namespace gputui cannot see): somebody unknown occupied the device.
                    unknown = row(device, UNKNOWN)
                    unknown.busy_s += active
                    unknown.occupied_s += active
                if wall - active > 0:
                    row(device, UNALLOCATED).occupied_s += wall - active
        energy_total = 0.0
        estimated = []
        for index, group in states.items():
            gpu = group[0].gpu
            energy, estimate = self._energy_j(previous_gpus.get(index), gpu, wall)
            if estimate:
                estimated.append(str(index))
            energy_total += energy
            idle = min(energy, self._idle_w(gpu) * wall)
            dynamic = energy - idle
            weights_d = {s.device.name: s.weight for s in group}
            busy_d = {s.device.name: s.weight * s.activity for s in group}
            idle_by = _split_names(idle, weights_d)
            dyn_by = _split_names(dynamic, busy_d if sum(busy_d.values()) > 0 else weights_d)
            for state in group:
                self._credit_energy(
                    state, idle_by[state.device.name], dyn_by[state.device.name], row
                )
        return Interval(
            prev.taken_at,
            cur.taken_at,
            rows,
            tuple(s.device for s in by_name.values()),
            energy_total,
            tuple(estimated),
            tuple(lost),
        )

    @staticmethod
    def _credit_energy(
        state: _DeviceState, idle: float, dynamic: float, row: Callable[[Device, Subject], Amounts]
    ) -> None:
        device = state.device
        holders: dict[Subject, float]
        if state.holders:
            holders = dict.fromkeys(state.holders, 1.0)
        elif state.parties:
            holders = {k: v[0] or 0.0 for k, v in state.parties.items()}
        else:
            holders = {UNALLOCATED: 1.0}
        for subject, joules in _split(idle, holders).items():
            row(device, subject).idle_j += joules
        busy = {}
        if state.activity > 0:
            if state.parties:
                busy = _busy_weights(state.parties)
            else:
                busy = state.lagging or {UNKNOWN: 1.0}
        for subject, joules in _split(dynamic, busy or holders).items():
            row(device, subject).dynamic_j += joules


def _split_names(total: float, weights: Mapping[str, float]) -> dict[str, float]:
    s = sum(weights.values())
    if s <= 0:
        return {k: total / len(weights) for k in weights}
    return {k: total * w / s for k, w in weights.items()}
