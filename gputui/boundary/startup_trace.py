"""Start-up phase marks, written only when ``GPUTUI_STARTUP_TRACE`` names a file.

The first-frame benchmark sets the variable and reads the marks back to show where the time
between launch and the first frame with data goes (interpreter and imports, NVML's first
answer, the engine's, the health checks, Textual's import, the first paint). Without the
variable a mark costs one comparison: the file is never opened and nothing else is imported.

Each line is ``<unix time in seconds> <phase>``; the reader subtracts its own launch time.
"""

from __future__ import annotations

import os
import time

_PATH = os.environ.get("GPUTUI_STARTUP_TRACE") or None
_seen: set[str] = set()


def enabled() -> bool:
    """Whether marks are written (callers skip scheduling work for a mark when not)."""
    return _PATH is not None


def mark(phase: str) -> None:
    """Record that ``phase`` was reached (its first time only; a no-op unless traced).

    Args:
        phase: A short fixed name chosen by the caller (never outside input).
    """
    if _PATH is None or phase in _seen:
        return
    _seen.add(phase)
    from pathlib import Path

    from gputui.boundary.userfiles import UserFileError, open_user_append

    try:
        # O_APPEND: marks from the collector's and the UI's threads never overwrite each other.
        # Through the one writer: never a symlink followed, a FIFO opened or a file widened.
        fd = open_user_append(Path(_PATH), "startup trace")
        try:
            os.write(fd, f"{time.time():.6f} {phase}\n".encode())
        finally:
            os.close(fd)
    except (OSError, UserFileError):  # a trace that cannot be written must never disturb us
        pass
