"""Alert messages print every figure in its unit: bytes as GiB/MiB, percent, °C, W."""

from __future__ import annotations

from gputui.collect.collector import Collector
from gputui.collect.standins import demo
from gputui.collect.standins.scenario import ScenarioSource
from gputui.derive.alerts import METRICS, UNITS, AlertEngine, AlertRule, format_metric
from gputui.model.containers import ContainerInfo
from gputui.model.snapshot import ContainerUsage, HostInfo, Snapshot

T0 = 1_800_000_000.0


def test_every_metric_has_a_unit() -> None:
    assert set(UNITS) == set(METRICS)


def test_format_metric_units() -> None:
    assert format_metric("container_gpu_memory_bytes", 8.389e9) == "7.8GiB"
    assert format_metric("container_gpu_memory_bytes", 512 * 2**20) == "512MiB"
    assert format_metric("gpu_util", 95.0) == "95%"
    assert format_metric("memory_used_percent", 90.44) == "90.4%"
    assert format_metric("temperature_c", 86.0) == "86°C"
    assert format_metric("power_w", 612.0) == "612W"
    assert format_metric("power_percent", 97.25) == "97.2%"


def _messages(rules: list[AlertRule]) -> list[str]:
    times = iter(T0 + 60 * i for i in range(100))
    collector = Collector(
        ScenarioSource(demo.DEMO_SCENARIO),
        demo.DemoProcesses(),
        demo.DemoContainers(),
        clock=lambda: next(times),
        hostname="test",
    )
    engine = AlertEngine(rules)
    state = engine.update(collector.collect())
    state = engine.update(collector.collect())
    return sorted(a.message for a in state.active)


def test_alert_messages_on_the_demo_machine_are_in_units() -> None:
    messages = _messages(
        [
            AlertRule("ctr-mem", "container_gpu_memory_bytes", threshold=8 * 2**30),
            AlertRule("hot", "temperature_c", threshold=80.0),
            AlertRule("watts", "power_w", threshold=650.0),
        ]
    )
    assert "container vllm-server: container_gpu_memory_bytes 120GiB above 8.0GiB" in messages
    assert "container llm-trainer-1: container_gpu_memory_bytes 64.0GiB above 8.0GiB" in messages
    assert any(
        m.startswith("gpu2: temperature_c ") and m.endswith("°C above 80°C") for m in messages
    )
    assert any(m.startswith("gpu2: power_w ") and m.endswith("W above 650W") for m in messages)
    assert not any("e+" in m or " B " in m for m in messages), messages


def test_dynamic_bound_in_units() -> None:
    rule = AlertRule(
        "spike", "container_gpu_memory_bytes", kind="dynamic", k=2.0, min_samples=2, min_delta=0.0
    )
    engine = AlertEngine([rule])

    def snap(t: float, used: int) -> Snapshot:
        info = ContainerInfo("c" * 64, "job", "img", "running")
        usage = ContainerUsage(info=info, pids=(7,), gpu_memory_bytes=used)
        return Snapshot(taken_at=t, mode="live", host=HostInfo("test"), containers=(usage,))

    for i, used in enumerate((2 * 2**30, 2 * 2**30, 2 * 2**30, 6 * 2**30)):
        state = engine.update(snap(T0 + 60 * i, used))
    (alert,) = state.active
    assert alert.message == (
        "container job: container_gpu_memory_bytes 6.0GiB above mean + 2 sigma = 2.0GiB"
    )
