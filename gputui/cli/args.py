"""Argument types and shared options: every bad value is one line on stderr and exit status 2."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from gputui.model.settings import MAX_INTERVAL_S, MIN_INTERVAL_S, Settings, ViewScope

if TYPE_CHECKING:
    from gputui.model.snapshot import Snapshot
from gputui.cli.terminal import EXIT_USAGE


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error (no usage dump) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        """The message on one line and exit status 2 (argparse's default is a usage dump)."""
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def interval_arg(text: str) -> float:
    """``--interval``: seconds between refreshes, within the collector's bounds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {shown_text(text)}") from None
    if not MIN_INTERVAL_S <= value <= MAX_INTERVAL_S:  # also rejects NaN and infinities
        raise argparse.ArgumentTypeError(
            f"must be at least {MIN_INTERVAL_S} and at most {MAX_INTERVAL_S:g} seconds, "
            f"got {shown_text(text)}"
        )
    return value


def shown_text(text: str) -> str:
    """A command-line value quoted for an error message, escaped and cut short."""
    shown = repr(text)
    return shown if len(shown) <= 60 else shown[:59] + "…"


def add_kernel_log(parser: argparse.ArgumentParser) -> None:
    """``--kernel-log PATH|off``: where XID lines and OOM kills are read from."""
    parser.add_argument(
        "--kernel-log",
        metavar="PATH",
        default=None,
        help="read XID lines and OOM kills from PATH (default /dev/kmsg when live), or 'off'",
    )


def engine_arg(text: str) -> str:
    """One ``--engine`` value, checked here so a bad one is one line and exit 2."""
    from gputui.collect.engines import EngineSpecError, parse_engine_spec

    try:
        parse_engine_spec(text)
    except EngineSpecError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def add_engine(parser: argparse.ArgumentParser) -> None:
    """``--engine KIND[=ADDRESS]`` (repeatable): which container engines are read."""
    parser.add_argument(
        "--engine",
        metavar="KIND[=ADDRESS]",
        action="append",
        type=engine_arg,
        default=None,
        help=(
            "read only this container engine (repeatable): docker, podman, containerd or "
            "crio, as found on the host, or KIND=ADDRESS (a unix:// or tcp:// URL; "
            "containerd: its state directory; crio: its CRI socket); 'auto' adds every engine "
            "found (default: all found)"
        ),
    )


def engines_of(args: argparse.Namespace) -> tuple[str, ...]:
    """The ``--engine`` values given (none: every engine the host shows)."""
    return tuple(getattr(args, "engine", None) or ())


def add_config(parser: argparse.ArgumentParser) -> None:
    """The ``--config FILE`` option every command that reads the config takes."""
    parser.add_argument(
        "--config",
        metavar="FILE",
        type=Path,
        help=(
            "config file (default $XDG_CONFIG_HOME/gputui/config.toml): alert rules, "
            "[ui] preferences"
        ),
    )


# -- what the views show: nvitop's --only, --user, --pid, --ascii ------------------------------

#: More GPUs than any machine has (scenario files allow 64): an index beyond is a typo.
_MAX_GPU_INDEX = 1023


def gpu_index_arg(text: str) -> int:
    """``--only INDEX``: a GPU index, a whole number from 0."""
    if not re.fullmatch(r"[0-9]{1,4}", text) or int(text) > _MAX_GPU_INDEX:
        raise argparse.ArgumentTypeError(
            f"expected a GPU index (0, 1, ... as nvidia-smi counts them), got {shown_text(text)}"
        )
    return int(text)


def pid_arg(text: str) -> int:
    """``--pid PID``: a process id, a positive whole number."""
    if not re.fullmatch(r"[0-9]{1,10}", text) or not 0 < int(text) < 2**31:
        raise argparse.ArgumentTypeError(f"expected a process id, got {shown_text(text)}")
    return int(text)


def user_arg(text: str) -> str:
    """``--user USER``: a user name or a uid, as ``ps`` shows them."""
    if not re.fullmatch(r"[A-Za-z0-9._@$-]{1,64}", text):
        raise argparse.ArgumentTypeError(f"expected a user name or uid, got {shown_text(text)}")
    return text


def current_user() -> str:
    """The user running gputui, as a process's user is shown: the name, else the uid."""
    from gputui.collect.linux.users import user_name

    uid = os.getuid()
    return user_name(uid) or str(uid)


def add_view_scope(parser: argparse.ArgumentParser) -> None:
    """The view options nvitop users reach for: ``--only``, ``--user``, ``--pid``, ``--ascii``."""
    parser.add_argument(
        "--only",
        "-o",
        metavar="INDEX",
        type=gpu_index_arg,
        nargs="+",
        help="show only these GPUs (indexes), their processes and containers",
    )
    parser.add_argument(
        "--user",
        "-u",
        metavar="USER",
        type=user_arg,
        nargs="*",
        help="show only processes of these users (no USER: yours) and their containers",
    )
    parser.add_argument(
        "--pid",
        "-p",
        metavar="PID",
        type=pid_arg,
        nargs="+",
        help="show only these host PIDs and their containers",
    )
    parser.add_argument(
        "--ascii",
        "--no-unicode",
        "-U",
        dest="ascii",
        action="store_true",
        help="draw with ASCII only: bars, borders, sparklines, markers (terminals without Unicode)",
    )


def view_scope(args: argparse.Namespace) -> ViewScope:
    """The :class:`ViewScope` of ``--only``, ``--user`` and ``--pid`` (``--user`` alone: yours)."""
    users = getattr(args, "user", None)
    if users is not None and not users:
        users = [current_user()]
    only, pids = getattr(args, "only", None), getattr(args, "pid", None)
    return ViewScope(
        gpus=None if only is None else tuple(dict.fromkeys(only)),
        users=None if users is None else tuple(dict.fromkeys(users)),
        pids=None if pids is None else tuple(dict.fromkeys(pids)),
    )


def scope_error(snapshot: Snapshot | None, scope: ViewScope) -> str | None:
    """The one-line error when ``--only`` names a GPU ``snapshot`` does not have."""
    if snapshot is None:
        return None  # the collection failed: the monitor or the report says why
    from gputui.derive.scope import unknown_gpus

    missing = unknown_gpus(snapshot, scope)
    if not missing:
        return None
    from gputui.boundary.sanitise import safe_text

    have = ", ".join(str(g.index) for g in snapshot.gpus)
    names = " ".join(str(i) for i in missing)
    noun = "GPU" if len(missing) == 1 else "GPUs"
    if not snapshot.gpus:
        nvml = snapshot.sources.get("nvml")
        why = "" if nvml is None or nvml.ok else f": NVML: {safe_text(nvml.error, 160)}"
        return f"--only {names}: no such {noun} (no GPU found{why})"
    there = f"GPU {have}" if len(snapshot.gpus) == 1 else f"GPUs {have}"
    return f"--only {names}: no such {noun} (this machine has {there})"


def run_settings(args: argparse.Namespace) -> Settings:
    """The run's :class:`Settings` from parsed arguments and ``GPUTUI_SCENARIO``."""
    scenario = args.scenario
    if scenario is None and os.environ.get("GPUTUI_SCENARIO"):
        scenario = Path(os.environ["GPUTUI_SCENARIO"])
    return Settings(
        interval=args.interval if args.interval is not None else 1.0,
        read_only=args.read_only,
        hide_sensitive=args.no_logs,
        demo=args.demo,
        scenario=scenario,
        config=args.config,
        bell=args.bell,
        kernel_log=getattr(args, "kernel_log", None),
        engines=engines_of(args),
        scope=view_scope(args),
        ascii=getattr(args, "ascii", False),
    )


# -- export / record / replay ------------------------------------------------------------------


def source_args(parser: argparse.ArgumentParser) -> None:
    """Options for what is read and how often: ``--demo``, ``--scenario``, ``--interval``."""
    parser.add_argument("--demo", action="store_true", help="the built-in simulated machine")
    parser.add_argument("--scenario", metavar="FILE", type=Path, help="replace NVML with FILE")
    parser.add_argument(
        "--interval", metavar="SECONDS", type=interval_arg, default=1.0, help="refresh period"
    )
    add_kernel_log(parser)
    add_engine(parser)


def source_settings(args: argparse.Namespace) -> Settings | str:
    """Settings for a subcommand's collector, or the one-line error."""
    if args.demo and args.scenario is not None:
        return "--demo and --scenario cannot be combined"
    if args.scenario is not None:
        from gputui.collect.standins.scenario import ScenarioError, load_scenario

        try:
            load_scenario(args.scenario)
        except ScenarioError as exc:
            return str(exc)
    # Nothing recorded or exported may act on the machine.
    return Settings(
        interval=args.interval,
        read_only=True,
        demo=args.demo,
        scenario=args.scenario,
        kernel_log=getattr(args, "kernel_log", None),
        engines=engines_of(args),
    )


_SIZE = re.compile(r"([0-9]{1,15})([KMG]?)", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}
#: Rotation sizes beyond this are no rotation anyone means (use 0 for none).
MAX_RECORD_SIZE = 1024**4


def size_arg(text: str) -> int:
    """A recording size such as ``500K`` or ``10M``, in bytes (at most 1T)."""
    match = _SIZE.fullmatch(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(
            f"expected bytes such as 1000000, 500K or 10M, got {shown_text(text)}"
        )
    value = int(match.group(1)) * _SIZE_UNITS[match.group(2).upper()]
    if value > MAX_RECORD_SIZE:
        raise argparse.ArgumentTypeError(f"at most 1T, got {shown_text(text)}")
    return value


def count_arg(text: str) -> int:
    """A positive whole number of at most twelve digits."""
    # [0-9] and a length bound: str.isdigit() accepts "²", and int() refuses 4,300+ digits.
    if not re.fullmatch(r"[0-9]{1,12}", text) or int(text) < 1:
        raise argparse.ArgumentTypeError(
            f"expected a positive integer below 10**12, got {shown_text(text)}"
        )
    return int(text)


def keep_arg(text: str) -> int:
    """``--keep``: how many rotated recording files are kept."""
    from gputui.recording.writer import MAX_KEEP

    if not re.fullmatch(r"[0-9]{1,4}", text) or int(text) > MAX_KEEP:
        raise argparse.ArgumentTypeError(
            f"expected an integer from 0 to {MAX_KEEP}, got {shown_text(text)}"
        )
    return int(text)


# -- fleet --------------------------------------------------------------------------------------


def _seconds_in(text: str, low: float, high: float) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {shown_text(text)}") from None
    if not low <= value <= high:  # also NaN and infinities
        raise argparse.ArgumentTypeError(
            f"must be at least {low:g} and at most {high:g} seconds, got {shown_text(text)}"
        )
    return value


def fleet_interval_arg(text: str) -> float:
    """``gputui fleet --interval``: 1 s to 1 h."""
    return _seconds_in(text, 1.0, 3600.0)


def fleet_timeout_arg(text: str) -> float:
    """``gputui fleet --timeout``: 0.1 s to 120 s."""
    return _seconds_in(text, 0.1, 120.0)


# -- free ---------------------------------------------------------------------------------------

_MEMORY = re.compile(r"([0-9]{1,15}(?:\.[0-9]{1,6})?)\s*(?:([KMGT])(?:I?B)?|(B))", re.IGNORECASE)
_MEMORY_UNITS = {"B": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
_NUMBER = re.compile(r"[0-9]{1,15}(?:\.[0-9]{1,6})?")
#: No GPU has more memory than this; a larger --min-free-memory is a typo.
MAX_GPU_MEMORY = 1024**5


def memory_arg(text: str) -> int:
    """A GPU memory amount such as ``40G``, ``40GiB``, ``500M`` or ``4096B``, in bytes (<= 1PiB).

    A bare number is refused: ``40`` meaning 40 bytes is never what was meant.
    """
    stripped = text.strip()
    if _NUMBER.fullmatch(stripped):
        raise argparse.ArgumentTypeError(
            f"{shown_text(text)} has no unit: write e.g. {stripped}GiB or {stripped}MiB"
        )
    match = _MEMORY.fullmatch(stripped)
    if not match:
        raise argparse.ArgumentTypeError(
            f"expected a size such as 40G, 40GiB or 500M, got {shown_text(text)}"
        )
    unit = (match.group(2) or match.group(3)).upper()
    value = int(float(match.group(1)) * _MEMORY_UNITS[unit])
    if value > MAX_GPU_MEMORY:
        raise argparse.ArgumentTypeError(f"at most 1PiB, got {shown_text(text)}")
    return value


def percent_arg(text: str) -> int:
    """A whole percentage, 0 to 100."""
    if not re.fullmatch(r"[0-9]{1,3}", text) or int(text) > 100:
        raise argparse.ArgumentTypeError(
            f"expected a percentage from 0 to 100, got {shown_text(text)}"
        )
    return int(text)


def port_arg(text: str) -> int:
    """A TCP port, 1 to 65535."""
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port 1-65535, got {shown_text(text)}")
    return int(text)


def listen_host_arg(text: str) -> str:
    """A host name or address to listen on (letters, digits, dots, colons, dashes)."""
    if not re.fullmatch(r"[A-Za-z0-9.:-]{1,253}", text):
        raise argparse.ArgumentTypeError(
            f"expected an address or host name, got {shown_text(text)}"
        )
    return text


def store_arg(parser: argparse.ArgumentParser) -> None:
    """``--store PATH``: the ledger store a long-running command writes."""
    parser.add_argument(
        "--store",
        metavar="PATH",
        type=Path,
        help="write the GPU ledger here (default [ledger] store, else $XDG_STATE_HOME/gputui/)",
    )
