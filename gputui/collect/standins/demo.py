"""The simulated machine behind ``--demo``: four GPUs, a handful of containers, no hardware.

GPU 3 is split into three MIG devices: a containerd service runs on one, a notebook reserves
another and idles, the third is free.

Deterministic: the n-th refresh always shows the same figures, so screenshots and snapshot tests
are stable. GPUs come from a scenario played through the real NVML adapter; containers and
processes come from stand-ins implementing the same protocols as the Docker and /proc sources.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gputui.collect.owners import (
    COMPOSE_DIR_LABEL,
    HostLookup,
    OwnerFacts,
    OwnerResolver,
    owner_facts_from_labels,
    owner_label_keys,
)
from gputui.collect.sources import ContainerCapabilities, ContainerSource
from gputui.model.containers import ContainerInfo, ContainerReading, EngineInfo, ExecResult, Owner
from gputui.model.gauges import GPU_GAUGES
from gputui.model.processes import ProcessInfo, Visibility
from gputui.model.snapshot import HostStats
from gputui.model.status import SourceStatus

if TYPE_CHECKING:
    from gputui.collect.linux.parent_chain import ParentLink

# --- The four GPUs, as a scenario played through the real NVML adapter.
_STEPS = 120


def _wave(
    base: float, amp: float, period: float, phase: float = 0.0, lo: float = 0, hi: float = 100
) -> list[float]:
    return [
        round(min(hi, max(lo, base + amp * math.sin(2 * math.pi * (i / period) + phase))), 1)
        for i in range(_STEPS)
    ]


#: An idle H200 as the field table describes it (each gauge's ``demo`` value); each GPU below
#: says what differs.
_H200: dict[str, Any] = {
    gauge.scenario.key: gauge.scenario.demo
    for gauge in GPU_GAUGES
    if gauge.scenario.demo is not None
}


def _energy_mj(power: list[float], base_j: float) -> list[int]:
    """A total-energy counter (mJ) from a power series, one second a step."""
    total, out = base_j * 1000, []
    for watts in power:
        total += watts * 1000
        out.append(int(total))
    return out


_POWER = {
    0: _wave(610, 60, 17, lo=0, hi=1000),
    1: _wave(240, 40, 11, lo=0, hi=1000),
    2: _wave(688, 10, 9, lo=0, hi=1000),
    3: _wave(118, 12, 13, lo=0, hi=1000),
}

DEMO_SCENARIO: dict[str, Any] = {
    "nvml": "ok",
    "driver_version": "580.159.04",
    "cuda_driver_version": "13.0",
    "gpus": [
        {
            **_H200,
            "index": 0,
            "uuid": "GPU-57d57e22-be4b-9496-673e-11cc7638ed19",
            "name": "NVIDIA H200",
            "memory_used_mib": [67584 + int(v) for v in _wave(200, 150, 30)],
            "utilization_gpu": _wave(90, 8, 17),
            "utilization_memory": _wave(55, 10, 23),
            "temperature_c": [int(v) for v in _wave(66, 3, 40, lo=0, hi=200)],
            "power_w": _POWER[0],
            "total_energy_mj": _energy_mj(_POWER[0], 9.1e7),
            "clock_sm_mhz": 1980,
            "pcie_rx_kbps": 812000,
            "pcie_tx_kbps": 95000,
            # A bf16 training step: most SMs busy, tensor pipes doing the work.
            "gpm_graphics_active": _wave(90, 8, 17),
            "gpm_sm_active": _wave(78, 7, 17),
            "gpm_sm_occupancy": _wave(41, 4, 17),
            "gpm_tensor_active": _wave(62, 6, 17),
            "gpm_tensor_hmma_active": _wave(61, 6, 17),
            "gpm_fp32_active": _wave(7, 2, 17),
            "gpm_fp16_active": 1.5,
            "gpm_dram_active": _wave(36, 5, 23),
            "gpm_pcie_rx_mib_s": 793,
            "gpm_pcie_tx_mib_s": 93,
            "errors": {"fan_speed": "NotSupported"},
            "processes": [
                {"pid": 48211, "used_memory_mib": 63488, "sm_util": _wave(84, 8, 17)},
                {"pid": 48290, "used_memory_mib": 2048, "sm_util": 3},
            ],
        },
        {
            **_H200,
            "index": 1,
            "uuid": "GPU-0b7a4f3e-2f6c-4e1d-9a55-4f0d7c2e8a11",
            "name": "NVIDIA H200",
            "memory_used_mib": [25088 + int(v) for v in _wave(0, 600, 45, lo=-2000, hi=2000)],
            # Batch-1 serving: some kernel is always running (util ~100 %), yet few SMs work.
            "utilization_gpu": _wave(98, 2, 11),
            "utilization_memory": _wave(6, 2, 11),
            "temperature_c": [int(v) for v in _wave(51, 4, 30, lo=0, hi=200)],
            "power_w": _POWER[1],
            "total_energy_mj": _energy_mj(_POWER[1], 4.2e7),
            "clock_sm_mhz": 1755,
            "pcie_rx_kbps": 21000,
            "pcie_tx_kbps": 8000,
            "gpm_graphics_active": _wave(98, 2, 11),
            "gpm_sm_active": _wave(5, 1.5, 11),
            "gpm_sm_occupancy": _wave(1.8, 0.6, 11),
            "gpm_tensor_active": _wave(2.5, 1, 11),
            "gpm_tensor_hmma_active": _wave(2.5, 1, 11),
            "gpm_fp32_active": 0.8,
            "gpm_dram_active": _wave(3, 1, 11),
            "gpm_pcie_rx_mib_s": 20,
            "gpm_pcie_tx_mib_s": 8,
            "errors": {"fan_speed": "NotSupported"},
            "processes": [
                {"pid": 50102, "used_memory_mib": 18432, "sm_util": _wave(30, 22, 11)},
                {"pid": 3121, "used_memory_mib": 6144, "sm_util": _wave(4, 4, 7, lo=0)},
            ],
        },
        {
            **_H200,
            "index": 2,
            "uuid": "GPU-c3e1a9d2-77b4-4c0e-8f21-9d6a5b3c1e07",
            "name": "NVIDIA H200",
            "memory_used_mib": 123904,
            "utilization_gpu": _wave(97, 3, 9),
            "utilization_memory": _wave(71, 6, 9),
            "temperature_c": [int(v) for v in _wave(83, 2, 25, lo=0, hi=200)],
            "power_w": _POWER[2],
            "total_energy_mj": _energy_mj(_POWER[2], 1.3e8),
            "clock_sm_mhz": 1665,
            "pcie_rx_kbps": 45000,
            "pcie_tx_kbps": 388000,
            # LLM decoding: bound by DRAM bandwidth, tensor pipes mostly waiting for weights.
            "gpm_graphics_active": _wave(97, 3, 9),
            "gpm_sm_active": _wave(71, 4, 9),
            "gpm_sm_occupancy": _wave(24, 3, 9),
            "gpm_tensor_active": _wave(14, 3, 9),
            "gpm_tensor_hmma_active": _wave(14, 3, 9),
            "gpm_fp32_active": 4.0,
            "gpm_dram_active": _wave(89, 3, 9),
            "gpm_pcie_rx_mib_s": 44,
            "gpm_pcie_tx_mib_s": 379,
            "throttle_reasons": 0x4,
            "errors": {"fan_speed": "NotSupported"},
            "processes": [{"pid": 51234, "used_memory_mib": 122880, "sm_util": _wave(93, 4, 9)}],
        },
        {
            **_H200,
            "index": 3,
            "uuid": "GPU-9f2d6c41-0a3b-4e7d-b1c8-2e5f7a9d0c34",
            "name": "NVIDIA H200",
            "memory_used_mib": 6656,
            "temperature_c": 38,
            "power_w": _POWER[3],
            "total_energy_mj": _energy_mj(_POWER[3], 2.6e7),
            "clock_sm_mhz": 345,
            "pcie_rx_kbps": 0,
            "pcie_tx_kbps": 0,
            "throttle_reasons": 0x1,
            "persistence_mode": False,
            # Split into three MIG devices: NVML's utilization says nothing of a MIG GPU; GPM
            # measures each GPU instance (below).
            "mig_mode_current": True,
            "errors": {"fan_speed": "NotSupported", "utilization": "NotSupported"},
            "mig_instances": [
                {
                    "gi_id": 1,
                    "ci_id": 0,
                    "profile": "3g.71gb",
                    "uuid": "MIG-5c1e0a77-3b1d-5c2e-9f4a-0d8b7e6c5a41",
                    "memory_total_mib": 71424,
                    "memory_used_mib": 6656,
                    "sm_count": 60,
                    "slices": 3,
                    "gpm_graphics_active": _wave(44, 10, 13),
                    "gpm_sm_active": _wave(31, 8, 13),
                    "gpm_sm_occupancy": _wave(12, 3, 13),
                    "gpm_tensor_active": _wave(18, 5, 13),
                    "gpm_dram_active": _wave(15, 4, 13),
                    "processes": [
                        {"pid": 52001, "used_memory_mib": 4608},
                        # Nobody owns this one: an allocation left by a process that is gone.
                        {"pid": 999999, "used_memory_mib": 1536},
                    ],
                },
                {
                    "gi_id": 2,
                    "ci_id": 0,
                    "profile": "2g.35gb",
                    "uuid": "MIG-8e2b4c19-6a0f-5d3e-a1b7-4c9d2e8f6b02",
                    "memory_total_mib": 35584,
                    "memory_used_mib": 0,
                    "sm_count": 32,
                    "slices": 2,
                    "gpm_graphics_active": 0,
                    "gpm_sm_active": 0,
                    "gpm_sm_occupancy": 0,
                    "gpm_tensor_active": 0,
                    "gpm_dram_active": 0,
                },
                {
                    "gi_id": 3,
                    "ci_id": 0,
                    "profile": "1g.18gb",
                    "uuid": "MIG-a4d7f2e1-9c3b-5e8a-b6d0-7f1c3a5e9d23",
                    "memory_total_mib": 16896,
                    "memory_used_mib": 0,
                    "sm_count": 16,
                    "slices": 1,
                    "gpm_graphics_active": 0,
                    "gpm_sm_active": 0,
                    "gpm_sm_occupancy": 0,
                    "gpm_tensor_active": 0,
                    "gpm_dram_active": 0,
                },
            ],
        },
    ],
}


# --- Containers and processes.

_GIB_MIB = 1024
#: A fixed "now" for the demo, so ages and start times never drift between runs.
DEMO_EPOCH = 1_795_000_000.0


def _cid(seed: str) -> str:
    """A stable 64-hex container id."""
    import hashlib

    return hashlib.sha256(seed.encode()).hexdigest()


TRAINER = _cid("trainer-a")
BERT = _cid("bert-infer")
VLLM = _cid("vllm-server")
NOTEBOOK = _cid("notebook-gpu3")
ETL = _cid("etl-job")
REDIS = _cid("redis")
CONTAINERD = _cid("containerd-only")

#: The demo's processes: (pid, container id or None, in-container pid, user, command, rss GiB,
#: cpu %).
PROCESSES: tuple[tuple[int, str | None, int | None, str, str, float, float], ...] = (
    (48211, TRAINER, 1, "root", "python train.py --model llama-8b --bs 16", 31.5, 101.0),
    (48290, TRAINER, 57, "root", "python -m torch.utils.data.worker", 4.2, 38.0),
    (50102, BERT, 1, "1000", "python serve.py --model bert-large", 5.1, 24.0),
    (3121, None, None, "alice", "/opt/conda/bin/python -m jupyter lab", 2.3, 3.5),
    (51234, VLLM, 7, "root", "python3 -m vllm.entrypoints.openai.api_server", 12.8, 96.0),
    (52001, CONTAINERD, 1, "root", "/usr/bin/triton --model-repository=/models", 3.9, 12.0),
)


def _container(cid: str, name: str, image: str, status: str, **extra: Any) -> ContainerInfo:
    return ContainerInfo(id=cid, name=name, image=image, status=status, **extra)


DEMO_CONTAINERS: tuple[ContainerInfo, ...] = (
    _container(
        TRAINER,
        "llm-trainer-1",
        "nvcr.io/nvidia/pytorch:25.01-py3",
        "running",
        pid=48211,
        compose_project="llm",
        compose_service="trainer",
        gpu_request=("0",),
        gpu_request_via="device_requests",
        runtime="runc",
        nvidia_capabilities=("compute", "utility"),
        cuda_version="12.8.0",
        cuda_requirement="cuda>=12.8",
        started_at=DEMO_EPOCH - 6 * 3600,
        restart_count=0,
        memory_limit_bytes=256 * 2**30,
    ),
    _container(
        BERT,
        # A pod's container run by the kubelet's Docker shim: named by its pod spec, as
        # gputui names a real one (`k8s_bert_bert-infer-7d9c_serving_0` to `docker ps`).
        "bert",
        "ghcr.io/acme/bert-serve:2.3",
        "running",
        pid=50102,
        k8s_pod="bert-infer-7d9c",
        k8s_namespace="serving",
        policy_labels=(("gputui.owner", "bob"),),
        gpu_request=("1",),
        gpu_request_via="runtime",
        runtime="nvidia",
        nvidia_capabilities=("compute", "utility"),
        cuda_version="12.4.1",
        started_at=DEMO_EPOCH - 2 * 86400,
        restart_count=3,
        memory_limit_bytes=32 * 2**30,
    ),
    _container(
        VLLM,
        "vllm-server",
        "vllm/vllm-openai:v0.9.1",
        "running",
        pid=51234,
        gpu_request=("2",),
        gpu_request_via="device_requests",
        runtime="runc",
        nvidia_capabilities=("all",),
        cuda_version="12.8.1",
        started_at=DEMO_EPOCH - 50 * 60,
        restart_count=0,
        memory_limit_bytes=128 * 2**30,
    ),
    _container(
        NOTEBOOK,
        "notebook-gpu3",
        "jupyter/pytorch-notebook:cuda12-2025.06",
        "running",
        pid=50877,
        gpu_request=("3:1",),  # MIG device 1 of GPU 3 (--gpus device=3:1)
        gpu_request_via="device_requests",
        runtime="runc",
        nvidia_capabilities=("compute",),
        cuda_version="12.6.0",
        started_at=DEMO_EPOCH - 9 * 3600,
        restart_count=0,
        memory_limit_bytes=64 * 2**30,
    ),
    _container(
        ETL,
        "etl-nightly",
        "ghcr.io/acme/etl:1.14",
        "exited",
        exit_code=0,
        gpu_request="all",
        gpu_request_via="device_requests",
        runtime="runc",
        started_at=DEMO_EPOCH - 20 * 3600,
        restart_count=0,
    ),
    _container(
        REDIS,
        "redis",
        "redis:7.4-alpine",
        "running",
        pid=2210,
        compose_project="llm",
        compose_service="cache",
        runtime="runc",
        started_at=DEMO_EPOCH - 12 * 86400,
        restart_count=0,
        memory_limit_bytes=4 * 2**30,
    ),
)

# --- Owners: what each container's engine description says about the person behind it.

#: The demo host's users, uid -> name (``alice`` also runs a notebook on the host).
DEMO_USERS = {1001: "alice", 1002: "bob", 1003: "carol", 1004: "dave"}
#: The demo host's paths that the containers' evidence names, path -> owning uid.
DEMO_PATHS = {
    "/home/alice/llm": 1001,
    "/srv/models/carol": 1003,
    "/srv/cache/carol-hf": 1003,
    "/var/lib/vllm": 0,
}

#: Per container, what its inspect payload would carry about its owner: labels, bind-mount
#: sources, ``Config.User``. Each kind of evidence of the chain once: the compose project's
#: directory (alice's llm stack), a pod label (bob's serving pod: the kubelet copies a pod's
#: labels onto its containers), bind mounts (carol's models, a low-confidence guess), a
#: numeric ``--user`` (dave's notebook), nothing at all (the nightly ETL job: unknown).
_OWNER_EVIDENCE: dict[str, tuple[dict[str, str], tuple[str, ...], str | None]] = {
    TRAINER: (
        {
            "com.docker.compose.project": "llm",
            "com.docker.compose.service": "trainer",
            COMPOSE_DIR_LABEL: "/home/alice/llm",
        },
        ("/home/alice/llm",),
        None,
    ),
    BERT: (
        {
            "io.kubernetes.pod.name": "bert-infer-7d9c",
            "io.kubernetes.pod.namespace": "serving",
            "io.kubernetes.container.name": "bert",
            "gputui.owner": "bob",
        },
        (),
        None,
    ),
    VLLM: ({}, ("/srv/models/carol", "/srv/cache/carol-hf", "/var/lib/vllm"), None),
    NOTEBOOK: ({}, (), "1004:1004"),
    ETL: ({}, (), None),
    REDIS: (
        {
            "com.docker.compose.project": "llm",
            "com.docker.compose.service": "cache",
            COMPOSE_DIR_LABEL: "/home/alice/llm",
        },
        (),
        None,
    ),
}


class DemoHostLookup(HostLookup):
    """The demo host's file owners and user names (:data:`DEMO_PATHS`, :data:`DEMO_USERS`).

    The demo's paths and users are not this machine's: the owner chain reads them from here.
    """

    def path_uid(self, path: str) -> int | None:
        """The uid owning a demo path; None for a path the demo host does not have."""
        return DEMO_PATHS.get(path)

    def user_name(self, uid: int) -> str | None:
        """The demo host's name for ``uid``."""
        return "root" if uid == 0 else DEMO_USERS.get(uid)

    def user_uid(self, name: str) -> int | None:
        """The demo host's uid for user ``name``."""
        if name == "root":
            return 0
        return next((uid for uid, user in DEMO_USERS.items() if user == name), None)


def demo_owners(owner_labels: Sequence[str] = ()) -> dict[str, Owner]:
    """Each demo container's owner, through the owner chain the Docker source uses.

    Args:
        owner_labels: The config's ``[owners] labels`` (read before ``gputui.owner``).

    Returns:
        Container id -> its owner (with its confidence, evidence and hint).
    """
    resolver = OwnerResolver(owner_label_keys(owner_labels), lookup=DemoHostLookup())
    owners = {}
    for cid, (labels, binds, user) in _OWNER_EVIDENCE.items():
        facts = OwnerFacts(
            labels=owner_facts_from_labels(
                labels, resolver.label_keys, text=lambda v: v if isinstance(v, str) else None
            ),
            compose_dir=labels.get(COMPOSE_DIR_LABEL),
            bind_sources=binds,
            config_user=user,
        )
        owners[cid] = resolver.resolve(facts)
    return owners


DEMO_ENGINE = EngineInfo(
    endpoint="unix:///var/run/docker.sock",
    context="default",
    server_version="28.2.2",
    api_version="1.50",
    runtimes=("io.containerd.runc.v2", "nvidia", "runc"),
    default_runtime="runc",
    cgroup_driver="systemd",
    cgroup_version="2",
    cdi_spec_dirs=("/etc/cdi", "/var/run/cdi"),
    host_memory_bytes=2 * 2**40,
)

#: The PCI bus of each demo GPU, as nvidia-smi prints it.
_BUS = {0: "18", 1: "2A", 2: "3A", 3: "5D"}
#: The column widths of nvidia-smi's GPU table, between the bars (those of a 580 driver).
_GPU_COLUMNS = (41, 24, 22)
_PROCESS_WIDTH = sum(_GPU_COLUMNS) + 2  # the same outer width as the GPU table
SIMULATED_NOTE = "(simulated: demo machine; nvidia-smi was not run)"


def _cells(*cells: tuple[str, str]) -> str:
    """One row of the GPU table: each cell (left text, right text) filled to its column."""
    out = []
    for (left, right), width in zip(cells, _GPU_COLUMNS, strict=True):
        out.append(left + " " * max(1, width - len(left) - len(right)) + right)
    return "|" + "|".join(out) + "|"


def _process_row(text: str) -> str:
    return "|" + text.ljust(_PROCESS_WIDTH)[:_PROCESS_WIDTH] + "|"


def demo_smi(container_id: str, step: int) -> str:
    """The nvidia-smi table a container of the demo machine would print at refresh ``step``.

    Only the container's GPUs (those it requested or runs processes on) and its own processes,
    with their in-container PIDs and GPU memory, as nvidia-smi in its PID namespace shows them.

    Args:
        container_id: A demo container's id.
        step: The refresh whose figures to show (the scenario's time-series position).

    Returns:
        The table, its first line saying that it is simulated.
    """
    from gputui.collect.standins.scenario_format import at

    info = next(c for c in DEMO_CONTAINERS if c.id == container_id)
    mine = {p[0]: p for p in PROCESSES if p[1] == container_id}
    gpus: dict[int, dict[str, Any]] = {g["index"]: g for g in DEMO_SCENARIO["gpus"]}
    indexes = (
        {int(r.partition(":")[0]) for r in info.gpu_request or () if r.partition(":")[0].isdigit()}
        if isinstance(info.gpu_request, tuple)
        else set(gpus)
        if info.gpu_request == "all"
        else set()
    )
    rows: list[tuple[int, int, str, int]] = []  # (gpu, in-container pid, name, MiB)
    for index, gpu in gpus.items():
        for proc in gpu.get("processes", ()):
            row = mine.get(proc["pid"])
            if row is None:
                continue
            indexes.add(index)
            name = row[4].split()[0].rsplit("/", 1)[-1]
            rows.append(
                (index, row[2] or proc["pid"], name, int(at(proc["used_memory_mib"], step)))
            )
    bar = "+" + "+".join("-" * w for w in _GPU_COLUMNS) + "+"
    lines = [
        SIMULATED_NOTE,
        "+" + "-" * _PROCESS_WIDTH + "+",
        _process_row(
            " NVIDIA-SMI 580.159.04               Driver Version: 580.159.04     CUDA Version: 13.0"
        ),
        bar,
        _cells(
            (" GPU  Name", "Persistence-M "), (" Bus-Id", "Disp.A "), ("", "Volatile Uncorr. ECC ")
        ),
        _cells(
            (" Fan  Temp   Perf", "Pwr:Usage/Cap "),
            ("", "Memory-Usage "),
            ("", "GPU-Util  Compute M. "),
        ),
        "|" + "|".join("=" * w for w in _GPU_COLUMNS) + "|",
    ]
    for index in sorted(indexes):
        gpu = gpus[index]
        used = int(at(gpu["memory_used_mib"], step))
        persistence = "On" if gpu.get("persistence_mode", True) else "Off"
        lines += [
            _cells(
                (f" {index:>3}  {gpu['name']}", f"{persistence}  "),
                (f"   00000000:{_BUS.get(index, '00')}:00.0", "Off "),
                ("", "0 "),
            ),
            _cells(
                (
                    f" N/A   {int(at(gpu['temperature_c'], step))}C    P0",
                    f"{at(gpu['power_w'], step):.0f}W /  700W ",
                ),
                ("", f"{used}MiB / 143771MiB "),
                ("", f"{at(gpu['utilization_gpu'], step):.0f}%      Default "),
            ),
            bar,
        ]
    lines += [
        "",
        "+" + "-" * _PROCESS_WIDTH + "+",
        _process_row(" Processes:"),
        _process_row(
            "  GPU   GI   CI              PID   Type   Process name".ljust(_PROCESS_WIDTH - 11)
            + "GPU Memory "
        ),
        "|" + "=" * _PROCESS_WIDTH + "|",
    ]
    if not rows:
        lines.append(_process_row("  No running processes found"))
    for index, pid, name, mib in sorted(rows):
        memory = f"{mib}MiB "
        head = f"  {index:>3}   N/A  N/A  {pid:>15}      C   {name[:32]:<32}"
        lines.append(_process_row(head + memory.rjust(_PROCESS_WIDTH - len(head))))
    lines.append("+" + "-" * _PROCESS_WIDTH + "+")
    return "\n".join(lines) + "\n"


#: Per running container: (CPU % around which it moves, CPU quota in CPUs or None, share of
#: scheduler periods throttled, memory used in GiB). The bert pod is held at its 4-CPU quota.
_USAGE: dict[str, tuple[float, float | None, float, float]] = {
    TRAINER: (140.0, None, 0.0, 48.0),
    BERT: (395.0, 4.0, 0.35, 29.5),
    VLLM: (101.0, None, 0.0, 14.2),
    NOTEBOOK: (0.4, 2.0, 0.0, 1.1),
    REDIS: (2.5, 1.0, 0.0, 0.3),
}


class DemoContainers(ContainerSource):
    """Containers of the simulated machine, as a Docker engine would list them.

    Attributes:
        name: ``docker``: the simulated machine runs Docker.
    """

    name = "docker"

    def __init__(self, owner_labels: Sequence[str] = ()) -> None:
        self._step = 0
        self._owner_labels = tuple(owner_labels)
        self._owners: dict[str, Owner] | None = None

    def capabilities(self) -> ContainerCapabilities:
        """A simulated nvidia-smi only: no terminal, no logs, no lifecycle."""
        return ContainerCapabilities(exec=True, note="the demo's containers are simulated")

    def read(self) -> ContainerReading:
        """The fixed container set, with CPU, memory and throttling that move a little."""
        self._step += 1
        step = self._step
        if self._owners is None:  # once, as the Docker source resolves each at its inspect
            self._owners = demo_owners(self._owner_labels)
        containers = []
        for listed in DEMO_CONTAINERS:
            info = replace(listed, owner=self._owners.get(listed.id))
            usage = _USAGE.get(info.id)
            if usage is None or not info.running:
                containers.append(info)
                continue
            cpu, quota, throttled, mem_gib = usage
            periods = 10 * step  # 100 ms CFS periods at 1 Hz
            containers.append(
                replace(
                    info,
                    # Like docker stats: no CPU figure until there are two samples.
                    cpu_percent=round(cpu * (1 + 0.05 * math.sin(step / 4)), 1)
                    if step > 1
                    else None,
                    memory_used_bytes=int(mem_gib * 2**30 * (1 + 0.01 * math.sin(step / 9))),
                    cpu_quota_cpus=quota,
                    cpu_periods=periods if quota else None,
                    cpu_throttled_periods=int(periods * throttled) if quota else None,
                    cpu_throttled_seconds=round(periods * throttled * 0.04, 2) if quota else None,
                )
            )
        return ContainerReading(
            status=SourceStatus("docker", ok=True),
            containers=tuple(containers),
            engine=DEMO_ENGINE,
        )

    def interactive_exec_argv(self, container_id: str, argv: Sequence[str]) -> list[str] | None:
        """None: a simulated container has no terminal to take over."""
        return None

    def exec(self, container_id: str, argv: Sequence[str], timeout_s: float) -> ExecResult:
        """Pretend to run ``argv``: the nvidia-smi table of this container's own GPUs and processes.

        Its first line says that it is simulated.
        """
        info = next((c for c in DEMO_CONTAINERS if c.id == container_id), None)
        if info is None:
            return ExecResult(tuple(argv), None, error=f"no such container: {container_id[:12]}")
        if not info.running:
            return ExecResult(
                tuple(argv), None, error=f"container {info.name} is not running ({info.status})"
            )
        if info.nvidia_capabilities is None or not {"utility", "all"} & set(
            info.nvidia_capabilities
        ):
            return ExecResult(
                tuple(argv),
                127,
                stderr='exec: "nvidia-smi": executable file not found in $PATH',
                duration_s=0.04,
                error=(
                    f"{argv[0]} not found in container {info.name}: it was started without "
                    "--gpus / NVIDIA_DRIVER_CAPABILITIES=utility"
                ),
            )
        # The figures of the latest refresh (the scenario stands at the same step as this source).
        text = demo_smi(container_id, max(0, self._step - 1))
        return ExecResult(tuple(argv), 0, stdout=text, duration_s=0.21)

    def close(self) -> None:
        """Nothing to release."""


#: How long after its container started each demo process did (seconds); a process without a
#: container (or in one the engine does not list), its age. No process is older than its
#: container, and no two are the same age.
_PROCESS_DELAY = {48211: 95, 48290: 2 * 3600 + 14 * 60, 50102: 41, 51234: 28}
_PROCESS_AGE = {3121: 3 * 3600 + 12 * 60, 52001: 4 * 3600 + 47 * 60}


def process_start(pid: int, cid: str | None) -> float:
    """A demo process's start time, consistent with its container's."""
    started = {c.id: c.started_at for c in DEMO_CONTAINERS}.get(cid or "")
    if started is not None and pid in _PROCESS_DELAY:
        return started + _PROCESS_DELAY[pid]
    return DEMO_EPOCH - _PROCESS_AGE.get(pid, 3600)


class DemoProcesses:
    """Host facts for the simulated machine's PIDs (a :class:`ProcessSource`)."""

    def __init__(self) -> None:
        self._step = 0

    def read(self, pids: Iterable[int]) -> dict[int, ProcessInfo]:
        """Facts for the demo PIDs; anything else does not exist."""
        table = {p[0]: p for p in PROCESSES}
        self._step += 1
        out: dict[int, ProcessInfo] = {}
        for pid in pids:
            row = table.get(pid)
            if row is None:
                out[pid] = ProcessInfo(pid, exists=False)
                continue
            _, cid, cpid, user, command, rss_gib, cpu = row
            wobble = 1.0 + 0.1 * math.sin(self._step / 3 + pid)
            out[pid] = ProcessInfo(
                pid=pid,
                command=command,
                name=command.split()[0].rsplit("/", 1)[-1],
                user=user,
                cpu_percent=round(cpu * wobble, 1) if self._step > 1 else None,
                rss_bytes=int(rss_gib * 2**30),
                start_time=process_start(pid, cid),
                container_id=cid,
                runtime=None if cid is None else ("containerd" if cid == CONTAINERD else "docker"),
                pod_uid=None,
                container_pid=cpid if cid else pid,
            )
        return out

    def prime_cpu(self) -> int:
        """Nothing to sample: the demo's CPU figures are made up."""
        return 0

    def host_stats(self) -> HostStats:
        """A busy 2-socket host."""
        return HostStats(
            cpu_percent=round(38.0 + 6 * math.sin(self._step / 5), 1) if self._step > 1 else None,
            cpu_count=224,
            load_avg=(71.2, 69.8, 66.1),
            memory_used_bytes=812 * 2**30,
            memory_total_bytes=2 * 2**40,
            swap_used_bytes=0,
            swap_total_bytes=0,
        )

    def visibility(self) -> Visibility:
        """The demo runs "on the host"."""
        return Visibility(host_pid_namespace=True, private_cgroup_namespace=False)

    def send_signal(self, pid: int, signum: int, start_time: float | None) -> str | None:
        """Signals are not sent in the demo; say so."""
        return f"demo mode: signal {signum} not sent to PID {pid}"

    def parent_chain(
        self, pid: int, start_time: float | None
    ) -> tuple[tuple[ParentLink, ...], str | None]:
        """None read: the demo's PIDs are not this machine's."""
        return (), "not read: a demo's PIDs are not this machine's"


def demo_clock(start: float = DEMO_EPOCH, step: float = 1.0) -> Any:
    """A clock that advances ``step`` seconds per call, for deterministic demo timestamps."""
    state = {"now": start - step}

    def clock() -> float:
        state["now"] += step
        return state["now"]

    return clock


def wall_clock() -> float:
    """The real wall clock (the default outside tests and screenshots)."""
    return time.time()
