"""Container CPU, memory and CFS throttling from cgroup files (v1 and v2).

Pure parsers over the files' texts, and :class:`CgroupSampler`, which finds each container's
cgroup directories once and samples their files on every refresh. The memory figure is the docker
CLI's: usage minus inactive file pages.

CPU %, memory and CFS throttling of running containers, read from their cgroup files.

Why cgroup files and not the Docker stats API: ``stats(stream=False)`` blocks 1-2 s per
container, and streaming stats needs one thread and one daemon-side collector per container
(1,000 containers, 1,000 threads). The engine itself computes ``docker stats`` from these same
files, so reading them gives the same numbers at a few file reads per container, no threads and
no daemon load. The cost: it needs the engine's host ``/sys/fs/cgroup`` and ``/proc`` (gputui on
the host, or with ``--pid=host --cgroupns=host``); for a remote engine the figures stay None, as
do GPU-process mappings, which need the host's ``/proc`` anyway.

With many running containers (more than :data:`CONTAINER_FULL_READ_MAX`) a refresh reads a
rotating share of them, each again within :data:`CONTAINER_SAMPLE_WINDOW_S`; their figures then
carry the time they were read (``ContainerInfo.stats_sampled_at``).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gputui.collect.linux.fileio import KeptFiles, fd_budget, read_small
from gputui.collect.linux.membership import component_container_id, path_names_container
from gputui.model.containers import ContainerInfo, EngineInfo
from gputui.model.records import record

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def memory_used(usage: int | None, stat: Mapping[str, int], cgroup_version: str) -> int | None:
    """The docker CLI's ``calculateMemUsageUnixNoCache``: usage minus inactive file pages.

    Args:
        usage: ``memory.usage_in_bytes`` (v1) or ``memory.current`` (v2).
        stat: Parsed ``memory.stat``.
        cgroup_version: ``"1"`` or ``"2"``.
    """
    if usage is None:
        return None
    key = "total_inactive_file" if cgroup_version == "1" else "inactive_file"
    inactive = stat.get(key)
    return used_without(usage, inactive)


def used_without(usage: int | None, inactive: int | None) -> int | None:
    """``usage`` minus ``inactive`` file pages, when they are known and fewer than ``usage``."""
    if usage is None:
        return None
    if inactive is not None and inactive < usage:
        return usage - inactive
    return usage


def memory_limit(raw: str | None, host_memory: int | None) -> int | None:
    """Container memory limit from ``memory.limit_in_bytes``/``memory.max``.

    An unlimited cgroup (``max`` on v2, a near-2**63 number on v1) reports the host's memory, as
    the engine does for ``docker stats``.
    """
    if raw is None:
        return host_memory
    text = raw.strip()
    if text == "max" or not text.isdigit():
        return host_memory
    value = int(text)
    if host_memory is not None and value > host_memory:
        return host_memory
    return value


#: Files read per cgroup version: (CPU files, memory files).
CGROUP_FILES: dict[str, tuple[tuple[str, ...], ...]] = {
    "1": (
        ("cpuacct.usage",),
        ("memory.usage_in_bytes", "memory.stat", "memory.limit_in_bytes"),
        # CFS throttling lives with the cpu controller, which v1 may mount apart from cpuacct.
        ("cpu.stat",),
    ),
    "2": (("cpu.stat",), ("memory.current", "memory.stat", "memory.max")),
}


def cgroup_usage(
    version: str, texts: Mapping[str, str | None], host_memory: int | None
) -> tuple[int | None, int | None, int | None]:
    """CPU time and memory of one container from its cgroup files' texts.

    Args:
        version: ``"1"`` or ``"2"``.
        texts: File name (as in :data:`CGROUP_FILES`) to its text, None or absent if unreadable.
        host_memory: Reported as the limit of an unlimited cgroup.

    Returns:
        (CPU nanoseconds, memory used the docker CLI way, memory limit); None where unknown.
    """

    def number(name: str) -> int | None:
        text = (texts.get(name) or "").strip()
        return int(text) if text.isdigit() else None

    # Only one line of memory.stat (about 40) is needed: it is looked up, not parsed whole.
    inactive = keyed_value(
        texts.get("memory.stat") or "", "total_inactive_file" if version == "1" else "inactive_file"
    )
    if version == "2":
        usec = parse_keyed(texts.get("cpu.stat") or "").get("usage_usec")
        cpu_ns = None if usec is None else usec * 1000
        usage, limit_name = number("memory.current"), "memory.max"
    else:
        cpu_ns = number("cpuacct.usage")
        usage, limit_name = number("memory.usage_in_bytes"), "memory.limit_in_bytes"
    if limit_name not in texts:
        return cpu_ns, None, None
    limit = memory_limit(texts[limit_name], host_memory)
    return cpu_ns, used_without(usage, inactive), limit


def cgroup_throttling(
    version: str, texts: Mapping[str, str | None]
) -> tuple[int, int, float] | None:
    """CFS throttling of one container: (periods, throttled periods, seconds throttled).

    Both versions keep ``nr_periods``/``nr_throttled`` in ``cpu.stat``; the time is
    ``throttled_usec`` on v2 and ``throttled_time`` (nanoseconds) on v1. None when the file is
    missing (no CPU limit ever set still reports zeros, which is a valid answer).
    """
    stat = parse_keyed(texts.get("cpu.stat") or "")
    if "nr_periods" not in stat or "nr_throttled" not in stat:
        return None
    if version == "2":
        seconds = stat.get("throttled_usec", 0) / 1e6
    else:
        seconds = stat.get("throttled_time", 0) / 1e9
    return stat["nr_periods"], stat["nr_throttled"], seconds


def parse_keyed(text: str) -> dict[str, int]:
    """Parse a flat-keyed cgroup file (``memory.stat``, ``cpu.stat``): ``key value`` lines."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[key] = int(value.strip())
    return out


def keyed_value(text: str, key: str) -> int | None:
    """One value of a flat-keyed cgroup file: ``parse_keyed(text).get(key)`` without the dict.

    Where a key is listed twice (never seen), the last line wins, as in :func:`parse_keyed`.
    """
    found: int | None = None
    needle = "\n" + key + " "
    padded = "\n" + text
    at = padded.find(needle)
    while at >= 0:
        start = at + len(needle)
        end = padded.find("\n", start)
        value = (padded[start:] if end < 0 else padded[start:end]).strip()
        if value.isdigit():
            found = int(value)
        at = -1 if end < 0 else padded.find(needle, end)
    return found


def parse_proc_stat(text: str, clock_ticks: int) -> tuple[int, int] | None:
    """Host CPU time and online CPUs from ``/proc/stat``, as the engine computes them.

    The engine's ``system_cpu_usage`` is the sum of the first seven fields of the ``cpu`` line
    (user, nice, system, idle, iowait, irq, softirq) in nanoseconds (moby
    ``daemon/stats/collector_unix.go``); online CPUs are the ``cpuN`` lines.

    Returns:
        (nanoseconds, online CPUs), or None when the text has no ``cpu`` line.
    """
    total: int | None = None
    online = 0
    for line in text.splitlines():
        if line.startswith("cpu "):
            fields = line.split()[1:8]
            total = sum(int(f) for f in fields) * 1_000_000_000 // clock_ticks
        elif line.startswith("cpu") and line[3:4].isdigit():
            online += 1
    if total is None:
        return None
    return total, online


def cgroup_path_from_proc(text: str, controller: str | None) -> str | None:
    """The cgroup path of a process for one v1 controller (or the v2 line when None).

    Args:
        text: ``/proc/<pid>/cgroup``.
        controller: ``memory``/``cpuacct`` on v1, None for the unified v2 hierarchy.

    Returns:
        The absolute path, or None when absent or relative (a private cgroup namespace shows
        ``..`` components that cannot be joined to the host's cgroup root).
    """
    for line in text.splitlines():
        # Paths may contain ':' (cri-containerd), so never split more than twice.
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        wanted = controllers == "" if controller is None else controller in controllers.split(",")
        if wanted:
            return path if path.startswith("/") and ".." not in path.split("/") else None
    return None


def default_cgroup_paths(container_id: str, driver: str | None, parent: str | None) -> list[str]:
    """Where the engine puts a container's cgroup when its init PID cannot tell us.

    cgroupfs: ``<parent or /docker>/<id>``; systemd: ``<parent or system.slice>/docker-<id>.scope``.
    """
    if driver == "systemd":
        base = (parent or "system.slice").strip("/")
        return [f"/{base}/docker-{container_id}.scope"]
    base = (parent or "/docker").rstrip("/")
    return [f"{base}/{container_id}"]


#: Where cgroup v1 mounts the CPU-accounting controller, in the order they are tried.
_V1_CPU_MOUNTS = ("cpuacct", "cpu,cpuacct", "cpuacct,cpu")


def cgroup_candidates(
    version: str, container_id: str, driver: str | None, parent: str | None, proc_cgroup: str
) -> list[tuple[int, str, str]]:
    """Where to look for a container's cgroup directories, best guess first.

    The init PID's own ``/proc/<pid>/cgroup`` line is exact for any driver or
    ``--cgroup-parent``, when it names the container: a container without a cgroup of its own
    (a rootless engine on cgroup v1, whose ``CgroupDriver`` is ``none``) sits in its user's
    session cgroup, whose figures are the whole session's (200 % CPU, the session's memory), so
    that line is not taken. The engine's default layout is the fallback when ``/proc`` is not
    the host's; it exists only for a container that has it.

    Args:
        version: ``"1"`` or ``"2"``.
        container_id: Full id.
        driver: ``cgroupfs`` or ``systemd``.
        parent: ``HostConfig.CgroupParent``, if set.
        proc_cgroup: Text of ``/proc/<init pid>/cgroup`` ("" when unreadable).

    Returns:
        (slot, directory relative to the cgroup root, file that must exist there); slot 0 is
        the CPU-accounting directory, 1 the memory directory (the same directory on v2), and on
        v1 slot 2 the cpu controller's (CFS throttling).
    """
    defaults = default_cgroup_paths(container_id, driver, parent)
    if version == "2":
        controllers: list[tuple[int, str | None, tuple[str, ...], str]] = [
            (0, None, ("",), "cpu.stat"),
            (1, None, ("",), "memory.current"),
        ]
    else:
        controllers = [
            (0, "cpuacct", _V1_CPU_MOUNTS, "cpuacct.usage"),
            (1, "memory", ("memory",), "memory.usage_in_bytes"),
            (2, "cpu", ("cpu", "cpu,cpuacct", "cpuacct,cpu"), "cpu.stat"),
        ]
    out: list[tuple[int, str, str]] = []
    for slot, controller, mounts, probe in controllers:
        own = cgroup_path_from_proc(proc_cgroup, controller)
        if own is not None and not path_names_container(own, container_id):
            own = None
        for path in ([own] if own else []) + defaults:
            out += [(slot, f"{m}/{path.lstrip('/')}".lstrip("/"), probe) for m in mounts]
    return out


def figures_of(figures: Mapping[str, Any]) -> dict[str, Any]:
    """The ``ContainerInfo`` fields of one cgroup sample (its time as ``stats_sampled_at``)."""
    out = {k: v for k, v in figures.items() if k != "at"}
    out["stats_sampled_at"] = figures["at"]
    return out


def cpu_percent(cpu_delta: float, system_delta: float, online_cpus: float) -> float | None:
    """The docker CLI's ``calculateCPUPercentUnix``: container CPU time over host CPU time.

    Args:
        cpu_delta: Container CPU nanoseconds between two samples.
        system_delta: Host CPU nanoseconds (all CPUs, from ``/proc/stat``) between them.
        online_cpus: Online CPUs.

    Returns:
        Percent where 100 is one core, or None when a delta is not positive (the CLI shows 0
        then; None keeps "no data" apart from "idle").
    """
    if cpu_delta < 0 or system_delta <= 0 or online_cpus <= 0:
        return None
    return cpu_delta / system_delta * online_cpus * 100.0


#: Descriptors of cgroup files kept open (v1: five per running container).
MAX_KEPT_CGROUP_FDS = 8192
#: The owner under which ``/proc/stat``'s descriptor is kept (never a container id).
_HOST = "host"
#: Up to this many running containers, each one's cgroup files are read on every refresh (about
#: 90 us per container); beyond it a refresh reads a rotating share, never fewer than this many.
CONTAINER_FULL_READ_MAX = 50
#: Beyond :data:`CONTAINER_FULL_READ_MAX`, each container's CPU and memory are read again at least
#: this often (seconds): ``docker stats`` itself shows figures up to a few seconds old.
CONTAINER_SAMPLE_WINDOW_S = 4.0


#: The start-up walk (:func:`early_cgroup_cpu`) lists and reads at most this many cgroup
#: directories in all (listing one and reading its counter each count), and descends at most
#: this deep (rootless podman's ``user.slice/user-N.slice/user@N.service/
#: user.slice/libpod-<id>.scope/container`` is 6).
EARLY_WALK_MAX_DIRS = 2048
EARLY_WALK_MAX_DEPTH = 7


@record
class EarlyCgroupCpu:
    """Containers' CPU counters read at a one-shot's start, before any engine has answered.

    Attributes:
        usage_ns: CPU-accounting directory (as :class:`CgroupSampler` finds it) -> its CPU
            nanoseconds then.
        system_ns: The host's CPU time then (``/proc/stat``, as :func:`parse_proc_stat`).
        taken_at: ``time.monotonic()`` after the walk.
    """

    usage_ns: Mapping[Path, int]
    system_ns: int
    taken_at: float


def early_cgroup_cpu(
    cgroup_root: Path = Path("/sys/fs/cgroup"),
    proc_root: Path = Path("/proc"),
    *,
    max_dirs: int = EARLY_WALK_MAX_DIRS,
) -> EarlyCgroupCpu | None:
    """Read the CPU counter of every cgroup that names a container, now (bounded walk).

    A single collection has no previous refresh to take a container's CPU % from: without
    this it samples, waits the one-shot's window (0.1 s) and samples again once the engine
    has listed the containers, on the one-shot's critical path. Read at start-up, the window
    passes while the program loads, as the processes' early sample does. Only a directory
    whose name names a container (and the one level below it: podman's ``/container``) is
    read; a container this walk does not reach (started later, beyond the bounds, a
    ``--cgroup-parent`` deeper than the walk) gets the two samples as before.

    Returns:
        The counters, or None when ``/proc/stat`` or the CPU hierarchy cannot be read.
    """
    system = parse_proc_stat(read_small(proc_root / "stat") or "", _CLOCK_TICKS)
    if system is None:
        return None
    if (cgroup_root / "cgroup.controllers").exists():
        version, base = "2", cgroup_root
    else:
        version = "1"
        mounts = [cgroup_root / m for m in _V1_CPU_MOUNTS if (cgroup_root / m).is_dir()]
        if not mounts:
            return None
        base = mounts[0]
    names = CGROUP_FILES[version][0]
    usage: dict[Path, int] = {}
    stack: list[tuple[str, int, bool]] = [(str(base), 0, False)]
    budget = max_dirs
    while stack and budget > 0:
        folder, depth, inside = stack.pop()
        budget -= 1
        try:
            with os.scandir(folder) as entries:
                children = [e for e in entries if e.is_dir(follow_symlinks=False)]
        except OSError:
            continue  # gone, or not ours to read: that container gets two samples
        for entry in children:
            named = inside or component_container_id(entry.name) is not None
            if named:
                if budget <= 0:
                    break  # the rest get the two samples
                budget -= 1
                texts = {name: read_small(f"{entry.path}/{name}") for name in names}
                cpu_ns = cgroup_usage(version, texts, None)[0]
                if cpu_ns is not None:
                    usage[Path(entry.path)] = cpu_ns
            if not inside and depth < EARLY_WALK_MAX_DEPTH:
                stack.append((entry.path, depth + 1, named))
    return EarlyCgroupCpu(usage, system[0], time.monotonic())


class CgroupSampler:
    """Finds each container's cgroup directories once and samples its files on every call.

    The files are kept open between samples and read again with ``os.pread`` (one syscall per
    file instead of four); a container's descriptors are closed when it is re-inspected (a
    restart moves it to a new cgroup), forgotten, or no longer running.

    Args:
        cgroup_root: Where the host's cgroup hierarchy is mounted.
        proc_root: Where the host's ``/proc`` is.
        clock: Monotonic clock that decides when a container is due (tests inject one).
        wall: Wall clock for ``ContainerInfo.stats_sampled_at``.
        sleep: Waits out a single collection's CPU window (tests record it).
        full_read_max: Up to this many running containers all are read on every call; beyond
            it a rotating share of at least this many (:data:`CONTAINER_FULL_READ_MAX`).
        sample_window: Beyond ``full_read_max``, each container is read again within this many
            seconds (:data:`CONTAINER_SAMPLE_WINDOW_S`).
    """

    def __init__(
        self,
        cgroup_root: Path,
        proc_root: Path,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        full_read_max: int = CONTAINER_FULL_READ_MAX,
        sample_window: float = CONTAINER_SAMPLE_WINDOW_S,
    ) -> None:
        self.cgroup_root = cgroup_root
        self.proc_root = proc_root
        self._clock = clock
        self._wall = wall
        self._sleep = sleep
        self._full_read_max = max(0, full_read_max)
        self._window = max(0.0, sample_window)
        #: Per running container: the engine's info last given, the answer built from it, and
        #: the figures read (with their time); a container not read this call gets them again.
        self.last: dict[str, tuple[ContainerInfo, ContainerInfo, dict[str, Any]]] = {}
        #: Rotation order (an ordered set: the first is read next) and the clock at the last call.
        self.order: dict[str, None] = {}
        self._last_call: float | None = None
        #: Containers whose files the last :meth:`sample` read (for benchmarks and tests).
        self.last_read_count = 0
        #: ``HostConfig.CgroupParent`` per container, from inspect.
        self.parent: dict[str, str | None] = {}
        #: The cgroup directory of each slot of ``CGROUP_FILES`` per container.
        self.dirs: dict[str, tuple[Path | None, ...]] = {}
        #: Per container: (CPU ns, host CPU ticks, last CPU %) of the previous sample.
        self.cpu_prev: dict[str, tuple[int, int, float | None]] = {}
        #: The files read on every sample, open (``/proc/stat`` under ``"host"``).
        self.files = KeptFiles(fd_budget(MAX_KEPT_CGROUP_FDS, 4))

    def inspected(self, container_id: str, cgroup_parent: str | None) -> None:
        """A (re-)inspect: a restart means a new init PID and cgroup, so look again."""
        self.parent[container_id] = cgroup_parent
        self.dirs.pop(container_id, None)
        self.last.pop(container_id, None)  # read at once: the figures may be another start's
        self.files.close_owner(container_id)

    def forget(self, container_id: str) -> None:
        """Drop everything about a container that is gone."""
        self.parent.pop(container_id, None)
        self.dirs.pop(container_id, None)
        self.cpu_prev.pop(container_id, None)
        self.last.pop(container_id, None)
        self.order.pop(container_id, None)
        self.files.close_owner(container_id)

    def clear(self) -> None:
        """Drop everything (the engine connection was rebuilt)."""
        self.parent.clear()
        self.dirs.clear()
        self.cpu_prev.clear()
        self.last.clear()
        self.order.clear()
        self.files.close()

    def _find_dirs(
        self, info: ContainerInfo, engine: EngineInfo, version: str
    ) -> tuple[Path | None, ...]:
        proc = read_small(self.proc_root / str(info.pid) / "cgroup") if info.pid else None
        found: list[Path | None] = [None] * len(CGROUP_FILES[version])
        for slot, rel, probe in cgroup_candidates(
            version, info.id, engine.cgroup_driver, self.parent.get(info.id), proc or ""
        ):
            if found[slot] is None and (self.cgroup_root / rel / probe).exists():
                found[slot] = self.cgroup_root / rel
        return tuple(found)

    def _due(self, running: list[ContainerInfo], now: float) -> set[str]:
        """The containers to read now when there are more than ``full_read_max``.

        Those never read (or read on every call so far, without an age), then the next ones in
        rotation order: enough that all turn over within the window at the interval since the
        previous call, never fewer than ``full_read_max``.
        """
        last = self.last
        due = {c.id for c in running if (seen := last.get(c.id)) is None or seen[2]["at"] is None}
        elapsed = self._window if self._last_call is None else max(0.0, now - self._last_call)
        if elapsed >= self._window:
            return {c.id for c in running}
        share = max(self._full_read_max, math.ceil(len(running) * elapsed / self._window))
        order = self.order
        ids = {c.id for c in running}
        for _ in range(len(order)):
            if share <= 0:
                break
            cid = next(iter(order))
            del order[cid]
            if cid not in ids:
                continue  # stopped or gone: back in the order when it is read again
            order[cid] = None
            if cid not in due:
                due.add(cid)
                share -= 1
        return due

    def sample(
        self,
        containers: list[ContainerInfo],
        engine: EngineInfo,
        *,
        settle_s: float = 0.0,
        start: EarlyCgroupCpu | None = None,
    ) -> list[ContainerInfo]:
        """The containers with CPU %, memory and throttling filled in for the running ones.

        Beyond ``full_read_max`` running containers only the due share is read; the others get
        their last figures again, with ``stats_sampled_at`` saying when those were read.

        Args:
            containers: The engine's containers.
            engine: Its cgroup layout and host memory.
            settle_s: A single collection (``--once``) has no previous sample to take a CPU %
                from: when a running container has none, sample, wait this long, and sample
                again (0: leave CPU % to the next call, as a live loop does).
            start: Counters read at start-up (:func:`early_cgroup_cpu`): a container found
                there takes its first sample from them, and only the rest of ``settle_s``
                since then is waited for.
        """
        if settle_s > 0:
            waiting = [c for c in containers if c.running and c.id not in self.cpu_prev]
            if waiting and start is not None:
                left = self._prime(waiting, engine, start)
                if len(left) < len(waiting):
                    self._sleep(max(0.0, start.taken_at + settle_s - self._clock()))
                waiting = left
            if waiting:
                self._sample(containers, engine)
                self._sleep(settle_s)
        return self._sample(containers, engine)

    def _prime(
        self, waiting: list[ContainerInfo], engine: EngineInfo, start: EarlyCgroupCpu
    ) -> list[ContainerInfo]:
        """Take the first CPU sample of ``waiting`` from ``start``; those it lacks are returned."""
        version = engine.cgroup_version or "1"
        left = []
        for info in waiting:
            dirs = self.dirs.get(info.id)
            if dirs is None or not any(dirs):
                dirs = self.dirs[info.id] = self._find_dirs(info, engine, version)
            cpu_ns = start.usage_ns.get(dirs[0]) if dirs[0] is not None else None
            if cpu_ns is None:
                left.append(info)
            else:
                self.cpu_prev[info.id] = (cpu_ns, start.system_ns, None)
        return left

    def _sample(self, containers: list[ContainerInfo], engine: EngineInfo) -> list[ContainerInfo]:
        running = [c for c in containers if c.running]
        now = self._clock()
        if not running:
            self.files.close()
            self.last.clear()
            self.order.clear()
            self._last_call = now
            self.last_read_count = 0
            return containers
        rotating = len(running) > self._full_read_max
        due = self._due(running, now) if rotating else None
        wall = self._wall() if rotating else None
        self._last_call = now
        version = engine.cgroup_version or "1"
        read = self.files.read
        usage: dict[str, ContainerInfo] = {}
        if due is not None:
            for info in running:
                if info.id in due:
                    continue
                source, answer, kept = self.last[info.id]
                if source is not info:  # re-listed (renamed...): same figures, new facts
                    answer = dataclasses.replace(info, **figures_of(kept))
                    self.last[info.id] = (info, answer, kept)
                usage[info.id] = answer
        self.last_read_count = len(running) - len(usage)
        proc_stat = read(_HOST, self.proc_root / "stat")
        system = parse_proc_stat(proc_stat or "", _CLOCK_TICKS)
        for info in running:
            if info.id in usage:
                continue
            if info.id not in self.order:
                self.order[info.id] = None
            dirs = self.dirs.get(info.id)
            if dirs is None or not any(dirs):
                dirs = self.dirs[info.id] = self._find_dirs(info, engine, version)
            texts = {
                name: read(info.id, f"{folder}/{name}")
                for folder, names in zip(dirs, CGROUP_FILES[version], strict=True)
                if folder is not None
                for name in names
            }
            cpu_ns, used, limit = cgroup_usage(version, texts, engine.host_memory_bytes)
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
            periods, throttled, throttled_s = cgroup_throttling(version, texts) or (
                None,
                None,
                None,
            )
            figures: dict[str, Any] = {
                "cpu_percent": cpu_pct,
                "memory_used_bytes": used,
                "memory_limit_bytes": limit,
                "cpu_periods": periods,
                "cpu_throttled_periods": throttled,
                "cpu_throttled_seconds": throttled_s,
                "at": wall,
            }
            answer = dataclasses.replace(info, **figures_of(figures))
            self.last[info.id] = (info, answer, figures)
            usage[info.id] = answer
        for cid in [c for c in self.cpu_prev if c not in usage]:
            del self.cpu_prev[cid]
        for cid in [c for c in self.last if c not in usage]:
            del self.last[cid]
        # A container that stopped keeps no descriptors (its cgroup is usually gone).
        for owner in self.files.owners():
            if owner != _HOST and owner not in usage:
                self.files.close_owner(owner)
        return [usage.get(c.id, c) for c in containers]
