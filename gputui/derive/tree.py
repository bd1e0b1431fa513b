"""Snapshot → the ordered groups the container tree shows (pure, no Textual).

Top level, in this order:

1. containers that use a GPU, or reserved one and sit idle, or are known only from cgroups
   (name order, so GPU memory changing every second never reshuffles the tree);
2. ``host``: GPU processes outside any container;
3. ``orphans``: GPU memory held by PIDs nobody can find;
4. ``others``: the remaining containers (no GPU asked for, no GPU process), collapsed by default.

Groups 2-4 appear only when non-empty.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from gputui.model import ContainerInfo, ContainerUsage, GpuProcess, Snapshot

HOST_KEY = "host"
ORPHANS_KEY = "orphans"
OTHERS_KEY = "others"


class GroupKind(str, Enum):
    """What a top-level node stands for."""

    CONTAINER = "container"
    HOST = "host"
    ORPHANS = "orphans"
    OTHERS = "others"


@dataclass(frozen=True, slots=True)
class Group:
    """One top-level node of the container tree.

    Attributes:
        key: Stable identity: the container id, or ``host``/``orphans``/``others``.
        kind: What the group stands for.
        usage: The container (CONTAINER kind only); a stub when the engine does not know it.
        processes: Its GPU processes, ordered by PID then GPU (one entry per process and GPU).
        gpu_memory_bytes: Sum of GPU memory over the processes (None when none reported any).
        sm_util: Sum of SM % over the processes, None when none reported one.
        containers: The containers listed under ``others``.
    """

    key: str
    kind: GroupKind
    usage: ContainerUsage | None = None
    processes: tuple[GpuProcess, ...] = ()
    gpu_memory_bytes: int | None = None
    sm_util: int | None = None
    containers: tuple[ContainerUsage, ...] = ()


def process_key(process: GpuProcess) -> str:
    """Node identity of a process row: a process on two GPUs has two rows."""
    return f"{process.pid}:{process.sample.gpu_index}"


def _totals(processes: tuple[GpuProcess, ...]) -> tuple[int | None, int | None]:
    memory = [p.sample.used_memory_bytes for p in processes]
    known_memory = [m for m in memory if m is not None]
    sm = [p.sample.sm_util for p in processes if p.sample.sm_util is not None]
    return (sum(known_memory) if known_memory else None), (sum(sm) if sm else None)


def _ordered(processes: list[GpuProcess]) -> tuple[GpuProcess, ...]:
    return tuple(sorted(processes, key=lambda p: (p.pid, p.sample.gpu_index)))


def _stub(container_id: str) -> ContainerUsage:
    # A process names a container the snapshot does not list at all: still show it, by id.
    return ContainerUsage(
        info=ContainerInfo(id=container_id, name=container_id[:12], image="", status="unknown"),
        known_to_engine=False,
    )


def build_groups(snapshot: Snapshot) -> tuple[Group, ...]:
    """Group a snapshot's GPU processes under their containers.

    Args:
        snapshot: The refresh to show.

    Returns:
        The top-level groups in display order (see the module docstring).
    """
    by_container: dict[str, list[GpuProcess]] = {}
    host: list[GpuProcess] = []
    orphans: list[GpuProcess] = []
    for process in snapshot.processes:
        if not process.info.exists:
            orphans.append(process)
        elif process.container_id is None:
            host.append(process)
        else:
            by_container.setdefault(process.container_id, []).append(process)

    usages = {usage.info.id: usage for usage in snapshot.containers}
    for container_id in by_container:
        if container_id not in usages:
            usages[container_id] = _stub(container_id)

    featured: list[Group] = []
    others: list[ContainerUsage] = []
    for container_id, usage in usages.items():
        processes = _ordered(by_container.get(container_id, []))
        if processes or usage.idle_reserved or not usage.known_to_engine:
            memory, sm = _totals(processes)
            if usage.pids or processes:
                # Prefer the collector's attribution totals; they are the ones the report shows.
                memory = usage.gpu_memory_bytes if usage.pids else memory
                sm = usage.sm_util if usage.pids else sm
            featured.append(
                Group(
                    key=container_id,
                    kind=GroupKind.CONTAINER,
                    usage=usage,
                    processes=processes,
                    gpu_memory_bytes=memory,
                    sm_util=sm,
                )
            )
        else:
            others.append(usage)

    featured.sort(key=lambda g: (g.usage.info.name if g.usage else g.key, g.key))
    groups = featured
    if host:
        processes = _ordered(host)
        memory, sm = _totals(processes)
        groups.append(Group(HOST_KEY, GroupKind.HOST, None, processes, memory, sm))
    if orphans:
        processes = _ordered(orphans)
        memory, sm = _totals(processes)
        groups.append(Group(ORPHANS_KEY, GroupKind.ORPHANS, None, processes, memory, sm))
    if others:
        others.sort(key=lambda u: (not u.info.running, u.info.name, u.info.id))
        groups.append(Group(OTHERS_KEY, GroupKind.OTHERS, containers=tuple(others)))
    return tuple(groups)
