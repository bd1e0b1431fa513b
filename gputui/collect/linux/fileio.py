"""Reading the small pseudo-files of /proc and /sys fast.

They are read for every GPU process and every running container on every refresh; pathlib and
text I/O cost several times the read itself, so this goes through raw syscalls.
"""

from __future__ import annotations

import contextlib
import os
import resource

_CHUNK = 65536
#: Descriptors always left to the rest of gputui (sockets, the terminal, NVML, one-off reads).
FD_RESERVE = 256


def fd_budget(cap: int, share: int) -> int:
    """How many descriptors one reader may keep open.

    Args:
        cap: The most, whatever the limit.
        share: The reader gets ``1/share`` of what the soft ``RLIMIT_NOFILE`` leaves after
            :data:`FD_RESERVE`.
    """
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return 0
    if soft == resource.RLIM_INFINITY:
        return cap
    return max(0, min(cap, (soft - FD_RESERVE) // share))


def read_small(path: str | os.PathLike[str]) -> str | None:
    """The whole file as text (bad bytes replaced), or None when it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
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


def pread_small(fd: int) -> str | None:
    """The whole file behind ``fd`` from offset 0 (bad bytes replaced), or None on an error."""
    try:
        data = os.pread(fd, _CHUNK, 0)
        if len(data) == _CHUNK:  # longer than one chunk (never for these files): read the rest
            chunks = [data]
            while chunk := os.pread(fd, _CHUNK, _CHUNK * len(chunks)):
                chunks.append(chunk)
            data = b"".join(chunks)
    except OSError:
        return None
    return data.decode(errors="replace")


class KeptFiles:
    """Descriptors of small files read on every refresh, kept open and re-read with ``pread``.

    One ``pread`` replaces open, read, read and close. Descriptors are grouped by an owner
    (a container id) so that everything of one owner is closed at once; at most ``limit`` are
    open, later files are read the plain way (nothing is evicted: every file is read once per
    refresh in turn, so evicting the least recently read one would reopen a file per read).

    A kept descriptor of a cgroup file whose directory was removed fails (ENODEV); it is then
    closed and the path opened afresh, which finds a directory created again under that name.

    Args:
        limit: The most descriptors kept open.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._fds: dict[str, dict[str, int]] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def read(self, owner: str, path: str | os.PathLike[str]) -> str | None:
        """The file's text, through a kept descriptor when there is (or may be) one."""
        key = os.fspath(path)
        owned = self._fds.get(owner)
        fd = None if owned is None else owned.get(key)
        if fd is not None:
            text = pread_small(fd)
            if text is not None:
                return text
            self._close_one(owner, key)
        if self._count >= self.limit:
            return read_small(path)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        text = pread_small(fd)
        if text is None:
            os.close(fd)
            return None
        self._fds.setdefault(owner, {})[key] = fd
        self._count += 1
        return text

    def close_owner(self, owner: str) -> None:
        """Close every descriptor kept for ``owner``."""
        for fd in self._fds.pop(owner, {}).values():
            self._close_fd(fd)

    def close(self) -> None:
        """Close every kept descriptor."""
        for owner in list(self._fds):
            self.close_owner(owner)

    def owners(self) -> list[str]:
        """Owners with at least one kept descriptor."""
        return list(self._fds)

    def _close_one(self, owner: str, key: str) -> None:
        owned = self._fds.get(owner, {})
        fd = owned.pop(key, None)
        if not owned:
            self._fds.pop(owner, None)
        if fd is not None:
            self._close_fd(fd)

    def _close_fd(self, fd: int) -> None:
        self._count -= 1
        # EBADF cannot happen for a descriptor this class owns; closing is best effort.
        with contextlib.suppress(OSError):
            os.close(fd)

    def __del__(self) -> None:
        # Dropped without close() (a rebuilt source, tests): never leak descriptors.
        for owned in getattr(self, "_fds", {}).values():
            for fd in owned.values():
                with contextlib.suppress(OSError):
                    os.close(fd)
