"""Wiring: the real, scenario or demo sources and the health checks, assembled into a Collector.

The one place that knows every concrete source, so the collector itself depends only on the
source protocols and the health layer stays above the data layer.
"""

from __future__ import annotations

from gputui.collect.collector import DOCKER_WAIT_S, Collector, DeferredContainers
from gputui.collect.sources import ContainerSource, GpuSource, HealthInputs
from gputui.health.context import HealthRoots
from gputui.health.runner import run_checks
from gputui.model import HealthCheck
from gputui.settings import Settings

#: Seconds one Docker read may spend on the engine, all its requests together.
DOCKER_READ_S = 5.0

#: Seconds a one-shot (``--once``) measures CPU % over.
ONCE_CPU_WINDOW_S = 0.1


def build_collector(settings: Settings, *, once: bool = False) -> Collector:
    """Wire the real (or scenario, or demo) sources for ``settings``.

    Args:
        settings: What the user asked for.
        once: A single collection (``--once``): no background threads, slow reads inline.

    Raises:
        ScenarioError: the scenario file is unreadable or invalid.
    """
    if settings.demo:
        from gputui.collect.standins import demo
        from gputui.collect.standins.scenario import ScenarioSource

        return Collector(
            ScenarioSource(demo.DEMO_SCENARIO, wall=demo.wall_clock),
            demo.DemoProcesses(),
            demo.DemoContainers(),
            mode="demo",
            health=demo_health,
            health_interval=settings.health_interval,
            read_only=settings.read_only,
            # A simulated clock keeps the demo's ages and timestamps the same on every run.
            clock=demo.demo_clock(),
            hostname="demo-gpu-node",
        )
    from gputui.collect.linux.processes import ProcSource

    def docker_source() -> ContainerSource:
        from gputui.collect.docker.source import DockerSource

        return DockerSource(timeout=DOCKER_READ_S)

    gpu: GpuSource
    if settings.scenario is not None:
        from gputui.collect.standins.scenario import ScenarioSource

        gpu = ScenarioSource.from_file(settings.scenario)
    else:
        from gputui.collect.nvml.source import NvmlSource

        # --once skips PCIe throughput: it samples for 20 ms per direction per GPU, most of a
        # one-shot's NVML time; the TUI and the exporter read it on their slow lane.
        gpu = NvmlSource(slow_interval=settings.slow_interval, background=not once, pcie=not once)
    return Collector(
        gpu,
        ProcSource(),
        DeferredContainers(docker_source),
        mode=settings.mode,
        health=run_checks,
        health_interval=settings.health_interval,
        read_only=settings.read_only,
        # A one-shot has no next refresh to show late containers in: it waits for the engine up
        # to the source's own deadline (5 s) instead of the live loop's 2 s.
        docker_wait=DOCKER_READ_S + 0.5 if once else DOCKER_WAIT_S,
        # A one-shot measures CPU % over its own run instead of showing N/A (a live loop has
        # the previous refresh). 0.1 s is 10 clock ticks per process, 10 per core for the host.
        cpu_window=ONCE_CPU_WINDOW_S if once else 0.0,
    )


#: The simulated host's files, for the file-reading health checks (nothing of the real host).
_DEMO_ROOT = "/nonexistent/gputui-demo"


def demo_health(inputs: HealthInputs) -> tuple[HealthCheck, ...]:
    """Run the real health checks on the simulated machine, with a simulated toolkit install."""
    versions = {
        "nvidia-ctk": "NVIDIA Container Toolkit CLI version 1.17.8\ncommit: 5bf2c1b",
        "nvidia-container-cli": "cli-version: 1.17.8\nlib-version: 1.17.8",
    }
    roots = HealthRoots(
        proc=_DEMO_ROOT,
        sys=_DEMO_ROOT,
        daemon_json=f"{_DEMO_ROOT}/daemon.json",
        cdi_dirs=(),
        dev=_DEMO_ROOT,
    )
    return run_checks(
        inputs,
        roots=roots,
        which=lambda name: f"/usr/bin/{name}" if name in versions else None,
        run_version=lambda argv: versions.get(argv[0].rsplit("/", 1)[-1]),
        dist_version=lambda dist: "13.615.71" if dist == "nvidia-ml-py" else None,
    )
