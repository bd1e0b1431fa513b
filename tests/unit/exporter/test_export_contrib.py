"""contrib/: the Grafana dashboard and the Prometheus rules only use metrics gputui exports, the
rules pass ``promtool check rules``, and the example config loads."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gputui.config.file import load_config
from gputui.exporter.run import serve
from gputui.model.settings import Settings
from gputui.wiring.compose import build_collector
from tests.support.paths import REPO

CONTRIB = REPO / "contrib"
RULES = CONTRIB / "gputui-alerts.rules.yml"
DASHBOARD = CONTRIB / "grafana-gputui-containers.json"
METRIC = re.compile(r"\b(DCGM_FI_[A-Z_]+|gputui_[a-z_]+)\b")


@pytest.fixture(scope="module")
def exported() -> set[str]:
    """Metric names the endpoint serves (as Prometheus scrapes them) for the demo machine."""
    collector = build_collector(Settings(demo=True), once=True)
    collector.request_health()
    stop, lines = threading.Event(), list[str]()
    thread = threading.Thread(
        target=serve,
        kwargs={
            "collector": collector,
            "host": "127.0.0.1",
            "port": 0,
            "interval": 1.0,
            "stop": stop,
            "announce": lines.append,
        },
    )
    thread.start()
    try:
        deadline = time.monotonic() + 20
        text = ""
        while "gputui_health_status" not in text and time.monotonic() < deadline:
            time.sleep(0.05)
            found = re.search(r":(\d+)/metrics", lines[0]) if lines else None
            if found is not None:
                url = f"http://127.0.0.1:{found.group(1)}/metrics"
                with urllib.request.urlopen(url, timeout=5) as response:
                    text = response.read().decode()
    finally:
        stop.set()
        thread.join(10)
    assert "gputui_health_status" in text, "the demo endpoint never served a snapshot"
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples}


def with_all(expr: str) -> str:
    """A dashboard query with every template variable set to "All"."""
    return re.sub(r"\$(Hostname|instance|container)\b", ".*", expr)


def dashboard_targets() -> list[dict[str, str]]:
    doc = json.loads(DASHBOARD.read_text())
    return [t for p in doc["panels"] for t in p["targets"]]


def test_dashboard_groups_and_filters_by_host() -> None:
    """Same-named containers of two hosts never merge: every grouping by container is also by
    host, every legend naming a container or a GPU names its host, every query picks hosts."""
    targets = dashboard_targets()
    groupings = [g for t in targets for g in re.findall(r"\bby \(([^)]*)\)", t["expr"])]
    assert groupings, "the dashboard groups nothing"
    for grouping in groupings:
        labels = {label.strip() for label in grouping.split(",")}
        assert "Hostname" in labels, grouping
    for target in targets:
        assert 'Hostname=~"$Hostname"' in target["expr"], target["expr"]
        legend = target.get("legendFormat", "")
        if "{{container}}" in legend or "{{gpu}}" in legend:
            assert "{{Hostname}}" in legend, legend
    variables = {v["name"]: v for v in json.loads(DASHBOARD.read_text())["templating"]["list"]}
    assert variables["Hostname"]["definition"] == "label_values(gputui_info, Hostname)"
    assert "$Hostname" in variables["container"]["definition"]


def test_rules_name_host_and_container() -> None:
    """Every alert's summary names the host; a container's alert names the container too."""
    alerts = RULES.read_text().split("- alert: ")[1:]
    assert len(alerts) == 9
    for alert in alerts:
        name = alert.split()[0]
        summary = re.search(r"summary: (.*)", alert)
        assert summary is not None, name
        assert "$labels.Hostname" in summary.group(1), name
        if "gputui_container_" in alert:
            assert "$labels.container" in summary.group(1), name


def test_dashboard_queries_only_exported_metrics(exported: set[str]) -> None:
    doc = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in doc["panels"] for t in p["targets"]]
    exprs += [v["definition"] for v in doc["templating"]["list"] if "definition" in v]
    used = {m for e in exprs for m in METRIC.findall(e)}
    assert "gputui_container_gpu_memory_bytes" in used
    assert used - exported == set()
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids))


def test_rules_use_only_exported_metrics(exported: set[str]) -> None:
    used = set(METRIC.findall(RULES.read_text()))
    assert {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_FB_USED"} <= used
    assert used - exported == set()
    text = RULES.read_text()
    assert "avg_over_time" in text and "stddev_over_time" in text


def test_rules_pass_promtool() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("CI"):
            pytest.fail("CI needs promtool (Debian's prometheus package, installed by .ci/run)")
        pytest.skip("no promtool (apt-get install prometheus)")
    result = subprocess.run(
        [promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 9 rules found" in result.stdout


def test_example_config_loads() -> None:
    rules = {r.id: r for r in load_config(CONTRIB / "config.example.toml").alert_rules}
    assert rules["gpu-util-high"].threshold == 95
    assert rules["power-anomaly"].kind == "dynamic"
    assert rules["container-memory-big"].severity == "critical"
    assert "gpu-temperature-high" in rules


def test_dashboard_queries_parse(tmp_path: Path) -> None:
    """Every dashboard query is valid PromQL (as recording rules, for ``promtool``)."""
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("CI"):
            pytest.fail("CI needs promtool (Debian's prometheus package, installed by .ci/run)")
        pytest.skip("no promtool (apt-get install prometheus)")
    doc = json.loads(DASHBOARD.read_text())
    exprs = [with_all(t["expr"]) for p in doc["panels"] for t in p["targets"]]
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [{"record": f"dashboard:q{i}", "expr": e} for i, e in enumerate(exprs)],
            }
        ]
    }
    path = tmp_path / "dashboard.rules.yml"
    path.write_text(json.dumps(rules))  # JSON is YAML
    result = subprocess.run(
        [promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
