"""Fixtures of the disruption suite: a private real dockerd, the gputui CLI, scenario files.

The engine-restart tests stop and start a *second* dockerd of their own (``PrivateEngine``,
own socket, data root and bridge), so the machine's engine and everybody's containers on it
are never touched. It needs root and a ``dockerd`` binary, as CI has; without them those tests
skip, except in CI where they fail (a CI run must not pass by skipping them).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # scripts/ holds the engine helpers shared with the script
    sys.path.insert(0, str(REPO))

from scripts.engine_control import PrivateEngine, import_image  # noqa: E402

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
        "uuid": f"GPU-rel-{index:04d}",
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


def _in_ci() -> bool:
    return bool(os.environ.get("CI")) or os.environ.get("GPUTUI_REQUIRE_DOCKER") == "1"


@pytest.fixture(scope="module")
def private_engine() -> Iterator[tuple[PrivateEngine, Any]]:
    """A private, real dockerd (live-restore) with the disruption image, and a client for it."""
    reason = None
    if os.geteuid() != 0:
        reason = "stopping and starting a dockerd needs root"
    elif shutil.which("dockerd") is None or shutil.which("ip") is None:
        reason = "no dockerd (or ip) binary"
    if reason:
        if _in_ci():
            pytest.fail(f"engine restart tests required in CI but {reason}")
        pytest.skip(reason)
    import docker

    engine = PrivateEngine(live_restore=True)
    client = None
    try:
        engine.start()
        client = docker.DockerClient(base_url=engine.url, timeout=30)
        import_image(client)
        yield engine, client
    finally:
        if client is not None and not engine.running():
            engine.start()  # to remove what it holds
        engine.close(client)
        if client is not None:
            client.close()


@pytest.fixture
def host_sleeper() -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Factory for host processes (extra argv allowed, bytes too); all killed at the end."""
    children: list[subprocess.Popen[bytes]] = []

    def start(*extra: str | bytes, **kwargs: Any) -> subprocess.Popen[bytes]:
        code = "import sys, time; print('ready', flush=True); time.sleep(120)"
        child = subprocess.Popen(
            [sys.executable, "-c", code, *extra], stdout=subprocess.PIPE, **kwargs
        )
        children.append(child)
        assert child.stdout is not None
        assert child.stdout.readline() == b"ready\n"
        return child

    yield start
    for child in children:
        if child.poll() is None:
            child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
