"""Fuzz the parsers of untrusted input: cgroup and status files, /proc/<pid>/stat, scenario
files and config files. No input may raise anything but the parser's own one-line error, and a
scenario that validates must also play through the NVML adapter and the Collector.

``GPUTUI_FUZZ_EXAMPLES`` sets the examples per parser (CI: 2,000; the full run: 100,000).
``GPUTUI_FUZZ_REPORT=FILE`` appends per-parser counts as JSON lines.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputui.boundary.userfiles import SCENARIO_LIMIT, UserFileError, read_user_file
from gputui.collect.collector import Collector
from gputui.collect.linux.membership import has_relative_path, parse_cgroup, parse_nspid
from gputui.collect.linux.proc_parse import parse_stat
from gputui.collect.linux.proc_reader import ProcSource
from gputui.collect.standins.scenario import ScenarioError, ScenarioSource, validate_scenario
from gputui.collect.standins.scenario_format import (
    BOOL_FIELDS,
    ERROR_KEYS,
    FIELD_ERRORS,
    INIT_STATES,
    NUMBER_FIELDS,
    PROCESS_KEYS,
    load_scenario,
    parse_scenario,
)
from gputui.config.alert_rules import parse_alerts
from gputui.config.file import load_config, parse_config
from gputui.config.values import ConfigError
from gputui.model.gpu import GpuProcessSample, GpuSample, XidEvent
from gputui.model.processes import GpuProcess, ProcessInfo
from gputui.model.snapshot import HostInfo, Snapshot
from gputui.present.json_report import snapshot_to_json
from gputui.present.text_report import snapshot_to_text
from gputui.recording.codec import snapshot_to_record
from gputui.recording.player import ReplayCollector
from gputui.recording.reader import Recording
from gputui.recording.writer import RecordingError
from tests.support.gputui_process import NoDocker, run_gputui

EXAMPLES = int(os.environ.get("GPUTUI_FUZZ_EXAMPLES", "2000"))
FUZZ = settings(
    max_examples=EXAMPLES,
    suppress_health_check=list(HealthCheck),
    database=None,  # reproducible counts; a failure prints its example anyway
)
COUNTS: Counter[str] = Counter()

HEX = "0123456789abcdef"
hex64 = st.text(HEX, min_size=64, max_size=64)
component = st.one_of(
    st.sampled_from(["docker", "kubepods", "kubepods.slice", "system.slice", "..", "", "init.scope",
                     "container", "besteffort", "burstable"]),
    hex64,
    hex64.map(lambda h: f"docker-{h}.scope"),
    hex64.map(lambda h: f"cri-containerd-{h}.scope"),
    hex64.map(lambda h: f"libpod-conmon-{h}.scope"),
    hex64.map(lambda h: f"kubepods-pod{h[:8]}_{h[8:12]}_{h[12:16]}_{h[16:20]}_{h[20:32]}.slice"),
    hex64.map(lambda h: f"slice:cri-containerd:{h}"),
    st.text(max_size=80),
)  # fmt: skip
cgroup_line = st.builds(
    lambda h, c, parts: f"{h}:{c}:/" + "/".join(parts),
    st.one_of(st.just("0"), st.integers(0, 20).map(str), st.text(max_size=3)),
    st.sampled_from(["", "memory", "cpu,cpuacct", "name=systemd", "pids", ":"]),
    st.lists(component, max_size=8),
)
cgroup_text = st.one_of(
    st.lists(cgroup_line, max_size=14).map("\n".join),
    st.text(max_size=400),
    st.binary(max_size=500).map(lambda b: b.decode("utf-8", "replace")),
)
nspid_text = st.one_of(
    st.lists(st.one_of(st.integers(-5, 2**70).map(str), st.text(max_size=12)), max_size=6).map(
        lambda f: "Name:\tx\nNSpid:\t" + "\t".join(f) + "\n"
    ),
    st.text(max_size=400),
)


def _count(name: str) -> None:
    COUNTS[name] += 1


@FUZZ
@given(cgroup_text)
def test_fuzz_cgroup(text: str) -> None:
    _count("cgroup")
    match = parse_cgroup(text)
    has_relative_path(text)
    if match is not None:
        assert len(match.container_id) == 64 and set(match.container_id) <= set(HEX)


@FUZZ
@given(nspid_text)
def test_fuzz_nspid(text: str) -> None:
    _count("nspid")
    pid = parse_nspid(text)
    assert pid is None or pid > 0


stat_text = st.one_of(
    st.builds(
        lambda pid, comm, fields: f"{pid} ({comm}) " + " ".join(fields),
        st.integers(0, 2**22),
        st.text(max_size=20),
        st.lists(
            st.one_of(st.integers(-(2**65), 2**65).map(str), st.text(max_size=4)), max_size=60
        ),
    ),
    st.text(max_size=500),
)


@FUZZ
@given(stat_text)
def test_fuzz_proc_stat(text: str) -> None:
    _count("proc_stat")
    stat = parse_stat(text)
    if stat is not None:
        assert isinstance(stat.cpu_ticks, int)


# -- scenario files ------------------------------------------------------------------------

scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from([*FIELD_ERRORS, *INIT_STATES]),
)
anything = st.recursive(
    scalar,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=3),
    max_leaves=10,
)  # fmt: skip
number = st.one_of(st.integers(-10, 2**64), st.floats(-1e3, 1e13), st.just(math.nan))


def series_of(s: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A value or a series of them (what scenario fields accept)."""
    return st.one_of(s, st.lists(s, max_size=5))


error_value = series_of(st.one_of(st.none(), st.sampled_from(FIELD_ERRORS), scalar))
process = st.fixed_dictionaries(
    {"pid": st.one_of(st.integers(-3, 2**64), st.sampled_from([1, os.getpid()]), scalar)},
    optional={
        **{k: series_of(st.one_of(number, st.none())) for k in PROCESS_KEYS - {"pid", "type"}},
        "type": st.one_of(st.sampled_from(["C", "G", "C+G"]), scalar),
        "extra": anything,
    },
)
gpu_dict = st.fixed_dictionaries(
    {},
    optional={
        "index": st.one_of(st.integers(-2, 2**40), scalar),
        "uuid": st.one_of(st.text(max_size=40), scalar),
        "name": st.one_of(st.text(max_size=40), scalar),
        "errors": st.one_of(
            st.dictionaries(st.sampled_from(sorted(ERROR_KEYS)), error_value, max_size=5), anything
        ),
        "processes": st.one_of(st.lists(process, max_size=4), anything),
        **{k: series_of(number) for k in NUMBER_FIELDS},
        **{k: series_of(st.one_of(st.booleans(), scalar)) for k in BOOL_FIELDS},
    },
)
version = st.one_of(st.text(max_size=12), st.sampled_from(["13.0", "12", "580.159.04", "1.2.3"]))
scenario = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "nvml": series_of(st.one_of(st.sampled_from(INIT_STATES), scalar)),
            "driver_version": st.one_of(version, scalar),
            "cuda_driver_version": st.one_of(version, scalar),
            "nvml_version": st.one_of(version, scalar),
            "gpus": st.one_of(st.lists(gpu_dict, max_size=3), anything),
            "xid_events": st.one_of(
                anything,
                st.lists(
                    st.fixed_dictionaries(
                        {},
                        optional={
                            "gpu": st.integers(-2, 2**40),
                            "xid": st.integers(-2, 2**40),
                            "at_refresh": st.integers(-2, 5),
                        },
                    ),
                    max_size=3,
                ),
            ),
        },
    ),
    anything,
)


PROCS = ProcSource()


@FUZZ
@given(scenario)
def test_fuzz_scenario(data: Any) -> None:
    _count("scenario")
    # A file must survive a JSON round trip first (NaN and infinities included, as Python's
    # json module reads them).
    data = json.loads(json.dumps(data))
    message: str | None
    try:
        validate_scenario(data, "s.json")
    except ScenarioError as exc:
        message = str(exc)
    else:
        message = None
    if message is not None:
        assert "\n" not in message and message.startswith("s.json")
        return
    _count("scenario_valid")
    collector = Collector(ScenarioSource(data), PROCS, NoDocker(), mode="scenario")
    try:
        for _ in range(3):  # past every short series, into the modulo
            snap = collector.collect()
            assert all(g.index >= 0 for g in snap.gpus)
    finally:
        collector.close()


# -- config files --------------------------------------------------------------------------

toml_value = st.one_of(
    st.integers(-(2**63), 2**63 - 1).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(
        lambda f: "nan" if math.isnan(f) else ("inf" if f > 0 else "-inf") if math.isinf(f)
        else repr(f)
    ),
    st.text(max_size=10).map(json.dumps),
    st.sampled_from(['"90s"', '"5m"', '"-1s"', '"1e999s"', "true", "[]", '"gpu.util"',
                     '"static"', '"dynamic"', '">"', '"critical"', "{}", "99999999999999999999"]),
)  # fmt: skip
rule_keys = st.sampled_from(
    ["id", "metric", "kind", "op", "threshold", "for", "k", "window", "min_samples",
     "min_delta", "severity", "nonsense"]
)  # fmt: skip
config_text = st.one_of(
    st.lists(
        st.lists(st.tuples(rule_keys, toml_value), max_size=8).map(
            lambda kv: "[[alerts.rules]]\n" + "\n".join(f"{k} = {v}" for k, v in dict(kv).items())
        ),
        max_size=3,
    ).map(lambda rules: "[alerts]\ndefaults = true\n" + "\n".join(rules)),
    st.text(max_size=300),
)


@FUZZ
@given(config_text)
def test_fuzz_config(text: str) -> None:
    _count("config")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return  # load_config turns this into its one-line error (tested below)
    message: str | None
    try:
        parse_alerts(data, "c.toml")
    except ConfigError as exc:
        message = str(exc)
    else:
        message = None
    if message is not None:
        assert "\n" not in message
        return
    _count("config_valid")


# -- hostile shapes: nesting depth, huge integers, non-finite numbers, oversize input ------------

#: The bound every fuzzed input stays under (the real readers refuse larger files first).
MAX_INPUT = 400_000
nested = st.integers(1, 50_000).flatmap(
    lambda depth: st.sampled_from(
        ["[" * depth + "]" * depth, '{"a":' * depth + "1" + "}" * depth, "[" * depth]
    )
)
huge_int = st.integers(4_000, 6_000).map(lambda n: "9" * n)
non_finite = st.sampled_from(
    ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1e300", "-1e300", "4.9e-324"]
)
big_number = st.sampled_from(
    ["9223372036854775808", "-9223372036854775809", "18446744073709551616", "2e19"]
)
hostile_json_token = st.one_of(
    nested, huge_int, non_finite, big_number, st.text(max_size=20).map(json.dumps)
)
SCENARIO_HOLES = [
    "%s",
    '{"gpus":[{"index":%s}]}',
    '{"gpus":[{"utilization_gpu":%s}]}',
    '{"gpus":[{"power_w":[1,%s]}]}',
    '{"gpus":[{"throttle_reasons":%s}]}',
    '{"gpus":[{"processes":[{"pid":%s,"used_memory_mib":1}]}]}',
    '{"gpus":[{"processes":[{"pid":5,"sm_util":%s}]}]}',
    '{"xid_events":[{"gpu":%s,"xid":79}]}',
    '{"xid_events":[{"gpu":0,"xid":79,"at_refresh":%s}]}',
    '{"driver_version":%s,"gpus":[]}',
    '{"nvml":%s}',
]


@FUZZ
@given(st.sampled_from(SCENARIO_HOLES), hostile_json_token)
def test_fuzz_scenario_hostile_shapes(template: str, token: str) -> None:
    text = template.replace("%s", token)
    assert len(text) <= MAX_INPUT
    _count("scenario_hostile")
    message: str | None
    try:
        data = parse_scenario(text, "s.json")
    except ScenarioError as exc:
        message = str(exc)
    else:
        message = None
    if message is not None:
        assert "\n" not in message and len(message) < 500
        return
    _count("scenario_hostile_valid")
    collector = Collector(ScenarioSource(data), PROCS, NoDocker(), mode="scenario")
    try:
        snapshot_to_text(collector.collect())
    finally:
        collector.close()


CONFIG_HOLES = [
    "x = %s",
    "[alerts]\ndefaults = %s",
    '[[alerts.rules]]\nid = "a"\nmetric = "gpu.util"\nthreshold = %s',
    '[[alerts.rules]]\nid = "a"\nmetric = "gpu.util"\nthreshold = 1\nfor = %s',
    '[[alerts.rules]]\nid = "a"\nmetric = "gpu.util"\nthreshold = 1\nwindow = %s',
    '[[alerts.rules]]\nid = "a"\nmetric = "gpu.util"\nkind = "dynamic"\nmin_samples = %s',
    '[[alerts.rules]]\nid = "a"\nmetric = "gpu.util"\nkind = "dynamic"\nk = %s',
]
toml_token = st.one_of(
    nested,
    huge_int,
    huge_int.map(lambda digits: "0x" + "f" * len(digits)),  # hex has no digit limit
    st.sampled_from(["nan", "inf", "-inf", "+inf", "1e400", "-0.0", "1e308"]),
    big_number,
    st.sampled_from(['"1e999s"', '"99999999999999999999d"', '"0.0000001ms"']),
    st.text(max_size=20).map(json.dumps),
)


@FUZZ
@given(st.sampled_from(CONFIG_HOLES), toml_token)
def test_fuzz_config_hostile_shapes(template: str, token: str) -> None:
    text = template.replace("%s", token)
    assert len(text) <= MAX_INPUT
    _count("config_hostile")
    try:
        config = parse_config(text, Path("c.toml"))
    except ConfigError as exc:
        message = str(exc)
        config = None
    if config is None:
        assert "\n" not in message and len(message) < 500
        return
    _count("config_hostile_valid")
    for rule in config.alert_rules:
        assert all(math.isfinite(v) for v in (rule.for_s, rule.window_s))


# -- recordings ----------------------------------------------------------------------------------


def _base_snapshot() -> Snapshot:
    gpu0 = GpuSample(0, "GPU-0", "NVIDIA H200", utilization_gpu=50, power_w=300.0)
    info = ProcessInfo(611, exists=True, name="python", command="python train.py", start_time=1.0)
    sample = GpuProcessSample(pid=611, gpu_index=0, used_memory_bytes=1024, sm_util=10)
    return Snapshot(
        1_795_000_000.0,
        "live",
        HostInfo("h", driver_version="580", cuda_driver_version="13.0"),
        gpus=(gpu0,),
        processes=(GpuProcess(sample, info, None),),
        xid_events=(XidEvent(0, 79, 1_795_000_000.0),),
    )


BASE_LINE = json.dumps(snapshot_to_record(_base_snapshot()), separators=(",", ":"))
SAME_LINE = json.dumps(
    snapshot_to_record(replace(_base_snapshot(), taken_at=1_795_000_001.0), _base_snapshot()),
    separators=(",", ":"),
)
RECORDING_HOLES = [
    BASE_LINE.replace("1795000000.0", "%s", 1),  # taken_at
    BASE_LINE.replace('"utilization_gpu":50', '"utilization_gpu":%s'),
    BASE_LINE.replace('"power_w":300.0', '"power_w":%s'),
    BASE_LINE.replace('"start_time":1.0', '"start_time":%s'),
    BASE_LINE.replace('"xid":79,"at":1795000000.0', '"xid":79,"at":%s'),
    BASE_LINE.replace('"pid":611', '"pid":%s', 1),
    BASE_LINE.replace('"driver_version":"580"', '"driver_version":%s'),
    '{"v":%s,"snapshot":{}}',
    "%s",
]
RECORDINGS = Path(tempfile.mkdtemp(prefix="gputui-fuzz-rec-"))


@FUZZ
@given(st.sampled_from(RECORDING_HOLES), hostile_json_token, st.booleans())
def test_fuzz_recording_hostile_shapes(template: str, token: str, follow: bool) -> None:
    text = template.replace("%s", token) + "\n" + (SAME_LINE + "\n" if follow else "")
    assert len(text) <= MAX_INPUT
    _count("recording_hostile")
    path = RECORDINGS / "r.jsonl"
    path.write_text(text)
    try:
        recording = Recording.open(path)
    except RecordingError as exc:
        message = str(exc)
        assert "\n" not in message
        return
    try:
        player = ReplayCollector(recording)
        for index in range(len(player)):
            try:
                snapshot = player.snapshot_at(index)
            except RecordingError as exc:
                message = str(exc)
                assert "\n" not in message
                continue
            _count("recording_hostile_valid")
            snapshot_to_text(snapshot)
            json.dumps(snapshot_to_json(snapshot))
    finally:
        recording.close()


def test_oversize_inputs_are_refused_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "big"
    with big.open("wb") as fh:
        fh.truncate(SCENARIO_LIMIT + 1)  # sparse: nothing is read, nothing is used
    with pytest.raises(ScenarioError, match="larger than"):
        load_scenario(big)
    with pytest.raises(ConfigError, match="larger than"):
        load_config(big)
    with pytest.raises(UserFileError, match="larger than"):
        read_user_file(big, "file", SCENARIO_LIMIT)


def test_zz_report_counts() -> None:
    """Write the counts of the fuzz tests above (run last: pytest keeps file order)."""
    target = os.environ.get("GPUTUI_FUZZ_REPORT")
    if target:
        with open(target, "a") as fh:
            fh.write(json.dumps({"examples_per_parser": EXAMPLES, **COUNTS}) + "\n")


# -- the CLI on invalid files ---------------------------------------------------------------

INVALID_SCENARIOS = [
    b"",
    b"{",
    b"\xff\xfe not utf-8",
    b"[]",
    b'{"gpus": [{"utilization_gpu": 150}]}',
    b'{"gpus": [{"processes": [{"pid": -1}]}]}',
    b'{"gpus": [{"errors": {"fan_speed": "Exploded"}}]}',
    b'{"nvml": "maybe"}',
    b'{"gpus": [{"index": 0}, {"index": 0}]}',
    b'{"bogus": 1}',
]
INVALID_CONFIGS = [
    b"[alerts\n",
    b"\xff",
    b"[alerts]\ndefaults = 3\n",
    b'[[alerts.rules]]\nid = "x"\nmetric = "nope"\n',
    b"[[alerts.rules]]\nid = 1\n",
    b'[[alerts.rules]]\nid = "x"\nmetric = "gpu.util"\nthreshold = nan\n',
]


@pytest.mark.parametrize("content", INVALID_SCENARIOS)
def test_invalid_scenario_file_is_one_line_exit_2(content: bytes, tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    out = run_gputui("--once", "--scenario", str(path))
    assert out.returncode == 2
    err = out.stderr.decode()
    assert err.count("\n") == 1 and err.startswith("gputui: error: "), err
    assert out.stdout == b""


@pytest.mark.parametrize("content", INVALID_CONFIGS)
def test_invalid_config_file_is_one_line_exit_2(content: bytes, tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_bytes(content)
    out = run_gputui("--once", "--demo", "--config", str(path))
    assert out.returncode == 2
    err = out.stderr.decode()
    assert err.count("\n") == 1 and err.startswith("gputui: error: "), err
