"""The one reader and the one writer of files a user names (scenarios, config, recordings, answers).

A path on the command line (or in an environment variable, or a default path in a shared
directory) may be a symlink planted by another user, a FIFO (an open that blocks until a writer
comes), a terminal, a device such as ``/dev/zero`` (an endless read) or ``/dev/null``, a
directory, a hard link to someone else's file, or a gigabyte of junk. Every such file is opened
here, and nowhere else in gputui (``tests/unit/boundary/test_userfiles.py`` checks the source
with ``ast``):

Reading (:func:`open_user_file`, :func:`read_user_file`, :func:`read_user_text`; and
:func:`open_user_tail` for a file an engine names that grows, a container's log, read from its
end without the size limit):

* opened non-blocking (a FIFO without a writer opens at once) and without becoming the
  controlling terminal, then checked to be a regular file no larger than a limit *before* a
  byte is read; at most ``limit + 1`` bytes are read, so a file that grows meanwhile is caught;
* a symlink as the last component is followed only when it belongs to the user running gputui
  (or to root): a link planted by another user, in ``/tmp`` say, is refused. A user's own
  ``config.toml`` linked into a dotfiles repository keeps working.

Writing (:func:`open_user_append`, :func:`replace_user_file`):

* a symlink as the last component is never followed, whoever owns it (``O_NOFOLLOW``); only a
  regular file is written, never a FIFO, device or directory; the open is non-blocking;
* a file of another user is never written (its owner could read what gputui writes), and
  appending refuses a file with other hard links (it may be someone else's file reached
  through a directory an attacker can write); a rewrite replaces the name, never the inode;
* a new file is created ``0600`` (the umask can only narrow it); an existing file keeps its
  mode: nothing gputui writes is ever made more readable than it was;
* a whole-file rewrite is atomic: a temporary file created with ``O_EXCL`` in the same
  directory, written, ``fsync``-ed, then renamed over the target (a reader sees the old or the
  new content, never a part; a planted symlink is replaced, its target untouched).

Every failure is a :class:`UserFileError` whose message is one line naming the file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    import sqlite3

#: Limits of the files gputui reads whole. A scenario or config is hand-written: megabytes are
#: already absurd. A ``--once --json`` report of a very large host is a few megabytes.
SCENARIO_LIMIT = 16 * 1024 * 1024
CONFIG_LIMIT = 1024 * 1024
REPORT_LIMIT = 64 * 1024 * 1024

#: Mode of every file gputui creates: recordings hold the command lines of every user, answer
#: files what a Prometheus told an authorised client. Existing files keep theirs.
NEW_FILE_MODE = 0o600

_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class UserFileError(ValueError):
    """A user file that cannot be read or written safely; the message is one line naming it.

    Attributes:
        reason: Why, without the file's name (for messages that name the file themselves).
    """

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def _size(n: int) -> str:
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= factor:
            return f"{n / factor:g} {unit}"
    return f"{n} bytes"


def _kind(mode: int) -> str | None:
    """Why a file of this mode is not written or read: None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a directory"
    if stat.S_ISFIFO(mode):
        return "is a FIFO (named pipe), not a regular file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "is a device, not a regular file"
    if stat.S_ISSOCK(mode):
        return "is a socket, not a regular file"
    if stat.S_ISLNK(mode):
        return "is a symbolic link"
    return "is not a regular file"


def _trusted(uid: int) -> bool:
    """Whether a symlink owned by ``uid`` may be followed: the user's own, or root's."""
    return uid in (0, os.geteuid())


def _fail(verb: str, what: str, path: Path, reason: str) -> UserFileError:
    return UserFileError(f"cannot {verb} {what} {path}: {reason}", reason)


def _os_reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


# -- reading ---------------------------------------------------------------------------------


def _open_for_reading(path: Path, what: str) -> int:
    """A descriptor of ``path`` opened for reading; a symlink only when :func:`_trusted`."""
    try:
        return os.open(path, _READ_FLAGS | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise _fail("read", what, path, _os_reason(exc)) from None
    # The last component is a symlink (or there are too many levels of them).
    try:
        link = os.lstat(path)
        if not _trusted(link.st_uid):
            raise _fail(
                "read",
                what,
                path,
                f"is a symbolic link of another user (uid {link.st_uid}), not followed",
            )
        fd = os.open(path, _READ_FLAGS)
    except OSError as exc:
        raise _fail("read", what, path, _os_reason(exc)) from None
    # Swapped for another user's link between the check and the open: refuse what was opened.
    try:
        again = os.lstat(path)
    except OSError:
        again = None
    if again is None or (again.st_dev, again.st_ino, again.st_uid) != (
        link.st_dev,
        link.st_ino,
        link.st_uid,
    ):
        os.close(fd)
        raise _fail("read", what, path, "changed while it was opened")
    return fd


def open_user_file(path: Path, what: str, limit: int) -> BinaryIO:
    """Open ``path`` for reading once it is known to be a regular file of at most ``limit`` bytes.

    Args:
        path: The file the user named. A symlink is followed when it is the user's own (or
            root's), never when another user owns it.
        what: What it is for messages, e.g. ``"scenario file"``.
        limit: The largest size accepted, in bytes.

    Returns:
        A binary file object positioned at the start (the caller closes it).

    Raises:
        UserFileError: missing, unreadable, another user's symlink, not a regular file, or
            larger than ``limit``.
    """
    fd, info = _open_regular(path, what)
    try:
        if info.st_size > limit:
            raise _fail("read", what, path, f"larger than {_size(limit)} ({_size(info.st_size)})")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=1024 * 1024)
    except BaseException:
        os.close(fd)
        raise


def _open_regular(path: Path, what: str) -> tuple[int, os.stat_result]:
    """A descriptor of ``path`` and its status, once it is known to be a regular file.

    Raises:
        UserFileError: missing, unreadable, another user's symlink, or not a regular file.
    """
    # O_NONBLOCK: opening a FIFO without a writer returns at once instead of hanging; it has no
    # effect on a regular file, the only kind read afterwards. O_NOCTTY: a terminal device
    # named by mistake must not become our controlling terminal.
    fd = _open_for_reading(path, what)
    try:
        info = os.fstat(fd)
        kind = _kind(info.st_mode)
        if kind is not None:
            raise _fail("read", what, path, kind)
    except OSError as exc:
        os.close(fd)
        raise _fail("read", what, path, _os_reason(exc)) from None
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def read_user_file(path: Path, what: str, limit: int) -> bytes:
    """The content of a regular file of at most ``limit`` bytes (see :func:`open_user_file`).

    Raises:
        UserFileError: as :func:`open_user_file` (also when the file grew past the limit after
            the size check).
    """
    with open_user_file(path, what, limit) as fh:
        try:
            data = fh.read(limit + 1)
        except OSError as exc:
            raise _fail("read", what, path, _os_reason(exc)) from None
    if len(data) > limit:
        raise _fail("read", what, path, f"larger than {_size(limit)}")
    return data


def open_user_tail(path: Path, what: str, tail_bytes: int) -> tuple[BinaryIO, int]:
    """Open a regular file of any size positioned at its last ``tail_bytes`` bytes.

    For a file that grows (a container's log): the caller reads on from there, in bounded
    pieces, as it is written. Opened as :func:`open_user_file` opens (non-blocking, no
    controlling terminal, another user's symlink refused, only a regular file), without its
    size limit: nothing before the tail is read.

    Args:
        path: The file.
        what: What it is for messages, e.g. ``"container log"``.
        tail_bytes: How many of its last bytes to start from.

    Returns:
        The file object (the caller closes it) and how many bytes before the tail were skipped.

    Raises:
        UserFileError: missing, unreadable, another user's symlink, or not a regular file.
    """
    fd, info = _open_regular(path, what)
    try:
        skipped = max(0, info.st_size - max(0, tail_bytes))
        os.lseek(fd, skipped, os.SEEK_SET)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=0), skipped
    except OSError as exc:
        os.close(fd)
        raise _fail("read", what, path, _os_reason(exc)) from None
    except BaseException:
        os.close(fd)
        raise


def read_user_text(path: Path, what: str, limit: int) -> str:
    """:func:`read_user_file` decoded as UTF-8.

    Raises:
        UserFileError: as :func:`read_user_file`, or the file is not UTF-8 text.
    """
    data = read_user_file(path, what, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserFileError(f"{what} {path} is not UTF-8 text", "not UTF-8 text") from None


# -- writing ---------------------------------------------------------------------------------


_NOT_FOLLOWED = "is a symbolic link (not followed: name the file itself)"
_OTHER_USER = "belongs to another user (uid {uid}): remove it or choose another file"


def _write_refusal(path: Path, exc: OSError) -> str:
    """Why an open for writing failed, naming a symlink, FIFO or directory as such."""
    if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR, errno.EOPNOTSUPP):
        # ELOOP: O_NOFOLLOW met a symlink; ENXIO: a FIFO without a reader (O_NONBLOCK) or a
        # device without its driver; EISDIR: a directory.
        with contextlib.suppress(OSError):
            kind = _kind(os.lstat(path).st_mode)
            if kind == "is a symbolic link":
                return _NOT_FOLLOWED
            if kind is not None:
                return kind
    return _os_reason(exc)


def open_user_append(path: Path, what: str, *, readable: bool = False) -> int:
    """Open ``path`` for appending, creating it ``0600`` when it does not exist.

    Args:
        path: The file. A symlink is refused (never followed), whoever owns it.
        what: What it is for messages, e.g. ``"recording"``.
        readable: Open read-write (to look at the existing content with ``pread``).

    Returns:
        A blocking descriptor opened with ``O_APPEND`` (the caller closes it).

    Raises:
        UserFileError: a symlink, not a regular file, another user's file, a file with other
            hard links, or the open failed.
    """
    flags = (
        (os.O_RDWR if readable else os.O_WRONLY)
        | os.O_APPEND
        | os.O_CREAT
        | os.O_NOFOLLOW
        | os.O_NONBLOCK
        | os.O_NOCTTY
        | os.O_CLOEXEC
    )
    try:
        # The mode applies only when the file is created: an existing file keeps its own.
        fd = os.open(path, flags, NEW_FILE_MODE)
    except OSError as exc:
        raise _fail("write", what, path, _write_refusal(path, exc)) from None
    try:
        info = os.fstat(fd)
        kind = _kind(info.st_mode)
        if kind is not None:
            raise _fail("write", what, path, kind)
        if info.st_uid != os.geteuid():
            raise _fail("write", what, path, _OTHER_USER.format(uid=info.st_uid))
        if info.st_nlink != 1:
            # A hard link in a directory others can write may be someone else's file.
            raise _fail("write", what, path, f"has {info.st_nlink} hard links, not appended to")
        os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def replace_user_file(path: Path, what: str, data: bytes, *, durable: bool = True) -> None:
    """Write ``data`` as the whole content of ``path``, atomically.

    The data goes to a new temporary file in the same directory (``O_EXCL``, never a symlink),
    which is ``fsync``-ed and renamed over ``path``. A new file is ``0600``; an existing one
    keeps its mode.

    Args:
        path: The file. A symlink, FIFO, device or directory there is refused.
        what: What it is for messages, e.g. ``"answers file"``.
        data: The new content.
        durable: ``fsync`` the file before the rename and the directory after it.

    Raises:
        UserFileError: not a regular file (or a symlink), or the directory cannot be written.
    """
    mode = NEW_FILE_MODE
    try:
        current: os.stat_result | None = os.lstat(path)
    except FileNotFoundError:
        current = None
    except OSError as exc:
        raise _fail("write", what, path, _os_reason(exc)) from None
    if current is not None:
        kind = _kind(current.st_mode)
        if kind == "is a symbolic link":
            raise _fail("write", what, path, _NOT_FOLLOWED)
        if kind is not None:
            raise _fail("write", what, path, kind)
        if current.st_uid != os.geteuid():
            # Its owner chose its mode and can change it at any time: do not fill it for them.
            raise _fail("write", what, path, _OTHER_USER.format(uid=current.st_uid))
        mode = stat.S_IMODE(current.st_mode) & 0o777  # as it was: never widened
    directory = path.parent
    fd = -1
    temp = directory
    for _ in range(16):
        # A fixed-length suffix; the name is cut so that it stays under NAME_MAX. os.urandom,
        # not secrets: the same bytes, without 5 ms of imports (hashlib, hmac) on every start.
        temp = directory / f".{path.name[:200]}.{os.urandom(6).hex()}.tmp"
        try:
            fd = os.open(
                temp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                NEW_FILE_MODE,
            )
            break
        except FileExistsError:
            continue
        except OSError as exc:
            raise _fail("write", what, path, _os_reason(exc)) from None
    else:
        raise _fail("write", what, path, "no temporary file could be created beside it")
    try:
        try:
            if mode != NEW_FILE_MODE:
                os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise _fail("write", what, path, _os_reason(exc)) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    if durable:
        # The rename itself survives a crash once the directory is on disk (best effort: some
        # file systems refuse to open a directory for fsync).
        with contextlib.suppress(OSError):
            dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)


# -- databases -------------------------------------------------------------------------------

#: The files SQLite keeps beside a database (WAL mode and rollback journal).
DATABASE_SIDECARS = ("-wal", "-shm", "-journal")


def open_user_database(
    path: Path, what: str, *, write: bool, immutable: bool = False
) -> sqlite3.Connection:
    """Connect to the SQLite database at ``path`` once it and its side files are safe to open.

    SQLite opens paths itself (and follows symlinks), so the checks come first: the database and
    its ``-wal``, ``-shm`` and ``-journal`` files must be regular files (a symlink is never
    followed, whoever owns it), and written only when they are the user's own. A new database
    is created here, ``0600``, with ``O_NOFOLLOW``; SQLite then opens it with a ``mode=rw`` (or
    ``mode=ro``) URI, so it never creates a file itself, and the name is checked to still be the
    file that was checked (a swap between the check and SQLite's open is refused).

    Args:
        path: The database.
        what: What it is for messages, e.g. ``"ledger store"``.
        write: Open read-write (creating the file), else read-only (it must exist).
        immutable: Read-only and without locks or a shared-memory file (``immutable=1``): for
            a database nobody writes on a file system that cannot be written.

    Returns:
        An autocommit connection usable from any thread (the caller serialises its use).

    Raises:
        UserFileError: a symlink, not a regular file, another user's file (for writing), or the
            file cannot be opened.
    """
    verb = "write" if write else "read"
    for suffix in ("", *DATABASE_SIDECARS):
        side = path.with_name(path.name + suffix)
        try:
            info = os.lstat(side)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise _fail(verb, what, side, _os_reason(exc)) from None
        kind = _kind(info.st_mode)
        if kind == "is a symbolic link":
            raise _fail(verb, what, side, _NOT_FOLLOWED)
        if kind is not None:
            raise _fail(verb, what, side, kind)
        if write and info.st_uid != os.geteuid():
            raise _fail(verb, what, side, _OTHER_USER.format(uid=info.st_uid))
    flags = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    flags |= (os.O_RDWR | os.O_CREAT) if write else os.O_RDONLY
    try:
        fd = os.open(path, flags, NEW_FILE_MODE)
    except OSError as exc:
        raise _fail(verb, what, path, _write_refusal(path, exc)) from None
    try:
        opened = os.fstat(fd)
        kind = _kind(opened.st_mode)
        if kind is not None:
            raise _fail(verb, what, path, kind)
        if write and opened.st_nlink != 1:
            raise _fail(verb, what, path, f"has {opened.st_nlink} hard links, not written")
        uri = f"file:{urllib.parse.quote(str(path))}?mode={'rw' if write else 'ro'}"
        if immutable and not write:
            uri += "&immutable=1"
        import sqlite3  # here: every command reads user files, few open a database

        try:
            conn = sqlite3.connect(uri, uri=True, timeout=5.0, check_same_thread=False)
        except sqlite3.Error as exc:
            raise _fail(verb, what, path, str(exc)) from None
        conn.isolation_level = None  # transactions are explicit
        try:
            now = os.lstat(path)
        except OSError:
            now = None
        if now is None or (now.st_dev, now.st_ino) != (opened.st_dev, opened.st_ino):
            conn.close()
            raise _fail(verb, what, path, "changed while it was opened")
        return conn
    finally:
        # Before SQLite takes any lock on the file: closing another descriptor of it would
        # release SQLite's POSIX locks.
        os.close(fd)
