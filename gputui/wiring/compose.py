"""Wiring: the real, scenario or demo sources and the health checks, assembled into a Collector.

The one place that knows every concrete source, so the collector itself depends only on the
source protocols and the health layer stays above the data layer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING

from gputui.collect.collector import DOCKER_WAIT_S, Collector, DeferredContainers
from gputui.collect.sources import ContainerSource, GpuSource, HealthInputs
from gputui.model.settings import Settings
from gputui.model.status import HealthCheck

if TYPE_CHECKING:
    from gputui.collect.collector import HealthRunner
    from gputui.collect.engines import EngineSpec
    from gputui.collect.fault_attribution import KernelFaultTracker
    from gputui.collect.linux.cgroup_usage import EarlyCgroupCpu
    from gputui.collect.linux.proc_reader import EarlyCpuSample

#: Seconds one Docker read may spend on the engine, all its requests together.
DOCKER_READ_S = 5.0

#: Seconds a one-shot (``--once``) measures CPU % over.
ONCE_CPU_WINDOW_S = 0.1


def build_collector(
    settings: Settings,
    *,
    once: bool = False,
    health: bool = True,
    early: EarlyCpuSample | None = None,
    gpu: GpuSource | None = None,
    first_health_later: bool = False,
) -> Collector:
    """Wire the real (or scenario, or demo) sources for ``settings``.

    Args:
        settings: What the user asked for.
        once: A single collection (``--once``): no background threads, slow reads inline.
        health: Run the runtime-health checks (``gputui free`` needs none of them).
        early: A one-shot's first CPU sample, taken at start-up (:func:`early_cpu_sample`).
        gpu: NVML already starting (:class:`~gputui.collect.nvml.early.EarlyNvml`, made by the
            command line at once, with ``background=not once``); None with a scenario or the
            demo, and otherwise an NVML source is made here.
        first_health_later: The first collection runs no health checks, the next does (the
            monitor's: its first snapshot is on screen sooner).

    Raises:
        ScenarioError: the scenario file is unreadable or invalid.
    """
    if settings.demo:
        from gputui.collect.standins import demo
        from gputui.collect.standins.scenario import ScenarioSource
        from gputui.wiring.demo_host import demo_health

        return Collector(
            ScenarioSource(demo.DEMO_SCENARIO, wall=demo.wall_clock),
            demo.DemoProcesses(),
            demo.DemoContainers(settings.owner_labels),
            mode="demo",
            health=demo_health if health else None,
            health_interval=settings.health_interval,
            read_only=settings.read_only,
            # A simulated clock keeps the demo's ages and timestamps the same on every run.
            clock=demo.demo_clock(),
            hostname="demo-gpu-node",
            first_health_later=first_health_later,
        )
    from gputui.collect.linux.proc_reader import ProcSource

    if not once:
        from gputui.collect.linux.fileio import raise_fd_limit

        # Before the readers size their budgets of kept descriptors from the limit.
        raise_fd_limit()
    if settings.scenario is not None:
        from gputui.collect.standins.scenario import ScenarioSource

        gpu = ScenarioSource.from_file(settings.scenario)
    elif gpu is None:
        from gputui.collect.nvml.source import NvmlSource

        # --once skips PCIe throughput: it samples for 20 ms per direction per GPU, most of a
        # one-shot's NVML time; the TUI and the exporter read it on their slow lane.
        gpu = NvmlSource(slow_interval=settings.slow_interval, background=not once, pcie=not once)
    return Collector(
        gpu,
        early.procs if early is not None else ProcSource(),
        container_sources(
            settings.engines,
            cpu_settle_s=ONCE_CPU_WINDOW_S if once else 0.0,
            owner_labels=settings.owner_labels,
            cpu_start=early.cgroups if early is not None and once else None,
        ),
        mode=settings.mode,
        health=_health_runner(later=first_health_later) if health else None,
        health_interval=settings.health_interval,
        read_only=settings.read_only,
        # A one-shot has no next refresh to show late containers in: it waits for the engine up
        # to the source's own deadline (5 s) instead of the live loop's 2 s.
        docker_wait=DOCKER_READ_S + 0.5 if once else DOCKER_WAIT_S,
        # A one-shot measures CPU % over its own run instead of showing N/A (a live loop has
        # the previous refresh). 0.1 s is 10 clock ticks per process, 10 per core for the host.
        cpu_window=ONCE_CPU_WINDOW_S if once else 0.0,
        cpu_primed_at=early.taken_at if early is not None and once else None,
        faults=kernel_faults(settings, once=once),
        first_health_later=first_health_later,
    )


def _health_runner(*, later: bool) -> HealthRunner:
    """The health checks; for a monitor (``later``) their modules are imported at their first run.

    A monitor's first collection runs no checks, and the checks' modules (about 40 ms of
    imports on the 2-core machine) would otherwise be imported on the UI thread before Textual
    is, delaying the first frame; the first run is on the collector's thread, after the first
    paint. A one-shot imports them now: that happens while NVML starts and takes its GPM
    samples, which the one-shot waits for anyway.
    """
    if not later:
        from gputui.health.runner import run_checks

        return run_checks

    def deferred(inputs: HealthInputs) -> tuple[HealthCheck, ...]:
        from gputui.health.runner import run_checks

        return run_checks(inputs)

    return deferred


def container_sources(
    engines: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    *,
    cpu_settle_s: float = 0.0,
    owner_labels: Sequence[str] = (),
    cpu_start: EarlyCgroupCpu | None = None,
) -> list[ContainerSource]:
    """The container engines a live (or scenario) collector reads, one source per engine.

    Every engine the host shows (:func:`gputui.collect.engines.discover`: the Docker CLI's
    endpoint, rootful and each user's rootless podman, each user's rootless Docker,
    containerd and k3s' containerd, CRI-O), or those ``--engine`` names. Each is built on its first
    read, on its own read thread, so a slow engine (podman's service takes seconds for
    ``/info``) delays no other and never the GPU data. The first one listed wins when two
    engines list the same container id, and its status and engine facts are what the Docker
    health checks judge.

    Args:
        engines: The ``--engine`` values (validated by the CLI); none reads every engine found.
        env: The environment for discovery (``os.environ`` when None).
        cpu_settle_s: A one-shot's wait between the two cgroup samples of a container's CPU %
            (0 in a live loop, which has the previous refresh's).
        owner_labels: Labels naming a container's owner (the config's ``[owners]``).
        cpu_start: A one-shot's containers' CPU counters read at start-up (their first sample).
    """
    from gputui.collect.engines import select

    labels = tuple(owner_labels)
    return [
        DeferredContainers(
            partial(_engine_source, spec, cpu_settle_s, labels, cpu_start), name=spec.name
        )
        for spec in select(list(engines), env=env)
    ]


def _engine_source(
    spec: EngineSpec,
    cpu_settle_s: float = 0.0,
    owner_labels: tuple[str, ...] = (),
    cpu_start: EarlyCgroupCpu | None = None,
) -> ContainerSource:
    """The source of one engine (imported and built on its read thread, see above)."""
    if spec.kind == "crio":
        from gputui.collect.criapi.source import CriSource

        return CriSource(spec.address or "", name=spec.name, owner_labels=owner_labels)
    if spec.kind == "containerd":
        from gputui.collect.containerd.bundles import ContainerdBundles

        return ContainerdBundles(
            spec.address or "/run/containerd",
            name=spec.name,
            cpu_settle_s=cpu_settle_s,
            cpu_start=cpu_start,
        )
    from gputui.collect.docker.source import DockerSource

    product = "podman" if spec.kind == "podman" else None
    return DockerSource(
        spec.address,
        timeout=DOCKER_READ_S,
        name=spec.name,
        product=product,
        cpu_settle_s=cpu_settle_s,
        cpu_start=cpu_start,
        owner_labels=owner_labels,
    )


def kernel_faults(settings: Settings, *, once: bool = False) -> KernelFaultTracker | None:
    """The kernel-log reader for ``settings`` (``--kernel-log``), None when none is read.

    Live, gputui reads ``/dev/kmsg``; with a scenario (the GPUs are not this machine's) or the
    demo it reads nothing unless ``--kernel-log`` names a path.
    """
    path = settings.kernel_log
    if path == "off" or (path is None and (settings.demo or settings.scenario is not None)):
        return None
    from gputui.collect.fault_attribution import KernelFaultTracker
    from gputui.collect.linux.kmsg import KMSG_PATH, KmsgReader

    return KernelFaultTracker(KmsgReader(path or KMSG_PATH, background=not once))
