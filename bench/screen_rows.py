"""Which screen rows a full-screen program rewrites each second, and what it writes there.

``python -m bench.screen_rows capture FILE --seconds 20 --cols 160 --rows 50 -- CMD...`` runs
CMD in a pty of that size (as ``bench tui`` does) and keeps its raw output with the time of
each read; ``python -m bench.screen_rows report FILE`` replays it through a small terminal
model and prints, for every row, how often it was written after the warm-up and the text it
showed last, so the rows behind a ``rows/s`` figure can be named (a sparkline shifting, a
clock, a CPU figure at a precision that moves every second).

The model knows what Textual and curses write: cursor positioning (absolute, relative, to a
column or a line), carriage returns and line feeds, erasing to the end of the line, and text;
other sequences (colours, modes) are skipped. A row counts as written once per read in which
any cell of it was written, as ``bench tui`` counts it.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

from bench.pty_run import PtyRun, split

_ESCAPE = (
    rb"\x1b\[([0-?]*)([ -/]*)([@-~])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1bP[^\x1b]*\x1b\\"
    rb"|\x1b[()][0-9A-Za-z]|\x1b[=>78DEHMNOZc]"
)
_WHOLE_ESCAPE = re.compile(_ESCAPE)
_SEQUENCE = re.compile(_ESCAPE + rb"|[\x00-\x1f]")


class Screen:
    """A grid of characters and a cursor, fed raw output; records the rows each feed wrote."""

    def __init__(self, cols: int, rows: int) -> None:
        self.cols, self.rows = cols, rows
        self.cells = [[" "] * cols for _ in range(rows)]
        self.x = self.y = 0
        self._pending = b""  # an escape sequence split between two reads

    def feed(self, data: bytes) -> set[int]:
        """Apply one read of output; the rows (0-based) it wrote to."""
        written: set[int] = set()
        raw = self._pending + data
        self._pending = b""
        cut = raw.rfind(b"\x1b")
        if cut >= 0 and cut > len(raw) - 64 and not _WHOLE_ESCAPE.match(raw, cut):
            raw, self._pending = raw[:cut], raw[cut:]  # a sequence split between two reads
        pos = 0
        for match in _SEQUENCE.finditer(raw):
            self._text(raw[pos : match.start()].decode("utf-8", "replace"), written)
            pos = match.end()
            self._control(match, written)
        self._text(raw[pos:].decode("utf-8", "replace"), written)
        return written

    def _text(self, text: str, written: set[int]) -> None:
        for ch in text:
            if 0 <= self.y < self.rows and 0 <= self.x < self.cols:
                self.cells[self.y][self.x] = ch
                written.add(self.y)
            self.x += 1

    def _control(self, match: re.Match[bytes], written: set[int]) -> None:
        whole = match.group(0)
        if whole == b"\r":
            self.x = 0
        elif whole == b"\n":
            self.y = min(self.rows - 1, self.y + 1)
        elif whole == b"\x08":
            self.x = max(0, self.x - 1)
        final = match.group(3)
        if final is None:
            return
        params = [int(p) if p.isdigit() else 0 for p in match.group(1).decode().split(";")]
        first = params[0] if params and params[0] else 1
        if final in (b"H", b"f"):
            self.y = (params[0] if params[0] else 1) - 1
            self.x = (params[1] if len(params) > 1 and params[1] else 1) - 1
        elif final == b"A":
            self.y = max(0, self.y - first)
        elif final == b"B":
            self.y = min(self.rows - 1, self.y + first)
        elif final == b"C":
            self.x = min(self.cols - 1, self.x + first)
        elif final == b"D":
            self.x = max(0, self.x - first)
        elif final == b"G":
            self.x = first - 1
        elif final == b"d":
            self.y = first - 1
        elif final == b"K" and 0 <= self.y < self.rows:
            start = self.x if not params[0] else 0
            for x in range(start, self.cols):
                self.cells[self.y][x] = " "
            written.add(self.y)
        elif final == b"J" and params[0] == 2:
            self.cells = [[" "] * self.cols for _ in range(self.rows)]

    def line(self, y: int) -> str:
        return "".join(self.cells[y]).rstrip()


def capture(argv: list[str], path: Path, seconds: float, cols: int, rows: int) -> None:
    """Run ``argv`` in a pty for ``seconds``; keep every read with its time (JSON lines)."""
    run = PtyRun(argv, cols=cols, rows=rows)
    reads: list[tuple[float, bytes]] = []
    run.on_read = lambda chunk: reads.append((time.monotonic() - run.started, chunk))
    run.start()
    try:
        run.sample_for(seconds)
    finally:
        run.stop()
    with path.open("w") as out:
        out.write(json.dumps({"argv": argv, "cols": cols, "rows": rows}) + "\n")
        for at, chunk in reads:
            out.write(json.dumps([round(at, 4), base64.b64encode(chunk).decode()]) + "\n")


def report(path: Path, warmup: float) -> str:
    """Rows written per second after ``warmup`` seconds, each with its last text."""
    lines = path.read_text().splitlines()
    head = json.loads(lines[0])
    screen = Screen(head["cols"], head["rows"])
    counts: Counter[int] = Counter()
    first = last = None
    for line in lines[1:]:
        at, chunk = json.loads(line)
        written = screen.feed(base64.b64decode(chunk))
        if at >= warmup:
            counts.update(written)
            first = at if first is None else first
            last = at
    span = max((last or 0.0) - (first or 0.0), 1e-9)
    size = f"{head['cols']}x{head['rows']}"
    title = f"{' '.join(head['argv'])}  ({size}, {span:.1f} s after {warmup:g} s)"
    out = [title, f"rows written a second: {sum(counts.values()) / span:.1f}"]
    for y in range(screen.rows):
        out.append(f"{y + 1:3d} {counts[y] / span:5.2f}/s |{screen.line(y)[:200]}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.screen_rows", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("capture", help="run a command in a pty and keep its output")
    c.add_argument("file", type=Path)
    c.add_argument("--seconds", type=float, default=20.0)
    c.add_argument("--cols", type=int, default=160)
    c.add_argument("--rows", type=int, default=50)
    r = sub.add_parser("report", help="rows written a second in a capture")
    r.add_argument("file", type=Path)
    r.add_argument("--warmup", type=float, default=5.0)
    argv = sys.argv[1:] if argv is None else argv
    command = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = p.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    if args.cmd == "capture":
        if len(command) == 1:  # one quoted command line
            command = split(command[0])
        if not command:
            p.error("capture needs the command after --")
        capture(command, args.file, args.seconds, args.cols, args.rows)
        return 0
    print(report(args.file, args.warmup))
    return 0


if __name__ == "__main__":
    sys.exit(main())
