"""The one reader and writer of user files, and every entry point that reads or writes one.

Two halves:

* an ``ast`` walk over ``gputui/``: no module but ``gputui/boundary/userfiles.py`` opens a file
  itself (builtin ``open``, ``Path.open/read_text/read_bytes/write_text/write_bytes``, ``os.open``,
  ``tempfile`` files), except the commented allow-list of ``/proc``, ``/sys`` and other paths no
  user names; and every function that calls the reader or the writer is an entry point of
  :data:`ENTRY_POINTS` below, so a new reader or writer cannot skip the hostile files;
* the hostile files (another user's symlink, an own symlink to a 0600 file, a FIFO, a
  directory, a device, an oversized sparse file, non-UTF-8 bytes, non-finite numbers, hard
  links, another user's file) against every entry point, through the real command line where
  the entry point is a command-line option: one line on stderr, exit status 2, the target
  unchanged, nothing hangs.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import REPO

PACKAGE = REPO / "gputui"
ENV = {**os.environ, "XDG_CONFIG_HOME": "/nonexistent", "PYTHONIOENCODING": "utf-8:strict"}
ENV.pop("DOCKER_CONFIG", None)
NOBODY = 65534
SECRET = "TOPSECRET-7f3a91-root-only\n"
#: Seconds any one command may take: a hang (a FIFO opened for reading) fails the test.
DEADLINE_S = 60

# -- the source check ------------------------------------------------------------------------

#: The module that opens user files; nothing else does.
USERFILES = "gputui/boundary/userfiles.py"
#: Its entry points (the reader's and the writer's public functions).
READ_WRITE = {
    "open_user_file",
    "read_user_file",
    "read_user_text",
    "open_user_append",
    "replace_user_file",
}
#: Calls that open, create or rewrite a file by path.
OPENING_ATTRS = {"open", "read_text", "read_bytes", "write_text", "write_bytes"}
TEMPFILE_FILES = {"mkstemp", "NamedTemporaryFile", "TemporaryFile", "SpooledTemporaryFile"}

#: Where a module may open a file itself: ``module:function`` → why no user names that path.
ALLOWED: dict[str, str] = {
    # /proc and /sys pseudo-files, read on every refresh (kernel files: no FIFO, no symlink
    # planted by a user, sizes bounded by the readers themselves).
    "gputui/collect/linux/fileio.py:_read_whole": "/proc and /sys pseudo-files",
    "gputui/collect/linux/fileio.py:read_capped": "/proc and /sys pseudo-files, read capped",
    "gputui/collect/linux/fileio.py:KeptFiles.read_raw": "/proc and /sys pseudo-files, kept open",
    # The kernel log device (or the path --kernel-log names: read-only, non-blocking, one
    # record per read, each bounded; never written).
    "gputui/collect/linux/kmsg.py:_open": "/dev/kmsg, read only and non-blocking",
    # Host files under the health checks' roots (/proc, /sys, /etc, /dev: root's files).
    "gputui/health/readings.py:read_text": "host files under HealthRoots (/proc, /sys, /etc)",
    "gputui/health/mig_mps.py:_read_bytes": "/proc/<pid>/environ of the MPS daemon",
    "gputui/health/runner.py:_metadata_version": "installed packages' metadata (site-packages)",
    # gputui's own files.
    "gputui/wiring/demo_host.py:demo_host_root": (
        "the demo host's files, in a fresh private temp dir"
    ),
    "gputui/cli/terminal.py:_silence_stdout": "os.devnull",
    # Methods of gputui's own classes named open (not a file open by path).
    "gputui/cli/record.py:record": "RecordWriter.open(): the recorder opens through the writer",
    "gputui/recording/writer.py:RecordWriter.__enter__": "RecordWriter.open()",
    "gputui/recording/writer.py:RecordWriter.write": "RecordWriter.open()",
    "gputui/recording/writer.py:RecordWriter._rotate": "RecordWriter.open()",
    "gputui/recording/reader.py:open_recording": "Recording.open(): reads through the reader",
}


@dataclass(frozen=True)
class Call:
    """A call found in the source."""

    where: str  # module:qualified function
    name: str  # what is called, as written
    line: int


def _calls(path: Path, root: Path = REPO) -> Iterator[Call]:
    module = str(path.relative_to(root))
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=module)

    def walk(node: ast.AST, scope: list[str]) -> Iterator[Call]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                yield from walk(child, [*scope, child.name])
                continue
            if isinstance(child, ast.Call):
                func = child.func
                name = None
                if isinstance(func, ast.Name):
                    name = func.id
                elif isinstance(func, ast.Attribute):
                    base = func.value.id if isinstance(func.value, ast.Name) else "…"
                    name = f"{base}.{func.attr}"
                if name is not None:
                    yield Call(f"{module}:{'.'.join(scope) or '<module>'}", name, child.lineno)
            yield from walk(child, scope)

    yield from walk(tree, [])


@functools.cache
def _all_calls() -> list[Call]:
    return [call for path in sorted(PACKAGE.rglob("*.py")) for call in _calls(path)]


def _opens_a_file(name: str) -> bool:
    base, _, attr = name.rpartition(".")
    if not base:
        return name == "open"
    if base in ("os", "io") and attr == "open":
        return True
    if base == "tempfile":
        return attr in TEMPFILE_FILES
    return attr in OPENING_ATTRS and base != "os"


def test_no_module_but_userfiles_opens_a_file() -> None:
    found = {
        call.where: call
        for call in _all_calls()
        if _opens_a_file(call.name) and not call.where.startswith(USERFILES + ":")
    }
    unexpected = sorted(
        f"{c.where} line {c.line}: {c.name}" for w, c in found.items() if w not in ALLOWED
    )
    assert not unexpected, (
        "open user files through gputui.boundary.userfiles (or, for a /proc, /sys or other path "
        "no user "
        f"names, add the function to ALLOWED with why): {unexpected}"
    )
    stale = sorted(set(ALLOWED) - set(found))
    assert not stale, f"ALLOWED names functions that no longer open a file: {stale}"


def test_the_check_sees_each_kind_of_open(tmp_path: Path) -> None:
    # The check itself must catch every form it claims to (else the test above cannot fail).
    module = tmp_path / "gputui" / "m.py"
    module.parent.mkdir()
    module.write_text(
        "import os, tempfile\n"
        "def a(p): return open(p)\n"
        "def b(p): return p.open('rb')\n"
        "def c(p): return p.read_text()\n"
        "def d(p): p.write_bytes(b'')\n"
        "def e(p): return os.open(p, 0)\n"
        "def f(): return tempfile.mkstemp()\n"
        "def g(p): return os.path.exists(p)\n"
    )
    opened = sorted({c.where for c in _calls(module, tmp_path) if _opens_a_file(c.name)})
    assert opened == [f"gputui/m.py:{name}" for name in "abcdef"]


def test_every_caller_of_the_reader_or_writer_is_an_entry_point() -> None:
    callers = {
        call.where
        for call in _all_calls()
        if call.name.rpartition(".")[2] in READ_WRITE and not call.where.startswith(USERFILES)
    }
    covered = {caller for entry in ENTRY_POINTS for caller in entry.callers}
    assert callers - covered == set(), (
        "a new reader or writer of user files: add it to ENTRY_POINTS (hostile files run "
        f"against each): {sorted(callers - covered)}"
    )
    assert covered - callers == set(), f"ENTRY_POINTS names callers gone: {covered - callers}"


# -- the entry points ------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """How a run ended: exit status and stderr (a function's exception as status 2)."""

    status: int
    stderr: str
    stdout: str = ""


@dataclass(frozen=True)
class EntryPoint:
    """A way gputui reads or writes a file a user names (or a default path in their home).

    Attributes:
        name: Test id.
        callers: The functions (``module:qualname``) calling the reader or writer for it.
        writer: It writes the file (else it reads it).
        target: Where the file goes, under a test's directory.
        run: Runs gputui on it (the test's directory and a Prometheus URL given).
        strict: Refused with one line and exit 2; False: the file is ignored and gputui runs
            on (the docker CLI's config; the benchmarks' start-up trace).
        limit: Largest size read (readers).
        non_finite: Content holding a non-finite or out-of-range number (readers).
        skips_bad_lines: Unreadable content is skipped with a warning, gputui runs on (a
            rotated file of a recording: the other files still play).
    """

    name: str
    callers: tuple[str, ...]
    writer: bool
    target: Callable[[Path], Path]
    run: Callable[[Path, Path, str], Outcome]
    strict: bool = True
    limit: int = 0
    non_finite: tuple[str, ...] = field(default_factory=tuple)
    skips_bad_lines: bool = False


def gputui(*args: str, env: dict[str, str] | None = None) -> Outcome:
    result = subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        text=True,
        capture_output=True,
        timeout=DEADLINE_S,
        env={**ENV, **(env or {})},
        cwd=REPO,
    )
    return Outcome(result.returncode, result.stderr, result.stdout)


def _scenario(tmp: Path) -> Path:
    path = tmp / "valid-scenario.json"
    path.write_text('{"gpus": []}')
    return path


def _save_ui_state(target: Path, tmp: Path, url: str) -> Outcome:
    from gputui.boundary.userfiles import UserFileError
    from gputui.config.ui_state import UiPrefs, save_ui_state

    try:
        save_ui_state(UiPrefs(theme="nord"), target)
    except (OSError, UserFileError) as exc:
        return Outcome(2, f"gputui: error: {exc}\n")
    return Outcome(0, "")


def _trace(target: Path, tmp: Path, url: str) -> Outcome:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from gputui.boundary import startup_trace; startup_trace.mark('x')",
        ],
        text=True,
        capture_output=True,
        timeout=DEADLINE_S,
        env={**ENV, "GPUTUI_STARTUP_TRACE": str(target)},
        cwd=REPO,
    )
    return Outcome(result.returncode, result.stderr)


def _audit_append(target: Path, tmp: Path, url: str) -> Outcome:
    from gputui.boundary.userfiles import UserFileError
    from gputui.notify.audit import AuditLog

    try:
        AuditLog(target).append({"schema": "gputui.idle-audit/1", "event": "notice"})
    except UserFileError as exc:
        return Outcome(2, f"gputui: error: {exc}\n")
    return Outcome(0, "")


_AUDIT_LINE = '{"schema": "gputui.idle-audit/1", "event": "reclaim", "container_id": "c", "ts": '
AUDIT_NON_FINITE = tuple(
    _AUDIT_LINE + n + "}" for n in ("NaN", "Infinity", "-Infinity", "1e999", "1e301", "1" * 30)
)


def _valid_recording(tmp: Path) -> Path:
    path = tmp / "rec"
    shutil.copyfile(REPO / "tests" / "fixtures" / "h200-lab-recording.jsonl", path)
    return path


ANSWERS_NON_FINITE = (
    '{"format": "gputui-fleet-answers/1", "taken_at": NaN, "hosts": {}}',
    '{"format": "gputui-fleet-answers/1", "taken_at": 1e300, "hosts": {}}',
    '{"format": "gputui-fleet-answers/1", "taken_at": 1780000000, "hosts": {"a": [1e999]}}',
    '{"format": "gputui-fleet-answers/1", "taken_at": 1780000000, "hosts": {"a": -Infinity}}',
    '{"format": "gputui-fleet-answers/1", "taken_at": 1780000000, "hosts": [' + "9" * 30 + "]}",
)


def _podman_checks(target: Path, tmp: Path, url: str) -> Outcome:
    """podman's GPU checks on a host whose CDI dir, containers.conf or hooks.d holds ``target``.

    A system file, not one a user names: a hostile one is refused and passed over (a detail of
    the check), the pass ends in time, and nothing of the file's content is shown.
    """
    from gputui.health.runner import run_checks
    from tests.support.health import make_roots, podman_inputs

    roots = make_roots(tmp)
    found: list[str] = []

    def checks() -> None:
        for check in run_checks(podman_inputs(), roots=roots):
            if check.id.startswith("podman."):
                found.append("\n".join((check.id, check.summary, *check.details, check.fix or "")))

    worker = threading.Thread(target=checks, daemon=True)
    worker.start()
    worker.join(DEADLINE_S)
    if worker.is_alive():
        return Outcome(1, "the podman checks did not end")
    text = "\n".join(found)
    crashed = any(block.partition("\n")[0].endswith(".error") for block in found)
    return Outcome(1 if crashed or len(found) != 2 else 0, text if crashed else "", text)


ENTRY_POINTS: tuple[EntryPoint, ...] = (
    EntryPoint(
        "scenario",
        ("gputui/collect/standins/scenario_format.py:load_scenario",),
        writer=False,
        target=lambda tmp: tmp / "scenario.json",
        run=lambda p, tmp, url: gputui("--once", "--scenario", str(p)),
        limit=16 * 1024**2,
        non_finite=(
            '{"gpus": [{"index": 0, "name": "X", "memory_total_mib": NaN}]}',
            '{"gpus": [{"index": 0, "name": "X", "memory_total_mib": 1e999}]}',
        ),
    ),
    EntryPoint(
        "config",
        ("gputui/config/file.py:load_config",),
        writer=False,
        target=lambda tmp: tmp / "config.toml",
        run=lambda p, tmp, url: gputui("--once", "--demo", "--config", str(p)),
        limit=1024**2,
        non_finite=("[ui]\ninterval = nan\n", "[ui]\ninterval = inf\n"),
    ),
    EntryPoint(
        "ui-state",
        ("gputui/config/ui_state.py:load_ui_state",),
        writer=False,
        target=lambda tmp: tmp / "xdg" / "gputui" / "ui-state.toml",
        run=lambda p, tmp, url: gputui(
            "--once", "--demo", env={"XDG_CONFIG_HOME": str(tmp / "xdg")}
        ),
        limit=1024**2,
        non_finite=("[ui]\ninterval = -inf\n",),
    ),
    EntryPoint(
        "recording",
        (
            "gputui/recording/reader.py:Recording._index",
            "gputui/recording/reader.py:_read_report",
            # Its first bytes tell a recording from a ledger store, before either is read.
            "gputui/cli/replay.py:open_player",
        ),
        writer=False,
        target=lambda tmp: tmp / "recording.jsonl",
        run=lambda p, tmp, url: gputui("replay", str(p), "--once"),
        limit=16 * 1024**3,
        non_finite=(
            '{"v":1,"snapshot":{"taken_at":NaN}}\n',
            '{"v":1,"snapshot":{"taken_at":1e999}}\n',
        ),
    ),
    EntryPoint(
        # A rotated file of a recording: a path gputui derives from the one given.
        "recording-segment",
        ("gputui/recording/reader.py:Recording._index",),
        writer=False,
        target=lambda tmp: tmp / "rec.1",
        run=lambda p, tmp, url: gputui("replay", str(_valid_recording(tmp)), "--once"),
        limit=16 * 1024**3,
        skips_bad_lines=True,
    ),
    EntryPoint(
        "fleet-answers",
        ("gputui/fleet/source.py:load_answers",),
        writer=False,
        target=lambda tmp: tmp / "answers.json",
        run=lambda p, tmp, url: gputui("fleet", "--answers", str(p), "--json"),
        limit=32 * 1024**2,
        non_finite=ANSWERS_NON_FINITE,
    ),
    EntryPoint(
        "docker-cli-config",
        ("gputui/collect/docker/endpoint.py:_load_json_file",),
        writer=False,
        target=lambda tmp: tmp / "docker" / "config.json",
        run=lambda p, tmp, url: gputui(
            "--once", "--scenario", str(_scenario(tmp)), env={"DOCKER_CONFIG": str(p.parent)}
        ),
        strict=False,
        limit=1024**2,
    ),
    # System files podman's GPU checks read (tests/unit/health/test_health_podman.py has the
    # hostile contents): refused and passed over, never waited on.
    EntryPoint(
        "cdi-spec",
        ("gputui/health/cdi.py:_parse_spec",),
        writer=False,
        target=lambda tmp: tmp / "etc" / "cdi" / "nvidia.yaml",
        run=_podman_checks,
        strict=False,
        limit=1024**2,
    ),
    EntryPoint(
        "containers-conf",
        ("gputui/health/podman.py:read_podman_conf",),
        writer=False,
        target=lambda tmp: tmp / "etc" / "containers" / "containers.conf",
        run=_podman_checks,
        strict=False,
        limit=256 * 1024,
    ),
    EntryPoint(
        "oci-hook",
        ("gputui/health/podman.py:_read_hook",),
        writer=False,
        target=lambda tmp: tmp / "usr/share/containers/oci/hooks.d" / "oci-nvidia-hook.json",
        run=_podman_checks,
        strict=False,
        limit=64 * 1024,
    ),
    EntryPoint(
        "record",
        ("gputui/recording/writer.py:RecordWriter.open",),
        writer=True,
        target=lambda tmp: tmp / "recording.jsonl",
        run=lambda p, tmp, url: gputui(
            "record", str(p), "--demo", "--count", "1", "--interval", "0.1"
        ),
    ),
    EntryPoint(
        "ledger-lock",
        ("gputui/ledger/store.py:Store.open_writer",),
        writer=True,
        target=lambda tmp: tmp / "ledger.sqlite.lock",
        run=lambda p, tmp, url: gputui(
            "daemon",
            "--demo",
            "--store",
            str(tmp / "ledger.sqlite"),
            "--count",
            "2",
            "--interval",
            "0.1",
        ),
    ),
    EntryPoint(
        "save-answers",
        ("gputui/fleet/source.py:save_answers",),
        writer=True,
        target=lambda tmp: tmp / "answers.json",
        run=lambda p, tmp, url: gputui(
            "fleet", "--prometheus", url, "--once", "--save-answers", str(p)
        ),
    ),
    EntryPoint(
        "save-ui-state",
        ("gputui/config/ui_state.py:save_ui_state",),
        writer=True,
        target=lambda tmp: tmp / "xdg" / "gputui" / "ui-state.toml",
        run=_save_ui_state,
    ),
    EntryPoint(
        "idle-audit",
        ("gputui/notify/audit.py:read_audit",),
        writer=False,
        target=lambda tmp: tmp / "idle-audit.jsonl",
        run=lambda p, tmp, url: gputui("reclaim", "--audit", str(p), "--demo"),
        limit=64 * 1024**2,
        non_finite=AUDIT_NON_FINITE,
        skips_bad_lines=True,
    ),
    EntryPoint(
        "idle-audit-append",
        ("gputui/notify/audit.py:AuditLog.append",),
        writer=True,
        target=lambda tmp: tmp / "state" / "idle-audit.jsonl",
        run=_audit_append,
    ),
    EntryPoint(
        "startup-trace",
        ("gputui/boundary/startup_trace.py:mark",),
        writer=True,
        target=lambda tmp: tmp / "trace.txt",
        run=_trace,
        strict=False,
    ),
)
READERS = [e for e in ENTRY_POINTS if not e.writer]
WRITERS = [e for e in ENTRY_POINTS if e.writer]


@pytest.fixture(scope="module")
def prometheus() -> Iterator[str]:
    """A query API on loopback answering every query with an empty vector."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            body = b'{"status":"success","data":{"resultType":"vector","result":[]}}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def one_line_exit_2(outcome: Outcome, needle: str = "") -> str:
    assert "Traceback" not in outcome.stderr, outcome.stderr[-3000:]
    assert outcome.status == 2, (outcome.status, outcome.stderr[-2000:])
    lines = outcome.stderr.strip().splitlines()
    assert len(lines) == 1, outcome.stderr[-2000:]
    assert needle in lines[0], lines[0]
    assert SECRET.strip() not in outcome.stderr + outcome.stdout
    return lines[0]


def _secret(tmp: Path) -> Path:
    path = tmp / "root-only"
    path.write_text(SECRET)
    path.chmod(0o600)
    return path


def _state(path: Path) -> tuple[int, int, int, bytes | None]:
    info = os.lstat(path)
    small = stat.S_ISREG(info.st_mode) and info.st_size <= 1024**2  # not a sparse 16 GiB
    return info.st_mode, info.st_size, info.st_mtime_ns, path.read_bytes() if small else None


# -- readers ---------------------------------------------------------------------------------


def _reader_case(case: str, path: Path, tmp: Path, entry: EntryPoint) -> str:
    """Put the hostile thing at ``path``; return the words the refusal must contain."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if case == "planted-symlink":
        path.symlink_to(_secret(tmp))
        os.lchown(path, NOBODY, NOBODY)  # another user's link, as if planted in a shared dir
        return "symbolic link of another user"
    if case == "own-symlink-to-secret":
        path.symlink_to(_secret(tmp))  # followed (the user's own), then not a valid file
        return ""
    if case == "fifo":
        os.mkfifo(path)
        return "FIFO"
    if case == "directory":
        path.mkdir()
        return "directory"
    if case == "dev-zero":
        path.symlink_to("/dev/zero")
        return "device"
    if case == "oversized":
        with open(path, "wb") as fh:  # sparse: no disk used
            fh.truncate(entry.limit + 1)
        return "larger than"
    if case == "non-utf8":
        path.write_bytes(b"\xff\xfe\x00\x9b[31m\xc3(" * 10)
        return ""
    raise AssertionError(case)


READER_CASES = [
    "planted-symlink",
    "own-symlink-to-secret",
    "fifo",
    "directory",
    "dev-zero",
    "oversized",
    "non-utf8",
]


@pytest.mark.parametrize("case", READER_CASES)
@pytest.mark.parametrize("entry", READERS, ids=lambda e: e.name)
def test_hostile_file_for_a_reader(
    entry: EntryPoint, case: str, tmp_path: Path, prometheus: str
) -> None:
    target = entry.target(tmp_path)
    needle = _reader_case(case, target, tmp_path, entry)
    before = _state(target)
    outcome = entry.run(target, tmp_path, prometheus)
    if entry.skips_bad_lines and case in ("own-symlink-to-secret", "non-utf8"):
        assert outcome.status == 0, outcome.stderr[-2000:]
        assert "unreadable line(s)" in outcome.stderr
        assert SECRET.strip() not in outcome.stderr + outcome.stdout
    elif entry.strict:
        one_line_exit_2(outcome, needle)
    else:  # read, refused, ignored: gputui runs on with its defaults
        assert outcome.status == 0, outcome.stderr[-2000:]
        assert "Traceback" not in outcome.stderr
        assert SECRET.strip() not in outcome.stderr + outcome.stdout
    assert _state(target) == before


@pytest.mark.parametrize(
    ("entry", "text"),
    [(e, text) for e in READERS for text in e.non_finite],
    ids=lambda v: v.name if isinstance(v, EntryPoint) else str(v)[-20:],
)
def test_non_finite_or_huge_numbers_for_a_reader(
    entry: EntryPoint, text: str, tmp_path: Path, prometheus: str
) -> None:
    target = entry.target(tmp_path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    outcome = entry.run(target, tmp_path, prometheus)
    one_line_exit_2(outcome)
    assert "NaN" not in outcome.stdout and "Infinity" not in outcome.stdout


def test_every_reader_with_numbers_has_non_finite_cases() -> None:
    # The docker CLI's config is ignored when bad, and a segment is read like the recording.
    # podman's system files take no number gputui uses.
    assert {e.name for e in READERS if not e.non_finite} == {
        "docker-cli-config",
        "recording-segment",
        "cdi-spec",
        "containers-conf",
        "oci-hook",
    }


def test_an_own_symlink_to_a_valid_file_is_followed(tmp_path: Path) -> None:
    # A config.toml linked into a dotfiles repository keeps working.
    real = tmp_path / "dotfiles" / "gputui.toml"
    real.parent.mkdir()
    real.write_text('[ui]\ntheme = "nord"\n')
    link = tmp_path / "config.toml"
    link.symlink_to(real)
    outcome = gputui("--once", "--demo", "--config", str(link))
    assert outcome.status == 0, outcome.stderr


def test_a_tail_opens_at_the_end_and_refuses_what_the_reader_refuses(tmp_path: Path) -> None:
    """open_user_tail (a container's log, of any size): only its last bytes are read."""
    from gputui.boundary.userfiles import UserFileError, open_user_tail

    log = tmp_path / "0.log"
    log.write_bytes(b"x" * 100_000 + b"the end\n")
    fh, skipped = open_user_tail(log, "container log", 8)
    with fh:
        assert (skipped, fh.read()) == (100_000, b"the end\n")
    fh, skipped = open_user_tail(log, "container log", 1 << 30)  # shorter than the tail
    with fh:
        assert skipped == 0 and len(fh.read()) == 100_008
    os.mkfifo(tmp_path / "fifo")
    planted = tmp_path / "planted"
    planted.symlink_to(log)
    os.lchown(planted, NOBODY, NOBODY)
    for path, words in ((tmp_path / "fifo", "FIFO"), (tmp_path, "directory"),
                        (planted, "another user")):  # fmt: skip
        with pytest.raises(UserFileError, match=words):
            open_user_tail(path, "container log", 8)


# -- writers ---------------------------------------------------------------------------------


def _writer_case(case: str, path: Path, tmp: Path) -> tuple[str, Path]:
    """Put the hostile thing at ``path``; return the refusal's words and the file to watch."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if case == "planted-symlink":
        secret = _secret(tmp)
        path.symlink_to(secret)
        os.lchown(path, NOBODY, NOBODY)
        return "symbolic link", secret
    if case == "own-symlink":
        secret = _secret(tmp)
        path.symlink_to(secret)  # never followed for writing, whoever owns it
        return "symbolic link", secret
    if case == "dangling-symlink":
        path.symlink_to(tmp / "would-be-created")
        return "symbolic link", tmp
    if case == "fifo":
        os.mkfifo(path)
        return "FIFO", path
    if case == "directory":
        path.mkdir()
        (path / "inside").write_text("kept")
        return "directory", path / "inside"
    if case == "device":
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # a /dev/null of our own
        return "device", path
    if case == "other-users-file":
        path.write_text("theirs\n")
        path.chmod(0o644)
        os.chown(path, NOBODY, NOBODY)
        return "another user", path
    raise AssertionError(case)


WRITER_CASES = [
    "planted-symlink",
    "own-symlink",
    "dangling-symlink",
    "fifo",
    "directory",
    "device",
    "other-users-file",
]


@pytest.mark.parametrize("case", WRITER_CASES)
@pytest.mark.parametrize("entry", WRITERS, ids=lambda e: e.name)
def test_hostile_target_for_a_writer(
    entry: EntryPoint, case: str, tmp_path: Path, prometheus: str
) -> None:
    target = entry.target(tmp_path)
    needle, watched = _writer_case(case, target, tmp_path)
    watched_before = (
        sorted(p.name for p in watched.iterdir()) if watched.is_dir() else _state(watched)
    )
    target_before = os.lstat(target)
    outcome = entry.run(target, tmp_path, prometheus)
    if entry.strict:
        one_line_exit_2(outcome, needle)
    else:
        assert outcome.status == 0 and "Traceback" not in outcome.stderr, outcome.stderr
    watched_after = (
        sorted(p.name for p in watched.iterdir()) if watched.is_dir() else _state(watched)
    )
    assert watched_after == watched_before
    after = os.lstat(target)
    assert (after.st_ino, after.st_mode, after.st_uid) == (
        target_before.st_ino,
        target_before.st_mode,
        target_before.st_uid,
    )
    assert not [p.name for p in target.parent.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("entry", WRITERS, ids=lambda e: e.name)
def test_a_writer_creates_0600_and_keeps_an_existing_mode(
    entry: EntryPoint, tmp_path: Path, prometheus: str
) -> None:
    old = os.umask(0o022)
    try:
        target = entry.target(tmp_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        outcome = entry.run(target, tmp_path, prometheus)
        assert outcome.status == 0, outcome.stderr
        assert stat.S_IMODE(os.stat(target).st_mode) == 0o600  # was 0644 for recordings
        target.chmod(0o640)
        outcome = entry.run(target, tmp_path, prometheus)
        assert outcome.status == 0, outcome.stderr
        assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
    finally:
        os.umask(old)


def test_appending_refuses_a_hard_link_to_another_file(tmp_path: Path) -> None:
    # With protected_hardlinks off (or as root) a link to any file of the same file system can
    # be planted: appending to it would grow the other file.
    secret = _secret(tmp_path)
    target = tmp_path / "recording.jsonl"
    os.link(secret, target)
    outcome = gputui("record", str(target), "--demo", "--count", "1", "--interval", "0.1")
    one_line_exit_2(outcome, "hard links")
    assert secret.read_text() == SECRET


def test_a_rewrite_replaces_a_hard_link_not_its_other_name(tmp_path: Path) -> None:
    from gputui.boundary.userfiles import replace_user_file

    secret = _secret(tmp_path)
    target = tmp_path / "answers.json"
    os.link(secret, target)
    replace_user_file(target, "file", b"new\n")
    assert target.read_bytes() == b"new\n"
    assert secret.read_text() == SECRET


# -- the recorder's rotation ------------------------------------------------------------------


def test_rotation_never_writes_through_a_planted_segment(tmp_path: Path) -> None:
    from gputui.model.settings import Settings
    from gputui.recording.reader import Recording
    from gputui.recording.writer import RecordWriter, rotated_path
    from gputui.wiring.compose import build_collector

    secret = _secret(tmp_path)
    path = tmp_path / "rec"
    planted = [rotated_path(path, n) for n in (1, 2, 3)]
    for link in planted:
        link.symlink_to(secret)
        os.lchown(link, NOBODY, NOBODY)
    collector = build_collector(Settings(demo=True), once=False)
    try:
        with RecordWriter(path, max_bytes=1, keep=2) as writer:  # rotates on every write
            for _ in range(4):
                writer.write(collector.collect())
    finally:
        collector.close()
    assert secret.read_text() == SECRET
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    for segment in (path, rotated_path(path, 1), rotated_path(path, 2)):
        assert not segment.is_symlink()
        assert stat.S_IMODE(segment.stat().st_mode) == 0o600
        assert len(Recording([segment])) == 1  # each is a whole file of one snapshot
    assert rotated_path(path, 3).is_symlink()  # beyond --keep: left alone, never opened


def test_rotation_keeps_the_recordings_mode(tmp_path: Path) -> None:
    from gputui.model.settings import Settings
    from gputui.recording.writer import RecordWriter, rotated_path
    from gputui.wiring.compose import build_collector

    path = tmp_path / "rec"
    path.touch(mode=0o640)
    path.chmod(0o640)
    collector = build_collector(Settings(demo=True), once=False)
    try:
        with RecordWriter(path, max_bytes=1, keep=2) as writer:
            for _ in range(3):
                writer.write(collector.collect())
    finally:
        collector.close()
    for segment in (path, rotated_path(path, 1), rotated_path(path, 2)):
        assert stat.S_IMODE(segment.stat().st_mode) == 0o640


# -- fleet answers ------------------------------------------------------------------------------


def test_answers_holding_nan_are_not_saved(tmp_path: Path) -> None:
    from gputui.fleet.source import AnswersFileError, save_answers

    target = tmp_path / "answers.json"
    with pytest.raises(AnswersFileError, match="non-finite"):
        save_answers(target, {"taken_at": 1.0, "hosts": [float("nan")]})
    assert not os.path.lexists(target)


def test_saved_answers_are_strict_json_and_replay(tmp_path: Path, prometheus: str) -> None:
    target = tmp_path / "answers.json"
    outcome = gputui("fleet", "--prometheus", prometheus, "--once", "--save-answers", str(target))
    assert outcome.status == 0, outcome.stderr
    json.loads(target.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in the answers file"))
    replayed = gputui("fleet", "--answers", str(target), "--json")
    assert replayed.status == 0, replayed.stderr
    json.loads(replayed.stdout, parse_constant=lambda c: pytest.fail(f"{c} in --json"))


def test_the_docker_context_lookup_does_not_block_on_a_fifo(tmp_path: Path) -> None:
    # The CLI exits anyway (the Docker read runs on a daemon thread), so the lookup itself is
    # checked: it blocked forever in open() on a FIFO named config.json.
    (tmp_path / "config.json").unlink(missing_ok=True)
    os.mkfifo(tmp_path / "config.json")
    code = "from gputui.collect.docker.endpoint import current_context_name as c; print(c())"
    result = subprocess.run(
        [sys.executable, "-c", code],
        text=True,
        capture_output=True,
        timeout=DEADLINE_S,
        env={**ENV, "DOCKER_CONFIG": str(tmp_path)},
        cwd=REPO,
    )
    assert (result.returncode, result.stdout) == (0, "default\n"), result.stderr
