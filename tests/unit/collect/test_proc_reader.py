"""The per-PID reader (ProcSource) against real processes, prepared /proc-like directories
and real containers: live facts as psutil gives them, kept descriptors, PID reuse, hidepid,
exec, bounded reads, the in-container PID.
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import json
import os
import pwd
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from gputui.collect.linux import fileio
from gputui.collect.linux import proc_reader as reader_module
from gputui.collect.linux.membership import (
    parse_cgroup,
    parse_nspid,
)
from gputui.collect.linux.proc_reader import MAX_CMDLINE_BYTES, ProcSource
from gputui.model.processes import ProcessInfo, Visibility
from tests.support.procfs import (
    BUSY_CODE,
    NOBODY,
    SLEEP_CODE,
    Spawn,
    as_nobody,
    cpu_ticks,
    end_child,
    wait_ready,
)

DOCKER_ID = "c3da37be2142bda84fb414cdb8eb48548f2b3b6b9c24da6b37de18a260e967d8"
OTHER_ID = "a51a9f7d073f848e7fc59e56e8f11524f330a2175a4ed26327da2dfe0d28015f"


def _unused_pid() -> int:
    # PIDs are always below pid_max, so pid_max itself can never exist.
    return int(Path("/proc/sys/kernel/pid_max").read_text())


def _wait_for_zombie(pid: int) -> None:
    deadline = time.monotonic() + 10
    while psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "child never became a zombie"
        time.sleep(0.01)


def _respawn_with_pid(pid: int, code: str) -> subprocess.Popen[bytes]:
    """Start a new process that gets exactly ``pid`` (real PID reuse), or skip.

    Writing ``ns_last_pid`` (root, CAP_SYS_ADMIN) makes the kernel hand out ``pid`` next; another
    process forking at the same instant can steal it, hence the retries.
    """
    last_pid = Path("/proc/sys/kernel/ns_last_pid")
    for _ in range(20):
        try:
            last_pid.write_text(str(pid - 1))
        except OSError:
            pytest.skip("cannot steer PID allocation (needs root in the PID namespace)")
        child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
        if child.pid == pid:
            return wait_ready(child)
        end_child(child)
    pytest.skip("another process kept taking the PID")


# --- a prepared proc_root ---------------------------------------------------------------------


def _host_namespace(root: Path) -> None:
    """Make a prepared root say what the real /proc says in the host PID namespace."""
    (root / "self" / "ns").mkdir(parents=True, exist_ok=True)
    (root / "self" / "ns" / "pid").symlink_to("pid:[4026531836]")
    (root / "self" / "status").write_text(f"Name:\tpython\nNSpid:\t{os.getpid()}\n")


def _write_proc(root: Path, pid: int, cgroup: str | None, status: str | None) -> None:
    (root / str(pid)).mkdir(parents=True, exist_ok=True)
    if cgroup is not None:
        (root / str(pid) / "cgroup").write_text(cgroup)
    if status is not None:
        (root / str(pid) / "status").write_text(status)


@pytest.fixture
def children(spawn: Spawn) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Start sleeping children, as this user or another (all killed and reaped at the end)."""
    others: list[subprocess.Popen[bytes]] = []

    def start(user: int | None = None) -> subprocess.Popen[bytes]:
        if user is None:
            return spawn(SLEEP_CODE)
        # Another user cannot run this interpreter: a plain sleep.
        child = subprocess.Popen(["sleep", "60"], user=user)
        others.append(child)
        deadline = time.monotonic() + 10
        # Exec'd and asleep in nanosleep (its libraries loaded: the RSS holds from here).
        while Path(f"/proc/{child.pid}/stat").read_text().split(") ")[1][0] != "S" or (
            Path(f"/proc/{child.pid}/comm").read_text() != "sleep\n"
        ):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        return child

    yield start
    for child in others:
        end_child(child)


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _old_style(pid: int) -> dict[str, object]:
    """What the psutil-based source read for a live process."""
    proc = psutil.Process(pid)
    with open(f"/proc/{pid}/statm", "rb") as fh:  # a fresh open per refresh
        resident = int(fh.read().split()[1])
    return {
        "user": proc.username(),
        "start_time": proc.create_time(),
        "rss_bytes": resident * os.sysconf("SC_PAGE_SIZE"),
        "name": proc.name(),
        "command": " ".join(proc.cmdline()),
    }


def _new_style(info: ProcessInfo) -> dict[str, object]:
    return {
        "user": info.user,
        "start_time": info.start_time,
        "rss_bytes": info.rss_bytes,
        "name": info.name,
        "command": info.command,
    }


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


# --- exec -----------------------------------------------------------------------------------------


def _wait_for_command(source: ProcSource, pid: int, expected: str) -> ProcessInfo:
    deadline = time.monotonic() + 10
    while True:
        info = source.read([pid])[pid]
        if info.command == expected or time.monotonic() > deadline:
            return info
        time.sleep(0.05)


CONTAINER_LINE = f"0::/system.slice/docker-{DOCKER_ID}.scope\n"


# --- read() over live processes -------------------------------------------------------------


def test_live_child_facts(sleeper: subprocess.Popen[bytes]) -> None:
    before = time.time()
    info = ProcSource().read([sleeper.pid])[sleeper.pid]
    ps = psutil.Process(sleeper.pid)
    assert info.exists
    assert info.pid == sleeper.pid
    assert info.command == f"{sys.executable} -c {SLEEP_CODE}"
    assert info.name == ps.name()
    assert info.user == pwd.getpwuid(os.getuid()).pw_name
    resident_pages = int(Path(f"/proc/{sleeper.pid}/statm").read_text().split()[1])
    assert info.rss_bytes == resident_pages * os.sysconf("SC_PAGE_SIZE")  # a sleeper's RSS holds
    assert info.rss_bytes > 1_000_000  # a started Python interpreter is well over 1 MB
    assert info.start_time is not None
    assert abs(info.start_time - ps.create_time()) < 0.01
    assert before - 15 < info.start_time <= before + 1
    assert info.cpu_percent is None  # first sample
    assert not info.access_denied


def test_an_empty_command_line_is_read_again_at_the_next_refresh(
    sleeper: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read between fork and exec (or while exiting), a command line is empty: not kept."""
    real = fileio.read_capped
    empty_once = [f"/proc/{sleeper.pid}/cmdline"]

    def read_capped(path: str | os.PathLike[str], limit: int) -> tuple[bytes | None, int]:
        if str(path) in empty_once:
            empty_once.remove(str(path))
            return b"", 0
        return real(path, limit)

    monkeypatch.setattr(reader_module, "read_capped", read_capped)
    source = ProcSource()
    first = source.read([sleeper.pid])[sleeper.pid]
    assert first.command == first.name  # only the name was there to show
    again = source.read([sleeper.pid])[sleeper.pid]
    assert again.command == f"{sys.executable} -c {SLEEP_CODE}"
    source.close()


def test_live_child_container_fields_match_our_own_cgroup(
    sleeper: subprocess.Popen[bytes],
) -> None:
    # The child inherits our cgroup and PID namespace, so its facts are predictable from ours.

    ours = parse_cgroup(Path("/proc/self/cgroup").read_text())
    own_ns_pid = parse_nspid(Path(f"/proc/{sleeper.pid}/status").read_text())
    info = ProcSource().read([sleeper.pid])[sleeper.pid]
    assert info.container_id == (ours.container_id if ours else None)
    assert info.container_pid == own_ns_pid == sleeper.pid


def test_cpu_percent_is_none_first_then_real_for_a_busy_process(
    spawn: Spawn,
) -> None:
    busy = spawn(BUSY_CODE)
    source = ProcSource()
    # The truth, read independently around the same two samples: on a loaded machine a
    # spinning process gets less than a core, so no fixed figure is right.
    started, ticks = time.monotonic(), cpu_ticks(busy.pid)
    assert source.read([busy.pid])[busy.pid].cpu_percent is None
    time.sleep(0.5)
    cpu = source.read([busy.pid])[busy.pid].cpu_percent
    truth = (
        100.0
        * (cpu_ticks(busy.pid) - ticks)
        / os.sysconf("SC_CLK_TCK")
        / (time.monotonic() - started)
    )
    assert cpu is not None
    assert truth > 5.0  # it did spin
    assert abs(cpu - truth) <= 5.0 + 0.15 * truth  # clock ticks are 10 ms of 0.5 s: 2 %


def test_idle_process_cpu_is_near_zero(sleeper: subprocess.Popen[bytes]) -> None:
    source = ProcSource()
    source.read([sleeper.pid])
    time.sleep(0.3)
    cpu = source.read([sleeper.pid])[sleeper.pid].cpu_percent
    assert cpu is not None
    assert cpu < 5.0


def test_cpu_sample_waits_for_a_minimum_interval(
    spawn: Spawn,
) -> None:
    busy = spawn(BUSY_CODE)
    now = [100.0]
    source = ProcSource(clock=lambda: now[0])
    assert source.read([busy.pid])[busy.pid].cpu_percent is None
    time.sleep(0.3)
    # The injected clock says no time passed: a sample now would be noise, so none is taken.
    assert source.read([busy.pid])[busy.pid].cpu_percent is None
    now[0] += 1.0
    first = source.read([busy.pid])[busy.pid].cpu_percent
    assert first is not None
    # Its CPU over the samples (about 0.3 s of real time, at most ~30 % of the injected 1 s;
    # less on a loaded machine), not the nothing an idle process shows.
    assert first >= 5.0
    # Too soon again: the previous value is repeated, not a fresh noisy sample.
    assert source.read([busy.pid])[busy.pid].cpu_percent == first


def test_pid_that_exits_between_reads(sleeper: subprocess.Popen[bytes]) -> None:
    source = ProcSource()
    assert source.read([sleeper.pid])[sleeper.pid].exists
    sleeper.kill()
    sleeper.wait()
    assert source.read([sleeper.pid]) == {sleeper.pid: ProcessInfo(sleeper.pid, exists=False)}


@pytest.mark.parametrize("pid", [_unused_pid(), 0, -1])
def test_nonexistent_pid(pid: int) -> None:
    assert ProcSource().read([pid]) == {pid: ProcessInfo(pid, exists=False)}


def test_read_many_pids_with_duplicates(sleeper: subprocess.Popen[bytes]) -> None:
    gone = _unused_pid()
    result = ProcSource().read([sleeper.pid, gone, sleeper.pid, os.getpid()])
    assert set(result) == {sleeper.pid, gone, os.getpid()}
    assert result[sleeper.pid].exists
    assert result[os.getpid()].exists
    assert not result[gone].exists


def test_zombie_exists_with_what_can_be_read(
    spawn: Spawn,
) -> None:
    child = spawn("pass")
    _wait_for_zombie(child.pid)  # exited, not reaped: Popen does not wait until asked
    info = ProcSource().read([child.pid])[child.pid]
    assert info.exists
    assert info.name  # comm survives in /proc/<pid>/stat
    assert info.command == info.name  # no cmdline left: falls back to the name
    assert info.user == pwd.getpwuid(os.getuid()).pw_name
    assert info.start_time is not None
    assert ProcSource().send_signal(child.pid, signal.SIGTERM, info.start_time) == (
        f"process {child.pid} has already exited (a zombie its parent has not reaped)"
    )


def test_pid_reuse_detected_through_start_time(sleeper: subprocess.Popen[bytes]) -> None:
    source = ProcSource()
    info = source.read([sleeper.pid])[sleeper.pid]
    assert info.start_time is not None
    # The caller remembers a process that started a minute earlier under the same PID.
    message = source.send_signal(sleeper.pid, signal.SIGTERM, info.start_time - 60)
    assert message == f"PID {sleeper.pid} now belongs to another process"
    time.sleep(0.1)
    assert sleeper.poll() is None  # and the innocent process was left alone


def test_real_pid_reuse_is_a_new_process(tmp_path: Path, spawn: Spawn) -> None:
    old = spawn(BUSY_CODE)
    _write_proc(tmp_path, old.pid, f"0::/docker/{DOCKER_ID}\n", "NSpid:\t1\n")
    _host_namespace(tmp_path)
    source = ProcSource(tmp_path)
    assert source.read([old.pid])[old.pid].cpu_percent is None
    time.sleep(0.3)
    before = source.read([old.pid])[old.pid]
    assert before.cpu_percent is not None
    assert before.container_id == DOCKER_ID
    old.kill()
    old.wait()
    _write_proc(tmp_path, old.pid, f"0::/docker/{OTHER_ID}\n", "NSpid:\t2\n")
    new = _respawn_with_pid(old.pid, SLEEP_CODE)
    try:
        after = source.read([old.pid])[old.pid]
        assert after.exists
        assert after.start_time != before.start_time
        assert after.cpu_percent is None  # a new process: no CPU sample carried over
        assert (after.container_id, after.container_pid) == (OTHER_ID, 2)  # facts re-read
        assert source.send_signal(old.pid, signal.SIGTERM, before.start_time) == (
            f"PID {old.pid} now belongs to another process"
        )
        assert new.poll() is None
    finally:
        new.kill()
        new.wait()
        assert new.stdout is not None
        new.stdout.close()


def test_access_denied_command_line_is_flagged(
    sleeper: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Running as root nothing read here is ever denied (and as nobody, cmdline, stat, statm and
    # status of other users stay world-readable without hidepid), so the kernel's EACCES is
    # simulated for the command line only.
    real = fileio.read_capped

    def denied(path: str | os.PathLike[str], limit: int) -> tuple[bytes | None, int]:
        if str(path).endswith("/cmdline"):
            return None, errno.EACCES
        return real(path, limit)

    monkeypatch.setattr(reader_module, "read_capped", denied)
    info = ProcSource().read([sleeper.pid])[sleeper.pid]
    assert info.exists
    assert info.access_denied
    assert info.command == info.name  # falls back to the name it could read
    assert info.rss_bytes is not None


def test_proc_root_container_process_of_a_live_child(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    _write_proc(
        tmp_path,
        sleeper.pid,
        f"0::/system.slice/docker-{DOCKER_ID}.scope\n",
        f"Name:\tpython3\nNSpid:\t{sleeper.pid}\t7\n",
    )
    info = ProcSource(tmp_path).read([sleeper.pid])[sleeper.pid]
    assert info.exists
    assert (info.container_id, info.runtime, info.container_pid) == (DOCKER_ID, "docker", 7)
    assert info.command == f"{sys.executable} -c {SLEEP_CODE}"  # psutil, live


def test_proc_root_fixture_only_pid(tmp_path: Path) -> None:
    fake = _unused_pid()
    pod = "15513b48-e7a5-48fc-b9e3-92f713f36504"
    _write_proc(
        tmp_path,
        fake,
        f"11:memory:/kubepods/burstable/pod{pod}/{OTHER_ID}\n0::/\n",
        f"Name:\ttrainer\nUmask:\t0022\nNSpid:\t{fake}\t1\n",
    )
    info = ProcSource(tmp_path).read([fake])[fake]
    assert info == ProcessInfo(
        fake,
        command="trainer",
        name="trainer",
        container_id=OTHER_ID,
        runtime="kubernetes",
        pod_uid=pod,
        container_pid=1,
    )


def test_proc_root_live_child_without_files_is_a_host_process(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    info = ProcSource(tmp_path).read([sleeper.pid])[sleeper.pid]
    assert info.exists
    assert info.container_id is None
    assert info.container_pid is None
    assert info.command is not None


def test_missing_pid_with_and_without_a_fixture_dir(tmp_path: Path) -> None:
    # The fixture fallback applies only to PIDs the prepared directory describes.
    fake = _unused_pid()
    assert ProcSource().read([fake])[fake] == ProcessInfo(fake, exists=False)
    assert ProcSource(tmp_path).read([fake])[fake] == ProcessInfo(fake, exists=False)


def test_cgroup_parse_cached_per_process_and_dropped_when_not_asked(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    _write_proc(tmp_path, sleeper.pid, f"0::/docker/{DOCKER_ID}\n", "NSpid:\t5\t1\n")
    source = ProcSource(tmp_path)
    assert source.read([sleeper.pid])[sleeper.pid].container_id == DOCKER_ID
    _write_proc(tmp_path, sleeper.pid, f"0::/docker/{OTHER_ID}\n", "NSpid:\t5\t2\n")
    # Same process (same start time): the cached parse is used, the file is not read again.
    cached = source.read([sleeper.pid])[sleeper.pid]
    assert (cached.container_id, cached.container_pid) == (DOCKER_ID, 1)
    # A refresh that no longer asks for the PID drops it; asking again reads the files afresh.
    assert source.read([]) == {}
    fresh = source.read([sleeper.pid])[sleeper.pid]
    assert (fresh.container_id, fresh.container_pid) == (OTHER_ID, 2)


def test_unreadable_cgroup_file_sets_access_denied(sleeper: subprocess.Popen[bytes]) -> None:
    # Root reads a mode-000 file anyway, so the read runs as nobody in a directory it can enter.
    root = Path(tempfile.mkdtemp(prefix="gputui-proc-"))
    try:
        root.chmod(0o755)
        _write_proc(root, sleeper.pid, f"0::/docker/{DOCKER_ID}\n", "NSpid:\t9\t3\n")
        (root / str(sleeper.pid)).chmod(0o755)
        (root / str(sleeper.pid) / "status").chmod(0o644)
        (root / str(sleeper.pid) / "cgroup").chmod(0o000)

        def read() -> list[object]:
            info = ProcSource(root).read([sleeper.pid])[sleeper.pid]
            return [info.exists, info.access_denied, info.container_id, info.container_pid]

        assert as_nobody(read) == [True, True, None, 3]
    finally:
        for path in sorted(root.rglob("*"), reverse=True):
            path.chmod(0o700)
            path.unlink() if path.is_file() else path.rmdir()
        root.rmdir()


def test_constructor_does_no_io(tmp_path: Path) -> None:
    ProcSource(tmp_path / "does-not-exist")  # must not raise or touch the path
    assert not (tmp_path / "does-not-exist").exists()


def test_kept_reads_give_the_old_style_values(
    children: Callable[..., subprocess.Popen[bytes]],
) -> None:
    mine = children()
    other = children(user=NOBODY) if os.geteuid() == 0 else children()
    pids = [mine.pid, other.pid, os.getppid()]
    source = ProcSource()
    first = source.read(pids)
    assert source.kept_fds == 2 * len(pids)  # stat and statm of each, kept open
    time.sleep(reader_module.MIN_CPU_INTERVAL_S + 0.05)
    second = source.read(pids)  # through the kept descriptors
    fresh = ProcSource().read(pids)  # a new source opens every file afresh
    for pid in (mine.pid, other.pid):
        assert second[pid].exists
        assert _new_style(second[pid]) == _old_style(pid)
        assert _new_style(first[pid]) == _old_style(pid)
        assert second[pid].cpu_percent == 0.0  # a sleeper, over a real interval
        assert dataclasses.replace(second[pid], cpu_percent=None) == fresh[pid]
    if os.geteuid() == 0:
        assert second[other.pid].user == "nobody"
    # The parent (pytest's runner or a shell) may allocate between reads: only fixed facts.
    parent = _old_style(os.getppid())
    assert second[os.getppid()].start_time == parent["start_time"]
    assert second[os.getppid()].user == parent["user"]


def test_unchanged_process_gets_the_same_object_back(
    children: Callable[..., subprocess.Popen[bytes]],
) -> None:
    child = children()
    source = ProcSource()
    source.read([child.pid])
    time.sleep(reader_module.MIN_CPU_INTERVAL_S + 0.05)
    second = source.read([child.pid])[child.pid]
    time.sleep(reader_module.MIN_CPU_INTERVAL_S + 0.05)
    third = source.read([child.pid])[child.pid]
    assert third == second
    assert third is second  # nothing rebuilt for a sleeper whose figures did not move


def test_descriptors_are_closed_when_processes_go(
    children: Callable[..., subprocess.Popen[bytes]],
) -> None:
    kids = [children() for _ in range(3)]
    pids = [k.pid for k in kids]
    baseline = _open_fds()
    source = ProcSource()
    source.read(pids)
    assert source.kept_fds == 6
    assert _open_fds() == baseline + 6
    kids[0].kill()
    kids[0].wait()  # reaped: its kept descriptors now fail with ESRCH
    after = source.read(pids)
    assert not after[pids[0]].exists
    assert after[pids[1]].exists and after[pids[2]].exists
    assert source.kept_fds == 4
    source.read(pids[2:])  # nobody asks about the second one any more
    assert source.kept_fds == 2
    source.close()
    assert source.kept_fds == 0
    assert _open_fds() == baseline
    assert source.read(pids[2:])[pids[2]].exists  # a closed source opens them again
    source.close()


def test_descriptor_budget_is_a_bound_not_a_behaviour(
    children: Callable[..., subprocess.Popen[bytes]],
) -> None:
    kids = [children() for _ in range(4)]
    pids = [k.pid for k in kids]
    limited = ProcSource()
    limited._files.limit = 3
    unlimited = ProcSource()
    for _ in range(2):
        got, want = limited.read(pids), unlimited.read(pids)
        assert limited.kept_fds <= 3
        for pid in pids:
            assert dataclasses.replace(got[pid], cpu_percent=None) == dataclasses.replace(
                want[pid], cpu_percent=None
            )
    assert 0 < reader_module.kept_fd_budget() <= reader_module.MAX_KEPT_FDS


def test_pid_reuse_is_never_read_through_an_old_descriptor(
    children: Callable[..., subprocess.Popen[bytes]],
) -> None:
    # A kept descriptor is bound to the process it was opened for: once that one is reaped,
    # pread fails with ESRCH (never another process's numbers), and the source opens afresh.
    child = children()
    fd = os.open(f"/proc/{child.pid}/stat", os.O_RDONLY)
    try:
        assert os.pread(fd, 4096, 0).startswith(f"{child.pid} (".encode())
        child.kill()
        child.wait()
        with pytest.raises(ProcessLookupError):
            os.pread(fd, 4096, 0)
    finally:
        os.close(fd)


def test_zombie_keeps_no_rss(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    try:
        source = ProcSource()
        for _ in range(2):  # fresh, then through the kept stat descriptor
            info = source.read([child.pid])[child.pid]
            assert info.exists and info.rss_bytes is None and info.cpu_percent is None
            assert info.start_time == psutil.Process(child.pid).create_time()
        child.wait()
        assert not source.read([child.pid])[child.pid].exists
        assert source.kept_fds == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


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
    from gputui.recording.codec import decode, encode

    for value in (
        ProcessInfo(7, access_denied=True, proc_hidden=True),
        Visibility(None, False, proc_hidepid="invisible"),
    ):
        assert decode(type(value), encode(value)) == value


def test_huge_command_line_of_a_live_process_is_cut(spawn: Spawn) -> None:
    # Three arguments just under one argument's kernel limit: 384 KiB of command line.
    big = ["A" * (MAX_CMDLINE_BYTES - 16)] * 3
    child = spawn("import time; print('ready', flush=True); time.sleep(30)", *big)
    info = ProcSource().read([child.pid])[child.pid]
    assert info.command is not None
    assert info.command.startswith(f"{sys.executable} -c import time")
    assert len(info.command) <= MAX_CMDLINE_BYTES + 1
    assert info.command.endswith("A…")


def test_oversized_cgroup_and_status_files_are_read_only_up_to_their_limit(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    pid_dir = tmp_path / str(sleeper.pid)
    pid_dir.mkdir()
    # 8 MiB of junk before the facts: a reader that takes it all in is the defect.
    (pid_dir / "cgroup").write_text("9:cpu:/" + "x" * (8 << 20) + "\n" + CONTAINER_LINE)
    (pid_dir / "status").write_text("Groups:\t" + "1 " * (4 << 20) + "\nNSpid:\t5\t1\n")
    started = time.monotonic()
    info = ProcSource(tmp_path).read([sleeper.pid])[sleeper.pid]
    assert time.monotonic() - started < 2.0
    assert info.exists
    assert (info.container_id, info.container_pid) == (None, None)


# --- in-container PIDs in a sub-PID namespace of a real container ---------------------------


def _container_pids(container: Any) -> dict[str, int]:
    """Command line → PID, as the container's own ``/proc`` lists its processes."""
    script = 'for d in /proc/[0-9]*; do echo "@${d#/proc/}"; cat "$d/cmdline"; echo; done'
    result = container.exec_run(["sh", "-c", script])
    assert result.exit_code == 0, result.output
    pids: dict[str, int] = {}
    for entry in result.output.split(b"\n@"):
        number, _, cmdline = entry.lstrip(b"@").partition(b"\n")
        if number.isdigit() and cmdline.strip(b"\n"):
            pids[cmdline.strip(b"\n").replace(b"\x00", b" ").decode().strip()] = int(number)
    return pids


def _host_pids(container: Any, commands: set[str]) -> dict[str, int]:
    """Command line → host PID, from ``docker top``, once every one of ``commands`` runs."""
    deadline = time.monotonic() + 20
    while True:
        top = container.top()
        pid_at, cmd_at = top["Titles"].index("PID"), top["Titles"].index("CMD")
        found = {row[cmd_at]: int(row[pid_at]) for row in top["Processes"]}
        if commands <= found.keys():
            return found
        assert time.monotonic() < deadline, found
        time.sleep(0.05)


def test_in_container_pid_inside_a_sub_pid_namespace(run_container: Callable[..., Any]) -> None:
    """A process in a PID namespace of its own inside a container has its container's PID.

    ``unshare -fp`` in the container starts a shell that is PID 1 of a new namespace; its two
    sleeps are PIDs 1 and 2 there, and other numbers in the container: the last ``NSpid`` field
    is the sub-namespace's, the container's is the one at the depth of the container's init.
    """
    inner = "busybox sleep 3001 & exec busybox sleep 3002"
    box = run_container(
        ["sh", "-c", f"busybox unshare -fp --mount-proc busybox sh -c '{inner}' & wait"],
        network_mode="none",
        cap_add=["SYS_ADMIN"],  # unshare(CLONE_NEWPID) and the proc mount need it
    )
    sleeps = {"busybox sleep 3001", "busybox sleep 3002"}
    host = _host_pids(box, sleeps)
    inside = _container_pids(box)
    assert sleeps <= inside.keys(), inside
    source = ProcSource()
    try:
        infos = source.read(host.values())
    finally:
        source.close()
    for command, host_pid in host.items():
        if command not in inside:  # `docker top` lists the exec'd reader too
            continue
        info = infos[host_pid]
        assert info.container_id == box.id
        assert info.container_pid == inside[command], (command, info)
    # The sleeps really are in a namespace below the container's (else nothing was tested).
    status = Path(f"/proc/{host['busybox sleep 3002']}/status").read_text()
    assert [line.split()[-1] for line in status.splitlines() if line.startswith("NSpid:")] == ["1"]


def _stat_line(pid: int, ppid: int) -> str:
    return f"{pid} (sh) S {ppid} " + " ".join(["0"] * 48) + "\n"


@pytest.mark.parametrize(
    ("parent_cgroup", "expected"),
    [
        (f"0::/system.slice/docker-{DOCKER_ID}.scope\n", 10),  # the same container: its depth
        (f"0::/system.slice/docker-{OTHER_ID}.scope\n", 1),  # another (outer) one: not climbed
    ],
)
def test_in_container_pid_from_the_ancestors_in_the_container(
    tmp_path: Path, parent_cgroup: str, expected: int
) -> None:
    """shim → init (PID 1) → unshare (PID 9) → a sub-namespace's init (PID 10, 1 below)."""
    container = f"0::/system.slice/docker-{DOCKER_ID}.scope\n"
    leaf = _unused_pid()
    tree = {
        7000: (1, "0::/system.slice/containerd.service\n", "7000"),
        7001: (7000, container, "7001\t1"),
        7002: (7001, parent_cgroup, "7002\t9"),
        leaf: (7002, container, f"{leaf}\t10\t1"),
    }
    for pid, (ppid, cgroup, nspid) in tree.items():
        _write_proc(tmp_path, pid, cgroup, f"Name:\tsh\nNSpid:\t{nspid}\n")
        (tmp_path / str(pid) / "stat").write_text(_stat_line(pid, ppid))
    info = ProcSource(tmp_path).read([leaf])[leaf]
    assert (info.container_id, info.container_pid) == (DOCKER_ID, expected)
