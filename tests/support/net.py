"""Loopback helpers for tests that run servers (exporters, Prometheus, textual-serve).

A plain module, not a conftest: several test directories have a ``conftest`` of their own, and
``from conftest import …`` would get whichever of them was imported first.
"""

from __future__ import annotations

import socket


def free_port() -> int:
    """A loopback TCP port nobody listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
