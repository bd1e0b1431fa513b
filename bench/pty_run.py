"""Run a full-screen program in a pseudo-terminal of a fixed size, as a user's terminal would.

The output is drained continuously by a thread (a full pty buffer would block the program and
make it look cheaper than it is). Text with the escape sequences stripped is searched for a
marker, so "first frame with real data" is timed on what a terminal would actually receive.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import resource
import select
import shlex
import signal
import struct
import termios
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from bench import common

# CSI, OSC, charset selection and the short two-byte escapes: what a terminal does not print.
_ESCAPES = re.compile(
    rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1bP[^\x1b]*\x1b\\"
    rb"|\x1b[()][0-9A-Za-z]|\x1b[=>78DEHMNOZc]"
)
#: Cursor positioning (CUP): Textual moves to each changed span of a frame with one.
_CURSOR_ROW = re.compile(rb"\x1b\[(\d+);\d+H")


@dataclass
class Sample:
    at: float  # seconds since launch
    cpu_s: float  # utime+stime of the process tree so far
    rss: int  # bytes, summed over the process tree
    main_cpu_s: float = 0.0  # utime+stime of the program's main thread (its event loop)


@dataclass
class PtyRun:
    """One program in a pty; ``samples`` fills while :meth:`sample_for` runs."""

    argv: Sequence[str]
    cols: int = 160
    rows: int = 50
    marker: re.Pattern[bytes] | None = None
    pid: int = 0
    fd: int = -1
    started: float = 0.0
    marker_at: float | None = None
    out_bytes: int = 0
    rows_written: int = 0  # screen rows moved to, counted once per row in each read
    samples: list[Sample] = field(default_factory=list)
    exit_status: int | None = None
    max_rss: int = 0  # ru_maxrss of the program (bytes), from wait4
    #: Called with every read of the program's output (``bench.screen_rows`` keeps them).
    on_read: Callable[[bytes], None] | None = None
    _reader: threading.Thread | None = None
    _tail: bytes = b""

    def start(self) -> None:
        env = dict(os.environ, TERM=os.environ.get("BENCH_TERM", "xterm-256color"))
        for var in ("COLUMNS", "LINES"):  # they would override the pty's size
            env.pop(var, None)
        self.started = time.monotonic()
        pid, fd = pty.fork()
        if pid == 0:  # child: size the terminal before the program asks for it
            try:
                winsize = struct.pack("HHHH", self.rows, self.cols, 0, 0)
                fcntl.ioctl(0, termios.TIOCSWINSZ, winsize)
                os.execvpe(self.argv[0], list(self.argv), env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self._reader = threading.Thread(target=self._drain, daemon=True, name="pty-drain")
        self._reader.start()

    def _drain(self) -> None:
        while True:
            try:
                ready, _, _ = select.select([self.fd], [], [], 0.5)
                if not ready:
                    if self.exit_status is not None:
                        return
                    continue
                chunk = os.read(self.fd, 65536)
            except OSError:  # EIO: the program closed its terminal
                return
            if not chunk:
                return
            self.out_bytes += len(chunk)
            if self.on_read is not None:
                self.on_read(chunk)
            self.rows_written += len(set(_CURSOR_ROW.findall(chunk)))
            # A short tail: a marker split across two reads is still found, and a program that
            # dies early leaves its last words for the report.
            text = self._tail + _ESCAPES.sub(b"", chunk)
            if self.marker is not None and self.marker_at is None and self.marker.search(text):
                self.marker_at = time.monotonic() - self.started
            self._tail = text[-2048:]

    def last_text(self) -> str:
        """The end of what the program printed, escape sequences stripped."""
        return self._tail.decode("utf-8", "replace")

    def sample(self) -> Sample:
        tree = common.descendants(self.pid)
        s = Sample(
            time.monotonic() - self.started,
            common.cpu_seconds(tree),
            common.rss_bytes(tree),
            common.thread_cpu_seconds(self.pid, self.pid),
        )
        self.samples.append(s)
        return s

    def sample_for(self, seconds: float, every: float = 1.0) -> None:
        """Sample CPU and RSS every ``every`` seconds for ``seconds`` (on a fixed grid)."""
        start = time.monotonic()
        n = 0
        while self.alive():
            self.sample()
            n += 1
            if n * every > seconds:
                break
            time.sleep(max(0.0, start + n * every - time.monotonic()))

    def wait_marker(self, timeout: float) -> float | None:
        end = time.monotonic() + timeout
        while self.marker_at is None and time.monotonic() < end and self.alive():
            time.sleep(0.005)
        return self.marker_at

    def alive(self) -> bool:
        if self.exit_status is not None:
            return False
        return self._reap(block=False)

    def _reap(self, block: bool) -> bool:
        """True while running; on exit records status and peak RSS (wait4's rusage)."""
        try:
            pid, status, usage = os.wait4(self.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:
            self.exit_status = self.exit_status if self.exit_status is not None else -1
            return False
        if pid == 0:
            return True
        self.exit_status = os.waitstatus_to_exitcode(status)
        self.max_rss = usage.ru_maxrss * 1024  # KiB on Linux
        return False

    def stop(self, keys: bytes = b"q", grace: float = 3.0) -> None:
        """Quit the way a user does (``q``), then SIGTERM, then SIGKILL; always reaps."""
        if self.pid <= 0:
            return
        for action in ("key", "term", "kill"):
            if not self.alive():
                break
            try:
                if action == "key":
                    os.write(self.fd, keys)
                else:
                    os.kill(self.pid, signal.SIGTERM if action == "term" else signal.SIGKILL)
            except OSError:
                pass
            end = time.monotonic() + grace
            while time.monotonic() < end and self.alive():
                time.sleep(0.02)
        if self.exit_status is None:
            self._reap(block=True)
        if self._reader is not None:
            self._reader.join(timeout=2)
        with contextlib.suppress(OSError):
            os.close(self.fd)


def steady_state(run: PtyRun, warmup: float) -> dict[str, float]:
    """CPU % (100 = one core) and RSS over the samples taken after ``warmup`` seconds."""
    window = [s for s in run.samples if s.at >= warmup]
    if len(window) < 2:
        return {"cpu_pct": float("nan"), "rss_mb": float("nan"), "seconds": 0.0}
    first, last = window[0], window[-1]
    span = last.at - first.at
    rss = [s.rss / 1e6 for s in window]
    return {
        "cpu_pct": 100.0 * (last.cpu_s - first.cpu_s) / span,
        # The rest of the CPU is the program's other threads (collection, terminal input).
        "main_cpu_pct": 100.0 * (last.main_cpu_s - first.main_cpu_s) / span,
        "rss_mb": common.median(rss),
        "rss_max_mb": max(rss),
        "rss_last_mb": rss[-1],
        "seconds": span,
        "out_kb_s": run.out_bytes / 1e3 / max(last.at, 1e-9),
        "rows_s": run.rows_written / max(last.at, 1e-9),
    }


def split(command: str) -> list[str]:
    return shlex.split(command)


def rusage_children_maxrss() -> int:
    """Largest peak RSS of any reaped child so far (bytes); wait4's per-child figure is better."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
