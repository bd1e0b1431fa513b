"""The slow lane's GPU-utilization mean: every driver sample since the previous read, once.

Against a pynvml-shaped stand-in raising the real ``pynvml.NVMLError_*`` classes; the mean's
reason to exist (a point read of ``utilization.gpu`` at 1 Hz read 0 % all through a 25 %-duty
load on an H200, the samples 24.7 %) is in ``bench/busy_estimators.py``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from gputui.collect.nvml.slow_lane import SlowLane
from gputui.collect.standins.scenario import ScenarioSource

NOW_S = 1_000.0
#: The first read's ``since``: one interval (5 s) back, in the driver's microseconds.
LOOKBACK_US = int((NOW_S - 5.0) * 1e6)


def _sample(ts: int, value: int) -> SimpleNamespace:
    """A sample ``ts`` µs after the first read's lookback."""
    return SimpleNamespace(timeStamp=LOOKBACK_US + ts, sampleValue=SimpleNamespace(uiVal=value))


class _Driver:
    """``nvmlDeviceGetSamples`` answering from a list of scripted replies (or errors)."""

    NVMLError = pynvml.NVMLError
    NVMLLibraryMismatchError = pynvml.NVMLLibraryMismatchError
    NVML_GPU_UTILIZATION_SAMPLES = pynvml.NVML_GPU_UTILIZATION_SAMPLES

    def __init__(self, *replies: list[SimpleNamespace] | BaseException) -> None:
        self.replies = list(replies)
        self.asked: list[tuple[int, int]] = []

    def nvmlDeviceGetSamples(self, handle: Any, kind: int, since: int) -> Any:
        self.asked.append((kind, since))
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, reply

    def nvmlDeviceGetProcessUtilization(self, handle: Any, since: int) -> Any:
        raise pynvml.NVMLError_NotFound()


def _lane(driver: _Driver) -> SlowLane:
    def query(index: int, fn: Any, *args: Any) -> Any:
        return fn(*args)

    return SlowLane(driver, query, lambda: ["gpu0"], lambda: 0.0, lambda: NOW_S, 5.0, pcie=False)


def test_every_sample_since_the_previous_read_is_counted_once_and_clamped() -> None:
    first = [_sample(10, 0), _sample(20, 100), _sample(30, 0), _sample(40, 0)]
    # The driver's reply may repeat the newest sample already counted (40): not counted again.
    second = [_sample(40, 0), _sample(50, 100), _sample(60, 250)]
    driver = _Driver(first, second)
    lane = _lane(driver)
    lane.tick()
    assert lane.gpu_util_mean(0) == pytest.approx(25.0)
    lane.tick()
    assert lane.gpu_util_mean(0) == pytest.approx(100.0)  # 100 and 250 clamped to 100
    (kind, since_first), (_, since_second) = driver.asked
    assert kind == pynvml.NVML_GPU_UTILIZATION_SAMPLES
    assert since_first == LOOKBACK_US  # the first read looks back one interval
    assert since_second == LOOKBACK_US + 40  # later reads continue from the newest one seen


def test_no_new_sample_is_unknown_and_asked_again() -> None:
    driver = _Driver(pynvml.NVMLError_NotFound(), [_sample(10, 30)], [])
    lane = _lane(driver)
    lane.tick()
    assert lane.gpu_util_mean(0) is None
    lane.tick()
    assert lane.gpu_util_mean(0) == pytest.approx(30.0)
    lane.tick()
    assert lane.gpu_util_mean(0) is None  # an empty reply: no figure, never a stale one
    assert len(driver.asked) == 3


@pytest.mark.parametrize(
    "error", [pynvml.NVMLError_NotSupported, pynvml.NVMLError_FunctionNotFound]
)
def test_a_gpu_without_samples_is_never_asked_again(error: type[pynvml.NVMLError]) -> None:
    driver = _Driver(error())
    lane = _lane(driver)
    lane.tick()
    lane.tick()
    assert lane.gpu_util_mean(0) is None and len(driver.asked) == 1


def test_a_lost_gpu_leaves_the_lane_running() -> None:
    driver = _Driver([_sample(10, 40)], pynvml.NVMLError_GpuIsLost(), [_sample(20, 60)])
    lane = _lane(driver)
    lane.tick()
    lane.tick()  # the core read reports the lost GPU; the lane keeps the last figure
    assert lane.gpu_util_mean(0) == pytest.approx(40.0)
    lane.tick()
    assert lane.gpu_util_mean(0) == pytest.approx(60.0)


def test_the_mean_reaches_the_sample_and_defaults_to_the_point_read_in_scenarios() -> None:
    gpu: dict[str, Any] = {"index": 0, "utilization_gpu": 0, "utilization_gpu_mean": 25}
    other: dict[str, Any] = {"index": 1, "utilization_gpu": 70}
    reading = ScenarioSource({"gpus": [gpu, other]}).read()
    first, second = reading.gpus
    assert (first.utilization_gpu, first.utilization_gpu_mean) == (0, 25)
    assert (second.utilization_gpu, second.utilization_gpu_mean) == (70, 70)
