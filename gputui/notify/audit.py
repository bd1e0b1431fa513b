"""The idle-GPU policy's audit file: one JSON line per notice and per action, appended only.

Written through the one user-file writer (:func:`gputui.boundary.userfiles.open_user_append`: never
through a symlink, never another user's file, ``0600`` when created) and read through the one
reader. Each line holds when, what (a stage or an action and its result), which container,
who acted (the policy or the person at ``gputui reclaim``), and the evidence the verdict
rested on. Strings are sanitised before they are written (``gputui reclaim`` prints them).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gputui.boundary.sanitise import safe_text
from gputui.boundary.timestamps import utc
from gputui.boundary.userfiles import UserFileError, open_user_append, read_user_file
from gputui.derive.idle_policy import Notice

#: The audit file read by ``gputui reclaim`` at most this large (the newest lines matter).
AUDIT_LIMIT = 64 * 1024 * 1024
#: The schema of a line.
SCHEMA = "gputui.idle-audit/1"


def default_audit_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/gputui/idle-audit.jsonl`` (``~/.local/state`` when unset)."""
    env = os.environ if env is None else env
    base = env.get("XDG_STATE_HOME") or ""
    root = (
        Path(base)
        if os.path.isabs(base)
        else Path(env.get("HOME") or "~").expanduser() / ".local" / "state"
    )
    return root / "gputui" / "idle-audit.jsonl"


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return safe_text(value, 1000)
    if isinstance(value, float) and value != value:  # NaN is no JSON
        return None
    if isinstance(value, dict):
        return {safe_text(str(k), 64): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def notice_record(notice: Notice, host: str, **extra: Any) -> dict[str, Any]:
    """The audit line of a stage reached (``extra``: the action and its result, when one)."""
    return {
        "schema": SCHEMA,
        "at": utc(notice.at, ""),
        "ts": notice.at,
        "host": host,
        "event": notice.stage.value,
        "container_id": notice.container_id,
        "name": notice.name,
        "owner": notice.owner,
        "auto": notice.auto,
        "by": "policy",
        "evidence": dict(notice.evidence),
        **extra,
    }


class AuditLog:
    """Appends lines to the audit file (from any thread; one line is one ``write``).

    Args:
        path: The file (its directory is created ``0700`` when missing).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def append(self, record: Mapping[str, Any]) -> None:
        """Write one line.

        Raises:
            UserFileError: the file cannot be written safely (one line naming it).
        """
        line = json.dumps(_clean(dict(record)), allow_nan=False, ensure_ascii=False) + "\n"
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            except OSError as exc:
                raise _failed(self.path, exc) from None
            fd = open_user_append(self.path, "audit file")
            try:
                # O_APPEND and one write: lines of two writers never interleave.
                os.write(fd, line.encode("utf-8"))
            except OSError as exc:
                raise _failed(self.path, exc) from None
            finally:
                os.close(fd)


def _failed(path: Path, exc: OSError) -> UserFileError:
    reason = str(exc.strerror or exc)
    return UserFileError(f"cannot write audit file {path}: {reason}", reason)


class _BadNumber(ValueError):
    """A number that is not finite, or out of range, in an audit line."""


def _constant(name: str) -> None:
    raise _BadNumber(name)


def _float(text: str) -> float:
    value = float(text)
    if not abs(value) <= 1e300:  # also NaN and infinities (1e999)
        raise _BadNumber(text[:20])
    return value


def _int(text: str) -> int:
    if len(text.lstrip("-")) > 18:  # no count or time gputui writes is that long
        raise _BadNumber(text[:20])
    return int(text)


def read_audit(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The audit file's records, oldest first, and how many lines were unreadable.

    A missing file has none. Lines that are not JSON (or not UTF-8) are skipped and counted
    (a line cut by a full disk must not hide the rest); a JSON line holding a non-finite or
    out-of-range number makes the file invalid.

    Raises:
        UserFileError: the file cannot be read safely, or holds such a number (one line).
    """
    if not os.path.lexists(path):
        return [], 0
    raw = read_user_file(path, "audit file", AUDIT_LIMIT)
    out: list[dict[str, Any]] = []
    skipped = 0
    for number, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line, parse_constant=_constant, parse_float=_float, parse_int=_int)
        except _BadNumber:
            reason = f"line {number} holds a number that is not finite or out of range"
            raise UserFileError(f"cannot read audit file {path}: {reason}", reason) from None
        except (ValueError, RecursionError):
            skipped += 1
            continue
        if isinstance(record, dict) and record.get("schema") == SCHEMA:
            out.append(record)
        else:
            skipped += 1
    return out, skipped
