"""NVML started at the command line's first moment (EarlyNvml), through the pynvml-shaped seam.

The start runs on its own thread; the first read waits for it (at most its deadline), a
one-shot's first GPM pair spans the time the rest of the program spent loading instead of a
sleep, a failed start is raised where the source itself would have raised it, and a close
during the start still shuts NVML down.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from gputui.collect.nvml.early import EarlyNvml
from gputui.collect.nvml.source import NvmlSource
from gputui.collect.standins.scenario import ScenarioNvml
from gputui.collect.standins.scenario_format import validate_scenario

HOPPER = {"index": 0, "utilization_gpu": 90, "gpm_sm_active": [40, 60]}


class _SlowStart(ScenarioNvml):
    """``nvmlInit`` held in the driver until the test lets it go; shutdowns counted."""

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(data)
        self.entered = threading.Event()
        self.release = threading.Event()
        self.shutdowns = 0

    def nvmlInit(self) -> None:
        self.entered.set()
        self.release.wait(30.0)
        super().nvmlInit()

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1


class _SampleSeen(ScenarioNvml):
    """Says when the start's first GPM sample has been taken (on the start's thread)."""

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(data)
        self.sampled = threading.Event()

    def nvmlGpmSampleGet(self, handle: Any, sample: Any) -> Any:
        got = super().nvmlGpmSampleGet(handle, sample)
        self.sampled.set()
        return got


def _early(nv: ScenarioNvml, slept: list[float], **options: Any) -> EarlyNvml:
    def sleep(seconds: float) -> None:
        slept.append(seconds)
        time.sleep(seconds)

    def make() -> NvmlSource:
        return NvmlSource(nv, background=False, gpm_interval=1.0, gpm_sleep=sleep)

    return EarlyNvml(background=False, slow_interval=5.0, pcie=False, make=make, **options)


def _nvml(data: dict[str, Any], cls: type[ScenarioNvml] = ScenarioNvml) -> Any:
    validate_scenario(data)
    return cls(data)


def test_the_start_runs_while_the_caller_works_and_the_first_read_waits_for_it() -> None:
    nv = _nvml({"gpus": [HOPPER]}, _SlowStart)
    slept: list[float] = []
    early = _early(nv, slept)
    assert nv.entered.wait(10.0)  # started on its own thread, before anyone read
    got: list[Any] = []
    reader = threading.Thread(target=lambda: got.append(early.read()))
    reader.start()
    reader.join(0.3)
    assert reader.is_alive()  # the read waits for the start...
    nv.release.set()
    reader.join(10.0)
    (reading,) = got  # ...and then reads the GPUs
    assert reading.status.ok and [g.index for g in reading.gpus] == [0]
    early.close()
    assert nv.shutdowns == 1


def test_a_one_shots_first_gpm_pair_spans_the_start_instead_of_a_sleep() -> None:
    slept: list[float] = []
    nv = _nvml({"gpus": [HOPPER]}, _SampleSeen)
    early = _early(nv, slept)
    # The rest of the program loading: more than NVML's 100 ms gap after the start's first
    # sample (waited for: on a loaded machine the start's thread may run late).
    assert nv.sampled.wait(10.0)
    time.sleep(0.15)
    (gpu,) = early.read().gpus
    assert gpu.gpm_sm_active == 40.0 and gpu.gpm_note is None
    assert not [s for s in slept if s > 0]  # the pair's first sample was taken at the start
    early.close()

    # Read at once after the start, the one-shot still waits out the gap (and no longer).
    slept.clear()

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        time.sleep(seconds)

    direct = NvmlSource(_nvml({"gpus": [HOPPER]}), background=False, gpm_sleep=sleep)
    assert direct.read().gpus[0].gpm_sm_active == 40.0
    assert len(slept) == 1 and 0 < slept[0] <= 0.1
    direct.close()


def test_a_start_past_its_deadline_is_said_and_a_later_read_finds_it_done() -> None:
    nv = _nvml({"gpus": [HOPPER]}, _SlowStart)
    early = _early(nv, [], start_wait_s=0.2)
    stalled = early.read()
    assert not stalled.status.ok and stalled.status.kind == "Timeout" and not stalled.gpus
    assert "within 0.2 s" in (stalled.status.error or "")
    assert "nvidia-smi" in (stalled.status.fix or "")
    started = time.monotonic()
    assert not early.read().status.ok  # later reads do not wait again
    assert time.monotonic() - started < 0.1
    nv.release.set()
    deadline = time.monotonic() + 10.0
    while not (reading := early.read()).status.ok and time.monotonic() < deadline:
        time.sleep(0.02)
    assert reading.status.ok and len(reading.gpus) == 1
    early.close()


def test_a_failed_start_is_raised_on_the_readers_thread() -> None:
    def broken() -> NvmlSource:
        raise RuntimeError("libnvidia-ml.so.1: invalid ELF header")

    early = EarlyNvml(background=False, slow_interval=5.0, pcie=False, make=broken)
    with pytest.raises(RuntimeError, match="invalid ELF header"):
        early.read()
    early.close()


def test_nvml_errors_at_the_start_are_the_sources_own_status() -> None:
    nv = _nvml({"nvml": "DriverNotLoaded", "gpus": []})
    early = _early(nv, [])
    reading = early.read()
    assert not reading.status.ok and reading.status.kind == "DriverNotLoaded"
    early.close()


def test_a_close_during_the_start_shuts_nvml_down_when_it_ends() -> None:
    nv = _nvml({"gpus": [HOPPER]}, _SlowStart)
    early = _early(nv, [])
    assert nv.entered.wait(10.0)
    early.close()  # the user quit while NVML was still starting
    assert nv.shutdowns == 0
    nv.release.set()
    deadline = time.monotonic() + 10.0
    while nv.shutdowns == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert nv.shutdowns == 1
    closed = early.read()
    assert not closed.status.ok and not closed.gpus


def test_the_one_shot_on_a_machine_without_a_driver_still_says_so() -> None:
    # The real path: EarlyNvml over the real pynvml, here without libnvidia-ml (CI has no GPU).
    code = (
        "import json, sys, io, contextlib; from gputui.cli.main import main; buf = io.StringIO()\n"
        "with contextlib.redirect_stdout(buf): status = main(['--once', '--json'])\n"
        "nvml = json.loads(buf.getvalue())['sources']['nvml']\n"
        "print(nvml['ok'], nvml.get('kind'))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    ok, kind = result.stdout.split()
    if ok == "True":
        pytest.skip("this machine has an NVIDIA driver")
    assert kind in ("LibraryNotFound", "DriverNotLoaded"), result.stdout
