"""Protobuf messages written by hand: the few fields a test speaks to a gRPC peer (CRI, the
kubelet's pod-resources API), numbered as in the peer's own ``.proto``."""

from __future__ import annotations


def varint(n: int) -> bytes:
    """``n`` (not negative) as a protobuf varint."""
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number: int, value: int | str | bytes) -> bytes:
    """One field: an int as a varint, a string or bytes length-delimited."""
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    raw = value.encode() if isinstance(value, str) else value
    return varint(number << 3 | 2) + varint(len(raw)) + raw


def msg(*fields: tuple[int, int | str | bytes]) -> bytes:
    """A message of the given ``(number, value)`` fields, in order."""
    return b"".join(field(n, v) for n, v in fields)
