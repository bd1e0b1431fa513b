"""The ``[[alerts]]`` grammar: each rule checked, one line naming the file and key on a bad one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from gputui.config.values import MAX_NUMBER, ConfigError, parse_duration, shown_text
from gputui.derive.alerts import DEFAULT_RULES, METRICS, AlertRule

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
        raise ConfigError(f"{where}: unknown key {shown_text(sorted(unknown)[0])}")
    for key in ("id", "metric"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise ConfigError(f"{where}.{key}: required, a non-empty string")
    if raw["metric"] not in METRICS:
        raise ConfigError(
            f"{where}.metric: {shown_text(raw['metric'])} is not one of "
            f"{', '.join(sorted(METRICS))}"
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
                or not abs(v) <= MAX_NUMBER  # also NaN; compares a huge int exactly
            ):
                raise ConfigError(
                    f"{where}.{key}: expected a number (finite, within ±1e18), got {shown_text(v)}"
                )
            kwargs[key] = float(v)
    if "min_samples" in raw:
        v = raw["min_samples"]
        if not isinstance(v, int) or isinstance(v, bool) or not 2 <= v <= _MAX_SAMPLES:
            raise ConfigError(
                f"{where}.min_samples: expected an integer in [2, {_MAX_SAMPLES}], "
                f"got {shown_text(v)}"
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
    alerts = data.get("alerts", {})
    if not isinstance(alerts, dict):
        raise ConfigError(f"{origin}: alerts must be a table")
    extra = sorted(set(alerts) - {"defaults", "rules"})
    if extra:
        raise ConfigError(f"{origin}: alerts: unknown key {shown_text(extra[0])}")
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
        raise ConfigError(f"{origin}: alerts.rules: duplicate id {shown_text(duplicates[0])}")
    if not defaults:
        return tuple(rules)
    # A rule with a default's id replaces that default (how to change a built-in threshold).
    mine = {r.id for r in rules}
    return tuple(r for r in DEFAULT_RULES if r.id not in mine) + tuple(rules)
