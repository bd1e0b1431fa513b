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

import os
import re
from collections.abc import Mapping
from dataclasses import field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from gputui.boundary.userfiles import CONFIG_LIMIT, UserFileError, read_user_text
from gputui.config.alert_rules import parse_alerts
from gputui.config.ui_state import UiPrefs, load_ui_state, parse_ui
from gputui.config.values import ConfigError, one_line_error, shown_text, toml_parser
from gputui.derive.alerts import DEFAULT_RULES, AlertRule
from gputui.model.records import record
from gputui.model.settings import IdlePolicy, Prices, Settings

if TYPE_CHECKING:
    from gputui.notify.config import NotifyTarget

#: The name of the state file the monitor writes its preferences to.
UI_STATE_NAME = "ui-state.toml"


@record
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
        raise ConfigError(f"{origin}: fleet: unknown key {shown_text(extra[0])}")
    for key in keys:
        if key in raw and (not isinstance(raw[key], str) or len(raw[key]) > 4096):
            raise ConfigError(f"{origin}: fleet.{key} must be a string (at most 4096 characters)")
    return FleetPrefs(**{k: raw[k] for k in keys if k in raw})


@record
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
            raise ConfigError(f"{where}.{shown_text(key)} must be a number from 0 to {high:g}")
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
        raise ConfigError(f"{origin}: ledger: unknown key {shown_text(extra[0])}")
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


#: A container label key as Docker accepts them (reverse-DNS style, as labels are written).
_LABEL_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,127}")
#: At most this many owner labels.
MAX_OWNER_LABELS = 8


def parse_owners(raw: object, origin: str) -> tuple[str, ...]:
    """``[owners]``: the labels naming a container's owner, strongest first.

    ``label = "org.example.owner"`` names one, ``labels = [...]`` several; ``gputui.owner`` is
    always read after them.
    """
    if not isinstance(raw, dict):
        raise ConfigError(f"{origin}: owners must be a table")
    extra = sorted(set(raw) - {"label", "labels"})
    if extra:
        raise ConfigError(f"{origin}: owners: unknown key {shown_text(extra[0])}")
    given: list[object] = []
    if "label" in raw:
        given.append(raw["label"])
    if "labels" in raw:
        if not isinstance(raw["labels"], list):
            raise ConfigError(f"{origin}: owners.labels must be a list of label names")
        given.extend(raw["labels"])
    if len(given) > MAX_OWNER_LABELS:
        raise ConfigError(f"{origin}: owners: at most {MAX_OWNER_LABELS} labels")
    for key in given:
        if not isinstance(key, str) or not _LABEL_KEY.fullmatch(key):
            raise ConfigError(
                f"{origin}: owners: {shown_text(str(key))} is not a label name "
                "(letters, digits, . _ / -; e.g. org.example.owner)"
            )
    return tuple(dict.fromkeys(str(k) for k in given))


@record
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
        owner_labels: ``[owners]``: labels naming a container's owner, strongest first.
        engines: ``[engines] use``: the container engines read, as ``--engine`` values
            (a command-line ``--engine`` wins); empty reads every engine found.
    """

    path: Path | None = None
    alert_rules: tuple[AlertRule, ...] = DEFAULT_RULES
    ui: UiPrefs = UiPrefs()
    keys: Mapping[str, str] = field(default_factory=dict)
    fleet: FleetPrefs = FleetPrefs()
    notify: tuple[NotifyTarget, ...] = ()
    idle_policy: IdlePolicy = field(default_factory=IdlePolicy)
    ledger: LedgerPrefs = LedgerPrefs()
    owner_labels: tuple[str, ...] = ()
    engines: tuple[str, ...] = ()

    def applied(self, settings: Settings) -> Settings:
        """``settings`` with what the config adds to a collector's.

        The owner labels, and ``[engines] use`` unless ``--engine`` named engines (the
        command line wins).
        """
        return replace(
            settings,
            owner_labels=self.owner_labels,
            engines=settings.engines or self.engines,
        )


#: More engines than a host runs: a longer list is a mistake.
MAX_ENGINES = 32


def parse_engines(raw: object, origin: str) -> tuple[str, ...]:
    """``[engines] use = ["docker", "podman=unix:///run/podman/podman.sock"]``.

    Raises:
        ConfigError: not a table of a list of ``--engine`` values (each checked as the flag).
    """
    from gputui.collect.engines import EngineSpecError, parse_engine_spec

    if not isinstance(raw, dict):
        raise ConfigError(f"{origin}: [engines] must be a table")
    unknown = sorted(set(raw) - {"use"})
    if unknown:
        raise ConfigError(f"{origin}: [engines] has no key {shown_text(str(unknown[0]))}")
    use = raw.get("use", [])
    if not isinstance(use, list) or len(use) > MAX_ENGINES:
        raise ConfigError(f"{origin}: [engines] use must be a list of at most {MAX_ENGINES}")
    values: list[str] = []
    for value in use:
        if not isinstance(value, str):
            raise ConfigError(f'{origin}: [engines] use takes strings such as "podman"')
        try:
            parse_engine_spec(value)
        except EngineSpecError as exc:
            raise ConfigError(f"{origin}: [engines] use: {exc}") from None
        values.append(value)
    return tuple(values)


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


#: The config file's sections, each read by :func:`parse_config` (any other is a mistake).
SECTIONS = (
    "alerts",
    "ui",
    "keys",
    "fleet",
    "ledger",
    "notify",
    "idle_policy",
    "engines",
    "owners",
)


def parse_config(text: str, path: Path) -> Config:
    """The configuration in ``text`` (the content of ``path``).

    Raises:
        ConfigError: not TOML (also nested too deeply or holding an unconvertible number), or
            invalid.
    """
    toml = toml_parser()
    try:
        data = toml.loads(text)
    except toml.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {one_line_error(exc)}") from None
    except RecursionError:
        raise ConfigError(f"config file {path} is not valid TOML: nested too deeply") from None
    except ValueError:  # an integer over Python's int/str conversion limit (4300 digits)
        raise ConfigError(f"config file {path}: a number has too many digits") from None
    unknown = sorted(set(data) - set(SECTIONS))
    if unknown:
        raise ConfigError(f"{path}: unknown section {shown_text(unknown[0])}")
    ui = parse_ui(data.get("ui", {}), str(path))
    keys = parse_keys(data.get("keys", {}), str(path))
    fleet = parse_fleet(data.get("fleet", {}), str(path))
    notify: tuple[NotifyTarget, ...] = ()
    idle_policy = IdlePolicy()
    if "notify" in data or "idle_policy" in data:
        # Their parser (and the event and payload code it checks names against) only for a
        # file that has them: most starts deliver nothing.
        from gputui.notify.config import NotifyConfigError, parse_idle_policy, parse_targets

        try:
            notify = parse_targets(data, str(path))
            idle_policy = parse_idle_policy(data, str(path))
        except NotifyConfigError as exc:
            raise ConfigError(str(exc)) from None
    ledger = parse_ledger(data.get("ledger", {}), str(path))
    owner_labels = parse_owners(data.get("owners", {}), str(path))
    engines = parse_engines(data.get("engines", {}), str(path))
    return Config(
        path=path,
        alert_rules=parse_alerts(data, str(path)),
        ui=ui,
        keys=keys,
        fleet=fleet,
        notify=notify,
        idle_policy=idle_policy,
        ledger=ledger,
        owner_labels=owner_labels,
        engines=engines,
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
            raise ConfigError(f"{origin}: keys: {shown_text(name)} is not a binding name")
        if not isinstance(value, str) or not _KEY_LIST.fullmatch(value):
            raise ConfigError(f'{origin}: keys.{name}: expected keys such as "ctrl+x" or "f5,x"')
        keys[name] = value
    return keys
