"""Real ``gputui serve`` processes for the tests: started on a free port, their token read
from the one line that shows it, ended with SIGTERM.

A plain module, not a conftest (see loopback.py).
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.support.net import free_port
from tests.support.processes import stop_process

#: The line ``gputui serve`` prints once listening, with its token.
ANNOUNCE = re.compile(r"gputui serve: (http://\S+/)\?token=([A-Za-z0-9_-]+) ")

#: A stand-in monitor speaking the web driver's side of textual-serve's protocol: it says it is
#: ready, sends one frame, and writes every meta packet it gets (and its starting size) as JSON
#: lines to the file named by its first argument. ``stubborn`` ignores SIGTERM and "quit".
STAND_IN = r"""
import json, os, signal, sys
record = open(sys.argv[1], "a", buffering=1)
stubborn = len(sys.argv) > 2 and sys.argv[2] == "stubborn"
if stubborn:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.alarm(120)  # a server that fails to kill it does not leave it forever
record.write(json.dumps({"type": "start", "pid": os.getpid(),
                         "width": os.environ["COLUMNS"], "height": os.environ["ROWS"]}) + "\n")
out = sys.stdout.buffer
out.write(b"__GANGLION__\n" + b"D" + (5).to_bytes(4, "big") + b"ready")
out.flush()
inp = sys.stdin.buffer
while True:
    head = inp.read(5)
    if len(head) < 5:
        break
    payload = inp.read(int.from_bytes(head[1:], "big"))
    if head[:1] == b"M":
        meta = json.loads(payload)
        record.write(json.dumps(meta) + "\n")
        if meta.get("type") == "quit" and not stubborn:
            break
if stubborn:
    while True:
        signal.pause()
"""


@dataclass
class Served:
    """One running server."""

    proc: subprocess.Popen[bytes]
    port: int
    log: Path
    base: str  # http://127.0.0.1:PORT
    token: str

    @property
    def url(self) -> str:
        """The URL the server printed: the page, with the token."""
        return f"{self.base}/?token={self.token}"

    @property
    def cookie(self) -> dict[str, str]:
        """The cookie a browser holds once it opened :attr:`url`."""
        return {f"gputui-serve-{self.port}": self.token}

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def children(self) -> list[int]:
        """PIDs whose parent is the server (its tabs' monitors)."""
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError):
                    stat = Path(f"/proc/{entry}/stat").read_text()
                    if int(stat.rsplit(")", 1)[1].split()[1]) == self.proc.pid:
                        found.append(int(entry))
        return found


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def stand_in(tmp_path: Path, *mode: str) -> tuple[list[str], Path]:
    """The stand-in monitor's argv and the file it records to."""
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    record = tmp_path / "received.jsonl"
    return [sys.executable, str(script), str(record), *mode], record


@contextlib.contextmanager
def serving(
    tmp_path: Path,
    *args: str,
    host: str = "127.0.0.1",
    monitor_argv: Sequence[str] | None = None,
    max_sessions: int | None = None,
) -> Iterator[Served]:
    """``gputui serve --demo`` (or ``serve.run`` on ``monitor_argv``) until the block ends."""
    port = free_port()
    log = tmp_path / f"serve-{port}.log"
    if monitor_argv is None and max_sessions is None:
        command = [sys.executable, "-m", "gputui", "serve", "--demo", "--port", str(port)]
        command += ["--host", host, *args]
    else:
        extra = "" if max_sessions is None else f", max_sessions={max_sessions}"
        code = (
            "import sys\n"
            "from gputui.serve.server import ServeOptions, run\n"
            f"run(ServeOptions(host={host!r}, port={port}, demo=True{extra}),\n"
            "    lambda line: print(line, file=sys.stderr, flush=True),\n"
            f"    monitor_argv={list(monitor_argv) if monitor_argv else None!r})\n"
        )
        command = [sys.executable, "-c", code]
    proc = subprocess.Popen(
        command,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "xdg")},
    )
    try:
        deadline = time.monotonic() + 30
        while (found := ANNOUNCE.search(log.read_text(errors="replace"))) is None:
            assert proc.poll() is None, log.read_text(errors="replace")
            assert time.monotonic() < deadline, "gputui serve never said where it listens"
            time.sleep(0.05)
        while True:  # the line comes before the socket listens
            try:
                socket.create_connection(("127.0.0.1", port), timeout=2).close()
                break
            except OSError:
                assert proc.poll() is None, log.read_text(errors="replace")
                assert time.monotonic() < deadline, "gputui serve never listened"
                time.sleep(0.05)
        yield Served(proc, port, log, f"http://127.0.0.1:{port}", found.group(2))
    finally:
        stop_process(proc)
