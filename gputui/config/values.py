"""The value grammar every configuration section shares: one-line errors, durations, numbers."""

from __future__ import annotations

import math
import re
import sys
from types import ModuleType
from typing import Any


def toml_parser() -> ModuleType:
    """The TOML parser, imported when a file is read (most runs have no config file)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on Python 3.10 only
        import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]
    module: ModuleType = tomllib
    return module


class ConfigError(ValueError):
    """An unreadable or invalid config file; the message is one line."""


def one_line_error(exc: Exception) -> str:
    """An exception's message on one line, at most 200 characters."""
    return " ".join(str(exc).split())[:200]


#: Numbers beyond these are no threshold anyone means, and larger integers (TOML hex literals
#: have no digit limit) overflow float().
MAX_NUMBER = 1e18
#: Durations beyond a year are no alert window anyone means; bounded so waits stay finite.
MAX_DURATION_S = 366 * 86400.0


def shown_text(value: Any) -> str:
    """A short rendering of a bad value: repr() of a huge integer would raise ValueError."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_NUMBER:
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
            f'{where}: expected a duration such as 90, "90s", "5m", got {shown_text(value)}'
        )
    if not math.isfinite(seconds) or seconds < 0:
        raise ConfigError(f"{where}: must be a finite, non-negative duration")
    if seconds > MAX_DURATION_S:
        raise ConfigError(f"{where}: must be at most {MAX_DURATION_S:g} seconds")
    return seconds
