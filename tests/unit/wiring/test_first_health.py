"""The monitor's first snapshot goes out before the health checks; the next one has them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gputui.model.settings import Settings
from gputui.wiring.compose import build_collector
from tests.support.paths import REPO


def test_the_first_collection_leaves_the_checks_to_the_next() -> None:
    collector = build_collector(Settings(demo=True), first_health_later=True)
    try:
        first = collector.collect()
        assert first.health == () and first.health_pending
        second = collector.collect()
        assert second.health and not second.health_pending
    finally:
        collector.close()


def test_a_one_shot_and_other_collectors_run_them_at_once() -> None:
    collector = build_collector(Settings(demo=True))
    try:
        first = collector.collect()
        assert first.health and not first.health_pending
    finally:
        collector.close()


MONITOR_SCRIPT = """
import json, sys
from gputui.model.settings import Settings
from gputui.wiring.compose import build_collector
collector = build_collector(Settings(scenario=sys.argv[1]), first_health_later=True)
seen = ["gputui.health.runner" in sys.modules]
collector.collect()
seen.append("gputui.health.runner" in sys.modules)
second = collector.collect()
seen.append("gputui.health.runner" in sys.modules)
collector.close()
print(json.dumps([seen, len(second.health)]))
"""


def test_a_monitor_imports_the_checks_at_their_first_run(tmp_path: Path) -> None:
    # In a fresh interpreter: an earlier test of this process has imported the checks.
    scenario = tmp_path / "one.json"
    scenario.write_text(json.dumps({"gpus": [{"index": 0, "name": "NVIDIA H200"}]}))
    out = subprocess.run(
        [sys.executable, "-c", MONITOR_SCRIPT, str(scenario)],
        capture_output=True, text=True, check=True, timeout=120, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "XDG_CONFIG_HOME": str(tmp_path)},
    )  # fmt: skip
    seen, checks = json.loads(out.stdout)
    assert seen == [False, False, True] and checks > 0
