"""NVML started from the command line's first moment, on a thread of its own.

``nvmlInit`` takes 75-110 ms on an H200 with persistence mode on, and a one-shot's GPM figures
need two samples 100 ms apart. Both are waits in the driver (ctypes releases the GIL), so they
can pass while the interpreter imports the configuration, the container engines' clients and
(for the monitor) Textual, instead of following them. :class:`EarlyNvml` starts the driver on
its thread as soon as pynvml is imported, then makes the
:class:`~gputui.collect.nvml.source.NvmlSource` there (importing its module), starts it and
takes the first GPM samples; the collector's first read waits for that start.

This module imports nothing at its top but :mod:`threading` and :mod:`contextlib`, so the
command line loads it before anything heavy and the thread starts at once.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gputui.collect.nvml.source import NvmlSource
    from gputui.model.gpu import GpuReading

#: Seconds a read waits for NVML's start. With persistence mode off the driver sets every GPU
#: up again for a new client, "on the order of seconds"; a start longer than this is a hung
#: driver, said as such, and later reads look again.
START_WAIT_S = 30.0

#: What the header and the health view say while the start has not ended.
STALLED_FIX = (
    "NVML has not finished starting: a hung driver or a GPU still being set up (persistence "
    "mode off: sudo nvidia-smi -pm 1). Check nvidia-smi and the kernel log (dmesg)."
)


def load_pynvml() -> ModuleType:
    """Import the real ``pynvml`` module (nvidia-ml-py): gputui's one import of it.

    Importing never touches the driver. Here, in the module the command line loads first, so
    that the driver's start can begin before the NVML source's own modules are imported.
    """
    import pynvml

    module: ModuleType = pynvml
    return module


def _start_driver() -> Any:
    """``pynvml`` with ``nvmlInit`` called, before the source's modules are imported; or None.

    The driver's start is most of NVML's (75-110 ms on an H200) and a wait in the driver, with
    the GIL free: begun first, it passes while this thread imports the source's modules (most
    of which the command line's own imports have loaded by then) instead of after them. NVML
    counts its starts: the source's ``nvmlInit`` is a second one, and the caller ends this
    one with ``nvmlShutdown`` once the source has started. A start that fails here is left to
    the source, whose own start fails the same way and says why.
    """
    pynvml = load_pynvml()
    try:
        pynvml.nvmlInit()
    except (pynvml.NVMLError, OSError):
        return None
    return pynvml


class EarlyNvml:
    """An NVML source made and started at once, on a thread of its own.

    Args:
        background: The source's slow lane and GPM lane on their own threads (the monitor,
            the exporter); False for a one-shot, whose reads are inline.
        slow_interval: Seconds between slow-lane reads.
        pcie: Read PCIe throughput (a one-shot skips it: 20 ms per direction per GPU).
        start_wait_s: Seconds a read waits for the start (:data:`START_WAIT_S`).
        make: Makes the source, on the start's thread (tests: over a pynvml-shaped stand-in);
            by default the real :class:`~gputui.collect.nvml.source.NvmlSource`.
    """

    def __init__(
        self,
        *,
        background: bool,
        slow_interval: float,
        pcie: bool,
        start_wait_s: float = START_WAIT_S,
        make: Callable[[], NvmlSource] | None = None,
    ) -> None:
        self._background = background
        self._slow_interval = slow_interval
        self._pcie = pcie
        self._make = make
        self._wait_s = start_wait_s
        self._first_wait_s = start_wait_s
        self._source: NvmlSource | None = None
        self._error: Exception | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._started = threading.Event()
        threading.Thread(target=self._start, name="gputui-nvml-start", daemon=True).start()

    def _start(self) -> None:
        from gputui.boundary.startup_trace import mark  # os and time only

        try:
            if self._make is not None:
                source = self._make()
                source.warm()
            else:
                driver = _start_driver()
                mark("nvml-driver-started")
                try:
                    source = self._real()
                    source.warm()
                finally:
                    if driver is not None:  # the source's own start holds NVML now
                        with contextlib.suppress(Exception):
                            driver.nvmlShutdown()
            mark("nvml-started")
            with self._lock:
                late_close = self._closed
                if not late_close:
                    self._source = source
        except Exception as exc:  # re-raised by read(), on the collector's thread
            self._error = exc
            late_close = False
        finally:
            self._started.set()
        if late_close:  # closed while it was starting: nobody else will shut NVML down
            source.close()

    def _real(self) -> NvmlSource:
        from gputui.collect.nvml.source import NvmlSource  # imports pynvml, on this thread

        return NvmlSource(
            slow_interval=self._slow_interval, background=self._background, pcie=self._pcie
        )

    def read(self) -> GpuReading:
        """The started source's reading; an unhealthy NVML status while the start has not ended.

        Raises:
            Exception: What making or starting the source raised (a broken installation),
                as the source itself would have raised it on the collector's thread.
        """
        from gputui.model.gpu import GpuReading
        from gputui.model.status import SourceStatus

        if not self._started.wait(self._wait_s):
            # Later reads do not wait again, but look: the start may still end (a slow driver,
            # not a hung one), and the monitor's next refresh then shows the GPUs.
            self._wait_s = 0.0
            error = f"NVML did not finish starting within {self._first_wait_s:g} s"
            status = SourceStatus("nvml", ok=False, error=error, kind="Timeout", fix=STALLED_FIX)
            return GpuReading(status=status)
        if self._error is not None:
            raise self._error
        source = self._source
        if source is None:  # read after close()
            return GpuReading(status=SourceStatus("nvml", ok=False, error="closed", kind="Closed"))
        return source.read()

    def close(self) -> None:
        """Shut NVML down, now or when a start still under way ends (idempotent)."""
        with self._lock:
            self._closed = True
            source, self._source = self._source, None
        if source is not None:
            source.close()
