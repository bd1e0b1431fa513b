"""Pure helpers: tree markers from findings and shares, header segments fitted to a width."""

from __future__ import annotations

from gputui.derive.findings import gpu_shares
from gputui.derive.tree import Marker, finding_marker, node_markers
from gputui.model.status import Finding, FindingSeverity
from gputui.ui.state import UiState
from gputui.ui.widgets.header import Segment, fit, header_content
from tests.support.factories import cid, standard


def test_sharing_markers_name_the_gpu_on_every_party() -> None:
    markers = node_markers((), gpu_shares(standard()))
    assert markers[f"container:{cid(1)}"] == (
        Marker("gpu_shared", "shared GPU 0: 95%", FindingSeverity.INFO, "SHARED"),
        Marker("gpu_shared", "shared GPU 1: 29%", FindingSeverity.INFO, "SHARED"),
    )
    assert markers["host"] == (
        Marker("gpu_shared", "shared GPU 0: 2%", FindingSeverity.INFO, "SHARED"),
    )
    assert markers["orphans"] == (
        Marker("gpu_shared", "shared GPU 1: 14%", FindingSeverity.INFO, "SHARED"),
    )
    assert f"container:{cid(3)}" not in markers  # idle: uses no GPU, shares none


def test_finding_markers() -> None:
    def marker(kind: str, *figures: tuple[str, float | int | str]) -> str | None:
        found = finding_marker(Finding(kind, "container:x", FindingSeverity.WARN, "", figures))
        return None if found is None else found.text

    assert marker("idle_reservation", ("idle_seconds", 720.0), ("gpu_processes", 0)) == (
        "idle: reserved GPU, no GPU process for 12m"
    )
    assert marker(
        "idle_reservation", ("idle_seconds", 60.0), ("gpu_processes", 2), ("sm_util", 1)
    ) == ("idle at 1% SM for 1m")
    assert marker("memory_growth", ("rate_mib_per_min", 120.4), ("time_to_fill_s", 3600.0)) == (
        "GPU mem +120 MiB/min, full in 1h00m"
    )
    assert marker("cpu_throttled", ("throttled_ratio", 0.456)) == "CPU throttled 46%"
    assert marker("memory_pressure", ("memory_used_bytes", 95), ("memory_limit_bytes", 100)) == (
        "mem 95% of limit"
    )
    assert marker("oom_killed") == "OOM-killed"
    assert marker("restarting", ("restart_count", 5)) == "restarts 5"
    assert marker("gpu_shared") is None  # shown through the shares instead


def test_fit_shortens_then_drops_least_important_first() -> None:
    segments = [
        Segment(0, ["keep"]),
        Segment(5, [" drop-first"]),
        Segment(2, [" long-form"], [" s"]),
        Segment(5, [" drop-too"]),
    ]
    assert "".join(map(str, fit(segments, 100))) == "keep drop-first long-form drop-too"
    assert "".join(map(str, fit(segments, 25))) == "keep drop-first long-form"
    assert "".join(map(str, fit(segments, 14))) == "keep long-form"
    assert "".join(map(str, fit(segments, 6))) == "keep s"
    assert "".join(map(str, fit(segments, 1))) == "keep"


def test_header_keeps_alarms_when_narrow() -> None:
    state = UiState(1.0, paused=True, mode="replay", replay=(4, 100))
    text = header_content(standard(1_800_000_000.0), state, width=78, lines=1).plain
    assert "\n" not in text
    assert len(text) <= 78
    for kept in ("gputui", "1 fail", "REPLAY", "PAUSED", "5/100"):
        assert kept in text, text


def test_header_says_the_checks_are_running_before_the_first_run() -> None:
    # The monitor's first snapshot comes before the checks (they run after the first paint):
    # the header must not read "0 fail / 0 warn" then.
    from dataclasses import replace

    pending = replace(standard(1_800_000_000.0), health=(), health_pending=True)
    state = UiState(1.0)
    wide = header_content(pending, state, width=160).plain
    assert "checks running" in wide and "fail" not in wide
    narrow = header_content(pending, state, width=78, lines=1).plain
    assert "fail" not in narrow and len(narrow) <= 78
    done = header_content(standard(1_800_000_000.0), state, width=160).plain
    assert "1 fail" in done and "checks running" not in done
