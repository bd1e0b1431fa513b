"""``gputui serve``: the monitor in a web browser."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass
from gputui.cli.args import Parser, add_config, interval_arg, listen_host_arg, port_arg
from gputui.cli.terminal import fail_usage


def serve_command(argv: Sequence[str]) -> int:
    """``gputui serve``: the monitor in a web browser (textual-serve), read-only by default."""
    from gputui.serve import server

    parser = Parser(
        prog="gputui serve",
        description=(
            "The monitor in a web browser, one gputui per tab (textual-serve). Read-only unless "
            "--allow-actions; from another machine, reach it through an SSH tunnel (ssh -L)."
        ),
    )
    parser.add_argument(
        "--host",
        type=listen_host_arg,
        default=server.DEFAULT_HOST,
        help=f"address to listen on (default {server.DEFAULT_HOST}: this machine only)",
    )
    parser.add_argument(
        "--port",
        type=port_arg,
        default=server.DEFAULT_PORT,
        help=f"port to listen on (default {server.DEFAULT_PORT})",
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
        "--interval", metavar="SECONDS", type=interval_arg, default=None, help="refresh period"
    )
    add_config(parser)
    args = parser.parse_args(argv)
    if args.demo and args.scenario is not None:
        return fail_usage("--demo and --scenario cannot be combined")
    from gputui.collect.standins.scenario import ScenarioError, load_scenario
    from gputui.config.file import load_config
    from gputui.config.values import ConfigError

    try:
        load_config(args.config)  # each tab's monitor reads it: a bad file stops here, once
        if args.scenario is not None:
            load_scenario(args.scenario)
    except (ConfigError, ScenarioError) as exc:
        return fail_usage(str(exc))
    options = server.ServeOptions(
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
        server.run(options, lambda line: print(line, file=sys.stderr, flush=True))
    except server.ServeUnavailable as exc:
        return fail_usage(str(exc))
    except OSError as exc:
        return fail_usage(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}")
    return 0
