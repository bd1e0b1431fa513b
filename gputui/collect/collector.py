"""The collector: reads every source once and joins GPU PIDs, host processes and containers.

``Collector.collect()`` is the only entry point the UI and the reports use. It blocks (NVML,
/proc, the container engines) and therefore runs on the collector thread, never on the UI
thread. Expected failures of a source become a ``SourceStatus`` in the snapshot; nothing here
raises for them.

It takes any number of container sources (one per engine). Each is read on its own daemon
thread, all at once; their containers are merged by id (the first source given wins a clash),
and the collector remembers which source lists which container, so exec, logs and the
lifecycle actions go to that source.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from gputui.boundary.startup_trace import mark
from gputui.collect.sources import (
    ContainerCapabilities,
    ContainerOwner,
    ContainerSource,
    GpuSource,
    HealthInputs,
    Player,
    ProcessSource,
    failed_reading,
    refusal,
)
from gputui.model.containers import (
    ContainerDetails,
    ContainerInfo,
    ContainerProcesses,
    ContainerReading,
    EngineInfo,
    ExecResult,
)
from gputui.model.faults import FaultCount, KernelFault
from gputui.model.gpu import GpuReading, GpuSample
from gputui.model.mig import mig_device_name, mig_instance_of
from gputui.model.processes import GpuProcess, ProcessInfo, per_gpu_sm
from gputui.model.snapshot import ContainerUsage, HostInfo, Snapshot
from gputui.model.status import HealthCheck, SourceStatus

if TYPE_CHECKING:
    from gputui.collect.docker.logs import LogReader
    from gputui.collect.fault_attribution import KernelFaultTracker
    from gputui.collect.linux.parent_chain import ParentLink

HealthRunner = Callable[[HealthInputs], tuple[HealthCheck, ...]]

#: Seconds a snapshot waits for each container source (all are read at once); NVML data never
#: waits longer than this.
DOCKER_WAIT_S = 2.0
#: The longest a one-shot waits for its early CPU sample of every process after NVML answered.
PRIME_JOIN_S = 0.3

#: Seconds the container-read thread waits for the next read before it ends.
READER_IDLE_S = 120.0

READ_ONLY_REASON = "read-only mode: actions are disabled (started with --read-only)"


class Collector:
    """Joins the sources into one frozen :class:`Snapshot` per call.

    Implements :class:`~gputui.collect.sources.CollectorProtocol` (without a player: it reads
    the machine, it plays no recording).

    Args:
        gpu: The NVML (or scenario, or demo) source.
        procs: The /proc source.
        containers: The container sources (the Docker engine, the demo's), or one of them. Their
            names must differ; the first lists a container when two list the same id.
        mode: ``live``, ``scenario`` or ``demo``.
        health: Runs the runtime-health checks; None disables them.
        health_interval: Seconds between health runs (they also run on request).
        read_only: Refuse every action (exec, signals).
        clock: Wall clock for ``Snapshot.taken_at``.
        hostname: Shown in the header; the real host name when None.
        docker_wait: Seconds a container source's read may take before the snapshot goes out
            without it (with its containers last seen and a ``slow`` status).
        cpu_window: For a single collection (``--once``): seconds over which CPU % is measured
            (a first /proc sample before the Docker wait, the second at least this much later);
            0 leaves CPU % to the next collection, as a live loop does.
        cpu_primed_at: ``time.monotonic()`` when ``procs`` already took that first sample of
            every process (``prime_cpu`` and ``host_stats``, called as early as the program
            could): the window then runs from there, under everything done since.
        faults: Follows the kernel log for XID lines and OOM kills and attributes them; None
            reads no kernel log (scenario, demo, tests).
        first_health_later: The first collection runs no health checks (its snapshot says
            they are pending); the next one runs them. The monitor's first snapshot then
            reaches the screen without them (~0.1 s on the lab, a contender for the GIL while
            Textual is imported); a one-shot needs them in its report.
    """

    def __init__(
        self,
        gpu: GpuSource,
        procs: ProcessSource,
        containers: ContainerSource | Sequence[ContainerSource],
        *,
        mode: str = "live",
        health: HealthRunner | None = None,
        health_interval: float = 30.0,
        read_only: bool = False,
        clock: Callable[[], float] = time.time,
        hostname: str | None = None,
        docker_wait: float = DOCKER_WAIT_S,
        cpu_window: float = 0.0,
        cpu_primed_at: float | None = None,
        faults: KernelFaultTracker | None = None,
        first_health_later: bool = False,
    ) -> None:
        self.gpu = gpu
        self._health_later = first_health_later
        self._faults = faults
        self.procs = procs
        #: The container sources, in the order given (the first wins a clash of ids).
        self.container_sources: tuple[ContainerSource, ...] = (
            tuple(containers) if isinstance(containers, Sequence) else (containers,)
        )
        names = [source.name for source in self.container_sources]
        if len(set(names)) != len(names):
            raise ValueError(f"container sources need distinct names, got {names}")
        self.mode = mode
        self.read_only = read_only
        self._health = health
        self._health_interval = health_interval
        self._clock = clock
        self._hostname = hostname
        self._health_due = 0.0
        self._health_requested = threading.Event()
        self._checks: tuple[HealthCheck, ...] = ()
        self._health_state: tuple[object, ...] | None = None
        # Per container source, by position: what it last listed while it answered, and its
        # engine facts; kept while it is away.
        count = len(self.container_sources)
        self._last_good_containers: list[tuple[ContainerInfo, ...]] = [()] * count
        self._last_engine: list[EngineInfo | None] = [None] * count
        # Each container source's read runs beside the NVML and /proc reads (and beside the
        # other sources'): NVML's ctypes calls release the GIL, so the engines' round trips
        # overlap them. At most one read per source is in flight: one that outlives a snapshot
        # is picked up by a later one, never doubled.
        self._docker_wait = docker_wait
        self._pending: list[_BackgroundRead | None] = [None] * count
        # Through self.container_sources at each read: a source swapped in later is the one read.
        self._reads = [
            _ContainerReads(partial(self._read_source, i), name=source.name)
            for i, source in enumerate(self.container_sources)
        ]
        # Read by the UI thread without a lock: container id -> the position of the source
        # that lists it (replaced whole by each collection), and each source's capabilities by
        # position (one slot each, set by the source's read thread after each read).
        self._owners: dict[str, int] = {}
        self._capabilities: list[ContainerCapabilities] = [ContainerCapabilities()] * count
        self._cpu_window = cpu_window
        self._cpu_primed_at = cpu_primed_at

    @property
    def player(self) -> Player | None:
        """None: a live (or scenario, or demo) collector has no replay controls."""
        return None

    def request_health(self) -> None:
        """Make the next :meth:`collect` re-run the health checks (thread-safe)."""
        self._health_requested.set()

    def _read_source(self, index: int) -> ContainerReading:
        """On the source's read thread: its reading, then its capabilities (kept for the UI)."""
        source = self.container_sources[index]
        reading = source.read()
        try:
            self._capabilities[index] = source.capabilities()
        except Exception:  # a source must not raise; if it does, it offers nothing this time
            self._capabilities[index] = ContainerCapabilities()
        return reading

    def collect(self) -> Snapshot:
        """Read every source once and return the joined snapshot (blocking).

        Waits for each container source at most ``docker_wait`` seconds from the start of its
        read (they are read at once); an engine that is slow or stuck never holds back the GPU
        data, nor another engine's containers.
        """
        for i, reads in enumerate(self._reads):
            if self._pending[i] is None:
                self._pending[i] = reads.start()
        primed = 0.0
        priming: threading.Thread | None = None
        if self._cpu_window > 0 and self._cpu_primed_at is not None:
            primed, self._cpu_primed_at = self._cpu_primed_at, None  # the first sample is taken
        elif self._cpu_window > 0:
            # A single collection (--once) has no previous sample to take CPU % from: take a
            # first one of every process while NVML starts (its ctypes calls release the GIL),
            # and the second after the Docker wait, at least cpu_window later; NVML's start
            # usually takes longer than the window, so nothing is left to wait for.
            self.procs.host_stats()  # the host's CPU % is measured from here
            primed_at = [time.monotonic()]

            def prime() -> None:
                self.procs.prime_cpu()
                primed_at.append(time.monotonic())  # the last process's first sample

            priming = threading.Thread(target=prime, name="gputui-cpu-prime", daemon=True)
            priming.start()
        reading = self.gpu.read()
        mark("nvml-read")
        pids = sorted({p.pid for gpu in reading.gpus for p in gpu.processes})
        if priming is not None:
            priming.join(PRIME_JOIN_S)  # prime_cpu bounds itself; this bounds the wait
            primed = primed_at[-1]
        # The container read overlaps the NVML read (whose ctypes calls release the GIL) but not
        # the /proc read: both of those are Python work plus syscalls, and two such threads
        # only take turns on the GIL, each waiting out the other's switch interval.
        readings = [self._source_reading(i) for i in range(len(self.container_sources))]
        mark("docker-read")
        if self._cpu_window > 0:
            time.sleep(max(0.0, primed + self._cpu_window - time.monotonic()))
        infos = self.procs.read(pids)
        for i, got in enumerate(readings):
            if got.status.ok:
                self._last_good_containers[i] = got.containers
                self._last_engine[i] = got.engine
            elif not got.containers:
                # Keep what we knew while the engine is away: names still explain cgroup ids,
                # and the header says the engine is unreachable. Never lose state on an outage.
                readings[i] = replace(got, containers=self._last_good_containers[i])
        docker, owners = merge_readings(readings)
        self._owners = owners
        statuses = {got.status.name: got.status for got in readings}
        processes = join_processes(reading, infos)
        visibility = self.procs.visibility()
        host_stats = self.procs.host_stats()
        now = self._clock()
        sources = {"nvml": reading.status, **statuses}
        kernel_faults: tuple[KernelFault, ...] = ()
        fault_counts: tuple[FaultCount, ...] = ()
        if self._faults is not None:
            kernel_faults, fault_counts, sources["kmsg"] = self._faults.update(
                reading.gpus, processes, docker.containers, time.time()
            )
        # A GPU falling off the bus or a source going away (or coming back) re-runs the checks
        # at once: the health view must explain it now, not at the next 30 s run.
        state = _health_state(reading, readings)
        health_pending = self._health is not None and self._health_later
        if health_pending:
            self._health_later = False  # due, unrun: the next collection runs them
        elif self._health is not None and (
            self._health_requested.is_set()
            or time.monotonic() >= self._health_due
            or state != self._health_state
        ):
            self._health_state = state
            self._health_requested.clear()
            self._health_due = time.monotonic() + self._health_interval
            self._checks = self._health(
                HealthInputs(
                    reading,
                    docker,
                    processes,
                    visibility,
                    sources.get("kmsg"),
                    container_sources=statuses,
                    # An engine away keeps its last facts: its containers (kept too) are still
                    # judged against their own engine, never the first source's.
                    engines={
                        got.status.name: engine
                        for i, got in enumerate(readings)
                        if (engine := got.engine or self._last_engine[i]) is not None
                    },
                    owners={cid: readings[i].status.name for cid, i in owners.items()},
                )
            )
            mark("health-checks")
        snapshot = Snapshot(
            taken_at=now,
            mode=self.mode,
            host=HostInfo(
                # gethostname(2) is the UTS node name: os.uname() reads it without importing
                # the socket module.
                hostname=self._hostname or os.uname().nodename,
                driver_version=reading.driver_version,
                cuda_driver_version=reading.cuda_driver_version,
                nvml_version=reading.nvml_version,
            ),
            sources=sources,
            gpus=reading.gpus,
            processes=processes,
            containers=attribute_containers(
                docker,
                processes,
                gpu_data=reading.status.ok,
                gpus=reading.gpus,
                listed_by={cid: readings[i].status for cid, i in owners.items()},
                every_source_answered=all(got.status.ok for got in readings),
            ),
            engine=docker.engine,
            visibility=visibility,
            health=self._checks,
            health_pending=health_pending,
            xid_events=reading.xid_events,
            host_stats=host_stats,
            kernel_faults=kernel_faults,
            fault_counts=fault_counts,
        )
        return snapshot

    def _owner(self, container_id: str) -> tuple[ContainerSource, ContainerCapabilities] | None:
        index = self._owners.get(container_id)
        if index is None:
            return None
        return self.container_sources[index], self._capabilities[index]

    def container_owner(self, container_id: str) -> ContainerOwner | None:
        """The source that listed the container at the last collection (no I/O)."""
        owner = self._owner(container_id)
        if owner is None:
            return None
        return ContainerOwner(owner[0].name, owner[1])

    def exec_in_container(
        self, container_id: str, argv: Sequence[str], timeout_s: float
    ) -> ExecResult:
        """Run ``argv`` in a container through its source (blocking; never through a shell)."""
        if self.read_only:
            return ExecResult(tuple(argv), None, error=READ_ONLY_REASON)
        owner = self._owner(container_id)
        if owner is None:
            return ExecResult(tuple(argv), None, error=unlisted(container_id))
        source, offers = owner
        if not offers.exec:
            return ExecResult(
                tuple(argv), None, error=refusal(source.name, "exec", offers.why("exec"))
            )
        return source.exec(container_id, argv, timeout_s)

    def interactive_exec_argv(self, container_id: str, argv: Sequence[str]) -> list[str] | None:
        """The owning source's argv for ``argv`` on the terminal, None when unavailable."""
        owner = self._owner(container_id)
        if self.read_only or owner is None or not owner[1].interactive_exec:
            return None
        return owner[0].interactive_exec_argv(container_id, argv)

    def open_container_logs(self, container_id: str, *, tail: int, follow: bool) -> LogReader:
        """Open a container's logs through its source (blocking; allowed under read-only).

        Raises:
            LogStreamError: no source lists the container or offers logs, or the stream
                cannot be opened.
        """
        from gputui.collect.docker.logs import LogStreamError  # only when logs are opened

        owner = self._owner(container_id)
        if owner is None:
            raise LogStreamError(unlisted(container_id))
        source, offers = owner
        if not offers.logs:
            raise LogStreamError(refusal(source.name, "logs", offers.why("logs")))
        return source.open_logs(container_id, tail=tail, follow=follow)

    def container_action(self, container_id: str, action: str) -> str | None:
        """Stop, start or restart a container through its source (blocking)."""
        if self.read_only:
            return READ_ONLY_REASON
        owner = self._owner(container_id)
        if owner is None:
            return unlisted(container_id)
        source, offers = owner
        if not offers.lifecycle:
            return refusal(source.name, "lifecycle", offers.why("lifecycle"))
        return source.container_action(container_id, action)

    def container_details(self, container_id: str) -> ContainerDetails:
        """A container's inspect facts through its source (blocking; reads, so read-only too)."""
        owner = self._owner(container_id)
        if owner is None:
            return ContainerDetails(container_id, error=unlisted(container_id))
        source, offers = owner
        if not offers.inspect:
            return ContainerDetails(
                container_id, error=refusal(source.name, "inspect", offers.why("inspect"))
            )
        return source.details(container_id)

    def container_processes(self, container_id: str) -> ContainerProcesses:
        """Every process of a container through its source (blocking, capped)."""
        owner = self._owner(container_id)
        if owner is None:
            return ContainerProcesses(error=unlisted(container_id))
        source, offers = owner
        if not offers.inspect:
            return ContainerProcesses(error=refusal(source.name, "inspect", offers.why("inspect")))
        return source.processes(container_id)

    def parent_chain(
        self, pid: int, start_time: float | None
    ) -> tuple[tuple[ParentLink, ...], str | None]:
        """A process's ancestors, from the process source (blocking, bounded by it)."""
        return self.procs.parent_chain(pid, start_time)

    def signal_process(self, pid: int, signum: int, start_time: float | None) -> str | None:
        """Send a signal to a GPU process; None on success, else why not."""
        if self.read_only:
            return READ_ONLY_REASON
        return self.procs.send_signal(pid, signum, start_time)

    def _source_reading(self, index: int) -> ContainerReading:
        """A source's in-flight read's result, or its ``slow`` status when it is late.

        The sources were all started at once, so waiting for each in turn costs the slowest
        one's time, at most ``docker_wait`` from its start.
        """
        pending = self._pending[index]
        assert pending is not None
        late_by = time.monotonic() - pending.started
        result = pending.wait(self._docker_wait - late_by)
        source = self.container_sources[index]
        if result is not None:
            self._pending[index] = None
            if result.status.name != source.name:  # the key is the source's, whatever it says
                result = replace(result, status=replace(result.status, name=source.name))
            return result
        waited = time.monotonic() - pending.started
        status = source.slow_status(waited)
        return ContainerReading(status, self._last_good_containers[index], self._last_engine[index])

    def close(self) -> None:
        """Release every source; never waits for a stuck container read (a daemon thread)."""
        self.gpu.close()
        for source in self.container_sources:
            source.close()
        if self._faults is not None:
            self._faults.close()
        close_procs = getattr(self.procs, "close", None)  # kept /proc descriptors, if any
        if close_procs is not None:
            close_procs()
        self._pending = [None] * len(self._pending)
        for reads in self._reads:
            reads.close()


def unlisted(container_id: str) -> str:
    """Why nothing can act on a container no connected source lists (seen only in cgroups)."""
    return f"no connected engine lists container {container_id[:12]}"


def merge_readings(
    readings: Sequence[ContainerReading],
) -> tuple[ContainerReading, dict[str, int]]:
    """Every source's containers as one reading, and which source lists each container.

    Args:
        readings: One reading per source, in the sources' order.

    Returns:
        The merged reading (the first source's status and engine facts; containers in the
        sources' order, an id listed twice taken from the first source that lists it) and
        container id -> the position of that source.
    """
    if not readings:
        return ContainerReading(SourceStatus("containers", ok=True)), {}
    if len(readings) == 1:  # the common case: nothing to merge
        only = readings[0]
        return only, {c.id: 0 for c in only.containers}
    owners: dict[str, int] = {}
    merged: list[ContainerInfo] = []
    for index, got in enumerate(readings):
        for info in got.containers:
            if info.id not in owners:
                owners[info.id] = index
                merged.append(info)
    first = readings[0]
    return ContainerReading(first.status, tuple(merged), first.engine), owners


class _BackgroundRead:
    """One container read, done by :class:`_ContainerReads`' thread; waited for with a deadline."""

    def __init__(self, read: Callable[[], ContainerReading], name: str) -> None:
        self.started = time.monotonic()
        self._read = read
        self._name = name
        self._result: ContainerReading | None = None
        self._done = threading.Event()

    def run(self) -> None:
        """Do the read (on the reads thread); a source that raises becomes an error status."""
        try:
            self._result = self._read()
        except Exception as exc:  # a source must not raise; if one does, it is a status
            self._result = failed_reading(self._name, exc)
        finally:
            self._done.set()

    def wait(self, timeout: float) -> ContainerReading | None:
        """The reading, or None when it is not done within ``timeout`` seconds."""
        if not self._done.wait(max(0.0, timeout)):
            return None
        return self._result


class _ContainerReads:
    """Container reads on one long-lived daemon thread (a stuck read cannot block exiting).

    One thread while reads keep coming rather than one per read: at ``--interval 0.1`` that was
    ten thread starts a second, each new thread's allocations landing in whichever malloc arena
    it was given, which kept the collector's memory creeping up under a changing container set.
    The collector starts a read only when the previous one has ended, so reads never queue; a
    thread left without reads for :data:`READER_IDLE_S` ends (a collector nobody closed does
    not keep one forever), and the next read starts another.
    """

    def __init__(self, read: Callable[[], ContainerReading], name: str) -> None:
        self._read = read
        self._name = name
        self._queue: queue.SimpleQueue[_BackgroundRead | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> _BackgroundRead:
        """Begin a read now (on the running thread, or a new one)."""
        pending = _BackgroundRead(self._read, self._name)
        with self._lock:
            self._queue.put(pending)  # before the check: an idle thread ending sees it
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name=f"gputui-{self._name}-read", daemon=True
                )
                self._thread.start()
        return pending

    def _serve(self) -> None:
        while True:
            try:
                pending = self._queue.get(timeout=READER_IDLE_S)
            except queue.Empty:
                with self._lock:
                    if self._queue.empty():
                        self._thread = None
                        return
                continue
            if pending is None:
                return
            pending.run()

    def close(self) -> None:
        """Let the thread end after the read in hand, if any (never waits for it)."""
        with self._lock:
            if self._thread is not None:
                self._queue.put(None)
                self._thread = None


class DeferredContainers(ContainerSource):
    """A container source built on its first use, on the thread that first uses it.

    Importing the Docker SDK costs about 90 ms; deferring it to the first read lets it run on
    the Docker worker thread while NVML initialises (``--once`` start-up).

    Args:
        factory: Builds the real source.
        name: The real source's name (known before it is built: the snapshot's key).
    """

    def __init__(self, factory: Callable[[], ContainerSource], name: str) -> None:
        self.name = name
        self._factory = factory
        self._source: ContainerSource | None = None
        self._lock = threading.Lock()

    def _get(self) -> ContainerSource:
        with self._lock:
            if self._source is None:
                self._source = self._factory()
            return self._source

    def read(self) -> ContainerReading:
        """The wrapped source's reading."""
        return self._get().read()

    def capabilities(self) -> ContainerCapabilities:
        """The wrapped source's capabilities."""
        return self._get().capabilities()

    def slow_status(self, waited_s: float) -> SourceStatus:
        """The wrapped source's, once it is built (it is, by the time a read is late)."""
        source = self._source
        if source is None:
            return super().slow_status(waited_s)
        return source.slow_status(waited_s)

    def exec(self, container_id: str, argv: Sequence[str], timeout_s: float) -> ExecResult:
        """Run ``argv`` in a container through the wrapped source."""
        return self._get().exec(container_id, argv, timeout_s)

    def interactive_exec_argv(self, container_id: str, argv: Sequence[str]) -> list[str] | None:
        """The wrapped source's argv for ``argv`` on the terminal, when it has one."""
        return self._get().interactive_exec_argv(container_id, argv)

    def open_logs(self, container_id: str, *, tail: int, follow: bool) -> LogReader:
        """The wrapped source's logs stream."""
        return self._get().open_logs(container_id, tail=tail, follow=follow)

    def container_action(self, container_id: str, action: str) -> str | None:
        """Stop, start or restart through the wrapped source."""
        return self._get().container_action(container_id, action)

    def details(self, container_id: str) -> ContainerDetails:
        """The wrapped source's inspect facts."""
        return self._get().details(container_id)

    def processes(self, container_id: str) -> ContainerProcesses:
        """The wrapped source's processes of a container."""
        return self._get().processes(container_id)

    def close(self) -> None:
        """Close the wrapped source if it was ever built."""
        with self._lock:
            if self._source is not None:
                self._source.close()

    def __getattr__(self, name: str) -> Any:
        # Counters and other extras of the real source (e.g. ``api_calls`` for benchmarks).
        return getattr(self._get(), name)


def _health_state(
    reading: GpuReading, containers: Sequence[ContainerReading]
) -> tuple[object, ...]:
    """What, when it changes, makes the health checks stale: lost GPUs and source states."""
    lost = tuple(g.index for g in reading.gpus if g.lost)
    engines = tuple((c.status.ok, c.status.kind) for c in containers)
    return (lost, reading.status.ok, reading.status.kind, engines)


def join_processes(reading: GpuReading, infos: dict[int, ProcessInfo]) -> tuple[GpuProcess, ...]:
    """One :class:`GpuProcess` per (PID, GPU), joined with its host facts and container id."""
    joined = []
    for gpu in reading.gpus:
        for sample in gpu.processes:
            info = infos.get(sample.pid) or ProcessInfo(sample.pid, exists=False)
            joined.append(GpuProcess(sample, info, info.container_id if info.exists else None))
    return tuple(joined)


def _mig_devices(gpus: dict[int, GpuSample], procs: Sequence[GpuProcess]) -> tuple[str, ...]:
    names: set[tuple[int, int]] = set()
    for proc in procs:
        gpu = gpus.get(proc.sample.gpu_index)
        inst = None if gpu is None else mig_instance_of(gpu, proc.sample)
        if inst is not None:
            names.add((proc.sample.gpu_index, inst.index))
    return tuple(mig_device_name(g, i) for g, i in sorted(names))


def attribute_containers(
    docker: ContainerReading,
    processes: Sequence[GpuProcess],
    *,
    gpu_data: bool = True,
    gpus: Sequence[GpuSample] = (),
    listed_by: Mapping[str, SourceStatus] | None = None,
    every_source_answered: bool | None = None,
) -> tuple[ContainerUsage, ...]:
    """Per-container GPU totals; containers only seen in cgroups get a stub entry.

    ``gpu_data`` is False when NVML gave no process list this refresh: the usages say so, and no
    container is then judged idle.

    ``gpus`` names the MIG devices (``0:1``) the processes run on, from the GPUs' MIG layout.

    ``listed_by`` maps a container id to the status of the source that lists it (several
    sources; None: ``docker``'s status is every container's). A listed container's
    ``engine_answered`` is its source's; a stub's is ``every_source_answered`` (any silent
    source might list it; None: ``docker``'s status). A stub
    keeps the runtime its cgroup path names (``cgroup_runtime``) and is shown as
    ``<runtime>-<id12>``; no connected source lists it.

    Ordered for people: GPU users by GPU memory, then idle GPU reservations, then other running
    containers, then stopped ones; by name within each group.
    """
    by_index = {g.index: g for g in gpus}
    by_container: dict[str, list[GpuProcess]] = {}
    for proc in processes:
        if proc.container_id is not None:
            by_container.setdefault(proc.container_id, []).append(proc)
    known = {c.id: c for c in docker.containers}
    all_answered = docker.status.ok if every_source_answered is None else every_source_answered
    usages = []
    for cid in known.keys() | by_container.keys():
        procs = by_container.get(cid, [])
        info = known.get(cid)
        runtime = None
        answered = all_answered
        source = None
        if info is None:
            runtime = next((p.info.runtime for p in procs if p.info.runtime), None)
            # Only a display name: the id and the cgroup's runtime are all that is known.
            info = ContainerInfo(
                id=cid, name=f"{runtime or 'container'}-{cid[:12]}", image="", status="unknown"
            )
        elif listed_by is not None:
            owner = listed_by.get(cid)
            answered = docker.status.ok if owner is None else owner.ok
            source = owner.name if owner is not None else None
        else:
            source = docker.status.name
        usages.append(
            ContainerUsage(
                info=info,
                gpu_memory_bytes=sum(p.sample.used_memory_bytes or 0 for p in procs),
                pids=tuple(sorted({p.pid for p in procs})),
                gpu_indexes=tuple(sorted({p.sample.gpu_index for p in procs})),
                sm_util=per_gpu_sm(procs),
                known_to_engine=cid in known,
                engine_answered=answered,
                gpu_data=gpu_data,
                mig_devices=_mig_devices(by_index, procs),
                cgroup_runtime=runtime,
                source=source,
            )
        )

    def order(u: ContainerUsage) -> tuple[int, int, str]:
        if u.pids:
            group = 0
        elif u.idle_reserved:
            group = 1
        elif u.info.running:
            group = 2
        else:
            group = 3
        return group, -u.gpu_memory_bytes, u.info.name

    return tuple(sorted(usages, key=order))
