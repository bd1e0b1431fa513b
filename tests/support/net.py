"""Loopback helpers for tests that run servers (exporters, Prometheus, textual-serve).

A plain module, not a conftest: several test directories have a ``conftest`` of their own, and
``from conftest import …`` would get whichever of them was imported first.
"""

from __future__ import annotations

import socket
import sys
from http.server import ThreadingHTTPServer
from typing import Any


def free_port() -> int:
    """A loopback TCP port nobody listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class QuietHTTPServer(ThreadingHTTPServer):
    """A loopback test server that says nothing when a client hangs up mid-answer.

    Slow- and hostile-peer tests end their client's wait on purpose; the server's write then
    meets a closed socket, which ``socketserver`` would print as a traceback in the test run's
    output. Any other error is still printed.
    """

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Print the error unless the client had gone (broken pipe, connection reset)."""
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)
