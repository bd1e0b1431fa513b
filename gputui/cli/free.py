"""``gputui free``: which GPUs a new job can use, for ``CUDA_VISIBLE_DEVICES``."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from gputui.model.settings import Settings

if TYPE_CHECKING:
    pass
from gputui.cli.args import Parser, count_arg, memory_arg, percent_arg
from gputui.cli.terminal import fail_usage, write_out
from gputui.collect.settle import collect_settled

#: The caveat when every read was that slow.
FREE_UNSETTLED = (
    "the Docker engine answered slowly: some containers may not have been read, so their GPU "
    "reservations may be missing"
)


def free_command(argv: Sequence[str]) -> int:
    """``gputui free``: the GPUs a new job can use now, for ``CUDA_VISIBLE_DEVICES``.

    Prints the qualifying GPUs' indexes, best first, comma-separated (``0,3``) and nothing else
    on stdout; ``--explain`` (or too few GPUs) says on stderr why each other GPU was left out.

    Returns:
        0, 1 when fewer GPUs than ``-n`` (or none at all) qualify, 2 for bad input.
    """
    parser = Parser(
        prog="gputui free",
        description=(
            "The GPUs a new job can use now: not reserved by a container, not held by any "
            "process (also PIDs nobody can see). Prints e.g. 0,3 for CUDA_VISIBLE_DEVICES, or "
            "a free MIG device's MIG-... UUID when one device is wanted and no whole GPU is "
            "free; exit status 1 when fewer than -n GPUs qualify."
        ),
    )
    parser.add_argument(
        "-n", metavar="N", type=count_arg, default=None, help="exactly N GPUs, the best ones"
    )
    parser.add_argument(
        "--min-free-memory",
        metavar="SIZE",
        type=memory_arg,
        default=0,
        help="only GPUs with at least SIZE free (40G, 40GiB, 500M; a unit is required)",
    )
    parser.add_argument(
        "--max-util",
        metavar="PCT",
        type=percent_arg,
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
        return fail_usage("--demo and --scenario cannot be combined")
    from gputui.collect.standins.scenario import ScenarioError
    from gputui.derive.analysis import Analyzer
    from gputui.derive.free import FreeRules, device_list, free_gpus
    from gputui.wiring.compose import build_collector

    try:
        collector = build_collector(
            Settings(demo=args.demo, scenario=args.scenario, read_only=True),
            once=True,
            health=False,
        )
    except ScenarioError as exc:
        return fail_usage(str(exc))
    try:
        snapshot, settled = collect_settled(collector)
    finally:
        collector.close()
    findings = Analyzer((), totals=False).analyse(snapshot).findings
    answer = free_gpus(snapshot, FreeRules(args.min_free_memory, args.max_util), findings)
    if not settled:
        answer = replace(answer, caveats=(*answer.caveats, FREE_UNSETTLED))
    usable = answer.usable
    wanted = args.n if args.n is not None else max(1, len(usable))
    # Whole GPUs first; a free MIG device when one device is wanted and no whole GPU is free.
    chosen = answer.choose(args.n)
    enough = bool(chosen)
    # Only values safe in a comma list: a UUID NVML mangled is printed as its index, said below.
    devices, device_notes = device_list(chosen, answer.gpus, args.uuid)
    if args.json:
        from gputui.present.json_report import free_to_json

        doc = free_to_json(snapshot, answer, chosen, asked=args.n, enough=enough, devices=devices)
        doc["asked"].update(min_free_memory_bytes=args.min_free_memory, max_util=args.max_util)
        write_out(json.dumps(doc, indent=2, ensure_ascii=True) + "\n")
    elif devices:
        write_out(devices + "\n")
    from gputui.present.text_report import free_explanation

    for caveat in (*answer.caveats, *device_notes):
        print(f"gputui free: warning: {caveat}", file=sys.stderr)
    if args.explain or not enough:
        for line in free_explanation(answer, wanted, enough, chosen):
            print(line, file=sys.stderr)
    return 0 if enough else 1
