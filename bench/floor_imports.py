"""A one-shot's import floor: the modules ``gputui --once --json`` loads, imported, nothing run.

``python3 -m bench.floor_imports [RUNS]`` runs a one-shot once to learn which modules it loads,
then times RUNS fresh interpreters that only import those modules (in the order the one-shot
loaded them) and exit, and prints one JSON line: the median wall time of those, and of RUNS
one-shots run the same way. What the one-shot takes beyond the import floor is its work (NVML,
the engines, /proc, the checks, the report); the floor itself is what no reordering can win
back, only loading fewer or lighter modules.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

_RECORD = """
import io, sys, contextlib, runpy
sys.argv = ["gputui", "--once", "--json"]
with contextlib.redirect_stdout(io.StringIO()):
    try:
        runpy.run_module("gputui", run_name="__main__", alter_sys=True)
    except SystemExit:
        pass
with open(sys.argv_out, "w") as fh:
    fh.write("\\n".join(m for m in sys.modules if m != "__main__"))
"""


def _wall(argv: list[str]) -> float:
    started = time.monotonic()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.monotonic() - started


def main(argv: list[str]) -> int:
    """Record the one-shot's modules, then time the import floor beside the one-shot.

    Args:
        argv: ``[runs]`` (default 5).

    Returns:
        The exit status.
    """
    runs = int(argv[0]) if argv else 5
    with tempfile.TemporaryDirectory() as tmp:
        listing = os.path.join(tmp, "modules.txt")
        record = f"import sys; sys.argv_out = {listing!r}\n{_RECORD}"
        subprocess.run([sys.executable, "-c", record], check=True)
        with open(listing, encoding="utf-8") as fh:
            modules = [m for m in fh.read().split() if m]
        # Each import guarded: a module a one-shot loaded through a path of its own (a
        # stand-in, a package's private part) must not end the floor's run.
        floor = f"import importlib\nfor m in {modules!r}:\n    try: importlib.import_module(m)\n"
        floor += "    except Exception: pass\n"
        once = [sys.executable, "-m", "gputui", "--once", "--json"]
        imports = [sys.executable, "-c", floor]
        bare = [sys.executable, "-c", "pass"]
        walls: dict[str, list[float]] = {"once": [], "imports": [], "interpreter": []}
        for _ in range(runs):  # alternated, so a change of the machine's load hits all alike
            walls["once"].append(_wall(once))
            walls["imports"].append(_wall(imports))
            walls["interpreter"].append(_wall(bare))
    gputui_modules = sum(1 for m in modules if m.startswith("gputui"))
    line = {k: round(statistics.median(v), 3) for k, v in walls.items()}
    line.update(modules=len(modules), gputui_modules=gputui_modules, runs=runs)
    print(json.dumps(line))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
