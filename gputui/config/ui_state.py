"""Preferences changed in the monitor, remembered in ``ui-state.toml`` next to the config file.

gputui alone writes that file (atomically), so the user's own file, its comments and its layout
are never rewritten. A value in the state file wins over the config file's ``[ui]``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gputui.boundary.userfiles import CONFIG_LIMIT, UserFileError, read_user_text, replace_user_file
from gputui.config.values import ConfigError, one_line_error, shown_text, toml_parser
from gputui.model.process_fields import sort_names
from gputui.model.records import record
from gputui.model.settings import MAX_INTERVAL_S, MIN_INTERVAL_S

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


@record
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


def load_ui_state(path: Path) -> UiPrefs:
    """The preferences the monitor saved in ``path``; none when the file does not exist.

    Raises:
        ConfigError: the file is unreadable or invalid (the message says to delete it).
    """
    if not path.exists():
        return UiPrefs()
    toml = toml_parser()
    try:
        text = read_user_text(path, "ui state file", CONFIG_LIMIT)
        data = toml.loads(text)
    except UserFileError as exc:
        raise ConfigError(str(exc)) from None
    except (toml.TOMLDecodeError, RecursionError, ValueError) as exc:
        raise ConfigError(
            f"ui state file {path} is not valid TOML ({one_line_error(exc)}); delete it to reset"
        ) from None
    unknown = sorted(set(data) - {"ui"})
    if unknown:
        raise ConfigError(f"ui state file {path}: unknown section {shown_text(unknown[0])}")
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
        raise ConfigError(f"{origin}: ui: unknown key {shown_text(unknown[0])}")

    def choice(key: str, allowed: tuple[str, ...]) -> str | None:
        value = raw.get(key)
        if value is None:
            return None
        if value not in allowed:
            raise ConfigError(
                f"{origin}: ui.{key}: {shown_text(value)} is not one of {', '.join(allowed)}"
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
                f"{MAX_INTERVAL_S:g}, got {shown_text(interval)}"
            )
        interval = float(interval)
    collapsed = raw.get("collapsed")
    if collapsed is not None:
        if not isinstance(collapsed, list) or len(collapsed) > len(PANELS):
            raise ConfigError(
                f"{origin}: ui.collapsed: expected a list of panels ({', '.join(PANELS)}), "
                f"got {shown_text(collapsed)}"
            )
        for panel in collapsed:
            if panel not in PANELS:
                raise ConfigError(
                    f"{origin}: ui.collapsed: {shown_text(panel)} is not one of {', '.join(PANELS)}"
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
    into a FIFO or directory: :func:`gputui.boundary.userfiles.replace_user_file`).

    Raises:
        OSError: the directory cannot be created.
        UserFileError: the file cannot be written safely.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    replace_user_file(path, "ui state file", ui_state_text(prefs).encode("utf-8"))
