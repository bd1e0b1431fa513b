"""The configuration file: ``$XDG_CONFIG_HOME/gputui/config.toml`` or ``--config FILE``.

It holds alert rules and the monitor's preferences (``[ui]``, docs/alerts.md). A missing default
file means the defaults; a file named with ``--config`` must exist. Every problem is one line
naming the file and the key, so the CLI can print it and exit 2.

Preferences changed in the monitor (theme, interval, sort, layout, the collapsed GPU panel) are
remembered in a separate state file, ``ui-state.toml`` next to the default config file, which
gputui alone writes (atomically): the user's own file, its comments and its layout are never
rewritten. A value in the state file wins over the config file's ``[ui]``; a command-line flag
wins over both.
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import ModuleType
from typing import Any

from gputui.derive.alerts import DEFAULT_RULES, METRICS, AlertRule
from gputui.derive.idle_policy import IdlePolicy
from gputui.ledger.report import Prices
from gputui.notify.config import (
    NotifyConfigError,
    NotifyTarget,
    parse_idle_policy,
    parse_targets,
)
from gputui.process_fields import sort_names
from gputui.settings import MAX_INTERVAL_S, MIN_INTERVAL_S
from gputui.userfiles import CONFIG_LIMIT, UserFileError, read_user_text, replace_user_file


def _toml() -> ModuleType:
    """The TOML parser, imported when a file is read (most runs have no config file)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on Python 3.10 only
        import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]
    module: ModuleType = tomllib
    return module


class ConfigError(ValueError):
    """An unreadable or invalid config file; the message is one line."""


#: Themes ``[ui] theme`` accepts: Textual's built-in themes (a test checks they exist).
THEMES: tuple[str, ...] = (
    "textual-dark",
    "textual-light",
    "nord",
    "gruvbox",
    "catppuccin-mocha",
    "dracula",
    "tokyo-night",
    "monokai",
    "flexoki",
    "catppuccin-latte",
    "catppuccin-frappe",
    "catppuccin-macchiato",
    "solarized-light",
    "solarized-dark",
    "rose-pine",
    "rose-pine-moon",
    "rose-pine-dawn",
    "atom-one-dark",
    "atom-one-light",
    "ansi-dark",
    "ansi-light",
)
#: Process-table sort orders ``[ui] sort`` accepts: the per-process field table's, in ``s``'s
#: order.
SORTS: tuple[str, ...] = sort_names()
#: ``auto`` picks by terminal size; ``top`` always stacks the GPUs above the tabs; ``side``
#: puts them in a column beside the tabs whenever the terminal is wide enough for both.
LAYOUTS: tuple[str, ...] = ("auto", "top", "side")
#: Panels ``[ui] collapsed`` may name.
PANELS: tuple[str, ...] = ("gpus",)
#: The name of the state file the monitor writes its preferences to.
UI_STATE_NAME = "ui-state.toml"


@dataclass(frozen=True, slots=True)
class UiPrefs:
    """The monitor's preferences; None (or an absent panel) means "not set".

    Attributes:
        theme: A Textual theme name (:data:`THEMES`).
        interval: Seconds between refreshes.
        sort: The process table's sort order (:data:`SORTS`).
        layout: :data:`LAYOUTS`.
        collapsed: Panels shown collapsed (:data:`PANELS`); None when not set.
    """

    theme: str | None = None
    interval: float | None = None
    sort: str | None = None
    layout: str | None = None
    collapsed: tuple[str, ...] | None = None

    def merged(self, over: UiPrefs) -> UiPrefs:
        """These preferences with every value ``over`` sets replacing ours."""
        return UiPrefs(
            theme=over.theme if over.theme is not None else self.theme,
            interval=over.interval if over.interval is not None else self.interval,
            sort=over.sort if over.sort is not None else self.sort,
            layout=over.layout if over.layout is not None else self.layout,
            collapsed=over.collapsed if over.collapsed is not None else self.collapsed,
        )


@dataclass(frozen=True, slots=True)
class FleetPrefs:
    """``[fleet]``: the Prometheus ``gputui fleet`` reads, and its credentials.

    Attributes:
        prometheus: The query API's base URL (``--prometheus`` overrides it).
        token: A bearer token (``GPUTUI_PROMETHEUS_TOKEN`` overrides it).
        user: A basic-auth user (``GPUTUI_PROMETHEUS_USER`` overrides it).
        password: Its password (``GPUTUI_PROMETHEUS_PASSWORD``).
    """

    prometheus: str | None = None
    token: str | None = field(default=None, repr=False)
    user: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)


def parse_fleet(raw: object, origin: str) -> FleetPrefs:
    """The ``[fleet]`` table: string values only, no unknown keys.

    Raises:
        ConfigError: naming the problem (never a credential's value).
    """
    if not isinstance(raw, dict):
        raise ConfigError(f"{origin}: fleet must be a table")
    keys = ("prometheus", "token", "user", "password")
    extra = sorted(set(raw) - set(keys))
    if extra:
        raise ConfigError(f"{origin}: fleet: unknown key {_shown(extra[0])}")
    for key in keys:
        if key in raw and (not isinstance(raw[key], str) or len(raw[key]) > 4096):
            raise ConfigError(f"{origin}: fleet.{key} must be a string (at most 4096 characters)")
    return FleetPrefs(**{k: raw[k] for k in keys if k in raw})


@dataclass(frozen=True, slots=True)
class LedgerPrefs:
    """``[ledger]``: where the ledger is kept, whether this gputui writes it, and prices.

    Attributes:
        store: The store file (None: ``$XDG_STATE_HOME/gputui/ledger-<host>.sqlite``).
        write: Whether the monitor, ``export`` and ``record`` write it (``daemon`` always does).
        prices: kWh price, GPU-hour price per model, currency.
        idle_power_w: Idle power per GPU model name, watts (the energy split's baseline).
    """

    store: Path | None = None
    write: bool = True
    prices: Prices = field(default_factory=Prices)
    idle_power_w: Mapping[str, float] = field(default_factory=dict)


def _number_table(raw: object, where: str, high: float) -> dict[str, float]:
    if not isinstance(raw, dict) or len(raw) > 64:
        raise ConfigError(f"{where} must be a table of at most 64 model names")
    out = {}
    for key, value in raw.items():
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not 0 <= value <= high
            or len(key) > 128
        ):
            raise ConfigError(f"{where}.{_shown(key)} must be a number from 0 to {high:g}")
        out[key] = float(value)
    return out


def parse_ledger(raw: object, origin: str) -> LedgerPrefs:
    """The ``[ledger]`` table.

    Raises:
        ConfigError: naming the problem.
    """
    if not isinstance(raw, dict):
        raise ConfigError(f"{origin}: ledger must be a table")
    keys = ("store", "write", "kwh_price", "currency", "gpu_hour_price", "idle_power_w")
    extra = sorted(set(raw) - set(keys))
    if extra:
        raise ConfigError(f"{origin}: ledger: unknown key {_shown(extra[0])}")
    store = raw.get("store")
    if store is not None and (not isinstance(store, str) or not store or len(store) > 4096):
        raise ConfigError(f"{origin}: ledger.store must be a path")
    write = raw.get("write", True)
    if not isinstance(write, bool):
        raise ConfigError(f"{origin}: ledger.write must be true or false")
    kwh = raw.get("kwh_price")
    if kwh is not None and (
        isinstance(kwh, bool) or not isinstance(kwh, (int, float)) or not 0 <= kwh <= 1e6
    ):
        raise ConfigError(f"{origin}: ledger.kwh_price must be a number from 0 to 1e6")
    currency = raw.get("currency", "")
    if not isinstance(currency, str) or len(currency) > 8:
        raise ConfigError(f"{origin}: ledger.currency must be a string of at most 8 characters")
    prices = Prices(
        None if kwh is None else float(kwh),
        _number_table(raw.get("gpu_hour_price", {}), f"{origin}: ledger.gpu_hour_price", 1e6),
        currency,
    )
    idle = _number_table(raw.get("idle_power_w", {}), f"{origin}: ledger.idle_power_w", 5000)
    return LedgerPrefs(None if store is None else Path(store).expanduser(), write, prices, idle)


@dataclass(frozen=True, slots=True)
class Config:
    """What the config file says (or the defaults).

    Attributes:
        path: The file read, None when none exists.
        alert_rules: The alert rules in force.
        ui: The monitor's preferences: the config file's ``[ui]`` overridden by the state file.
        keys: ``[keys]``: binding name (``exec-smi``) to the keys that run it (``"ctrl+x"``).
        notify: ``[[notify]]``: where alerts, findings, faults and idle-policy notices go
            (docs/notify.md; parsed by :mod:`gputui.notify.config`).
        idle_policy: ``[idle_policy]``: the idle-GPU policy (off unless ``enabled``).
    """

    path: Path | None = None
    alert_rules: tuple[AlertRule, ...] = DEFAULT_RULES
    ui: UiPrefs = UiPrefs()
    keys: Mapping[str, str] = field(default_factory=dict)
    fleet: FleetPrefs = FleetPrefs()
    notify: tuple[NotifyTarget, ...] = ()
    idle_policy: IdlePolicy = field(default_factory=IdlePolicy)
    ledger: LedgerPrefs = LedgerPrefs()


def default_config_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/gputui/config.toml`` (``~/.config`` when the variable is unset)."""
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or ""
    # The XDG spec says a relative XDG_CONFIG_HOME is invalid and must be ignored.
    root = (
        Path(base) if os.path.isabs(base) else Path(env.get("HOME") or "~").expanduser() / ".config"
    )
    return root / "gputui" / "config.toml"


def ui_state_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/gputui/ui-state.toml``: where the monitor keeps what the user changed."""
    return default_config_path(env).with_name(UI_STATE_NAME)


def load_config(path: Path | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Read ``path`` (``--config``), else the default file when it exists; then the state file.

    Raises:
        ConfigError: an explicit file is missing, or any file is unreadable or invalid.
    """
    explicit = path is not None
    path = path if path is not None else default_config_path(env)
    config = Config()
    if explicit or path.exists():
        try:
            text = read_user_text(path, "config file", CONFIG_LIMIT)
        except UserFileError as exc:
            raise ConfigError(str(exc)) from None
        config = parse_config(text, path)
    state = load_ui_state(ui_state_path(env))
    return replace(config, ui=config.ui.merged(state))


def load_ui_state(path: Path) -> UiPrefs:
    """The preferences the monitor saved in ``path``; none when the file does not exist.

    Raises:
        ConfigError: the file is unreadable or invalid (the message says to delete it).
    """
    if not path.exists():
        return UiPrefs()
    toml = _toml()
    try:
        text = read_user_text(path, "ui state file", CONFIG_LIMIT)
        data = toml.loads(text)
    except UserFileError as exc:
        raise ConfigError(str(exc)) from None
    except (toml.TOMLDecodeError, RecursionError, ValueError) as exc:
        raise ConfigError(
            f"ui state file {path} is not valid TOML ({_one_line(exc)}); delete it to reset"
        ) from None
    unknown = sorted(set(data) - {"ui"})
    if unknown:
        raise ConfigError(f"ui state file {path}: unknown section {_shown(unknown[0])}")
    return parse_ui(data.get("ui", {}), f"ui state file {path}")


def parse_ui(raw: Any, origin: str) -> UiPrefs:
    """The ``[ui]`` table of a config (or state) document.

    Raises:
        ConfigError: naming the first bad key or value.
    """
    if not isinstance(raw, dict):
        raise ConfigError(f"{origin}: ui must be a table")
    unknown = sorted(set(raw) - {"theme", "interval", "sort", "layout", "collapsed"})
    if unknown:
        raise ConfigError(f"{origin}: ui: unknown key {_shown(unknown[0])}")

    def choice(key: str, allowed: tuple[str, ...]) -> str | None:
        value = raw.get(key)
        if value is None:
            return None
        if value not in allowed:
            raise ConfigError(
                f"{origin}: ui.{key}: {_shown(value)} is not one of {', '.join(allowed)}"
            )
        return str(value)

    interval = raw.get("interval")
    if interval is not None:
        if (
            not isinstance(interval, (int, float))
            or isinstance(interval, bool)
            or not MIN_INTERVAL_S <= interval <= MAX_INTERVAL_S  # also NaN
        ):
            raise ConfigError(
                f"{origin}: ui.interval: expected seconds from {MIN_INTERVAL_S} to "
                f"{MAX_INTERVAL_S:g}, got {_shown(interval)}"
            )
        interval = float(interval)
    collapsed = raw.get("collapsed")
    if collapsed is not None:
        if not isinstance(collapsed, list) or len(collapsed) > len(PANELS):
            raise ConfigError(
                f"{origin}: ui.collapsed: expected a list of panels ({', '.join(PANELS)}), "
                f"got {_shown(collapsed)}"
            )
        for panel in collapsed:
            if panel not in PANELS:
                raise ConfigError(
                    f"{origin}: ui.collapsed: {_shown(panel)} is not one of {', '.join(PANELS)}"
                )
        collapsed = tuple(dict.fromkeys(collapsed))
    return UiPrefs(
        theme=choice("theme", THEMES),
        interval=interval,
        sort=choice("sort", SORTS),
        layout=choice("layout", LAYOUTS),
        collapsed=collapsed,
    )


def _toml_value(value: str | float | tuple[str, ...]) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, str):
        # Only names from the fixed lists above reach here: no quote or control character.
        return f'"{value}"'
    return repr(float(value))


def ui_state_text(prefs: UiPrefs) -> str:
    """The state file's content: a comment and the ``[ui]`` table of the values set."""
    lines = [
        "# Written by gputui when you change a preference in the monitor; values here override",
        "# the [ui] table of config.toml. Delete this file to go back to config.toml.",
        "[ui]",
    ]
    for key in ("theme", "interval", "sort", "layout", "collapsed"):
        value = getattr(prefs, key)
        if value is not None:
            lines.append(f"{key} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


def save_ui_state(prefs: UiPrefs, path: Path) -> None:
    """Write ``prefs`` to the state file atomically, through the one user-file writer.

    A temporary file is renamed over it (a new file ``0600``; never through a symlink, never
    into a FIFO or directory: :func:`gputui.userfiles.replace_user_file`).

    Raises:
        OSError: the directory cannot be created.
        UserFileError: the file cannot be written safely.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    replace_user_file(path, "ui state file", ui_state_text(prefs).encode("utf-8"))


def parse_config(text: str, path: Path) -> Config:
    """The configuration in ``text`` (the content of ``path``).

    Raises:
        ConfigError: not TOML (also nested too deeply or holding an unconvertible number), or
            invalid.
    """
    toml = _toml()
    try:
        data = toml.loads(text)
    except toml.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {_one_line(exc)}") from None
    except RecursionError:
        raise ConfigError(f"config file {path} is not valid TOML: nested too deeply") from None
    except ValueError:  # an integer over Python's int/str conversion limit (4300 digits)
        raise ConfigError(f"config file {path}: a number has too many digits") from None
    ui = parse_ui(data.get("ui", {}), str(path))
    keys = parse_keys(data.get("keys", {}), str(path))
    fleet = parse_fleet(data.get("fleet", {}), str(path))
    try:
        notify = parse_targets(data, str(path))
        idle_policy = parse_idle_policy(data, str(path))
    except NotifyConfigError as exc:
        raise ConfigError(str(exc)) from None
    ledger = parse_ledger(data.get("ledger", {}), str(path))
    return Config(
        path=path,
        alert_rules=parse_alerts(data, str(path)),
        ui=ui,
        keys=keys,
        fleet=fleet,
        notify=notify,
        idle_policy=idle_policy,
        ledger=ledger,
    )


#: A binding name (``exec-smi``) and a key list as Textual writes them (``ctrl+x,f5``).
_BINDING_NAME = re.compile(r"[a-z][a-z0-9.-]{0,39}")
_KEY_LIST = re.compile(r"[A-Za-z0-9_+,-]{1,64}")
#: More remapped keys than gputui has actions is a mistake, not a keymap.
MAX_KEYS = 64


def parse_keys(raw: object, origin: str) -> dict[str, str]:
    """``[keys]``: binding names to keys.

    Which names exist is the monitor's to say (it notifies about unknown ones); here only their
    shape is checked, so ``--once`` never loads the UI.

    Raises:
        ConfigError: naming the first malformed entry.
    """
    if not isinstance(raw, dict):
        raise ConfigError(f"{origin}: keys must be a table")
    if len(raw) > MAX_KEYS:
        raise ConfigError(f"{origin}: keys: more than {MAX_KEYS} entries")
    keys: dict[str, str] = {}
    for name, value in raw.items():
        if not _BINDING_NAME.fullmatch(name):
            raise ConfigError(f"{origin}: keys: {_shown(name)} is not a binding name")
        if not isinstance(value, str) or not _KEY_LIST.fullmatch(value):
            raise ConfigError(f'{origin}: keys.{name}: expected keys such as "ctrl+x" or "f5,x"')
        keys[name] = value
    return keys


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
    # [ui]: parse_ui, [keys]: parse_keys, [fleet]: parse_fleet, [ledger]: parse_ledger,
    # [[notify]] and [idle_policy]: gputui.notify.config
    unknown = set(data) - {"alerts", "ui", "keys", "fleet", "ledger", "notify", "idle_policy"}
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
