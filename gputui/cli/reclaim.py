"""``gputui reclaim``: the idle reservations the policy found; stop one by typing its name.

The idle-GPU policy (``[idle_policy]``, run by the monitor or ``gputui export``) writes every
stage it reaches to its audit file. This command lists the containers whose latest stage is
``reclaim``, checks each against a fresh snapshot (still running, still reserving GPUs, no GPU
process at or above the policy's ``active_sm``), and with ``--stop NAME`` stops one after the
person types its name. Nothing is stopped without that confirmation; ``--read-only`` refuses
every stop; every stop, refusal or failure is appended to the audit file with the evidence.
"""

from __future__ import annotations

import argparse
import getpass
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

from gputui.boundary import sanitise
from gputui.boundary.timestamps import utc
from gputui.boundary.userfiles import UserFileError
from gputui.config.file import load_config
from gputui.config.values import ConfigError
from gputui.derive import units
from gputui.derive.idle_policy import reserved
from gputui.model.settings import IdlePolicy, Settings
from gputui.model.snapshot import ContainerUsage
from gputui.notify.audit import SCHEMA, AuditLog, default_audit_path, read_audit
from gputui.notify.policy import live_control

#: Audit events after which a container is no longer due (stopped, or in use again).
_ENDS = {"stop", "cleared"}
#: Audit events that keep it due (a stop that did not happen).
_KEEPS = {"reclaim", "stop-dry-run", "stop-refused", "stop-failed"}
#: The longest confirmation line read.
_MAX_ANSWER = 1024


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="gputui reclaim",
        description="Idle GPU reservations due for reclaim; stop one with a typed confirmation.",
    )
    parser.add_argument("--stop", metavar="NAME", help="stop this container (asks you to type it)")
    parser.add_argument("--audit", metavar="FILE", type=Path, help="the idle policy's audit file")
    parser.add_argument("--read-only", action="store_true", help="refuse every stop")
    parser.add_argument("--config", metavar="FILE", type=Path, help="config file")
    parser.add_argument("--demo", action="store_true", help="the built-in simulated machine")
    parser.add_argument("--scenario", metavar="FILE", type=Path, help="replace NVML with FILE")
    return parser


def due(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Containers whose latest policy stage is ``reclaim`` (not stopped or cleared since), by id.

    Returns:
        Each one's reclaim record (the evidence of the verdict).
    """
    out: dict[str, dict[str, Any]] = {}
    for record in records:
        cid = record.get("container_id")
        kind = record.get("event")
        if not isinstance(cid, str) or not isinstance(kind, str):
            continue
        if kind == "reclaim":
            out[cid] = record
        elif kind in _ENDS or kind not in _KEEPS:
            out.pop(cid, None)
    return out


def idle_now(usage: ContainerUsage | None, policy: IdlePolicy) -> bool:
    """Still a reservation doing nothing: running, asking for GPUs, no GPU process at work."""
    if usage is None or not reserved(usage):
        return False
    if not usage.pids:
        return True
    return usage.sm_util is not None and usage.sm_util < policy.active_sm


def _actor() -> str:
    try:
        return f"gputui reclaim ({getpass.getuser()})"
    except (KeyError, OSError):
        return "gputui reclaim"


def main(
    argv: Sequence[str],
    *,
    stdin: TextIO | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Run ``gputui reclaim``; the exit status (2: bad input or refused by ``--read-only``)."""
    stdin = stdin or sys.stdin
    out = out or sys.stdout
    err = err or sys.stderr
    args = _parser().parse_args(argv)

    def fail(message: str, status: int = 2) -> int:
        print(f"gputui: error: {sanitise.safe_text(message, 1000)}", file=err)
        return status

    if args.demo and args.scenario is not None:
        return fail("--demo and --scenario cannot be combined")
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        return fail(str(exc))
    policy = config.idle_policy
    path = args.audit or (Path(policy.audit) if policy.audit else default_audit_path())
    try:
        records, skipped = read_audit(path)
    except UserFileError as exc:
        return fail(str(exc))
    if skipped:
        shown = sanitise.safe_text(str(path), 300)
        print(f"gputui: warning: {skipped} unreadable line(s) of {shown} skipped", file=err)
    candidates = due(records)
    audit = AuditLog(path)
    host = socket.gethostname()
    if args.read_only and args.stop is not None:
        # Refused before anything is collected: the refusal is audited, nothing else happens.
        try:
            audit.append(_action(host, args.stop, None, "stop-refused", "read-only mode"))
        except UserFileError as exc:
            return fail(str(exc))
        return fail("read-only mode: actions are disabled (nothing was stopped)")
    if args.scenario is not None:
        from gputui.collect.standins.scenario import ScenarioError, load_scenario

        try:
            load_scenario(args.scenario)
        except ScenarioError as exc:
            return fail(str(exc))
    from gputui.wiring.compose import build_collector

    settings = Settings(read_only=args.read_only, demo=args.demo, scenario=args.scenario)
    collector = build_collector(settings, once=True, health=False)
    try:
        snapshot = collector.collect()
        rows = [
            (cid, record, idle_now(snapshot.container(cid), policy))
            for cid, record in candidates.items()
        ]
        if not rows:
            shown = sanitise.safe_text(str(path), 300)
            print(f"no container is due for reclaim (audit file {shown})", file=out)
        for _, record, still in rows:
            raw = record.get("evidence")
            evidence: dict[str, Any] = raw if isinstance(raw, dict) else {}
            observed = evidence.get("observed_s")
            print(
                f"{sanitise.safe_text(str(record.get('name')), 40):<40} "
                f"owner {sanitise.safe_text(str(record.get('owner') or '-'), 24):<24} "
                f"idle {units.duration(observed if isinstance(observed, (int, float)) else None)} "
                f"GPU {sanitise.safe_text(str(evidence.get('gpu_request', '?')), 24)} "
                f"due since {sanitise.safe_text(str(record.get('at')), 20)} "
                + ("still idle" if still else "IN USE OR GONE NOW: not stoppable"),
                file=out,
            )
        if args.stop is None:
            return 0
        match = [r for r in rows if r[1].get("name") == args.stop or r[0] == args.stop]
        if not match:
            audit.append(_action(host, args.stop, None, "stop-refused", "not due for reclaim"))
            return fail(f"{args.stop} is not due for reclaim: nothing was stopped")
        cid, record, still = match[0]
        name = str(record.get("name"))
        if not still:
            audit.append(_action(host, name, cid, "stop-refused", "in use or gone now", record))
            return fail(f"{name} is in use or gone now: nothing was stopped", 1)
        control = live_control(collector)
        if control is None:
            audit.append(_action(host, name, cid, "stop-refused", "no Docker engine", record))
            return fail("no Docker engine to stop containers with: nothing was stopped", 1)
        shown = sanitise.safe_text(name, 60)
        print(f"Type the container's name ({shown}) to stop it: ", end="", file=err)
        err.flush()
        answer = stdin.readline(_MAX_ANSWER).strip()
        if answer != name:
            audit.append(
                _action(host, name, cid, "stop-refused", "confirmation did not match", record)
            )
            return fail("the name typed did not match: nothing was stopped", 1)
        problem = control.container_action(cid, "stop")
        if problem is not None:
            audit.append(_action(host, name, cid, "stop-failed", problem, record))
            return fail(f"{name} was not stopped: {problem}", 1)
        audit.append(_action(host, name, cid, "stop", "stopped", record))
        print(f"stopped {sanitise.safe_text(name, 60)}", file=out)
        return 0
    except UserFileError as exc:
        return fail(str(exc))
    finally:
        collector.close()


def _action(
    host: str,
    name: str,
    cid: str | None,
    kind: str,
    result: str,
    record: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An audit line for an action of this command, with the reclaim record's evidence."""
    now = time.time()
    return {
        "schema": SCHEMA,
        "at": utc(now, ""),
        "ts": now,
        "host": host,
        "event": kind,
        "action": "stop",
        "container_id": cid,
        "name": name,
        "owner": record.get("owner") if record else None,
        "by": _actor(),
        "result": result,
        "evidence": record.get("evidence") if record else None,
    }
