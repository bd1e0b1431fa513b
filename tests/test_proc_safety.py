"""Signals never reach the wrong process; hidepid-hidden processes are not "gone"; exec is seen.

Every would-be victim is a real child process, checked to be alive after a refused signal.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gputui.collect.linux.host_view import HOST_PID_NS_LINK
from gputui.collect.linux.proc_parse import PF_KTHREAD
from gputui.collect.linux.proc_reader import ProcSource
from gputui.model import ProcessInfo

NOBODY = 65534
SLEEP_CODE = "print('ready', flush=True); import time; time.sleep(30)"
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def victim() -> Iterator[subprocess.Popen[bytes]]:
    """A sleeping child that a wrong signal would kill."""
    child = subprocess.Popen([sys.executable, "-c", SLEEP_CODE], stdout=subprocess.PIPE)
    assert child.stdout is not None
    assert child.stdout.readline() == b"ready\n"
    yield child
    if child.poll() is None:
        child.kill()
    child.wait()
    child.stdout.close()


def _start(pid: int) -> float:
    start = ProcSource().read([pid])[pid].start_time
    assert start is not None
    return start


def _alive(child: subprocess.Popen[bytes]) -> bool:
    time.sleep(0.1)  # a delivered SIGKILL takes effect well within this
    return child.poll() is None


def _prepared_root(
    root: Path, ns_link: str | None = HOST_PID_NS_LINK, nspid: str | None = None
) -> Path:
    """A proc root that says which PID namespace gputui is in."""
    (root / "self" / "ns").mkdir(parents=True)
    if ns_link is not None:
        (root / "self" / "ns" / "pid").symlink_to(ns_link)
    (root / "self" / "status").write_text(f"Name:\tpython\nNSpid:\t{nspid or os.getpid()}\n")
    return root


def _stat_line(pid: int, ppid: int, flags: int) -> str:
    # Fields 3.. of proc(5): state ppid pgrp session tty tpgid flags ... starttime(22) ...
    fields = ["S", str(ppid), "0", "0", "0", "-1", str(flags)] + ["0"] * 45
    return f"{pid} (victim) {' '.join(fields)}\n"


# --- signal refusals ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("link", "nspid", "why"),
    [
        ("pid:[4026532178]", None, "gputui is not in the host PID namespace"),
        # unshare --pid --fork without --mount-proc: /proc (and kthreadd) are the host's, but
        # gputui's own PIDs live in a child namespace (NSpid has two fields).
        (None, "27227\t2", "gputui is not in the host PID namespace"),
        (HOST_PID_NS_LINK, "27227\t2", "gputui is not in the host PID namespace"),
    ],
)
def test_signal_refused_outside_the_host_pid_namespace(
    tmp_path: Path, victim: subprocess.Popen[bytes], link: str | None, nspid: str | None, why: str
) -> None:
    root = _prepared_root(tmp_path, link, nspid)
    (root / "2").mkdir()
    (root / "2" / "comm").write_text("kthreadd\n")  # what the old check trusted
    source = ProcSource(root)
    assert source.visibility().host_pid_namespace is False
    message = source.send_signal(victim.pid, signal.SIGKILL, _start(victim.pid))
    assert message == (
        f"refusing to signal PID {victim.pid}: {why}, so NVML's PID may name another process"
    )
    assert _alive(victim)


def test_signal_refused_when_the_namespace_cannot_be_told(
    tmp_path: Path, victim: subprocess.Popen[bytes]
) -> None:
    root = _prepared_root(tmp_path, ns_link=None)
    (root / "2" / "comm").mkdir(parents=True)  # unreadable as a file (EISDIR): unknown
    source = ProcSource(root)
    assert source.visibility().host_pid_namespace is None
    message = source.send_signal(victim.pid, signal.SIGKILL, _start(victim.pid))
    assert message is not None
    assert "cannot tell whether it is in the host PID namespace" in message
    assert _alive(victim)


def test_signal_refused_without_a_start_time(victim: subprocess.Popen[bytes]) -> None:
    message = ProcSource().send_signal(victim.pid, signal.SIGKILL, None)
    assert message == (
        f"refusing to signal PID {victim.pid}: its start time is unknown, so a reused PID "
        "cannot be ruled out"
    )
    assert _alive(victim)


# PIDs as functions: a test id must not depend on the process collecting it (pytest-xdist).
@pytest.mark.parametrize(
    ("which", "why"),
    [
        (lambda: 1, "it is init"),
        (lambda: 2, "it is kthreadd"),
        (os.getpid, "it is gputui itself"),
        (os.getppid, "it is gputui's parent process"),
    ],
    ids=["init", "kthreadd", "self", "parent"],
)
def test_signal_refused_for_init_kthreadd_gputui_and_its_parent(
    which: Callable[[], int], why: str
) -> None:
    pid = which()
    # Signal 0 delivers nothing, so an unrefused call (the defect) would only return None.
    message = ProcSource().send_signal(pid, 0, _start(pid))
    assert message is not None
    assert message.startswith(f"refusing to signal PID {pid}: {why}")


@pytest.mark.parametrize(("ppid", "flags"), [(1, PF_KTHREAD | 0x40), (2, 0)])
def test_signal_refused_for_a_kernel_thread_from_its_stat(
    tmp_path: Path, victim: subprocess.Popen[bytes], ppid: int, flags: int
) -> None:
    root = _prepared_root(tmp_path)
    (root / str(victim.pid)).mkdir()
    (root / str(victim.pid) / "stat").write_text(_stat_line(victim.pid, ppid, flags))
    message = ProcSource(root).send_signal(victim.pid, signal.SIGKILL, _start(victim.pid))
    assert message == f"refusing to signal PID {victim.pid}: it is a kernel thread"
    assert _alive(victim)


def test_signal_refused_for_a_real_kernel_thread() -> None:
    children = Path("/proc/2/task/2/children")
    if not children.exists() or not children.read_text().split():
        pytest.skip("no kernel threads visible")
    kthread = int(children.read_text().split()[0])
    message = ProcSource().send_signal(kthread, 0, _start(kthread))
    assert message == f"refusing to signal PID {kthread}: it is a kernel thread"


_IN_NAMESPACE = """
import json, subprocess, sys, time
from gputui.collect.linux.proc_reader import ProcSource
child = subprocess.Popen(["sleep", "30"])
time.sleep(0.05)
source = ProcSource()
info = source.read([child.pid])[child.pid]
message = source.send_signal(child.pid, 9, info.start_time)
time.sleep(0.1)
alive = child.poll() is None
child.kill()
child.wait()
print(json.dumps([source.visibility().host_pid_namespace, message, alive]))
"""


@pytest.mark.parametrize("mount_proc", [True, False])
def test_signal_refused_inside_unshare_pid(mount_proc: bool) -> None:
    """End to end: gputui's process source run in a new PID namespace refuses to signal."""
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        pytest.skip("needs unshare(1) and root")
    argv = [unshare, "--pid", "--fork", *(["--mount-proc"] if mount_proc else [])]
    result = subprocess.run(
        [*argv, sys.executable, "-c", _IN_NAMESPACE],
        capture_output=True,
        timeout=30,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    if result.returncode != 0 and b"unshare failed" in result.stderr:
        pytest.skip("PID namespaces unavailable here")
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-2000:]
    host, message, alive = json.loads(result.stdout)
    assert host is False
    assert message is not None and "not in the host PID namespace" in message
    assert alive


# --- hidepid --------------------------------------------------------------------------------------


def _as_nobody(fn: Callable[[], object]) -> object:
    """Run ``fn`` in a forked child dropped to uid nobody; return its JSON-able result."""
    if os.geteuid() != 0:
        pytest.skip("needs root to switch to another user")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        status = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            os.write(write_end, json.dumps(fn()).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the unprivileged child failed"
    return json.loads(data)


def _mountinfo(options: str) -> str:
    return (
        "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
        f"23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw{options}\n"
        "24 22 0:22 / /sys rw,relatime shared:7 - sysfs sysfs rw\n"
    )


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory another user can read (pytest's tmp_path is private to its owner)."""
    path = Path(tempfile.mkdtemp(prefix="gputui-proc-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def _hidepid_root(base: Path, options: str) -> Path:
    """A prepared /proc as a user sees it under hidepid: no kthreadd, no PID 1, no ns link."""
    root = base / "proc"
    (root / "self").mkdir(parents=True)
    (root / "self" / "mountinfo").write_text(_mountinfo(options))
    for path in (root, root / "self"):
        path.chmod(0o755)
    (root / "self" / "mountinfo").chmod(0o644)
    return root


#: Mount options of /proc → the hidepid value gputui (as nobody) reports.
HIDEPID_CASES = {
    ",hidepid=2": "2",
    ",hidepid=invisible,gid=4242": "invisible",
    "": None,
    ",hidepid=0": None,
    ",hidepid=2,gid=65534": None,  # nobody's own group is exempt through gid=
}


def test_hidepid_seen_from_a_prepared_proc_root(shared_dir: Path) -> None:
    roots = {
        options: str(_hidepid_root(shared_dir / str(n), options))
        for n, options in enumerate(HIDEPID_CASES)
    }
    for base in {Path(r).parent for r in roots.values()}:
        base.chmod(0o755)

    def look() -> dict[str, list[object]]:
        seen: dict[str, list[object]] = {}
        for options, root in roots.items():
            visibility = ProcSource(root).visibility()
            seen[options] = [visibility.host_pid_namespace, visibility.proc_hidepid]
        return seen

    seen = _as_nobody(look)
    assert isinstance(seen, dict)
    for options, hidepid in HIDEPID_CASES.items():
        # Not "outside the host PID namespace" under hidepid: it hides kthreadd too, so the
        # namespace is unknown; without it a missing kthreadd still means another namespace.
        assert seen[options] == [None if hidepid else False, hidepid], options
    # Root sees every process whatever the options.
    assert ProcSource(roots[",hidepid=2"]).visibility().proc_hidepid is None


_CLONE_NEWNS = 0x00020000
_MS_REC, _MS_PRIVATE = 0x4000, 0x40000


def _in_hidepid_proc(fn: Callable[[], object]) -> object:
    """Run ``fn`` as nobody in a private mount namespace whose /proc has hidepid=2."""
    if os.geteuid() != 0:
        pytest.skip("needs root for a mount namespace")
    libc = ctypes.CDLL(None, use_errno=True)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        status = 1
        try:
            os.close(read_end)
            if (
                libc.unshare(_CLONE_NEWNS) != 0
                or libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0
                or libc.mount(b"proc", b"/proc", b"proc", 0, b"hidepid=2") != 0
            ):
                os.write(write_end, b'"unavailable"')
            else:
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
                os.write(write_end, json.dumps(fn()).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child in the mount namespace failed"
    result = json.loads(data)
    if result == "unavailable":
        pytest.skip("cannot mount a procfs with hidepid here")
    return result


def test_hidepid_process_is_hidden_not_gone(victim: subprocess.Popen[bytes]) -> None:
    gone = int(Path("/proc/sys/kernel/pid_max").read_text())  # never a live PID

    def look() -> list[object]:
        source = ProcSource()
        infos = source.read([victim.pid, gone, os.getpid()])
        visibility = source.visibility()
        return [
            infos[victim.pid] == ProcessInfo(victim.pid, access_denied=True, proc_hidden=True),
            infos[gone] == ProcessInfo(gone, exists=False),
            infos[os.getpid()].exists and not infos[os.getpid()].proc_hidden,
            visibility.host_pid_namespace,
            visibility.proc_hidepid,
        ]

    assert _in_hidepid_proc(look) == [True, True, True, True, "invisible"]


# --- exec -----------------------------------------------------------------------------------------


def _wait_for_command(source: ProcSource, pid: int, expected: str) -> ProcessInfo:
    deadline = time.monotonic() + 10
    while True:
        info = source.read([pid])[pid]
        if info.command == expected or time.monotonic() > deadline:
            return info
        time.sleep(0.05)


def test_exec_refreshes_command_and_name() -> None:
    child = subprocess.Popen(["sh", "-c", "sleep 0.3; exec sleep 30"])
    try:
        source = ProcSource()
        # Popen returns while the kernel is still inside exec (name set, arguments not yet
        # mapped): the command must still settle on the real one, not keep that first glimpse.
        first = _wait_for_command(source, child.pid, "sh -c sleep 0.3; exec sleep 30")
        assert first.command == "sh -c sleep 0.3; exec sleep 30"
        assert first.name == "sh"
        second = _wait_for_command(source, child.pid, "sleep 30")
        assert (second.command, second.name) == ("sleep 30", "sleep")
        assert second.start_time == first.start_time  # the same process, not a reused PID
    finally:
        child.kill()
        child.wait()


def test_exec_of_the_same_program_is_seen() -> None:
    # Same binary, same name: only the program's text and argument addresses tell the exec.
    if Path("/proc/sys/kernel/randomize_va_space").read_text().strip() == "0":
        pytest.skip("address space randomisation is off: an exec of the same program is silent")
    code = (
        "import os, sys, time; time.sleep(0.3); "
        "os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(30)', 'again'])"
    )
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        source = ProcSource()
        first = _wait_for_command(source, child.pid, f"{sys.executable} -c {code}")
        assert first.command == f"{sys.executable} -c {code}"
        expected = f"{sys.executable} -c import time; time.sleep(30) again"
        assert _wait_for_command(source, child.pid, expected).command == expected
    finally:
        child.kill()
        child.wait()


def test_hidden_process_and_hidepid_survive_record_and_replay() -> None:
    from gputui.model import Visibility
    from gputui.serialize import decode, encode

    for value in (
        ProcessInfo(7, access_denied=True, proc_hidden=True),
        Visibility(None, False, proc_hidepid="invisible"),
    ):
        assert decode(type(value), encode(value)) == value
