"""The long-lived monitor's garbage-collector policy: set by the collect loop, once, never by a
collector (a one-shot keeps the interpreter's defaults).

Each case runs in a fresh interpreter: freezing and thresholds are process-wide, and the test
process has collected before.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any


def _in_a_fresh_interpreter(code: str) -> Any:
    """What ``code`` prints (one JSON document), run by ``python -c``."""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return json.loads(out.stdout)


CODE = """
import gc, json
from gputui.collect.collector import Collector
from gputui.collect.docker.source import DockerSource
from gputui.collect.gc_policy import GC_GEN0_THRESHOLD
from gputui.collect.linux.proc_reader import ProcSource
from gputui.collect.loop import CollectLoop
from gputui.collect.settle import collect_settled
from gputui.collect.standins.scenario import ScenarioSource

def state():
    return (gc.get_threshold(), gc.get_freeze_count())

before = state()
collector = Collector(ScenarioSource({"gpus": []}), ProcSource(), DockerSource())
built = state()
collector.collect()
collect_settled(collector)
one_shot = state()  # what --once and free do: collections, no loop
loop = CollectLoop(collector, lambda snapshot: None, lambda snapshot, analysis: None, interval=0)
loop.run(count=1)
counted = state()  # a loop asked for one refresh ends before it would tune
loop.run(count=2)
first = state()
gc.set_threshold(60_000, 10, 10)
loop.run(count=2)
collector.close()
print(json.dumps({"before": before, "built": built, "one_shot": one_shot, "counted": counted,
                  "first": first, "second": gc.get_threshold(), "want": GC_GEN0_THRESHOLD}))
"""


def test_gc_is_tuned_by_the_loop_after_its_first_refresh_and_only_once() -> None:
    seen = _in_a_fresh_interpreter(CODE)
    assert seen["before"][0][0] == 700 and seen["before"][1] == 0  # CPython's defaults
    assert seen["built"] == seen["before"]  # building a collector changes nothing
    assert seen["one_shot"] == seen["before"]  # nor do its collections: a one-shot pays nothing
    assert seen["counted"] == seen["before"]
    threshold, frozen = seen["first"]
    assert threshold[0] == seen["want"] > 700
    assert threshold[1:] == seen["before"][0][1:]
    assert frozen > 10_000  # start-up's objects (modules, classes) are out of every collection
    assert seen["second"][0] == 60_000  # a later refresh leaves the program's own setting alone


OPT_OUT = """
import gc, json
from gputui.collect.collector import Collector
from gputui.collect.docker.source import DockerSource
from gputui.collect.linux.proc_reader import ProcSource
from gputui.collect.loop import CollectLoop
from gputui.collect.standins.scenario import ScenarioSource

before = (gc.get_threshold(), gc.get_freeze_count())
collector = Collector(ScenarioSource({"gpus": []}), ProcSource(), DockerSource())
loop = CollectLoop(collector, lambda snapshot: None, lambda snapshot, analysis: None,
                   interval=0, tune_gc=False)
loop.run(count=3)
collector.close()
print(json.dumps({"before": before, "after": (gc.get_threshold(), gc.get_freeze_count())}))
"""


def test_a_loop_without_the_policy_leaves_the_collector_alone() -> None:
    seen = _in_a_fresh_interpreter(OPT_OUT)
    assert seen["after"] == seen["before"]


SWEEP = """
import gc, json, time, weakref
import gputui.collect.gc_policy as gc_policy
from gputui.collect.gc_policy import GC_SWEEP_S, MonitorGc

class Clock:
    # The policy module's clock, moved forward by hand: a loaded machine's slow refresh
    # cannot make the sweep due early, and the test need not wait 30 s for it.
    ahead = 0.0
    def __getattr__(self, name):
        return getattr(time, name)
    def monotonic(self):
        return time.monotonic() + self.ahead

clock = gc_policy.time = Clock()

class Ring:
    pass

def garbage_ring():
    a, b = Ring(), Ring()
    a.other, b.other = b, a  # a cycle: only the garbage collector frees it
    return weakref.ref(a)

policy = MonitorGc()
policy.after_refresh()  # tunes the collector and starts the sweep clock
ring = garbage_ring()
fulls = gc.get_stats()[2]["collections"]
policy.after_refresh()  # not due yet
early = (ring() is not None, gc.get_stats()[2]["collections"] - fulls)
clock.ahead = GC_SWEEP_S + 1
policy.after_refresh()  # due: one full collection
late = (ring() is not None, gc.get_stats()[2]["collections"] - fulls)
print(json.dumps({"early": early, "late": late}))
"""


def test_cyclic_garbage_is_swept_on_a_clock_despite_the_raised_threshold() -> None:
    # Before the sweep, a ring like this (Textual drops rings of cached lines whenever the
    # tree changes) lived until CPython's rare older collections: the TUI grew tens of MB.
    seen = _in_a_fresh_interpreter(SWEEP)
    assert seen["early"] == [True, 0]  # not yet due: no full collection, the ring waits
    assert seen["late"] == [False, 1]  # due: one full collection, the ring is gone
