"""The ``[[notify]]`` targets of the config file (``gputui.config`` calls :func:`parse_targets`).

Each problem is one line naming the file and the key (:class:`NotifyConfigError`, which the
config turns into its own error: exit 2 at the command line). Secrets (a webhook URL's path
and query, header values, a command's arguments and environment values) are never part of a
message or a repr: :attr:`NotifyTarget.shown` is what may be printed, :meth:`NotifyTarget.secrets`
what every message is scrubbed of.
"""

from __future__ import annotations

import math
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from gputui.model.records import record
from gputui.model.settings import IdlePolicy
from gputui.notify.events import SEVERITIES, Kind
from gputui.notify.payloads import FORMATS


class NotifyConfigError(ValueError):
    """A bad ``[[notify]]`` entry (or ``[idle_policy]`` value); the message is one line."""


#: Target types.
TYPES: tuple[str, ...] = ("webhook", "command")
#: More targets than this is no configuration anyone means (each has a thread).
MAX_TARGETS = 16
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,39}")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d)$")
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_MAX_TEXT = 4096
#: Headers gputui writes itself.
_OWN_HEADERS = {"host", "content-length", "content-type", "connection", "transfer-encoding"}


@record
class NotifyTarget:
    """One ``[[notify]]`` entry.

    Attributes:
        name: Its name (in logs, ``doctor`` and Alertmanager's ``receiver``).
        type: ``webhook`` or ``command``.
        url: The webhook's URL (secret beyond scheme, host and port).
        format: ``json``, ``slack`` or ``alertmanager`` (webhooks).
        headers: Extra request headers (values secret).
        argv: The command and its arguments (run without a shell; arguments secret).
        env: Extra environment of the command (values secret).
        events: Kinds delivered (:class:`~gputui.notify.events.Kind` values).
        severity: The lowest severity delivered.
        resolved: Also deliver the end of what was delivered.
        timeout_s: One delivery's deadline (the whole HTTP exchange, or the command's run).
        repeat_s: The same transition again within this is not sent (deduplication).
        rate_limit: At most this many deliveries per hour; the rest are dropped and counted.
        retries: Further attempts after a 5xx reply, a timeout, an unreachable receiver or a
            command's failure.
        backoff_s: The first retry's delay; each next one doubles it.
    """

    name: str
    type: str
    url: str = field(default="", repr=False)
    format: str = "json"
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    argv: tuple[str, ...] = field(default=(), repr=False)
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    events: frozenset[str] = frozenset(k.value for k in Kind)
    severity: str = "warning"
    resolved: bool = True
    timeout_s: float = 5.0
    repeat_s: float = 4 * 3600.0
    rate_limit: int = 60
    retries: int = 4
    backoff_s: float = 1.0

    @property
    def shown(self) -> str:
        """What may be printed: ``webhook NAME (https://host:port/…)``, ``command NAME (prog)``."""
        if self.type == "command":
            program = self.argv[0].rsplit("/", 1)[-1] if self.argv else "?"
            return f"command {self.name} ({program})"
        return f"webhook {self.name} ({shown_url(self.url)})"

    def secrets(self) -> tuple[str, ...]:
        """Every configured value that must never be shown (for scrubbing messages)."""
        found: list[str] = []
        if self.url:
            parts = urllib.parse.urlsplit(self.url)
            # The host and port are shown; the path and query may hold a token (Slack's do).
            found += [self.url, parts.path, parts.query]
        found += [v for _, v in self.headers]
        found += list(self.argv[1:])
        found += [v for _, v in self.env]
        # Short values (a "1" header) would scrub ordinary text; they are no secret of length.
        return tuple(sorted({s for s in found if len(s) >= 4}, key=len, reverse=True))

    def wants(self, kind: str, severity_rank: int) -> bool:
        """Whether events of ``kind`` at this severity rank go to this target."""
        return kind in self.events and severity_rank >= SEVERITIES.index(self.severity)


def shown_url(url: str) -> str:
    """``scheme://host[:port]/…``: a URL without its path, query or credentials (secrets)."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        return "an invalid URL"
    host = parts.hostname or "?"
    host = f"[{host}]" if ":" in host else host
    tail = "/…" if parts.path.strip("/") or parts.query else ""
    return f"{parts.scheme}://{host}{f':{port}' if port else ''}{tail}"


def redact(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with every secret replaced by ``***`` (longest first)."""
    for secret in secrets:
        if secret and secret in text:
            text = text.replace(secret, "***")
    return text


def _duration(value: Any, where: str, low: float, high: float) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value) if abs(value) <= 1e12 else math.inf
    elif isinstance(value, str) and (match := _DURATION.match(value.strip())):
        seconds = float(match.group(1)) * _SECONDS[match.group(2)]
    else:
        raise NotifyConfigError(f'{where}: expected a duration such as 30, "30s", "5m", "4h"')
    if not low <= seconds <= high:  # also NaN and infinities
        raise NotifyConfigError(f"{where}: must be from {low:g} to {high:g} seconds")
    return seconds


def _integer(value: Any, where: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise NotifyConfigError(f"{where}: expected an integer from {low} to {high}")
    return value


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value or len(value) > _MAX_TEXT or "\x00" in value:
        raise NotifyConfigError(
            f"{where}: expected a non-empty string (at most {_MAX_TEXT} characters, no NUL)"
        )
    return value


def _table(value: Any, where: str, key_pattern: re.Pattern[str]) -> tuple[tuple[str, str], ...]:
    """A table of strings; the message names a bad key, never a value (values are secrets)."""
    if not isinstance(value, dict) or len(value) > 64:
        raise NotifyConfigError(f"{where}: expected a table of at most 64 strings")
    out = []
    for key, item in value.items():
        if not key_pattern.fullmatch(key):
            raise NotifyConfigError(f"{where}: {key[:40]!r} is not a valid name")
        out.append((key, _text(item, f"{where}.{key}")))
    return tuple(sorted(out))


def _header_safe(value: str) -> bool:
    # The bounded client's rule, imported only for a config with webhooks: a one-shot report
    # must not load the HTTP client (socket, ssl) just to read the config file.
    from gputui.collect.http_client import safe_header_value

    return safe_header_value(value)


def _url(value: Any, where: str) -> str:
    text = _text(value, where)
    try:
        parts = urllib.parse.urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        raise NotifyConfigError(f"{where}: not a URL (its value is not shown)") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise NotifyConfigError(f"{where}: expected an http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        raise NotifyConfigError(f"{where}: credentials do not belong in the URL: use headers")
    if not text.isascii() or not _header_safe(text) or " " in text:
        # Sent as the request line: ASCII only (percent-encode anything else).
        raise NotifyConfigError(
            f"{where}: the URL holds a space, a control or a non-ASCII character"
        )
    return text


_COMMON = {"name", "type", "events", "severity", "resolved", "timeout", "repeat"}
_COMMON |= {"rate_limit", "retries", "backoff"}
_KEYS = {"webhook": _COMMON | {"url", "format", "headers"}, "command": _COMMON | {"argv", "env"}}


def _target(raw: Any, where: str) -> NotifyTarget:
    if not isinstance(raw, dict):
        raise NotifyConfigError(f"{where}: must be a table ([[notify]])")
    kind = raw.get("type")
    if kind not in TYPES:
        raise NotifyConfigError(f"{where}.type: required, one of {', '.join(TYPES)}")
    unknown = sorted(set(raw) - _KEYS[kind])
    if unknown:
        raise NotifyConfigError(f"{where}: unknown key {unknown[0][:40]!r} for a {kind}")
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise NotifyConfigError(
            f"{where}.name: required, letters, digits, '.', '_' or '-' (at most 40)"
        )
    kwargs: dict[str, Any] = {"name": name, "type": kind}
    if kind == "webhook":
        if "url" not in raw:
            raise NotifyConfigError(f"{where}.url: required for a webhook")
        kwargs["url"] = _url(raw["url"], f"{where}.url")
        if "format" in raw:
            if raw["format"] not in FORMATS:
                raise NotifyConfigError(f"{where}.format: one of {', '.join(FORMATS)}")
            kwargs["format"] = raw["format"]
        if "headers" in raw:
            headers = _table(raw["headers"], f"{where}.headers", _HEADER_NAME)
            for key, value in headers:
                if key.lower() in _OWN_HEADERS:
                    raise NotifyConfigError(f"{where}.headers: {key} is written by gputui")
                if not _header_safe(value):
                    raise NotifyConfigError(
                        f"{where}.headers.{key}: holds a control or non-Latin-1 character"
                    )
            kwargs["headers"] = headers
    else:
        argv = raw.get("argv")
        if not isinstance(argv, list) or not argv or len(argv) > 64:
            raise NotifyConfigError(
                f"{where}.argv: required, a list of 1 to 64 strings (run without a shell)"
            )
        kwargs["argv"] = tuple(_text(a, f"{where}.argv[{i}]") for i, a in enumerate(argv))
        if "env" in raw:
            kwargs["env"] = _table(raw["env"], f"{where}.env", _ENV_NAME)
        kwargs["timeout_s"] = 10.0
    if "events" in raw:
        events = raw["events"]
        names = [k.value for k in Kind]
        if not isinstance(events, list) or not events or any(e not in names for e in events):
            raise NotifyConfigError(f"{where}.events: a list of {', '.join(names)}")
        kwargs["events"] = frozenset(events)
    if "severity" in raw:
        if raw["severity"] not in SEVERITIES:
            raise NotifyConfigError(f"{where}.severity: one of {', '.join(SEVERITIES)}")
        kwargs["severity"] = raw["severity"]
    if "resolved" in raw:
        if not isinstance(raw["resolved"], bool):
            raise NotifyConfigError(f"{where}.resolved: true or false")
        kwargs["resolved"] = raw["resolved"]
    if "timeout" in raw:
        kwargs["timeout_s"] = _duration(raw["timeout"], f"{where}.timeout", 0.1, 300.0)
    if "repeat" in raw:
        kwargs["repeat_s"] = _duration(raw["repeat"], f"{where}.repeat", 0.0, 30 * 86400.0)
    if "rate_limit" in raw:
        kwargs["rate_limit"] = _integer(raw["rate_limit"], f"{where}.rate_limit", 1, 100_000)
    if "retries" in raw:
        kwargs["retries"] = _integer(raw["retries"], f"{where}.retries", 0, 10)
    if "backoff" in raw:
        kwargs["backoff_s"] = _duration(raw["backoff"], f"{where}.backoff", 0.01, 300.0)
    return NotifyTarget(**kwargs)


def parse_targets(data: Mapping[str, Any], origin: str) -> tuple[NotifyTarget, ...]:
    """The ``[[notify]]`` array of a parsed config document (none when absent).

    Raises:
        NotifyConfigError: naming the file, the entry and the key; never a secret's value.
    """
    raw = data.get("notify", [])
    if not isinstance(raw, list):
        raise NotifyConfigError(f"{origin}: notify must be an array of tables ([[notify]])")
    if len(raw) > MAX_TARGETS:
        raise NotifyConfigError(f"{origin}: notify: more than {MAX_TARGETS} targets")
    targets = tuple(_target(r, f"{origin}: notify[{i}]") for i, r in enumerate(raw))
    names = [t.name for t in targets]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise NotifyConfigError(f"{origin}: notify: duplicate name {duplicates[0]!r}")
    return targets


_QUIET = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]):([0-5]\d)$")
_POLICY_DURATIONS = {
    "idle_for": ("idle_for_s", 60.0),
    "min_active": ("min_active_s", 0.0),
    "escalate_after": ("escalate_after_s", 0.0),
    "reclaim_after": ("reclaim_after_s", 0.0),
    "renotify": ("renotify_s", 0.0),
    "max_gap": ("max_gap_s", 1.0),
}
_POLICY_FLAGS = {"enabled", "auto_reclaim", "dry_run"}
_POLICY_KEYS = set(_POLICY_DURATIONS) | _POLICY_FLAGS | {"active_sm", "exclude", "quiet_hours"}
_POLICY_KEYS |= {"audit"}


def parse_idle_policy(data: Mapping[str, Any], origin: str) -> IdlePolicy:
    """The ``[idle_policy]`` table of a parsed config document (off when absent).

    Raises:
        NotifyConfigError: naming the file and the key.
    """
    raw = data.get("idle_policy", {})
    if not isinstance(raw, dict):
        raise NotifyConfigError(f"{origin}: idle_policy must be a table")
    unknown = sorted(set(raw) - _POLICY_KEYS)
    if unknown:
        raise NotifyConfigError(f"{origin}: idle_policy: unknown key {unknown[0][:40]!r}")
    where = f"{origin}: idle_policy"
    kwargs: dict[str, Any] = {}
    for key, (name, low) in _POLICY_DURATIONS.items():
        if key in raw:
            kwargs[name] = _duration(raw[key], f"{where}.{key}", low, 366 * 86400.0)
    for key in _POLICY_FLAGS:
        if key in raw:
            if not isinstance(raw[key], bool):
                raise NotifyConfigError(f"{where}.{key}: true or false")
            kwargs[key] = raw[key]
    if "active_sm" in raw:
        value = raw["active_sm"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 100:
            raise NotifyConfigError(f"{where}.active_sm: a percentage above 0, at most 100")
        kwargs["active_sm"] = float(value)
    if "exclude" in raw:
        patterns = raw["exclude"]
        if not isinstance(patterns, list) or len(patterns) > 256:
            raise NotifyConfigError(f"{where}.exclude: a list of name or image patterns")
        kwargs["exclude"] = tuple(_text(p, f"{where}.exclude[{i}]") for i, p in enumerate(patterns))
    if "quiet_hours" in raw:
        match = _QUIET.match(raw["quiet_hours"]) if isinstance(raw["quiet_hours"], str) else None
        if match is None:
            raise NotifyConfigError(f'{where}.quiet_hours: expected "HH:MM-HH:MM" (local time)')
        h1, m1, h2, m2 = (int(g) for g in match.groups())
        kwargs["quiet_hours"] = (h1 * 60 + m1, h2 * 60 + m2)
    if "audit" in raw:
        kwargs["audit"] = _text(raw["audit"], f"{where}.audit")
    return IdlePolicy(**kwargs)
