"""Reading the small pseudo-files of /proc and /sys fast.

They are read for every GPU process and every running container on every refresh; pathlib and
text I/O cost several times the read itself, so this goes through raw syscalls.
"""

from __future__ import annotations

import os

_CHUNK = 65536


def read_small(path: str | os.PathLike[str]) -> str | None:
    """The whole file as text (bad bytes replaced), or None when it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        chunks = []
        while True:
            chunk = os.read(fd, _CHUNK)
            if not chunk:
                break
            chunks.append(chunk)
            if len(chunk) < _CHUNK // 2:  # /proc and /sys files arrive whole in one read
                more = os.read(fd, _CHUNK)
                if not more:
                    break
                chunks.append(more)
        return b"".join(chunks).decode(errors="replace")
    except OSError:
        return None
    finally:
        os.close(fd)
