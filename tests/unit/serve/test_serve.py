"""``gputui serve`` without a browser: the command it spawns, its request checks, its CLI."""

from __future__ import annotations

import ast
import asyncio
import os
import re
import shlex
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from gputui.serve.server import (
    MAX_COLUMNS,
    MAX_ROWS,
    MIN_COLUMNS,
    MIN_ROWS,
    ServeOptions,
    app_argv,
    clamp_size,
    cookie_name,
    exposure_warning,
    is_loopback,
    request_refusal,
    shell_command,
    token_matches,
    token_refusal,
)
from tests.support.paths import REPO
from tests.support.serve import serving

HOSTILE = [
    "two words",
    "it's",
    'say "hi"',
    "$(touch {marker})",
    "`touch {marker}`",
    "; touch {marker}",
    "a\nb",
    "*",
    "-e",
    "",
]


def needs_textual_serve() -> None:
    """Skip without textual-serve, except in CI (the test extra holds it), where it fails."""
    try:
        import textual_serve  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("CI needs textual-serve (the test extra)")
        pytest.skip("no textual-serve (pip install '.[serve]' from the source)")


def test_app_is_read_only_and_without_logs_unless_allowed() -> None:
    default = app_argv(ServeOptions(), python="py")
    assert default == ["py", "-m", "gputui", "--read-only", "--no-logs"]
    logs = app_argv(ServeOptions(allow_logs=True), python="py")
    assert logs == ["py", "-m", "gputui", "--read-only"]
    allowed = app_argv(ServeOptions(allow_actions=True), python="py")
    assert allowed == ["py", "-m", "gputui"]


def test_app_options_pass_through(tmp_path: Path) -> None:
    options = ServeOptions(
        demo=True, scenario=Path("s.json"), interval=0.5, config=tmp_path / "c.toml"
    )
    argv = app_argv(options, python="py")
    assert argv == [
        "py", "-m", "gputui", "--read-only", "--no-logs", "--demo",
        "--scenario", str(Path("s.json").resolve()),
        "--interval", "0.5",
        "--config", str(tmp_path / "c.toml"),
    ]  # fmt: skip


def test_shell_command_keeps_every_argument_inert(tmp_path: Path) -> None:
    """textual-serve runs a shell command line: each argument arrives whole, nothing runs."""
    marker = tmp_path / "ran"
    args = [a.replace("{marker}", str(marker)) for a in HOSTILE]
    command = shell_command(["printf", "[%s]\\n", *args])
    result = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=10)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "".join(f"[{a}]\n" for a in args)
    assert not marker.exists()
    assert shlex.split(command) == ["exec", "printf", "[%s]\\n", *args]


def test_shell_command_refuses_nul() -> None:
    with pytest.raises(ValueError, match="NUL"):
        shell_command(["gputui", "a\0b"])


def test_loopback_and_exposure_warning() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert is_loopback("127.0.0.2")
    assert not is_loopback("0.0.0.0") and not is_loopback("::") and not is_loopback("gpu-host")
    assert exposure_warning(ServeOptions()) is None
    warning = exposure_warning(ServeOptions(host="0.0.0.0", port=8000))
    assert warning is not None and "warning" in warning and "(read-only)" in warning
    assert "token" in warning and "SSH tunnel" in warning
    acting = exposure_warning(ServeOptions(host="0.0.0.0", allow_actions=True))
    assert acting is not None and "signal" in acting
    assert "\n" not in warning


@pytest.mark.parametrize(
    ("host", "header", "origin", "local", "refused"),
    [
        ("127.0.0.1", "127.0.0.1:8000", None, "127.0.0.1", None),
        ("127.0.0.1", "localhost:9000", "http://localhost:9000", None, None),  # a tunnel's port
        ("127.0.0.1", "[::1]:8000", "http://[::1]:8000", None, None),
        ("127.0.0.1", "127.0.0.1:8000", "http://127.0.0.1:8000", None, None),
        ("127.0.0.2", "127.0.0.2:8000", None, "127.0.0.2", None),
        ("127.0.0.1", "rebound.example:8000", None, "127.0.0.1", "not a name of this server"),
        ("127.0.0.1", "127.0.0.1:8000", "http://evil.example", None, "cross-origin"),
        ("127.0.0.1", "127.0.0.1:8000", "", None, "cross-origin"),  # no Origin: not a page's
        ("127.0.0.1", "127.0.0.1:8000", "null", None, "cross-origin"),
        ("127.0.0.1", 'x" onload="alert(1)', None, None, "malformed"),
        ("127.0.0.1", "", None, None, "malformed"),
        # Every interface: the machine's names, the address reached, loopback over loopback.
        ("0.0.0.0", "gpu-host:8000", "http://gpu-host:8000", "10.0.0.5", None),
        ("0.0.0.0", "GPU-HOST.lab:8000", None, "10.0.0.5", None),
        ("0.0.0.0", "10.0.0.5:8000", None, "10.0.0.5", None),
        ("0.0.0.0", "127.0.0.1:8000", None, "127.0.0.1", None),
        ("::", "10.0.0.5:8000", None, "::ffff:10.0.0.5", None),
        ("::", "[fe80::1]:8000", None, "fe80::1", None),
        ("0.0.0.0", "localhost:8000", None, "10.0.0.5", "not a name of this server"),
        ("0.0.0.0", "10.0.0.6:8000", None, "10.0.0.5", "not a name of this server"),
        ("0.0.0.0", "rebound.example:8000", None, "10.0.0.5", "not a name of this server"),
        ("0.0.0.0", "rebound.example:8000", None, "127.0.0.1", "not a name of this server"),
        ("0.0.0.0", "gpu-host:8000", "http://evil.example:8000", "10.0.0.5", "cross-origin"),
        # A named --host: that name (and the address reached).
        ("gpu-host.lab", "gpu-host.lab:8000", None, "10.0.0.5", None),
        ("10.0.0.5", "10.0.0.5:8000", None, "10.0.0.5", None),
        ("10.0.0.5", "rebound.example:8000", None, "10.0.0.5", "not a name of this server"),
    ],
)
def test_request_refusal(
    host: str, header: str, origin: str | None, local: str | None, refused: str | None
) -> None:
    names = ("gpu-host", "gpu-host.lab")
    why = request_refusal(ServeOptions(host=host), header, origin, local, names)
    if refused is None:
        assert why is None
    else:
        assert why is not None and refused in why


def test_token_checks() -> None:
    token = "t0k3n-abc_DEF"
    assert token_matches(token, token)
    assert not token_matches(None, token) and not token_matches("", token)
    assert not token_matches(token + "x", token) and not token_matches("t\u00f6k3n", token)
    assert token_refusal(None, token, token) is None  # the cookie
    assert token_refusal(token, None, token) is None  # the printed URL
    assert token_refusal(None, None, token) == "no token"
    assert token_refusal("wrong", token, token) == "wrong token"  # a wrong URL is not helped
    assert token_refusal(None, "wrong", token) == "wrong token"
    assert cookie_name(8000) != cookie_name(8001)


@pytest.mark.parametrize(
    ("width", "height", "size"),
    [
        (80, 24, (80, 24)),
        ("132", "43", (132, 43)),
        (10_000, 10_000, (MAX_COLUMNS, MAX_ROWS)),
        (10**40, 10**40, (MAX_COLUMNS, MAX_ROWS)),
        (0, -3, (MIN_COLUMNS, MIN_ROWS)),
        (99.9, 30.2, (99, 30)),
        ("1e9", 24, None),
        ("-5", 24, None),
        (float("nan"), 24, None),
        (float("inf"), 24, None),
        (True, 24, None),
        (None, 24, None),
        ([80], 24, None),
        (80, "9" * 20, None),
    ],
)
def test_clamp_size(width: object, height: object, size: tuple[int, int] | None) -> None:
    assert clamp_size(width, height) == size


def gputui(*args: str, code: str | None = None) -> subprocess.CompletedProcess[str]:
    command = (
        [sys.executable, "-m", "gputui", *args] if code is None else [sys.executable, "-c", code]
    )
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "XDG_CONFIG_HOME": "/nonexistent"},
    )


@pytest.fixture
def busy_port() -> object:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    yield sock.getsockname()[1]
    sock.close()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--port", "0"], "expected a port 1-65535"),
        (["--port", "http"], "expected a port 1-65535"),
        (["--host", "a b"], "expected an address or host name"),
        (["--interval", "0"], "at least 0.1"),
        (["--demo", "--scenario", "x.json"], "cannot be combined"),
        (["--scenario", "/nonexistent/s.json"], "cannot read scenario file"),
        (["--config", "/nonexistent/c.toml"], "c.toml"),
        (["--demo", "--port", "{busy}"], "cannot listen on"),
        (["--demo", "--host", "192.0.2.1"], "cannot listen on 192.0.2.1"),  # not ours: no warning
        (["--bogus"], "unrecognized arguments"),
    ],
)
def test_bad_arguments_one_line_exit_2(args: list[str], needle: str, busy_port: int) -> None:
    needs_textual_serve()
    result = gputui("serve", *(a.replace("{busy}", str(busy_port)) for a in args))
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert needle in lines[0]


def test_without_textual_serve_one_line_says_how_to_install() -> None:
    code = (
        "import sys\n"
        "sys.modules['textual_serve'] = None  # as if not installed\n"
        "from gputui.cli.main import main\n"
        "sys.exit(main(['serve', '--demo']))\n"
    )
    result = gputui(code=code)
    assert result.returncode == 2
    # The hint installs into the very Python that runs gputui: gputui is not on a package index.
    assert result.stderr == (
        "gputui: error: gputui serve needs textual-serve: "
        f"{shlex.quote(sys.executable)} -m pip install 'textual-serve>=1.1.3,<2'\n"
    )


def test_serves_the_page_and_refuses_foreign_hosts_and_origins(tmp_path: Path) -> None:
    """The real server: the page names its websocket by the request's host; a rebound host
    name and a cross-origin websocket get 403 even with the token; SIGTERM ends it with 0."""
    needs_textual_serve()
    with serving(tmp_path) as served:
        port = served.port
        cookie = f"gputui-serve-{port}={served.token}"

        def get(path: str, **headers: str) -> tuple[int, str]:
            request = urllib.request.Request(served.base + path, headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=5) as response:
                    return response.status, response.read().decode()
            except urllib.error.HTTPError as exc:
                return exc.code, exc.read().decode()

        status, page = get("/", Host=f"localhost:{port}", Cookie=cookie)
        assert status == 200
        assert f'data-session-websocket-url="ws://localhost:{port}/ws"' in page
        assert "<div>gputui</div>" in page
        # Nothing from other sites: scripts, styles and fonts all come from the server.
        assert re.findall(r'(?:src|href)="(https?:[^"]*)"', page) == []
        assert get("/", Host=f"rebound.example:{port}", Cookie=cookie)[0] == 403
        upgrade = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13"}
        upgrade["Sec-WebSocket-Key"] = "dGhlIHNhbXBsZSBub25jZQ=="
        assert get("/ws", Origin="http://evil.example", Cookie=cookie, **upgrade)[0] == 403
        assert get("/ws", Cookie=cookie, **upgrade)[0] == 403  # no Origin: not the page
        served.proc.send_signal(15)
        assert served.proc.wait(timeout=15) == 0
    log = served.log_text()
    assert (
        f"gputui serve: http://127.0.0.1:{port}/?token={served.token} (read-only, no logs)" in log
    )
    assert "refused: cross-origin websocket from 'http://evil.example'" in log


async def test_monitors_at_once_are_bounded(tmp_path: Path) -> None:
    """One browser tab more than ``max_sessions`` gets 503; the first one runs meanwhile."""
    needs_textual_serve()
    import aiohttp

    with serving(tmp_path, max_sessions=1) as served:
        timeout = aiohttp.ClientTimeout(total=20)
        async with aiohttp.ClientSession(timeout=timeout, cookies=served.cookie) as session:
            url = origin = served.base
            async with session.ws_connect(url + "/ws", origin=origin) as first:
                # The first tab's monitor speaks (Textual's web driver sends its frames).
                message = await asyncio.wait_for(first.receive(), 60)
                assert message.type == aiohttp.WSMsgType.BINARY, message
                with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                    async with session.ws_connect(url + "/ws", origin=origin):
                        pass
                assert refused.value.status == 503


def test_only_serve_imports_textual_serve_and_aiohttp() -> None:
    package = REPO / "gputui"
    importers = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            else:
                continue
            roots = {n.split(".")[0] for n in names}
            if roots & {"textual_serve", "aiohttp", "aiohttp_jinja2"}:
                importers.add(str(path.relative_to(package)))
    assert importers == {"serve/server.py"}
    code = (
        "import sys, gputui.cli.main, gputui.serve.server\n"
        "assert 'textual_serve' not in sys.modules"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
