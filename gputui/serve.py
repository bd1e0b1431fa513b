"""``gputui serve``: the monitor in a web browser, through textual-serve.

textual-serve answers the page (xterm.js) and, for each browser tab that opens its websocket,
starts one ``gputui`` process whose Textual web driver talks to the tab over that websocket. The
only module importing ``textual_serve`` and ``aiohttp`` (both optional: ``pip install
'gputui[serve]'``); they are imported when serving starts, so this module loads without them.

Safe by default, because a browser tab is easier to reach than a terminal:

* it listens on 127.0.0.1 unless told otherwise (and says so on stderr when told otherwise);
* the monitor it starts is ``--read-only`` unless ``--allow-actions``: no signals, no exec;
* the websocket that drives the monitor only accepts the page's own origin, so another web site
  open in the same browser cannot drive it (cross-site WebSocket hijacking); on a loopback
  address the ``Host`` must name loopback too, so a DNS-rebound name cannot either;
* at most :data:`MAX_SESSIONS` monitors run at once;
* what the server prints (its log, a monitor's stderr) passes the one sanitiser line by line;
* the page asks nothing of other sites (textual-serve's link to a web font is dropped).
"""

from __future__ import annotations

import contextlib
import io
import ipaddress
import logging
import os
import re
import shlex
import socket
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gputui.derive.fmt import safe_text

if TYPE_CHECKING:
    from aiohttp import web

#: What serves by default: this host only (reach it from elsewhere through an SSH tunnel).
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
#: Monitors (browser tabs) running at once; one more is refused until one closes.
MAX_SESSIONS = 8
#: How to get textual-serve, for the one-line error when it is missing.
INSTALL_HINT = "pip install 'gputui[serve]'"
#: The Textual driver textual-serve asks of the programs it starts (its environment).
WEB_DRIVER = "textual.drivers.web_driver:WebDriver"
#: Host names that are this machine whatever the port (an SSH tunnel picks its own local port).
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})
#: textual-serve's page links a style sheet of another site (a web font).
_THIRD_PARTY_STYLESHEET = re.compile(
    r"<link\s+rel=\"stylesheet\"\s+href=\"https?://[^\"]*\"\s*/?>", re.IGNORECASE
)
#: A ``Host`` header as a browser sends it: a name or address, an optional port.
_HOST_HEADER = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?")


class ServeUnavailable(Exception):
    """textual-serve (or its web stack) is not installed."""


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """What ``gputui serve`` was asked for.

    Attributes:
        host: Address to listen on.
        port: Port to listen on.
        allow_actions: Let the monitors act (signals, exec); read-only otherwise.
        demo: Monitor the built-in simulated machine.
        scenario: A scenario file replacing NVML.
        interval: Refresh period of the monitors (their default when None).
        config: The monitors' config file (theirs by default when None).
        max_sessions: Monitors running at once.
    """

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    allow_actions: bool = False
    demo: bool = False
    scenario: Path | None = None
    interval: float | None = None
    config: Path | None = None
    max_sessions: int = MAX_SESSIONS


def served_in_browser() -> bool:
    """Whether this process is a monitor started by ``gputui serve`` (it draws for a browser).

    Such a process has pipes, not a terminal, and that is fine: Textual's web driver writes to
    the server, not to a terminal.
    """
    return os.environ.get("TEXTUAL_DRIVER") == WEB_DRIVER


def is_loopback(host: str) -> bool:
    """Whether ``host`` (as given to ``--host``) only listens on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def exposure_warning(options: ServeOptions) -> str | None:
    """The warning line for an address other machines can reach, None on loopback."""
    if is_loopback(options.host):
        return None
    acts = (
        "and, with --allow-actions, signal its processes and run commands in its containers"
        if options.allow_actions
        else "(read-only)"
    )
    return (
        f"gputui serve: warning: listening on {options.host}: anyone who can reach port "
        f"{options.port} sees this host's GPUs, containers and processes {acts}; prefer "
        f"--host {DEFAULT_HOST} and an SSH tunnel"
    )


def app_argv(options: ServeOptions, python: str = sys.executable) -> list[str]:
    """The monitor each browser tab gets, as an argument list.

    Read-only unless ``allow_actions``; file paths made absolute.
    """
    argv = [python, "-m", "gputui"]
    if not options.allow_actions:
        argv.append("--read-only")
    if options.demo:
        argv.append("--demo")
    if options.scenario is not None:
        argv += ["--scenario", str(options.scenario.resolve())]
    if options.interval is not None:
        argv += ["--interval", repr(float(options.interval))]
    if options.config is not None:
        argv += ["--config", str(options.config.resolve())]
    return argv


def shell_command(argv: Sequence[str]) -> str:
    """``argv`` as the one shell command line textual-serve takes.

    textual-serve runs its command with ``asyncio.create_subprocess_shell``: it takes a string,
    not a list. So every argument is quoted with :func:`shlex.quote` (a file name with spaces,
    quotes, ``;`` or ``$(...)`` stays one inert argument) and ``exec`` replaces the shell, so
    the monitor gets the signals. A NUL cannot be passed through a shell: refused.

    Raises:
        ValueError: an argument contains a NUL character.
    """
    if any("\0" in arg for arg in argv):
        raise ValueError("an argument contains a NUL character")
    return "exec " + shlex.join(argv)


class _SanitizedLines(io.TextIOBase):
    """A text stream that writes each line through :func:`safe_text`.

    Terminal escapes, control characters and bidi overrides of a monitor's stderr or of a
    request never reach the server's terminal.
    """

    def __init__(self, target: Callable[[], io.TextIOBase | Any]) -> None:
        self._target = target
        self._pending = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        lines = (self._pending + text).split("\n")
        self._pending = lines.pop()[-4000:]  # a partial line, bounded
        out = "".join(safe_text(line, 2000) + "\n" for line in lines)
        if out:
            with contextlib.suppress(OSError, ValueError):
                self._target().write(out)
                self._target().flush()
        return len(text)


def _host_name(host_header: str) -> str | None:
    """The name part of a well-formed ``Host`` header (lower case), None when malformed."""
    match = _HOST_HEADER.fullmatch(host_header)
    return match.group(1).lower() if match else None


def request_refusal(options: ServeOptions, host_header: str, origin: str | None) -> str | None:
    """Why a request to the page (``origin`` None) or the websocket must be refused, or None.

    Args:
        options: Where the server listens.
        host_header: The request's ``Host``.
        origin: The websocket request's ``Origin`` (every browser sends one); None for the page.
    """
    name = _host_name(host_header)
    if name is None:
        return "malformed Host header"
    if is_loopback(options.host) and name not in _LOOPBACK_NAMES | {options.host.lower()}:
        # A DNS name rebound to 127.0.0.1 by a web site: not this machine's name for itself.
        return f"Host {safe_text(host_header, 100)!r} is not a loopback name"
    if origin is not None and origin not in (f"http://{host_header}", f"https://{host_header}"):
        return f"cross-origin websocket from {safe_text(origin, 100)!r}"
    return None


def check_bindable(host: str, port: int) -> None:
    """Bind ``host:port`` once and let it go: an address in use or not ours fails here.

    Raises:
        OSError: the address cannot be listened on.
    """
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as aiohttp binds
        sock.bind(address)


def run(options: ServeOptions, announce: Callable[[str], None]) -> None:
    """Serve until SIGINT or SIGTERM.

    Args:
        options: What to serve, where.
        announce: Receives the exposure warning (before listening) and the
            ``gputui serve: http://...`` line once listening.

    Raises:
        ServeUnavailable: textual-serve is not installed.
        OSError: the address cannot be listened on.
    """
    try:
        import aiohttp_jinja2
        from aiohttp import web
        from textual_serve.server import Server
    except ImportError as exc:
        raise ServeUnavailable(f"gputui serve needs textual-serve: {INSTALL_HINT}") from exc
    command = shell_command(app_argv(options))
    check_bindable(options.host, options.port)  # a bad address fails before any warning
    warning = exposure_warning(options)
    if warning is not None:
        announce(warning)
    sessions = 0

    class GuardedServer(Server):
        """textual-serve's server with gputui's origin, host and session checks."""

        def initialize_logging(self) -> None:
            handler = logging.StreamHandler(_SanitizedLines(lambda: sys.stderr))
            handler.setFormatter(logging.Formatter("gputui serve: %(message)s"))
            logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)

        async def on_startup(self, app: web.Application) -> None:
            mode = "actions allowed" if options.allow_actions else "read-only"
            shown = f"[{options.host}]" if ":" in options.host else options.host
            announce(f"gputui serve: http://{shown}:{options.port}/ ({mode}); Ctrl-C stops")

        async def handle_index(self, request: web.Request) -> web.StreamResponse:
            why = request_refusal(options, request.host, None)
            if why is not None:
                raise web.HTTPForbidden(text=why)
            # The page's URLs come from the request, not from a configured public URL: the page
            # works under whatever name and port the browser used (an SSH tunnel's local port).
            scheme = "wss" if request.secure else "ws"
            context = {
                "font_size": 16,
                "app_websocket_url": f"{scheme}://{request.host}/ws",
                "config": {"static": {"url": "/static/"}},
                "application": {"name": "gputui"},
                "ping_url": "",
            }
            page = aiohttp_jinja2.render_string("app_index.html", request, context)
            # The page would fetch a font from a third party (Google Fonts): a monitoring page
            # asks nothing of anyone but this server (xterm.js falls back to a local font).
            page = _THIRD_PARTY_STYLESHEET.sub("", page)
            return web.Response(text=page, content_type="text/html")

        async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
            nonlocal sessions
            why = request_refusal(options, request.host, request.headers.get("Origin", ""))
            if why is not None:
                logging.getLogger("gputui.serve").warning("refused: %s", why)
                raise web.HTTPForbidden(text=why)
            if sessions >= options.max_sessions:
                raise web.HTTPServiceUnavailable(
                    text=f"at most {options.max_sessions} monitors at once"
                )
            sessions += 1
            try:
                return await super().handle_websocket(request)
            finally:
                sessions -= 1

    server = GuardedServer(command, host=options.host, port=options.port, title="gputui")
    # textual-serve writes a monitor's stderr (a crash report) to stdout: inert lines only.
    sys.stdout = _SanitizedLines(lambda: sys.__stdout__)
    server.serve()
