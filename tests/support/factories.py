"""Snapshot builders and a fake collector: the seam the UI tests drive the app through."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gputui.collect.docker.logs import LogReader, LogStreamError
from gputui.collect.linux.parent_chain import ParentLink, parent_chain
from gputui.collect.sources import ContainerCapabilities, ContainerOwner
from gputui.model.containers import ContainerDetails, ContainerInfo, ContainerProcesses, ExecResult
from gputui.model.gpu import GpuProcessSample, GpuSample
from gputui.model.processes import GpuProcess, ProcessInfo, Visibility, per_gpu_sm
from gputui.model.snapshot import ContainerUsage, HostInfo, Snapshot
from gputui.model.status import HealthCheck, HealthStatus, SourceStatus

GIB = 1024**3
MIB = 1024**2


def cid(n: int) -> str:
    """A 64-hex container id from a small number."""
    return f"{n:02x}" * 32


def gpu(index: int, util: int = 50, used_gib: float = 10.0, **kw: object) -> GpuSample:
    base = GpuSample(
        index=index,
        uuid=f"GPU-{index:08d}-0000-0000-0000-000000000000",
        name="NVIDIA H200",
        utilization_gpu=util,
        utilization_memory=util // 2,
        memory_used_bytes=int(used_gib * GIB),
        memory_total_bytes=141 * GIB,
        temperature_c=40 + index,
        power_w=300.0 + index,
        power_limit_w=700.0,
        clock_sm_mhz=1980,
        clock_mem_mhz=3201,
        throttle_reasons=0,
        pstate=0,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def proc(
    pid: int,
    gpu_index: int = 0,
    mem_mib: int = 1000,
    container_id: str | None = None,
    command: str = "python3 train.py",
    user: str = "root",
    exists: bool = True,
    sm: int | None = 30,
    cpu: float | None = 12.5,
    container_pid: int | None = None,
) -> GpuProcess:
    return GpuProcess(
        sample=GpuProcessSample(
            pid=pid, gpu_index=gpu_index, used_memory_bytes=mem_mib * MIB, sm_util=sm
        ),
        info=ProcessInfo(
            pid=pid,
            exists=exists,
            command=command if exists else None,
            name=command.split()[0] if exists else None,
            user=user if exists else None,
            cpu_percent=cpu if exists else None,
            rss_bytes=512 * MIB if exists else None,
            start_time=1000.0 + pid if exists else None,
            container_id=container_id,
            container_pid=container_pid,
        ),
        container_id=container_id,
    )


def container(
    n: int,
    name: str,
    processes: Sequence[GpuProcess] = (),
    status: str = "running",
    gpu_request: str | tuple[str, ...] | None = "all",
    known: bool = True,
    image: str = "lab:latest",
    **kw: object,
) -> ContainerUsage:
    mine = [p for p in processes if p.container_id == cid(n)]
    memory = sum(p.sample.used_memory_bytes or 0 for p in mine)
    info = ContainerInfo(
        id=cid(n),
        name=name,
        image=image,
        status=status,
        gpu_request=gpu_request,
        **kw,  # type: ignore[arg-type]
    )
    return ContainerUsage(
        info=info,
        gpu_memory_bytes=memory,
        pids=tuple(sorted({p.pid for p in mine})),
        gpu_indexes=tuple(sorted({p.sample.gpu_index for p in mine})),
        sm_util=per_gpu_sm(mine),
        known_to_engine=known,
    )


def snapshot(
    taken_at: float = 1_000_000.0,
    gpus: Sequence[GpuSample] | None = None,
    processes: Sequence[GpuProcess] = (),
    containers: Sequence[ContainerUsage] = (),
    health: Sequence[HealthCheck] = (),
    mode: str = "live",
    sources: dict[str, SourceStatus] | None = None,
    visibility: Visibility | None = None,
) -> Snapshot:
    """A refresh of a host gputui sees whole (its PID namespace) unless ``visibility`` says not."""
    return Snapshot(
        taken_at=taken_at,
        mode=mode,
        host=HostInfo(hostname="lab-1", driver_version="580.159.04", cuda_driver_version="13.0"),
        sources=sources
        if sources is not None
        else {
            "nvml": SourceStatus("nvml", True),
            "docker": SourceStatus("docker", True),
            "procs": SourceStatus("procs", True),
        },
        gpus=tuple(gpus if gpus is not None else (gpu(0), gpu(1))),
        processes=tuple(processes),
        containers=tuple(containers),
        health=tuple(health),
        visibility=visibility if visibility is not None else Visibility(host_pid_namespace=True),
    )


def standard(taken_at: float = 1_000_000.0, util: int = 50) -> Snapshot:
    """Two GPUs, two GPU containers, one idle reserved, one cgroup-only, host and orphan PIDs."""
    processes = [
        proc(611, 0, 13290, cid(1), "python3 /lab/load.py 12 120", container_pid=1),
        proc(612, 1, 2048, cid(1), "python3 /lab/worker.py", container_pid=7),
        proc(700, 1, 4096, cid(2), "python3 serve.py --port 8000", user="app"),
        proc(800, 0, 512, cid(5), "containerd-task", user="nobody"),
        proc(900, 0, 256, None, "Xorg :0", user="root", sm=None),
        proc(999, 1, 1024, None, exists=False, sm=None),
    ]
    containers = [
        container(1, "trainer-a", processes, compose_project="lab", compose_service="trainer"),
        container(2, "inference", processes, k8s_pod="infer-7d9", k8s_namespace="ml"),
        container(3, "reserved-idle", processes, gpu_request=("0",)),
        container(4, "web", processes, gpu_request=None, image="nginx:1"),
        container(5, "cgroup-only", processes, known=False, status="unknown", gpu_request=None),
    ]
    health = [
        HealthCheck("nvml.init", HealthStatus.PASS, "NVML initialised"),
        HealthCheck(
            "docker.nvidia_runtime",
            HealthStatus.WARN,
            "nvidia runtime not registered",
            details=("runtimes: runc",),
            fix="sudo nvidia-ctk runtime configure --runtime=docker",
        ),
        HealthCheck(
            "docker.cdi", HealthStatus.FAIL, "CDI spec missing", fix="nvidia-ctk cdi generate"
        ),
    ]
    return snapshot(
        taken_at=taken_at,
        gpus=(gpu(0, util=util), gpu(1, util=util // 2)),
        processes=processes,
        containers=containers,
        health=health,
    )


@dataclass
class FakeCollector:
    """Hands out prepared snapshots; ``block_after`` makes collect() stall like a slow source.

    Attributes:
        snapshots: Returned in order; the last one repeats.
        mode: What ``Collector.mode`` reports.
    """

    snapshots: list[Snapshot] = field(default_factory=lambda: [standard()])
    mode: str = "live"
    exec_result: ExecResult | Callable[[str], ExecResult] | None = None
    interactive_argv: list[str] | None = None
    signal_answer: str | None = None
    block_after: int | None = None
    release: threading.Event = field(default_factory=threading.Event)
    calls: int = 0
    health_requests: int = 0
    exec_calls: list[tuple[str, tuple[str, ...], float]] = field(default_factory=list)
    signals: list[tuple[int, int, float | None]] = field(default_factory=list)
    closed: bool = False
    collect_threads: set[str] = field(default_factory=set)
    player: None = None  # a live collector: no replay controls (CollectorProtocol.player)

    def collect(self) -> Snapshot:
        self.collect_threads.add(threading.current_thread().name)
        if self.block_after is not None and self.calls >= self.block_after:
            self.release.wait(30)
        index = min(self.calls, len(self.snapshots) - 1)
        self.calls += 1
        return self.snapshots[index]

    def request_health(self) -> None:
        self.health_requests += 1

    def exec_in_container(
        self, container_id: str, argv: Sequence[str], timeout_s: float
    ) -> ExecResult:
        self.exec_calls.append((container_id, tuple(argv), timeout_s))
        result = self.exec_result
        if callable(result):
            return result(container_id)
        if result is None:
            return ExecResult(tuple(argv), 0, stdout="| NVIDIA-SMI 580.159.04 |\n", duration_s=0.25)
        return result

    def interactive_exec_argv(self, container_id: str, argv: Sequence[str]) -> list[str] | None:
        if self.interactive_argv is None:
            return None
        return [*self.interactive_argv, container_id, *argv]

    def signal_process(self, pid: int, signum: int, start_time: float | None) -> str | None:
        self.signals.append((pid, signum, start_time))
        return self.signal_answer

    def container_owner(self, container_id: str) -> ContainerOwner | None:
        """A ``docker`` source with exec (and interactive exec when there is an argv), for every
        container the snapshot last handed out lists; no logs, no lifecycle."""
        shown = self.snapshots[max(0, min(self.calls, len(self.snapshots)) - 1)]
        usage = shown.container(container_id)
        if usage is None or not usage.known_to_engine:
            return None
        offers = ContainerCapabilities(
            exec=True, interactive_exec=self.interactive_argv is not None
        )
        return ContainerOwner("docker", offers)

    def open_container_logs(self, container_id: str, *, tail: int, follow: bool) -> LogReader:
        raise LogStreamError("docker does not offer container logs")

    def container_action(self, container_id: str, action: str) -> str | None:
        return "docker does not offer container stop/start/restart"

    def container_details(self, container_id: str) -> ContainerDetails:
        return ContainerDetails(container_id, error="docker does not offer container inspect")

    def container_processes(self, container_id: str) -> ContainerProcesses:
        return ContainerProcesses(error="docker does not offer container inspect")

    def parent_chain(
        self, pid: int, start_time: float | None
    ) -> tuple[tuple[ParentLink, ...], str | None]:
        return parent_chain(pid, start_time)  # the real /proc: the tests' PIDs are real

    def close(self) -> None:
        self.closed = True


def demo_snapshots(count: int) -> list[Snapshot]:
    """``count`` consecutive refreshes of the built-in demo machine on a fixed clock."""
    from gputui.collect.collector import Collector
    from gputui.collect.standins import demo
    from gputui.collect.standins.scenario import ScenarioSource
    from gputui.wiring import demo_host

    clock = demo.demo_clock()
    collector = Collector(
        ScenarioSource(demo.DEMO_SCENARIO, wall=clock),
        demo.DemoProcesses(),
        demo.DemoContainers(),
        mode="demo",
        health=demo_host.demo_health,
        hostname="demo-gpu-node",
        clock=clock,
    )
    try:
        return [collector.collect() for _ in range(count)]
    finally:
        collector.close()


def demo_app(refreshes: int = 330, **settings: object) -> Any:
    """The app on the demo machine after ``refreshes`` refreshes, deterministic (fixed clock).

    The analyzer (history, findings and alert engines) is fed the earlier refreshes and the
    collector then returns the last one forever (re-applying it changes nothing), so a
    screenshot never depends on timing. 330 refreshes (s) let the 5-minute GPU-utilization
    alert fire.
    """
    from gputui.model.settings import Settings
    from gputui.ui.app import GpuTuiApp

    snapshots = demo_snapshots(refreshes)
    settings.setdefault("interval", 1.0)
    app = GpuTuiApp(FakeCollector([snapshots[-1]], mode="demo"), Settings(demo=True, **settings))  # type: ignore[arg-type]
    for earlier in snapshots[:-1]:
        app.analyzer.analyse(earlier)  # records the history too, as on the collector's thread
    return app


def busy_host(count: int, seed: int = 1, step_s: float = 10.0) -> list[Snapshot]:
    """``count`` refreshes ``step_s`` apart of a busy host: 8 GPUs, 220 processes, 30 containers.

    What moves from one refresh to the next is what moves on such a host: utilisation, power,
    temperature, energy, clocks, each process's CPU % and SM share, some processes' resident
    and GPU memory, the containers' CPU and memory; every few refreshes a job's process exits
    and another starts. Names, command lines, images, labels and start times stay.
    """
    rng = random.Random(seed)
    t0 = 1_790_000_000.0
    n_gpus, n_containers = 8, 30
    pids = list(range(20_000, 20_220))
    started = {pid: t0 - 86_400 + pid for pid in pids}
    memory = {pid: rng.randrange(1, 20) * 512 * MIB for pid in pids}
    rss = {pid: rng.randrange(200, 4000) * MIB for pid in pids}
    energy = [10**9 * (g + 1) for g in range(n_gpus)]
    next_pid = 30_000
    out = []
    for k in range(count):
        taken_at = t0 + k * step_s
        if k and k % 3 == 0:  # a job's worker exits, another one starts
            gone = pids.pop(rng.randrange(len(pids)))
            pids.append(next_pid)
            started[next_pid], memory[next_pid] = taken_at - 2, 2 * GIB
            rss[next_pid] = 600 * MIB
            next_pid += 1
            del started[gone]
        processes = []
        for pid in sorted(pids):
            if rng.random() < 0.1:
                memory[pid] += rng.choice((-1, 1)) * 64 * MIB
            if rng.random() < 0.3:
                rss[pid] += rng.randrange(-8, 9) * MIB
            n = pid % n_containers
            processes.append(
                GpuProcess(
                    sample=GpuProcessSample(
                        pid=pid,
                        gpu_index=pid % n_gpus,
                        used_memory_bytes=max(memory[pid], 64 * MIB),
                        sm_util=rng.randrange(0, 100),
                    ),
                    info=ProcessInfo(
                        pid=pid,
                        command=f"python3 -m torch.distributed.run --nproc-per-node 8 "
                        f"/work/team-{n % 7}/train.py --config configs/run-{n}.yaml "
                        f"--rank {pid % 8}",
                        name="python3",
                        user=f"user{n % 9}",
                        cpu_percent=round(rng.uniform(0, 180), 1),
                        rss_bytes=rss[pid],
                        start_time=started[pid],
                        container_id=cid(n),
                        container_pid=pid % 500 + 1,
                    ),
                    container_id=cid(n),
                )
            )
        gpus = []
        for g in range(n_gpus):
            energy[g] += rng.randrange(1_000_000, 7_000_000)
            util = rng.randrange(0, 101)
            gpus.append(
                gpu(
                    g,
                    util=util,
                    used_gib=sum(
                        p.sample.used_memory_bytes or 0
                        for p in processes
                        if p.sample.gpu_index == g
                    )
                    / GIB,
                    temperature_c=40 + util // 4 + rng.randrange(0, 3),
                    power_w=round(80 + util * 6.2 + rng.uniform(-5, 5), 1),
                    clock_sm_mhz=rng.choice((1755, 1830, 1980)),
                    pcie_rx_kbps=rng.randrange(0, 50_000),
                    pcie_tx_kbps=rng.randrange(0, 50_000),
                    total_energy_mj=energy[g],
                    processes=tuple(p.sample for p in processes if p.sample.gpu_index == g),
                )
            )
        containers = [
            container(
                n,
                f"team-{n % 7}-train-{n:02d}",
                processes,
                image=f"registry.example.com/team-{n % 7}/trainer:2026.{n % 12 + 1}",
                compose_project=f"team-{n % 7}",
                compose_service="trainer",
                started_at=t0 - 90_000 + n,
                restart_count=0,
                cpu_percent=round(rng.uniform(50, 1400), 1),
                memory_used_bytes=rng.randrange(8, 64) * GIB,
                memory_limit_bytes=256 * GIB,
                policy_labels=(("gputui.owner", f"user{n % 9}"), ("team", f"team-{n % 7}")),
            )
            for n in range(n_containers)
        ]
        out.append(snapshot(taken_at, gpus, processes, containers, standard().health))
    return out
