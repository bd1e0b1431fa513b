"""Small file reads and version parsing shared by the checks."""

from __future__ import annotations

import re
from pathlib import Path


def read_text(path: Path) -> tuple[str | None, str | None]:
    """Read a small text file.

    Returns:
        ``(text, None)`` on success, else ``(None, reason)`` where reason is ``"absent"``,
        ``"permission denied"`` or the OS error text.
    """
    try:
        return path.read_text(encoding="utf-8", errors="replace"), None
    except FileNotFoundError:
        return None, "absent"
    except PermissionError:
        return None, "permission denied"
    except OSError as exc:  # EIO on a flaky procfs entry, EISDIR on a bad root...
        return None, exc.strerror or str(exc)


_VERSION_NUMBERS = re.compile(r"\d+")


def version_tuple(text: str | None) -> tuple[int, ...] | None:
    """``"12.4.1"`` → ``(12, 4, 1)``; None for text without any number."""
    if text is None:
        return None
    numbers = _VERSION_NUMBERS.findall(text)
    if not numbers:
        return None
    return tuple(int(n) for n in numbers)


def major_minor(text: str | None) -> tuple[int, int] | None:
    """``"12.4.1"`` → ``(12, 4)``; ``"13"`` → ``(13, 0)``; None when unparsable."""
    parts = version_tuple(text)
    if parts is None:
        return None
    return (parts[0], parts[1] if len(parts) > 1 else 0)
