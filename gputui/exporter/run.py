"""The exporter's run loop: collect on a thread, render the body once, serve scrapes."""

from __future__ import annotations

import contextlib
import ipaddress
import math
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence

from gputui.collect.loop import CollectLoop
from gputui.collect.sources import CollectorProtocol
from gputui.derive.alerts import AlertRule
from gputui.derive.analysis import Analysis, Analyzer
from gputui.exporter.families import SnapshotMetrics, log_stderr
from gputui.exporter.server import HttpLimits, MetricsServer
from gputui.model.settings import MIN_INTERVAL_S
from gputui.model.snapshot import Snapshot

#: Longest collection interval: a longer one is capped (and said so at start).
MAX_INTERVAL_S = 3600.0


def bounded_interval(interval: float) -> float:
    """``interval`` within [:data:`~gputui.model.settings.MIN_INTERVAL_S`, :data:`MAX_INTERVAL_S`].

    Not a number and infinity count as too long. ``threading.Event.wait`` raises
    OverflowError beyond about 292 years, which used to end the collector thread silently.
    """
    if not math.isfinite(interval) or interval > MAX_INTERVAL_S:
        return MAX_INTERVAL_S
    return max(MIN_INTERVAL_S, interval)


def _publisher(
    metrics: SnapshotMetrics, loop: Callable[[], CollectLoop[Analysis]]
) -> Callable[[Snapshot, Analysis], None]:
    """The loop's delivery: publish the snapshot and its analysis, render the body once."""

    def deliver(snapshot: Snapshot, analysis: Analysis) -> None:
        metrics.publish(snapshot, analysis, time.monotonic() - loop().last_started)
        _render(metrics)

    return deliver


def _render(metrics: SnapshotMetrics) -> None:
    try:
        metrics.rebuild()
    except Exception as exc:  # a rendering bug: counted and served from the last body
        metrics.count_error()
        log_stderr(f"rendering the metrics failed: {type(exc).__name__}: {exc}")


def _failed(metrics: SnapshotMetrics) -> Callable[[Exception], None]:
    """The loop's error callback: count, log, and render (the error counter moved)."""

    def failed(exc: Exception) -> None:
        metrics.count_error()
        log_stderr(f"collection failed: {type(exc).__name__}: {exc}")
        _render(metrics)

    return failed


def collect_loop(
    collector: CollectorProtocol,
    metrics: SnapshotMetrics,
    *,
    interval: float,
    analyzer: Analyzer,
    observe: Callable[[Snapshot, Analysis], None] | None = None,
) -> CollectLoop[Analysis]:
    """The exporter's :class:`~gputui.collect.loop.CollectLoop` (not started).

    Each snapshot goes through ``analyzer`` (findings and alerts, as in the TUI), is published
    and rendered once. ``interval`` is bounded by :func:`bounded_interval`; an exception in a
    collection is counted in ``gputui_collect_errors_total`` and logged, and the loop goes on.
    """
    loop: CollectLoop[Analysis] = CollectLoop(
        collector,
        analyzer.analyse,
        _publisher(metrics, lambda: loop),
        interval=bounded_interval(interval),
        on_error=_failed(metrics),
        observe=observe,
    )
    return loop


def _collector_thread(
    loop: CollectLoop[Analysis], metrics: SnapshotMetrics, stop: threading.Event
) -> None:
    """Run ``loop`` until ``stop``, with the end of the thread counted and logged, never silent."""
    try:
        loop.run(stop.is_set)
    except BaseException as exc:  # SystemExit and the like: serve() restarts the thread
        metrics.count_error()
        log_stderr(f"collector thread ended: {type(exc).__name__}: {exc}; restarting it")
        with contextlib.suppress(Exception):
            metrics.rebuild()


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[IPv6]:PORT`` or ``:PORT`` (all interfaces) as (host, port).

    Raises:
        ValueError: with a one-line message.
    """
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"--listen {text!r}: expected HOST:PORT with a port 0-65535")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"--listen {text!r}: {host!r} is not an IPv6 address") from None
    elif ":" in host:
        raise ValueError(f"--listen {text!r}: write an IPv6 address in brackets, e.g. [::1]:9400")
    return host or "0.0.0.0", int(port_text)


def render_once(
    snapshot: Snapshot,
    *,
    pid_labels: bool = False,
    rules: Iterable[AlertRule] = (),
    user_series: bool = False,
) -> bytes:
    """The exposition text of one snapshot (``gputui export --once``).

    The snapshot goes through an :class:`~gputui.derive.analysis.Analyzer` with ``rules``, as
    the TUI's first refresh does: findings and alert states are those (an alert whose rule has a
    ``for`` duration is pending).
    """
    metrics = SnapshotMetrics(pid_labels=pid_labels, user_series=user_series)
    metrics.publish(snapshot, Analyzer(rules, totals=user_series).analyse(snapshot))
    metrics.rebuild()
    return metrics.exposition()


#: How often serve() checks that the collector thread is alive.
_WATCHDOG_S = 0.2
#: At exit: how long to wait for the collector thread, and for the sources to close. A stuck
#: read (a hung engine) is abandoned on its daemon thread: SIGTERM must end the exporter fast.
_STOP_JOIN_S = 0.3
_CLOSE_JOIN_S = 0.8


def _close_within(collector: CollectorProtocol, timeout: float) -> None:
    """``collector.close()`` on a daemon thread, waited for at most ``timeout`` seconds."""

    def close() -> None:
        try:
            collector.close()
        except Exception as exc:  # closing is best effort at exit
            log_stderr(f"closing the sources failed: {type(exc).__name__}: {exc}")

    thread = threading.Thread(target=close, name="gputui-export-close", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        log_stderr(f"the sources did not close within {timeout:g}s; exiting without them")


def serve(
    collector: CollectorProtocol,
    *,
    host: str,
    port: int,
    interval: float,
    pid_labels: bool = False,
    rules: Iterable[AlertRule] = (),
    stop: threading.Event,
    announce: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
    limits: HttpLimits | None = None,
    user_series: bool = False,
    sinks: Sequence[Callable[[Analysis], None]] = (),
    observe: Callable[[Snapshot, Analysis], None] | None = None,
) -> None:
    """Serve ``/metrics`` until ``stop`` is set; close the collector at the end.

    The collector runs on a daemon thread; if that thread ever dies it is restarted (counted in
    ``gputui_collector_restarts_total``; restarts in a row back off up to 10 s). ``interval``
    is bounded by :func:`bounded_interval`. Returns within about a second and a half of
    ``stop`` even when a collection or closing the sources hangs.

    Args:
        collector: Where snapshots come from.
        host: Address to listen on.
        port: Port (0: any free one; the announced line names it).
        interval: Seconds between collections.
        pid_labels: Add a ``pid`` label to the process gauges.
        rules: Alert rules of the analysis (``gputui_alert``; findings are ``gputui_finding``).
        stop: Set it to stop serving.
        announce: Receives the ``serving http://...`` line.
        limits: Connection limits (:class:`HttpLimits` defaults when None).
        user_series: Export the per-user gauges.
        sinks: The analysis sinks (alert delivery, the idle-GPU policy): see
            :class:`~gputui.derive.analysis.Analyzer`.
        observe: Also receives each snapshot (the ledger's writer).

    Raises:
        OSError: the address cannot be listened on (in use, not local...).
    """
    effective = bounded_interval(interval)
    metrics = SnapshotMetrics(pid_labels=pid_labels, interval=effective, user_series=user_series)
    metrics.rebuild()
    server = MetricsServer(host, port, metrics.exposition, limits or HttpLimits(), log_stderr)
    server.start()
    # One loop (and so one Analyzer) for the exporter's life: a restarted thread runs it again,
    # keeping the trends and the alerts' ``for`` durations.
    # The user totals only for user series.
    analyzer = Analyzer(rules, sinks, totals=user_series)
    collecting = collect_loop(
        collector, metrics, interval=effective, analyzer=analyzer, observe=observe
    )

    def start_collector() -> threading.Thread:
        thread = threading.Thread(
            target=_collector_thread,
            args=(collecting, metrics, stop),
            name="gputui-export-collector",
            daemon=True,  # a collection stuck in a source must not keep the process alive
        )
        thread.start()
        return thread

    loop = start_collector()
    shown = f"[{host}]" if ":" in host else host
    capped = "" if effective == interval else f" (--interval {interval:g} is out of range)"
    announce(
        f"gputui export: serving http://{shown}:{server.port}/metrics every {effective:g}s{capped}"
    )
    failures, restart_at, seen = 0, 0.0, metrics.publications
    try:
        while not stop.wait(_WATCHDOG_S):
            if loop.is_alive():
                continue
            now = time.monotonic()
            if restart_at == 0.0:
                # Back off when the thread keeps dying without publishing anything.
                failures = 0 if metrics.publications != seen else min(failures + 1, 6)
                restart_at = now + min(10.0, 0.2 * 2**failures)
            if now >= restart_at:
                restart_at, seen = 0.0, metrics.publications
                metrics.count_restart()
                with contextlib.suppress(Exception):
                    metrics.rebuild()
                loop = start_collector()
    finally:
        collecting.stop()  # ends the interval wait at once, not at the next slice
        server.close()
        loop.join(_STOP_JOIN_S)
        _close_within(collector, _CLOSE_JOIN_S)
