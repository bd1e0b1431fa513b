"""Cgroup-less containers: runtime monitors' command lines, the cgroup forms they come with.

The texts are the forms real runtimes write (taken from podman 4.3, containerd 1.6, Docker 20.10
rootless, CRI-O and nerdctl); the runtimes themselves are exercised in
test_runtimes_attribution.py.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gputui.collect.linux.ancestry import MAX_ANCESTRY_DEPTH, RuntimeAncestry
from gputui.collect.linux.cgroup_usage import cgroup_candidates
from gputui.collect.linux.membership import (
    MonitorMatch,
    parse_cgroup,
    parse_monitor_cmdline,
    parse_stat_ppid,
    path_names_container,
)
from gputui.collect.linux.proc_reader import ProcSource

PODMAN_ID = "5db8a0e5db03e60066171668e2c7408eb89ca1a7ddb2914f962936f7f2d19f7e"
DOCKER_ID = "e18ec1d203799532075a4e7d9b3e969554e769677b768eaeb6b6998284956aa3"
OUTER_ID = "9aca8fc4740169d886c6113a898df0037d8f18867731baedcd9c6bba9a67e10c"

CONMON_PODMAN = [
    "/usr/bin/conmon", "--api-version", "1", "-c", PODMAN_ID, "-u", PODMAN_ID,
    "-r", "/usr/bin/runc",
    "-b", f"/home/u/.local/share/containers/storage/vfs-containers/{PODMAN_ID}/userdata",
    "-p", f"/run/user/1001/containers/vfs-containers/{PODMAN_ID}/userdata/pidfile",
    "-n", "trainer", "--exit-dir", "/run/user/1001/libpod/tmp/exits",
    "--exit-command", "/usr/bin/podman", "--exit-command-arg", "--root",
]  # fmt: skip
CONMON_CRIO = [
    "/usr/bin/conmon", "-b", f"/run/containers/storage/overlay-containers/{PODMAN_ID}/userdata",
    "-c", PODMAN_ID, "--exit-dir", "/var/run/crio/exits", "-l",
    "/var/log/pods/ml_trainer-0_uid/main/0.log", "--log-level", "info", "-n",
    "k8s_main_trainer-0_ml_uid_0", "-r", "/usr/bin/runc",
]  # fmt: skip
SHIM_ROOTLESS_DOCKER = [
    "/usr/bin/containerd-shim-runc-v2", "-namespace", "moby", "-id", DOCKER_ID,
    "-address", "/run/user/1001/docker/containerd/containerd.sock",
]  # fmt: skip
SHIM_CTR = [
    "/usr/bin/containerd-shim-runc-v2", "-namespace", "default", "-id", "rtx-named",
    "-address", "/run/containerd/containerd.sock",
]  # fmt: skip
SHIM_CRI = [
    "/usr/bin/containerd-shim-runc-v2", "-namespace", "k8s.io", "-id", OUTER_ID,
    "-address", "/run/containerd/containerd.sock",
]  # fmt: skip
SHIM_V1 = [
    "containerd-shim", "-namespace", "moby", "-workdir",
    f"/var/lib/containerd/io.containerd.runtime.v1.linux/moby/{DOCKER_ID}",
    "-address", "/run/containerd/containerd.sock", "-containerd-binary", "/usr/bin/containerd",
]  # fmt: skip


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (CONMON_PODMAN, MonitorMatch(PODMAN_ID, "podman", None)),
        (CONMON_CRIO, MonitorMatch(PODMAN_ID, "crio", None)),
        (SHIM_ROOTLESS_DOCKER, MonitorMatch(DOCKER_ID, "docker", "moby")),
        (SHIM_CTR, MonitorMatch("rtx-named", "containerd", "default")),
        (SHIM_V1, MonitorMatch(DOCKER_ID, "docker", "moby")),
        # Go's flag package also takes ``-flag=value`` and ``--flag value``.
        (
            ["containerd-shim-runc-v2", "--namespace=default", "-id=web.1"],
            MonitorMatch("web.1", "containerd", "default"),
        ),
        (["/usr/bin/conmon", "--cid", PODMAN_ID], MonitorMatch(PODMAN_ID, "podman", None)),
    ],
)
def test_monitor_command_lines(args: list[str], expected: MonitorMatch) -> None:
    assert parse_monitor_cmdline(args) == expected


@pytest.mark.parametrize(
    "args",
    [
        [],
        SHIM_CRI,  # a pod's shim names the sandbox, not the container a process is in
        ["/usr/bin/conmon", "--api-version", "1"],  # no id
        ["/usr/bin/conmon", "-c"],  # option without its value
        ["/usr/bin/conmon", "-c", "../../etc"],  # not an id a runtime accepts
        ["/usr/bin/conmon", "-c", "a" * 77],  # longer than any containerd id
        ["containerd-shim-runc-v2", "-id", "x"],  # no namespace
        ["/usr/bin/containerd", "--config", "/etc/containerd/config.toml"],
        ["/usr/bin/dockerd", "-id", DOCKER_ID],
        ["sh", "-c", PODMAN_ID],  # an id as another program's argument
        ["/usr/bin/conmonitor", "-c", PODMAN_ID],
    ],
)
def test_not_a_monitor(args: list[str]) -> None:
    assert parse_monitor_cmdline(args) is None


@given(st.lists(st.text(max_size=80), max_size=40))
def test_monitor_parser_never_raises(args: list[str]) -> None:
    found = parse_monitor_cmdline(["containerd-shim", *args])
    assert found is None or len(found.container_id) <= 76
    parse_monitor_cmdline(["conmon", *args])


def test_cgroup_forms_of_cgroupless_and_named_containers() -> None:
    # nerdctl under the systemd driver: its own scope unit.
    match = parse_cgroup(f"0::/system.slice/nerdctl-{DOCKER_ID}.scope\n")
    assert match is not None
    assert (match.container_id, match.runtime) == (DOCKER_ID, "containerd")
    # containerd's cgroupfs ``/<namespace>/<id>`` with a 64-hex id (nerdctl, ctr): the id, its
    # runtime left to the monitor ancestor.
    match = parse_cgroup(f"4:memory:/default/{DOCKER_ID}\n0::/\n")
    assert match is not None and (match.container_id, match.runtime) == (DOCKER_ID, None)
    # A named id is indistinguishable from any other path: no container from the cgroup alone.
    assert parse_cgroup("4:memory:/default/rtx-named\n1:cpu:/default/rtx-named\n") is None
    # Rootless on cgroup v1: the session's cgroup, and the sandbox cgroup of this very machine.
    assert parse_cgroup("9:name=systemd:/user.slice/user-1001.slice/session-3.scope\n") is None
    assert parse_cgroup("4:memory:/process_api/7404c92e2d5f7f31c835ecb1e798eb0c\n0::/\n") is None


@pytest.mark.parametrize(
    ("path", "container_id", "own"),
    [
        (f"/docker/{DOCKER_ID}", DOCKER_ID, True),
        (f"/system.slice/docker-{DOCKER_ID}.scope", DOCKER_ID, True),
        (f"/libpod_parent/libpod-{PODMAN_ID}", PODMAN_ID, True),
        (f"/machine.slice/libpod-{PODMAN_ID}.scope/container", PODMAN_ID, True),
        (f"/kubepods.slice/kubepods-besteffort.slice:cri-containerd:{DOCKER_ID}", DOCKER_ID, True),
        ("/default/rtx-named", "rtx-named", True),
        ("/system.slice/nerdctl-web.scope", "web", True),
        # Shared cgroups: the session's, the root, a look-alike.
        ("/user.slice/user-1001.slice/session-3.scope", PODMAN_ID, False),
        ("/", PODMAN_ID, False),
        ("/process_api/7404c92e2d5f7f31c835ecb1e798eb0c", PODMAN_ID, False),
        ("/user.slice/user-1000", "1000", False),
        (f"/system.slice/docker-{DOCKER_ID}.mount", DOCKER_ID, False),
        (f"/docker/{DOCKER_ID}", "", False),
    ],
)
def test_path_names_container(path: str, container_id: str, own: bool) -> None:
    assert path_names_container(path, container_id) is own


def test_session_cgroup_is_not_a_containers_cpu_or_memory() -> None:
    # A rootless podman container's init on cgroup v1, as /proc/<pid>/cgroup shows it.
    session = (
        "9:name=systemd:/user.slice/user-1001.slice/session-3.scope\n"
        "4:memory:/user.slice/user-1001.slice/session-3.scope\n2:cpuacct:/\n1:cpu:/\n0::/\n"
    )
    dirs = {rel for _, rel, _ in cgroup_candidates("1", PODMAN_ID, "cgroupfs", None, session)}
    assert not any("session-3" in d or d in ("cpuacct", "memory", "cpu") for d in dirs)
    assert "memory/docker/" + PODMAN_ID in dirs  # the engine's own layout stays the fallback
    own = (
        f"4:memory:/libpod_parent/libpod-{PODMAN_ID}\n2:cpuacct:/libpod_parent/libpod-{PODMAN_ID}\n"
    )
    dirs = {rel for _, rel, _ in cgroup_candidates("1", PODMAN_ID, "cgroupfs", None, own)}
    assert f"memory/libpod_parent/libpod-{PODMAN_ID}" in dirs


@pytest.mark.parametrize(
    ("text", "ppid"),
    [
        ("1234 (sleep) S 77 1234 1234 0 -1 4194560 100 0 0 0", 77),
        ("1234 (a) b) c) R 5 1 1", 5),  # ``)`` and spaces inside the command name
        ("1 (init) S 0 1 1", 0),
        ("1234 (sleep S 77", None),
        ("1234 (x) S", None),
        ("1234 (x) S -1 1", None),
        ("", None),
    ],
)
def test_stat_ppid(text: str, ppid: int | None) -> None:
    assert parse_stat_ppid(text) == ppid


def _fake_proc(root: Path, pid: int, ppid: int, args: list[str], ns: str | None = None) -> None:
    d = root / str(pid)
    (d / "ns").mkdir(parents=True, exist_ok=True)
    (d / "stat").write_text(f"{pid} (x) S {ppid} {pid} {pid} 0 -1 0 0 0 0 0 0 0")
    (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in args) + b"\0")
    if ns is not None:
        os.symlink(ns, d / "ns" / "pid")


def test_ancestry_finds_the_nearest_monitor(tmp_path: Path) -> None:
    (tmp_path / "self" / "ns").mkdir(parents=True)
    os.symlink("pid:[4026531836]", tmp_path / "self" / "ns" / "pid")  # the reader's namespace
    _fake_proc(tmp_path, 50, 1, CONMON_PODMAN)
    _fake_proc(tmp_path, 60, 50, ["sh", "-c", "python train.py"], "pid:[4026532255]")
    _fake_proc(tmp_path, 70, 60, ["python", "train.py"], "pid:[4026532255]")
    # A process of the same namespace whose parent cannot be read (it exited, or hidepid).
    _fake_proc(tmp_path, 80, 999, ["python", "worker.py"], "pid:[4026532255]")
    _fake_proc(tmp_path, 90, 1, ["bash"], "pid:[4026531836]")
    ancestry = RuntimeAncestry(tmp_path)
    assert ancestry.resolve(70) == MonitorMatch(PODMAN_ID, "podman", None)
    assert ancestry.resolve(80) == MonitorMatch(PODMAN_ID, "podman", None)
    assert ancestry.resolve(90) is None
    assert RuntimeAncestry(tmp_path).resolve(80) is None  # nothing learnt yet of its namespace


def test_ancestry_is_bounded(tmp_path: Path) -> None:
    top = MAX_ANCESTRY_DEPTH + 5
    _fake_proc(tmp_path, top, 1, CONMON_PODMAN)
    for pid in range(2, top):
        _fake_proc(tmp_path, pid, pid + 1, ["sh"])
    assert RuntimeAncestry(tmp_path).resolve(2) is None  # the monitor is beyond the depth
    assert RuntimeAncestry(tmp_path).resolve(top - 3) is not None
    _fake_proc(tmp_path, top + 1, top + 2, ["sh"])
    _fake_proc(tmp_path, top + 2, top + 1, ["sh"])  # a loop (PID reuse between two reads)
    assert RuntimeAncestry(tmp_path).resolve(top + 1) is None


def _write(root: Path, pid: int, cgroup: str, status: str) -> None:
    d = root / str(pid)
    d.mkdir(parents=True, exist_ok=True)
    (d / "cgroup").write_text(cgroup)
    (d / "status").write_text(status)


def test_proc_source_attributes_by_monitor_and_keeps_an_outer_container(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    pid = sleeper.pid
    monitor = pid + 100_000
    # Rootless on cgroup v1: the session's cgroup, conmon above.
    _write(tmp_path, pid, "4:memory:/user.slice/user-1001.slice\n0::/\n", f"NSpid:\t{pid}\t3\n")
    _fake_proc(tmp_path, pid, monitor, ["python"])
    _fake_proc(tmp_path, monitor, 1, CONMON_PODMAN)
    info = ProcSource(tmp_path).read([pid])[pid]
    assert (info.container_id, info.runtime, info.container_pid) == (PODMAN_ID, "podman", 3)

    # An engine inside a container: the cgroup names the outer container, which it keeps.
    _write(tmp_path, pid, f"4:memory:/docker/{OUTER_ID}\n0::/\n", f"NSpid:\t{pid}\t3\n")
    info = ProcSource(tmp_path).read([pid])[pid]
    assert (info.container_id, info.runtime) == (OUTER_ID, "docker")

    # ``ctr run`` with a named id: the cgroup alone says nothing, the shim does.
    _write(tmp_path, pid, "4:memory:/default/rtx-named\n0::/\n", f"NSpid:\t{pid}\t1\n")
    _fake_proc(tmp_path, monitor, 1, SHIM_CTR)
    info = ProcSource(tmp_path).read([pid])[pid]
    assert (info.container_id, info.runtime, info.container_pid) == ("rtx-named", "containerd", 1)

    # A 64-hex id under containerd's ``/<namespace>/`` gets its runtime from the shim.
    _write(tmp_path, pid, f"4:memory:/moby/{DOCKER_ID}\n0::/\n", f"NSpid:\t{pid}\t1\n")
    _fake_proc(tmp_path, monitor, 1, SHIM_ROOTLESS_DOCKER)
    info = ProcSource(tmp_path).read([pid])[pid]
    assert (info.container_id, info.runtime) == (DOCKER_ID, "docker")

    # A host process (no monitor above) stays the host's.
    _write(tmp_path, pid, "4:memory:/user.slice\n0::/\n", f"NSpid:\t{pid}\n")
    _fake_proc(tmp_path, monitor, 1, ["/usr/sbin/sshd", "-D"])
    info = ProcSource(tmp_path).read([pid])[pid]
    assert info.container_id is None and info.runtime is None
