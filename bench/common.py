"""Small shared helpers: statistics, tables, /proc sampling of a process tree."""

from __future__ import annotations

import json
import os
import statistics
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def pct(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); small samples make interpolation pointless."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of ys over xs (0 for fewer than two points)."""
    n = len(xs)
    if n < 2:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "n/a"


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("met" if ok else "MISSED")


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A plain-text table (right-aligned numbers) that survives copy-paste into markdown."""
    cells = [[str(h) for h in headers]] + [[_cell(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        lines.append(
            "  ".join(c.rjust(w) if n else c.ljust(w) for c, w in zip(row, widths, strict=True))
        )
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        if value != value:
            return "-"
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


def emit(title: str, text: str) -> None:
    print(f"\n== {title} ==\n{text}", flush=True)


def save_json(path: str | None, name: str, data: Any) -> None:
    """Write ``data`` to ``<path>/<name>.json`` when an output folder was given."""
    if not path:
        return
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(data, indent=2, default=str) + "\n")


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# --- /proc sampling -------------------------------------------------------------------------


def _stat_fields(pid: int, tid: int | None = None) -> list[str] | None:
    """The fields after ``comm`` of a process's (or one of its threads') stat; None when gone."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    try:
        text = Path(path).read_text()
    except OSError:
        return None
    # comm may contain spaces and parentheses: split after the last ')'.
    return text[text.rindex(")") + 2 :].split()


def descendants(root: int) -> list[int]:
    """``root`` and every live process below it (a peer may be a wrapper script)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat_fields(int(entry))
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def cpu_seconds(pids: Iterable[int]) -> float:
    """utime+stime of the processes (each process's stat already sums all its threads)."""
    total = 0
    for pid in pids:
        fields = _stat_fields(pid)
        if fields is not None:
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    return total / CLK_TCK


def thread_cpu_seconds(pid: int, tid: int) -> float:
    """utime+stime of one thread (the main thread's id is the process id); 0 when gone."""
    fields = _stat_fields(pid, tid)
    return 0.0 if fields is None else (int(fields[11]) + int(fields[12])) / CLK_TCK


def memory_split(pid: int) -> dict[str, int]:
    """Resident bytes of one process by kind of mapping, from ``/proc/PID/smaps``.

    ``heap`` is the C allocator's main arena (``[heap]``), ``anon`` every other anonymous
    mapping (Python's object arenas, thread arenas and stacks, large blocks), ``file`` mapped
    files (code, libraries). A growing RSS splits into these to say which allocator kept it.
    """
    out = {"heap": 0, "anon": 0, "file": 0}
    kind = "anon"
    try:
        with open(f"/proc/{pid}/smaps", encoding="ascii", errors="replace") as fh:
            for line in fh:
                first = line.split(None, 6)
                if not first:
                    continue
                if first[0].endswith(":") and not first[0][0].isdigit():
                    if first[0] == "Rss:":
                        out[kind] += int(first[1]) * 1024
                    continue
                name = first[5] if len(first) > 5 else ""
                if name == "[heap]":
                    kind = "heap"
                else:
                    kind = "anon" if not name or name.startswith("[") else "file"
    except OSError:
        pass
    return out


def rss_bytes(pids: Iterable[int]) -> int:
    """Sum of VmRSS (threads share their process's memory, so processes only)."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
                    break
        except OSError:
            continue
    return total


def threads(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


def self_rss() -> int:
    return rss_bytes([os.getpid()])
