"""``gputui serve``: the monitor in a web browser, through textual-serve.

textual-serve answers the page (xterm.js) and, for each browser tab that opens its websocket,
starts one ``gputui`` process whose Textual web driver talks to the tab over that websocket. The
only module importing ``textual_serve`` and ``aiohttp`` (both optional: the ``serve`` extra,
``pip install '.[serve]'`` from the source); they are imported when serving starts, so this
module loads without them.

Safe by default, because a browser tab is easier to reach than a terminal:

* every request needs the server's secret: a token made at start, printed once in the URL to
  open (``/?token=...``), exchanged for an HttpOnly, SameSite=Strict cookie and checked
  (constant time) on every request, the websocket included. On a shared host ``127.0.0.1`` is
  every local user; the token is what makes the monitor this user's;
* it listens on 127.0.0.1 unless told otherwise (and says so on stderr when told otherwise);
* the monitor it starts is ``--read-only`` unless ``--allow-actions``: no signals, no exec; and
  ``--no-logs`` unless ``--allow-actions`` or ``--allow-logs``: container logs can hold secrets;
* the websocket that drives the monitor only accepts the page's own origin, so another web site
  open in the same browser cannot drive it (cross-site WebSocket hijacking); the ``Host`` must
  name the address the server listens on (loopback names on loopback), so a DNS-rebound name
  cannot either;
* at most :data:`MAX_SESSIONS` monitors run at once, each at most
  :data:`MAX_COLUMNS` x :data:`MAX_ROWS` whatever size the tab asks for;
* SIGTERM or SIGINT ends every tab's monitor (asked to quit, then SIGTERM, then SIGKILL, each
  after a short grace) and the server within about :data:`STOP_DEADLINE_S` seconds;
* what the server prints (its log, a monitor's stderr) passes the one sanitiser line by line,
  and its request log names paths, never the token;
* the page asks nothing of other sites (textual-serve's link to a web font is dropped).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import io
import ipaddress
import json
import logging
import math
import os
import re
import secrets
import shlex
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gputui.boundary.sanitise import safe_text
from gputui.model.records import record

if TYPE_CHECKING:
    from aiohttp import web


#: What serves by default: this host only (reach it from elsewhere through an SSH tunnel).
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
#: Monitors (browser tabs) running at once; one more is refused until one closes.
MAX_SESSIONS = 8
#: How to get textual-serve, for the one-line error when it is missing.
#: The command that adds the optional dependency to the very Python running gputui (a venv's
#: or the system's): gputui is installed from its source, not from a package index, so
#: ``pip install 'gputui[serve]'`` would find nothing.
INSTALL_HINT = f"{shlex.quote(sys.executable)} -m pip install 'textual-serve>=1.1.3,<2'"
#: The Textual driver textual-serve asks of the programs it starts (its environment).
WEB_DRIVER = "textual.drivers.web_driver:WebDriver"
#: Bytes of randomness in the server's token (``secrets.token_urlsafe``: 43 characters).
TOKEN_BYTES = 32
#: The query parameter of the URL to open that carries the token.
TOKEN_PARAMETER = "token"
#: Terminal sizes a tab may ask for, in cells. The browser chooses its size, and Textual keeps
#: a screen of width x height cells: 10000 x 10000 asked for 1.1 GB. 500 x 200 is a 4K screen
#: at a 7-pixel font; below 10 x 4 nothing of the monitor fits.
MAX_COLUMNS, MAX_ROWS = 500, 200
MIN_COLUMNS, MIN_ROWS = 10, 4
#: The size of a tab that names none (textual-serve's default).
DEFAULT_SIZE = (80, 24)
#: Largest websocket message a tab may send (keys, a paste): aiohttp's cap, lowered.
MAX_MESSAGE_BYTES = 1 << 20
#: Seconds a tab's monitor gets to leave after being asked to quit, then after SIGTERM, before
#: the next step (SIGTERM, then SIGKILL).
QUIT_GRACE_S = 0.5
#: Seconds the server waits for a closing tab's browser to answer the close.
CLOSE_TIMEOUT_S = 0.5
#: What SIGTERM with tabs open costs at most, about: both graces and the close, plus slack.
STOP_DEADLINE_S = 2.0
#: Host names that are this machine whatever the port (an SSH tunnel picks its own local port).
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
#: Addresses that listen on every interface: the Host may then name any of them, not these.
_WILDCARDS = frozenset({"0.0.0.0", "::", ""})
#: textual-serve's page links a style sheet of another site (a web font).
_THIRD_PARTY_STYLESHEET = re.compile(
    r"<link\s+rel=\"stylesheet\"\s+href=\"https?://[^\"]*\"\s*/?>", re.IGNORECASE
)
#: A ``Host`` header as a browser sends it: a name or address, an optional port.
_HOST_HEADER = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?")
#: The answer to the URL with the token: the cookie is set and the page reloads itself without
#: the token in its address. A page's own reload, not a 303: a navigation that started on
#: another site (the link clicked in a web mail) would not carry a SameSite=Strict cookie
#: through an HTTP redirect.
_TOKEN_ACCEPTED_PAGE = (
    '<!DOCTYPE html><html><head><meta http-equiv="refresh" content="0; url=/">'
    '<title>gputui</title></head><body><a href="/">gputui</a></body></html>'
)
#: What a request without the token gets (and nothing of the monitor).
_NO_TOKEN = (
    "gputui serve: this server needs its token: open the URL it printed "
    f"(it ends in /?{TOKEN_PARAMETER}=...)"
)


class ServeUnavailable(Exception):
    """textual-serve (or its web stack) is not installed."""


@record
class ServeOptions:
    """What ``gputui serve`` was asked for.

    Attributes:
        host: Address to listen on.
        port: Port to listen on.
        allow_actions: Let the monitors act (signals, exec) and show container logs; read-only
            and without logs otherwise.
        allow_logs: Let read-only monitors show container logs (they can hold secrets).
        demo: Monitor the built-in simulated machine.
        scenario: A scenario file replacing NVML.
        interval: Refresh period of the monitors (their default when None).
        config: The monitors' config file (theirs by default when None).
        max_sessions: Monitors running at once.
    """

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    allow_actions: bool = False
    allow_logs: bool = False
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
        f"{options.port} and has the URL's token sees this host's GPUs, containers and "
        f"processes {acts}; the token crosses the network in clear: prefer "
        f"--host {DEFAULT_HOST} and an SSH tunnel"
    )


def app_argv(options: ServeOptions, python: str = sys.executable) -> list[str]:
    """The monitor each browser tab gets, as an argument list.

    Read-only unless ``allow_actions``; without container logs unless ``allow_actions`` or
    ``allow_logs``; file paths made absolute.
    """
    argv = [python, "-m", "gputui"]
    if not options.allow_actions:
        argv.append("--read-only")
        if not options.allow_logs:
            argv.append("--no-logs")
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


def clamp_size(width: object, height: object) -> tuple[int, int] | None:
    """A terminal size a browser asked for, within :data:`MAX_COLUMNS` x :data:`MAX_ROWS`.

    Args:
        width: Columns, as the tab sent them (any JSON value, or a query string's text).
        height: Rows, likewise.

    Returns:
        ``(columns, rows)`` clamped to the bounds; None when either is not a finite number.
    """
    sizes: list[int] = []
    for value, low, high in ((width, MIN_COLUMNS, MAX_COLUMNS), (height, MIN_ROWS, MAX_ROWS)):
        if isinstance(value, bool):
            return None
        if isinstance(value, str):
            if not re.fullmatch(r"[0-9]{1,9}", value):
                return None
            value = int(value)
        if isinstance(value, float):
            if not math.isfinite(value):
                return None
            value = int(value)
        if not isinstance(value, int):
            return None
        sizes.append(min(max(value, low), high))
    return sizes[0], sizes[1]


def new_token() -> str:
    """A fresh secret for one server's run."""
    return secrets.token_urlsafe(TOKEN_BYTES)


def token_matches(given: str | None, token: str) -> bool:
    """Whether ``given`` is the server's token, compared in constant time."""
    if given is None:
        return False
    return hmac.compare_digest(given.encode("utf-8", "replace"), token.encode("ascii"))


def cookie_name(port: int) -> str:
    """The cookie that carries the token: one per port, so two servers on one host coexist."""
    return f"gputui-serve-{port}"


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


def _address(name: str) -> str:
    """``name`` in one spelling: an address normalised (no brackets, IPv4-mapped as IPv4)."""
    bare = name.strip("[]").lower()
    try:
        address = ipaddress.ip_address(bare)
    except ValueError:
        return bare
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return str(address)


def _host_name(host_header: str) -> str | None:
    """The name part of a well-formed ``Host`` header, normalised; None when malformed."""
    match = _HOST_HEADER.fullmatch(host_header)
    return _address(match.group(1)) if match else None


def allowed_host_names(
    options: ServeOptions, local_address: str | None, machine_names: Sequence[str] = ()
) -> frozenset[str]:
    """The names a request's ``Host`` may give, normalised.

    A web page whose DNS name is rebound to this server's address sends its own name: refused.
    On loopback: the loopback names. Elsewhere: the ``--host`` asked for (a name or an
    address; not a wildcard), the address the connection reached, this machine's names, and the
    loopback names when the connection came over loopback (an SSH tunnel to a wildcard bind).

    Args:
        options: Where the server listens.
        local_address: The address of this end of the request's connection (None unknown).
        machine_names: This machine's host names (``socket.gethostname()``, its FQDN).
    """
    names = {_address(options.host)} - _WILDCARDS
    if is_loopback(options.host):
        return frozenset(names | _LOOPBACK_NAMES)
    names |= {_address(name) for name in machine_names if name}
    if local_address:
        reached = _address(local_address)
        names.add(reached)
        if is_loopback(reached):
            names |= _LOOPBACK_NAMES
    return frozenset(names)


def request_refusal(
    options: ServeOptions,
    host_header: str,
    origin: str | None,
    local_address: str | None = None,
    machine_names: Sequence[str] = (),
) -> str | None:
    """Why a request (``origin`` None) or the websocket must be refused by its host, or None.

    Args:
        options: Where the server listens.
        host_header: The request's ``Host``.
        origin: The websocket request's ``Origin`` (every browser sends one); None otherwise.
        local_address: The address of this end of the request's connection.
        machine_names: This machine's host names.
    """
    name = _host_name(host_header)
    if name is None:
        return "malformed Host header"
    if name not in allowed_host_names(options, local_address, machine_names):
        # A DNS name rebound to this server's address by a web site: not a name of this server.
        return f"Host {safe_text(host_header, 100)!r} is not a name of this server"
    if origin is not None and origin not in (f"http://{host_header}", f"https://{host_header}"):
        return f"cross-origin websocket from {safe_text(origin, 100)!r}"
    return None


def token_refusal(query_token: str | None, cookie: str | None, token: str) -> str | None:
    """Why a request is refused by its credentials, or None.

    Args:
        query_token: The ``token`` query parameter (the URL printed at start), if any.
        cookie: The token cookie, if any.
        token: The server's token.
    """
    if query_token is not None:
        return None if token_matches(query_token, token) else "wrong token"
    if cookie is None:
        return "no token"
    return None if token_matches(cookie, token) else "wrong token"


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


def _machine_names() -> tuple[str, ...]:
    """This machine's names, as a browser on the network may call it."""
    names = [socket.gethostname()]
    with contextlib.suppress(OSError):
        names.append(socket.getfqdn())
    return tuple(names)


async def end_monitor(process: asyncio.subprocess.Process, grace: float = QUIT_GRACE_S) -> None:
    """End a tab's monitor (already asked to quit) and its process group, within bounds.

    After ``grace`` seconds it gets SIGTERM, after as many more SIGKILL. The monitor was started
    in a session of its own, so whatever it started goes with it.

    Args:
        process: The monitor, leader of its own process group.
        grace: Seconds each step waits.
    """
    for signum in (signal.SIGTERM, signal.SIGKILL):
        try:
            await asyncio.wait_for(process.wait(), grace)
            break
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signum)
    else:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(process.wait(), grace)
    # What the monitor left behind in its group (none of gputui's own making, but bounded).
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


@dataclass(eq=False, slots=True)
class _Tabs:
    """The tabs being served: each one's close and stop, for the server's own shutdown."""

    live: dict[object, Callable[[], Awaitable[None]]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.live)

    async def end_all(self) -> None:
        """End every tab at once, each within its bounds."""
        await asyncio.gather(*(end() for end in list(self.live.values())), return_exceptions=True)


def run(
    options: ServeOptions,
    announce: Callable[[str], None],
    monitor_argv: Sequence[str] | None = None,
) -> None:
    """Serve until SIGINT or SIGTERM.

    Args:
        options: What to serve, where.
        announce: Receives the exposure warning (before listening) and the
            ``gputui serve: http://...?token=...`` line once listening: the only place the
            token is shown.
        monitor_argv: The program each tab gets; :func:`app_argv` of ``options`` by default.

    Raises:
        ServeUnavailable: textual-serve is not installed.
        OSError: the address cannot be listened on.
    """
    try:
        import aiohttp_jinja2
        from aiohttp import WSMsgType, web
        from aiohttp.abc import AbstractAccessLogger
        from aiohttp.web_runner import GracefulExit
        from textual_serve.app_service import AppService
        from textual_serve.server import Server
    except ImportError as exc:
        raise ServeUnavailable(f"gputui serve needs textual-serve: {INSTALL_HINT}") from exc
    command = shell_command(monitor_argv if monitor_argv is not None else app_argv(options))
    check_bindable(options.host, options.port)  # a bad address fails before any warning
    warning = exposure_warning(options)
    if warning is not None:
        announce(warning)
    token = new_token()
    cookie = cookie_name(options.port)
    machine_names = _machine_names()
    tabs = _Tabs()
    log = logging.getLogger("gputui.serve")

    class BoundedAppService(AppService):
        """textual-serve's monitor process, with a bounded size and a bounded end."""

        def _build_environment(self, width: int = 80, height: int = 24) -> dict[str, str]:
            columns, rows = clamp_size(width, height) or DEFAULT_SIZE
            return super()._build_environment(columns, rows)

        async def _open_app_process(
            self, width: int = 80, height: int = 24
        ) -> asyncio.subprocess.Process:
            environment = self._build_environment(width=width, height=height)
            # A session of its own: SIGTERM / SIGKILL reach the monitor and whatever it started.
            self._process = process = await asyncio.create_subprocess_shell(
                self.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=environment,
                start_new_session=True,
            )
            assert process.stdin is not None
            self._stdin = process.stdin
            return process

        async def set_terminal_size(self, width: int, height: int) -> None:
            size = clamp_size(width, height)
            if size is not None:
                await super().set_terminal_size(*size)

        async def stop(self) -> None:
            """Ask the monitor to quit, then end it (TERM, KILL): never waits unbounded."""
            task, self._task = self._task, None
            if task is None:
                return
            with contextlib.suppress(Exception):
                await asyncio.wait_for(
                    self._download_manager.cancel_app_downloads(app_service_id=self.app_service_id),
                    QUIT_GRACE_S,
                )
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.send_meta({"type": "quit"}), QUIT_GRACE_S)
            if self._process is not None:
                await end_monitor(self._process)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, QUIT_GRACE_S)  # its output's end, once it is gone
            if not task.done():
                task.cancel()

    class PathsOnlyAccessLog(AbstractAccessLogger):
        """The request log: method, path and status; never the query (it carries the token)."""

        def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
            self.logger.info(
                "%s %s %s %s", request.remote, request.method, request.path, response.status
            )

    @web.middleware
    async def guard(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """Every request: the Host, then the token; the websocket also its Origin."""
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        local = str(sockname[0]) if isinstance(sockname, tuple) and sockname else None
        origin = request.headers.get("Origin", "") if request.path == "/ws" else None
        why = request_refusal(
            options, request.headers.get("Host", ""), origin, local, machine_names
        )
        if why is not None:
            log.warning("refused: %s", why)
            raise web.HTTPForbidden(text=why)
        given = request.query.get(TOKEN_PARAMETER) if request.path == "/" else None
        why = token_refusal(given, request.cookies.get(cookie), token)
        if why is not None:
            log.warning("refused %s: %s", request.path, why)
            raise web.HTTPUnauthorized(text=_NO_TOKEN)
        if given is not None:
            # The token is swapped for a cookie the page's scripts cannot read, sent back only
            # by this site's own pages; the address bar (and history) keep the plain URL.
            accepted = web.Response(text=_TOKEN_ACCEPTED_PAGE, content_type="text/html")
            accepted.headers["Cache-Control"] = "no-store"
            accepted.headers["Referrer-Policy"] = "no-referrer"
            accepted.set_cookie(cookie, token, path="/", httponly=True, samesite="Strict")
            return accepted
        response = await handler(request)
        if not isinstance(response, web.WebSocketResponse):
            response.headers.setdefault("Referrer-Policy", "no-referrer")
        return response

    class GuardedServer(Server):
        """textual-serve's server with gputui's token, host, origin, size and session checks."""

        def initialize_logging(self) -> None:
            handler = logging.StreamHandler(_SanitizedLines(lambda: sys.stderr))
            handler.setFormatter(logging.Formatter("gputui serve: %(message)s"))
            logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)

        async def _make_app(self) -> web.Application:
            app = await super()._make_app()
            app.middlewares.append(guard)
            return app

        async def on_startup(self, app: web.Application) -> None:
            mode = "actions allowed" if options.allow_actions else "read-only"
            if not options.allow_actions:
                mode += ", logs shown" if options.allow_logs else ", no logs"
            shown = f"[{options.host}]" if ":" in options.host else options.host
            announce(
                f"gputui serve: http://{shown}:{options.port}/?{TOKEN_PARAMETER}={token} "
                f"({mode}); Ctrl-C stops"
            )

        async def on_shutdown(self, app: web.Application) -> None:
            await tabs.end_all()

        def serve(self, debug: bool = False) -> None:
            self.debug = debug
            self.initialize_logging()
            loop = asyncio.new_event_loop()

            def request_exit() -> None:
                raise GracefulExit()

            loop.add_signal_handler(signal.SIGINT, request_exit)
            loop.add_signal_handler(signal.SIGTERM, request_exit)
            web.run_app(
                self._make_app(),
                host=self.host,
                port=self.port,
                handle_signals=False,
                loop=loop,
                print=lambda *args: None,
                access_log_class=PathsOnlyAccessLog,
                # The tabs are ended by on_shutdown; this bounds any other request still open.
                shutdown_timeout=CLOSE_TIMEOUT_S,
            )

        async def handle_index(self, request: web.Request) -> web.StreamResponse:
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

        async def _process_messages(
            self, websocket: web.WebSocketResponse, app_service: AppService
        ) -> None:
            # textual-serve's loop, with every message checked: anything else is dropped.
            async for message in websocket:
                if message.type != WSMsgType.TEXT:
                    continue
                try:
                    envelope = json.loads(message.data)
                except ValueError:
                    continue
                if not isinstance(envelope, list) or not envelope:
                    continue
                kind, data = envelope[0], envelope[1] if len(envelope) > 1 else None
                if kind == "stdin" and isinstance(data, str):
                    await app_service.send_bytes(data.encode("utf-8", "replace"))
                elif kind == "resize" and isinstance(data, Mapping):
                    size = clamp_size(data.get("width"), data.get("height"))
                    if size is not None:
                        await app_service.set_terminal_size(*size)
                elif kind == "ping":
                    await websocket.send_json(["pong", data])
                elif kind == "blur":
                    await app_service.blur()
                elif kind == "focus":
                    await app_service.focus()

        async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
            if len(tabs) >= options.max_sessions:
                raise web.HTTPServiceUnavailable(
                    text=f"at most {options.max_sessions} monitors at once"
                )
            websocket = web.WebSocketResponse(
                heartbeat=15, timeout=CLOSE_TIMEOUT_S, max_msg_size=MAX_MESSAGE_BYTES
            )
            size = clamp_size(request.query.get("width"), request.query.get("height"))

            async def close() -> None:  # the monitor quit: its tab closes
                await websocket.close()

            service = BoundedAppService(
                self.command,
                write_bytes=websocket.send_bytes,
                write_str=websocket.send_str,
                close=close,
                download_manager=self.download_manager,
                debug=self.debug,
            )

            async def end() -> None:
                await asyncio.gather(
                    service.stop(), websocket.close(code=1001), return_exceptions=True
                )

            key = object()
            tabs.live[key] = end  # counted from here: a tab being set up is a tab
            try:
                await websocket.prepare(request)
                await service.start(*(size or DEFAULT_SIZE))
                await self._process_messages(websocket, service)
            except asyncio.CancelledError:
                pass
            except Exception as exc:  # a broken tab: one line, no traceback (no locals)
                log.warning("tab ended: %s", safe_text(repr(exc), 200))
            finally:
                tabs.live.pop(key, None)
                await asyncio.shield(end())
            return websocket

    server = GuardedServer(command, host=options.host, port=options.port, title="gputui")
    # textual-serve writes a monitor's stderr (a crash report) to stdout: inert lines only.
    sys.stdout = _SanitizedLines(lambda: sys.__stdout__)
    server.serve()
