"""Health and Alerts tabs at 80 and 160 columns: widths from content, URLs whole, units."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult

from gputui.derive.alerts import Alert, AlertPhase, AlertState
from gputui.model.status import HealthCheck, HealthStatus
from gputui.ui.widgets.alerts_panel import ACTIVE_COLUMNS, AlertsPanel, fit_columns
from gputui.ui.widgets.health_panel import HealthPanel, detail_content, wrap_text

DOCS = (
    "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/"
    "troubleshooting.html#containers-losing-access-to-gpus-with-error-failed-to-initialize-nvml"
)
HAZARD = HealthCheck(
    "cgroup.nvml_hazard",
    HealthStatus.WARN,
    "4 GPU container(s) will lose their GPUs on the next `systemctl daemon-reload`",
    details=(
        "GPU containers using runc-style injection: llm-trainer-1, "
        "k8s_bert_bert-infer-7d9c_serving_0, vllm-server, notebook-gpu3 (see " + DOCS + ")",
    ),
    fix="Pick one: (a) sudo nvidia-ctk system create-dev-char-symlinks --create-all, and "
    "install the udev rule 71-nvidia-dev-char.rules so the links survive reboots",
    docs=DOCS,
)
OTHER = HealthCheck(
    "container.gpu_unrequested:k8s_bert_bert-infer-7d9c_serving_0",
    HealthStatus.PASS,
    "Uses GPU(s) 1, which it requested",
)


class _Health(App[None]):
    def compose(self) -> ComposeResult:
        yield HealthPanel(id="health")


class _Alerts(App[None]):
    def compose(self) -> ComposeResult:
        yield AlertsPanel(id="alerts")


def _row_text(table: object, row: int) -> list[str]:
    from textual.widgets import DataTable

    assert isinstance(table, DataTable)
    return [str(cell) for cell in table.get_row_at(row)]


@pytest.mark.parametrize("width", [80, 160])
async def test_health_summary_uses_the_width_and_urls_stay_whole(width: int) -> None:
    app = _Health()
    async with app.run_test(size=(width, 40)) as pilot:
        panel = app.query_one(HealthPanel)
        panel.show((HAZARD, OTHER))
        await pilot.pause()
        widths = panel.widths
        # Every column together fits the width; the summary takes what the others leave.
        assert sum(widths.values()) + 2 * len(widths) + 2 == width
        summary = len(HAZARD.summary)
        if width == 160:
            assert widths["id"] == 40  # the longest id, capped
            assert widths["summary"] >= summary  # shown whole: nothing cut while space remains
        else:
            assert widths["summary"] >= 40
        lines = str(panel.detail.content).splitlines()
        # The URL is on a line of its own, whole, in the details and under "docs".
        assert sum(line.strip() == DOCS for line in lines) == 2, lines
        text_lines = [line for line in lines if DOCS not in line]
        assert all(len(line) <= width - 4 for line in text_lines)
        # Wrapped lines keep their indent: continuation lines of the bullet and the fix.
        bullet = lines.index(next(line for line in lines if line.startswith("  • ")))
        assert lines[bullet + 1].startswith("    ") and not lines[bullet + 1].startswith("     •")
        fix = lines.index(next(line for line in lines if line.startswith("fix  ")))
        assert lines[fix + 1].startswith("     ") and lines[fix + 1].strip()


def test_wrap_text_hangs_and_keeps_urls() -> None:
    lines = wrap_text("see " + DOCS + " for the fix and more", 30, "  • ", "    ")
    assert lines == ["  • see", "    " + DOCS, "    for the fix and more"]
    plain = str(detail_content(HAZARD, 60)).splitlines()
    assert "docs" in plain and DOCS in plain


def _alert(rule: str, subject: str, message: str) -> Alert:
    return Alert(rule, subject, AlertPhase.FIRING, 1.0, 1.0, 100.0, 100.0, message=message)


@pytest.mark.parametrize("width", [80, 160])
async def test_alerts_message_gets_the_room(width: int) -> None:
    subject = "container k8s_bert_bert-infer-7d9c_serving_0"
    message = f"{subject}: container_gpu_memory_bytes 18.0GiB above 16.0GiB"
    state = AlertState(
        200.0,
        active=(_alert("ctr-gpu-memory-high", subject, message),),
        history=(_alert("ctr-gpu-memory-high", subject, message),),
    )
    app = _Alerts()
    async with app.run_test(size=(width, 40)) as pilot:
        panel = app.query_one(AlertsPanel)
        panel.show(state, 3)
        await pilot.pause()
        widths = panel.active.widths
        assert sum(widths.values()) + 2 * len(widths) + 2 == width
        cells = dict(zip([c[0] for c in ACTIVE_COLUMNS], _row_text(panel.active, 0), strict=True))
        # The subject has its column; the message does not repeat it.
        assert cells["message"] == "container_gpu_memory_bytes 18.0GiB above 16.0GiB"
        if width == 160:
            assert widths["message"] >= len(cells["message"])
            assert widths["subject"] == len(subject)  # shown whole
        else:
            assert widths["message"] >= 28, widths  # was 12 with fixed rule/subject columns
        assert panel.history.widths["message"] >= (48 if width == 160 else 25)


def test_fit_columns_shrinks_names_before_the_message() -> None:
    rows = [{"rule": "r" * 30, "subject": "s" * 30, "message": "m" * 80}]
    wide = fit_columns(ACTIVE_COLUMNS, rows, 200)
    assert (wide["rule"], wide["subject"]) == (30, 30)
    assert wide["message"] == 200 - 2 - 12 - (7 + 8 + 30 + 30 + 6)
    narrow = fit_columns(ACTIVE_COLUMNS, rows, 100)
    assert narrow["message"] == 40
    assert narrow["rule"] < 30 and narrow["subject"] < 30
