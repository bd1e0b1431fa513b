"""``--once`` measures CPU % over its own run (a short window) instead of printing N/A."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.procfs import BUSY_CODE, SLEEP_CODE, Spawn


@pytest.fixture
def busy(spawn: Spawn) -> subprocess.Popen[bytes]:
    return spawn(BUSY_CODE)


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
    # A spinning process: above zero (the window is 0.1 s, so the figure moves in steps of
    # about 10 %; a loaded machine gave a spinning loop 7.8 %, so no higher floor holds).
    assert proc["cpu_percent"] is not None
    assert proc["cpu_percent"] > 0.0
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


def test_an_early_sample_of_every_process_gives_the_first_read_a_cpu_percent(
    busy: subprocess.Popen[bytes],
) -> None:
    """prime_cpu samples every process before the GPU PIDs are known (while NVML starts)."""
    from gputui.collect.linux.proc_reader import ProcSource

    source = ProcSource()
    try:
        assert source.read([busy.pid])[busy.pid].cpu_percent is None  # one sample: no rate
        fresh = ProcSource()
        try:
            # A generous budget: under load the default 0.25 s ran out before the busy
            # process's entry (new PIDs come last in /proc); the budget has its own test below.
            assert fresh.prime_cpu(budget_s=10.0) > 1
            time.sleep(0.3)
            info = fresh.read([busy.pid])[busy.pid]
            assert info.cpu_percent is not None
            # A spinning loop, measured over the primed window (a share of a core however
            # loaded the machine is; None without the early sample).
            assert info.cpu_percent >= 1.0
            # One read consumes the early samples: a later first read of another process
            # cannot take a rate from a sample made long before.
            assert fresh.prime_cpu(limit=0) == 0
        finally:
            fresh.close()
    finally:
        source.close()


def test_a_process_started_after_the_early_sample_gets_no_rate_from_it(spawn: Spawn) -> None:
    from gputui.collect.linux.proc_reader import ProcSource

    source = ProcSource()
    try:
        source.prime_cpu()
        first = spawn(SLEEP_CODE)
        # Started after the prime: nothing was sampled for it, so no rate yet.
        assert source.read([first.pid])[first.pid].cpu_percent is None
    finally:
        source.close()


class _SleepSpy:
    """The collector's ``time`` module, with ``sleep`` recording what it was asked to wait."""

    def __init__(self, waits: list[float]) -> None:
        self.waits = waits

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)

    def __getattr__(self, name: str) -> object:
        return getattr(time, name)


def test_a_one_shot_sampled_at_start_up_waits_for_no_window(
    busy: subprocess.Popen[bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI takes the first sample before loading the rest: the window has passed by then."""
    from gputui.collect.linux.proc_reader import early_cpu_sample
    from gputui.model.settings import Settings
    from gputui.wiring.compose import ONCE_CPU_WINDOW_S, build_collector

    scenario = tmp_path / "s.json"
    scenario.write_text(
        json.dumps(
            {"gpus": [{"index": 0, "processes": [{"pid": busy.pid, "used_memory_mib": 10}]}]}
        )
    )
    early = early_cpu_sample()
    time.sleep(ONCE_CPU_WINDOW_S * 2)  # what loading the program and starting NVML take
    waits: list[float] = []
    monkeypatch.setattr("gputui.collect.collector.time", _SleepSpy(waits))
    collector = build_collector(Settings(scenario=scenario), once=True, early=early)
    try:
        assert collector.procs is early.procs
        snapshot = collector.collect()
    finally:
        collector.close()
    assert waits and max(waits) == 0.0  # nothing left of the window to wait for
    (proc,) = [p for p in snapshot.processes if p.pid == busy.pid]
    assert proc.info.cpu_percent is not None and proc.info.cpu_percent >= 10.0
    assert snapshot.host_stats is not None and snapshot.host_stats.cpu_percent is not None


def test_a_fresh_early_sample_still_gets_its_whole_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gputui.collect.linux.proc_reader import early_cpu_sample
    from gputui.model.settings import Settings
    from gputui.wiring.compose import ONCE_CPU_WINDOW_S, build_collector

    scenario = tmp_path / "s.json"
    scenario.write_text(json.dumps({"gpus": [{"index": 0}]}))
    calls: list[tuple[float, float]] = []

    class _Spy(_SleepSpy):
        def sleep(self, seconds: float) -> None:
            calls.append((time.monotonic(), seconds))

    monkeypatch.setattr("gputui.collect.collector.time", _Spy([]))
    early = early_cpu_sample()
    collector = build_collector(Settings(scenario=scenario), once=True, early=early)
    try:
        collector.collect()
    finally:
        collector.close()
    # The second sample waits for the end of the window begun at the early sample: no sooner
    # (and, when the window is still running, no later).
    ((called_at, seconds),) = calls
    window_end = early.taken_at + ONCE_CPU_WINDOW_S
    assert called_at + seconds >= window_end - 1e-3
    assert seconds == 0.0 or abs(called_at + seconds - window_end) < 1e-3


def test_the_early_sample_stops_at_its_time_budget() -> None:
    from gputui.collect.linux.proc_reader import ProcSource

    source = ProcSource()
    try:
        # A spent budget samples (almost) nothing, however many processes the host has.
        assert source.prime_cpu(budget_s=0.0) <= 1
        assert source.prime_cpu(budget_s=10.0) > 1
    finally:
        source.close()
