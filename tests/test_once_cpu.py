"""``--once`` measures CPU % over its own run (a short window) instead of printing N/A."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

BUSY = "import time\nend = time.time() + 60\nwhile time.time() < end:\n    pass\n"


@pytest.fixture
def busy() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", BUSY])
    yield proc
    proc.kill()
    proc.wait()


def test_once_measures_process_and_host_cpu(busy: subprocess.Popen[bytes], tmp_path: Path) -> None:
    scenario = tmp_path / "s.json"
    scenario.write_text(
        json.dumps(
            {"gpus": [{"index": 0, "processes": [{"pid": busy.pid, "used_memory_mib": 10}]}]}
        )
    )
    result = subprocess.run(
        [sys.executable, "-m", "gputui", "--scenario", str(scenario), "--once", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    (proc,) = [p for p in doc["processes"] if p["pid"] == busy.pid]
    # A spinning process: well above zero even on a loaded machine (the window is 0.1 s, so
    # the figure moves in steps of 10 %).
    assert proc["cpu_percent"] is not None
    assert proc["cpu_percent"] >= 10.0
    assert doc["host_stats"]["cpu_percent"] is not None
    assert doc["host_stats"]["cpu_percent"] > 0.0

    text = subprocess.run(
        [sys.executable, "-m", "gputui", "--scenario", str(scenario), "--once"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    ).stdout
    assert "Host: CPU N/A" not in text
