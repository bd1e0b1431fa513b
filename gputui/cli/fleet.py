"""``gputui fleet``: many hosts through a Prometheus server."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass
from gputui.cli.args import Parser, add_config, fleet_interval_arg, fleet_timeout_arg
from gputui.cli.terminal import fail_usage, on_terminal, write_out


def fleet(argv: Sequence[str]) -> int:
    """``gputui fleet``: the GPU hosts a Prometheus scrapes, one row each."""
    from gputui.fleet.model import SORT_NAMES

    parser = Parser(
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
        "--interval", metavar="SECONDS", type=fleet_interval_arg, default=5.0, help="default 5"
    )
    parser.add_argument(
        "--timeout", metavar="SECONDS", type=fleet_timeout_arg, default=10.0, help="per query"
    )
    parser.add_argument("--answers", metavar="FILE", type=Path, help="recorded answers instead")
    parser.add_argument(
        "--save-answers", metavar="FILE", type=Path, help="with --once: keep the answers in FILE"
    )
    add_config(parser)
    args = parser.parse_args(argv)
    from gputui.config.file import load_config
    from gputui.config.values import ConfigError
    from gputui.fleet.client import FleetError
    from gputui.fleet.command import FleetOptions, open_source, print_once
    from gputui.fleet.source import AnswersFileError

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        return fail_usage(str(exc))
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
        return fail_usage("--save-answers needs --once or --json")
    if args.host is not None and not (args.once or args.json):
        return fail_usage("--host needs --once or --json (in the screen, press Enter on a host)")
    try:
        source = open_source(options, os.environ, config.fleet)
    except FleetError as exc:
        return fail_usage(str(exc))
    if args.once or args.json:
        try:
            text = print_once(source, options, as_json=args.json)
        except AnswersFileError as exc:  # --save-answers names a file that cannot be written
            return fail_usage(str(exc))
        except FleetError as exc:
            from gputui.boundary.sanitise import safe_text

            print(f"gputui: error: {safe_text(str(exc), 1000)}", file=sys.stderr)
            return 1
        write_out(text)
        return 0
    if not on_terminal():
        return fail_usage(
            "the fleet view needs a terminal (stdin and stdout); for a report use --once or --json"
        )
    from gputui.ui.fleet_app import run_fleet

    secrets = (config.fleet.token, config.fleet.password)
    return run_fleet(source, options, interval=args.interval, secrets=secrets)
