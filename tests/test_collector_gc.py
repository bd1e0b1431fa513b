"""The collector tunes the garbage collector once, after the first collection."""

from __future__ import annotations

import json
import subprocess
import sys

CODE = """
import gc, json
from gputui.collect.collector import Collector, GC_GEN0_THRESHOLD
from gputui.collect.docker.source import DockerSource
from gputui.collect.linux.processes import ProcSource
from gputui.collect.standins.scenario import ScenarioSource

before = (gc.get_threshold(), gc.get_freeze_count())
collector = Collector(ScenarioSource({"gpus": []}), ProcSource(), DockerSource())
built = (gc.get_threshold(), gc.get_freeze_count())
collector.collect()
first = (gc.get_threshold(), gc.get_freeze_count())
gc.set_threshold(60_000, 10, 10)
collector.collect()
collector.close()
print(json.dumps({"before": before, "built": built, "first": first,
                  "second": gc.get_threshold(), "want": GC_GEN0_THRESHOLD}))
"""


def test_gc_is_tuned_after_the_first_collect_and_only_once() -> None:
    # In a fresh interpreter: freezing is process-wide, and the test process has collected before.
    out = subprocess.run(
        [sys.executable, "-c", CODE], capture_output=True, text=True, timeout=60, check=True
    )
    seen = json.loads(out.stdout)
    assert seen["before"][0][0] == 700 and seen["before"][1] == 0  # CPython's defaults
    assert seen["built"] == seen["before"]  # building a collector changes nothing
    threshold, frozen = seen["first"]
    assert threshold[0] == seen["want"] > 700
    assert threshold[1:] == seen["before"][0][1:]
    assert frozen > 10_000  # start-up's objects (modules, classes) are out of every collection
    assert seen["second"][0] == 60_000  # a later collect leaves the program's own setting alone
