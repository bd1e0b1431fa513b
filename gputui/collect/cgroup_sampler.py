"""CPU %, memory and CFS throttling of running containers, read from their cgroup files.

Why cgroup files and not the Docker stats API: ``stats(stream=False)`` blocks 1-2 s per
container, and streaming stats needs one thread and one daemon-side collector per container
(1,000 containers, 1,000 threads). The engine itself computes ``docker stats`` from these same
files, so reading them gives the same numbers at a few file reads per container, no threads and
no daemon load. The cost: it needs the engine's host ``/sys/fs/cgroup`` and ``/proc`` (gputui on
the host, or with ``--pid=host --cgroupns=host``); for a remote engine the figures stay None, as
do GPU-process mappings, which need the host's ``/proc`` anyway.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from gputui.collect import cgroup_stats as cg
from gputui.collect.docker_parse import cpu_percent
from gputui.collect.fileio import read_small
from gputui.model import ContainerInfo, EngineInfo


class CgroupSampler:
    """Finds each container's cgroup directories once and samples its files on every call.

    Args:
        cgroup_root: Where the host's cgroup hierarchy is mounted.
        proc_root: Where the host's ``/proc`` is.
    """

    def __init__(self, cgroup_root: Path, proc_root: Path) -> None:
        self.cgroup_root = cgroup_root
        self.proc_root = proc_root
        #: ``HostConfig.CgroupParent`` per container, from inspect.
        self.parent: dict[str, str | None] = {}
        #: The cgroup directory of each slot of ``CGROUP_FILES`` per container.
        self.dirs: dict[str, tuple[Path | None, ...]] = {}
        #: Per container: (CPU ns, host CPU ticks, last CPU %) of the previous sample.
        self.cpu_prev: dict[str, tuple[int, int, float | None]] = {}

    def inspected(self, container_id: str, cgroup_parent: str | None) -> None:
        """A (re-)inspect: a restart means a new init PID and cgroup, so look again."""
        self.parent[container_id] = cgroup_parent
        self.dirs.pop(container_id, None)

    def forget(self, container_id: str) -> None:
        """Drop everything about a container that is gone."""
        self.parent.pop(container_id, None)
        self.dirs.pop(container_id, None)
        self.cpu_prev.pop(container_id, None)

    def clear(self) -> None:
        """Drop everything (the engine connection was rebuilt)."""
        self.parent.clear()
        self.dirs.clear()
        self.cpu_prev.clear()

    def _find_dirs(
        self, info: ContainerInfo, engine: EngineInfo, version: str
    ) -> tuple[Path | None, ...]:
        proc = read_small(self.proc_root / str(info.pid) / "cgroup") if info.pid else None
        found: list[Path | None] = [None] * len(cg.CGROUP_FILES[version])
        for slot, rel, probe in cg.cgroup_candidates(
            version, info.id, engine.cgroup_driver, self.parent.get(info.id), proc or ""
        ):
            if found[slot] is None and (self.cgroup_root / rel / probe).exists():
                found[slot] = self.cgroup_root / rel
        return tuple(found)

    def sample(self, containers: list[ContainerInfo], engine: EngineInfo) -> list[ContainerInfo]:
        """The containers with CPU %, memory and throttling filled in for the running ones."""
        running = [c for c in containers if c.running]
        if not running:
            return containers
        version = engine.cgroup_version or "1"
        proc_stat = read_small(self.proc_root / "stat")
        system = cg.parse_proc_stat(proc_stat or "", os.sysconf("SC_CLK_TCK"))
        usage: dict[str, ContainerInfo] = {}
        for info in running:
            dirs = self.dirs.get(info.id)
            if dirs is None or not any(dirs):
                dirs = self.dirs[info.id] = self._find_dirs(info, engine, version)
            texts = {
                name: read_small(folder / name)
                for folder, names in zip(dirs, cg.CGROUP_FILES[version], strict=True)
                if folder is not None
                for name in names
            }
            cpu_ns, used, limit = cg.cgroup_usage(version, texts, engine.host_memory_bytes)
            cpu_pct: float | None = None
            if cpu_ns is not None and system is not None:
                prev = self.cpu_prev.get(info.id)
                if prev is not None and system[0] == prev[1]:
                    # Read again before the host's CPU counters moved (two refreshes within a
                    # tick): no new sample, so keep the last figure rather than blank it.
                    cpu_pct = prev[2]
                else:
                    if prev is not None:
                        cpu_pct = cpu_percent(cpu_ns - prev[0], system[0] - prev[1], system[1])
                    self.cpu_prev[info.id] = (cpu_ns, system[0], cpu_pct)
            periods, throttled, throttled_s = cg.cgroup_throttling(version, texts) or (
                None,
                None,
                None,
            )
            usage[info.id] = dataclasses.replace(
                info,
                cpu_percent=cpu_pct,
                memory_used_bytes=used,
                memory_limit_bytes=limit,
                cpu_periods=periods,
                cpu_throttled_periods=throttled,
                cpu_throttled_seconds=throttled_s,
            )
        for cid in [c for c in self.cpu_prev if c not in usage]:
            del self.cpu_prev[cid]
        return [usage.get(c.id, c) for c in containers]
