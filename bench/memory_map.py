"""Where a running program's resident memory is: RSS by mapping, for gputui and its peers.

``python -m bench.memory_map --seconds 20 -- CMD...`` runs CMD in a 160x50 pty (as ``bench tui``
does), waits, and prints its RSS split by what is mapped: the Python heap and other anonymous
memory, each shared library (``libnvidia-ml``, ``libpython``, ``libcrypto``...) and the rest,
from ``/proc/PID/smaps``. Run it for gputui and for ``bench/floor_app.py`` on the same machine:
the libraries both load are the floor; what gputui has above it is its own (anonymous memory:
objects, module code, buffers).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections import Counter

from bench.pty_run import PtyRun, split

_HEADER = re.compile(r"^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \d+\s*(.*)$")


def rss_by_mapping(pid: int) -> Counter[str]:
    """kB resident per mapping name (anonymous mappings as ``[anon]``) of one process."""
    out: Counter[str] = Counter()
    name = "[anon]"
    with open(f"/proc/{pid}/smaps") as smaps:
        for line in smaps:
            header = _HEADER.match(line)
            if header:
                path = header.group(1).strip()
                name = os.path.basename(path) if path.startswith("/") else (path or "[anon]")
                # One entry per library, whatever its version suffix (libfoo.so.1.2.3).
                name = re.sub(r"\.so[.\d]*$", ".so", name)
            elif line.startswith("Rss:"):
                out[name] += int(line.split()[1])
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the command, then print its RSS by mapping."""
    argv = sys.argv[1:] if argv is None else argv
    command = argv[argv.index("--") + 1 :] if "--" in argv else []
    p = argparse.ArgumentParser(prog="python -m bench.memory_map", description=__doc__)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--cols", type=int, default=160)
    p.add_argument("--rows", type=int, default=50)
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    if len(command) == 1:
        command = split(command[0])
    if not command:
        p.error("the command goes after --")
    run = PtyRun(command, cols=args.cols, rows=args.rows)
    run.start()
    try:
        time.sleep(args.seconds)
        if not run.alive():
            print(f"{command[0]} exited early: {run.last_text()[-300:]}")
            return 1
        maps = rss_by_mapping(run.pid)
    finally:
        run.stop()
    total = sum(maps.values())
    print(f"{' '.join(command)}: RSS {total / 1024:.1f} MB after {args.seconds:g} s")
    for name, kb in maps.most_common(args.top):
        print(f"  {kb / 1024:7.1f} MB  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
