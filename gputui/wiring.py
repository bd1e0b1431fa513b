"""Wiring: the real, scenario or demo sources and the health checks, assembled into a Collector.

The one place that knows every concrete source, so the collector itself depends only on the
source protocols and the health layer stays above the data layer.
"""

from __future__ import annotations

import tempfile
import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from gputui.collect.collector import DOCKER_WAIT_S, Collector, DeferredContainers
from gputui.collect.sources import ContainerSource, GpuSource, HealthInputs
from gputui.health.context import HealthRoots
from gputui.health.runner import run_checks
from gputui.model import HealthCheck
from gputui.settings import Settings

if TYPE_CHECKING:
    from gputui.collect.fault_attribution import KernelFaultTracker
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
) -> Collector:
    """Wire the real (or scenario, or demo) sources for ``settings``.

    Args:
        settings: What the user asked for.
        once: A single collection (``--once``): no background threads, slow reads inline.
        health: Run the runtime-health checks (``gputui free`` needs none of them).
        early: A one-shot's first CPU sample, taken at start-up (:func:`early_cpu_sample`).

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
            health=demo_health if health else None,
            health_interval=settings.health_interval,
            read_only=settings.read_only,
            # A simulated clock keeps the demo's ages and timestamps the same on every run.
            clock=demo.demo_clock(),
            hostname="demo-gpu-node",
        )
    from gputui.collect.linux.proc_reader import ProcSource

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
        early.procs if early is not None else ProcSource(),
        container_sources(),
        mode=settings.mode,
        health=run_checks if health else None,
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
    )


def container_sources() -> list[ContainerSource]:
    """The container engines a live (or scenario) collector reads, one entry per engine.

    Each is built on its first read, on its own read thread. The first one listed wins when
    two engines list the same container id, and its status and engine facts are what the
    Docker health checks judge.
    """
    return [
        DeferredContainers(_docker_source, name="docker"),
    ]


def _docker_source() -> ContainerSource:
    from gputui.collect.docker.source import DockerSource  # on the read thread (see above)

    return DockerSource(timeout=DOCKER_READ_S)


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


#: The simulated host's files, for the file-reading health checks: what a host with the driver,
#: the toolkit and Docker's nvidia runtime configured holds at these paths (relative to its root).
#: /dev/char is there without NVIDIA links, as on a default install (the daemon-reload hazard).
DEMO_HOST_FILES: dict[str, str] = {
    "proc/driver/nvidia/version": (
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  "
        "(dvs-builder@U22-I3-AM02-24-3)  Wed Oct  1 12:00:00 UTC 2025\n"
        "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n"
    ),
    "proc/2/comm": "kthreadd\n",
    "sys/module/nvidia/version": "580.159.04\n",
    "sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory hugetlb pids rdma misc\n",
    "etc/docker/daemon.json": (
        '{\n    "runtimes": {\n        "nvidia": {\n            "args": [],\n'
        '            "path": "nvidia-container-runtime"\n        }\n    }\n}\n'
    ),
    "dev/char/.keep": "",
}

_demo_root: tempfile.TemporaryDirectory[str] | None = None
_demo_root_lock = threading.Lock()


def demo_host_root() -> str:
    """A private temporary directory holding :data:`DEMO_HOST_FILES` (made once per process).

    The health checks read real files, so the simulated host's are written out; the directory
    goes when the process exits. Paths the checks print are shown without it (see
    :func:`demo_health`), as they would read on the simulated host.
    """
    global _demo_root
    with _demo_root_lock:
        if _demo_root is None:
            root = tempfile.TemporaryDirectory(prefix="gputui-demo-host-")
            for relative, text in DEMO_HOST_FILES.items():
                path = Path(root.name, relative)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
            _demo_root = root
        return _demo_root.name


def _as_on_host(check: HealthCheck, root: str) -> HealthCheck:
    def clean(text: str) -> str:
        return text.replace(root, "")

    return replace(
        check,
        summary=clean(check.summary),
        details=tuple(clean(line) for line in check.details),
        fix=None if check.fix is None else clean(check.fix),
        subject=None if check.subject is None else clean(check.subject),
    )


def demo_health(inputs: HealthInputs) -> tuple[HealthCheck, ...]:
    """Run the real health checks on the simulated machine, with a simulated toolkit install.

    Files come from :func:`demo_host_root`; the paths in the results read as on the simulated
    host (``/etc/docker/daemon.json``), without the temporary directory that serves them.
    """
    versions = {
        "nvidia-ctk": "NVIDIA Container Toolkit CLI version 1.17.8\ncommit: 5bf2c1b",
        "nvidia-container-cli": "cli-version: 1.17.8\nlib-version: 1.17.8",
        "nvidia-container-runtime": "NVIDIA Container Runtime version 1.17.8",
        "nvidia-container-runtime-hook": "NVIDIA Container Runtime Hook version 1.17.8",
    }
    root = demo_host_root()
    roots = HealthRoots(
        proc=f"{root}/proc",
        sys=f"{root}/sys",
        daemon_json=f"{root}/etc/docker/daemon.json",
        cdi_dirs=(f"{root}/etc/cdi", f"{root}/var/run/cdi"),
        dev=f"{root}/dev",
    )
    checks = run_checks(
        inputs,
        roots=roots,
        which=lambda name: f"/usr/bin/{name}" if name in versions else None,
        run_version=lambda argv: versions.get(argv[0].rsplit("/", 1)[-1]),
        dist_version=lambda dist: "13.615.71" if dist == "nvidia-ml-py" else None,
    )
    return tuple(_as_on_host(check, root) for check in checks)
