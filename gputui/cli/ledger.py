"""``gputui ledger`` (who used the GPUs over a window) and ``gputui daemon`` (collect and write).

``gputui ledger`` only reads the store (``mode=ro``): it runs beside the writer. ``gputui
daemon`` collects at its interval and writes the ledger, nothing else; it is what the
systemd unit (``contrib/gputui-daemon.service``) runs. Bad input, or a store that cannot be
read (or, for the daemon, written), is one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gputui.model.snapshot import Snapshot

if TYPE_CHECKING:
    from gputui.model.settings import Prices
from gputui.cli.args import Parser, add_config, source_args, source_settings
from gputui.cli.terminal import fail_usage, stop_on_signals


def _store_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        metavar="PATH",
        type=Path,
        help="the ledger store (default [ledger] store, else $XDG_STATE_HOME/gputui/)",
    )


def ledger(argv: Sequence[str]) -> int:
    """``gputui ledger``: the store's totals over a window, grouped."""
    from gputui.ledger.report import FORMATS, GROUPINGS

    parser = Parser(
        prog="gputui ledger", description="GPU-hours, energy and cost per container, user, GPU."
    )
    parser.add_argument("--since", default="7d", help="30d, 12h, 90m, today, or a date (7d)")
    parser.add_argument("--until", default=None, help="the window's end (default now)")
    parser.add_argument("--by", choices=GROUPINGS, default="container")
    parser.add_argument("--format", choices=FORMATS, default="table")
    _store_arg(parser)
    parser.add_argument(
        "--from-recording",
        metavar="FILE",
        type=Path,
        help="recompute the ledger from a gputui record file instead of reading the store",
    )
    add_config(parser)
    args = parser.parse_args(argv)
    if args.from_recording is not None and args.store is not None:
        return fail_usage("--from-recording and --store cannot be combined")
    from gputui.config.file import load_config
    from gputui.config.values import ConfigError
    from gputui.ledger.report import parse_since
    from gputui.ledger.store import default_store_path

    now = time.time()
    try:
        since = parse_since(args.since, now)
        until = now if args.until is None else parse_since(args.until, now)
    except ValueError as exc:
        return fail_usage(str(exc))
    if until <= since:
        return fail_usage("--until must be later than --since")
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        return fail_usage(str(exc))
    with tempfile.TemporaryDirectory(prefix="gputui-ledger-") as scratch:
        if args.from_recording is not None:
            path = Path(scratch) / "recomputed.sqlite"
            problem = _recompute(args.from_recording, path, config.ledger.idle_power_w)
            if problem is not None:
                return fail_usage(problem)
        else:
            path = args.store or config.ledger.store or default_store_path()
        return _report(path, args, since, until, now, config.ledger.prices)


def _recompute(recording: Path, path: Path, idle_power_w: Mapping[str, float]) -> str | None:
    """Write the ledger of a recording into a new store at ``path``; the error, or None.

    The interval the gaps are measured against is the recording's median interval.
    """
    from gputui.ledger.writer import LedgerWriter
    from gputui.recording.reader import Recording, open_recording
    from gputui.recording.writer import RecordingError

    try:
        snapshots = open_recording(recording)
    except RecordingError as exc:
        return str(exc)
    times = (
        list(snapshots.times)
        if isinstance(snapshots, Recording)
        else [s.taken_at for s in snapshots]
    )
    steps = sorted(b - a for a, b in itertools.pairwise(times) if b > a)
    interval = steps[len(steps) // 2] if steps else 1.0
    writer = LedgerWriter(path, "recomputed", interval_s=interval, idle_power_w=idle_power_w)
    if not writer.start():
        return writer.status
    try:
        for snapshot in snapshots:
            writer.observe(snapshot)
    except RecordingError as exc:
        return str(exc)
    finally:
        writer.close()
    return None


def _report(
    path: Path,
    args: argparse.Namespace,
    since: float,
    until: float,
    now: float,
    prices: Prices,
) -> int:
    from gputui.ledger.report import render, summarise
    from gputui.ledger.store import Store, StoreError, alive

    try:
        store = Store.open_reader(path)
    except StoreError as exc:
        return fail_usage(str(exc))
    try:
        rows = store.usage(since, until, now)
        coverage = store.coverage(since, until, now)
        gaps = store.gaps(since, until)
        sessions = store.sessions()
    except StoreError as exc:
        return fail_usage(str(exc))
    finally:
        store.close()
    live = [s for s in sessions if s.ended is None and alive(s.pid)]
    if live:
        status = f"store {path}: written by pid {live[-1].pid} ({live[-1].program})"
    else:
        status = f"store {path}: no gputui writes it now"
    if args.from_recording is not None:
        status = f"recomputed from {args.from_recording}"
    lines = summarise(rows, args.by, prices)
    sys.stdout.write(
        render(
            lines,
            by=args.by,
            fmt=args.format,
            since=since,
            until=until,
            coverage=coverage,
            gaps=gaps,
            status=status,
            prices=prices,
        )
    )
    return 0


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text[:40]!r}") from None
    if not 0.05 <= value <= 60:
        raise argparse.ArgumentTypeError(f"expected 0.05 to 60 seconds, got {text[:40]!r}")
    return value


def _count(text: str) -> int:
    if not text.isascii() or not text.isdigit() or not 1 <= len(text) <= 9 or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text[:40]!r}")
    return int(text)


def daemon(argv: Sequence[str]) -> int:
    """``gputui daemon``: collect and write the ledger until SIGTERM or SIGINT."""
    parser = Parser(
        prog="gputui daemon", description="Collect and write the GPU ledger (nothing else)."
    )
    _store_arg(parser)
    parser.add_argument(
        "--commit-every",
        metavar="SECONDS",
        type=_seconds,
        default=None,
        help="longest time between commits (default 30; the most a crash loses)",
    )
    parser.add_argument(
        "--count", metavar="N", type=_count, default=None, help="stop after N snapshots"
    )
    source_args(parser)
    add_config(parser)
    args = parser.parse_args(argv)
    from gputui.config.file import load_config
    from gputui.config.values import ConfigError
    from gputui.ledger.store import default_store_path
    from gputui.ledger.writer import COMMIT_EVERY_S, LedgerWriter

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        return fail_usage(str(exc))
    settings = source_settings(args)
    if isinstance(settings, str):
        return fail_usage(settings)
    if settings.mode != "live" and args.store is None:
        return fail_usage(f"--{settings.mode} writes only into a store named with --store")
    path = args.store or config.ledger.store or default_store_path()
    writer = LedgerWriter(
        path,
        "daemon",
        interval_s=settings.interval,
        idle_power_w=config.ledger.idle_power_w,
        commit_every_s=args.commit_every or COMMIT_EVERY_S,
    )
    if not writer.start():
        return fail_usage(writer.status)
    stop = stop_on_signals()
    print(f"gputui daemon: {writer.status}", file=sys.stderr, flush=True)
    from gputui.boundary.sanitise import safe_text
    from gputui.collect.loop import CollectLoop
    from gputui.wiring.compose import build_collector

    said = [writer.status]

    def deliver(snapshot: Snapshot, _analysis: None) -> None:
        writer.observe(snapshot)
        if writer.status != said[0]:  # said once per change, never per snapshot
            said[0] = writer.status
            print(f"gputui daemon: {safe_text(said[0], 500)}", file=sys.stderr, flush=True)

    def failed(exc: Exception) -> None:
        print(f"gputui daemon: collection failed: {type(exc).__name__}", file=sys.stderr)

    try:
        collector = build_collector(config.applied(settings), once=False)
        try:
            loop: CollectLoop[None] = CollectLoop(
                collector,
                lambda _snapshot: None,
                deliver,
                interval=settings.interval,
                on_error=failed,
            )
            loop.run(stop.is_set, count=args.count)
        finally:
            collector.close()
    finally:
        writer.close()
    return 0
