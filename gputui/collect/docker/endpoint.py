"""Where the Docker engine is, and small helpers around reaching it (no Docker SDK import).

Kept apart from :mod:`gputui.collect.docker.source`, which is about talking to the engine.
"""

from __future__ import annotations

import shutil
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Endpoint:
    """Where the client connects, resolved the way the docker CLI does.

    Attributes:
        base_url: ``unix:///var/run/docker.sock``, ``tcp://host:2376``...
        tls: The SDK's TLS configuration, or False.
        context: The docker CLI context it came from, if any.
        explicit: True when the URL was given to gputui, not taken from the environment/context.
    """

    base_url: str
    tls: Any
    context: str | None
    explicit: bool


def docker_cli_available() -> bool:
    """True when the ``docker`` CLI is on PATH (needed for the interactive exec)."""
    return shutil.which("docker") is not None


def one_line(exc: BaseException) -> str:
    """An exception as one line of at most 300 characters (for a status line)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def unix_socket_answers(url: str | None) -> bool:
    """Whether a local engine's unix socket accepts connections (False for other URLs).

    The source backs off after a failure so a dead remote engine does not cost a connect timeout
    on every refresh. A unix socket fails at once, so for a local engine a plain ``connect()``
    (tens of microseconds, no API call) tells when the engine is back: without it a restarted
    engine stayed "unreachable" for up to the whole back-off.
    """
    url = url or ""
    for scheme in ("unix://", "http+unix://"):
        if url.startswith(scheme):
            path = url[len(scheme) :]
            break
    else:
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        try:
            sock.connect(path)
        except OSError:
            return False
    return True


def interactive_argv(
    endpoint: Endpoint | None, container_id: str, argv: Sequence[str]
) -> list[str]:
    """The docker CLI command for an interactive ``exec -it`` (run under ``App.suspend()``).

    The CLI inherits ``DOCKER_HOST``/``DOCKER_CONTEXT`` from the environment, so a flag is only
    added for an explicit URL (``-H``) or a non-default context from the config file.
    """
    cmd = ["docker"]
    if endpoint is not None and endpoint.explicit:
        cmd += ["-H", endpoint.base_url]
    elif endpoint is not None and endpoint.context not in (None, "default"):
        cmd += ["--context", str(endpoint.context)]
    return [*cmd, "exec", "-it", container_id, *argv]
