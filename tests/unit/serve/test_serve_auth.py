"""``gputui serve`` against clients that are not the user's browser: a real server process on
127.0.0.1, real websocket clients (aiohttp's). On a shared host every local user reaches
127.0.0.1; only the token the server printed gets the monitor.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gputui.serve.server import MAX_COLUMNS, MAX_ROWS, STOP_DEADLINE_S
from tests.support.serve import Served, alive, serving, stand_in

aiohttp = pytest.importorskip("aiohttp")  # the CI's test extra holds it (test_serve.py checks)

UPGRADE = {
    "Connection": "Upgrade",
    "Upgrade": "websocket",
    "Sec-WebSocket-Version": "13",
    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
}
#: What only the monitor's page holds (textual-serve's page, xterm.js).
PAGE_MARKS = ("<div>gputui</div>", "data-session-websocket-url", "textual.js")


def _session(**kwargs: Any) -> Any:
    # unsafe=True: aiohttp's jar otherwise ignores cookies of an IP address, as no browser does.
    return aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=20),
        cookie_jar=aiohttp.CookieJar(unsafe=True),
        **kwargs,
    )


async def _get(session: Any, url: str, **headers: str) -> tuple[int, str, Any]:
    async with session.get(url, headers=headers, allow_redirects=False) as response:
        return response.status, await response.text(), response


async def _ws_status(session: Any, url: str, **kwargs: Any) -> int:
    """The status of a websocket handshake: 101 when it opened."""
    try:
        async with session.ws_connect(url, **kwargs):
            return 101
    except aiohttp.WSServerHandshakeError as exc:
        return int(exc.status)


async def _first_frame(ws: Any) -> Any:
    message = await asyncio.wait_for(ws.receive(), 60)
    assert message.type == aiohttp.WSMsgType.BINARY, message
    return message


def _no_monitor(status: int, body: str) -> None:
    assert status in (401, 403), status
    assert not any(mark in body for mark in PAGE_MARKS), body


async def test_without_the_token_nothing_of_the_monitor(tmp_path: Path) -> None:
    """No token, a wrong token, a forged Origin without the cookie: 401, page and websocket;
    the printed URL sets an HttpOnly, SameSite=Strict cookie that then opens both."""
    with serving(tmp_path) as served:
        base, origin = served.base, served.base
        async with _session() as session:
            for path in ("/", "/static/js/textual.js", "/download/x", "/?token="):
                status, body, _ = await _get(session, base + path)
                _no_monitor(status, body)
            status, body, response = await _get(session, f"{base}/?token=x{served.token}")
            _no_monitor(status, body)
            assert "Set-Cookie" not in response.headers
            assert await _ws_status(session, base + "/ws", origin=origin) == 401
            assert await _ws_status(session, base + "/ws", origin="http://evil.example") in (
                401,
                403,
            )
            # Forged Origin and Host, as a local process can send anything: still no token.
            headers = {"Origin": origin, "Host": f"127.0.0.1:{served.port}"}
            assert await _ws_status(session, base + "/ws", headers=headers) == 401
            assert not session.cookie_jar.filter_cookies(base)
        async with _session(cookies={f"gputui-serve-{served.port}": "wrong"}) as session:
            _no_monitor(*(await _get(session, base + "/"))[:2])
            assert await _ws_status(session, base + "/ws", origin=origin) == 401
        async with _session() as session:
            status, body, response = await _get(session, served.url)
            assert status == 200 and 'url=/"' in body  # the page reloads itself, token gone
            set_cookie = response.headers["Set-Cookie"]
            assert f"gputui-serve-{served.port}={served.token}" in set_cookie
            assert "HttpOnly" in set_cookie and "SameSite=Strict" in set_cookie
            assert response.headers["Cache-Control"] == "no-store"
            assert response.headers["Referrer-Policy"] == "no-referrer"
            status, page, _ = await _get(session, base + "/")
            assert status == 200 and all(mark in page for mark in PAGE_MARKS)
            async with session.ws_connect(base + "/ws", origin=origin) as ws:
                await _first_frame(ws)
            # The cookie does not make a cross-site websocket acceptable.
            assert await _ws_status(session, base + "/ws", origin="http://evil.example") == 403
    log = served.log_text()
    assert log.count(served.token) == 1, log  # the announce line only, never the request log
    assert "refused /ws: no token" in log and "refused /: wrong token" in log


def test_token_is_new_each_run_and_long(tmp_path: Path) -> None:
    with serving(tmp_path) as first:
        pass
    with serving(tmp_path) as second:
        pass
    assert first.token != second.token
    assert len(first.token) >= 40


async def _tab(session: Any, served: Served, query: str = "") -> Any:
    return await session.ws_connect(f"{served.base}/ws{query}", origin=served.base)


def _records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


async def _wait_records(path: Path, test: Callable[[list[dict[str, Any]]], bool]) -> list[Any]:
    deadline = time.monotonic() + 30
    while not test(found := _records(path)):
        assert time.monotonic() < deadline, found
        await asyncio.sleep(0.05)
    return found


async def test_terminal_size_is_clamped_server_side(tmp_path: Path) -> None:
    """The size in the websocket's URL and in resize messages: bounded before the monitor
    sees it; a size that is not a number is dropped (the stand-in records what arrives)."""
    argv, record = stand_in(tmp_path)
    with serving(tmp_path, monitor_argv=argv) as served:
        async with _session(cookies=served.cookie) as session:
            ws = await _tab(session, served, "?width=10000&height=10000")
            await _first_frame(ws)
            for size in (
                {"width": 10000, "height": 10000},
                {"width": 1e300, "height": -5},
                {"width": "abc", "height": 30},
                {"width": True, "height": 30},
                {"width": [1], "height": 30},
                {"width": 10**40, "height": 10**40},
                {"width": 120, "height": 40},  # last: once it arrives, all the others did
            ):
                await ws.send_str(json.dumps(["resize", size]))
            await ws.send_str("not json")
            await ws.send_str(json.dumps({"resize": 1}))
            await ws.send_str(json.dumps(["resize", "wide"]))
            found = await _wait_records(
                record, lambda r: {"type": "resize", "width": 120, "height": 40} in r
            )
            await ws.close()
    start, *resizes = found
    assert (int(start["width"]), int(start["height"])) == (MAX_COLUMNS, MAX_ROWS)
    sizes = [(r["width"], r["height"]) for r in resizes if r["type"] == "resize"]
    assert sizes == [(MAX_COLUMNS, MAX_ROWS), (MAX_COLUMNS, 4), (MAX_COLUMNS, MAX_ROWS), (120, 40)]


async def test_host_must_name_this_server_on_a_non_loopback_bind(tmp_path: Path) -> None:
    """Bound to 0.0.0.0: a rebound name (its page's own Origin, the user's cookie) gets 403;
    the address the connection reached and this machine's name work."""
    with serving(tmp_path, host="0.0.0.0") as served:
        port = served.port
        async with _session(cookies=served.cookie) as session:
            rebound = f"rebound.example:{port}"
            status, body, _ = await _get(session, served.base + "/", Host=rebound)
            assert status == 403 and "not a name of this server" in body
            status, body, _ = await _get(
                session, f"{served.base}/?token={served.token}", Host=rebound
            )
            _no_monitor(status, body)
            headers = {"Host": rebound, "Origin": f"http://{rebound}"}
            assert await _ws_status(session, served.base + "/ws", headers=headers) == 403
            assert (await _get(session, served.base + "/", Host=f"127.0.0.1:{port}"))[0] == 200
            name = socket.gethostname()
            assert (await _get(session, served.base + "/", Host=f"{name}:{port}"))[0] == 200
            headers = {"Host": f"{name}:{port}", "Origin": f"http://{name}:{port}"}
            assert await _ws_status(session, served.base + "/ws", headers=headers) == 101
    assert "warning: listening on 0.0.0.0" in served.log_text()


async def _open_tabs(served: Served, session: Any, count: int) -> list[Any]:
    tabs = [await _tab(session, served) for _ in range(count)]
    for ws in tabs:
        await _first_frame(ws)
    return tabs


def _sigterm_exit_seconds(served: Served) -> float:
    started = time.monotonic()
    served.proc.send_signal(signal.SIGTERM)
    try:
        status = served.proc.wait(timeout=STOP_DEADLINE_S + 3)
    except subprocess.TimeoutExpired:
        pytest.fail(f"gputui serve still running {STOP_DEADLINE_S + 3} s after SIGTERM")
    assert status == 0, served.log_text()
    return time.monotonic() - started


async def _assert_gone(pids: list[int]) -> None:
    deadline = time.monotonic() + 5  # an orphan is reaped by whoever adopted it
    while any(alive(pid) for pid in pids):
        assert time.monotonic() < deadline, [pid for pid in pids if alive(pid)]
        await asyncio.sleep(0.05)


async def test_sigterm_with_real_tabs_open_ends_promptly_with_their_monitors(
    tmp_path: Path,
) -> None:
    """Three browser tabs' monitors (real ``gputui --demo`` processes) running: SIGTERM ends
    the server within the deadline and no monitor outlives it."""
    with serving(tmp_path) as served:
        async with _session(cookies=served.cookie) as session:
            tabs = await _open_tabs(served, session, 3)
            monitors = served.children()
            assert len(monitors) == 3, monitors
            took = _sigterm_exit_seconds(served)
            for ws in tabs:  # each tab is told: its frames, then the close
                deadline = time.monotonic() + 5
                while (await asyncio.wait_for(ws.receive(), 5)).type == aiohttp.WSMsgType.BINARY:
                    assert time.monotonic() < deadline
                assert ws.closed
        await _assert_gone(monitors)
    print(f"SIGTERM with 3 tabs: exit in {took:.2f} s")


async def test_sigterm_kills_a_monitor_that_ignores_quit_and_sigterm(tmp_path: Path) -> None:
    argv, record = stand_in(tmp_path, "stubborn")
    with serving(tmp_path, monitor_argv=argv) as served:
        async with _session(cookies=served.cookie) as session:
            await _open_tabs(served, session, 2)
            found = await _wait_records(record, lambda r: len(r) >= 2)
            pids = [r["pid"] for r in found if r["type"] == "start"]
            took = _sigterm_exit_seconds(served)
        await _assert_gone(pids)
    assert {"type": "quit"} in _records(record)  # asked first
    print(f"SIGTERM with 2 stubborn tabs: exit in {took:.2f} s")


async def test_closing_a_tab_ends_a_stubborn_monitor(tmp_path: Path) -> None:
    argv, record = stand_in(tmp_path, "stubborn")
    with serving(tmp_path, monitor_argv=argv) as served:
        async with _session(cookies=served.cookie) as session:
            (ws,) = await _open_tabs(served, session, 1)
            (start,) = await _wait_records(record, lambda r: len(r) >= 1)
            await ws.close()
            await _assert_gone([start["pid"]])
            assert served.proc.poll() is None
