"""The configuration file: ``$XDG_CONFIG_HOME/gputui/config.toml`` or ``--config FILE``.

Today it holds alert rules (docs/alerts.md). A missing default file means the defaults; a file
named with ``--config`` must exist. Every problem is one line naming the file and the key, so
the CLI can print it and exit 2.
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from gputui.collect.files import CONFIG_LIMIT, UserFileError, read_user_text
from gputui.derive.alerts import DEFAULT_RULES, METRICS, AlertRule

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]


class ConfigError(ValueError):
    """An unreadable or invalid config file; the message is one line."""


@dataclass(frozen=True, slots=True)
class Config:
    """What the config file says (or the defaults).

    Attributes:
        path: The file read, None when none exists.
        alert_rules: The alert rules in force.
    """

    path: Path | None = None
    alert_rules: tuple[AlertRule, ...] = DEFAULT_RULES


def default_config_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/gputui/config.toml`` (``~/.config`` when the variable is unset)."""
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or ""
    # The XDG spec says a relative XDG_CONFIG_HOME is invalid and must be ignored.
    root = (
        Path(base) if os.path.isabs(base) else Path(env.get("HOME") or "~").expanduser() / ".config"
    )
    return root / "gputui" / "config.toml"


def load_config(path: Path | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Read ``path`` (``--config``), else the default file when it exists.

    Raises:
        ConfigError: an explicit file is missing, or any file is unreadable or invalid.
    """
    explicit = path is not None
    path = path if path is not None else default_config_path(env)
    if not explicit and not path.exists():
        return Config()
    try:
        text = read_user_text(path, "config file", CONFIG_LIMIT)
    except UserFileError as exc:
        raise ConfigError(str(exc)) from None
    return parse_config(text, path)


def parse_config(text: str, path: Path) -> Config:
    """The configuration in ``text`` (the content of ``path``).

    Raises:
        ConfigError: not TOML (also nested too deeply or holding an unconvertible number), or
            invalid.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {_one_line(exc)}") from None
    except RecursionError:
        raise ConfigError(f"config file {path} is not valid TOML: nested too deeply") from None
    except ValueError:  # an integer over Python's int/str conversion limit (4300 digits)
        raise ConfigError(f"config file {path}: a number has too many digits") from None
    return Config(path=path, alert_rules=parse_alerts(data, str(path)))


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:200]


#: Numbers beyond these are no threshold anyone means, and larger integers (TOML hex literals
#: have no digit limit) overflow float().
_MAX_NUMBER = 1e18
#: Durations beyond a year are no alert window anyone means; bounded so waits stay finite.
MAX_DURATION_S = 366 * 86400.0


def _shown(value: Any) -> str:
    """A short rendering of a bad value: repr() of a huge integer would raise ValueError."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > _MAX_NUMBER:
        return "an integer too large"
    if isinstance(value, (list, dict)):
        return "an array" if isinstance(value, list) else "a table"
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:59] + "…"


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d)$")
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(value: Any, where: str) -> float:
    """Seconds from a number or a string such as ``"90s"``, ``"5m"``, ``"1h"``.

    Raises:
        ConfigError: anything else, or a negative duration.
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if isinstance(value, int) and abs(value) > MAX_DURATION_S:
            raise ConfigError(f"{where}: must be at most {MAX_DURATION_S:g} seconds")
        seconds = float(value)
    elif isinstance(value, str) and _DURATION.match(value.strip()):
        match = _DURATION.match(value.strip())
        assert match is not None
        seconds = float(match.group(1)) * _SECONDS[match.group(2)]
    else:
        raise ConfigError(
            f'{where}: expected a duration such as 90, "90s", "5m", got {_shown(value)}'
        )
    if not math.isfinite(seconds) or seconds < 0:
        raise ConfigError(f"{where}: must be a finite, non-negative duration")
    if seconds > MAX_DURATION_S:
        raise ConfigError(f"{where}: must be at most {MAX_DURATION_S:g} seconds")
    return seconds


#: More samples than a day of refreshes at the fastest interval is no rule anyone means.
_MAX_SAMPLES = 864_000

#: Config key -> AlertRule field, for the keys whose names differ (``for`` is a keyword).
_RENAMED = {"for": "for_s", "window": "window_s"}
_NUMBERS = {"threshold", "k", "min_delta"}


def _rule(raw: Any, where: str) -> AlertRule:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: must be a table")
    allowed = ({f.name for f in fields(AlertRule)} - set(_RENAMED.values())) | set(_RENAMED)
    unknown = set(raw) - allowed
    if unknown:
        raise ConfigError(f"{where}: unknown key {_shown(sorted(unknown)[0])}")
    for key in ("id", "metric"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise ConfigError(f"{where}.{key}: required, a non-empty string")
    if raw["metric"] not in METRICS:
        raise ConfigError(
            f"{where}.metric: {_shown(raw['metric'])} is not one of {', '.join(sorted(METRICS))}"
        )
    kwargs: dict[str, Any] = {"id": raw["id"], "metric": raw["metric"]}
    choices = {"kind": ("static", "dynamic"), "op": (">", "<"), "severity": ("warning", "critical")}
    for key, allowed_values in choices.items():
        if key in raw:
            if raw[key] not in allowed_values:
                raise ConfigError(f"{where}.{key}: must be one of {' '.join(allowed_values)}")
            kwargs[key] = raw[key]
    for key in _NUMBERS:
        if key in raw:
            v = raw[key]
            if (
                not isinstance(v, (int, float))
                or isinstance(v, bool)
                or not abs(v) <= _MAX_NUMBER  # also NaN; compares a huge int exactly
            ):
                raise ConfigError(
                    f"{where}.{key}: expected a number (finite, within ±1e18), got {_shown(v)}"
                )
            kwargs[key] = float(v)
    if "min_samples" in raw:
        v = raw["min_samples"]
        if not isinstance(v, int) or isinstance(v, bool) or not 2 <= v <= _MAX_SAMPLES:
            raise ConfigError(
                f"{where}.min_samples: expected an integer in [2, {_MAX_SAMPLES}], got {_shown(v)}"
            )
        kwargs["min_samples"] = v
    for key, name in _RENAMED.items():
        if key in raw:
            kwargs[name] = parse_duration(raw[key], f"{where}.{key}")
    if kwargs.get("kind", "static") == "static" and "threshold" not in raw:
        raise ConfigError(f"{where}.threshold: required for a static rule")
    if kwargs.get("kind") == "dynamic" and kwargs.get("k", 2.0) <= 0:
        raise ConfigError(f"{where}.k: must be positive")
    return AlertRule(**kwargs)


def parse_alerts(data: Mapping[str, Any], origin: str = "config") -> tuple[AlertRule, ...]:
    """The alert rules of a parsed config document (defaults merged in unless turned off).

    Raises:
        ConfigError: naming the first problem.
    """
    unknown = set(data) - {"alerts"}
    if unknown:
        raise ConfigError(f"{origin}: unknown section {_shown(sorted(unknown)[0])}")
    alerts = data.get("alerts", {})
    if not isinstance(alerts, dict):
        raise ConfigError(f"{origin}: alerts must be a table")
    extra = sorted(set(alerts) - {"defaults", "rules"})
    if extra:
        raise ConfigError(f"{origin}: alerts: unknown key {_shown(extra[0])}")
    defaults = alerts.get("defaults", True)
    if not isinstance(defaults, bool):
        raise ConfigError(f"{origin}: alerts.defaults must be true or false")
    raw_rules = alerts.get("rules", [])
    if not isinstance(raw_rules, list):
        raise ConfigError(f"{origin}: alerts.rules must be an array of tables ([[alerts.rules]])")
    rules = [_rule(r, f"{origin}: alerts.rules[{i}]") for i, r in enumerate(raw_rules)]
    ids = [r.id for r in rules]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ConfigError(f"{origin}: alerts.rules: duplicate id {_shown(duplicates[0])}")
    if not defaults:
        return tuple(rules)
    # A rule with a default's id replaces that default (how to change a built-in threshold).
    mine = {r.id for r in rules}
    return tuple(r for r in DEFAULT_RULES if r.id not in mine) + tuple(rules)


def load_rules(path: Path | None) -> tuple[tuple[AlertRule, ...], str | None]:
    """The alert rules of ``path`` (None: the default XDG file), and the problem if unusable.

    The CLI validates the file before the UI starts; if it has since become invalid, the TUI
    still starts, on the default rules, and says why (a monitor that refuses to run because of
    its alert config helps nobody).
    """
    try:
        return load_config(path).alert_rules, None
    except ConfigError as exc:
        return DEFAULT_RULES, str(exc)
