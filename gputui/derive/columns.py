"""Parallel flat arrays that one thread appends to while others read frozen views of them.

The history buffers are written on the collector's thread and read on the UI's. A reader must
see one refresh's state whole (times and values of equal length, no sample half-cut), and a
copy of every buffer per refresh would cost megabytes a second at 8 GPUs and 200 containers.
So the rows live in chunks of flat ``array``s: a sealed chunk is never written again, the open
chunk only grows, and cutting the oldest rows moves an offset (or drops whole chunks) instead of
deleting in place. A :class:`Frozen` view keeps references to the chunks and the open chunk's
length and newest row at the time it was taken, so later appends, cuts and a change of the
newest row (a fold) never reach it: taking one costs a few references, not a copy.

Pure, no Textual; only the writer thread calls the methods of :class:`Columns`.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    #: A column's values (``array`` is generic only to the type checker on Python 3.11).
    Values: TypeAlias = array[float]
else:
    Values: TypeAlias = array

#: One chunk: an array per column, all of one length.
Chunk: TypeAlias = "tuple[Values, ...]"


class Frozen:
    """The rows of a :class:`Columns` at one moment; nothing done to it later changes this.

    Reading (:meth:`column`) joins the chunks into one fresh array per column.
    """

    __slots__ = ("_head", "_last", "_open", "_open_len", "_sealed")

    def __init__(
        self,
        sealed: tuple[Chunk, ...],
        head: int,
        open_: Chunk,
        open_len: int,
        last: tuple[float, ...],
    ) -> None:
        self._sealed = sealed
        self._head = head
        self._open = open_
        self._open_len = open_len
        self._last = last

    def __len__(self) -> int:
        return sum(len(c[0]) for c in self._sealed) + self._open_len - self._head

    def column(self, index: int) -> Values:
        """One column's rows, oldest first, as a fresh array."""
        parts = [c[index] for c in self._sealed]
        n = self._open_len
        out: Values = array(self._open[index].typecode)
        head = self._head
        for part in parts:
            if head:
                out += part[head:]
                head = 0
            else:
                out += part
        if n:
            # The open chunk up to its newest row, which is taken as it was when frozen (a
            # fold may have changed it in place since). Nothing sealed: ``head < n``.
            if head < n - 1:
                out += self._open[index][head : n - 1]
            out.append(self._last[index])
        return out


class Columns:
    """Rows of floats in parallel columns, appended at the end and cut at the front.

    Args:
        typecodes: One ``array`` typecode per column (``d`` for epoch seconds, ``f`` where 4
            bytes a value will do).
        chunk: Rows per sealed chunk: the cut's granularity in memory (at most ``chunk`` cut
            rows stay allocated) and the number of arrays a long series holds.
    """

    __slots__ = ("_chunk", "_codes", "_head", "_open", "_sealed", "_sealed_len")

    def __init__(self, typecodes: str, chunk: int) -> None:
        self._codes = typecodes
        self._chunk = max(1, chunk)
        self._sealed: tuple[Chunk, ...] = ()
        self._sealed_len = 0
        self._head = 0  # rows of the first chunk (sealed, else the open one) already cut
        self._open: Chunk = self._new()

    def _new(self) -> Chunk:
        return tuple(array(code) for code in self._codes)

    def __len__(self) -> int:
        return self._sealed_len + len(self._open[0]) - self._head

    @property
    def allocated(self) -> int:
        """Rows held in memory, the cut ones still in a chunk included."""
        return self._sealed_len + len(self._open[0])

    @property
    def chunk(self) -> int:
        """Rows per chunk."""
        return self._chunk

    @chunk.setter
    def chunk(self, rows: int) -> None:
        self._chunk = max(1, rows)  # from the next chunk on

    def append(self, row: Sequence[float]) -> None:
        """Add a row at the end."""
        current = self._open
        if len(current[0]) >= self._chunk:
            self._sealed += (current,)
            self._sealed_len += len(current[0])
            current = self._open = self._new()
        for col, value in zip(current, row):  # noqa: B905 (one value per column: hot path)
            col.append(value)

    def last(self, column: int) -> float:
        """The newest row's value in ``column`` (the table must not be empty)."""
        return self._open[column][-1]

    def set_last(self, column: int, value: float) -> None:
        """Change the newest row's value in ``column`` (a frozen view keeps the old one)."""
        self._open[column][-1] = value

    def cut(self, rows: int) -> None:
        """Forget the oldest ``rows`` rows (all of them when there are fewer)."""
        if rows <= 0:
            return
        if rows >= len(self):
            self.clear()
            return
        head = self._head + rows
        sealed = self._sealed
        dropped = 0
        while dropped < len(sealed) and head >= len(sealed[dropped][0]):
            rows_in = len(sealed[dropped][0])
            head -= rows_in
            self._sealed_len -= rows_in
            dropped += 1
        if dropped:
            self._sealed = sealed[dropped:]
        self._head = head

    def count_below(self, column: int, value: float) -> int:
        """How many of the oldest rows have ``column`` below ``value`` (the column ascending)."""
        count = 0
        head = self._head
        for chunk in (*self._sealed, self._open):
            col = chunk[column]
            if len(col) > head:
                if col[-1] >= value:
                    return count + bisect_left(col, value, head) - head
                count += len(col) - head
            head = 0
        return count

    def keep_newest(self, rows: int) -> None:
        """Cut the oldest rows so that at most ``rows`` are left."""
        self.cut(len(self) - rows)

    def column(self, index: int) -> Values:
        """One column's rows, oldest first, as a fresh array (the writer's own reads)."""
        return self.freeze().column(index)

    def replace(self, columns: Sequence[Values]) -> None:
        """Replace every row with ``columns`` (one array per column, of equal lengths)."""
        self._sealed = ()
        self._sealed_len = 0
        self._head = 0
        self._open = tuple(columns)

    def clear(self) -> None:
        """Forget every row."""
        self.replace(self._new())

    def freeze(self) -> Frozen:
        """A view of the rows as they are now (a few references, no copy)."""
        current = self._open
        n = len(current[0])
        last = tuple([col[-1] for col in current]) if n else ()
        return Frozen(self._sealed, self._head, current, n, last)

    def nbytes(self) -> int:
        """Bytes of the values held (cut rows still in a chunk included)."""
        return sum(
            col.itemsize * len(col) for chunk in (*self._sealed, self._open) for col in chunk
        )
