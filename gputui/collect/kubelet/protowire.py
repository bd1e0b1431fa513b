"""A bounded reader of the protobuf wire format, for the few gRPC messages gputui speaks.

No generated code and no ``protobuf`` package: a message is a run of ``(field number, wire
type, value)`` records, and the callers pick the fields of the schema they know, message by
message, so the nesting is the schema's (a few levels), never the sender's. Every read is
bounded by the buffer it is given; a varint is at most ten bytes, a length never runs past the
end, and the deprecated group wire types are refused. The few requests gputui sends (the
kubelet's pod-resources, containerd's CRI) are written with :func:`encode`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

#: The wire types (``key & 7``).
VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5
#: A varint encodes at most 64 bits: ten bytes of seven.
_MAX_VARINT_BYTES = 10
#: Field numbers above this are not protobuf's (2**29 - 1).
_MAX_FIELD = (1 << 29) - 1


class WireError(ValueError):
    """Bytes that are not a protobuf message (one line, for a status)."""


class Budget:
    """How many fields one decode may read, and until when: shared by every nested message.

    A reply of a few MiB can hold a million tiny fields, seconds of Python: the budget makes
    that a bounded error instead.

    Args:
        fields: The most fields read, over all messages.
        seconds: The longest the decode may take.
    """

    _CLOCK_EVERY = 4096

    def __init__(self, fields: int, seconds: float) -> None:
        self.left = fields
        self.deadline = time.monotonic() + seconds

    def spend(self) -> None:
        """Count one field.

        Raises:
            WireError: the fields or the time are spent.
        """
        self.left -= 1
        if self.left < 0:
            raise WireError("more fields than such a reply holds")
        if self.left % self._CLOCK_EVERY == 0 and time.monotonic() > self.deadline:
            raise WireError("the reply took too long to decode")


def _varint(data: memoryview, at: int) -> tuple[int, int]:
    value = shift = 0
    for n in range(_MAX_VARINT_BYTES):
        if at + n >= len(data):
            raise WireError("a varint runs past the end of the message")
        byte = data[at + n]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at + n + 1
        shift += 7
    raise WireError("a varint is longer than ten bytes")


def fields(
    data: bytes | memoryview, budget: Budget | None = None
) -> Iterator[tuple[int, int, int | memoryview]]:
    """Each ``(number, wire_type, value)`` of one message, in order.

    A varint or fixed field's value is its integer; a length-delimited one's its bytes (a view
    of ``data``, not a copy).

    Args:
        data: The message's bytes.
        budget: Counts each field read (None: no limit beyond the bytes).

    Raises:
        WireError: the bytes end inside a field, a varint is over-long, a field number is 0 or
            out of range, a wire type is a group (3, 4) or unknown (6, 7), or the budget is
            spent.
    """
    view = data if isinstance(data, memoryview) else memoryview(data)
    at = 0
    while at < len(view):
        if budget is not None:
            budget.spend()
        key, at = _varint(view, at)
        number, kind = key >> 3, key & 7
        if not 0 < number <= _MAX_FIELD:
            raise WireError(f"field number {number} is out of range")
        if kind == VARINT:
            value, at = _varint(view, at)
            yield number, kind, value
        elif kind == LENGTH:
            size, at = _varint(view, at)
            if size > len(view) - at:
                raise WireError("a field's length runs past the end of the message")
            yield number, kind, view[at : at + size]
            at += size
        elif kind in (FIXED64, FIXED32):
            width = 8 if kind == FIXED64 else 4
            if at + width > len(view):
                raise WireError("a fixed-width field runs past the end of the message")
            yield number, kind, int.from_bytes(view[at : at + width], "little")
            at += width
        else:
            raise WireError(f"wire type {kind} is not one of proto3's")


def text(value: int | memoryview, limit: int) -> str:
    """A string field's text, at most ``limit`` characters.

    Raises:
        WireError: the field is not length-delimited (a wrong type for a string), or is longer
            than ``limit`` bytes of UTF-8 times four.
    """
    if not isinstance(value, memoryview):
        raise WireError("a string field is not length-delimited")
    if len(value) > limit * 4:
        raise WireError(f"a string field is over {limit} characters")
    return bytes(value).decode("utf-8", errors="replace")[:limit]


def signed(value: int | memoryview, bits: int = 64) -> int:
    """A varint field's value as a signed ``int32`` / ``int64`` (two's complement, 64 bits).

    Raises:
        WireError: the field is not a varint, or out of range for ``bits``.
    """
    if not isinstance(value, int):
        raise WireError("an integer field is length-delimited")
    number = value - (1 << 64) if value >= 1 << 63 else value
    if not -(1 << (bits - 1)) <= number < 1 << (bits - 1):
        raise WireError(f"an int{bits} field is out of range")
    return number


def _varint_bytes(n: int) -> bytes:
    n &= (1 << 64) - 1  # a negative int64 is its two's complement: ten bytes
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def encode(*records: tuple[int, int | str | bytes]) -> bytes:
    """A message of ``(number, value)`` fields, in order.

    An int is a varint (a negative one its ten-byte two's complement), text or bytes
    length-delimited; a repeated field is the same number given again.
    """
    out = bytearray()
    for number, value in records:
        if isinstance(value, int):
            out += _varint_bytes(number << 3 | VARINT) + _varint_bytes(value)
        else:
            raw = value.encode() if isinstance(value, str) else value
            out += _varint_bytes(number << 3 | LENGTH) + _varint_bytes(len(raw)) + raw
    return bytes(out)


def message(value: int | memoryview) -> memoryview:
    """An embedded message's bytes.

    Raises:
        WireError: the field is not length-delimited.
    """
    if not isinstance(value, memoryview):
        raise WireError("an embedded message is not length-delimited")
    return value
