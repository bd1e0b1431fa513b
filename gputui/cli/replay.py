"""``gputui replay``: a recording in the TUI or as ``--once`` output."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from gputui.model.settings import Settings

if TYPE_CHECKING:
    from gputui.config.file import Config
    from gputui.derive.alerts import AlertRule
    from gputui.recording.player import ReplayCollector
from gputui.cli.args import Parser, add_config, interval_arg
from gputui.cli.once import print_snapshot
from gputui.cli.terminal import NOT_A_TERMINAL, fail_usage, on_terminal
from gputui.derive.alerts_lookback import FINDINGS_MAX_SNAPSHOTS, lookback_s


def replay_command(argv: Sequence[str]) -> int:
    """``gputui replay [FILE]``: the TUI on a recording or a ledger store's timeline."""
    parser = Parser(
        prog="gputui replay",
        description=(
            "Play a recording in the monitor, or a ledger store's timeline (this host's store "
            "when FILE is left out): the last 7 days at one snapshot per 10 s."
        ),
    )
    parser.add_argument("file", metavar="FILE", type=Path, nargs="?")
    parser.add_argument("--at", metavar="TIME", help="start at TIME (ISO 8601, epoch, +OFFSET)")
    parser.add_argument(
        "--interval", metavar="SECONDS", type=interval_arg, default=1.0, help="one snapshot per"
    )
    parser.add_argument("--once", action="store_true", help="print the snapshot at --at and exit")
    parser.add_argument("--json", action="store_true", help="with --once: JSON")
    add_config(parser)
    args = parser.parse_args(argv)
    from gputui.config.file import load_config
    from gputui.config.values import ConfigError

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        return fail_usage(str(exc))
    path = args.file
    if path is None:
        from gputui.ledger.store import default_store_path

        path = config.ledger.store or default_store_path()
    settings = Settings(interval=args.interval, read_only=True, config=args.config)
    return run_replay(
        path, args.at, settings, config, once=args.once or args.json, as_json=args.json
    )


def open_player(path: Path) -> ReplayCollector:
    """A player over a recording, or over a ledger store's timeline (told by its first bytes).

    Raises:
        RecordingError: unreadable, invalid or empty (one line).
    """
    from gputui.boundary.userfiles import UserFileError, open_user_file
    from gputui.ledger.timeline import SQLITE_HEADER
    from gputui.recording.player import ReplayCollector
    from gputui.recording.writer import RecordingError

    try:
        with open_user_file(path, "recording or ledger store", 1 << 50) as f:
            head = f.read(len(SQLITE_HEADER))
    except UserFileError as exc:
        raise RecordingError(str(exc)) from None
    if head != SQLITE_HEADER:
        return ReplayCollector.from_file(path)
    from gputui.ledger.store import Store, StoreError
    from gputui.ledger.timeline import StoreTimeline

    try:
        store = Store.open_reader(path)
    except StoreError as exc:
        raise RecordingError(str(exc)) from None
    try:
        timeline = StoreTimeline(store)
    except StoreError as exc:
        store.close()
        raise RecordingError(str(exc)) from None
    if not len(timeline):
        store.close()
        raise RecordingError(
            f"ledger store {path} has no timeline yet: a monitor, `gputui export` or "
            "`gputui daemon` keeps one snapshot every 10 s while it writes the store"
        )
    return ReplayCollector(timeline, source=f"ledger store {path}")


def run_replay(
    path: Path,
    at: str | None,
    settings: Settings,
    config: Config,
    *,
    once: bool,
    as_json: bool,
) -> int:
    """Play a recording (or a ledger store's timeline) in the TUI, or print one snapshot.

    ``config`` is the config file as the command line loaded it (its alert rules judge the
    recording; the TUI takes its [ui] and [keys]). With ``once``, the snapshot at ``at`` is
    printed.
    """
    from gputui.recording.player import parse_time
    from gputui.recording.writer import RecordingError

    try:
        player = open_player(path)
    except RecordingError as exc:
        return fail_usage(str(exc))
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
        from gputui.cli.args import scope_error

        problem = scope_error(player.current, settings.scope)
        if problem is not None:
            player.close()
            return fail_usage(problem)
        if once:
            return _replay_once(player, config.alert_rules, as_json, settings)
    except RecordingError as exc:
        player.close()
        return fail_usage(str(exc))
    if not on_terminal():
        player.close()
        return fail_usage(NOT_A_TERMINAL)
    from gputui.ui.run import run_tui  # imported late: --once must never load Textual

    tui_status: int | None = run_tui(
        replace(settings, read_only=True), collector=player, config=config
    )
    return tui_status or 0


def _replay_once(
    player: ReplayCollector, rules: Sequence[AlertRule], as_json: bool, settings: Settings
) -> int:
    from gputui.derive.analysis import Analyzer

    try:
        # A recording holds snapshots; their analysis is reproduced here by the TUI's Analyzer,
        # fed the recording shortly before the moment shown (trends, `for` durations).
        position = player.position
        shown = player.current
        lookback = lookback_s(rules)
        first = position
        while (
            first > 0
            and position - first < FINDINGS_MAX_SNAPSHOTS
            and player.time_at(first - 1) >= shown.taken_at - lookback
        ):
            first -= 1
        analyzer = Analyzer(rules, totals=False)  # user totals for the snapshot shown only
        for index in range(first, position):
            analyzer.analyse(player.snapshot_at(index))
        analyzer.totals = True
        analyzer.scope = settings.scope if settings.scope.narrows else None
        return print_snapshot(analyzer.analyse(shown), as_json, ascii=settings.ascii)
    finally:
        player.close()
