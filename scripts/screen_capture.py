"""Run a terminal program in a pty of a given size and print its screen as text (needs pyte).

What a person would see in tmux, without tmux: the program's output is fed to a terminal
emulator (pyte) and the screen is printed after a wait, optionally after typing keys.

    python scripts/screen_capture.py --size 120x30 --wait 4 -- python -m gputui
    python scripts/screen_capture.py --size 80x24 --keys 2 --wait 3 -- python -m gputui --demo
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import pty
import select
import signal
import struct
import sys
import termios
import time


def capture(argv: list[str], cols: int, rows: int, wait: float, keys: str) -> str:
    """The screen after ``wait`` seconds (keys typed half-way), as ``rows`` lines of text."""
    import pyte

    screen = pyte.Screen(cols, rows)
    stream = pyte.ByteStream(screen)
    env = dict(os.environ, TERM="xterm-256color")
    for var in ("COLUMNS", "LINES"):
        env.pop(var, None)
    pid, fd = pty.fork()
    if pid == 0:
        try:
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
            os.execvpe(argv[0], argv, env)
        finally:
            os._exit(127)
    start = time.monotonic()
    typed = not keys
    try:
        while time.monotonic() - start < wait:
            if not typed and time.monotonic() - start >= wait / 2:
                os.write(fd, keys.encode())
                typed = True
            ready, _, _ = select.select([fd], [], [], 0.05)
            if ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                stream.feed(chunk)
    finally:
        with contextlib.suppress(OSError):
            os.write(fd, b"q")
        time.sleep(0.5)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        with contextlib.suppress(OSError):
            os.close(fd)
    return "\n".join(line.rstrip() for line in screen.display)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="120x30", help="COLSxROWS (default 120x30)")
    parser.add_argument("--wait", type=float, default=4.0, help="seconds before the capture")
    parser.add_argument("--keys", default="", help="keys typed half-way through the wait")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = [c for c in args.command if c != "--"]
    if not command:
        parser.error("give the command to run after --")
    cols, rows = (int(n) for n in args.size.lower().split("x"))
    print(capture(command, cols, rows, args.wait, args.keys))
    return 0


if __name__ == "__main__":
    sys.exit(main())
