"""Tests of ProcSource against real child processes (and prepared /proc-like directories)."""

from __future__ import annotations

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

import psutil
import pytest
from procfs import cpu_ticks

from gputui.collect.linux import proc_reader as reader_module
from gputui.collect.linux.proc_reader import ProcSource
from gputui.model import ProcessInfo, Visibility

DOCKER_ID = "c3da37be2142bda84fb414cdb8eb48548f2b3b6b9c24da6b37de18a260e967d8"
OTHER_ID = "a51a9f7d073f848e7fc59e56e8f11524f330a2175a4ed26327da2dfe0d28015f"
NOBODY = 65534


def _unused_pid() -> int:
    # PIDs are always below pid_max, so pid_max itself can never exist.
    return int(Path("/proc/sys/kernel/pid_max").read_text())


SLEEP_CODE = "print('ready', flush=True); import time; time.sleep(30)"
BUSY_CODE = "print('ready', flush=True)\nwhile True: pass"


@pytest.fixture
def spawn() -> Iterator[Callable[[str], subprocess.Popen[bytes]]]:
    """Start ``python -c CODE``; wait for its ``ready`` line when CODE prints one."""
    children: list[subprocess.Popen[bytes]] = []

    def start(code: str) -> subprocess.Popen[bytes]:
        child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
        children.append(child)
        if "ready" in code:
            assert child.stdout is not None
            assert child.stdout.readline() == b"ready\n"  # fully started, not mid-exec
        return child

    yield start
    for child in children:
        if child.poll() is None:
            child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()


@pytest.fixture
def sleeper(spawn: Callable[[str], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    return spawn(SLEEP_CODE)


def _wait_for_zombie(pid: int) -> None:
    deadline = time.monotonic() + 10
    while psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "child never became a zombie"
        time.sleep(0.01)


def _as_nobody(fn: Callable[[], object]) -> object:
    """Run ``fn`` in a forked child that dropped to uid nobody; return its JSON-able result.

    A fork (not an exec) because the interpreter may live where nobody cannot read it.
    """
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
    real = reader_module.read_capped
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
    from gputui.collect.linux.membership import parse_cgroup, parse_nspid

    ours = parse_cgroup(Path("/proc/self/cgroup").read_text())
    own_ns_pid = parse_nspid(Path(f"/proc/{sleeper.pid}/status").read_text())
    info = ProcSource().read([sleeper.pid])[sleeper.pid]
    assert info.container_id == (ours.container_id if ours else None)
    assert info.container_pid == own_ns_pid == sleeper.pid


def test_cpu_percent_is_none_first_then_real_for_a_busy_process(
    spawn: Callable[[str], subprocess.Popen[bytes]],
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
    spawn: Callable[[str], subprocess.Popen[bytes]],
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
    spawn: Callable[[str], subprocess.Popen[bytes]],
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
            assert child.stdout is not None
            assert child.stdout.readline() == b"ready\n"
            return child
        child.kill()
        child.wait()
        assert child.stdout is not None
        child.stdout.close()
    pytest.skip("another process kept taking the PID")


def test_real_pid_reuse_is_a_new_process(
    tmp_path: Path, spawn: Callable[[str], subprocess.Popen[bytes]]
) -> None:
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


def test_sigterm_to_a_child(sleeper: subprocess.Popen[bytes]) -> None:
    source = ProcSource()
    info = source.read([sleeper.pid])[sleeper.pid]
    assert source.send_signal(sleeper.pid, signal.SIGTERM, info.start_time) is None
    assert sleeper.wait(timeout=10) == -signal.SIGTERM


def _start(pid: int) -> float:
    start = ProcSource().read([pid])[pid].start_time
    assert start is not None
    return start


def test_signal_to_an_exited_process(sleeper: subprocess.Popen[bytes]) -> None:
    start = _start(sleeper.pid)
    sleeper.kill()
    sleeper.wait()
    assert ProcSource().send_signal(sleeper.pid, signal.SIGTERM, start) == (
        f"process {sleeper.pid} has already exited"
    )


@pytest.mark.parametrize("pid", [0, -1])
def test_signal_refuses_process_groups(pid: int) -> None:
    assert ProcSource().send_signal(pid, signal.SIGTERM, None) == f"refusing to signal PID {pid}"


@pytest.mark.parametrize("signum", [9999, 2**32 + signal.SIGKILL, -1])
def test_invalid_signal_number(sleeper: subprocess.Popen[bytes], signum: int) -> None:
    message = ProcSource().send_signal(sleeper.pid, signum, None)
    assert message is not None
    assert message.startswith(f"cannot send signal {signum} to process {sleeper.pid}")
    time.sleep(0.1)
    assert sleeper.poll() is None


def test_signal_zero_probes_without_delivering(sleeper: subprocess.Popen[bytes]) -> None:
    assert ProcSource().send_signal(sleeper.pid, 0, _start(sleeper.pid)) is None
    time.sleep(0.1)
    assert sleeper.poll() is None


def test_signal_permission_denied(sleeper: subprocess.Popen[bytes]) -> None:
    owner = pwd.getpwuid(os.getuid()).pw_name
    start = _start(sleeper.pid)
    # Signal 0 only probes permission, so nothing is delivered even if the check were wrong.
    message = _as_nobody(lambda: ProcSource().send_signal(sleeper.pid, 0, start))
    assert message == (
        f"permission denied: process {sleeper.pid} belongs to {owner} "
        "(run gputui as that user or root)"
    )


def test_access_denied_command_line_is_flagged(
    sleeper: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Running as root nothing read here is ever denied (and as nobody, cmdline, stat, statm and
    # status of other users stay world-readable without hidepid), so the kernel's EACCES is
    # simulated for the command line only.
    real = reader_module.read_capped

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

        assert _as_nobody(read) == [True, True, None, 3]
    finally:
        for path in sorted(root.rglob("*"), reverse=True):
            path.chmod(0o700)
            path.unlink() if path.is_file() else path.rmdir()
        root.rmdir()


# --- visibility() -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("comm", "init_cgroup", "expected"),
    [
        ("kthreadd\n", "0::/\n", Visibility(True, False)),
        ("kthreadd\n", "0::/../../..\n", Visibility(True, True)),
        ("kthreadd\n", None, Visibility(True, None)),
        (None, "0::/\n", Visibility(False, None)),  # PID 1 is not the host's init here
        (None, "0::/../init.scope\n", Visibility(False, True)),
        ("bash\n", "0::/\n", Visibility(False, None)),  # PID 2 is an ordinary process
    ],
)
def test_visibility_from_proc_root(
    tmp_path: Path, comm: str | None, init_cgroup: str | None, expected: Visibility
) -> None:
    if comm is not None:
        (tmp_path / "2").mkdir()
        (tmp_path / "2" / "comm").write_text(comm)
    if init_cgroup is not None:
        _write_proc(tmp_path, 1, init_cgroup, None)
    assert ProcSource(tmp_path).visibility() == expected


def test_private_cgroup_namespace_seen_in_a_read_process(tmp_path: Path) -> None:
    (tmp_path / "2").mkdir()
    (tmp_path / "2" / "comm").write_text("kthreadd\n")
    _write_proc(tmp_path, 1, "0::/\n", None)
    fake = _unused_pid()
    _write_proc(tmp_path, fake, f"0::../../docker-{DOCKER_ID}.scope\n", "NSpid:\t4\n")
    source = ProcSource(tmp_path)
    assert source.visibility() == Visibility(True, False)
    assert source.read([fake])[fake].container_id == DOCKER_ID
    assert source.visibility() == Visibility(True, True)


def test_host_pid_namespace_answer_is_cached(tmp_path: Path) -> None:
    (tmp_path / "2").mkdir()
    (tmp_path / "2" / "comm").write_text("kthreadd\n")
    source = ProcSource(tmp_path)
    assert source.visibility().host_pid_namespace is True
    (tmp_path / "2" / "comm").unlink()
    assert source.visibility().host_pid_namespace is True


def test_visibility_of_the_real_proc() -> None:
    comm = Path("/proc/2/comm")
    expected = comm.exists() and comm.read_text().strip() == "kthreadd"
    assert ProcSource().visibility().host_pid_namespace is expected


def test_constructor_does_no_io(tmp_path: Path) -> None:
    ProcSource(tmp_path / "does-not-exist")  # must not raise or touch the path
    assert not (tmp_path / "does-not-exist").exists()


def test_parse_stat_counts_fields_after_the_last_parenthesis() -> None:
    from gputui.collect.linux.proc_parse import parse_stat

    # A command name may contain spaces and parentheses: fields are counted from the last ')'.
    rest = "S 1 2 3 4 5 6 7 8 9 10 110 40 0 0 20 0 1 0 987654 1000 2048 0"
    parsed = parse_stat(f"4242 (evil) name (x)) {rest}")
    assert parsed is not None
    assert (parsed.state, parsed.cpu_ticks, parsed.start_ticks, parsed.rss_pages) == (
        "S",
        150,
        987654,
        2048,
    )
    assert parse_stat("garbage") is None
    assert parse_stat("1 (x) S 1 2") is None
