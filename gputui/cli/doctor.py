"""``gputui doctor``: the health checks once, with their fixes; exit 1 on a failure."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gputui.model.settings import Settings

if TYPE_CHECKING:
    pass
from gputui.cli.args import Parser, add_engine, engines_of
from gputui.cli.once import collect_once
from gputui.cli.terminal import fail_usage, write_out


def doctor(argv: Sequence[str]) -> int:
    """``gputui doctor``: print every health check; exit 1 when any fails."""
    parser = Parser(prog="gputui doctor", description="Runtime-health checks of this GPU host.")
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")
    parser.add_argument("--demo", action="store_true", help="check the simulated machine")
    parser.add_argument("--scenario", metavar="FILE", type=Path, help="replace NVML with FILE")
    add_engine(parser)
    args = parser.parse_args(argv)
    from gputui.model.status import HealthStatus
    from gputui.present.json_report import check_to_json
    from gputui.present.text_report import format_checks

    snapshot = collect_once(
        Settings(demo=args.demo, scenario=args.scenario, engines=engines_of(args))
    )
    if isinstance(snapshot, str):
        return fail_usage(snapshot)
    checks = snapshot.health
    if args.json:
        doc = {"health": [check_to_json(c) for c in checks]}
        write_out(json.dumps(doc, indent=2, ensure_ascii=True) + "\n")
    else:
        for line in format_checks(checks, set(HealthStatus)):  # sanitised there
            write_out(line + "\n")
        counts = {s: sum(1 for c in checks if c.status is s) for s in HealthStatus}
        write_out(", ".join(f"{n} {s.value}" for s, n in counts.items()) + "\n")
    return 1 if any(c.status is HealthStatus.FAIL for c in checks) else 0
