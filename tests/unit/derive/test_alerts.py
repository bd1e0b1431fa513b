"""Alert rules driven by scenario time series through the real collector, on an injected clock.

Each refresh of a scenario is one element of its time series and one tick of the fake clock, so
"for 5 minutes" is five ticks of 60 s: no sleeping anywhere.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gputui.collect.collector import Collector
from gputui.collect.standins import demo
from gputui.collect.standins.scenario import ScenarioSource
from gputui.config.file import default_config_path, load_config, ui_state_path
from gputui.config.ui_state import SORTS, THEMES, UiPrefs, save_ui_state
from gputui.config.values import ConfigError, parse_duration
from gputui.derive.alerts import DEFAULT_RULES, AlertEngine, AlertPhase, AlertRule, AlertState

T0 = 1_800_000_000.0


def ticking(step: float) -> Callable[[], float]:
    times = iter(T0 + i * step for i in range(10_000))
    return lambda: next(times)


def play(gpu: dict[str, Any], rules: list[AlertRule], step: float = 60.0) -> Iterator[AlertState]:
    """One AlertState per element of the scenario series; the collector clock ticks ``step``."""
    length = max(len(v) for v in gpu.values() if isinstance(v, list))
    collector = Collector(
        ScenarioSource({"gpus": [{"index": 0, "memory_total_mib": 1000, **gpu}]}),
        demo.DemoProcesses(),
        demo.DemoContainers(),
        mode="scenario",
        clock=ticking(step),
        hostname="test",
    )
    engine = AlertEngine(rules)
    for _ in range(length):
        yield engine.update(collector.collect())


UTIL = AlertRule("util", "gpu_util", threshold=90.0, for_s=300.0)


def test_static_rule_pends_holds_for_its_duration_fires_and_resolves() -> None:
    series = [50, 95, 95, 95, 95, 95, 95, 95, 40, 40]
    states = list(play({"utilization_gpu": series}, [UTIL]))
    phases = [s.active[0].phase if s.active else None for s in states]
    p, f = AlertPhase.PENDING, AlertPhase.FIRING
    # Pending from minute 1; firing once 300 s have passed (minute 6); resolved at minute 8.
    assert phases == [None, p, p, p, p, p, f, f, None, None]
    firing = states[6].firing[0]
    assert firing.since == T0 + 60
    assert firing.firing_since == T0 + 360
    assert firing.subject == "gpu0"
    assert "gpu_util 95% above 90%" in firing.message
    resolved = states[8].history[-1]
    assert resolved.phase is AlertPhase.RESOLVED
    assert resolved.resolved_at == T0 + 480
    assert [a.phase for a in states[9].history] == [AlertPhase.FIRING, AlertPhase.RESOLVED]


def test_gpu_util_watches_the_interval_s_busy_time_not_the_point_read() -> None:
    """A job busy 95 % of each second whose point reads land in its idle 200 ms (0 %): the
    rule sees the samples' mean, and GPM's graphics activity where read."""
    mean = list(play({"utilization_gpu": [0] * 8, "utilization_gpu_mean": [95] * 8}, [UTIL]))
    assert mean[-1].firing and "gpu_util 95% above 90%" in mean[-1].firing[0].message
    gpm = {"utilization_gpu": [100] * 8, "gpm_graphics_active": [20] * 8, "gpm_sm_active": [5] * 8}
    assert not any(s.active for s in play(gpm, [UTIL]))


def test_a_condition_shorter_than_for_never_fires() -> None:
    series = [95, 95, 95, 50, 95, 95, 95, 50]
    states = list(play({"utilization_gpu": series}, [UTIL]))
    assert not any(s.firing for s in states)
    assert states[-1].history == ()
    assert states[2].pending[0].since == T0  # and the pending start resets after the dip
    assert states[4].pending[0].since == T0 + 240


def test_default_rules_memory_and_temperature() -> None:
    gpu = {
        "memory_used_mib": [500, 950, 950, 950, 500],
        "temperature_c": [60, 86, 86, 86, 86],
        "utilization_gpu": 10,
    }
    states = list(play(gpu, list(DEFAULT_RULES)))
    assert {a.rule for a in states[2].firing} == {"gpu-memory-high", "gpu-temperature-high"}
    temp = next(a for a in states[2].firing if a.rule == "gpu-temperature-high")
    assert temp.severity == "critical"
    assert {a.rule for a in states[4].firing} == {"gpu-temperature-high"}


def test_dynamic_rule_fires_on_an_outlier_of_its_own_window_and_resolves() -> None:
    rule = AlertRule(
        "power-anomaly", "power_w", kind="dynamic", k=2.0, window_s=600.0, min_samples=5
    )
    normal = [300, 310, 290, 305, 295, 300, 310, 290]
    series = [*normal, 450, 450, 300, 300]
    states = list(play({"power_w": series, "power_limit_w": 700}, [rule], step=30.0))
    assert not any(s.active for s in states[:8])  # silent while learning, quiet when normal
    alert = states[8].firing[0]
    assert alert.value == 450
    assert 300 < alert.bound < 330  # mean 300 + 2 * sigma 7.07
    assert "mean + 2 sigma" in alert.message
    # The window now holds one 450: the second is still far above mean + 2 sigma of it.
    assert states[9].firing
    assert not states[10].active
    assert states[10].history[-1].phase is AlertPhase.RESOLVED


def test_dynamic_rule_needs_min_delta_on_a_flat_series() -> None:
    flat = [50] * 6 + [51]
    loose = AlertRule("a", "gpu_util", kind="dynamic", min_samples=5)
    strict = AlertRule("b", "gpu_util", kind="dynamic", min_samples=5, min_delta=10.0)
    states = list(play({"utilization_gpu": flat}, [loose, strict]))
    assert [a.rule for a in states[-1].firing] == ["a"]  # sigma 0: any rise counts without a floor


def test_below_rules_and_vanishing_values() -> None:
    rule = AlertRule("cold", "power_w", op="<", threshold=100.0)
    gpu = {"power_w": [50, 50, 50], "errors": {"*": [None, None, "GpuIsLost"]}}
    states = list(play(gpu, [rule]))
    assert states[0].firing[0].message.endswith("below 100W")
    # A lost GPU has no value: the alert resolves instead of firing forever on stale data.
    assert not states[2].active
    assert states[2].history[-1].phase is AlertPhase.RESOLVED


def test_container_metrics_alert_per_container() -> None:
    rule = AlertRule("big", "container_gpu_memory_bytes", threshold=50 * 2**30)
    collector = Collector(
        ScenarioSource(demo.DEMO_SCENARIO),
        demo.DemoProcesses(),
        demo.DemoContainers(),
        clock=ticking(1.0),
    )
    state = AlertEngine([rule]).update(collector.collect())
    assert {a.subject for a in state.firing} == {"container llm-trainer-1", "container vllm-server"}


def test_history_is_bounded() -> None:
    rule = AlertRule("flap", "gpu_util", threshold=90.0)
    engine_rules = [rule]
    collector_states = list(play({"utilization_gpu": [95, 10] * 20}, engine_rules))
    assert len(collector_states[-1].history) == 40
    engine = AlertEngine(engine_rules, history_limit=5)
    source = Collector(
        ScenarioSource({"gpus": [{"utilization_gpu": [95, 10]}]}),
        demo.DemoProcesses(),
        demo.DemoContainers(),
        clock=ticking(1.0),
    )
    for _ in range(20):
        state = engine.update(source.collect())
    assert len(state.history) == 5


# -- the config file ----------------------------------------------------------------------------


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_config_rules_replace_defaults_by_id_and_add_dynamic_ones(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
[[alerts.rules]]
id = "gpu-util-high"
metric = "gpu_util"
threshold = 99
for = "10m"

[[alerts.rules]]
id = "power-anomaly"
metric = "power_w"
kind = "dynamic"
k = 3
window = "1h"
min_samples = 30
min_delta = 25
""",
    )
    rules = {r.id: r for r in load_config(path).alert_rules}
    assert rules["gpu-util-high"].threshold == 99.0
    assert rules["gpu-util-high"].for_s == 600.0
    assert rules["power-anomaly"].window_s == 3600.0
    assert rules["power-anomaly"].kind == "dynamic"
    assert "gpu-temperature-high" in rules  # the other defaults stay
    off = write(tmp_path, "[alerts]\ndefaults = false\n")
    assert load_config(off).alert_rules == ()


def test_default_location_follows_xdg(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path), "HOME": "/nonexistent"}
    assert default_config_path(env) == tmp_path / "gputui" / "config.toml"
    assert default_config_path({"HOME": str(tmp_path)}) == tmp_path / ".config/gputui/config.toml"
    assert default_config_path({"XDG_CONFIG_HOME": "rel", "HOME": "/h"}) == Path(
        "/h/.config/gputui/config.toml"
    )
    assert load_config(None, env).alert_rules == DEFAULT_RULES  # no file: the defaults
    (tmp_path / "gputui").mkdir()
    (tmp_path / "gputui" / "config.toml").write_text("[alerts]\ndefaults = false\n")
    assert load_config(None, env).alert_rules == ()


def test_ui_section_is_read_and_the_state_file_wins(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path), "HOME": "/nonexistent"}
    (tmp_path / "gputui").mkdir()
    (tmp_path / "gputui" / "config.toml").write_text(
        '# mine\n[ui]\ntheme = "nord"\ninterval = 2\nsort = "pid"\nlayout = "top"\n'
        'collapsed = ["gpus"]\n\n[alerts]\ndefaults = false\n'
    )
    config = load_config(None, env)
    assert config.alert_rules == ()
    assert config.ui == UiPrefs("nord", 2.0, "pid", "top", ("gpus",))
    save_ui_state(UiPrefs(theme="dracula", collapsed=()), ui_state_path(env))
    assert ui_state_path(env) == tmp_path / "gputui" / "ui-state.toml"
    config = load_config(None, env)
    assert config.ui == UiPrefs("dracula", 2.0, "pid", "top", ())  # the app's changes win
    (tmp_path / "gputui" / "ui-state.toml").write_text('[ui]\nsort = "nope"\n')
    with pytest.raises(ConfigError, match=r"ui state file .*ui\.sort"):
        load_config(None, env)


def test_ui_themes_and_sorts_are_the_apps() -> None:
    from textual.theme import BUILTIN_THEMES

    from gputui.ui.widgets.process_table import SORTS as TABLE_SORTS

    assert set(THEMES) <= set(BUILTIN_THEMES)
    assert tuple(column for column, *_ in TABLE_SORTS) == SORTS


BAD_CONFIGS = [
    ("[alerts\n", "not valid TOML"),
    ("[alarms]\n", "unknown section 'alarms'"),
    ('[ui]\ntheme = "neon"\n', "ui.theme: 'neon' is not one of"),
    ("[ui]\ninterval = 0\n", "ui.interval: expected seconds from 0.1"),
    ('[ui]\ninterval = "1s"\n', "ui.interval: expected seconds"),
    ('[ui]\nsort = "size"\n', "ui.sort: 'size' is not one of mem, sm, cpu, pid, container"),
    ('[ui]\nlayout = "left"\n', "ui.layout: 'left' is not one of auto, top, side"),
    ('[ui]\ncollapsed = ["tree"]\n', "ui.collapsed: 'tree' is not one of gpus"),
    ('[ui]\ncollapsed = "gpus"\n', "ui.collapsed: expected a list"),
    ("[ui]\ncolour = 1\n", "ui: unknown key 'colour'"),
    ("ui = 3\n", "ui must be a table"),
    ("[alerts]\ndefaults = 1\n", "alerts.defaults"),
    ('[[alerts.rules]]\nmetric = "gpu_util"\nthreshold = 1\n', "rules[0].id: required"),
    ('[[alerts.rules]]\nid = "a"\nmetric = "fan"\nthreshold = 1\n', "'fan' is not one of"),
    ('[[alerts.rules]]\nid = "a"\nmetric = "gpu_util"\n', "threshold: required"),
    ('[[alerts.rules]]\nid = "a"\nmetric = "gpu_util"\nthreshold = "9"\n', "expected a number"),
    ('[[alerts.rules]]\nid = "a"\nmetric = "gpu_util"\nthreshold = 9\nfor = "5 min"\n', "for:"),
    ('[[alerts.rules]]\nid = "a"\nmetric = "gpu_util"\nthreshold = 9\nop = ">="\n', "op:"),
    ('[[alerts.rules]]\nid = "a"\nmetric = "gpu_util"\nthreshhold = 9\n', "'threshhold'"),
    (
        '[[alerts.rules]]\nid = "a"\nmetric = "gpu_util"\nkind = "dynamic"\nmin_samples = 1\n',
        "min_samples",
    ),
    (
        '[[alerts.rules]]\nid = "a"\nmetric = "power_w"\nthreshold = 1\n'
        '[[alerts.rules]]\nid = "a"\nmetric = "gpu_util"\nthreshold = 1\n',
        "duplicate id 'a'",
    ),
]


@pytest.mark.parametrize(("text", "needle"), BAD_CONFIGS)
def test_invalid_config_names_the_problem(tmp_path: Path, text: str, needle: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert needle in str(info.value)
    assert str(path) in str(info.value)
    assert "\n" not in str(info.value)


def test_durations() -> None:
    assert parse_duration(90, "x") == 90.0
    assert parse_duration("1.5m", "x") == 90.0
    assert parse_duration("250ms", "x") == 0.25
    with pytest.raises(ConfigError):
        parse_duration(-1, "x")
    with pytest.raises(ConfigError):
        parse_duration(True, "x")


def gputui(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize(
    "args",
    [
        ["--once", "--demo", "--config", "{bad}"],
        ["export", "--once", "--demo", "--config", "{bad}"],
        ["--once", "--demo", "--config", "/nonexistent/gputui.toml"],
    ],
)
def test_cli_refuses_an_invalid_config_with_one_line(tmp_path: Path, args: list[str]) -> None:
    bad = write(tmp_path, '[[alerts.rules]]\nid = "a"\nmetric = "nope"\n')
    result = gputui(*(str(bad) if a == "{bad}" else a for a in args))
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "config file" in result.stderr or "alerts.rules[0].metric" in result.stderr


def test_cli_reads_the_xdg_config_by_default(tmp_path: Path) -> None:
    (tmp_path / "gputui").mkdir()
    (tmp_path / "gputui" / "config.toml").write_text("[alerts\n")
    result = gputui("--once", "--demo", env={"XDG_CONFIG_HOME": str(tmp_path)})
    assert result.returncode == 2
    assert "not valid TOML" in result.stderr
