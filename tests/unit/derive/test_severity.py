"""Finding and alert severities are str-valued enums whose text is their value everywhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gputui.config.alert_rules import parse_alerts
from gputui.config.file import parse_config
from gputui.config.values import ConfigError
from gputui.derive.alerts import DEFAULT_RULES, Alert, AlertPhase, AlertRule
from gputui.derive.analysis import Analyzer, worst_severity
from gputui.derive.tree import node_markers
from gputui.exporter.families import finding_family
from gputui.exporter.run import render_once
from gputui.model.snapshot import Snapshot
from gputui.model.status import AlertSeverity, Finding, FindingSeverity
from gputui.present.json_report import alert_to_json, finding_to_json, snapshot_to_json
from gputui.present.text_report import snapshot_to_text
from gputui.recording.reader import read_recording
from tests.support.paths import FIXTURES

RECORDING = FIXTURES / "h200-lab-recording.jsonl"


@pytest.mark.parametrize(
    ("member", "text"),
    [
        (FindingSeverity.FAIL, "fail"),
        (FindingSeverity.WARN, "warn"),
        (FindingSeverity.INFO, "info"),
        (AlertSeverity.CRITICAL, "critical"),
        (AlertSeverity.WARNING, "warning"),
    ],
)
def test_a_severity_prints_compares_and_serialises_as_its_text(
    member: FindingSeverity | AlertSeverity, text: str
) -> None:
    assert str(member) == text
    assert f"{member}" == text and f"[{member:<9}]" == f"[{text:<9}]"
    assert format(member) == text and "{}".format(member) == text  # noqa: UP032
    assert member == text and {text: 1}[member] == 1  # the UI's style tables keyed by text
    assert json.dumps({"severity": member}) == json.dumps({"severity": text})
    assert type(member)(text) is member


def test_findings_take_their_text_as_the_enum() -> None:
    finding = Finding("restarting", "container:x", "warn", "x restarted")  # type: ignore[arg-type]
    assert finding.severity is FindingSeverity.WARN
    with pytest.raises(ValueError, match="'bad' is not a valid FindingSeverity"):
        Finding("restarting", "container:x", "bad", "x")  # type: ignore[arg-type]


def test_alert_rules_take_their_text_as_the_enum() -> None:
    assert AlertRule("r", "gpu_util", severity="critical").severity is AlertSeverity.CRITICAL  # type: ignore[arg-type]
    assert AlertRule("r", "gpu_util").severity is AlertSeverity.WARNING
    alert = Alert("r", "gpu0", AlertPhase.FIRING, 1.0, 0.0, 0.0, severity="critical")  # type: ignore[arg-type]
    assert alert.severity is AlertSeverity.CRITICAL
    assert {r.id: r.severity for r in DEFAULT_RULES}["gpu-temperature-high"] is (
        AlertSeverity.CRITICAL
    )


def test_config_maps_severity_text_to_the_enum_and_refuses_others_in_one_line() -> None:
    rules = parse_alerts(
        {
            "alerts": {
                "defaults": False,
                "rules": [
                    {
                        "id": "hot",
                        "metric": "temperature_c",
                        "threshold": 80,
                        "severity": "critical",
                    },
                    {"id": "busy", "metric": "gpu_util", "threshold": 90},
                ],
            }
        }
    )
    assert [type(r.severity) for r in rules] == [AlertSeverity, AlertSeverity]
    assert [r.severity for r in rules] == [AlertSeverity.CRITICAL, AlertSeverity.WARNING]
    text = '[[alerts.rules]]\nid = "x"\nmetric = "gpu_util"\nthreshold = 1\nseverity = "fatal"\n'
    with pytest.raises(ConfigError) as caught:
        parse_config(text, Path("c.toml"))
    assert "severity" in str(caught.value) and "\n" not in str(caught.value)


def _findings_and_alerts() -> tuple[Snapshot, tuple[Finding, ...], list[Alert]]:
    snapshot = read_recording(RECORDING)[0]
    analysis = Analyzer([AlertRule("any-memory", "memory_used_percent", threshold=0.0)]).analyse(
        snapshot
    )
    assert analysis.alerts is not None
    return snapshot, analysis.findings, list(analysis.alerts.active)


def test_an_old_recording_analyses_to_enum_severities_and_text_outputs() -> None:
    snapshot, findings, alerts = _findings_and_alerts()
    assert findings and alerts
    assert all(type(f.severity) is FindingSeverity for f in findings)
    assert all(type(a.severity) is AlertSeverity for a in alerts)
    # Outputs hold the plain text: JSON, the text report, the exposition.
    doc = json.loads(json.dumps(snapshot_to_json(snapshot, findings)))
    assert {f["severity"] for f in doc["findings"]} <= {"fail", "warn", "info"}
    assert type(finding_to_json(findings[0])["severity"]) is str
    assert type(alert_to_json(alerts[0])["severity"]) is str
    assert alert_to_json(alerts[0])["severity"] == "warning"
    text = snapshot_to_text(snapshot, findings)
    assert "FindingSeverity" not in text and "AlertSeverity" not in text
    body = render_once(snapshot, rules=[AlertRule("m", "memory_used_percent")]).decode()
    assert 'severity="warning"' in body and "Severity." not in body
    family, _ = finding_family(findings)
    assert {s.labels["severity"] for s in family.samples} <= {"fail", "warn", "info"}


def test_worst_severity_and_markers_are_enums() -> None:
    def alert(severity: AlertSeverity) -> Alert:
        return Alert("r", "gpu0", AlertPhase.FIRING, 1.0, 0.0, 0.0, severity=severity)

    assert worst_severity([]) is None
    assert worst_severity([alert(AlertSeverity.WARNING)]) is AlertSeverity.WARNING
    both = [alert(AlertSeverity.WARNING), alert(AlertSeverity.CRITICAL)]
    assert worst_severity(both) is AlertSeverity.CRITICAL
    finding = Finding("oom_killed", "container:c", FindingSeverity.FAIL, "c: OOM")
    markers = node_markers((finding,), {})
    assert markers["container:c"][0].severity is FindingSeverity.FAIL
