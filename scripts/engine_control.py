"""Real Docker engines the disruption suite may stop and start, and a tiny offline image.

Two kinds:

* :class:`PrivateEngine`: a second, real ``dockerd`` with its own socket, data root, exec root
  (so its own containerd), in a network namespace of its own (``unshare --net``) and with
  ``--iptables=false``. Stopping it disturbs nobody else's containers, which makes it the
  default on a shared machine and in CI. The network namespace matters: a second dockerd in
  the host's namespace either fights over ``docker0`` or, with ``--bridge=none``, *deletes*
  it, breaking the host engine's default network.
* :class:`HostEngine`: the machine's own ``dockerd``, stopped with SIGTERM and started again
  with the argv, working directory and environment it was started with. Every container of
  that engine stops with it unless it runs with ``--live-restore``.

Both guarantee a running engine afterwards: :meth:`ensure_running` is called from ``finally``
blocks and atexit, and a Ctrl-C during a stop still ends in a start.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from tests.support.images import ensure_busybox_image

IMAGE = "gputui-disrupt:latest"


def socket_answers(path: str, timeout: float = 1.0) -> bool:
    """Whether an engine answers ``GET /_ping`` on the unix socket ``path``."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(path)
            sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            head = sock.recv(64)
    except OSError:
        return False
    return head.startswith(b"HTTP/1.") and b" 200 " in head.split(b"\r\n", 1)[0] + b" "


def _wait(predicate: Any, timeout: float, step: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return bool(predicate())


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours is dead for our purposes.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def import_image(client: Any) -> str:
    """Import :data:`IMAGE` into the engine behind ``client`` (no registry needed).

    Built by the tests' one busybox image builder (tests/support/images.py, which imports no
    pytest); reused while its root file system is unchanged.

    Raises:
        RuntimeError: This machine has no busybox binary (``NoBusybox``).
    """
    return ensure_busybox_image(client, IMAGE)


class PrivateEngine:
    """A second real dockerd, owned by this process (root only).

    Args:
        root: Directory for its socket, data root, exec root and log (removed by :meth:`close`).
        live_restore: Start it with ``--live-restore`` (containers survive engine restarts).
    """

    def __init__(self, root: Path | None = None, *, live_restore: bool = True) -> None:
        tag = uuid.uuid4().hex[:6]
        self.root = root or Path(f"/tmp/gputui-engine-{tag}")
        self.live_restore = live_restore
        self.socket = str(self.root / "docker.sock")
        self.url = f"unix://{self.socket}"
        self.log = self.root / "dockerd.log"
        self._proc: subprocess.Popen[bytes] | None = None

    def _argv(self) -> list[str]:
        argv = [
            "unshare", "--net", "--",  # its own docker0, invisible to the host's engine
            "dockerd",
            "--host", self.url,
            "--data-root", str(self.root / "data"),
            "--exec-root", str(self.root / "exec"),
            "--pidfile", str(self.root / "docker.pid"),
            "--iptables=false",
            "--ip-masq=false",
        ]  # fmt: skip
        return [*argv, "--live-restore"] if self.live_restore else argv

    def running(self) -> bool:
        """Whether our dockerd process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def answers(self) -> bool:
        """Whether the engine answers on its socket."""
        return socket_answers(self.socket)

    def start(self, timeout: float = 60.0) -> float:
        """Start dockerd; returns the seconds until it answered ``/_ping``."""
        self.root.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        with self.log.open("ab") as log:
            self._proc = subprocess.Popen(
                self._argv(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        if not _wait(self.answers, timeout):
            raise RuntimeError(f"private dockerd did not answer within {timeout:g} s: {self.log}")
        return time.monotonic() - t0

    def stop(self, timeout: float = 60.0) -> float:
        """SIGTERM dockerd and wait for it to exit; returns the seconds it took."""
        t0 = time.monotonic()
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return 0.0
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        return time.monotonic() - t0

    def ensure_running(self) -> None:
        """Start the engine again if it is down (private engines: only while not closed)."""
        if not self.running():
            self.start()

    def close(self, client: Any = None) -> None:
        """Remove its containers, stop it, delete its files."""
        if client is not None and self.running():
            for container in client.containers.list(all=True, sparse=True):
                try:
                    client.api.remove_container(container.id, force=True)
                except Exception as exc:  # keep going: stopping the engine removes the rest
                    print(f"engine_control: cannot remove {container.id[:12]}: {exc}")
        self.stop()
        # Containers that outlived a --live-restore engine: their shims hold the exec root.
        for pid_file in (self.root / "exec").glob("**/init.pid"):
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
        for shim in _pids_matching(str(self.root / "exec")):
            with contextlib.suppress(OSError):
                os.kill(shim, signal.SIGKILL)
        # dockerd bind-mounts its data root onto itself (and overlay mounts below it); a lazy
        # unmount, deepest first, lets the directory go.
        prefix = str(self.root) + "/"
        mounts = [
            line.split()[1]
            for line in Path("/proc/mounts").read_text().splitlines()
            if line.split()[1].startswith(prefix)
        ]
        for mount in sorted(mounts, key=len, reverse=True):
            subprocess.run(["umount", "-l", mount], check=False, capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


def _pids_matching(fragment: str) -> list[int]:
    """PIDs whose command line contains ``fragment`` (this engine's shims and containerd)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if fragment in cmdline:
            found.append(int(entry))
    return found


class HostEngine:
    """This machine's own dockerd, restarted exactly the way it was started."""

    socket = "/var/run/docker.sock"
    url = "unix:///var/run/docker.sock"

    def __init__(self, log: Path | None = None) -> None:
        pid = self._find()
        if pid is None:
            raise RuntimeError("no dockerd process found (pgrep -x dockerd)")
        self.argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        self.cwd = os.readlink(f"/proc/{pid}/cwd")
        raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        self.env = dict(kv.decode(errors="replace").split("=", 1) for kv in raw if b"=" in kv)
        self.pid = pid
        self.log = log or Path(f"/tmp/gputui-dockerd-{os.getpid()}.log")

    @staticmethod
    def _find() -> int | None:
        out = subprocess.run(["pgrep", "-x", "dockerd"], capture_output=True, text=True).stdout
        for line in out.split():
            cmd = Path(f"/proc/{line}/cmdline").read_bytes()
            if b"--data-root" not in cmd or b"/var/lib/docker" in cmd:
                return int(line)
        return None

    def answers(self) -> bool:
        """Whether the engine answers on the default socket."""
        return socket_answers(self.socket)

    def stop(self, timeout: float = 60.0) -> float:
        """SIGTERM the host's dockerd and wait for it to exit."""
        t0 = time.monotonic()
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            return 0.0
        if not _wait(lambda: not _pid_alive(self.pid), timeout, 0.05):
            raise RuntimeError(f"dockerd {self.pid} did not exit within {timeout:g} s")
        return time.monotonic() - t0

    def start(self, timeout: float = 60.0) -> float:
        """Start dockerd again with its original argv, cwd and environment."""
        t0 = time.monotonic()
        with self.log.open("ab") as log:
            proc = subprocess.Popen(
                [a.decode() for a in self.argv],
                cwd=self.cwd,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # it must outlive this script, as the original did
            )
        self.pid = proc.pid
        if not _wait(self.answers, timeout):
            raise RuntimeError(f"dockerd did not answer within {timeout:g} s (log: {self.log})")
        return time.monotonic() - t0

    def running(self) -> bool:
        """Whether the dockerd we know of is alive."""
        return _pid_alive(self.pid)

    def ensure_running(self) -> None:
        """Start dockerd if it is not running (the promise: never leave the host without one)."""
        if not self.running() and not self.answers():
            self.start()
