"""Command line: ``gputui`` (TUI), ``--once`` / ``--json`` reports, ``gputui doctor``.

Bad input gets one line on stderr and exit status 2, never a traceback. A missing NVIDIA driver
or Docker engine is not an error: the program runs and says what is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from gputui import __version__
from gputui.settings import MIN_INTERVAL_S, Settings

if TYPE_CHECKING:
    from gputui.model import Finding, Snapshot

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
            "runtime healthy? Subcommands: doctor (runtime-health checks), export (Prometheus "
            "metrics), record FILE / replay FILE (record snapshots, play them back)."
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
    _add_config(parser)
    parser.add_argument(
        "--bell", action="store_true", help="ring the terminal bell when an alert starts firing"
    )
    parser.add_argument(
        "--replay",
        metavar="FILE",
        type=Path,
        help="show a recording (gputui record) or a --once --json report instead of this machine",
    )
    parser.add_argument(
        "--at",
        metavar="TIME",
        help="with --replay: the moment to show (ISO 8601, epoch seconds, or +OFFSET like +5m)",
    )
    parser.add_argument("--version", action="version", version=f"gputui {__version__}")
    return parser


def _add_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        metavar="FILE",
        type=Path,
        help="config file (default $XDG_CONFIG_HOME/gputui/config.toml): alert rules",
    )


def _settings(args: argparse.Namespace) -> Settings:
    scenario = args.scenario
    if scenario is None and os.environ.get("GPUTUI_SCENARIO"):
        scenario = Path(os.environ["GPUTUI_SCENARIO"])
    return Settings(
        interval=args.interval,
        read_only=args.read_only,
        demo=args.demo,
        scenario=scenario,
        config=args.config,
        bell=args.bell,
    )


def _fail(message: str) -> int:
    print(f"gputui: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def _collect_once(settings: Settings) -> Snapshot | str:
    """One snapshot with fresh health checks, or the one-line error for a bad scenario."""
    from gputui.collect.standins.scenario import ScenarioError
    from gputui.wiring import build_collector

    try:
        collector = build_collector(settings, once=True)
    except ScenarioError as exc:
        return str(exc)
    try:
        collector.request_health()
        return collector.collect()
    finally:
        collector.close()


def _once(settings: Settings, as_json: bool) -> int:
    from gputui.derive.findings import FindingsEngine

    snapshot = _collect_once(settings)
    if isinstance(snapshot, str):
        return _fail(snapshot)
    findings = FindingsEngine().update(snapshot)
    return _print_snapshot(snapshot, findings, as_json)


def _print_snapshot(snapshot: Snapshot, findings: Sequence[Finding], as_json: bool) -> int:
    from gputui.report import snapshot_to_json, snapshot_to_text

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
    from gputui.model import HealthStatus
    from gputui.report import check_to_json, format_checks

    snapshot = _collect_once(Settings(demo=args.demo, scenario=args.scenario))
    if isinstance(snapshot, str):
        return _fail(snapshot)
    checks = snapshot.health
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
    if args_list[:1] and args_list[0] in _SUBCOMMANDS:
        return _SUBCOMMANDS[args_list[0]](args_list[1:])
    args = build_parser().parse_args(args_list)
    settings = _settings(args)
    if settings.demo and settings.scenario is not None:
        return _fail("--demo and --scenario cannot be combined")
    if args.at is not None and args.replay is None:
        return _fail("--at needs --replay FILE")
    from gputui.config import ConfigError, load_config

    try:
        load_config(args.config)  # an invalid file stops here, before any UI starts
    except ConfigError as exc:
        return _fail(str(exc))
    if args.replay is not None:
        if args.demo or args.scenario is not None:
            return _fail("--replay cannot be combined with --demo or --scenario")
        return _replay(
            args.replay, args.at, settings, once=args.once or args.json, as_json=args.json
        )
    if settings.scenario is not None and not args.demo:
        # Validate before anything starts, so a bad file is a one-line error, not a broken UI.
        from gputui.collect.standins.scenario import ScenarioError, load_scenario

        try:
            load_scenario(settings.scenario)
        except ScenarioError as exc:
            return _fail(str(exc))
    if args.once or args.json:
        return _once(settings, as_json=args.json)
    from gputui.ui.run import run_tui  # imported late: --once must never load Textual

    status: int = run_tui(settings)
    return status


# -- export / record / replay ------------------------------------------------------------------


def _source_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--demo", action="store_true", help="the built-in simulated machine")
    parser.add_argument("--scenario", metavar="FILE", type=Path, help="replace NVML with FILE")
    parser.add_argument(
        "--interval", metavar="SECONDS", type=_interval, default=1.0, help="refresh period"
    )


def _source_settings(args: argparse.Namespace) -> Settings | str:
    """Settings for a subcommand's collector, or the one-line error."""
    if args.demo and args.scenario is not None:
        return "--demo and --scenario cannot be combined"
    if args.scenario is not None:
        from gputui.collect.standins.scenario import ScenarioError, load_scenario

        try:
            load_scenario(args.scenario)
        except ScenarioError as exc:
            return str(exc)
    # Nothing recorded or exported may act on the machine.
    return Settings(interval=args.interval, read_only=True, demo=args.demo, scenario=args.scenario)


def _stop_on_signals() -> threading.Event:
    """An event set by SIGTERM or SIGINT, so loops end cleanly and close their sources."""
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    return stop


def _size(text: str) -> int:
    units = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}
    number, unit = text[:-1] if text[-1:].isalpha() else text, text[-1:].upper()
    unit = unit if text[-1:].isalpha() else ""
    if not number.isdigit() or unit not in units:
        raise argparse.ArgumentTypeError(
            f"expected bytes such as 1000000, 500K or 10M, got {text!r}"
        )
    return int(number) * units[unit]


def _count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)


def export(argv: Sequence[str]) -> int:
    """``gputui export``: serve Prometheus metrics (or print them once)."""
    parser = _Parser(prog="gputui export", description="Prometheus metrics of this GPU host.")
    parser.add_argument(
        "--listen", metavar="HOST:PORT", default="127.0.0.1:9400", help="default 127.0.0.1:9400"
    )
    parser.add_argument("--pid-labels", action="store_true", help="add a pid label (unbounded)")
    parser.add_argument("--once", action="store_true", help="print the metrics once and exit")
    _source_args(parser)
    _add_config(parser)
    args = parser.parse_args(argv)
    from gputui import export as exporter  # late: only `gputui export` loads prometheus_client
    from gputui.config import ConfigError, load_config

    try:
        host, port = exporter.parse_listen(args.listen)
        rules = load_config(args.config).alert_rules
    except (ValueError, ConfigError) as exc:
        return _fail(str(exc))
    settings = _source_settings(args)
    if isinstance(settings, str):
        return _fail(settings)
    from gputui.wiring import build_collector

    collector = build_collector(settings, once=args.once)
    if args.once:
        try:
            collector.request_health()
            snapshot = collector.collect()
        finally:
            collector.close()
        out = exporter.render_once(snapshot, pid_labels=args.pid_labels, rules=rules)
        sys.stdout.write(out.decode())
        return 0
    collector.request_health()
    try:
        exporter.serve(
            collector,
            host=host,
            port=port,
            interval=args.interval,
            pid_labels=args.pid_labels,
            rules=rules,
            stop=_stop_on_signals(),
        )
    except OSError as exc:
        collector.close()
        return _fail(f"cannot listen on {args.listen}: {exc.strerror or exc}")
    return 0


def record(argv: Sequence[str]) -> int:
    """``gputui record FILE``: append snapshots to FILE until --count or a signal."""
    parser = _Parser(prog="gputui record", description="Record snapshots to a file.")
    parser.add_argument("file", metavar="FILE", type=Path)
    parser.add_argument("--count", metavar="N", type=_count, help="stop after N snapshots")
    parser.add_argument(
        "--max-bytes", metavar="BYTES", type=_size, default=0, help="rotate at this size (10M)"
    )
    parser.add_argument(
        "--keep", metavar="N", type=int, default=3, help="rotated files kept (FILE.1..N)"
    )
    _source_args(parser)
    args = parser.parse_args(argv)
    settings = _source_settings(args)
    if isinstance(settings, str):
        return _fail(settings)
    if args.keep < 0:
        return _fail("--keep must not be negative")
    if not args.file.parent.is_dir():
        return _fail(f"cannot record to {args.file}: no directory {args.file.parent}")
    from gputui.replay import RecordWriter
    from gputui.replay import record as record_loop
    from gputui.wiring import build_collector

    writer = RecordWriter(args.file, max_bytes=args.max_bytes, keep=args.keep)
    collector = build_collector(settings, once=args.count == 1)
    stop = _stop_on_signals()
    try:
        collector.request_health()
        written = record_loop(
            collector, writer, interval=args.interval, count=args.count, stop=stop
        )
    except OSError as exc:
        return _fail(f"cannot record to {args.file}: {exc.strerror or exc}")
    finally:
        collector.close()
    print(f"gputui record: {written} snapshot(s) written to {args.file}", file=sys.stderr)
    return 0


def replay_command(argv: Sequence[str]) -> int:
    """``gputui replay FILE``: the TUI on a recording."""
    parser = _Parser(prog="gputui replay", description="Play a recording in the monitor.")
    parser.add_argument("file", metavar="FILE", type=Path)
    parser.add_argument("--at", metavar="TIME", help="start at TIME (ISO 8601, epoch, +OFFSET)")
    parser.add_argument(
        "--interval", metavar="SECONDS", type=_interval, default=1.0, help="one snapshot per"
    )
    parser.add_argument("--once", action="store_true", help="print the snapshot at --at and exit")
    parser.add_argument("--json", action="store_true", help="with --once: JSON")
    args = parser.parse_args(argv)
    settings = Settings(interval=args.interval, read_only=True)
    return _replay(args.file, args.at, settings, once=args.once or args.json, as_json=args.json)


def _replay(path: Path, at: str | None, settings: Settings, *, once: bool, as_json: bool) -> int:
    from gputui.replay import RecordingError, ReplayCollector, parse_time

    try:
        player = ReplayCollector.from_file(path)
        if at is not None:
            player.seek(parse_time(at, player.start))
        elif once:
            player.step(len(player))  # without --at, --once shows the latest snapshot
    except RecordingError as exc:
        return _fail(str(exc))
    if once:
        from gputui.derive.findings import FindingsEngine

        # Findings look at trends: feed them the recording up to the moment shown.
        engine = FindingsEngine()
        findings: Sequence[Finding] = ()
        for index in range(player.position + 1):
            findings = engine.update(player.snapshot_at(index))
        return _print_snapshot(player.current, findings, as_json)
    from gputui.ui.run import run_tui  # imported late: --once must never load Textual

    status: int = run_tui(replace(settings, read_only=True), collector=player)
    return status


_SUBCOMMANDS = {"export": export, "record": record, "replay": replay_command}
