"""The collector type the app takes, and the actions it offers (no Textual imports).

Kept apart from ``app.py`` so ``gputui.ui.run`` can name the collector type without loading
Textual, and so the palette and read-only rules are plain data. The collector protocol itself is
defined once, next to the collector (:mod:`gputui.collect.sources`).
"""

from __future__ import annotations

from gputui.collect.sources import CollectorProtocol, Player
from gputui.ui.state import TABS

#: What the app needs from a collector: the one protocol every front-end uses (the live
#: ``Collector`` and the replay's ``ReplayCollector`` implement it; ``player`` says which).
CollectorLike = CollectorProtocol

#: The replay controls the replay keys use (``CollectorLike.player``).
PlayerLike = Player


#: Actions only a replay offers; hidden everywhere (keys, footer, help, palette) otherwise.
REPLAY_ACTIONS = frozenset({"replay_step", "replay_seek"})

#: Seconds ``<`` / ``>`` (and ``[`` / ``]``) jump back / forward in a replay.
SEEK_SECONDS = 60.0

#: Actions that change the machine; gone from keys, footer, help and palette with --read-only.
WRITE_ACTIONS = frozenset({"exec_smi", "exec_interactive", "signal"})

#: (title, help, action) offered in the command palette, in order.
PALETTE: tuple[tuple[str, str, str], ...] = (
    *((f"Show {t.title()} tab", f"Switch to the {t} tab", f"show_tab('{t}')") for t in TABS),
    ("Pause / resume", "Stop or restart refreshing", "toggle_pause"),
    ("Slower refresh", "Increase the refresh interval", "interval(1)"),
    ("Faster refresh", "Decrease the refresh interval", "interval(-1)"),
    ("Filter processes", "Filter the process table", "filter"),
    ("Cycle sort", "Next process-table sort column", "sort"),
    ("Cycle history window", "1 / 5 / 30 minute sparklines", "window"),
    ("Re-run health checks", "Run the runtime-health checks now", "rerun_health"),
    ("Evidence", "Everything about the selected container on one screen", "evidence"),
    ("Replay: step back", "Show the previous recorded snapshot", "replay_step(-1)"),
    ("Replay: step forward", "Show the next recorded snapshot", "replay_step(1)"),
    ("Replay: back 60 s", "Jump a minute back in the recording", "replay_seek(-60)"),
    ("Replay: forward 60 s", "Jump a minute forward in the recording", "replay_seek(60)"),
    ("Toggle light / dark", "Switch between the light and dark theme", "toggle_theme"),
    ("nvidia-smi in container", "Run nvidia-smi in the selected container", "exec_smi"),
    ("nvidia-smi interactive", "Run nvidia-smi on the terminal", "exec_interactive"),
    ("SIGTERM process", "Ask the selected process to terminate", "signal(15)"),
    ("SIGKILL process", "Kill the selected process", "signal(9)"),
    ("Keys", "List every key binding", "help"),
)
