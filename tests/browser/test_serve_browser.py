"""``gputui serve`` in a real browser: headless Chromium, driven over its DevTools protocol.

The page is textual-serve's (xterm.js drawing on a canvas); what the browser's terminal shows is
read from xterm.js's own screen buffer: a script added before the page's own scripts catches the
terminal object when xterm.js hands it to an add-on (``addon._terminal = terminal``). Keys are
real key events sent to the focused page, as a person typing.

Without Chromium (or textual-serve) the tests skip, except in CI (``CI`` set), where they fail:
.ci/run installs Debian's ``chromium`` and the ``test`` extra holds textual-serve.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.serve import serving

#: Catches the xterm.js Terminal when an add-on stores it (FitAddon.activate does
#: ``this._terminal = terminal``), then gets out of the way for that object.
CATCH_TERMINAL = """
Object.defineProperty(Object.prototype, '_terminal', {
  configurable: true,
  get() { return undefined; },
  set(value) {
    if (value && value.buffer && value.buffer.active) { window.__gputuiTerminal = value; }
    Object.defineProperty(this, '_terminal',
      {value: value, writable: true, configurable: true, enumerable: true});
  },
});
"""
#: The terminal's screen as text, one line per row ('' until the terminal exists).
READ_SCREEN = """(() => {
  const term = window.__gputuiTerminal;
  if (!term) { return ''; }
  const buffer = term.buffer.active, rows = [];
  for (let y = 0; y < term.rows; y++) {
    const line = buffer.getLine(buffer.viewportY + y);
    rows.push(line ? line.translateToString(true) : '');
  }
  return rows.join('\\n');
})()"""
#: Key events as Chromium's Input.dispatchKeyEvent takes them.
KEYS: dict[str, dict[str, Any]] = {
    "2": {"key": "2", "code": "Digit2", "text": "2", "windowsVirtualKeyCode": 50},
    "T": {"key": "T", "code": "KeyT", "text": "T", "windowsVirtualKeyCode": 84, "modifiers": 8},
    "escape": {"key": "Escape", "code": "Escape", "windowsVirtualKeyCode": 27},
    "ctrl+p": {"key": "p", "code": "KeyP", "windowsVirtualKeyCode": 80, "modifiers": 2},
    **{
        c: {"key": c, "code": f"Key{c.upper()}", "text": c, "windowsVirtualKeyCode": ord(c.upper())}
        for c in "abcdefghijklmnopqrstuvwxyz"
    },
}
READ_ONLY_REFUSAL = "Read-only mode"


def _required(what: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI needs {what}")
    pytest.skip(f"no {what}")


@pytest.fixture(scope="module")
def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        _required("chromium (Debian's package, installed by .ci/run)")
    assert found is not None
    try:
        import textual_serve  # noqa: F401
    except ImportError:
        _required("textual-serve (pip install '.[serve]', in the test extra)")
    return found


@contextmanager
def gputui_serve(tmp_path: Path, *args: str) -> Iterator[str]:
    """``gputui serve --demo`` on a free loopback port until the block ends; yields the URL it
    printed (with its token)."""
    with serving(tmp_path, *args) as served:
        yield served.url


class Page:
    """One Chromium page over the DevTools protocol (a websocket, aiohttp's client)."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.next_id = 0

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        sent = self.next_id
        await self.ws.send_json({"id": sent, "method": method, "params": params})
        deadline = time.monotonic() + 20
        while True:  # events arrive in between; every wait is bounded
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no answer to {method} within 20 s"
            message: dict[str, Any] = await asyncio.wait_for(self.ws.receive_json(), remaining)
            if message.get("id") == sent:
                assert "error" not in message, message
                return dict(message["result"])

    async def evaluate(self, expression: str) -> Any:
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    async def screen(self) -> str:
        return str(await self.evaluate(READ_SCREEN))

    async def wait_for(self, what: str, test: Callable[[str], bool], timeout: float = 30) -> str:
        """The screen once ``test`` holds for it; fails with the last screen after ``timeout``."""
        deadline = time.monotonic() + timeout
        shown = ""
        while time.monotonic() < deadline:
            shown = await self.screen()
            if test(shown):
                return shown
            await asyncio.sleep(0.2)
        pytest.fail(f"the browser never showed {what}; its screen:\n{shown}")

    async def press(self, key: str) -> None:
        event = KEYS[key]
        await self.call("Input.dispatchKeyEvent", type="keyDown", **event)
        up = {k: v for k, v in event.items() if k != "text"}
        await self.call("Input.dispatchKeyEvent", type="keyUp", **up)


@asynccontextmanager
async def browser_page(chromium: str, url: str) -> AsyncIterator[Page]:
    """Headless Chromium showing ``url``, with the terminal catcher installed first."""
    import aiohttp

    with tempfile.TemporaryDirectory(prefix="gputui-chromium-") as profile:
        proc = subprocess.Popen(
            [
                chromium,
                "--headless=new",
                "--no-sandbox",  # root in CI containers; the page is our own
                "--remote-debugging-port=0",
                "--remote-debugging-address=127.0.0.1",
                f"--user-data-dir={profile}",
                "--no-first-run",
                "--window-size=1280,800",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its helpers too can be ended, before the profile goes
        )
        try:
            active = Path(profile) / "DevToolsActivePort"
            deadline = time.monotonic() + 30
            while not (active.exists() and len(active.read_text().split()) >= 2):
                assert proc.poll() is None, "chromium exited at start"
                assert time.monotonic() < deadline, "chromium never opened its DevTools port"
                await asyncio.sleep(0.1)
            port = active.read_text().split()[0]
            timeout = aiohttp.ClientTimeout(total=20)
            async with aiohttp.ClientSession(timeout=timeout) as session:
                async with session.get(f"http://127.0.0.1:{port}/json/list") as response:
                    targets = await response.json()
                (target,) = [t for t in targets if t["type"] == "page"]
                async with session.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                    page = Page(ws)
                    await page.call("Page.enable")
                    await page.call("Page.addScriptToEvaluateOnNewDocument", source=CATCH_TERMINAL)
                    await page.call("Page.navigate", url=url)
                    yield page
        finally:
            end_process_group(proc)


def end_process_group(proc: subprocess.Popen[bytes]) -> None:
    """End chromium and its helper processes, which write to the profile until they exit.

    Ending only the browser process let a loaded run's cleanup of the profile race a helper
    still writing to it (``Directory not empty``).
    """
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)  # a helper is still alive
        except ProcessLookupError:
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def on_containers_tab(screen: str) -> bool:
    # The tree's title row (its last columns yield to the width: NAME and FLAGS stay).
    return "llm-trainer-1" in screen and re.search(r"NAME +STATUS +GPUS", screen) is not None


def on_processes_tab(screen: str) -> bool:
    # The table's status line and title row: the tree has neither.
    return "GPU processes" in screen and re.search(r"PID +CONTAINER +GPU", screen) is not None


async def test_browser_runs_the_monitor_read_only(chromium: str, tmp_path: Path) -> None:
    """The page starts a monitor; 2 switches tabs; T (SIGTERM) is refused: read-only."""
    with gputui_serve(tmp_path) as url:
        async with browser_page(chromium, url) as page:
            first = await page.wait_for("the monitor's container tree", on_containers_tab)
            assert "READ-ONLY" in first.splitlines()[0]
            await page.evaluate("document.querySelector('.xterm-helper-textarea').focus()")
            await page.press("2")
            await page.wait_for("the Processes tab", on_processes_tab)
            await page.press("T")
            refused = await page.wait_for(
                "the read-only refusal", lambda s: READ_ONLY_REFUSAL in s.replace("\n", " ")
            )
            assert "SIGTERM" not in refused  # no confirmation dialog


async def test_browser_with_allow_actions_offers_signals(chromium: str, tmp_path: Path) -> None:
    """With --allow-actions the same key asks to confirm a SIGTERM (the demo never sends it)."""
    with gputui_serve(tmp_path, "--allow-actions") as url:
        async with browser_page(chromium, url) as page:
            first = await page.wait_for("the monitor's container tree", on_containers_tab)
            assert "READ-ONLY" not in first
            await page.evaluate("document.querySelector('.xterm-helper-textarea').focus()")
            await page.press("2")
            await page.wait_for("the Processes tab", on_processes_tab)
            await page.press("T")
            asked = await page.wait_for("the SIGTERM confirmation", lambda s: "SIGTERM" in s)
            assert READ_ONLY_REFUSAL not in asked.replace("\n", " ")
            await page.press("escape")
            await page.wait_for("the dialog closed", lambda s: "SIGTERM" not in s)


async def _palette_offers_logs(page: Page) -> bool:
    """Whether the command palette, searched for "contain", offers the container logs.

    "Show Containers tab" matches too, whatever the mode: once it shows, the search is done.
    """
    await page.wait_for("the monitor's container tree", on_containers_tab)
    await page.evaluate("document.querySelector('.xterm-helper-textarea').focus()")
    await page.press("ctrl+p")
    await page.wait_for("the command palette", lambda s: "Search for commands" in s)
    for key in "contain":
        await page.press(key)
    shown = await page.wait_for("the search's answer", lambda s: "Show Containers tab" in s)
    return "Container logs" in shown


async def test_browser_read_only_offers_no_container_logs(chromium: str, tmp_path: Path) -> None:
    """A read-only tab has no logs action (container logs can hold secrets); --allow-logs
    brings it back, still read-only."""
    with gputui_serve(tmp_path) as url:
        async with browser_page(chromium, url) as page:
            assert not await _palette_offers_logs(page)
    with gputui_serve(tmp_path, "--allow-logs") as url:
        async with browser_page(chromium, url) as page:
            assert await _palette_offers_logs(page)


async def test_browser_follows_the_printed_url_from_another_site(
    chromium: str, tmp_path: Path
) -> None:
    """The printed URL clicked on another site's page (a web mail): the token is swapped for
    the cookie and the monitor opens; the address bar no longer holds the token."""
    with gputui_serve(tmp_path) as url:
        async with browser_page(chromium, "about:blank") as page:
            link = f"data:text/html,<a id=go href='{url}'>gputui</a>"
            await page.call("Page.navigate", url=link)
            deadline = time.monotonic() + 20
            while await page.evaluate("document.getElementById('go') !== null") is not True:
                assert time.monotonic() < deadline, "the linking page never loaded"
                await asyncio.sleep(0.1)
            await page.evaluate("document.getElementById('go').click()")
            await page.wait_for("the monitor's container tree", on_containers_tab)
            address = await page.evaluate("location.href")
            assert address == url.split("?", 1)[0], address
