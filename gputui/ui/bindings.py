"""The app's key bindings, in one table (the help screen and the footer are built from it)."""

from __future__ import annotations

from textual.binding import Binding, BindingType

from gputui.ui.actions import SEEK_SECONDS

_SEEK = int(SEEK_SECONDS)

APP_BINDINGS: list[BindingType] = [
    Binding("q", "quit", "Quit"),
    Binding("question_mark", "help", "Help", key_display="?"),
    Binding("1", "show_tab('containers')", "Containers tab", show=False),
    Binding("2", "show_tab('processes')", "Processes tab", show=False),
    Binding("3", "show_tab('health')", "Health tab", show=False),
    Binding("4", "show_tab('history')", "History tab", show=False),
    Binding("5", "show_tab('alerts')", "Alerts tab", show=False),
    Binding("slash", "filter", "Filter", key_display="/"),
    Binding("s", "sort", "Sort"),
    Binding("e", "evidence", "Evidence", tooltip="Everything about the selected container"),
    Binding("x", "exec_smi", "nvidia-smi", tooltip="nvidia-smi inside the container"),
    Binding("X", "exec_interactive", "smi -it", show=False, tooltip="nvidia-smi on the terminal"),
    Binding("T", "signal(15)", "SIGTERM", show=False, tooltip="SIGTERM the process (confirms)"),
    Binding("K", "signal(9)", "SIGKILL", show=False, tooltip="SIGKILL the process (confirms)"),
    Binding("r", "rerun_health", "Re-check", show=False, tooltip="Re-run health checks now"),
    Binding("w", "window", "Window", show=False, tooltip="History window 1 / 5 / 30 min"),
    Binding("p", "toggle_pause", "Pause"),
    Binding(
        "comma", "replay_step(-1)", "Back", key_display=",", tooltip="Replay: previous snapshot"
    ),
    Binding(
        "full_stop", "replay_step(1)", "Step", key_display=".", tooltip="Replay: next snapshot"
    ),
    Binding(
        "less_than_sign,left_square_bracket",
        f"replay_seek(-{_SEEK})",
        f"-{_SEEK}s",
        key_display="<",
        tooltip=f"Replay: {_SEEK} s back",
    ),
    Binding(
        "greater_than_sign,right_square_bracket",
        f"replay_seek({_SEEK})",
        f"+{_SEEK}s",
        key_display=">",
        tooltip=f"Replay: {_SEEK} s forward",
    ),
    Binding("plus,equals_sign", "interval(1)", "Slower", show=False, key_display="+"),
    Binding("minus", "interval(-1)", "Faster", show=False, key_display="-"),
    Binding("d", "toggle_theme", "Light/dark", show=False, tooltip="Toggle light / dark"),
]
