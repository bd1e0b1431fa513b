"""Kernel-log faults attributed to the GPU, the process and the container.

An XID line names the GPU by its PCI address and, from R450 drivers on, usually the process by
its host PID; an OOM kill names the PID and the memory cgroup. By the time gputui reads the line
the process is often gone (the fault killed it), so the collector keeps a short memory of the GPU
processes it saw: PID, start time, container, GPU, for :data:`MEMORY_S` seconds after each was
last seen. A PID is taken as the line's process only if that process had started before the
line (a PID reused since then is not it). A line without a PID gets the processes that were on
that GPU (or MIG device) at that moment, marked as candidates: none of them is known to be it.
"""

from __future__ import annotations

import collections
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import NamedTuple, Protocol

from gputui.collect.linux.fileio import read_small
from gputui.collect.linux.kernel_faults import OomKill, XidLine
from gputui.collect.linux.kmsg import FaultLine
from gputui.collect.linux.membership import parse_cgroup
from gputui.collect.linux.proc_parse import parse_stat
from gputui.collect.xid_catalog import OOM_FIX, classify
from gputui.model.containers import ContainerInfo
from gputui.model.faults import FaultCandidate, FaultCount, KernelFault
from gputui.model.gpu import GpuSample
from gputui.model.mig import mig_device_name
from gputui.model.processes import GpuProcess
from gputui.model.status import SourceStatus

__all__ = [
    "MEMORY_S",
    "FaultAttributor",
    "FaultReader",
    "KernelFaultTracker",
    "LiveProcess",
    "normalise_pci",
    "read_live_process",
]

#: Seconds a GPU process is remembered after it was last seen.
MEMORY_S = 60.0
#: GPU processes remembered at most (those not seen for longest are forgotten first; when
#: every one was seen within the memory, newcomers wait for room).
MAX_REMEMBERED = 4096
#: Seconds between two sweeps of the processes no longer seen (a lookup checks the age too).
SWEEP_S = 5.0
#: Attributed faults kept for the snapshot (the newest).
MAX_FAULTS = 256
#: Counter series kept at most; faults beyond go to a series without a container.
MAX_COUNT_KEYS = 512
#: Candidates listed for a fault without a PID.
MAX_CANDIDATES = 16
#: Process start times come from the boot time in whole seconds, the kernel log's stamps from
#: the monotonic clock: they may disagree by about a second.
START_SLACK_S = 1.5
#: A process counts as on the GPU "at that moment" when gputui saw it this close to the line.
CANDIDATE_SLACK_S = 5.0
#: Container names remembered for containers that went away.
MAX_NAMES = 1024


class LiveProcess(NamedTuple):
    """What ``/proc`` says of a live PID."""

    start_time: float | None
    name: str | None
    container_id: str | None


class FaultReader(Protocol):
    """The kernel-log reader the tracker drains (:class:`gputui.collect.linux.kmsg.KmsgReader`)."""

    def drain(self) -> list[FaultLine]:
        """Fault lines read since the last call."""
        ...

    def status(self) -> SourceStatus:
        """Whether the kernel log can be read."""
        ...

    def start(self) -> None:
        """Start reading in the background (where the reader does)."""
        ...

    def close(self) -> None:
        """Stop reading."""
        ...


def _boot_time() -> float | None:
    text = read_small("/proc/stat") or ""
    at = text.find("\nbtime ")
    if at < 0:
        return None
    value = text[at + 7 : text.find("\n", at + 7)].strip()
    return float(value) if value.isdigit() and len(value) <= 20 else None


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def read_live_process(pid: int) -> LiveProcess | None:
    """Start time, name and container of a live PID from ``/proc``; None when it is gone."""
    stat = parse_stat(read_small(f"/proc/{pid}/stat") or "")
    if stat is None:
        return None
    boot = _boot_time()
    start = None if boot is None else boot + stat.start_ticks / _CLOCK_TICKS
    match = parse_cgroup(read_small(f"/proc/{pid}/cgroup") or "")
    return LiveProcess(start, stat.comm, match.container_id if match else None)


def normalise_pci(bus_id: str | None) -> str | None:
    """``00000000:3B:00.0`` (NVML) or ``0000:3b:00`` (the kernel log) → ``0000:3b:00``."""
    if not bus_id or len(bus_id) > 32:
        return None
    parts = bus_id.strip().lower().split(":")
    try:
        if len(parts) == 3:
            dom, bus, dev = int(parts[0], 16), int(parts[1], 16), int(parts[2].split(".")[0], 16)
        elif len(parts) == 2:
            dom, bus, dev = 0, int(parts[0], 16), int(parts[1].split(".")[0], 16)
        else:
            return None
    except ValueError:
        return None
    if dom > 0xFFFF_FFFF or bus > 0xFF or dev > 0x1F:
        return None
    return f"{dom:04x}:{bus:02x}:{dev:02x}"


@dataclass(slots=True)
class _Seen:
    pid: int
    start_time: float | None
    name: str | None
    container_id: str | None
    gpu_index: int
    gpu_instance: int | None
    compute_instance: int | None
    first_seen: float
    last_seen: float


class FaultAttributor:
    """Remembers recent GPU processes and attributes fault lines to them.

    Args:
        live: Reads a live PID's start time, name and container (``/proc``; a test may stub it).
        memory_s: Seconds a process is remembered after it was last seen.
        max_faults: Attributed faults kept (the newest).
    """

    def __init__(
        self,
        live: Callable[[int], LiveProcess | None] = read_live_process,
        memory_s: float = MEMORY_S,
        max_faults: int = MAX_FAULTS,
    ) -> None:
        self._live = live
        self._memory_s = memory_s
        self._seen: dict[tuple[int, float | None, int], _Seen] = {}
        self._sweep_at = 0.0
        self._names: collections.OrderedDict[str, str] = collections.OrderedDict()
        self._faults: collections.deque[KernelFault] = collections.deque(maxlen=max_faults)
        self._counts: dict[tuple[str, int | None, int | None, str, str | None], int] = {}
        self._live_cache: dict[int, LiveProcess | None] = {}
        self._by_pid: dict[int, list[_Seen]] = {}
        self._by_gpu: dict[int, list[_Seen]] = {}

    # -- memory ----------------------------------------------------------------------------

    def observe(
        self, processes: Iterable[GpuProcess], containers: Iterable[ContainerInfo], now: float
    ) -> None:
        """Remember this refresh's GPU processes and container names; forget the old ones."""
        for info in containers:
            if info.name:
                self._names[info.id] = info.name
                self._names.move_to_end(info.id)
        while len(self._names) > MAX_NAMES:
            self._names.popitem(last=False)
        # Every GPU process passes here each refresh (thousands on a busy host): a known one
        # costs a lookup and two stores; forgetting is a sweep every few seconds, not an
        # ordering kept up to date per process.
        remembered = self._seen
        swept = False
        for p in processes:
            facts = p.info
            if not facts.exists:
                continue  # NVML still lists a PID that is gone: it tells nothing new
            sample = p.sample
            key = (p.pid, facts.start_time, sample.gpu_index)
            seen = remembered.get(key)
            if seen is not None:
                seen.last_seen = now
                if p.container_id is not None:
                    seen.container_id = p.container_id
                continue
            if len(remembered) >= MAX_REMEMBERED:
                if swept:
                    continue  # full of processes seen within the memory: no room this time
                self._forget(now)
                swept = True
                if len(remembered) >= MAX_REMEMBERED:
                    continue
            remembered[key] = _Seen(
                p.pid,
                facts.start_time,
                facts.name,
                p.container_id,
                sample.gpu_index,
                sample.mig_gi_id,
                sample.mig_ci_id,
                now if facts.start_time is None else min(now, facts.start_time),
                now,
            )
        if now >= self._sweep_at and not swept:
            self._forget(now)

    def _forget(self, now: float) -> None:
        """Forget the processes not seen within the memory."""
        horizon = now - self._memory_s
        remembered = self._seen
        for key in [key for key, seen in remembered.items() if seen.last_seen < horizon]:
            del remembered[key]
        self._sweep_at = now + SWEEP_S

    def _remembered(self, pid: int, at: float) -> _Seen | None:
        best: _Seen | None = None
        for seen in self._by_pid.get(pid, ()):
            if seen.last_seen < at - self._memory_s:
                continue
            if seen.start_time is not None and seen.start_time > at + START_SLACK_S:
                continue  # a later process with the same PID
            if best is None or seen.last_seen > best.last_seen:
                best = seen
        return best

    # -- attribution -----------------------------------------------------------------------

    def attribute(self, lines: Sequence[FaultLine], gpus: Sequence[GpuSample]) -> None:
        """Attribute new fault lines (after :meth:`observe` of the same refresh)."""
        if not lines:
            return  # the usual refresh: nothing new in the kernel log, nothing to index
        by_pci = {normalise_pci(g.pci_bus_id): g for g in gpus if g.pci_bus_id}
        # A flood of one XID names the same PIDs and GPUs again and again: /proc is read once
        # per PID, and the memory indexed once, per call.
        self._live_cache = {}
        self._by_pid = {}
        self._by_gpu = {}
        # Oldest sighting first, as the candidates are taken from the newest end.
        for seen in sorted(self._seen.values(), key=attrgetter("last_seen")):
            self._by_pid.setdefault(seen.pid, []).append(seen)
            self._by_gpu.setdefault(seen.gpu_index, []).append(seen)
        for line in lines:
            if isinstance(line.parsed, XidLine):
                fault = self._xid(line, line.parsed, by_pci)
            else:
                fault = self._oom(line, line.parsed)
            self._faults.append(fault)
            self._count(fault)

    def _name(self, container_id: str | None) -> str | None:
        return None if container_id is None else self._names.get(container_id)

    def _xid(
        self, line: FaultLine, xid: XidLine, by_pci: dict[str | None, GpuSample]
    ) -> KernelFault:
        entry = classify(xid.xid)
        gpu = by_pci.get(xid.pci)
        mig = None
        if gpu is not None and xid.gpu_instance is not None:
            devices = [
                inst
                for inst in gpu.mig_instances
                if inst.index >= 0
                and inst.gpu_instance_id == xid.gpu_instance
                and (
                    xid.compute_instance is None or inst.compute_instance_id == xid.compute_instance
                )
            ]
            if len(devices) == 1:
                mig = mig_device_name(gpu.index, devices[0].index)
        base = KernelFault(
            kind="xid",
            at=line.at,
            seq=line.record.seq,
            raw=line.record.message,
            fault_class=entry.fault_class,
            meaning=entry.meaning,
            fix=entry.fix,
            xid=xid.xid,
            pci_bus_id=xid.pci,
            gpu_index=None if gpu is None else gpu.index,
            mig_device=mig,
            gpu_instance=xid.gpu_instance,
            compute_instance=xid.compute_instance,
            pid=xid.pid,
            process_name=xid.process_name,
            injected=line.record.facility != 0,
        )
        if xid.pid is not None:
            return self._for_pid(base, xid.pid, line.at)
        if gpu is None:
            return base
        candidates = self._candidates(gpu.index, xid.gpu_instance, line.at)
        if not candidates:
            return base
        return _replace(base, attribution="candidates", candidates=candidates)

    def _for_pid(self, base: KernelFault, pid: int, at: float) -> KernelFault:
        if pid not in self._live_cache:
            self._live_cache[pid] = self._live(pid)
        live = self._live_cache[pid]
        if live is not None and (live.start_time is None or live.start_time <= at + START_SLACK_S):
            return _replace(
                base,
                process_name=base.process_name or live.name,
                container_id=live.container_id,
                container_name=self._name(live.container_id),
                attribution="process",
            )
        seen = self._remembered(pid, at)
        if seen is not None:
            return _replace(
                base,
                process_name=base.process_name or seen.name,
                container_id=seen.container_id,
                container_name=self._name(seen.container_id),
                attribution="recent_process",
            )
        return _replace(base, attribution="pid_only")

    def _candidates(self, gpu: int, gi: int | None, at: float) -> tuple[FaultCandidate, ...]:
        out: dict[int, FaultCandidate] = {}
        for seen in reversed(self._by_gpu.get(gpu, [])):
            if gi is not None and seen.gpu_instance != gi:
                continue
            if seen.first_seen > at + START_SLACK_S or seen.last_seen < at - CANDIDATE_SLACK_S:
                continue
            out.setdefault(
                seen.pid,
                FaultCandidate(
                    seen.pid, seen.name, seen.container_id, self._name(seen.container_id)
                ),
            )
            if len(out) >= MAX_CANDIDATES:
                break
        return tuple(sorted(out.values(), key=lambda c: c.pid))

    def _oom(self, line: FaultLine, kill: OomKill) -> KernelFault:
        context = line.oom_context
        cgroup = kill.cgroup
        if cgroup is None and context is not None:
            cgroup = context.constraint in (None, "CONSTRAINT_MEMCG")
        memcg = None if context is None else (context.task_memcg or context.oom_memcg)
        host = cgroup is False
        base = KernelFault(
            kind="oom",
            at=line.at,
            seq=line.record.seq,
            raw=line.record.message,
            fault_class="host_memory" if host else "memory_limit",
            meaning=(
                "killed by the kernel: the host ran out of memory"
                if host
                else "killed by the kernel: its memory cgroup hit its limit"
            ),
            fix=(
                "the host ran out of memory: find what uses it, add limits or memory"
                if host
                else OOM_FIX
            ),
            pid=kill.pid,
            process_name=kill.process_name,
            injected=line.record.facility != 0,
        )
        match = parse_cgroup(f"0::{memcg}") if memcg else None
        if match is not None:
            return _replace(
                base,
                container_id=match.container_id,
                container_name=self._name(match.container_id),
                attribution="cgroup",
            )
        seen = self._remembered(kill.pid, line.at)
        if seen is not None:
            return _replace(
                base,
                container_id=seen.container_id,
                container_name=self._name(seen.container_id),
                attribution="recent_process",
            )
        return _replace(base, attribution="pid_only")

    def _count(self, fault: KernelFault) -> None:
        key = (fault.kind, fault.gpu_index, fault.xid, fault.fault_class, fault.container_id)
        if key not in self._counts and len(self._counts) >= MAX_COUNT_KEYS:
            key = (fault.kind, fault.gpu_index, fault.xid, fault.fault_class, None)
        self._counts[key] = self._counts.get(key, 0) + 1

    # -- what the snapshot carries ---------------------------------------------------------

    def faults(self) -> tuple[KernelFault, ...]:
        """The attributed faults kept, oldest first.

        Container names are filled in from the latest names known: a fault read while the
        engine had not answered yet gets its container's name once it does.
        """
        return tuple(self._named(f) for f in self._faults)

    def _named(self, fault: KernelFault) -> KernelFault:
        if fault.container_id is not None and fault.container_name is None:
            name = self._name(fault.container_id)
            if name is not None:
                fault = _replace(fault, container_name=name)
        if any(c.container_id is not None and c.container_name is None for c in fault.candidates):
            candidates = tuple(
                _replace_candidate(c, self._name(c.container_id)) if c.container_name is None else c
                for c in fault.candidates
            )
            fault = _replace(fault, candidates=candidates)
        return fault

    def counts(self) -> tuple[FaultCount, ...]:
        """Faults seen since the start, by kind, GPU, XID, class and container."""
        return tuple(
            FaultCount(kind, gpu, xid, cls, cid, self._name(cid), n)
            for (kind, gpu, xid, cls, cid), n in sorted(
                self._counts.items(), key=lambda item: tuple(str(v) for v in item[0])
            )
        )


def _replace(fault: KernelFault, **changes: object) -> KernelFault:
    from dataclasses import replace

    return replace(fault, **changes)  # type: ignore[arg-type]


def _replace_candidate(candidate: FaultCandidate, name: str | None) -> FaultCandidate:
    from dataclasses import replace

    return replace(candidate, container_name=name)


class KernelFaultTracker:
    """The collector's part: drain the reader, remember processes, attribute, count.

    Args:
        reader: The kernel-log reader.
        attributor: Remembers processes and attributes lines.
    """

    def __init__(self, reader: FaultReader, attributor: FaultAttributor | None = None) -> None:
        self._reader = reader
        self._attributor = attributor or FaultAttributor()
        self._started = False

    def update(
        self,
        gpus: Sequence[GpuSample],
        processes: Sequence[GpuProcess],
        containers: Iterable[ContainerInfo],
        now: float | None = None,
    ) -> tuple[tuple[KernelFault, ...], tuple[FaultCount, ...], SourceStatus]:
        """One refresh: the faults kept, the counters and the kernel log's status."""
        if not self._started:
            self._started = True
            self._reader.start()
        attributor = self._attributor
        attributor.observe(processes, containers, time.time() if now is None else now)
        attributor.attribute(self._reader.drain(), gpus)
        return attributor.faults(), attributor.counts(), self._reader.status()

    def close(self) -> None:
        """Stop the reader."""
        self._reader.close()
