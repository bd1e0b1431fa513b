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
from collections import Counter
from pathlib import Path
from typing import Any

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rel_helpers import run_gputui

from gputui.collect.collector import Collector
from gputui.collect.linux.membership import has_relative_path, parse_cgroup, parse_nspid
from gputui.collect.linux.processes import ProcSource, parse_stat
from gputui.collect.standins.scenario import ScenarioError, ScenarioSource, validate_scenario
from gputui.collect.standins.scenario_format import (
    BOOL_FIELDS,
    ERROR_KEYS,
    FIELD_ERRORS,
    INIT_STATES,
    NUMBER_FIELDS,
    PROCESS_KEYS,
)
from gputui.config import ConfigError, parse_alerts

EXAMPLES = int(os.environ.get("GPUTUI_FUZZ_EXAMPLES", "2000"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
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
series_of = lambda s: st.one_of(s, st.lists(s, max_size=5))  # noqa: E731
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


class _NoDocker:
    def read(self) -> Any:
        from gputui.model import ContainerReading, SourceStatus

        return ContainerReading(SourceStatus("docker", False, "not used", "not_found"))

    def exec(self, *args: Any) -> Any:
        raise AssertionError("no exec")

    def close(self) -> None:
        return None


PROCS = ProcSource()


@FUZZ
@given(scenario)
def test_fuzz_scenario(data: Any) -> None:
    _count("scenario")
    # A file must survive a JSON round trip first (NaN and infinities included, as Python's
    # json module reads them).
    data = json.loads(json.dumps(data))
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
    collector = Collector(ScenarioSource(data), PROCS, _NoDocker(), mode="scenario")
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
