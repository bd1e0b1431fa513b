"""The least a Textual GPU monitor can cost: the floor under gputui's TUI CPU and memory.

``python -m bench.floor_app [--interval S]`` shows one line, refreshed every interval with what
any GPU monitor reads: each GPU's utilisation and memory from NVML and the machine's CPU from
psutil. It loads the same libraries as gputui (Textual, nvidia-ml-py, psutil) and nothing else:
no containers, no history, no tables, no worker threads. ``bench tui`` runs it next to gputui and
the peer, so the ratios have a floor measured in the same run: what gputui costs above it is
gputui's own; what the floor costs above the peer is the price of a Textual UI.

``--lines N`` adds N - 1 more lines, each a ``Static`` of its own, every one of which changes
at every refresh (a coloured bar and a figure): the floor for a screen that changes as many
lines a second as gputui's does, with no collection behind it.

``q`` quits. Without NVML the line says so, and the program still measures Textual's floor.
"""

from __future__ import annotations

import argparse
from typing import Any

import psutil
import pynvml
from textual.app import App, ComposeResult
from textual.widgets import Static


class FloorApp(App[None]):
    """One ``Static`` line: every GPU's utilisation and memory, and the machine's CPU."""

    BINDINGS = [("q", "quit", "Quit")]

    CSS = "Static { height: 1; }"

    def __init__(self, interval: float, lines: int = 1) -> None:
        super().__init__()
        self.interval = interval
        self.lines = max(1, lines)
        self.ticks = 0
        self.handles: list[Any] = []
        self.nvml_error = ""

    def compose(self) -> ComposeResult:
        yield Static("starting", id="line")
        for i in range(1, self.lines):
            yield Static("", id=f"more{i}")

    def on_mount(self) -> None:
        try:
            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except pynvml.NVMLError as exc:
            self.nvml_error = f"NVML not available: {exc}"
        psutil.cpu_percent()  # the first call only sets the baseline
        self.tick()
        self.set_interval(self.interval, self.tick)

    def tick(self) -> None:
        """Read each GPU and the CPU once and redraw the line."""
        parts = [f"cpu {psutil.cpu_percent():5.1f}%"]
        for i, handle in enumerate(self.handles):
            try:
                util = pynvml.nvmlDeviceGetUtilizationRates(handle).gpu
                mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
                parts.append(f"gpu{i} {util:3d}% {mem.used >> 20:,}/{mem.total >> 20:,} MiB")
            except pynvml.NVMLError as exc:
                parts.append(f"gpu{i} {exc}")
        if self.nvml_error:
            parts.append(self.nvml_error)
        self.query_one("#line", Static).update("  ".join(parts))
        self.ticks += 1
        for i in range(1, self.lines):
            # A bar and a figure that move at every refresh, in the styles a gauge line uses.
            value = (self.ticks * 7 + i * 13) % 100
            bar = "█" * (value * 60 // 100)
            self.query_one(f"#more{i}", Static).update(
                f"[b]line {i:2d}[/b] [green]{bar:<60}[/green] [$accent]{value:3d}%[/] "
                f"{self.ticks * i % 1000:5d} MiB"
            )

    def on_unmount(self) -> None:
        if self.handles:
            pynvml.nvmlShutdown()


def main() -> None:
    """Parse ``--interval`` and run the floor app until ``q``."""
    parser = argparse.ArgumentParser(prog="python -m bench.floor_app", description=__doc__)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--lines", type=int, default=1, help="lines changing at each refresh")
    args = parser.parse_args()
    FloorApp(args.interval, args.lines).run()


if __name__ == "__main__":
    main()
