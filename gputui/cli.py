"""Command line: ``gputui`` (TUI), ``--once`` / ``--json`` reports, ``gputui doctor``, ``free``.

Bad input gets one line on stderr and exit status 2, never a traceback. A missing NVIDIA driver
or Docker engine is not an error: the program runs and says what is missing.

Output that cannot be written is not a traceback either: when the reader of a pipe goes away
(``gputui --once | head -1``) gputui stops quietly with status 141 (128 + SIGPIPE, what a
shell reports for a program killed by SIGPIPE); any other write failure (``>/dev/full``, a
closed stdout) is one line on stderr and status 2. Text that the output encoding cannot
represent (an ASCII or Latin-1 locale) is replaced, never an error.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from gputui import __version__
from gputui.settings import MAX_INTERVAL_S, MIN_INTERVAL_S, Settings
from gputui.startup_trace import mark

if TYPE_CHECKING:
    from gputui.collect.collector import Collector
    from gputui.collect.linux.proc_reader import EarlyCpuSample
    from gputui.config import Config
    from gputui.derive.alerts import AlertRule
    from gputui.derive.analysis import Analysis
    from gputui.ledger.writer import LedgerWriter
    from gputui.ledger_command import CliKit
    from gputui.model import Snapshot
    from gputui.replay import ReplayCollector

EXIT_USAGE = 2
#: The status when stdout's reader went away (128 + SIGPIPE, as a shell shows a SIGPIPE death).
EXIT_BROKEN_PIPE = 141


class _OutputError(Exception):
    """Standard output cannot be written (full disk, closed descriptor); not a broken pipe."""


def _write(text: str) -> None:
    """Write to stdout, turning a failure other than a broken pipe into :class:`_OutputError`."""
    if sys.stdout is None:  # started with stdout closed (`gputui --once >&-`)
        raise _OutputError("standard output is closed")
    try:
        sys.stdout.write(text)
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise _OutputError(exc.strerror or str(exc)) from None


def _flush() -> None:
    if sys.stdout is None:
        return
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except (OSError, ValueError) as exc:  # ValueError: the stream was closed under us
        raise _OutputError(getattr(exc, "strerror", None) or str(exc)) from None


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null so the interpreter's final flush of what is left cannot fail.

    This is the recipe of the Python documentation (signal module, "Note on SIGPIPE").
    """
    if sys.stdout is None:
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _tolerant_output() -> None:
    """Never fail on encoding: an ASCII or Latin-1 locale gets ``?`` for ``°``, ``…``, ``≤``."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
            stream.reconfigure(errors="replace")


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (no usage dump) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {_shown(text)}") from None
    if not MIN_INTERVAL_S <= value <= MAX_INTERVAL_S:  # also rejects NaN and infinities
        raise argparse.ArgumentTypeError(
            f"must be at least {MIN_INTERVAL_S} and at most {MAX_INTERVAL_S:g} seconds, "
            f"got {_shown(text)}"
        )
    return value


def _shown(text: str) -> str:
    """A command-line value quoted for an error message, escaped and cut short."""
    shown = repr(text)
    return shown if len(shown) <= 60 else shown[:59] + "…"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for ``gputui`` (``doctor`` is handled before it)."""
    parser = _Parser(
        prog="gputui",
        description=(
            "Who is using my NVIDIA GPUs, in which Docker container, and is the GPU container "
            f"runtime healthy? Subcommands: {subcommand_list()}."
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
        default=None,
        help=(
            f"refresh period (default 1.0 or [ui] interval, {MIN_INTERVAL_S} to {MAX_INTERVAL_S:g})"
        ),
    )
    parser.add_argument(
        "--read-only",
        action="store_true",
        help="no exec or shell, no signals, no container stop/start/restart (logs stay)",
    )
    parser.add_argument(
        "--no-logs",
        action="store_true",
        help="no container logs (they can hold secrets)",
    )
    _add_config(parser)
    parser.add_argument(
        "--bell", action="store_true", help="ring the terminal bell when an alert starts firing"
    )
    _add_kernel_log(parser)
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


def _add_kernel_log(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kernel-log",
        metavar="PATH",
        default=None,
        help="read XID lines and OOM kills from PATH (default /dev/kmsg when live), or 'off'",
    )


def _add_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        metavar="FILE",
        type=Path,
        help=(
            "config file (default $XDG_CONFIG_HOME/gputui/config.toml): alert rules, "
            "[ui] preferences"
        ),
    )


def _settings(args: argparse.Namespace) -> Settings:
    scenario = args.scenario
    if scenario is None and os.environ.get("GPUTUI_SCENARIO"):
        scenario = Path(os.environ["GPUTUI_SCENARIO"])
    return Settings(
        interval=args.interval if args.interval is not None else 1.0,
        read_only=args.read_only,
        hide_sensitive=args.no_logs,
        demo=args.demo,
        scenario=scenario,
        config=args.config,
        bell=args.bell,
        kernel_log=getattr(args, "kernel_log", None),
    )


#: Why the monitor does not start without a terminal (it would write escape codes forever).
NOT_A_TERMINAL = (
    "the monitor needs a terminal (stdin and stdout); for a report use --once or --once --json"
)


def _on_terminal() -> bool:
    """Whether stdin and stdout are both terminals (the monitor reads keys and draws there)."""
    for stream in (sys.stdin, sys.stdout):
        try:
            if stream is None or not stream.isatty():
                return False
        except (OSError, ValueError):  # a closed stream
            return False
    return True


def _fail(message: str) -> int:
    from gputui.derive.fmt import safe_text

    # Messages quote file content and paths: one line, no terminal escapes, bounded.
    print(f"gputui: error: {safe_text(message, 1000)}", file=sys.stderr)
    return EXIT_USAGE


def _early_cpu_sample() -> EarlyCpuSample | None:
    """The one-shot's first CPU sample (None where ``/proc`` cannot be read)."""
    from gputui.collect.linux.proc_reader import early_cpu_sample

    try:
        return early_cpu_sample()
    except OSError:
        return None  # the collection takes its own sample, and says what it cannot read


def _collect_once(settings: Settings, early: EarlyCpuSample | None = None) -> Snapshot | str:
    """One snapshot with fresh health checks, or the one-line error for a bad scenario."""
    from gputui.collect.standins.scenario import ScenarioError
    from gputui.wiring import build_collector

    try:
        collector = build_collector(settings, once=True, early=early)
    except ScenarioError as exc:
        return str(exc)
    try:
        collector.request_health()
        snapshot = collector.collect()
        mark("collected")
        return snapshot
    finally:
        collector.close()


def _once(
    settings: Settings,
    rules: Sequence[AlertRule],
    as_json: bool,
    early: EarlyCpuSample | None = None,
) -> int:
    from gputui.derive.analysis import Analyzer

    snapshot = _collect_once(settings, early)
    if isinstance(snapshot, str):
        return _fail(snapshot)
    # The TUI's Analyzer on its first refresh: the same findings and alert states (an alert
    # whose rule has a `for` duration is pending, as it would be there).
    return _print_snapshot(Analyzer(rules).analyse(snapshot), as_json)


def _print_snapshot(analysis: Analysis, as_json: bool) -> int:
    from gputui.report import snapshot_to_json, snapshot_to_text

    snapshot, findings, alerts = analysis.snapshot, analysis.findings, analysis.alerts
    if as_json:
        # ensure_ascii: control characters, bidi overrides and lone surrogates all become \u
        # escapes, so the document is inert on a terminal and exact for a parser.
        doc = snapshot_to_json(snapshot, findings, alerts, analysis.totals)
        _write(json.dumps(doc, indent=2, ensure_ascii=True))
        _write("\n")
    else:
        _write(snapshot_to_text(snapshot, findings, alerts, analysis.totals))
    mark("report-written")
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
        doc = {"health": [check_to_json(c) for c in checks]}
        _write(json.dumps(doc, indent=2, ensure_ascii=True) + "\n")
    else:
        for line in format_checks(checks, set(HealthStatus)):  # sanitised there
            _write(line + "\n")
        counts = {s: sum(1 for c in checks if c.status is s) for s in HealthStatus}
        _write(", ".join(f"{n} {s.value}" for s, n in counts.items()) + "\n")
    return 1 if any(c.status is HealthStatus.FAIL for c in checks) else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gputui`` command.

    Returns:
        The exit status: 0, 1 (``doctor`` found failures), 2 (bad input, unwritable output),
        141 (stdout's reader went away), or the TUI's.
    """
    _tolerant_output()
    try:
        status = _main(argv)
        _flush()
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except _OutputError as exc:
        _silence_stdout()
        return _fail(f"cannot write output: {exc}")
    return status


def _main(argv: Sequence[str] | None) -> int:
    mark("cli")  # the interpreter has started and gputui.cli is imported
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
    # A one-shot of this machine measures CPU % from here: the window passes while the rest of
    # the program loads and NVML starts, instead of being waited for at the end.
    one_shot = (args.once or args.json) and args.replay is None and not settings.demo
    early = _early_cpu_sample() if one_shot else None
    from gputui.config import ConfigError, load_config

    try:
        config = load_config(args.config)  # an invalid file stops here, before any UI starts
    except ConfigError as exc:
        return _fail(str(exc))
    if args.interval is None and config.ui.interval is not None:
        settings = replace(settings, interval=config.ui.interval)
    if args.replay is not None:
        if args.demo or args.scenario is not None:
            return _fail("--replay cannot be combined with --demo or --scenario")
        return _replay(
            args.replay,
            args.at,
            settings,
            config.alert_rules,
            once=args.once or args.json,
            as_json=args.json,
        )
    if settings.scenario is not None and not args.demo:
        # Validate before anything starts, so a bad file is a one-line error, not a broken UI.
        from gputui.collect.standins.scenario import ScenarioError, load_scenario

        try:
            load_scenario(settings.scenario)
        except ScenarioError as exc:
            return _fail(str(exc))
    if args.once or args.json:
        return _once(settings, config.alert_rules, as_json=args.json, early=early)
    # after every input check: a bad file is named first. A monitor `gputui serve` started for
    # a browser tab has pipes, and Textual's web driver draws for the browser through them
    # (gputui.serve is only imported to ask that, when there is no terminal).
    if not _on_terminal():
        from gputui.serve import served_in_browser

        if not served_in_browser():
            return _fail(NOT_A_TERMINAL)
    from gputui.ui.run import run_tui  # imported late: --once must never load Textual

    # run_tui returns the exit status (non-zero after a crash); None means a clean exit.
    status: int | None = run_tui(settings)
    return status or 0


# -- export / record / replay ------------------------------------------------------------------


def _source_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--demo", action="store_true", help="the built-in simulated machine")
    parser.add_argument("--scenario", metavar="FILE", type=Path, help="replace NVML with FILE")
    parser.add_argument(
        "--interval", metavar="SECONDS", type=_interval, default=1.0, help="refresh period"
    )
    _add_kernel_log(parser)


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
    return Settings(
        interval=args.interval,
        read_only=True,
        demo=args.demo,
        scenario=args.scenario,
        kernel_log=getattr(args, "kernel_log", None),
    )


def _stop_on_signals() -> threading.Event:
    """An event set by SIGTERM or SIGINT, so loops end cleanly and close their sources.

    A second signal while the first is being honoured (a collect stuck on a hung source)
    takes the default action: the process ends at once.
    """
    stop = threading.Event()

    def handler(signum: int, _frame: object) -> None:
        if stop.is_set():
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, handler)
    return stop


_SIZE = re.compile(r"([0-9]{1,15})([KMG]?)", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}
#: Rotation sizes beyond this are no rotation anyone means (use 0 for none).
MAX_RECORD_SIZE = 1024**4


def _size(text: str) -> int:
    match = _SIZE.fullmatch(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(
            f"expected bytes such as 1000000, 500K or 10M, got {_shown(text)}"
        )
    value = int(match.group(1)) * _SIZE_UNITS[match.group(2).upper()]
    if value > MAX_RECORD_SIZE:
        raise argparse.ArgumentTypeError(f"at most 1T, got {_shown(text)}")
    return value


def _count(text: str) -> int:
    # [0-9] and a length bound: str.isdigit() accepts "²", and int() refuses 4,300+ digits.
    if not re.fullmatch(r"[0-9]{1,12}", text) or int(text) < 1:
        raise argparse.ArgumentTypeError(
            f"expected a positive integer below 10**12, got {_shown(text)}"
        )
    return int(text)


def _keep(text: str) -> int:
    from gputui.replay import MAX_KEEP

    if not re.fullmatch(r"[0-9]{1,4}", text) or int(text) > MAX_KEEP:
        raise argparse.ArgumentTypeError(
            f"expected an integer from 0 to {MAX_KEEP}, got {_shown(text)}"
        )
    return int(text)


def export(argv: Sequence[str]) -> int:
    """``gputui export``: serve Prometheus metrics (or print them once)."""
    parser = _Parser(prog="gputui export", description="Prometheus metrics of this GPU host.")
    parser.add_argument(
        "--listen", metavar="HOST:PORT", default="127.0.0.1:9400", help="default 127.0.0.1:9400"
    )
    parser.add_argument("--pid-labels", action="store_true", help="add a pid label (unbounded)")
    parser.add_argument(
        "--user-series",
        action="store_true",
        help="per-user GPU memory, processes and SM (a user label, one series per user)",
    )
    parser.add_argument("--once", action="store_true", help="print the metrics once and exit")
    _store_arg(parser)
    _source_args(parser)
    _add_config(parser)
    args = parser.parse_args(argv)
    from gputui import export as exporter  # late: only `gputui export` loads prometheus_client
    from gputui.config import ConfigError, load_config

    try:
        host, port = exporter.parse_listen(args.listen)
        config = load_config(args.config)
    except (ValueError, ConfigError) as exc:
        return _fail(str(exc))
    rules = config.alert_rules
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
        out = exporter.render_once(
            snapshot, pid_labels=args.pid_labels, rules=rules, user_series=args.user_series
        )
        _write(out.decode())
        return 0
    collector.request_health()
    # [[notify]]: alerts and findings delivered from the exporter's analysis, on threads of
    # their own (a receiver never delays a scrape or a refresh).
    import socket  # late: a one-shot never loads it (tests/test_proc_fastpath.py)

    from gputui.notify.policy import start_policy
    from gputui.notify.worker import start_notifier

    hostname = socket.gethostname()
    notifier = start_notifier(config.notify, hostname, log=_log_line)
    # [idle_policy]: notices audited and delivered; the exporter is read-only, so an automatic
    # stop is audited as refused.
    policy = start_policy(
        config.idle_policy,
        hostname,
        notifier=notifier,
        collector=collector,
        read_only=True,
        log=_log_line,
    )
    sinks = [s.observe for s in (notifier, policy) if s is not None]

    writer = _ledger_writer("export", settings, args.store, config)
    try:
        exporter.serve(
            collector,
            host=host,
            port=port,
            interval=args.interval,
            pid_labels=args.pid_labels,
            rules=rules,
            stop=_stop_on_signals(),
            user_series=args.user_series,
            sinks=sinks,
            observe=None if writer is None else _announcing(writer, "export"),
        )
    except OSError as exc:
        collector.close()
        return _fail(f"cannot listen on {args.listen}: {exc.strerror or exc}")
    finally:
        if notifier is not None:
            notifier.close()
        if writer is not None:
            writer.close()
    return 0


def _log_line(line: str) -> None:
    """One line on stderr (a delivery's problem: already redacted and sanitised)."""
    print(f"gputui: {line}", file=sys.stderr, flush=True)


def record(argv: Sequence[str]) -> int:
    """``gputui record FILE``: append snapshots to FILE until --count or a signal."""
    from gputui.replay import DEFAULT_MAX_BYTES, MAX_KEEP

    parser = _Parser(prog="gputui record", description="Record snapshots to a file.")
    parser.add_argument("file", metavar="FILE", type=Path)
    parser.add_argument("--count", metavar="N", type=_count, help="stop after N snapshots")
    parser.add_argument(
        "--max-size",
        "--max-bytes",
        dest="max_size",
        metavar="SIZE",
        type=_size,
        default=DEFAULT_MAX_BYTES,
        help=f"rotate to FILE.1 at this size (default {DEFAULT_MAX_BYTES // 1024**2}M; 0: never)",
    )
    parser.add_argument(
        "--keep",
        metavar="N",
        type=_keep,
        default=3,
        help=f"rotated files kept (FILE.1..N, default 3, at most {MAX_KEEP})",
    )
    _store_arg(parser)
    _source_args(parser)
    _add_config(parser)
    args = parser.parse_args(argv)
    settings = _source_settings(args)
    if isinstance(settings, str):
        return _fail(settings)
    from gputui.config import ConfigError, load_config

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        return _fail(str(exc))
    if not args.file.parent.is_dir():
        return _fail(f"cannot record to {args.file}: no directory {args.file.parent}")
    from gputui.replay import RecordingError, RecordWriter
    from gputui.replay import record as record_loop
    from gputui.wiring import build_collector

    writer = RecordWriter(args.file, max_bytes=args.max_size, keep=args.keep)
    try:
        # Before anything is collected: a second recorder or a FIFO is refused at once.
        writer.open()
    except RecordingError as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot record to {args.file}: {exc.strerror or exc}")
    stop = _stop_on_signals()
    ledger = None if args.count == 1 else _ledger_writer("record", settings, args.store, config)
    try:
        collector = build_collector(settings, once=args.count == 1)
        try:
            collector.request_health()
            written = record_loop(
                collector,
                writer,
                interval=args.interval,
                count=args.count,
                stop=stop,
                observe=None if ledger is None else _announcing(ledger, "record"),
            )
        finally:
            collector.close()
            if ledger is not None:
                ledger.close()
    except RecordingError as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot record to {args.file}: {exc.strerror or exc}")
    finally:
        writer.close()
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
    _add_config(parser)
    args = parser.parse_args(argv)
    from gputui.config import ConfigError, load_config

    try:
        rules = load_config(args.config).alert_rules
    except ConfigError as exc:
        return _fail(str(exc))
    settings = Settings(interval=args.interval, read_only=True, config=args.config)
    return _replay(
        args.file, args.at, settings, rules, once=args.once or args.json, as_json=args.json
    )


#: With --once, how many snapshots before the one shown feed the analysis (trend detectors
#: look back ten minutes; at most this many are decoded, so a huge recording stays fast).
_FINDINGS_LOOKBACK_S = 900.0
_FINDINGS_MAX_SNAPSHOTS = 1000


def _lookback_s(rules: Sequence[AlertRule]) -> float:
    """How far back the analysis must start to reach the state at the snapshot shown."""
    spans = (r.for_s + (r.window_s if r.kind == "dynamic" else 0.0) for r in rules)
    return max([_FINDINGS_LOOKBACK_S, *spans])


def _replay(
    path: Path,
    at: str | None,
    settings: Settings,
    rules: Sequence[AlertRule],
    *,
    once: bool,
    as_json: bool,
) -> int:
    from gputui.replay import RecordingError, ReplayCollector, parse_time

    try:
        player = ReplayCollector.from_file(path)
    except RecordingError as exc:
        return _fail(str(exc))
    try:
        if at is not None:
            player.seek(parse_time(at, player.start))
        elif once:
            player.step(len(player))  # without --at, --once shows the latest snapshot
        if player.skipped:
            print(
                f"gputui: warning: {player.skipped} unreadable line(s) of {path} skipped",
                file=sys.stderr,
            )
        if once:
            return _replay_once(player, rules, as_json)
    except RecordingError as exc:
        player.close()
        return _fail(str(exc))
    if not _on_terminal():
        player.close()
        return _fail(NOT_A_TERMINAL)
    from gputui.ui.run import run_tui  # imported late: --once must never load Textual

    tui_status: int | None = run_tui(replace(settings, read_only=True), collector=player)
    return tui_status or 0


def _replay_once(player: ReplayCollector, rules: Sequence[AlertRule], as_json: bool) -> int:
    from gputui.derive.analysis import Analyzer

    try:
        # A recording holds snapshots; their analysis is reproduced here by the TUI's Analyzer,
        # fed the recording shortly before the moment shown (trends, `for` durations).
        position = player.position
        shown = player.current
        lookback = _lookback_s(rules)
        first = position
        while (
            first > 0
            and position - first < _FINDINGS_MAX_SNAPSHOTS
            and player.time_at(first - 1) >= shown.taken_at - lookback
        ):
            first -= 1
        analyzer = Analyzer(rules, totals=False)  # user totals for the snapshot shown only
        for index in range(first, position):
            analyzer.analyse(player.snapshot_at(index))
        analyzer.totals = True
        return _print_snapshot(analyzer.analyse(shown), as_json)
    finally:
        player.close()


# -- fleet --------------------------------------------------------------------------------------


def _seconds_in(text: str, low: float, high: float) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {_shown(text)}") from None
    if not low <= value <= high:  # also NaN and infinities
        raise argparse.ArgumentTypeError(
            f"must be at least {low:g} and at most {high:g} seconds, got {_shown(text)}"
        )
    return value


def _fleet_interval(text: str) -> float:
    return _seconds_in(text, 1.0, 3600.0)


def _fleet_timeout(text: str) -> float:
    return _seconds_in(text, 0.1, 120.0)


def fleet(argv: Sequence[str]) -> int:
    """``gputui fleet``: the GPU hosts a Prometheus scrapes, one row each."""
    from gputui.fleet.model import SORT_NAMES

    parser = _Parser(
        prog="gputui fleet",
        description=(
            "GPU hosts seen by a Prometheus (or Thanos, Mimir, VictoriaMetrics) scraping gputui "
            "export or dcgm-exporter. Credentials: GPUTUI_PROMETHEUS_TOKEN, or "
            "GPUTUI_PROMETHEUS_USER and GPUTUI_PROMETHEUS_PASSWORD, or [fleet] in the config."
        ),
    )
    parser.add_argument("--prometheus", metavar="URL", help="the query API's base URL")
    parser.add_argument(
        "--match",
        metavar="SELECTOR",
        action="append",
        default=[],
        help="label matchers scoping the fleet, e.g. 'cluster=\"a\"' (repeatable: all apply)",
    )
    parser.add_argument("--once", action="store_true", help="print the host table and exit")
    parser.add_argument("--json", action="store_true", help="print it as JSON and exit")
    parser.add_argument(
        "--host", metavar="NAME", help="with --once/--json: one host's GPUs and containers"
    )
    parser.add_argument("--sort", choices=SORT_NAMES, default="host", help="host table order")
    parser.add_argument(
        "--interval", metavar="SECONDS", type=_fleet_interval, default=5.0, help="default 5"
    )
    parser.add_argument(
        "--timeout", metavar="SECONDS", type=_fleet_timeout, default=10.0, help="per query"
    )
    parser.add_argument("--answers", metavar="FILE", type=Path, help="recorded answers instead")
    parser.add_argument(
        "--save-answers", metavar="FILE", type=Path, help="with --once: keep the answers in FILE"
    )
    _add_config(parser)
    args = parser.parse_args(argv)
    from gputui.config import ConfigError, load_config
    from gputui.fleet.client import FleetError
    from gputui.fleet.command import FleetOptions, open_source, print_once
    from gputui.fleet.source import AnswersFileError

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        return _fail(str(exc))
    options = FleetOptions(
        url=args.prometheus or config.fleet.prometheus,
        match=tuple(args.match),
        answers=args.answers,
        save_answers=args.save_answers,
        timeout=args.timeout,
        sort=args.sort,
        host=args.host,
    )
    if args.save_answers is not None and not (args.once or args.json):
        return _fail("--save-answers needs --once or --json")
    if args.host is not None and not (args.once or args.json):
        return _fail("--host needs --once or --json (in the screen, press Enter on a host)")
    try:
        source = open_source(options, os.environ, config.fleet)
    except FleetError as exc:
        return _fail(str(exc))
    if args.once or args.json:
        try:
            text = print_once(source, options, as_json=args.json)
        except AnswersFileError as exc:  # --save-answers names a file that cannot be written
            return _fail(str(exc))
        except FleetError as exc:
            from gputui.derive.fmt import safe_text

            print(f"gputui: error: {safe_text(str(exc), 1000)}", file=sys.stderr)
            return 1
        _write(text)
        return 0
    if not _on_terminal():
        return _fail(
            "the fleet view needs a terminal (stdin and stdout); for a report use --once or --json"
        )
    from gputui.ui.fleet_app import run_fleet

    secrets = (config.fleet.token, config.fleet.password)
    return run_fleet(source, options, interval=args.interval, secrets=secrets)


# -- free ---------------------------------------------------------------------------------------

_MEMORY = re.compile(r"([0-9]{1,15}(?:\.[0-9]{1,6})?)\s*([KMGT]?)(?:I?B)?", re.IGNORECASE)
_MEMORY_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
#: No GPU has more memory than this; a larger --min-free-memory is a typo.
MAX_GPU_MEMORY = 1024**5


def _memory(text: str) -> int:
    match = _MEMORY.fullmatch(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(
            f"expected a size such as 40G, 40GiB, 500M or bytes, got {_shown(text)}"
        )
    value = int(float(match.group(1)) * _MEMORY_UNITS[match.group(2).upper()])
    if value > MAX_GPU_MEMORY:
        raise argparse.ArgumentTypeError(f"at most 1PiB, got {_shown(text)}")
    return value


def _percent(text: str) -> int:
    if not re.fullmatch(r"[0-9]{1,3}", text) or int(text) > 100:
        raise argparse.ArgumentTypeError(f"expected a percentage from 0 to 100, got {_shown(text)}")
    return int(text)


#: A Docker read this slow may have stopped at its deadline with containers left uninspected
#: (their GPU requests unknown); ``free`` then reads again, which inspects the rest.
_SETTLE_S = 4.0
_SETTLE_READS = 3
#: The caveat when every read was that slow.
FREE_UNSETTLED = (
    "the Docker engine answered slowly: some containers may not have been read, so their GPU "
    "reservations may be missing"
)


def _collect_settled(collector: Collector) -> tuple[Snapshot, bool]:
    """One snapshot, read again (at most :data:`_SETTLE_READS` in all) while reads are slow.

    Returns:
        The last snapshot and whether its read finished well inside the Docker deadline.
    """
    for _ in range(_SETTLE_READS):
        started = time.monotonic()
        snapshot = collector.collect()
        if time.monotonic() - started < _SETTLE_S:
            return snapshot, True
    return snapshot, False


def free_command(argv: Sequence[str]) -> int:
    """``gputui free``: the GPUs a new job can use now, for ``CUDA_VISIBLE_DEVICES``.

    Prints the qualifying GPUs' indexes, best first, comma-separated (``0,3``) and nothing else
    on stdout; ``--explain`` (or too few GPUs) says on stderr why each other GPU was left out.

    Returns:
        0, 1 when fewer GPUs than ``-n`` (or none at all) qualify, 2 for bad input.
    """
    parser = _Parser(
        prog="gputui free",
        description=(
            "The GPUs a new job can use now: not reserved by a container, not held by any "
            "process (also PIDs nobody can see). Prints e.g. 0,3 for CUDA_VISIBLE_DEVICES; "
            "exit status 1 when fewer than -n GPUs qualify."
        ),
    )
    parser.add_argument(
        "-n", metavar="N", type=_count, default=None, help="exactly N GPUs, the best ones"
    )
    parser.add_argument(
        "--min-free-memory",
        metavar="SIZE",
        type=_memory,
        default=0,
        help="only GPUs with at least SIZE free (40G, 40GiB, 500M, bytes)",
    )
    parser.add_argument(
        "--max-util",
        metavar="PCT",
        type=_percent,
        default=None,
        help="only GPUs at most PCT%% busy",
    )
    parser.add_argument("--json", action="store_true", help="the verdict on every GPU as JSON")
    parser.add_argument(
        "--explain", action="store_true", help="say on stderr why each other GPU was left out"
    )
    parser.add_argument(
        "--uuid",
        action="store_true",
        help="print GPU UUIDs instead of indexes (the same GPUs whatever CUDA_DEVICE_ORDER says)",
    )
    parser.add_argument("--demo", action="store_true", help="the built-in simulated machine")
    parser.add_argument("--scenario", metavar="FILE", type=Path, help="replace NVML with FILE")
    args = parser.parse_args(argv)
    if args.demo and args.scenario is not None:
        return _fail("--demo and --scenario cannot be combined")
    from gputui.collect.standins.scenario import ScenarioError
    from gputui.derive.analysis import Analyzer
    from gputui.derive.free import FreeRules, device_list, free_gpus
    from gputui.wiring import build_collector

    try:
        collector = build_collector(
            Settings(demo=args.demo, scenario=args.scenario, read_only=True),
            once=True,
            health=False,
        )
    except ScenarioError as exc:
        return _fail(str(exc))
    try:
        snapshot, settled = _collect_settled(collector)
    finally:
        collector.close()
    findings = Analyzer((), totals=False).analyse(snapshot).findings
    answer = free_gpus(snapshot, FreeRules(args.min_free_memory, args.max_util), findings)
    if not settled:
        answer = replace(answer, caveats=(*answer.caveats, FREE_UNSETTLED))
    usable = answer.usable
    wanted = args.n if args.n is not None else max(1, len(usable))
    enough = len(usable) >= wanted
    chosen = usable[:wanted] if enough else ()
    # Only values safe in a comma list: a UUID NVML mangled is printed as its index, said below.
    devices, device_notes = device_list(chosen, answer.gpus, args.uuid)
    if args.json:
        from gputui.report import free_to_json

        doc = free_to_json(snapshot, answer, chosen, asked=args.n, enough=enough, devices=devices)
        doc["asked"].update(min_free_memory_bytes=args.min_free_memory, max_util=args.max_util)
        _write(json.dumps(doc, indent=2, ensure_ascii=True) + "\n")
    elif devices:
        _write(devices + "\n")
    from gputui.report import free_explanation

    for caveat in (*answer.caveats, *device_notes):
        print(f"gputui free: warning: {caveat}", file=sys.stderr)
    if args.explain or not enough:
        for line in free_explanation(answer, wanted, enough):
            print(line, file=sys.stderr)
    return 0 if enough else 1


def _port(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port 1-65535, got {_shown(text)}")
    return int(text)


def _listen_host(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9.:-]{1,253}", text):
        raise argparse.ArgumentTypeError(f"expected an address or host name, got {_shown(text)}")
    return text


def serve_command(argv: Sequence[str]) -> int:
    """``gputui serve``: the monitor in a web browser (textual-serve), read-only by default."""
    from gputui import serve

    parser = _Parser(
        prog="gputui serve",
        description=(
            "The monitor in a web browser, one gputui per tab (textual-serve). Read-only unless "
            "--allow-actions; from another machine, reach it through an SSH tunnel (ssh -L)."
        ),
    )
    parser.add_argument(
        "--host",
        type=_listen_host,
        default=serve.DEFAULT_HOST,
        help=f"address to listen on (default {serve.DEFAULT_HOST}: this machine only)",
    )
    parser.add_argument(
        "--port",
        type=_port,
        default=serve.DEFAULT_PORT,
        help=f"port to listen on (default {serve.DEFAULT_PORT})",
    )
    parser.add_argument(
        "--allow-actions",
        action="store_true",
        help="let browser tabs signal processes, run nvidia-smi in containers and show logs",
    )
    parser.add_argument(
        "--allow-logs",
        action="store_true",
        help="let read-only browser tabs show container logs (they can hold secrets)",
    )
    parser.add_argument("--demo", action="store_true", help="the built-in simulated machine")
    parser.add_argument("--scenario", metavar="FILE", type=Path, help="replace NVML with FILE")
    parser.add_argument(
        "--interval", metavar="SECONDS", type=_interval, default=None, help="refresh period"
    )
    _add_config(parser)
    args = parser.parse_args(argv)
    if args.demo and args.scenario is not None:
        return _fail("--demo and --scenario cannot be combined")
    from gputui.collect.standins.scenario import ScenarioError, load_scenario
    from gputui.config import ConfigError, load_config

    try:
        load_config(args.config)  # each tab's monitor reads it: a bad file stops here, once
        if args.scenario is not None:
            load_scenario(args.scenario)
    except (ConfigError, ScenarioError) as exc:
        return _fail(str(exc))
    options = serve.ServeOptions(
        host=args.host,
        port=args.port,
        allow_actions=args.allow_actions,
        allow_logs=args.allow_logs,
        demo=args.demo,
        scenario=args.scenario,
        interval=args.interval,
        config=args.config,
    )
    try:
        serve.run(options, lambda line: print(line, file=sys.stderr, flush=True))
    except serve.ServeUnavailable as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}")
    return 0


def reclaim_command(argv: Sequence[str]) -> int:
    """``gputui reclaim``: idle reservations due for reclaim; stop one by typing its name."""
    from gputui.reclaim import main

    return main(argv)


def _store_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        metavar="PATH",
        type=Path,
        help="write the GPU ledger here (default [ledger] store, else $XDG_STATE_HOME/gputui/)",
    )


def _ledger_writer(
    program: str, settings: Settings, store: Path | None, config: Config
) -> LedgerWriter | None:
    """The ledger writer of a long-running command (None: this run writes no ledger)."""
    from gputui.ledger.writer import writer_for

    return writer_for(
        program,
        mode=settings.mode,
        interval_s=settings.interval,
        store=store or config.ledger.store,
        explicit=store is not None,
        write=config.ledger.write,
        idle_power_w=config.ledger.idle_power_w,
    )


def _announcing(writer: LedgerWriter, program: str) -> Callable[[Snapshot, object], None]:
    from gputui.derive.fmt import safe_text
    from gputui.ledger.writer import announcing

    return announcing(
        writer,
        lambda status: print(f"gputui {program}: {safe_text(status, 500)}", file=sys.stderr),
    )


def _ledger_kit() -> CliKit:
    from gputui.ledger_command import CliKit

    return CliKit(_Parser, _fail, _source_args, _source_settings, _add_config, _stop_on_signals)


def ledger_entry(argv: Sequence[str]) -> int:
    """``gputui ledger``: see :mod:`gputui.ledger_command`."""
    from gputui.ledger_command import ledger

    return ledger(argv, _ledger_kit())


def daemon_entry(argv: Sequence[str]) -> int:
    """``gputui daemon``: see :mod:`gputui.ledger_command`."""
    from gputui.ledger_command import daemon

    return daemon(argv, _ledger_kit())


def faults_command(argv: Sequence[str]) -> int:
    """``gputui faults``: XID errors and OOM kills from the kernel log, attributed.

    Returns:
        0, 1 when the kernel log cannot be read, 2 for bad input.
    """
    parser = _Parser(
        prog="gputui faults",
        description=(
            "XID errors and OOM kills the kernel log still holds, each with its GPU, process, "
            "container, class and fix."
        ),
    )
    parser.add_argument(
        "--since", metavar="SPAN", default="7d", help="how far back: 90s, 30m, 12h, 7d (7d)"
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    _add_kernel_log(parser)
    args = parser.parse_args(argv)
    from gputui.faults_command import faults_main

    return faults_main(args.since, as_json=args.json, kernel_log=args.kernel_log)


_SUBCOMMANDS = {
    "serve": serve_command,
    "reclaim": reclaim_command,
    "export": export,
    "record": record,
    "replay": replay_command,
    "free": free_command,
    "fleet": fleet,
    "ledger": ledger_entry,
    "daemon": daemon_entry,
    "faults": faults_command,
}

#: What each subcommand is for, in ``gputui --help``'s order: (usage, summary). ``doctor``
#: is dispatched before the others; every other name is a key of ``_SUBCOMMANDS``, and a
#: subcommand missing here is missing from --help (tests/test_cli_help.py checks both ways).
SUBCOMMAND_SUMMARIES: dict[str, tuple[str, str]] = {
    "doctor": ("doctor", "runtime-health checks"),
    "export": ("export", "Prometheus metrics"),
    "record": ("record FILE", "record snapshots"),
    "replay": ("replay FILE", "play a recording back"),
    "free": ("free", "the GPUs a new job can use now"),
    "serve": ("serve", "the monitor in a web browser"),
    "fleet": ("fleet", "the GPU hosts a Prometheus scrapes, one row each"),
    "ledger": ("ledger", "GPU-hours, energy and cost per container, project or GPU"),
    "daemon": ("daemon", "collect and keep the ledger, nothing else"),
    "faults": ("faults", "XID errors and OOM kills from the kernel log, attributed"),
    "reclaim": ("reclaim", "idle GPU reservations the idle policy found; stop one"),
}


def subcommand_list() -> str:
    """``doctor (runtime-health checks), export (Prometheus metrics), …`` for ``--help``."""
    return ", ".join(f"{usage} ({summary})" for usage, summary in SUBCOMMAND_SUMMARIES.values())
