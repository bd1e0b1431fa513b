"""Where the Docker engine is, and small helpers around reaching it (no Docker SDK import).

Kept apart from :mod:`gputui.collect.docker.source`, which is about talking to the engine.
The endpoint is resolved here, from the environment and the docker CLI's configuration
directory, the way the docker CLI does it: ``DOCKER_HOST``, then ``DOCKER_CONTEXT``, then
``currentContext`` of ``$DOCKER_CONFIG/config.json`` (``~/.docker`` when unset). Every path is
absolute, so the result never depends on the working directory (the Docker SDK's own context
lookup falls back to a ``contexts`` folder relative to it when no config file exists).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gputui.boundary.userfiles import UserFileError, read_user_file
from gputui.model.records import record

DEFAULT_UNIX_SOCKET = "unix:///var/run/docker.sock"
#: The docker CLI's configuration and context files are small; anything larger is not one.
_MAX_CONFIG_BYTES = 1 << 20


class EndpointError(Exception):
    """The docker context or host setting cannot be used (one line, for a ``SourceStatus``)."""


@record(slots=False)
class TlsFiles:
    """TLS material for a ``tcp://`` engine (paths; None where the file does not exist).

    Attributes:
        ca: CA bundle that signs the engine's certificate.
        cert: Client certificate.
        key: Client key.
        verify: Whether the engine's certificate is verified.
    """

    ca: str | None
    cert: str | None
    key: str | None
    verify: bool


@record(slots=False)
class Endpoint:
    """Where the client connects, resolved the way the docker CLI does.

    Attributes:
        base_url: ``unix:///var/run/docker.sock``, ``tcp://host:2376``...
        tls: The TLS files to use, or False.
        context: The docker CLI context it came from, if any.
        explicit: True when the URL was given to gputui, not taken from the environment/context.
    """

    base_url: str
    tls: TlsFiles | bool
    context: str | None
    explicit: bool


def docker_config_dir(env: Mapping[str, str] | None = None) -> str:
    """The docker CLI's configuration directory: ``$DOCKER_CONFIG``, else ``~/.docker``."""
    env = os.environ if env is None else env
    configured = env.get("DOCKER_CONFIG")
    if configured:
        return os.path.abspath(os.path.expanduser(configured))
    return os.path.join(os.path.expanduser("~"), ".docker")


def _load_json_file(path: str) -> Any:
    """A small JSON file, or None when it is missing, too large or not JSON."""
    try:
        # The one user-file reader: a FIFO or device here must not hang or flood gputui.
        data = read_user_file(Path(path), "docker CLI file", _MAX_CONFIG_BYTES)
    except UserFileError:
        return None
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


def current_context_name(env: Mapping[str, str] | None = None) -> str:
    """``DOCKER_CONTEXT``, else ``currentContext`` from the config file, else ``default``."""
    env = os.environ if env is None else env
    if env.get("DOCKER_CONTEXT"):
        return env["DOCKER_CONTEXT"]
    config = _load_json_file(os.path.join(docker_config_dir(env), "config.json"))
    name = config.get("currentContext") if isinstance(config, dict) else None
    return name if isinstance(name, str) and name else "default"


def _tls_files(folder: str, verify: bool) -> TlsFiles:
    def existing(name: str) -> str | None:
        path = os.path.join(folder, name)
        return path if os.path.isfile(path) else None

    return TlsFiles(existing("ca.pem"), existing("cert.pem"), existing("key.pem"), verify)


def _from_context(name: str, env: Mapping[str, str]) -> Endpoint:
    """The endpoint stored for a named docker context (``docker context create``)."""
    if name == "default":
        return Endpoint(DEFAULT_UNIX_SOCKET, False, name, explicit=False)
    import hashlib  # here: only a named context needs it, and it loads OpenSSL

    config_dir = docker_config_dir(env)
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()
    meta = _load_json_file(os.path.join(config_dir, "contexts", "meta", digest, "meta.json"))
    endpoints = meta.get("Endpoints") if isinstance(meta, dict) else None
    docker_ep = endpoints.get("docker") if isinstance(endpoints, dict) else None
    if not isinstance(docker_ep, dict):
        raise EndpointError(f"docker context {name[:80]!r} not found in {config_dir}")
    host = docker_ep.get("Host")
    if not isinstance(host, str) or not host:
        host = DEFAULT_UNIX_SOCKET
    tls: TlsFiles | bool = False
    tls_dir = os.path.join(config_dir, "contexts", "tls", digest, "docker")
    if os.path.isdir(tls_dir):
        tls = _tls_files(tls_dir, verify=not bool(docker_ep.get("SkipTLSVerify")))
    elif docker_ep.get("SkipTLSVerify"):
        tls = TlsFiles(None, None, None, verify=False)
    return Endpoint(host, tls, name, explicit=False)


def resolve_endpoint(base_url: str | None, env: Mapping[str, str] | None = None) -> Endpoint:
    """The engine endpoint, in the docker CLI's order of precedence.

    Args:
        base_url: A URL given to gputui; wins over everything.
        env: The environment (``os.environ`` when None).

    Raises:
        EndpointError: the named context does not exist.
    """
    env = os.environ if env is None else env
    if base_url:
        return Endpoint(base_url, False, None, explicit=True)
    host = env.get("DOCKER_HOST")
    if host:
        tls: TlsFiles | bool = False
        verify = bool(env.get("DOCKER_TLS_VERIFY"))
        if verify or env.get("DOCKER_TLS"):
            cert_dir = env.get("DOCKER_CERT_PATH") or docker_config_dir(env)
            tls = _tls_files(os.path.abspath(os.path.expanduser(cert_dir)), verify)
        return Endpoint(host, tls, None, explicit=False)
    return _from_context(current_context_name(env), env)


def docker_cli_available() -> bool:
    """True when the ``docker`` CLI is on PATH (needed for the interactive exec)."""
    return shutil.which("docker") is not None


def one_line(exc: BaseException) -> str:
    """An exception as one line of at most 300 characters (for a status line)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def unix_socket_path(url: str | None) -> str | None:
    """The socket path of a ``unix://`` or ``http+unix://`` URL, None for other URLs."""
    url = url or ""
    for scheme in ("unix://", "http+unix://"):
        if url.startswith(scheme):
            return url[len(scheme) :] or DEFAULT_UNIX_SOCKET[len("unix://") :]
    return None


def unix_socket_answers(url: str | None) -> bool:
    """Whether a local engine's unix socket accepts connections (False for other URLs).

    The source backs off after a failure so a dead remote engine does not cost a connect timeout
    on every refresh. A unix socket fails at once, so for a local engine a plain ``connect()``
    (tens of microseconds, no API call) tells when the engine is back: without it a restarted
    engine stayed "unreachable" for up to the whole back-off.
    """
    path = unix_socket_path(url)
    if path is None:
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        try:
            sock.connect(path)
        except OSError:
            return False
    return True


_UCRED = struct.Struct("3i")


def socket_peer_pid(url: str | None, timeout_s: float) -> int | None:
    """The PID (in gputui's PID namespace) of the process listening on a local engine's socket.

    ``SO_PEERCRED`` of a connection names the process that called ``listen``: an engine in a
    PID namespace of its own (inside a container) shows there as a host PID, whose ``NSpid``
    tells that namespace. A connection is made and closed; nothing is sent or read.

    Args:
        url: The engine's URL (only ``unix://`` has a local listener).
        timeout_s: The most seconds the connection may take.

    Returns:
        The PID; None for another URL, a socket that does not answer, or a listener outside
        gputui's PID namespace and below it (the kernel gives 0).
    """
    path = unix_socket_path(url)
    if path is None:
        return None
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(max(0.01, timeout_s))
            sock.connect(path)
            raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    except (OSError, ValueError):
        return None
    pid = int(_UCRED.unpack(raw)[0])
    return pid if pid > 0 else None


def interactive_argv(
    endpoint: Endpoint | None, container_id: str, argv: Sequence[str]
) -> list[str]:
    """The docker CLI command for an interactive ``exec -it`` (run under ``App.suspend()``).

    The CLI inherits ``DOCKER_HOST``/``DOCKER_CONTEXT`` from the environment, so a flag is only
    added for an explicit URL (``-H``) or a non-default context from the config file. The
    caller validates ``container_id`` (64 hex digits), so it can never be read as a flag.
    """
    cmd = ["docker"]
    if endpoint is not None and endpoint.explicit:
        cmd += ["-H", endpoint.base_url]
    elif endpoint is not None and endpoint.context not in (None, "default"):
        cmd += ["--context", str(endpoint.context)]
    return [*cmd, "exec", "-it", container_id, *argv]
