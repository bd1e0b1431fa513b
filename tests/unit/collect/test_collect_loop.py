"""The one collect loop (collect/loop.py) and the one collector protocol, without Textual."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from gputui.collect.docker.logs import LogReader, LogStreamError
from gputui.collect.linux.parent_chain import ParentLink
from gputui.collect.loop import SLICE_S, CollectLoop
from gputui.collect.sources import CollectorProtocol, ContainerOwner
from gputui.derive.alerts import AlertRule
from gputui.derive.analysis import Analysis, Analyzer
from gputui.model.containers import ContainerDetails, ContainerProcesses, ExecResult
from gputui.model.gpu import GpuSample
from gputui.model.settings import Settings
from gputui.model.snapshot import HostInfo, Snapshot
from gputui.recording.player import ReplayCollector
from gputui.wiring.compose import build_collector

T0 = 1_800_000_000.0


def snap(i: int, util: int = 10) -> Snapshot:
    gpu = GpuSample(0, f"GPU-{i}", "H200", utilization_gpu=util)
    return Snapshot(T0 + i, "replay", HostInfo("h"), gpus=(gpu,))


def recording(n: int = 5) -> ReplayCollector:
    return ReplayCollector([snap(i) for i in range(n)])


@contextmanager
def running(loop: CollectLoop[Analysis], **kwargs: object) -> Iterator[threading.Thread]:
    thread = threading.Thread(target=loop.run, kwargs=kwargs, daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        loop.stop()
        thread.join(5)
        assert not thread.is_alive()


def wait_for(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_each_snapshot_is_analysed_once_and_delivered_in_order() -> None:
    rule = AlertRule("hot", "gpu_util", threshold=50.0)
    got: list[tuple[Snapshot, Analysis]] = []
    player = ReplayCollector([snap(0, util=10), snap(1, util=90), snap(2, util=90)])
    loop = CollectLoop(
        player, Analyzer([rule]).analyse, lambda s, a: got.append((s, a)), interval=0.0
    )
    loop.run(count=3)
    assert [s.taken_at for s, _ in got] == [T0, T0 + 1, T0 + 2]
    assert all(a.snapshot is s for s, a in got)
    # The engines kept their state between snapshots: the alert started once, then held.
    assert [len(a.started) for _, a in got] == [0, 1, 0]
    assert loop.delivered == 3 and loop.errors == 0


@pytest.mark.parametrize("interval", [1e12, math.inf, math.nan, threading.TIMEOUT_MAX * 2])
def test_stop_ends_any_wait_within_a_slice(interval: float) -> None:
    """An interval beyond threading.TIMEOUT_MAX neither raises nor holds a stop back."""
    loop = CollectLoop(recording(), lambda s: Analysis(s), lambda s, a: None, interval=interval)
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    wait_for(lambda: loop.delivered == 1)
    time.sleep(0.05)  # in the long wait now
    started = time.monotonic()
    loop._stop.set()  # the flag alone (no wake): noticed at the end of the current slice
    thread.join(5)
    assert not thread.is_alive()
    assert time.monotonic() - started <= SLICE_S + 0.3
    assert loop.delivered == 1 and loop.errors == 0


def test_a_cancelled_flag_is_honoured_like_a_stop() -> None:
    cancelled = threading.Event()
    loop = CollectLoop(recording(), Analysis, lambda s, a: None, interval=3600.0)
    with running(loop, cancelled=cancelled.is_set) as thread:
        wait_for(lambda: loop.delivered == 1)
        cancelled.set()
        thread.join(SLICE_S + 0.5)
        assert not thread.is_alive()


def test_pause_holds_collection_resume_and_wake_collect_at_once() -> None:
    player = recording(50)
    loop = CollectLoop(player, Analysis, lambda s, a: None, interval=3600.0)
    with running(loop):
        wait_for(lambda: loop.delivered == 1)
        loop.wake()  # cuts the hour short
        wait_for(lambda: loop.delivered == 2)
        loop.pause()
        loop.wake()  # the wait ends, but the pause holds the next collection
        time.sleep(SLICE_S + 0.2)
        assert loop.delivered == 2 and loop.paused
        loop.resume()
        wait_for(lambda: loop.delivered == 3)
        loop.interval = 3600.0  # a new interval also ends the wait in progress
        wait_for(lambda: loop.delivered == 4)
    assert player.position == 3


class Flaky:
    """A collector (the real protocol) whose every other collection raises."""

    mode = "live"
    player = None

    def __init__(self) -> None:
        self.calls = 0

    def collect(self) -> Snapshot:
        self.calls += 1
        if self.calls % 2 == 0:
            raise RuntimeError(f"collection {self.calls} failed")
        return snap(self.calls)

    def request_health(self) -> None:
        """Nothing to re-run."""

    def exec_in_container(self, container_id: str, argv: object, timeout_s: float) -> ExecResult:
        return ExecResult((), None, error="no")

    def interactive_exec_argv(self, container_id: str, argv: object) -> list[str] | None:
        return None

    def signal_process(self, pid: int, signum: int, start_time: float | None) -> str | None:
        return "no"

    def container_owner(self, container_id: str) -> ContainerOwner | None:
        return None

    def open_container_logs(self, container_id: str, *, tail: int, follow: bool) -> LogReader:
        raise LogStreamError("no logs here")

    def container_action(self, container_id: str, action: str) -> str | None:
        return "no containers here"

    def container_details(self, container_id: str) -> ContainerDetails:
        return ContainerDetails(container_id, error="no containers here")

    def container_processes(self, container_id: str) -> ContainerProcesses:
        return ContainerProcesses(error="no containers here")

    def parent_chain(
        self, pid: int, start_time: float | None
    ) -> tuple[tuple[ParentLink, ...], str | None]:
        return (), "no processes here"

    def close(self) -> None:
        """Nothing to release."""


def test_errors_are_counted_and_reported_and_the_loop_goes_on() -> None:
    errors: list[Exception] = []
    loop = CollectLoop(Flaky(), Analysis, lambda s, a: None, interval=0.0, on_error=errors.append)
    loop.run(count=3)  # three deliveries need five collections: two failed in between
    assert loop.delivered == 3 and loop.errors == 2
    assert [str(e) for e in errors] == ["collection 2 failed", "collection 4 failed"]


def test_without_an_error_callback_the_error_ends_the_loop() -> None:
    collector = Flaky()
    loop = CollectLoop(collector, Analysis, lambda s, a: None, interval=0.0)
    with pytest.raises(RuntimeError, match="collection 2 failed"):
        loop.run()
    assert loop.delivered == 1 and loop.errors == 1


def test_a_failing_delivery_is_an_error_too() -> None:
    errors: list[Exception] = []

    def deliver(snapshot: Snapshot, analysis: Analysis) -> None:
        raise OSError("disk full")

    loop = CollectLoop(recording(), Analysis, deliver, interval=0.0, on_error=errors.append)
    # Each round fails in the delivery: counted and reported, and the loop keeps going.
    loop_thread = threading.Thread(target=loop.run, daemon=True)
    loop_thread.start()
    wait_for(lambda: loop.errors >= 3)
    loop.stop()
    loop_thread.join(5)
    assert loop.delivered == 0 and isinstance(errors[0], OSError)


def test_a_jump_delivers_the_players_current_snapshot_without_advancing() -> None:
    player = recording(10)
    got: list[float] = []
    loop = CollectLoop(player, Analysis, lambda s, a: got.append(s.taken_at), interval=3600.0)
    with running(loop):
        wait_for(lambda: got == [T0])
        player.pause()
        player.step(5)
        loop.jump()
        wait_for(lambda: len(got) == 2)
        assert got[1] == T0 + 5 and player.position == 5


def test_replay_capability_is_the_player_property_not_the_mode() -> None:
    replay = recording(2)
    assert replay.player is replay
    live: CollectorProtocol = build_collector(Settings(demo=True, read_only=True))
    try:
        assert live.player is None
    finally:
        live.close()

    class LooksLikeReplay(Flaky):
        """mode "replay" and step/seek attributes, but no player: not a replay."""

        mode = "replay"

        def step(self, delta: int) -> Snapshot:
            raise AssertionError("never called")

        def seek(self, when: float) -> Snapshot:
            raise AssertionError("never called")

    lookalike = LooksLikeReplay()
    loop = CollectLoop(lookalike, Analysis, lambda s, a: None, interval=0.0)
    loop.jump()
    loop.run(count=1)  # collected, since there is no player to ask
    assert lookalike.calls == 1


class Steady(Flaky):
    """A collector whose n-th collection is ``snap(n)`` (from 0), optionally held back."""

    def __init__(self, hold: threading.Event | None = None) -> None:
        super().__init__()
        self.started = threading.Event()
        self.hold = hold

    def collect(self) -> Snapshot:
        self.started.set()
        if self.hold is not None:
            self.hold.wait(5)
        self.calls += 1
        return snap(self.calls - 1)


def test_prefetched_starts_the_first_collection_at_once_and_hands_it_over() -> None:
    """The TUI's first collection overlaps the Textual import, then the loop takes it."""
    from gputui.collect.loop import Prefetched

    release = threading.Event()
    inner = Steady(hold=release)
    wrapped = Prefetched(inner)
    assert inner.started.wait(2), "the first collection did not start on its own"
    release.set()
    first = wrapped.collect()
    second = wrapped.collect()
    assert (first.taken_at, second.taken_at) == (T0, T0 + 1)  # one prefetch, then live ones
    assert inner.calls == 2
    assert wrapped.player is None and wrapped.mode == inner.mode


def test_prefetched_first_collection_error_reaches_the_loop() -> None:
    from gputui.collect.loop import Prefetched

    class Broken(Steady):
        def collect(self) -> Snapshot:
            raise RuntimeError("NVML exploded")

    wrapped = Prefetched(Broken())
    with pytest.raises(RuntimeError, match="NVML exploded"):
        wrapped.collect()
