"""The GPU field table (model_gauges.GPU_GAUGES) and what is generated from it.

A gauge is a GpuSample field plus one table row; the JSON report, the exporter, the scenario
format and the scenario stand-in take every name of it from the row. The last tests add a gauge
that exists only here (a GpuSample subclass with one more field, one more row) and follow it
through every generated consumer without touching them.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from dataclasses import dataclass
from typing import Any

import pynvml
import pytest
from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry

from gputui.collect.nvml.source import NvmlSource
from gputui.collect.standins.demo import DEMO_SCENARIO
from gputui.collect.standins.scenario import ScenarioNvml, ScenarioSource
from gputui.collect.standins.scenario_format import (
    BOOL_FIELDS,
    ERROR_KEYS,
    NUMBER_FIELDS,
    ScenarioError,
    gpu_keys,
    validate_scenario,
)
from gputui.exporter.families import GPU_SAMPLE_GAUGES, gpu_families, plain_gpu_gauges
from gputui.model.gauges import (
    GPU_GAUGES,
    GPU_SAMPLE_FACTS,
    ExportedGauge,
    GpuGauge,
    NvmlAnswer,
    ScenarioKey,
)
from gputui.model.gpu import GpuSample
from gputui.model.snapshot import HostInfo, Snapshot
from gputui.present.json_report import gpu_to_json
from gputui.recording.codec import snapshot_from_report
from tests.support.paths import REPO

DOCS = REPO / "docs"
MIB = 1024 * 1024


def _sample_fields() -> list[str]:
    return [f.name for f in dataclasses.fields(GpuSample)]


# -- the table itself ------------------------------------------------------------------------


def test_every_sample_field_is_a_gauge_row_or_a_listed_fact() -> None:
    rows = [g.field for g in GPU_GAUGES]
    assert len(rows) == len(set(rows)), "one row per gauge"
    assert not set(rows) & set(GPU_SAMPLE_FACTS)
    assert sorted(rows + list(GPU_SAMPLE_FACTS)) == sorted(_sample_fields())


def test_names_are_unique_in_every_output() -> None:
    for what in (
        [g.json_key for g in GPU_GAUGES],
        [g.scenario.key for g in GPU_GAUGES],
        [e.name for g in GPU_GAUGES for e in g.exported],
    ):
        assert len(what) == len(set(what)), what
    # A JSON key must not shadow a fact's key either.
    assert not {g.json_key for g in GPU_GAUGES} & set(GPU_SAMPLE_FACTS)


def test_bounds_match_the_field_type_and_defaults_lie_within() -> None:
    hints = typing.get_type_hints(GpuSample)
    keys = {g.scenario.key for g in GPU_GAUGES}
    for gauge in GPU_GAUGES:
        arms = set(typing.get_args(hints[gauge.field])) - {type(None)}
        key = gauge.scenario
        if arms == {bool}:
            assert key.bounds is None, gauge.field
            continue
        assert arms <= {int, float} and key.bounds is not None, gauge.field
        low, high = key.bounds
        for value in (key.default, key.demo):
            assert value is None or low <= value <= high, gauge.field
        assert key.default_from is None or key.default_from in keys


def test_gauges_of_one_getter_describe_one_reply() -> None:
    by_getter: dict[str, list[GpuGauge]] = {}
    for gauge in GPU_GAUGES:
        assert hasattr(pynvml, gauge.nvml.getter), gauge.nvml.getter
        for const in gauge.nvml.args:
            assert isinstance(getattr(pynvml, const), int), const
        by_getter.setdefault(gauge.nvml.getter, []).append(gauge)
    for getter, gauges in by_getter.items():
        shapes = {(type(g.nvml.part), g.nvml.reply, g.nvml.group) for g in gauges}
        assert len(shapes) == 1, getter
        slots = [(g.nvml.args, g.nvml.part) for g in gauges]
        assert len(slots) == len(set(slots)), f"{getter}: two gauges in one place"
        for g in gauges:
            if isinstance(g.nvml.part, int):
                assert 0 <= g.nvml.part < len(g.nvml.reply), g.field


# -- what is generated from it ------------------------------------------------------------------


def test_json_gpu_keys_come_from_the_table_in_field_order() -> None:
    sample = GpuSample(index=0, uuid="GPU-x", name="H200", temperature_c=61, throttle_reasons=4)
    doc = gpu_to_json(sample)
    by_field = {g.field: g.json_key for g in GPU_GAUGES}
    expected = []
    for name in _sample_fields():
        if name in by_field:
            expected.append(by_field[name])
            if name == "throttle_reasons":
                expected.append("throttle_reason_names")
        elif name != "processes":
            expected.append(name)
    assert list(doc) == expected
    assert doc["temperature_c"] == 61 and doc["throttle_reason_names"] == ["SW power cap"]
    # A row's JSON key is what the report says, and what reading a report back understands.
    renamed = tuple(
        dataclasses.replace(g, json_key="gpu_temp") if g.field == "temperature_c" else g
        for g in GPU_GAUGES
    )
    assert gpu_to_json(sample, renamed)["gpu_temp"] == 61
    assert "temperature_c" not in gpu_to_json(sample, renamed)


def test_report_keys_read_back_through_the_table() -> None:
    sample = GpuSample(index=0, uuid="GPU-x", name="H200", power_w=612.5, ecc_mode_current=True)
    doc = {"taken_at": "2026-01-01T00:00:00Z", "gpus": [gpu_to_json(sample)]}
    assert snapshot_from_report(doc).gpus[0] == sample


def test_exporter_gauges_come_from_the_table() -> None:
    exported = [e.name for g in GPU_GAUGES for e in g.exported]
    names = [name for name, _, _ in GPU_SAMPLE_GAUGES]
    assert sorted(names) == sorted(exported)
    # dcgm-exporter's names first, then gputui's own, each in table order.
    dcgm = [n for n in exported if n.startswith("DCGM_")]
    assert names == dcgm + [n for n in exported if not n.startswith("DCGM_")]
    gpu = GpuSample(
        index=0, uuid="u", name="n", memory_used_bytes=3 * MIB + 5, memory_total_bytes=10 * MIB
    )
    read = {name: value(gpu) for name, _, value in GPU_SAMPLE_GAUGES}
    assert read["DCGM_FI_DEV_FB_USED"] == 3
    assert read["DCGM_FI_DEV_FB_FREE"] == 6
    assert read["gputui_gpu_memory_used_bytes"] == 3 * MIB + 5
    assert read["DCGM_FI_DEV_GPU_TEMP"] is None


def test_scenario_format_keys_come_from_the_table() -> None:
    numbers = {g.scenario.key: g.scenario.bounds for g in GPU_GAUGES if g.scenario.bounds}
    assert numbers == NUMBER_FIELDS
    assert set(BOOL_FIELDS) == {g.scenario.key for g in GPU_GAUGES if g.scenario.bounds is None}
    groups = {g.nvml.group for g in GPU_GAUGES} - {None}
    assert {g.scenario.key for g in GPU_GAUGES} | groups <= ERROR_KEYS
    for gauge in GPU_GAUGES:
        if gauge.scenario.bounds is None:
            continue
        low, high = gauge.scenario.bounds
        where = f"gpus[0].{gauge.scenario.key}"
        with pytest.raises(ScenarioError, match=re.escape(where)):
            validate_scenario({"gpus": [{gauge.scenario.key: high * 2 + 1}]})
        validate_scenario({"gpus": [{gauge.scenario.key: low}]})


def test_every_gauge_answered_by_the_stand_in_reaches_the_sample_through_the_adapter() -> None:
    # A value inside each gauge's bounds, distinct per gauge, read through the real adapter.
    gpu: dict[str, Any] = {"index": 0}
    for i, gauge in enumerate(GPU_GAUGES):
        bounds = gauge.scenario.bounds
        gpu[gauge.scenario.key] = (i % 2 == 0) if bounds is None else max(bounds[0], 0) + i + 1
    source = ScenarioSource({"gpus": [gpu]}, wall=lambda: 0.0)
    sample = source.read().gpus[0]
    for gauge in GPU_GAUGES:
        # Scenarios give memory in MiB (NvmlAnswer.scale), the sample holds bytes; GPM gives
        # throughput in MiB/s (a scenario's unit too), the sample holds bytes per second.
        want = gpu[gauge.scenario.key] * (MIB if gauge.unit in ("B", "B/s") else 1)
        assert getattr(sample, gauge.field) == want, gauge.field


def test_an_error_on_a_group_or_on_any_gauge_of_a_getter_fails_the_getter() -> None:
    for errors, unreadable in (
        ({"ecc_mode": "Unknown"}, ("ecc_mode_current", "ecc_mode_pending")),
        # Each gauge key of a getter is an errors key too (docs: "every GPU key above").
        ({"ecc_mode_pending": "NoPermission"}, ("ecc_mode_current", "ecc_mode_pending")),
        ({"clock_sm_mhz": "NoPermission"}, ("clock_sm_mhz",)),
        ({"clocks": "NoPermission"}, ("clock_sm_mhz", "clock_mem_mhz")),
    ):
        data = {"gpus": [{**DEMO_SCENARIO["gpus"][0], "errors": errors}]}
        validate_scenario(data)
        sample = ScenarioSource(data, wall=lambda: 0.0).read().gpus[0]
        for gauge in GPU_GAUGES:
            value = getattr(sample, gauge.field)
            if gauge.field in unreadable:
                assert value is None, (errors, gauge.field)
            elif gauge.scenario.key != "fan_speed":  # the demo H200 has no fan
                assert value is not None, (errors, gauge.field)


def test_demo_gpus_default_to_the_table_demo_values() -> None:
    demo = {g.scenario.key: g.scenario.demo for g in GPU_GAUGES if g.scenario.demo is not None}
    assert demo, "the table gives the demo an idle H200"
    for gpu in DEMO_SCENARIO["gpus"]:
        assert set(demo) <= set(gpu)
    # What the demo GPUs do not say themselves is the table's.
    last = DEMO_SCENARIO["gpus"][3]
    assert last["pstate"] == demo["pstate"] and last["persistence_mode"] is False


def test_docs_name_every_key_of_the_table() -> None:
    scenario = (DOCS / "scenario-format.md").read_text()
    exporter = (DOCS / "exporter.md").read_text()
    schema = (DOCS / "json-schema.md").read_text()
    for gauge in GPU_GAUGES:
        assert f"`{gauge.scenario.key}`" in scenario, gauge.scenario.key
        assert f"`{gauge.json_key}`" in schema, gauge.json_key
        for exported in gauge.exported:
            assert f"`{exported.name}`" in exporter, exported.name
    for group in {g.nvml.group for g in GPU_GAUGES} - {None}:
        assert f"`{group}`" in scenario, group


# -- a gauge that exists only in this test ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _SampleWithDefaultLimit(GpuSample):
    """A GpuSample with one more gauge, as a future model field would add it."""

    default_limit_w: float | None = None


DEFAULT_LIMIT = GpuGauge(
    "default_limit_w",
    "default power limit",
    "W",
    ScenarioKey("default_limit_w", (0, 1e15)),
    NvmlAnswer("nvmlDeviceGetPowerManagementDefaultLimit", scale=1000),
    (ExportedGauge("gputui_gpu_default_power_limit_watts", "Default power limit."),),
)
WITH_DEFAULT_LIMIT = (*GPU_GAUGES, DEFAULT_LIMIT)


def _read_with_default_limit(nvml: ScenarioNvml) -> _SampleWithDefaultLimit:
    """The adapter's real read plus the one line a new gauge adds to it."""
    sample = NvmlSource(nvml, background=False, slow_interval=0.0).read().gpus[0]
    try:
        limit: float | None = nvml.nvmlDeviceGetPowerManagementDefaultLimit(  # type: ignore[attr-defined]
            nvml.nvmlDeviceGetHandleByIndex(0)
        )
    except pynvml.NVMLError:
        limit = None
    facts = {f.name: getattr(sample, f.name) for f in dataclasses.fields(sample)}
    return _SampleWithDefaultLimit(**facts, default_limit_w=None if limit is None else limit / 1000)


def test_a_new_gauge_is_one_field_and_one_row() -> None:
    data = {"gpus": [{"index": 0, "utilization_gpu": 40, "default_limit_w": [1500.25, 1600.5]}]}
    # The shipped table does not know the key; the table with the row does.
    with pytest.raises(ScenarioError, match="unknown key 'default_limit_w'"):
        validate_scenario(data)
    validate_scenario(data, gauges=WITH_DEFAULT_LIMIT)
    assert "default_limit_w" in gpu_keys(WITH_DEFAULT_LIMIT).numbers
    with pytest.raises(ScenarioError, match=r"default_limit_w: expected a number in \[0, 1e\+15\]"):
        validate_scenario({"gpus": [{"default_limit_w": -1}]}, gauges=WITH_DEFAULT_LIMIT)

    # The stand-in answers the new getter in NVML's unit (mW), with the scenario's errors.
    nvml = ScenarioNvml(data, gauges=WITH_DEFAULT_LIMIT)
    sample = _read_with_default_limit(nvml)
    assert sample.default_limit_w == 1500.25 and sample.utilization_gpu == 40
    failing = {"gpus": [{"default_limit_w": 5, "errors": {"default_limit_w": "NoPermission"}}]}
    validate_scenario(failing, gauges=WITH_DEFAULT_LIMIT)
    assert (
        _read_with_default_limit(ScenarioNvml(failing, gauges=WITH_DEFAULT_LIMIT)).default_limit_w
        is None
    )
    assert (
        _read_with_default_limit(
            ScenarioNvml({"gpus": [{}]}, gauges=WITH_DEFAULT_LIMIT)
        ).default_limit_w
        is None
    )

    # The JSON report and the exporter carry it from the row alone.
    doc = gpu_to_json(sample, WITH_DEFAULT_LIMIT)
    assert doc["default_limit_w"] == 1500.25
    assert list(doc)[-1] == "default_limit_w"  # a subclass field comes after the others
    snapshot = Snapshot(taken_at=0.0, mode="scenario", host=HostInfo("h"), gpus=(sample,))
    registry = CollectorRegistry(auto_describe=False)

    class _Families:
        def collect(self) -> Any:
            return gpu_families(snapshot, plain_gpu_gauges(WITH_DEFAULT_LIMIT))

    registry.register(_Families())  # type: ignore[arg-type,unused-ignore]
    text = generate_latest(registry).decode()
    assert "# HELP gputui_gpu_default_power_limit_watts Default power limit." in text
    assert re.search(r'^gputui_gpu_default_power_limit_watts\{.*gpu="0".*\} 1500\.25$', text, re.M)
