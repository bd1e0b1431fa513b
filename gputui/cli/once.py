"""``gputui --once`` / ``--json``: one collection, printed as text or as the JSON contract."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gputui.boundary.startup_trace import mark
from gputui.model.settings import Settings

if TYPE_CHECKING:
    from gputui.collect.linux.proc_reader import EarlyCpuSample
    from gputui.collect.sources import GpuSource
    from gputui.derive.alerts import AlertRule
    from gputui.derive.analysis import Analysis
    from gputui.model.snapshot import Snapshot
from gputui.cli.terminal import fail_usage, write_out


def sample_cpu_early() -> EarlyCpuSample | None:
    """The one-shot's first CPU sample (None where ``/proc`` cannot be read)."""
    from gputui.collect.linux.proc_reader import early_cpu_sample

    try:
        return early_cpu_sample()
    except OSError:
        return None  # the collection takes its own sample, and says what it cannot read


def collect_once(
    settings: Settings, early: EarlyCpuSample | None = None, gpu: GpuSource | None = None
) -> Snapshot | str:
    """One snapshot with fresh health checks, or the one-line error for a bad scenario.

    Args:
        settings: What the user asked for.
        early: The first CPU sample, taken at start-up.
        gpu: NVML already starting (the command line's); closed here either way.
    """
    from gputui.wiring.compose import build_collector

    invalid: tuple[type[Exception], ...] = ()  # only a scenario file can be invalid here
    if settings.scenario is not None:
        from gputui.collect.standins.scenario_format import ScenarioError

        invalid = (ScenarioError,)
    try:
        collector = build_collector(settings, once=True, early=early, gpu=gpu)
    except invalid as exc:
        if gpu is not None:
            gpu.close()
        return str(exc)
    mark("collector-built")
    try:
        collector.request_health()
        snapshot = collector.collect()
        mark("collected")
        return snapshot
    finally:
        collector.close()


def run_once(
    settings: Settings,
    rules: Sequence[AlertRule],
    as_json: bool,
    early: EarlyCpuSample | None = None,
    gpu: GpuSource | None = None,
) -> int:
    """One collection printed as text or JSON; the exit status of ``gputui --once``."""
    from gputui.cli.args import scope_error
    from gputui.derive.analysis import Analyzer

    snapshot = collect_once(settings, early, gpu)
    if isinstance(snapshot, str):
        return fail_usage(snapshot)
    problem = scope_error(snapshot, settings.scope)
    if problem is not None:
        return fail_usage(problem)
    # The TUI's Analyzer on its first refresh: the same findings and alert states (an alert
    # whose rule has a `for` duration is pending, as it would be there).
    return print_snapshot(
        Analyzer(rules, scope=settings.scope).analyse(snapshot), as_json, ascii=settings.ascii
    )


def print_snapshot(analysis: Analysis, as_json: bool, *, ascii: bool = False) -> int:
    """Print an analysed snapshot as the text report or the JSON contract.

    Args:
        analysis: The snapshot and what it means (narrowed to ``--only``/``--user``/``--pid``
            by the analyzer that made it).
        as_json: The JSON contract instead of the text report.
        ascii: The text report in ASCII only (``--ascii``); JSON is ASCII already.
    """
    from gputui.boundary import glyphs
    from gputui.present.json_report import snapshot_to_json
    from gputui.present.text_report import snapshot_to_text

    snapshot, findings, alerts = analysis.snapshot, analysis.findings, analysis.alerts
    if as_json:
        # ensure_ascii: control characters, bidi overrides and lone surrogates all become \u
        # escapes, so the document is inert on a terminal and exact for a parser.
        doc = snapshot_to_json(snapshot, findings, alerts, analysis.totals, analysis.activity)
        write_out(json.dumps(doc, indent=2, ensure_ascii=True))
        write_out("\n")
    else:
        text = snapshot_to_text(snapshot, findings, alerts, analysis.totals, analysis.activity)
        write_out(glyphs.to_ascii(text) if ascii else text)
    mark("report-written")
    return 0
