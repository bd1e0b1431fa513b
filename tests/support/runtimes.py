"""Real container runtimes, started by the tests themselves, each in its own private directories.

Rootful podman and its API service, rootless podman and rootless Docker as an unprivileged user, a
private containerd instance driven with ``ctr`` and through its CRI plugin the way a kubelet does.
Each is started with a deadline and torn down at the end, together with every container, mount
and process it left; nothing of another engine's (the shared Docker engine's containers, a host
containerd) is touched. A runtime whose package is missing skips its test with the reason, except
in CI (``CI`` set) or with ``GPUTUI_REQUIRE_RUNTIMES=1``, where that is a failure.

The image is the Docker test image (busybox-static) saved from the engine and given a ``PATH``
(containerd, unlike Docker, has no default one) under a name of its own, so the shared engine's
tags are never changed.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import http.client
import io
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tarfile
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pytest

from tests.support.processes import stop_process
from tests.support.protobuf import field as _field
from tests.support.protobuf import msg as _msg

#: The image name the runtimes load (never tagged in the shared Docker engine).
RUNTIME_IMAGE = "docker.io/library/gputui-rt:latest"
#: Name prefix of everything the runtime tests create.
PREFIX = "gputui-rt"
#: The unprivileged user the rootless engines run as (created when missing).
ROOTLESS_USER = "gputui-rt"
#: Seconds a runtime may take to answer after its start.
START_DEADLINE_S = 60.0
#: Seconds one runtime command may take.
COMMAND_TIMEOUT_S = 60.0
#: Seconds a runtime daemon gets to exit on SIGTERM before SIGKILL.
RUNTIME_GRACE_S = 20.0
#: Where a process's NUL-separated command line is; read to find the processes a runtime left.
_PROC = Path("/proc")


def required() -> bool:
    """Whether a missing runtime is a failure (CI) rather than a skip."""
    return bool(os.environ.get("CI")) or os.environ.get("GPUTUI_REQUIRE_RUNTIMES") == "1"


def unavailable(reason: str) -> None:
    """Skip the test (fail it in CI): the runtime cannot be had here."""
    if required():
        pytest.fail(f"container runtime required (CI / GPUTUI_REQUIRE_RUNTIMES=1) but {reason}")
    pytest.skip(reason)


def need(binary: str, package: str, *extra_dirs: str) -> str:
    """The path of ``binary``, or skip (fail in CI) naming the Debian package that has it."""
    found = shutil.which(binary, path=os.pathsep.join([*extra_dirs, os.environ.get("PATH", "")]))
    if found is None:
        unavailable(f"no {binary} (apt-get install {package})")
        raise AssertionError("unreachable")
    return found


def wait_until(check: Callable[[], bool], what: str, deadline_s: float = START_DEADLINE_S) -> None:
    """Poll ``check`` until it is true; fail naming ``what`` past the deadline."""
    deadline = time.monotonic() + deadline_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {deadline_s:.0f} s")
        time.sleep(0.05)


def run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    timeout: float = COMMAND_TIMEOUT_S,
) -> str:
    """Run a runtime command (argv, no shell); its stdout, or an AssertionError with stderr."""
    proc = subprocess.run(
        list(argv),
        input=stdin,
        capture_output=True,
        timeout=timeout,
        env=dict(env) if env is not None else None,
        check=False,
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(argv[:6])}... exited {proc.returncode}: "
            f"{proc.stderr.decode(errors='replace')[-2000:]}"
        )
    return proc.stdout.decode(errors="replace")


def private_dir(tag: str) -> Path:
    """A new directory under the system temp dir, short enough for socket paths (108 bytes)."""
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}-{tag}-", dir="/tmp"))


def unmount_below(root: Path) -> None:
    """Unmount every mount under ``root`` (deepest first): what a runtime left when stopped."""
    prefix = str(root).rstrip("/") + "/"
    points: list[str] = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            fields = line.split()
            if len(fields) > 4 and fields[4].startswith(prefix):
                points.append(fields[4].replace("\\040", " "))
    for point in sorted(set(points), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, timeout=30, check=False)


def processes_with(needle: str) -> list[int]:
    """PIDs whose command line contains ``needle`` (a private path of one runtime instance)."""
    found: list[int] = []
    want = needle.encode()
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if want in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
    return found


def end_processes(pids: Sequence[int], grace_s: float = 20.0) -> None:
    """SIGTERM the given PIDs (processes this module started), SIGKILL those left after grace."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    left = list(pids)
    while left and time.monotonic() < deadline:
        left = [p for p in left if _alive(p)]
        time.sleep(0.05)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        state = (_PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def get_unix(sock: Path, path: str, timeout: float = 2.0) -> tuple[int, bytes] | None:
    """GET ``path`` from an engine API on a unix socket: (status, body), None when unanswered."""

    class _Conn(http.client.HTTPConnection):
        def connect(self) -> None:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(timeout)
            self.sock.connect(str(sock))

    conn = _Conn("localhost", timeout=timeout)
    try:
        conn.request("GET", path)
        answer = conn.getresponse()
        return answer.status, answer.read(1 << 20)
    except OSError:
        return None
    finally:
        conn.close()


def ping_unix(sock: Path, path: str = "/_ping", timeout: float = 2.0) -> bool:
    """Whether an engine API answers 200 on a unix socket (Docker and podman serve ``/_ping``)."""
    answer = get_unix(sock, path, timeout)
    return answer is not None and answer[0] == 200


def runtime_image_archive(docker_engine: Any, test_image: str) -> bytes:
    """The Docker test image as a ``docker save`` archive named :data:`RUNTIME_IMAGE`.

    The config gets ``PATH`` (containerd and CRI give a process none of their own) and the
    manifest the new name; the layers are the test image's, byte for byte.
    """
    saved = b"".join(docker_engine.api.get_image(test_image))
    out = io.BytesIO()
    with (
        tarfile.open(fileobj=io.BytesIO(saved)) as src,
        tarfile.open(fileobj=out, mode="w") as dst,
    ):
        manifest = json.loads(_member(src, "manifest.json"))
        old_config = manifest[0]["Config"]
        config = json.loads(_member(src, old_config))
        config.setdefault("config", {})["Env"] = ["PATH=/usr/bin:/bin"]
        config["config"]["Cmd"] = ["sleep", "3600"]
        config_bytes = json.dumps(config).encode()
        config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
        manifest[0]["Config"] = config_name
        manifest[0]["RepoTags"] = [RUNTIME_IMAGE]
        for member in src.getmembers():
            if member.name in ("manifest.json", "repositories", old_config):
                continue
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
        for name, data in ((config_name, config_bytes), ("manifest.json", json.dumps(manifest))):
            raw = data.encode() if isinstance(data, str) else data
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(raw), 0o644
            dst.addfile(info, io.BytesIO(raw))
    return out.getvalue()


def _member(tar: tarfile.TarFile, name: str) -> bytes:
    fh = tar.extractfile(name)
    assert fh is not None, f"{name} missing from the saved image"
    return fh.read()


# --- the unprivileged user of the rootless engines ----------------------------------------------


@dataclass(frozen=True)
class RootlessUser:
    """An unprivileged user with subordinate ids, and a private runtime directory of its own."""

    name: str
    uid: int
    gid: int
    home: Path
    runtime_dir: Path

    def argv(self, *argv: str, path: str = "/usr/sbin:/usr/bin:/sbin:/bin") -> list[str]:
        """``argv`` run as this user with a clean environment (setpriv, no shell)."""
        return [
            "setpriv",
            f"--reuid={self.uid}",
            f"--regid={self.gid}",
            "--init-groups",
            "env",
            "-i",
            f"PATH={path}",
            f"HOME={self.home}",
            f"XDG_RUNTIME_DIR={self.runtime_dir}",
            f"USER={self.name}",
            *argv,
        ]


def rootless_user(base: Path) -> RootlessUser:
    """:data:`ROOTLESS_USER` (created, with subordinate ids, when missing) with a runtime dir.

    Needs root, ``uidmap`` (newuidmap/newgidmap) and subordinate ids; parallel test workers
    create the user under one lock.
    """
    if os.geteuid() != 0:
        unavailable("the rootless engines are started as another user, which needs root")
    need("newuidmap", "uidmap")
    lock = os.open(
        os.path.join(tempfile.gettempdir(), f"{PREFIX}-user.lock"), os.O_CREAT | os.O_RDWR
    )
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            entry = pwd.getpwnam(ROOTLESS_USER)
        except KeyError:
            run(["useradd", "--create-home", "--shell", "/bin/sh", ROOTLESS_USER])
            entry = pwd.getpwnam(ROOTLESS_USER)
        for path in ("/etc/subuid", "/etc/subgid"):
            text = Path(path).read_text() if os.path.exists(path) else ""
            if not any(line.split(":")[0] == ROOTLESS_USER for line in text.splitlines()):
                flag = "--add-subuids" if path.endswith("uid") else "--add-subgids"
                run(["usermod", flag, "300000-365535", ROOTLESS_USER])
    finally:
        os.close(lock)
    runtime_dir = base / "xdg"
    runtime_dir.mkdir(mode=0o700)
    os.chown(base, entry.pw_uid, entry.pw_gid)
    os.chown(runtime_dir, entry.pw_uid, entry.pw_gid)
    return RootlessUser(ROOTLESS_USER, entry.pw_uid, entry.pw_gid, Path(entry.pw_dir), runtime_dir)


# --- podman ------------------------------------------------------------------------------------

#: crun refuses a hybrid cgroup host (cgroup v1 with the v2 hierarchy mounted too), so runc runs
#: the containers; podman's default 1048576 open files exceed a hard limit root may not raise
#: (a container host without CAP_SYS_RESOURCE), so the limits are the kernel's defaults.
#: ``gpurunc`` is runc under another name: a container created with it shows whether its
#: runtime is read from podman's own inspect (the compatible one says ``oci`` for every one).
_CONTAINERS_CONF = """\
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime = "runc"
[engine.runtimes]
gpurunc = ["/usr/sbin/runc", "/usr/bin/runc"]
"""


@dataclass
class Podman:
    """One podman with private storage (``--root``/``--runroot``), rootful or as a user."""

    base: Path
    user: RootlessUser | None = None
    services: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "CONTAINERS_CONF": str(self.base / "containers.conf")}

    def argv(self, *args: str) -> list[str]:
        podman = [
            "podman",
            "--root",
            str(self.base / "root"),
            "--runroot",
            str(self.base / "run"),
            "--tmpdir",
            str(self.base / "tmp"),
            *args,
        ]
        if self.user is None:
            return podman
        return self.user.argv(f"CONTAINERS_CONF={self.base / 'containers.conf'}", *podman)

    def __call__(self, *args: str, stdin: bytes | None = None) -> str:
        return run(self.argv(*args), env=self.env, stdin=stdin)

    def run_container(self, name: str, *command: str) -> str:
        """Start a container (no network) from :data:`RUNTIME_IMAGE`; its full id."""
        return self(
            "run", "-d", "--name", name, "--network", "none", RUNTIME_IMAGE, *command
        ).strip()

    def top(self, name: str) -> list[tuple[int, int]]:
        """(host PID, in-container PID) of each process, as ``podman top`` gives them."""
        rows = self("top", name, "hpid", "pid").splitlines()[1:]
        return [(int(r.split()[0]), int(r.split()[1])) for r in rows if r.strip()]

    def service(self) -> Path:
        """Start ``podman system service`` on a private socket; the socket once it answers."""
        sock = self.base / "podman.sock"
        proc = subprocess.Popen(
            self.argv("system", "service", "--time=0", f"unix://{sock}"),
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.services.append(proc)
        wait_until(lambda: proc.poll() is None and sock.exists() and ping_unix(sock),
                   "podman system service did not answer /_ping")  # fmt: skip
        return sock

    def close(self) -> None:
        """Remove every container, stop the services and podman's pause process, free the dirs."""
        with contextlib.suppress(AssertionError, subprocess.TimeoutExpired):
            self("rm", "--all", "--force", "--time", "0")
        for proc in self.services:
            stop_process(proc, RUNTIME_GRACE_S)
        # Rootless podman keeps a pause process holding its user namespace; it was started by
        # this instance (its runtime dir is private), so it is ended by its recorded PID.
        if self.user is not None:
            for pid_file in self.base.rglob("pause.pid"):
                with contextlib.suppress(OSError, ValueError):
                    end_processes([int(pid_file.read_text().strip())])
        end_processes(processes_with(str(self.base)))
        unmount_below(self.base)
        shutil.rmtree(self.base, ignore_errors=True)


def start_podman(archive: bytes, user: RootlessUser | None, base: Path) -> Podman:
    """A podman with private storage and the runtime image loaded."""
    need("podman", "podman")
    need("conmon", "conmon")
    need("runc", "runc")
    (base / "containers.conf").write_text(_CONTAINERS_CONF)
    if user is not None:
        need("slirp4netns", "slirp4netns")  # podman checks for it even without a network
        for sub in ("root", "run", "tmp"):
            (base / sub).mkdir()
            os.chown(base / sub, user.uid, user.gid)
    podman = Podman(base, user)
    podman("load", stdin=archive)
    return podman


# --- rootless Docker ---------------------------------------------------------------------------

_DOCKER_CONTRIB = "/usr/share/docker.io/contrib"


@dataclass
class RootlessDocker:
    """``dockerd-rootless.sh`` (rootlesskit, slirp4netns) run as the rootless user."""

    base: Path
    sock: Path
    proc: subprocess.Popen[bytes]

    @property
    def host(self) -> str:
        return f"unix://{self.sock}"

    def __call__(self, *args: str, stdin: bytes | None = None) -> str:
        return run(["docker", "-H", self.host, *args], stdin=stdin)

    def close(self) -> None:
        with contextlib.suppress(AssertionError, subprocess.TimeoutExpired):
            ids = self("ps", "-aq").split()
            if ids:
                self("rm", "-f", *ids)
        stop_process(self.proc, RUNTIME_GRACE_S)
        end_processes(processes_with(str(self.base)))
        unmount_below(self.base)
        shutil.rmtree(self.base, ignore_errors=True)


def start_rootless_docker(archive: bytes, user: RootlessUser, base: Path) -> RootlessDocker:
    """Rootless dockerd on a private socket, as ``user``, with the runtime image loaded."""
    script = need("dockerd-rootless.sh", "docker.io", _DOCKER_CONTRIB)
    need("rootlesskit", "rootlesskit")
    need("slirp4netns", "slirp4netns")
    # rootlesskit's network is slirp4netns on a tap device the user opens; Debian's udev rule
    # makes /dev/net/tun 0666, a host without udev may leave it 0600 (root only).
    tun = Path("/dev/net/tun")
    if not tun.exists():
        unavailable("no /dev/net/tun for rootlesskit's slirp4netns network")
    if tun.stat().st_mode & 0o006 != 0o006:
        tun.chmod(0o666)
    data = base / "docker"
    data.mkdir()
    os.chown(data, user.uid, user.gid)
    sock = data / "docker.sock"
    log = open(base / "dockerd.log", "wb")  # noqa: SIM115 - kept open for the daemon's life
    proc = subprocess.Popen(
        user.argv(
            script,
            "--data-root", str(data / "root"),
            "--exec-root", str(data / "exec"),
            "--pidfile", str(data / "docker.pid"),
            "-H", f"unix://{sock}",
            "--bridge=none",
            "--iptables=false",
            "--storage-driver=vfs",
            path=f"{_DOCKER_CONTRIB}:/usr/sbin:/usr/bin:/sbin:/bin",
        ),
        stdout=log,
        stderr=log,
    )  # fmt: skip
    log.close()
    docker = RootlessDocker(base, sock, proc)
    try:
        wait_until(lambda: proc.poll() is None and sock.exists() and ping_unix(sock),
                   "rootless dockerd did not answer /_ping")  # fmt: skip
    except AssertionError:
        docker.close()
        raise
    docker("load", stdin=archive)
    return docker


# --- containerd, ctr and CRI -------------------------------------------------------------------

#: The CRI plugin: the sandbox ("pause") image is the test image; oom_score_adj is not lowered
#: below containerd's own (a host without CAP_SYS_RESOURCE refuses the sandbox's -998). The
#: socket is in the state directory, as a node's is (``/run/containerd/containerd.sock``).
_CONTAINERD_TOML = """\
version = 2
root = "{base}/root"
state = "{base}/state"
[grpc]
  address = "{base}/state/containerd.sock"
[ttrpc]
  address = "{base}/state/containerd.sock.ttrpc"
[debug]
  level = "warn"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{image}"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{base}/cni"
"""
#: ctr's namespace for the tests' own containers; CRI's is fixed (``k8s.io``).
CTR_NAMESPACE = PREFIX
CRI_NAMESPACE = "k8s.io"


@dataclass
class Containerd:
    """A private containerd (its own root, state and socket) with the runtime image imported."""

    base: Path
    proc: subprocess.Popen[bytes]
    pods: list[str] = field(default_factory=list)

    @property
    def state(self) -> Path:
        """The state directory (``--engine containerd=`` takes it); its socket is in it."""
        return self.base / "state"

    @property
    def sock(self) -> Path:
        return self.state / "containerd.sock"

    def ctr(self, namespace: str, *args: str, stdin: bytes | None = None) -> str:
        return run(
            ["ctr", "--address", str(self.sock), "--namespace", namespace, *args], stdin=stdin
        )

    def task_pid(self, namespace: str, container_id: str) -> int:
        """The host PID of a container's first process, as ``ctr task ls`` gives it."""
        for line in self.ctr(namespace, "task", "ls").splitlines()[1:]:
            fields = line.split()
            if fields and fields[0] == container_id:
                return int(fields[1])
        raise AssertionError(f"no task {container_id}")

    def in_container_ps(self, namespace: str, container_id: str) -> dict[str, int]:
        """In-container PID of each command, by the container's own ``ps`` (``ctr task exec``)."""
        out = self.ctr(namespace, "task", "exec", "--exec-id", f"ps-{uuid.uuid4().hex[:8]}",
                       container_id, "ps", "-o", "pid,args")  # fmt: skip
        found: dict[str, int] = {}
        for line in out.splitlines()[1:]:
            pid, _, args = line.strip().partition(" ")
            if pid.isdigit():
                found.setdefault(args.strip(), int(pid))
        return found

    def close(self) -> None:
        """Remove pods and containers, stop containerd and what it left (shims, mounts)."""
        with contextlib.suppress(Exception):
            cri = CriClient(self.sock)
            for pod in self.pods:
                cri.call("StopPodSandbox", _msg((1, pod)))
                cri.call("RemovePodSandbox", _msg((1, pod)))
            cri.close()
        for namespace in (CTR_NAMESPACE, CRI_NAMESPACE):
            with contextlib.suppress(AssertionError, subprocess.TimeoutExpired):
                for task in self.ctr(namespace, "task", "ls", "-q").split():
                    with contextlib.suppress(AssertionError):
                        self.ctr(namespace, "task", "kill", "--signal", "SIGKILL", task)
                    with contextlib.suppress(AssertionError):
                        wait_until(functools.partial(self._ended, namespace, task), "task end", 10)
                        self.ctr(namespace, "task", "rm", "--force", task)
                for container in self.ctr(namespace, "container", "ls", "-q").split():
                    with contextlib.suppress(AssertionError):
                        self.ctr(namespace, "container", "rm", container)
        stop_process(self.proc, RUNTIME_GRACE_S)
        end_processes(processes_with(str(self.base)))
        unmount_below(self.base)
        shutil.rmtree(self.base, ignore_errors=True)

    def _ended(self, namespace: str, task: str) -> bool:
        running = [line.split()[0] for line in self.ctr(namespace, "task", "ls").splitlines()
                   if "RUNNING" in line]  # fmt: skip
        return task not in running


def start_containerd(archive: bytes, base: Path) -> Containerd:
    """A private containerd instance answering on its own socket, the image in both namespaces."""
    binary = need("containerd", "containerd")
    need("ctr", "containerd")
    need("runc", "runc")
    (base / "cni").mkdir()
    (base / "config.toml").write_text(_CONTAINERD_TOML.format(base=base, image=RUNTIME_IMAGE))
    log = open(base / "containerd.log", "wb")  # noqa: SIM115 - kept open for the daemon's life
    proc = subprocess.Popen([binary, "--config", str(base / "config.toml")], stdout=log, stderr=log)
    log.close()
    ctrd = Containerd(base, proc)

    def answers() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"containerd exited: {(base / 'containerd.log').read_text()}")
        try:
            ctrd.ctr(CTR_NAMESPACE, "version")
        except AssertionError:
            return False
        return True

    try:
        wait_until(answers, "the private containerd did not answer")
        for namespace in (CTR_NAMESPACE, CRI_NAMESPACE):
            ctrd.ctr(namespace, "images", "import", "-", stdin=archive)
    except BaseException:
        ctrd.close()
        raise
    return ctrd


# The CRI API, spoken as the kubelet does, over gRPC with the messages written by hand: the few
# fields used here, numbered as in k8s.io/cri-api's api.proto (runtime.v1).


def _string_map(number: int, values: Mapping[str, str]) -> bytes:
    return b"".join(_field(number, _msg((1, k), (2, v))) for k, v in values.items())


def _first_string(data: bytes, number: int = 1) -> str:
    """Field ``number`` (a string) of a protobuf message: what the CRI calls answer."""
    at = 0

    def varint() -> int:
        nonlocal at
        value = shift = 0
        while True:
            byte = data[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while at < len(data):
        key = varint()
        if key & 7 == 0:
            varint()
        elif key & 7 == 2:
            size = varint()
            if key >> 3 == number:
                return data[at : at + size].decode()
            at += size
        else:
            raise AssertionError(f"unexpected protobuf wire type {key & 7}")
    raise AssertionError(f"field {number} missing from the CRI answer")


@dataclass(frozen=True)
class CriPod:
    """One pod started through CRI: its sandbox, its one container, its metadata."""

    sandbox_id: str
    container_id: str
    uid: str
    name: str
    namespace: str
    container_name: str
    cgroup_parent: str


class CriClient:
    """The kubelet's side of CRI (runtime.v1) for a pod with one container."""

    def __init__(self, sock: Path) -> None:
        try:
            import grpc  # no stubs: pyproject.toml's mypy override
        except ImportError:
            unavailable("no grpcio (pip install grpcio, in the test extra)")
            raise
        self._channel = grpc.insecure_channel(f"unix://{sock}")

    def call(self, method: str, body: bytes) -> bytes:
        rpc = self._channel.unary_unary(f"/runtime.v1.RuntimeService/{method}")
        answer: bytes = rpc(body, timeout=COMMAND_TIMEOUT_S)
        return answer

    def close(self) -> None:
        self._channel.close()

    def run_pod(
        self, ctrd: Containerd, name: str, namespace: str, qos: str, command: Sequence[str]
    ) -> CriPod:
        """RunPodSandbox, CreateContainer, StartContainer, with the labels a kubelet sets.

        The pod's cgroup parent is the kubelet's cgroupfs layout ``/kubepods/<qos>/pod<uid>``
        (``/kubepods/pod<uid>`` for Guaranteed); it shares the node's network namespace
        (``hostNetwork``), so no CNI network is needed.
        """
        uid = str(uuid.uuid4())
        parent = f"/kubepods/pod{uid}" if qos == "guaranteed" else f"/kubepods/{qos}/pod{uid}"
        labels = {
            "io.kubernetes.pod.name": name,
            "io.kubernetes.pod.namespace": namespace,
            "io.kubernetes.pod.uid": uid,
        }
        node_network = _msg((1, _msg((1, 2))))  # NamespaceOption.network = NODE
        sandbox = _msg(
            (1, _msg((1, name), (2, uid), (3, namespace), (4, 0))),  # metadata
            (3, str(ctrd.base / "pods" / uid)),  # log_directory
            (8, _msg((1, parent), (2, node_network))),  # linux: cgroup_parent, security
        ) + _string_map(6, labels)
        sandbox_id = _first_string(self.call("RunPodSandbox", _msg((1, sandbox))))
        ctrd.pods.append(sandbox_id)
        container_name = "main"
        config = (
            _msg(
                (1, _msg((1, container_name), (2, 0))),  # metadata
                (2, _msg((1, RUNTIME_IMAGE))),  # image
                (3, command[0]),
                *((4, arg) for arg in command[1:]),  # args
                (11, f"{container_name}.log"),  # log_path
            )
            + _string_map(9, {**labels, "io.kubernetes.container.name": container_name})
        )
        container_id = _first_string(
            self.call("CreateContainer", _msg((1, sandbox_id), (2, config), (3, sandbox)))
        )
        self.call("StartContainer", _msg((1, container_id)))
        return CriPod(sandbox_id, container_id, uid, name, namespace, container_name, parent)


# --- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runtime_image(docker_engine: Any, test_image: str) -> bytes:
    """The test image as an archive named :data:`RUNTIME_IMAGE`, for ``podman load``/``ctr``."""
    return runtime_image_archive(docker_engine, test_image)


class _Runtime(Protocol):
    def close(self) -> None: ...


R = TypeVar("R", bound=_Runtime)


@contextlib.contextmanager
def _started(tag: str, start: Callable[[Path], R]) -> Iterator[R]:
    """A runtime started in a private directory of its own (``private_dir(tag)``).

    A start that fails removes the directory; once started, the runtime's own ``close`` ends
    it and removes what it made.
    """
    base = private_dir(tag)
    try:
        runtime = start(base)
    except BaseException:
        shutil.rmtree(base, ignore_errors=True)
        raise
    try:
        yield runtime
    finally:
        runtime.close()


@pytest.fixture(scope="module")
def rootful_podman(runtime_image: bytes) -> Iterator[Podman]:
    """Rootful podman, private storage, cgroupfs manager (the test image loaded)."""
    with _started("podman", lambda base: start_podman(runtime_image, None, base)) as podman:
        yield podman


@pytest.fixture(scope="module")
def rootless_podman(runtime_image: bytes) -> Iterator[Podman]:
    """podman as :data:`ROOTLESS_USER` (cgroup v1: its containers get no cgroup)."""

    def start(base: Path) -> Podman:
        return start_podman(runtime_image, rootless_user(base), base)

    with _started("podman-rl", start) as podman:
        yield podman


@pytest.fixture(scope="module")
def rootless_docker(runtime_image: bytes) -> Iterator[RootlessDocker]:
    """Rootless Docker (rootlesskit + slirp4netns) as :data:`ROOTLESS_USER`."""

    def start(base: Path) -> RootlessDocker:
        return start_rootless_docker(runtime_image, rootless_user(base), base)

    with _started("docker-rl", start) as docker:
        yield docker


@pytest.fixture(scope="module")
def containerd(runtime_image: bytes) -> Iterator[Containerd]:
    """A private containerd instance (``ctr`` and its CRI plugin)."""
    with _started("containerd", lambda base: start_containerd(runtime_image, base)) as ctrd:
        yield ctrd
