"""Reading the small pseudo-files of /proc and /sys fast, and the one way descriptors stay open.

They are read for every GPU process and every running container on every refresh; pathlib and
text I/O cost several times the read itself, so this goes through raw syscalls. Every file read
on every refresh (a process's ``stat`` and ``statm``, a container's cgroup files, ``/proc/stat``
for the cgroup sampler) is kept open by :class:`KeptFiles` and read again with ``os.pread``; the
per-process reader's pidfds are held there too, so that one budget bounds them all.
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource

_CHUNK = 65536
_OPEN_FLAGS = os.O_RDONLY | os.O_CLOEXEC
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


#: The soft descriptor limit a long-running collector raises itself to (when the hard limit
#: allows): room for the /proc reader's and the cgroup reader's caps of kept descriptors.
WANTED_FDS = 65_536


def raise_fd_limit(wanted: int = WANTED_FDS) -> tuple[int, int] | None:
    """Raise the soft ``RLIMIT_NOFILE`` toward the hard limit, to ``wanted`` at most.

    Most login sessions start with a soft limit of 1,024 under a hard one hundreds of times
    larger (kept low for programs that use ``select``; gputui waits with ``poll``). At 1,024
    the readers may keep only a few hundred descriptors, and every other process's files are
    opened and closed again each read: the /proc read of 2,000 GPU processes costs half as
    much again. A lower soft limit is never asked for.

    Args:
        wanted: The soft limit wanted.

    Returns:
        ``(old, new)`` soft limits when it was raised, else None.
    """
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY or soft >= wanted:
            return None
        new = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
        if new <= soft:
            return None
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
    except (OSError, ValueError):  # a sandbox that refuses it: the readers keep fewer
        return None
    return soft, new


def read_small(path: str | os.PathLike[str]) -> str | None:
    """The whole file as text (bad bytes replaced), or None when it cannot be read."""
    data = _read_whole(path)
    return None if data is None else data.decode(errors="replace")


def _read_whole(path: str | os.PathLike[str]) -> bytes | None:
    """The whole file's bytes, or None when it cannot be read."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
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
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_capped(path: str | os.PathLike[str], limit: int) -> tuple[bytes | None, int]:
    """Read at most ``limit`` bytes of a file.

    Args:
        path: The file.
        limit: The most bytes to read; a longer file is cut there.

    Returns:
        ``(data, 0)``, or ``(None, errno)`` when it could not be opened or read.
    """
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        return None, exc.errno or errno.EIO
    try:
        chunks: list[bytes] = []
        size = 0
        # /proc files arrive whole in one read; the loop is for the rest of the file system.
        while size < limit:
            chunk = os.read(fd, limit - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks), 0
    except OSError as exc:
        return None, exc.errno or errno.EIO
    finally:
        os.close(fd)


def _pread(fd: int, limit: int | None) -> bytes:
    """The file behind ``fd`` from offset 0: ``limit`` bytes at most, or all of it (None)."""
    if limit is not None:
        return os.pread(fd, limit, 0)
    data = os.pread(fd, _CHUNK, 0)
    if len(data) == _CHUNK:  # longer than one chunk (never for these files): read the rest
        chunks = [data]
        while chunk := os.pread(fd, _CHUNK, _CHUNK * len(chunks)):
            chunks.append(chunk)
        data = b"".join(chunks)
    return data


class KeptFiles:
    """Descriptors of small files read on every refresh, kept open and re-read with ``pread``.

    One ``pread`` replaces open, read, read and close. Descriptors are grouped by an owner (a
    container id, a PID in digits) so that everything of one owner is closed at once; at most
    ``limit`` are open, later files are read the plain way (nothing is evicted: every file is
    read once per refresh in turn, so evicting the least recently read one would reopen a file
    per read).

    A kept descriptor fails once what it was opened for is gone: a cgroup file whose directory
    was removed (ENODEV), a ``/proc/<pid>`` file whose process was reaped (ESRCH; it never reads
    a later process under the same PID). :meth:`read` and :meth:`read_raw` then close it and
    open the path afresh, which finds what now has that name; :meth:`read_kept` leaves that
    decision to the caller.

    Args:
        limit: The most descriptors kept open.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._fds: dict[str, dict[str, int]] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def has_room(self) -> bool:
        """Whether one more descriptor may be kept."""
        return self._count < self.limit

    def holds(self, owner: str, path: str | os.PathLike[str]) -> bool:
        """Whether a descriptor of ``path`` is kept for ``owner``."""
        owned = self._fds.get(owner)
        return owned is not None and os.fspath(path) in owned

    def read(self, owner: str, path: str | os.PathLike[str]) -> str | None:
        """The whole file's text (bad bytes replaced), or None when it cannot be read.

        Read through a kept descriptor when there is (or may be) one.
        """
        data, _ = self.read_raw(owner, path)
        return None if data is None else data.decode(errors="replace")

    def read_raw(
        self,
        owner: str,
        path: str | os.PathLike[str],
        limit: int | None = None,
        *,
        keep: bool = True,
    ) -> tuple[bytes | None, int]:
        """The file's bytes, through a kept descriptor when there is one.

        Args:
            owner: Whom the descriptor belongs to.
            path: The file.
            limit: The most bytes read (one ``pread``); None reads the whole file.
            keep: Whether a descriptor opened now may be kept (while there is room).

        Returns:
            ``(data, 0)``, or ``(None, errno)`` when the file could not be opened or read.
        """
        key = os.fspath(path)
        owned = self._fds.get(owner)
        fd = None if owned is None else owned.get(key)
        if fd is not None:
            try:
                return _pread(fd, limit), 0
            except OSError:
                self._close_one(owner, key)
        if not keep or self._count >= self.limit:
            if limit is not None:
                return read_capped(path, limit)
            whole = _read_whole(path)
            return (None, errno.EIO) if whole is None else (whole, 0)
        try:
            fd = os.open(path, _OPEN_FLAGS)
        except OSError as exc:
            return None, exc.errno or errno.EIO
        try:
            data = _pread(fd, limit)
        except OSError as exc:
            os.close(fd)
            return None, exc.errno or errno.EIO
        self._fds.setdefault(owner, {})[key] = fd
        self._count += 1
        return data, 0

    def read_kept(
        self, owner: str, path: str | os.PathLike[str], limit: int | None = None
    ) -> bytes | None:
        """The file's bytes through its kept descriptor only.

        Returns:
            None when no descriptor is kept for it or reading it failed (the descriptor stays
            kept: the caller decides, e.g. to close everything of that owner).
        """
        owned = self._fds.get(owner)
        fd = None if owned is None else owned.get(os.fspath(path))
        if fd is None:
            return None
        try:
            return _pread(fd, limit)
        except OSError:
            return None

    def adopt(self, owner: str, key: str, fd: int) -> bool:
        """Keep a descriptor opened elsewhere (a pidfd) with ``owner``'s, closed with them.

        Returns:
            False when there is no room (``fd`` stays the caller's) or ``key`` is taken.
        """
        owned = self._fds.setdefault(owner, {})
        if self._count >= self.limit or key in owned:
            if not owned:
                del self._fds[owner]
            return False
        owned[key] = fd
        self._count += 1
        return True

    def close_owner(self, owner: str) -> int:
        """Close every descriptor kept for ``owner``; how many there were."""
        owned = self._fds.pop(owner, {})
        for fd in owned.values():
            self._close_fd(fd)
        return len(owned)

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
