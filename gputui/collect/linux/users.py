"""User names of uids: the one lookup of the host's user database that every reader shares.

A process's user, a container process's user, the owner of a rootless engine's socket and the
user running gputui are all shown the same way: the host's name for the uid, else the number
(as ``ps`` and psutil show a uid with no passwd entry).
"""

from __future__ import annotations

import pwd

#: Names a :class:`UserNames` remembers: a host has far fewer users; a hostile or huge /proc
#: cannot grow the cache past this.
MAX_REMEMBERED = 1024


def user_name(uid: int) -> str | None:
    """The host's name for ``uid``; None when its user database has none.

    A uid out of the C type's range (a hostile /proc or engine answer) has none either.
    """
    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, OverflowError, ValueError):
        return None


class UserNames:
    """uid → the name shown (the host's name, else the number), remembered up to a limit.

    Args:
        limit: The most names remembered; later uids are looked up each time.
    """

    def __init__(self, limit: int = MAX_REMEMBERED) -> None:
        self._names: dict[int, str] = {}
        self._limit = limit

    def __call__(self, uid: int) -> str:
        """The name shown for ``uid``."""
        name = self._names.get(uid)
        if name is None:
            name = user_name(uid) or str(uid)
            if len(self._names) < self._limit:
                self._names[uid] = name
        return name

    def clear(self) -> None:
        """Forget every name (a user renamed or added since is looked up again)."""
        self._names.clear()
