"""Reading files a user names (scenarios, config, recordings) without trusting what they are.

A path on the command line may be a symlink to ``/dev/zero`` (an endless read), a FIFO (an open
that blocks until a writer comes), a terminal, or a gigabyte of junk. Every user file goes
through :func:`open_user_file`: opened non-blocking, checked to be a regular file and no larger
than a limit *before* a byte is read. :func:`read_user_file` then reads at most ``limit + 1``
bytes, so a file that grows while it is read is caught too. Memory stays bounded by the limit.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

#: Limits of the files gputui reads whole. A scenario or config is hand-written: megabytes are
#: already absurd. A ``--once --json`` report of a very large host is a few megabytes.
SCENARIO_LIMIT = 16 * 1024 * 1024
CONFIG_LIMIT = 1024 * 1024
REPORT_LIMIT = 64 * 1024 * 1024


class UserFileError(ValueError):
    """A user file that cannot be read safely; the message is one line naming the file."""


def _size(n: int) -> str:
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= factor:
            return f"{n / factor:g} {unit}"
    return f"{n} bytes"


def open_user_file(path: Path, what: str, limit: int) -> BinaryIO:
    """Open ``path`` for reading once it is known to be a regular file of at most ``limit`` bytes.

    Args:
        path: The file the user named (symlinks are followed, as a user expects).
        what: What it is for messages, e.g. ``"scenario file"``.
        limit: The largest size accepted, in bytes.

    Returns:
        A binary file object positioned at the start (the caller closes it).

    Raises:
        UserFileError: missing, unreadable, not a regular file, or larger than ``limit``.
    """
    try:
        # O_NONBLOCK: opening a FIFO without a writer returns at once instead of hanging; it has
        # no effect on a regular file, the only kind read afterwards. O_NOCTTY: a terminal
        # device named by mistake must not become our controlling terminal.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise UserFileError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UserFileError(f"cannot read {what} {path}: not a regular file")
        if info.st_size > limit:
            raise UserFileError(
                f"cannot read {what} {path}: larger than {_size(limit)} ({_size(info.st_size)})"
            )
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=1024 * 1024)
    except BaseException:
        os.close(fd)
        raise


def read_user_file(path: Path, what: str, limit: int) -> bytes:
    """The content of a regular file of at most ``limit`` bytes (see :func:`open_user_file`).

    Raises:
        UserFileError: missing, unreadable, not a regular file, or larger than ``limit`` (also
            when it grew past the limit after the size check).
    """
    with open_user_file(path, what, limit) as fh:
        try:
            data = fh.read(limit + 1)
        except OSError as exc:
            raise UserFileError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise UserFileError(f"cannot read {what} {path}: larger than {_size(limit)}")
    return data


def read_user_text(path: Path, what: str, limit: int) -> str:
    """:func:`read_user_file` decoded as UTF-8.

    Raises:
        UserFileError: as :func:`read_user_file`, or the file is not UTF-8 text.
    """
    data = read_user_file(path, what, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserFileError(f"{what} {path} is not UTF-8 text") from None
