"""JSON measured before it is decoded.

Nesting depth and result counts are read from the raw bytes, so a hostile reply is refused
before ``json`` builds it; non-finite numbers are read as absent values.
"""

from __future__ import annotations

import itertools
import math

_NOT_QUOTES_OR_BRACKETS = bytes(b for b in range(256) if b not in b'"[]{}')
_BRACKET_DELTA = [0] * 256
for _open, _close in (b"[]", b"{}"):
    _BRACKET_DELTA[_open], _BRACKET_DELTA[_close] = 1, -1
_NOT_BRACKETS = bytes(b for b in range(256) if not _BRACKET_DELTA[b])


# -- JSON bodies ---------------------------------------------------------------------------------


def _brackets(body: bytes) -> bytes:
    """The brackets of a JSON text that are outside its strings, in order.

    Escaped backslashes, then escaped quotes are dropped (left to right, as JSON pairs them),
    so the quotes left alternate open and close; everything but quotes and brackets is dropped,
    and the pieces between quote pairs are the strings' brackets. The pieces are mostly empty
    or one byte (shared objects): a regex removing 2.6 million strings of a 30 MiB answer built
    590 MB of pieces, this about 40 MB.
    """
    marks = body.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_QUOTES_OR_BRACKETS)
    return b"".join(marks.split(b'"')[::2])


def json_shape(body: bytes, count_depth: int) -> tuple[int, int]:
    """How deeply a JSON text's arrays and objects nest, and how many open at ``count_depth``.

    Linear in the size of ``body``, in C, and without building any object: strings are dropped
    (:func:`_brackets`), the running depth after each bracket left is one byte of a ``bytes``
    (``itertools.accumulate``). The count lets a caller refuse an answer with too many results
    before decoding it: the items of a list at depth ``count_depth - 1`` open at
    ``count_depth``, i.e. where the depth steps from ``count_depth - 1`` to ``count_depth``.

    Args:
        body: The JSON text.
        count_depth: The depth (1 or more) whose arrays and objects are counted.
    """
    brackets = _brackets(body)
    if not brackets:
        return 0, 0
    try:
        depths = bytes(itertools.accumulate(map(_BRACKET_DELTA.__getitem__, brackets)))
    except ValueError:  # deeper than 255, or more closed than opened (not JSON): no count
        return json_depth(body), 0
    # Steps from k-1 to k cannot overlap each other, so bytes.count finds every one.
    opened = depths.count(bytes((count_depth - 1, count_depth)))
    if count_depth == 1 and depths[0] == 1:
        opened += 1
    return max(depths), opened


def json_depth(body: bytes) -> int:
    """How deeply the arrays and objects of a JSON text nest (strings are skipped).

    Linear in the size of ``body`` and flat in memory (the running depth is never stored).
    """
    brackets = _brackets(body)
    if not brackets:
        return 0
    return max(itertools.accumulate(map(_BRACKET_DELTA.__getitem__, brackets)))


def no_constant(name: str) -> None:
    """``NaN``, ``Infinity`` and ``-Infinity`` are not JSON: they are read as null."""
    return None


def finite_float(text: str) -> float | None:
    """A JSON number with a fraction or exponent; null when beyond a float's range.

    ``float`` makes ``1e999`` infinite; the caller gets an absent value instead.
    """
    value = float(text)
    return value if math.isfinite(value) else None
