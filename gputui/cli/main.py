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
import contextlib
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from gputui import __version__
from gputui.boundary.startup_trace import mark
from gputui.model.records import record
from gputui.model.settings import MAX_INTERVAL_S, MIN_INTERVAL_S

if TYPE_CHECKING:
    from gputui.collect.nvml.early import EarlyNvml
    from gputui.model.settings import Settings
from gputui.cli.args import (
    Parser,
    add_config,
    add_engine,
    add_kernel_log,
    add_view_scope,
    interval_arg,
    run_settings,
    scope_error,
)
from gputui.cli.once import run_once, sample_cpu_early
from gputui.cli.terminal import (
    EXIT_BROKEN_PIPE,
    NOT_A_TERMINAL,
    _OutputError,
    _silence_stdout,
    _tolerant_output,
    fail_usage,
    flush_out,
    on_terminal,
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for ``gputui`` (``doctor`` is handled before it)."""
    parser = Parser(
        prog="gputui",
        description=(
            "Who is using my NVIDIA GPUs, in which Docker container, and is the GPU container "
            f"runtime healthy? Subcommands: {subcommand_list()}."
        ),
    )
    parser.add_argument("--once", "-1", action="store_true", help="print one snapshot and exit")
    parser.add_argument("--json", action="store_true", help="with --once: JSON (implies --once)")
    parser.add_argument("--demo", action="store_true", help="run on a built-in simulated machine")
    parser.add_argument(
        "--scenario",
        metavar="FILE",
        type=Path,
        help="replace NVML with a scenario file (env GPUTUI_SCENARIO); Docker and /proc stay real",
    )
    add_view_scope(parser)
    parser.add_argument(
        "--interval",
        metavar="SECONDS",
        type=interval_arg,
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
    add_config(parser)
    add_engine(parser)
    parser.add_argument(
        "--bell", action="store_true", help="ring the terminal bell when an alert starts firing"
    )
    add_kernel_log(parser)
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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gputui`` command.

    Returns:
        The exit status: 0, 1 (``doctor`` found failures), 2 (bad input, unwritable output),
        141 (stdout's reader went away), or the TUI's.
    """
    _tolerant_output()
    try:
        status = _main(argv)
        flush_out()
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except _OutputError as exc:
        _silence_stdout()
        return fail_usage(f"cannot write output: {exc}")
    return status


#: Set once a one-shot report has run: :func:`entry` may end the process at once.
_ONE_SHOT: list[bool] = []


def entry() -> NoReturn:
    """The ``gputui`` console command (and ``python -m gputui``): :func:`main`, then exit.

    After a one-shot report (``--once``, ``--json``), whose collector is closed (NVML shut
    down, the engines' connections closed) and whose output :func:`main` has flushed, the
    process ends at once: tearing the interpreter's modules down costs a one-shot 30-50 ms
    and does nothing the end of the process does not. Everything else exits normally.
    """
    status = main()
    if _ONE_SHOT:
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()
        os._exit(status)
    sys.exit(status)


def _main(argv: Sequence[str] | None) -> int:
    mark("cli")  # the interpreter has started and gputui.cli is imported
    args_list = list(sys.argv[1:] if argv is None else argv)
    subcommand = _BY_NAME.get(args_list[0]) if args_list else None
    if subcommand is not None:
        return subcommand.run(args_list[1:])
    args = build_parser().parse_args(args_list)
    settings = run_settings(args)
    if settings.demo and settings.scenario is not None:
        return fail_usage("--demo and --scenario cannot be combined")
    if args.at is not None and args.replay is None:
        return fail_usage("--at needs --replay FILE")
    # NVML's start (and a one-shot's first GPM samples, whose 100 ms pair a one-shot waits
    # out) overlaps everything that follows: first, so that nothing here delays it.
    gpu = _start_nvml(args, settings, once=args.once or args.json)
    # A one-shot of this machine measures CPU % from here: the window passes while the rest of
    # the program loads, instead of being waited for at the end.
    one_shot = (args.once or args.json) and args.replay is None and not settings.demo
    early = sample_cpu_early() if one_shot else None
    from gputui.config.file import load_config
    from gputui.config.values import ConfigError

    try:
        config = load_config(args.config)  # an invalid file stops here, before any UI starts
    except ConfigError as exc:
        return fail_usage(str(exc))
    mark("config-loaded")
    settings = config.applied(settings)
    if args.interval is None and config.ui.interval is not None:
        settings = replace(settings, interval=config.ui.interval)
    if args.replay is not None:
        if args.demo or args.scenario is not None:
            return fail_usage("--replay cannot be combined with --demo or --scenario")
        from gputui.cli.replay import run_replay

        return run_replay(
            args.replay,
            args.at,
            settings,
            config,
            once=args.once or args.json,
            as_json=args.json,
        )
    if settings.scenario is not None and not args.demo:
        # Validate before anything starts, so a bad file is a one-line error, not a broken UI.
        from gputui.collect.standins.scenario import ScenarioError, load_scenario

        try:
            load_scenario(settings.scenario)
        except ScenarioError as exc:
            return fail_usage(str(exc))
    if args.once or args.json:
        _ONE_SHOT.append(True)  # its sources are closed when run_once returns
        return run_once(settings, config.alert_rules, as_json=args.json, early=early, gpu=gpu)
    # after every input check: a bad file is named first. A monitor `gputui serve` started for
    # a browser tab has pipes, and Textual's web driver draws for the browser through them
    # (gputui.serve is only imported to ask that, when there is no terminal).
    if not on_terminal():
        from gputui.serve.server import served_in_browser

        if not served_in_browser():
            return fail_usage(NOT_A_TERMINAL)
    from gputui.ui.run import run_tui  # imported late: --once must never load Textual

    collector = None
    if settings.scope.gpus is not None:
        # --only names GPUs of this machine: the first refresh says which exist, before any UI.
        from gputui.collect.loop import Prefetched
        from gputui.wiring.compose import build_collector

        collector = Prefetched(build_collector(settings, gpu=gpu, first_health_later=True))
        gpu = None  # the collector's now
        problem = scope_error(collector.first(), settings.scope)
        if problem is not None:
            collector.close()
            return fail_usage(problem)
    # run_tui returns the exit status (non-zero after a crash); None means a clean exit.
    status: int | None = run_tui(settings, collector=collector, config=config, gpu=gpu)
    return status or 0


def _start_nvml(args: argparse.Namespace, settings: Settings, *, once: bool) -> EarlyNvml | None:
    """NVML starting on its own thread now, for the collector of this machine; None else.

    The monitor's and the one-shot's collector read it (:class:`EarlyNvml`); a demo, a
    scenario or a replay reads no NVML.
    """
    if settings.demo or settings.scenario is not None or args.replay is not None:
        return None
    from gputui.collect.nvml.early import EarlyNvml

    # --once skips PCIe throughput: it samples for 20 ms per direction per GPU, most of a
    # one-shot's NVML time; the TUI reads it on its slow lane.
    return EarlyNvml(background=not once, slow_interval=settings.slow_interval, pcie=not once)


def faults_command(argv: Sequence[str]) -> int:
    """``gputui faults``: XID errors and OOM kills from the kernel log, attributed.

    Returns:
        0, 1 when the kernel log cannot be read, 2 for bad input.
    """
    parser = Parser(
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
    add_kernel_log(parser)
    args = parser.parse_args(argv)
    from gputui.cli.faults import faults_main

    return faults_main(args.since, as_json=args.json, kernel_log=args.kernel_log)


@record(slots=False)
class Subcommand:
    """One row of the subcommand table.

    Attributes:
        name: The word after ``gputui``.
        summary: What it is for, in ``gputui --help``.
        entry: ``module:function`` of what parses the rest of the command line and runs it,
            returning the exit status. Imported when the subcommand runs: a plain start
            loads no other command's code.
        operands: What ``--help`` shows after the name (``FILE`` for ``record FILE``).
    """

    name: str
    summary: str
    entry: str
    operands: str = ""

    def run(self, argv: Sequence[str]) -> int:
        """Import the subcommand's module and run it on the rest of the command line."""
        module, _, function = self.entry.partition(":")
        runner: Callable[[Sequence[str]], int] = getattr(importlib.import_module(module), function)
        return runner(argv)

    @property
    def usage(self) -> str:
        """The name and its operands, as ``--help`` lists them."""
        return f"{self.name} {self.operands}" if self.operands else self.name


#: Every subcommand, in ``gputui --help``'s order: the dispatch and the help list both come
#: from here (tests/unit/cli/test_cli_help.py).
SUBCOMMANDS: tuple[Subcommand, ...] = (
    Subcommand("doctor", "runtime-health checks", "gputui.cli.doctor:doctor"),
    Subcommand("export", "Prometheus metrics", "gputui.cli.export:export"),
    Subcommand("record", "record snapshots", "gputui.cli.record:record", operands="FILE"),
    Subcommand(
        "replay", "play a recording back", "gputui.cli.replay:replay_command", operands="FILE"
    ),
    Subcommand("free", "the GPUs a new job can use now", "gputui.cli.free:free_command"),
    Subcommand("serve", "the monitor in a web browser", "gputui.cli.serve:serve_command"),
    Subcommand(
        "fleet", "the GPU hosts a Prometheus scrapes, one row each", "gputui.cli.fleet:fleet"
    ),
    Subcommand(
        "ledger",
        "GPU-hours, energy and cost per container, project or GPU",
        "gputui.cli.ledger:ledger",
    ),
    Subcommand("daemon", "collect and keep the ledger, nothing else", "gputui.cli.ledger:daemon"),
    Subcommand(
        "faults",
        "XID errors and OOM kills from the kernel log, attributed",
        "gputui.cli.main:faults_command",
    ),
    Subcommand(
        "reclaim",
        "idle GPU reservations the idle policy found; stop one",
        "gputui.cli.reclaim:main",
    ),
)
_BY_NAME = {subcommand.name: subcommand for subcommand in SUBCOMMANDS}


def subcommand_list() -> str:
    """``doctor (runtime-health checks), export (Prometheus metrics), …`` for ``--help``."""
    return ", ".join(f"{sub.usage} ({sub.summary})" for sub in SUBCOMMANDS)
