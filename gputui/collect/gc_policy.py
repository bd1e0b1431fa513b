"""The garbage-collector policy of a long-lived monitor.

Freeze what start-up allocated, collect the young generation rarely, sweep fully on a clock.
Process-wide settings, so no collector sets them: :class:`~gputui.collect.loop.CollectLoop`
applies them between refreshes (the TUI, ``export``, ``record``, ``daemon``), and a one-shot
(``--once``, ``free``), which never runs that loop, leaves the interpreter's defaults alone.
"""

from __future__ import annotations

import gc
import time

#: Young-generation threshold for a long-lived monitor. CPython's default (700 allocations)
#: collects about ten times per refresh at 2,000 GPU processes, and each young collection can
#: cascade into an older one that walks every object alive; the objects of one refresh are
#: mostly acyclic and freed by reference counting, so collecting rarely loses nothing.
GC_GEN0_THRESHOLD = 50_000
_gc_tuned = False

#: Seconds between full collections in a long-lived monitor. With the raised young threshold,
#: older generations are collected rarely, and cyclic garbage promoted into them waited that
#: long: Textual drops a whole ring of cached lines (each holding its cropped and divided
#: copies) whenever the container tree changes, about 1,200 objects a refresh. A 50-minute soak
#: at 1 Hz grew 107 -> 149 MB that way; one full collection a minute found 72,000 garbage
#: objects. After ``gc.freeze()`` a full collection walks only what refreshes allocated.
GC_SWEEP_S = 30.0


def tune_gc_for_monitor() -> None:
    """Freeze what start-up allocated and raise the young-generation threshold (once).

    ``gc.freeze()`` moves every object alive now (modules, classes, the first snapshot's
    caches) to a generation the collector never walks again, so later collections only look at
    what refreshes allocate. Called after the first refresh; a second call does nothing.
    """
    global _gc_tuned
    if _gc_tuned:
        return
    _gc_tuned = True
    gc.freeze()
    gen0, gen1, gen2 = gc.get_threshold()
    if gen0:  # 0 means the program disabled collection: leave that alone
        gc.set_threshold(max(gen0, GC_GEN0_THRESHOLD), gen1, gen2)


class MonitorGc:
    """The policy, applied after each refresh of one long-lived loop.

    Args:
        sweep_s: Seconds between full collections (:data:`GC_SWEEP_S`).
    """

    def __init__(self, sweep_s: float = GC_SWEEP_S) -> None:
        self._sweep_s = sweep_s
        self._next_sweep: float | None = None

    def after_refresh(self) -> None:
        """Tune the collector (the first time in this process), then sweep when one is due.

        The first call starts the sweep clock; a full collection runs once ``sweep_s`` has
        passed since the previous one (or since that first call).
        """
        tune_gc_for_monitor()
        if self._next_sweep is None:
            self._next_sweep = time.monotonic() + self._sweep_s
        elif time.monotonic() >= self._next_sweep:
            gc.collect()
            self._next_sweep = time.monotonic() + self._sweep_s
