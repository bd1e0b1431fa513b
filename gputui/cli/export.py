"""``gputui export``: the Prometheus endpoint's command line."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass
from gputui.cli.args import Parser, add_config, source_args, source_settings, store_arg
from gputui.cli.store import announce_status, ledger_writer
from gputui.cli.terminal import fail_usage, log_line, stop_on_signals, write_out


def export(argv: Sequence[str]) -> int:
    """``gputui export``: serve Prometheus metrics (or print them once)."""
    parser = Parser(prog="gputui export", description="Prometheus metrics of this GPU host.")
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
    store_arg(parser)
    source_args(parser)
    add_config(parser)
    args = parser.parse_args(argv)
    from gputui.config.file import load_config
    from gputui.config.values import ConfigError
    from gputui.exporter import run

    try:
        host, port = run.parse_listen(args.listen)
        config = load_config(args.config)
    except (ValueError, ConfigError) as exc:
        return fail_usage(str(exc))
    rules = config.alert_rules
    settings = source_settings(args)
    if isinstance(settings, str):
        return fail_usage(settings)
    from gputui.wiring.compose import build_collector

    collector = build_collector(config.applied(settings), once=args.once)
    if args.once:
        try:
            collector.request_health()
            snapshot = collector.collect()
        finally:
            collector.close()
        out = run.render_once(
            snapshot, pid_labels=args.pid_labels, rules=rules, user_series=args.user_series
        )
        write_out(out.decode())
        return 0
    collector.request_health()
    # [[notify]]: alerts and findings delivered from the exporter's analysis, on threads of
    # their own (a receiver never delays a scrape or a refresh).
    import socket  # late: a one-shot never loads it (tests/unit/collect/test_psutil_facts.py)

    from gputui.notify.policy import start_policy
    from gputui.notify.worker import start_notifier

    hostname = socket.gethostname()
    notifier = start_notifier(config.notify, hostname, log=log_line)
    # [idle_policy]: notices audited and delivered; the exporter is read-only, so an automatic
    # stop is audited as refused.
    policy = start_policy(
        config.idle_policy,
        hostname,
        notifier=notifier,
        collector=collector,
        read_only=True,
        log=log_line,
    )
    sinks = [s.observe for s in (notifier, policy) if s is not None]

    writer = ledger_writer("export", settings, args.store, config)
    try:
        run.serve(
            collector,
            host=host,
            port=port,
            interval=args.interval,
            pid_labels=args.pid_labels,
            rules=rules,
            stop=stop_on_signals(),
            user_series=args.user_series,
            sinks=sinks,
            observe=None if writer is None else announce_status(writer, "export"),
        )
    except OSError as exc:
        collector.close()
        return fail_usage(f"cannot listen on {args.listen}: {exc.strerror or exc}")
    finally:
        if notifier is not None:
            notifier.close()
        if writer is not None:
            writer.close()
    return 0
