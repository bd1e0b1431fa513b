"""The collector tunes the garbage collector once, after the first collection."""

from __future__ import annotations

import json
import subprocess
import sys

CODE = """
import gc, json
from gputui.collect.collector import Collector, GC_GEN0_THRESHOLD
from gputui.collect.docker.source import DockerSource
from gputui.collect.linux.proc_reader import ProcSource
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


SWEEP = """
import gc, json, time, weakref
import gputui.collect.collector as collector_module
from gputui.collect.collector import Collector, GC_SWEEP_S
from gputui.collect.docker.source import DockerSource
from gputui.collect.linux.proc_reader import ProcSource
from gputui.collect.standins.scenario import ScenarioSource

class Clock:
    # The collector module's clock, moved forward by hand: a loaded machine's slow collect
    # cannot make the sweep due early, and the test need not wait 30 s for it.
    ahead = 0.0
    def __getattr__(self, name):
        return getattr(time, name)
    def monotonic(self):
        return time.monotonic() + self.ahead

clock = collector_module.time = Clock()

class Ring:
    pass

def garbage_ring():
    a, b = Ring(), Ring()
    a.other, b.other = b, a  # a cycle: only the garbage collector frees it
    return weakref.ref(a)

collector = Collector(ScenarioSource({"gpus": []}), ProcSource(), DockerSource())
collector.collect()  # tunes the collector and starts the sweep clock
ring = garbage_ring()
fulls = gc.get_stats()[2]["collections"]
collector.collect()  # not due yet
early = (ring() is not None, gc.get_stats()[2]["collections"] - fulls)
clock.ahead = GC_SWEEP_S + 1
collector.collect()  # due: one full collection
late = (ring() is not None, gc.get_stats()[2]["collections"] - fulls)
collector.close()
print(json.dumps({"early": early, "late": late}))
"""


def test_cyclic_garbage_is_swept_on_a_clock_despite_the_raised_threshold() -> None:
    # Before the sweep, a ring like this (Textual drops rings of cached lines whenever the
    # tree changes) lived until CPython's rare older collections: the TUI grew tens of MB.
    out = subprocess.run(
        [sys.executable, "-c", SWEEP], capture_output=True, text=True, timeout=60, check=True
    )
    seen = json.loads(out.stdout)
    assert seen["early"] == [True, 0]  # not yet due: no full collection, the ring waits
    assert seen["late"] == [False, 1]  # due: one full collection, the ring is gone
