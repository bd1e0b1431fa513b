"""Pure parser tests: inspect payloads, stats payloads, cgroup files, error texts."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from gputui.collect.docker import parse as dp
from gputui.collect.linux import cgroup_usage as cg
from tests.support.docker_stats import engine_cpu_percent, engine_memory

CID = "a2e6557fca65b70eb4eadef3eaafbd69c8f4484ae776eb1655cba8272992604d"


def inspect_payload(**overrides: Any) -> dict[str, Any]:
    """A trimmed real inspect payload (dockerd 20.10.24) with per-test overrides."""
    data: dict[str, Any] = {
        "Id": CID,
        "Name": "/trainer-a",
        "Image": "sha256:6b54e0d3cef2",
        "RestartCount": 2,
        "State": {
            "Status": "running",
            "Running": True,
            "Pid": 16494,
            "OOMKilled": False,
            "ExitCode": 0,
            "StartedAt": "2025-11-29T16:27:01.123456789Z",
            "FinishedAt": "0001-01-01T00:00:00Z",
        },
        "Config": {
            "Image": "nvcr.io/nvidia/pytorch:24.05-py3",
            "Env": [
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "SECRET=hunter2",
                "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
                "CUDA_VERSION=12.4.1",
                "NVIDIA_REQUIRE_CUDA=cuda>=12.4",
            ],
            "Labels": {
                "com.docker.compose.project": "ml",
                "com.docker.compose.service": "trainer",
                "io.kubernetes.pod.name": "trainer-0",
                "io.kubernetes.pod.namespace": "research",
            },
        },
        "HostConfig": {"Runtime": "runc", "Devices": [], "DeviceRequests": None},
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return data


def test_parse_inspect_basic_fields() -> None:
    info = dp.parse_inspect(inspect_payload())
    assert info.id == CID
    assert info.name == "trainer-a"
    assert info.image == "nvcr.io/nvidia/pytorch:24.05-py3"
    assert info.status == "running"
    assert info.running
    assert info.pid == 16494
    assert (info.compose_project, info.compose_service) == ("ml", "trainer")
    assert (info.k8s_pod, info.k8s_namespace) == ("trainer-0", "research")
    assert info.nvidia_capabilities == ("compute", "utility")
    assert info.cuda_version == "12.4.1"
    assert info.cuda_requirement == "cuda>=12.4"
    assert info.restart_count == 2
    assert info.oom_killed is False
    assert info.exit_code is None  # running: an exit code would be stale
    assert info.started_at == pytest.approx(1764433621.123456789)
    assert info.gpu_request is None
    assert info.gpu_request_via is None
    assert info.runtime == "runc"


def test_parse_inspect_never_keeps_other_env_values() -> None:
    info = dp.parse_inspect(inspect_payload())
    text = repr(info)
    assert "hunter2" not in text
    assert "SECRET" not in text
    assert "/usr/local/sbin" not in text


def test_gpu_env_drops_everything_else() -> None:
    env = ["SECRET=hunter2", "NVIDIA_VISIBLE_DEVICES=all", "NOEQUALS", "CUDA_VERSION=12.4.1"]
    assert dp.gpu_env(env) == {"NVIDIA_VISIBLE_DEVICES": "all", "CUDA_VERSION": "12.4.1"}
    assert dp.gpu_env(None) == {}


def test_exited_container_keeps_exit_code_and_no_pid() -> None:
    info = dp.parse_inspect(
        inspect_payload(
            State={"Status": "exited", "Running": False, "Pid": 0, "ExitCode": 3, "OOMKilled": True}
        )
    )
    assert info.status == "exited"
    assert not info.running
    assert info.pid is None
    assert info.exit_code == 3
    assert info.oom_killed is True


def req(driver: str, count: int, ids: list[str] | None, caps: Any = None) -> dict[str, Any]:
    return {"Driver": driver, "Count": count, "DeviceIDs": ids, "Capabilities": caps}


GPU = [["gpu"]]


@pytest.mark.parametrize(
    ("requests", "expected", "via"),
    [
        # docker run --gpus all
        ([req("", -1, None, GPU)], "all", "device_requests"),
        # docker run --gpus '"device=0,2"'
        ([req("", 0, ["0", "2"], GPU)], ("0", "2"), "device_requests"),
        # docker run --gpus 2: the engine's nvidia driver hands out the first N indexes
        ([req("", 2, None, GPU)], ("0", "1"), "device_requests"),
        # an explicit nvidia driver with a UUID
        ([req("nvidia", 0, ["GPU-1234"])], ("GPU-1234",), "device_requests"),
        # docker run --device nvidia.com/gpu=all (CDI)
        ([req("cdi", 0, ["nvidia.com/gpu=all"])], "all", "cdi"),
        ([req("cdi", 0, ["nvidia.com/gpu=0", "nvidia.com/gpu=1"])], ("0", "1"), "cdi"),
        # a CDI request for another vendor's device is no GPU request
        ([req("cdi", 0, ["vendor.com/fpga=0"])], None, None),
        # a non-GPU device request
        ([req("other", 1, None, [["fpga"]])], None, None),
        (None, None, None),
        ([], None, None),
    ],
)
def test_device_requests(requests: Any, expected: Any, via: str | None) -> None:
    info = dp.parse_inspect(inspect_payload(HostConfig={"DeviceRequests": requests}))
    assert info.gpu_request == expected
    assert info.gpu_request_via == via


def test_devices_flag_gives_gpu_paths() -> None:
    devices = [
        {
            "PathOnHost": "/dev/nvidia1",
            "PathInContainer": "/dev/nvidia1",
            "CgroupPermissions": "rwm",
        },
        {"PathOnHost": "/dev/nvidiactl", "PathInContainer": "/dev/nvidiactl"},
        {"PathOnHost": "/dev/nvidia-uvm", "PathInContainer": "/dev/nvidia-uvm"},
        {"PathOnHost": "/dev/fuse", "PathInContainer": "/dev/fuse"},
    ]
    info = dp.parse_inspect(inspect_payload(HostConfig={"Devices": devices}))
    # every NVIDIA node is kept (CUDA needs nvidiactl/uvm too); only numbered ones select GPUs
    assert info.gpu_device_paths == ("/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm")
    assert info.gpu_request == ("1",)
    assert info.gpu_request_via == "devices"


@pytest.mark.parametrize(
    ("runtime", "value", "expected", "via"),
    [
        ("nvidia", "all", "all", "runtime"),
        ("nvidia", "0,1", ("0", "1"), "runtime"),
        ("runc", "0,1", ("0", "1"), "env"),
        ("runc", " GPU-a , GPU-b ", ("GPU-a", "GPU-b"), "env"),
        ("nvidia", "none", None, None),
        ("nvidia", "void", None, None),
        ("runc", "", None, None),
    ],
)
def test_visible_devices_env(runtime: str, value: str, expected: Any, via: str | None) -> None:
    payload = inspect_payload(HostConfig={"Runtime": runtime})
    payload["Config"]["Env"] = [f"NVIDIA_VISIBLE_DEVICES={value}", "SECRET=hunter2"]
    info = dp.parse_inspect(payload)
    assert info.runtime == runtime
    assert info.gpu_request == expected
    assert info.gpu_request_via == via


def test_control_nodes_alone_request_no_gpu() -> None:
    devices = [{"PathOnHost": "/dev/nvidiactl"}, {"PathOnHost": "/dev/nvidia-uvm"}]
    info = dp.parse_inspect(inspect_payload(HostConfig={"Devices": devices}))
    assert info.gpu_device_paths == ("/dev/nvidiactl", "/dev/nvidia-uvm")
    assert (info.gpu_request, info.gpu_request_via) == (None, None)


def test_device_requests_win_over_env() -> None:
    payload = inspect_payload(
        HostConfig={"DeviceRequests": [{"Driver": "", "Count": -1, "Capabilities": [["gpu"]]}]}
    )
    payload["Config"]["Env"] = ["NVIDIA_VISIBLE_DEVICES=0"]
    info = dp.parse_inspect(payload)
    assert (info.gpu_request, info.gpu_request_via) == ("all", "device_requests")


def test_capabilities() -> None:
    assert dp.parse_capabilities(None) is None
    assert dp.parse_capabilities("") == ()
    assert dp.parse_capabilities("all") == ("all",)
    assert dp.parse_capabilities("compute, utility,video") == ("compute", "utility", "video")


def test_missing_sections_do_not_crash() -> None:
    info = dp.parse_inspect({"Id": CID, "Name": "/x"})
    assert info.status == "unknown"
    assert info.image == ""
    assert info.nvidia_capabilities is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2025-11-29T16:27:01Z", 1764433621.0),
        ("2025-11-29T16:27:01.5Z", 1764433621.5),
        ("2025-11-29T17:27:01.25+01:00", 1764433621.25),
        ("0001-01-01T00:00:00Z", None),
        ("", None),
        (None, None),
        ("garbage", None),
    ],
)
def test_parse_docker_time(text: str | None, expected: float | None) -> None:
    result = dp.parse_docker_time(text)
    if expected is None:
        assert result is None
    else:
        assert result == pytest.approx(expected)


# --- stats payloads: the docker CLI formulas ---------------------------------------------

# Captured from dockerd 20.10.24 (cgroup v1) for a container running one busy loop, --memory 64m.
STATS_V1: dict[str, Any] = {
    "cpu_stats": {
        "cpu_usage": {"total_usage": 2028084126, "percpu_usage": [2015101633, 12982493]},
        "system_cpu_usage": 859380000000,
        "online_cpus": 2,
    },
    "precpu_stats": {
        "cpu_usage": {"total_usage": 1029107123, "percpu_usage": [1016124630, 12982493]},
        "system_cpu_usage": 857390000000,
        "online_cpus": 2,
    },
    "memory_stats": {
        "usage": 364544,
        "stats": {"cache": 0, "inactive_file": 0, "total_inactive_file": 0, "total_cache": 0},
        "limit": 67108864,
    },
}

# cgroup v2 shape (Engine API ContainerStats): no percpu_usage, inactive_file only.
STATS_V2: dict[str, Any] = {
    "cpu_stats": {
        "cpu_usage": {"total_usage": 4_000_000_000},
        "system_cpu_usage": 120_000_000_000,
        "online_cpus": 4,
    },
    "precpu_stats": {
        "cpu_usage": {"total_usage": 2_000_000_000},
        "system_cpu_usage": 116_000_000_000,
        "online_cpus": 4,
    },
    "memory_stats": {
        "usage": 50_000_000,
        "stats": {"inactive_file": 20_000_000, "active_file": 5_000_000, "anon": 25_000_000},
        "limit": 1_000_000_000,
    },
}


def _cpu_deltas(stats: dict[str, Any]) -> tuple[int, int, int]:
    """(container, host, online CPUs) of a payload: what gputui takes from the cgroup files."""
    cur, pre = stats["cpu_stats"], stats["precpu_stats"]
    return (
        cur["cpu_usage"]["total_usage"] - pre["cpu_usage"]["total_usage"],
        cur["system_cpu_usage"] - pre["system_cpu_usage"],
        cur["online_cpus"],
    )


def test_cpu_percent_v1_payload() -> None:
    expected = (2028084126 - 1029107123) / (859380000000 - 857390000000) * 2 * 100
    assert cg.cpu_percent(*_cpu_deltas(STATS_V1)) == pytest.approx(expected)
    assert cg.cpu_percent(*_cpu_deltas(STATS_V1)) == pytest.approx(100.4, abs=0.1)
    # the engine tests' reference reads the same figure from the whole payload
    assert engine_cpu_percent(STATS_V1) == pytest.approx(expected)


def test_cpu_percent_v2_payload() -> None:
    # 2 s of CPU over 4 s of host CPU time on 4 CPUs = 2 cores busy = 200 %
    assert cg.cpu_percent(*_cpu_deltas(STATS_V2)) == pytest.approx(200.0)
    assert engine_cpu_percent(STATS_V2) == pytest.approx(200.0)


def test_reference_cpu_percent_falls_back_to_percpu_length() -> None:
    payload = {
        "cpu_stats": {
            "cpu_usage": {"total_usage": 200, "percpu_usage": [1, 1, 1]},
            "system_cpu_usage": 400,
        },
        "precpu_stats": {"cpu_usage": {"total_usage": 100}, "system_cpu_usage": 100},
    }
    assert engine_cpu_percent(payload) == pytest.approx(100 / 300 * 3 * 100)


def test_cpu_percent_needs_a_previous_sample() -> None:
    # The first streamed sample and one-shot samples lack precpu system_cpu_usage.
    first = {
        "cpu_stats": STATS_V1["cpu_stats"],
        "precpu_stats": {"cpu_usage": {"total_usage": 0}, "throttling_data": {}},
    }
    assert engine_cpu_percent(first) is None
    assert cg.cpu_percent(10, 0, 2) is None
    assert cg.cpu_percent(-1, 10, 2) is None
    assert cg.cpu_percent(0, 10, 2) == 0.0


def test_memory_of_stats_payloads() -> None:
    # gputui's formula on the payload's cgroup figures, and the engine tests' reference on the
    # whole payload, give the docker CLI's numbers for both cgroup versions.
    v1, v2 = STATS_V1["memory_stats"], STATS_V2["memory_stats"]
    assert cg.memory_used(v1["usage"], v1["stats"], "1") == 364544
    assert cg.memory_used(v2["usage"], v2["stats"], "2") == 30_000_000
    assert engine_memory(STATS_V1) == (364544, 67108864)
    assert engine_memory(STATS_V2) == (30_000_000, 1_000_000_000)


def test_memory_used_subtracts_only_when_smaller() -> None:
    assert cg.memory_used(100, {"total_inactive_file": 30}, "1") == 70
    assert cg.memory_used(100, {"inactive_file": 30}, "1") == 100  # v1 uses the total_ key
    assert cg.memory_used(100, {"inactive_file": 30}, "2") == 70
    assert cg.memory_used(100, {"inactive_file": 300}, "2") == 100
    assert cg.memory_used(None, {}, "2") is None


@pytest.mark.parametrize(
    ("raw", "host", "expected"),
    [
        ("67108864\n", 25_000_000_000, 67108864),
        ("9223372036854771712\n", 25_000_000_000, 25_000_000_000),  # v1 unlimited
        ("max\n", 25_000_000_000, 25_000_000_000),  # v2 unlimited
        ("max\n", None, None),
        (None, 1000, 1000),
    ],
)
def test_memory_limit(raw: str | None, host: int | None, expected: int | None) -> None:
    assert cg.memory_limit(raw, host) == expected


def test_parse_keyed() -> None:
    text = "usage_usec 123456\nuser_usec 100000\nsystem_usec 23456\nnr_periods 0\nbogus\n"
    assert cg.parse_keyed(text) == {
        "usage_usec": 123456,
        "user_usec": 100000,
        "system_usec": 23456,
        "nr_periods": 0,
    }


def test_parse_proc_stat_matches_engine() -> None:
    text = (
        "cpu  2976 0 1269 55204 293 0 78 11 0 0\n"
        "cpu0 1214 0 632 27922 138 0 11 3 0 0\n"
        "cpu1 1761 0 637 27281 154 0 67 7 0 0\n"
        "intr 1 2 3\nctxt 5\n"
    )
    total, online = cg.parse_proc_stat(text, 100) or (0, 0)
    # first seven fields only (steal and guest are left out, as moby does)
    assert total == (2976 + 0 + 1269 + 55204 + 293 + 0 + 78) * 10_000_000
    assert online == 2
    assert cg.parse_proc_stat("intr 1\n", 100) is None


PROC_CGROUP_V1 = "\n".join(
    [
        f"9:name=systemd:/docker/{CID}",
        f"4:memory:/docker/{CID}",
        f"2:cpu,cpuacct:/docker/{CID}",
        f"0::/docker/{CID}",
    ]
)


def test_cgroup_path_from_proc() -> None:
    assert cg.cgroup_path_from_proc(PROC_CGROUP_V1, "memory") == f"/docker/{CID}"
    assert cg.cgroup_path_from_proc(PROC_CGROUP_V1, "cpuacct") == f"/docker/{CID}"
    assert cg.cgroup_path_from_proc(PROC_CGROUP_V1, None) == f"/docker/{CID}"
    assert cg.cgroup_path_from_proc(PROC_CGROUP_V1, "blkio") is None
    # colons inside the path (cri-containerd) survive
    cri = "8:memory:/kubepods.slice/pod.slice:cri-containerd:abc"
    assert cg.cgroup_path_from_proc(cri, "memory") == "/kubepods.slice/pod.slice:cri-containerd:abc"
    # a private cgroup namespace gives relative paths: unusable against the host root
    assert cg.cgroup_path_from_proc("0::../../docker-x.scope", None) is None


def test_default_cgroup_paths() -> None:
    assert cg.default_cgroup_paths(CID, "cgroupfs", None) == [f"/docker/{CID}"]
    assert cg.default_cgroup_paths(CID, None, "/custom/") == [f"/custom/{CID}"]
    assert cg.default_cgroup_paths(CID, "systemd", None) == [f"/system.slice/docker-{CID}.scope"]


# --- engine facts ---------------------------------------------------------------------------


def test_parse_engine() -> None:
    info = {
        "Runtimes": {"runc": {"path": "runc"}, "nvidia": {"path": "nvidia-container-runtime"}},
        "DefaultRuntime": "runc",
        "CgroupDriver": "systemd",
        "CgroupVersion": "2",
        "CDISpecDirs": ["/etc/cdi", "/var/run/cdi"],
        "MemTotal": 1024,
    }
    engine = dp.parse_engine(info, {"Version": "27.3.1"}, "unix:///x.sock", "default", "1.47")
    assert engine.runtimes == ("nvidia", "runc")
    assert engine.cdi_spec_dirs == ("/etc/cdi", "/var/run/cdi")
    assert (engine.cgroup_driver, engine.cgroup_version) == ("systemd", "2")
    assert engine.server_version == "27.3.1"
    assert engine.host_memory_bytes == 1024
    older = dp.parse_engine({"CgroupVersion": "1"}, {}, None, None, None)
    assert older.cdi_spec_dirs is None  # key absent: engine too old to say
    assert dp.parse_engine({"CDISpecDirs": []}, {}, None, None, None).cdi_spec_dirs == ()


# --- errors ---------------------------------------------------------------------------------

# Exact texts from the docker SDK (research notes §3.1 and measured here).
PERMISSION = (
    "DockerException: Error while fetching server API version: ('Connection aborted.', "
    "PermissionError(13, 'Permission denied'))"
)
NO_SOCKET = (
    "DockerException: Error while fetching server API version: ('Connection aborted.', "
    "FileNotFoundError(2, 'No such file or directory'))"
)
REFUSED = (
    "DockerException: Error while fetching server API version: HTTPConnectionPool("
    "host='127.0.0.1', port=1): Max retries exceeded with url: /version (Caused by "
    "NewConnectionError(\"HTTPConnection(host='127.0.0.1', port=1): Failed to establish a new "
    'connection: [Errno 111] Connection refused"))'
)


def test_classify_permission() -> None:
    kind, fix = dp.classify_connect_error(PERMISSION)
    assert kind == "permission"
    assert "docker group" in fix


def test_classify_missing_socket() -> None:
    kind, fix = dp.classify_connect_error(NO_SOCKET)
    assert kind == "not_found"
    assert "DOCKER_HOST" in fix
    assert "start" in fix


def test_classify_refused_and_other() -> None:
    assert dp.classify_connect_error(REFUSED)[0] == "unreachable"
    assert dp.classify_connect_error("ContextNotFound: Context 'x' not found")[0] == "not_found"
    assert dp.classify_connect_error("something odd")[0] == "error"


def test_exec_error() -> None:
    oci = (
        "OCI runtime exec failed: exec failed: unable to start container process: exec: "
        '"nvidia-smi": executable file not found in $PATH: unknown'
    )
    message = dp.exec_error(["nvidia-smi"], 126, oci)
    assert message is not None
    assert "started without --gpus" in message
    assert dp.exec_error(["/usr/bin/nvidia-smi", "-L"], 127, "") is not None
    assert dp.exec_error(["htop"], 127, "") == "htop not found in the container"
    assert dp.exec_error(["nvidia-smi"], 0, "ok") is None
    assert dp.exec_error(["nvidia-smi"], 9, "NVML: Unknown Error") is None


# --- cgroup files read by DockerSource (fake trees; no engine needed) -----------------------


def _write(path: Any, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _source_on_tree(tmp_path: Any, version: str, driver: str) -> Any:
    from gputui.collect.docker.endpoint import Endpoint as _Endpoint
    from gputui.collect.docker.source import DockerSource
    from gputui.model.containers import EngineInfo

    src = DockerSource(cgroup_root=tmp_path / "cg", proc_root=tmp_path / "proc")
    src._engine = EngineInfo(cgroup_version=version, cgroup_driver=driver, host_memory_bytes=8000)
    src._endpoint = _Endpoint("unix:///run/docker.sock", False, None, explicit=True)
    return src


def _proc_stat(total_ticks: int) -> str:
    # user=total, the other six fields 0; two online CPUs
    return f"cpu  {total_ticks} 0 0 0 0 0 0 0 0 0\ncpu0 1 0 0 0 0 0 0\ncpu1 1 0 0 0 0 0 0\n"


def test_cgroup_v2_systemd_tree(tmp_path: Any) -> None:
    import os

    from gputui.model.containers import ContainerInfo

    ticks = os.sysconf("SC_CLK_TCK")
    scope = tmp_path / "cg" / "system.slice" / f"docker-{CID}.scope"
    _write(scope / "cpu.stat", "usage_usec 1000000\nuser_usec 900000\n")
    _write(scope / "memory.current", "5000\n")
    _write(scope / "memory.stat", "anon 3000\ninactive_file 1500\nactive_file 500\n")
    _write(scope / "memory.max", "max\n")
    _write(tmp_path / "proc" / "stat", _proc_stat(100 * ticks))  # 100 s of host CPU time
    # No /proc/<pid>/cgroup: the engine's default systemd layout must be found.
    src = _source_on_tree(tmp_path, "2", "systemd")
    info = ContainerInfo(id=CID, name="x", image="i", status="running", pid=4242)
    first = src._with_usage([info])[0]
    assert first.cpu_percent is None  # one sample is no rate
    assert (first.memory_used_bytes, first.memory_limit_bytes) == (3500, 8000)
    # +1 s of container CPU over +2 s of host CPU time on 2 CPUs: one full core
    _write(scope / "cpu.stat", "usage_usec 2000000\n")
    _write(tmp_path / "proc" / "stat", _proc_stat(102 * ticks))
    second = src._with_usage([info])[0]
    assert second.cpu_percent == pytest.approx(100.0)
    stopped = ContainerInfo(id=CID, name="x", image="i", status="exited")
    assert src._with_usage([stopped])[0].memory_used_bytes is None


def test_cgroup_v1_tree_from_proc_path(tmp_path: Any) -> None:
    from gputui.model.containers import ContainerInfo

    # A --cgroup-parent the defaults cannot guess: found through /proc/<pid>/cgroup.
    rel = f"custom/parent/{CID}"
    _write(tmp_path / "proc" / "77" / "cgroup", f"4:memory:/{rel}\n2:cpu,cpuacct:/{rel}\n")
    _write(tmp_path / "proc" / "stat", _proc_stat(100))
    _write(tmp_path / "cg" / "cpu,cpuacct" / rel / "cpuacct.usage", "123\n")
    mem = tmp_path / "cg" / "memory" / rel
    _write(mem / "memory.usage_in_bytes", "4096\n")
    _write(mem / "memory.stat", "inactive_file 100\ntotal_inactive_file 1000\n")
    _write(mem / "memory.limit_in_bytes", "2048000\n")
    src = _source_on_tree(tmp_path, "1", "cgroupfs")
    src._engine = dataclasses.replace(src._engine, host_memory_bytes=10_000_000)
    info = ContainerInfo(id=CID, name="x", image="i", status="running", pid=77)
    got = src._with_usage([info])[0]
    assert (got.memory_used_bytes, got.memory_limit_bytes) == (3096, 2048000)


def test_cgroup_v1_systemd_driver_nested_in_a_podman_container(tmp_path: Any) -> None:
    """Docker's systemd driver under systemd in a podman container, on cgroup v1: the scope is
    below the podman container's cgroup for cpu, cpuacct and memory, where the driver's default
    (``/system.slice/docker-<id>.scope``) is not: only the init's real ``/proc/<pid>/cgroup``
    lines (verbatim, tests/fixtures/cgroup/) find it."""
    from gputui.model.containers import ContainerInfo
    from tests.support.paths import REPO

    inner = "7d0388bb4adfd0a2b4cc00fb554fe9847899783ee95bb52414f420b9a7f9d49e"
    podman = "ec752b93fe59feb24510766588fed22669aecae95dd3adecb4600168394a0f28"
    text = (REPO / "tests/fixtures/cgroup/systemd-docker-in-podman-v1.container").read_text()
    rel = f"libpod_parent/libpod-{podman}/system.slice/docker-{inner}.scope"
    got = cg.cgroup_candidates("1", inner, "systemd", None, text)
    assert got[0] == (0, f"cpuacct/{rel}", "cpuacct.usage")
    assert next(c for c in got if c[0] == 1) == (1, f"memory/{rel}", "memory.usage_in_bytes")
    assert next(c for c in got if c[0] == 2) == (2, f"cpu/{rel}", "cpu.stat")
    _write(tmp_path / "proc" / "9073" / "cgroup", text)
    _write(tmp_path / "proc" / "172" / "cgroup", "4:memory:/\n2:cpuacct:/\n0::/\n")  # another
    _write(tmp_path / "proc" / "stat", _proc_stat(100))
    _write(tmp_path / "cg" / "cpuacct" / rel / "cpuacct.usage", "123\n")
    mem = tmp_path / "cg" / "memory" / rel
    _write(mem / "memory.usage_in_bytes", "4096\n")
    _write(mem / "memory.stat", "total_inactive_file 1000\n")
    _write(mem / "memory.limit_in_bytes", "9223372036854771712\n")
    src = _source_on_tree(tmp_path, "1", "systemd")
    info = ContainerInfo(id=inner, name="x", image="i", status="running", pid=9073)
    assert src._with_usage([info])[0].memory_used_bytes == 3096
    # The engine's own PID for it (172 in the podman container) is another host process:
    # nothing of that one's cgroup is taken, and the driver's default path does not exist.
    src = _source_on_tree(tmp_path, "1", "systemd")
    wrong = dataclasses.replace(info, pid=172)
    assert src._with_usage([wrong])[0].memory_used_bytes is None


def test_no_cgroup_figures_for_remote_engines(tmp_path: Any) -> None:
    from gputui.collect.docker.endpoint import Endpoint as _Endpoint
    from gputui.model.containers import ContainerInfo

    src = _source_on_tree(tmp_path, "2", "systemd")
    src._endpoint = _Endpoint("tcp://10.0.0.5:2376", False, None, explicit=True)
    info = ContainerInfo(id=CID, name="x", image="i", status="running", pid=1)
    assert src._with_usage([info])[0] == info


def test_cgroup_candidates_v1_prefers_proc_path() -> None:
    got = cg.cgroup_candidates("1", CID, "cgroupfs", None, PROC_CGROUP_V1)
    assert got[0] == (0, f"cpuacct/docker/{CID}", "cpuacct.usage")
    assert (1, f"memory/docker/{CID}", "memory.usage_in_bytes") in got
    # ``--cgroup-parent=/mine``: the engine puts the container at ``/mine/<id>``.
    custom = f"4:memory:/mine/{CID}\n2:cpuacct:/mine/{CID}\n"
    got = cg.cgroup_candidates("1", CID, "cgroupfs", None, custom)
    assert got[0] == (0, f"cpuacct/mine/{CID}", "cpuacct.usage")
    assert next(c for c in got if c[0] == 1) == (1, f"memory/mine/{CID}", "memory.usage_in_bytes")
    # A path that does not name the container (a shared session cgroup) is not its cgroup.
    shared = "4:memory:/mine/x\n2:cpuacct:/mine/x\n"
    got = cg.cgroup_candidates("1", CID, "cgroupfs", None, shared)
    assert not any("mine" in c[1] for c in got)


def test_cgroup_candidates_v2_defaults() -> None:
    got = cg.cgroup_candidates("2", CID, "systemd", None, "")
    assert got == [
        (0, f"system.slice/docker-{CID}.scope", "cpu.stat"),
        (1, f"system.slice/docker-{CID}.scope", "memory.current"),
    ]


def test_cgroup_usage_v1_and_v2() -> None:
    v1 = {
        "cpuacct.usage": "123456789\n",
        "memory.usage_in_bytes": "4096\n",
        "memory.stat": "inactive_file 10\ntotal_inactive_file 96\n",
        "memory.limit_in_bytes": "9223372036854771712\n",
    }
    assert cg.cgroup_usage("1", v1, 8000) == (123456789, 4000, 8000)
    v2 = {
        "cpu.stat": "usage_usec 5\n",
        "memory.current": "4096\n",
        "memory.stat": "inactive_file 96\n",
        "memory.max": "2048\n",
    }
    assert cg.cgroup_usage("2", v2, 8000) == (5000, 4000, 2048)
    assert cg.cgroup_usage("2", {"cpu.stat": "usage_usec 5\n"}, 8000) == (5000, None, None)
    assert cg.cgroup_usage("1", {}, 8000) == (None, None, None)


def test_cgroup_throttling_v1_and_v2_and_cpu_quota() -> None:
    v1 = {"cpu.stat": "nr_periods 32\nnr_throttled 31\nthrottled_time 2698172151\n"}
    assert cg.cgroup_throttling("1", v1) == (32, 31, 2.698172151)
    v2 = {"cpu.stat": "usage_usec 5\nnr_periods 10\nnr_throttled 4\nthrottled_usec 250000\n"}
    assert cg.cgroup_throttling("2", v2) == (10, 4, 0.25)
    assert cg.cgroup_throttling("2", {"cpu.stat": "usage_usec 5\n"}) is None
    assert dp.cpu_quota({"NanoCpus": 100_000_000}) == 0.1
    assert dp.cpu_quota({"CpuQuota": 50_000, "CpuPeriod": 100_000}) == 0.5
    assert dp.cpu_quota({"NanoCpus": 0, "CpuQuota": 0}) is None
