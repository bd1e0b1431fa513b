"""``gputui record``: snapshots to a rotated JSON-lines file."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass
from gputui.cli.args import (
    Parser,
    add_config,
    count_arg,
    keep_arg,
    size_arg,
    source_args,
    source_settings,
    store_arg,
)
from gputui.cli.store import announce_status, ledger_writer
from gputui.cli.terminal import fail_usage, stop_on_signals


def start_line(path: Path, interval: float, count: int | None, max_size: int, keep: int) -> str:
    """What ``gputui record`` says on stderr as it starts: where, how often, how to stop.

    Example: ``gputui record: recording to run.jsonl every 1s (rotated at 64.0MiB into
    run.jsonl.1..3); stop with Ctrl-C``.
    """
    from gputui.boundary.sanitise import safe_text
    from gputui.derive import units

    shown = safe_text(str(path), 200)
    every = f"{interval:g}s" if interval < 60 else units.duration(interval)
    if not max_size:
        rotation = "one file, never rotated"
    elif keep:
        rotation = f"rotated at {units.size(max_size)} into {shown}.1..{keep}"
    else:
        rotation = f"started afresh at {units.size(max_size)}"
    if count is None:
        stop = "stop with Ctrl-C"
    else:
        stop = f"stops after {count} snapshot{'' if count == 1 else 's'} (--count) or Ctrl-C"
    return f"gputui record: recording to {shown} every {every} ({rotation}); {stop}"


def record(argv: Sequence[str]) -> int:
    """``gputui record FILE``: append snapshots to FILE until --count or a signal."""
    from gputui.recording.writer import DEFAULT_MAX_BYTES, MAX_KEEP

    parser = Parser(prog="gputui record", description="Record snapshots to a file.")
    parser.add_argument("file", metavar="FILE", type=Path)
    parser.add_argument("--count", metavar="N", type=count_arg, help="stop after N snapshots")
    parser.add_argument(
        "--max-size",
        "--max-bytes",
        dest="max_size",
        metavar="SIZE",
        type=size_arg,
        default=DEFAULT_MAX_BYTES,
        help=f"rotate to FILE.1 at this size (default {DEFAULT_MAX_BYTES // 1024**2}M; 0: never)",
    )
    parser.add_argument(
        "--keep",
        metavar="N",
        type=keep_arg,
        default=3,
        help=f"rotated files kept (FILE.1..N, default 3, at most {MAX_KEEP})",
    )
    store_arg(parser)
    source_args(parser)
    add_config(parser)
    args = parser.parse_args(argv)
    settings = source_settings(args)
    if isinstance(settings, str):
        return fail_usage(settings)
    from gputui.config.file import load_config
    from gputui.config.values import ConfigError

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        return fail_usage(str(exc))
    if not args.file.parent.is_dir():
        return fail_usage(f"cannot record to {args.file}: no directory {args.file.parent}")
    from gputui.recording.writer import RecordingError, RecordWriter
    from gputui.recording.writer import record as record_loop
    from gputui.wiring.compose import build_collector

    writer = RecordWriter(args.file, max_bytes=args.max_size, keep=args.keep)
    try:
        # Before anything is collected: a second recorder or a FIFO is refused at once.
        writer.open()
    except RecordingError as exc:
        return fail_usage(str(exc))
    except OSError as exc:
        return fail_usage(f"cannot record to {args.file}: {exc.strerror or exc}")
    stop = stop_on_signals()
    print(
        start_line(args.file, args.interval, args.count, args.max_size, args.keep), file=sys.stderr
    )
    ledger = None if args.count == 1 else ledger_writer("record", settings, args.store, config)
    try:
        collector = build_collector(config.applied(settings), once=args.count == 1)
        try:
            collector.request_health()
            written = record_loop(
                collector,
                writer,
                interval=args.interval,
                count=args.count,
                stop=stop,
                observe=None if ledger is None else announce_status(ledger, "record"),
            )
        finally:
            collector.close()
            if ledger is not None:
                ledger.close()
    except RecordingError as exc:
        return fail_usage(str(exc))
    except OSError as exc:
        return fail_usage(f"cannot record to {args.file}: {exc.strerror or exc}")
    finally:
        writer.close()
    print(f"gputui record: {written} snapshot(s) written to {args.file}", file=sys.stderr)
    return 0
