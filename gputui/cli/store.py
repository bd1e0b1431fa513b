"""The ledger store every long-running command writes when it holds the store's lock."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from gputui.model.settings import Settings

if TYPE_CHECKING:
    from gputui.config.file import Config
    from gputui.ledger.writer import LedgerWriter
    from gputui.model.snapshot import Snapshot


def ledger_writer(
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


def announce_status(writer: LedgerWriter, program: str) -> Callable[[Snapshot, object], None]:
    """The ledger writer as a loop observer that prints each change of its status on stderr."""
    from gputui.boundary.sanitise import safe_text
    from gputui.ledger.writer import announcing

    return announcing(
        writer,
        lambda status: print(f"gputui {program}: {safe_text(status, 500)}", file=sys.stderr),
    )
