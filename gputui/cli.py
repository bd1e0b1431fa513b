"""Command line: ``gputui`` (TUI), ``--once`` / ``--json`` reports, ``gputui doctor``.

Bad input gets one line on stderr and exit status 2, never a traceback. A missing NVIDIA driver
or Docker engine is not an error: the program runs and says what is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from gputui import __version__
from gputui.settings import MIN_INTERVAL_S, Settings

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (no usage dump) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= MIN_INTERVAL_S or value == float("inf"):  # also rejects NaN
        raise argparse.ArgumentTypeError(f"must be at least {MIN_INTERVAL_S} seconds, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for ``gputui`` (``doctor`` is handled before it)."""
    parser = _Parser(
        prog="gputui",
        description=(
            "Who is using my NVIDIA GPUs, in which Docker container, and is the GPU container "
            "runtime healthy? Subcommand: `gputui doctor` prints the runtime-health checks."
        ),
    )
    parser.add_argument("--once", action="store_true", help="print one snapshot and exit")
    parser.add_argument("--json", action="store_true", help="with --once: JSON (implies --once)")
    parser.add_argument("--demo", action="store_true", help="run on a built-in simulated machine")
    parser.add_argument(
        "--scenario",
        metavar="FILE",
        type=Path,
        help="replace NVML with a scenario file (env GPUTUI_SCENARIO); Docker and /proc stay real",
    )
    parser.add_argument(
        "--interval",
        metavar="SECONDS",
        type=_interval,
        default=1.0,
        help=f"refresh period (default 1.0, at least {MIN_INTERVAL_S})",
    )
    parser.add_argument(
        "--read-only", action="store_true", help="no exec, no signals, no container actions"
    )
    parser.add_argument("--version", action="version", version=f"gputui {__version__}")
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    scenario = args.scenario
    if scenario is None and os.environ.get("GPUTUI_SCENARIO"):
        scenario = Path(os.environ["GPUTUI_SCENARIO"])
    return Settings(
        interval=args.interval, read_only=args.read_only, demo=args.demo, scenario=scenario
    )


def _fail(message: str) -> int:
    print(f"gputui: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def _once(settings: Settings, as_json: bool) -> int:
    from gputui.collect.collector import build_collector
    from gputui.collect.scenario import ScenarioError
    from gputui.derive.findings import FindingsEngine
    from gputui.report import snapshot_to_json, snapshot_to_text

    try:
        collector = build_collector(settings, once=True)
    except ScenarioError as exc:
        return _fail(str(exc))
    try:
        collector.request_health()
        snapshot = collector.collect()
    finally:
        collector.close()
    findings = FindingsEngine().update(snapshot)
    if as_json:
        json.dump(snapshot_to_json(snapshot, findings), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(snapshot_to_text(snapshot, findings))
    return 0


def doctor(argv: Sequence[str]) -> int:
    """``gputui doctor``: print every health check; exit 1 when any fails."""
    parser = _Parser(prog="gputui doctor", description="Runtime-health checks of this GPU host.")
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")
    parser.add_argument("--demo", action="store_true", help="check the simulated machine")
    parser.add_argument("--scenario", metavar="FILE", type=Path, help="replace NVML with FILE")
    args = parser.parse_args(argv)
    from gputui.collect.collector import build_collector
    from gputui.collect.scenario import ScenarioError
    from gputui.model import HealthStatus
    from gputui.report import check_to_json, format_checks

    settings = Settings(demo=args.demo, scenario=args.scenario)
    try:
        collector = build_collector(settings, once=True)
    except ScenarioError as exc:
        return _fail(str(exc))
    try:
        collector.request_health()
        checks = collector.collect().health
    finally:
        collector.close()
    if args.json:
        json.dump({"health": [check_to_json(c) for c in checks]}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for line in format_checks(checks, set(HealthStatus)):
            print(line)
        counts = {s: sum(1 for c in checks if c.status is s) for s in HealthStatus}
        print(", ".join(f"{n} {s.value}" for s, n in counts.items()))
    return 1 if any(c.status is HealthStatus.FAIL for c in checks) else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gputui`` command."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["doctor"]:
        return doctor(args_list[1:])
    args = build_parser().parse_args(args_list)
    settings = _settings(args)
    if settings.demo and settings.scenario is not None:
        return _fail("--demo and --scenario cannot be combined")
    if settings.scenario is not None and not args.demo:
        # Validate before anything starts, so a bad file is a one-line error, not a broken UI.
        from gputui.collect.scenario import ScenarioError, load_scenario

        try:
            load_scenario(settings.scenario)
        except ScenarioError as exc:
            return _fail(str(exc))
    if args.once or args.json:
        return _once(settings, as_json=args.json)
    from gputui.ui.run import run_tui  # imported late: --once must never load Textual

    status: int = run_tui(settings)
    return status
