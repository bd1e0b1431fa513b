"""Helpers of the disruption suite: the gputui CLI, scenario files, terminal-safety checks.

A module of its own (not conftest) so test modules import it by a unique name.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gputui.collect.sources import ContainerCapabilities, ContainerSource
from gputui.model.containers import ContainerReading, ExecResult
from gputui.model.status import SourceStatus

REPO = Path(__file__).resolve().parents[2]


#: Bytes that must never reach a terminal from gputui's text output: C0 controls except
#: newline (ESC among them), DEL, and the 8-bit C1 controls as UTF-8 (U+0080-U+009F).
C0_EXCEPT_NEWLINE = bytes(b for b in range(32) if b != 0x0A) + b"\x7f"


def terminal_unsafe(data: bytes) -> list[str]:
    """Every control character in ``data`` a terminal would act on (empty when safe)."""
    found = [f"0x{b:02x}" for b in data if b in C0_EXCEPT_NEWLINE]
    text = data.decode("utf-8")  # must be valid UTF-8 as well
    found += [f"U+{ord(c):04X}" for c in text if 0x80 <= ord(c) <= 0x9F]
    return found


def run_gputui(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[bytes]:
    """``python -m gputui ARGS`` with bytes output (so bad bytes are seen, not decoded away)."""
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        capture_output=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        cwd=REPO,
    )


#: ``gputui free`` whose container engine is the test engine seen through one label (argv[1]):
#: the engine is shared by parallel workers, and another test's container reserving a GPU
#: (``NVIDIA_VISIBLE_DEVICES=0``, or a leaked Created one) must not change a verdict here.
_SCOPED_FREE = """
import sys
import gputui.wiring.compose as compose
from gputui.cli.main import main
from gputui.collect.docker.source import DockerSource

label = sys.argv[1]
compose.container_sources = lambda *a, **k: [
    DockerSource(label=label, timeout=compose.DOCKER_READ_S)
]
raise SystemExit(main(["free", *sys.argv[2:]]))
"""

#: A label no container carries: ``gputui free`` that sees the engine answer with no container.
NO_CONTAINERS = "gputui-test=no-container-carries-this"


def run_free(*args: str, label: str = NO_CONTAINERS) -> subprocess.CompletedProcess[str]:
    """``gputui free ARGS`` in a process of its own, seeing only containers labelled ``label``.

    Args:
        *args: the command's arguments.
        label: ``KEY=VALUE``; by default one no container carries, so a verdict on a scenario
            file is never changed by other tests' containers on the shared engine.

    Returns:
        The finished process, text output.
    """
    return subprocess.run(
        [sys.executable, "-c", _SCOPED_FREE, label, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "GPUTUI_SCENARIO": ""},
        cwd=REPO,
    )


def run_free_settled(label: str, *args: str) -> subprocess.CompletedProcess[str]:
    """:func:`run_free` again (3 tries) while the engine, slowed by other work, did not answer."""
    for _ in range(3):
        result = run_free(*args, label=label)
        # Said on stderr, or among the JSON document's caveats with --json.
        said = result.stderr + result.stdout
        if "Docker did not answer" not in said and "engine answered slowly" not in said:
            break
    return result


def write_scenario(path: Path, data: dict[str, Any]) -> Path:
    """Write a scenario file (atomically: a concurrent reader never sees half a file)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)
    return path


def gpu(index: int = 0, pids: list[int] | tuple[int, ...] = (), **fields: Any) -> dict[str, Any]:
    """A scenario GPU with every core gauge set, running ``pids`` (100 MiB each)."""
    base: dict[str, Any] = {
        "index": index,
        "uuid": f"GPU-0000{index:04d}-0000-0000-0000-000000000000",  # NVML form
        "name": "NVIDIA H200",
        "memory_total_mib": 143771,
        "memory_used_mib": 1000,
        "utilization_gpu": 50,
        "utilization_memory": 20,
        "temperature_c": 50,
        "power_w": 300.0,
        "power_limit_w": 700,
        "clock_sm_mhz": 1980,
        "processes": [{"pid": p, "used_memory_mib": 100, "sm_util": 10} for p in pids],
    }
    base.update(fields)
    return base


class NoDocker(ContainerSource):
    """A container source with no engine, for tests about NVML or parsing: Docker stays out."""

    name = "docker"

    def capabilities(self) -> ContainerCapabilities:
        return ContainerCapabilities(exec=True, interactive_exec=True)

    def read(self) -> ContainerReading:
        return ContainerReading(SourceStatus("docker", False, "not used", "not_found"))

    def exec(self, container_id: str, argv: Sequence[str], timeout_s: float) -> ExecResult:
        raise AssertionError("no exec here")

    def interactive_exec_argv(self, container_id: str, argv: Sequence[str]) -> list[str] | None:
        raise AssertionError("no exec here")

    def close(self) -> None:
        return None
