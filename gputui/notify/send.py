"""One delivery of one body to one target: a webhook POST or a command run with argv.

Never raises for what the receiver does: every outcome is a :class:`Outcome` saying whether a
retry may help (a 5xx or 429 reply, a timeout, an unreachable receiver, a command that failed)
or not (a 4xx reply, a command that cannot be started). Messages name the target by
:attr:`~gputui.notify.config.NotifyTarget.shown` only: never its URL's path, a header, an
argument or an environment value.
"""

from __future__ import annotations

import contextlib
import os
import signal
import ssl
import subprocess
import time
import urllib.parse

from gputui.collect.http_client import (
    Cancel,
    Exchange,
    HttpCancelled,
    HttpError,
    HttpTimeout,
    HttpTooLarge,
    Target,
)
from gputui.model.records import record
from gputui.notify.config import NotifyTarget

#: A receiver's answer is read (and dropped) up to this size: more is an error, not a hang.
MAX_REPLY_BYTES = 1 << 20
#: The environment a command gets besides its own ``env`` and the event's ``GPUTUI_*``.
_PASSED_ENV = ("PATH", "LANG", "LC_ALL", "TZ")


@record
class Outcome:
    """How one attempt ended.

    Attributes:
        ok: Delivered.
        retry: Not delivered, and another attempt may succeed.
        detail: One line for the log (``HTTP 503``, ``did not answer within 5 s``...).
    """

    ok: bool
    retry: bool
    detail: str


def _target(url: str) -> tuple[Target, str]:
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or "localhost"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    shown = f"[{host}]" if ":" in host else host
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return (
        Target(
            host=host,
            port=port,
            tls=ssl.create_default_context() if parts.scheme == "https" else None,
            host_header=f"{shown}:{port}",
        ),
        path,
    )


def post_webhook(target: NotifyTarget, body: bytes, cancel: Cancel | None = None) -> Outcome:
    """POST ``body`` (JSON) to the target's URL within its timeout.

    Args:
        target: A webhook target.
        body: The encoded payload.
        cancel: Stops the request from another thread (closing the worker).
    """
    where, path = _target(target.url)
    headers = {
        "Host": where.host_header,
        "Content-Type": "application/json",
        "User-Agent": "gputui-notify",
        "Connection": "close",
        **dict(target.headers),
    }
    exchange = Exchange(where, time.monotonic() + target.timeout_s, cancel)
    try:
        response = exchange.send("POST", path, headers, body)
        exchange.read_body(MAX_REPLY_BYTES)
    except HttpTooLarge:
        return Outcome(False, False, f"answered more than {MAX_REPLY_BYTES} bytes")
    except HttpTimeout:
        return Outcome(False, True, f"did not answer within {target.timeout_s:g} s")
    except HttpCancelled:
        return Outcome(False, False, "cancelled")
    except ssl.SSLError:
        return Outcome(False, True, "TLS failed")
    except HttpError as exc:
        # The client's own one-line messages ("malformed HTTP reply", "headers longer than").
        return Outcome(False, True, f"did not answer like an HTTP server ({str(exc)[:120]})")
    except OSError as exc:
        return Outcome(False, True, f"cannot be reached ({type(exc).__name__})")
    finally:
        exchange.close()
    status = response.status
    if 200 <= status < 300:
        return Outcome(True, False, f"HTTP {status}")
    # 408 and 429 say "later"; other 4xx say the request itself is wrong: no retry helps.
    return Outcome(False, status >= 500 or status in (408, 429), f"HTTP {status}")


def run_command(
    target: NotifyTarget, body: bytes, event_env: dict[str, str], cancel: Cancel | None = None
) -> Outcome:
    """Run the target's argv (never a shell), the body on its stdin, within its timeout.

    Its environment is ``PATH``, ``LANG``, ``LC_ALL`` and ``TZ`` of gputui's own, the event's
    ``GPUTUI_*`` variables, then the target's ``env``. Its output is discarded (it could be
    anything, and is never shown). It runs in a session of its own, so a timeout stops
    everything it started, not only its first process.

    Args:
        target: A command target.
        body: The payload (gputui's JSON shape) for its stdin.
        event_env: ``GPUTUI_EVENT_*`` variables describing the event (sanitised).
        cancel: When cancelled, the command is stopped at its next check (closing).
    """
    env = {k: v for k in _PASSED_ENV if (v := os.environ.get(k)) is not None}
    env.update(event_env)
    env.update(dict(target.env))
    try:
        process = subprocess.Popen(  # argv only: no shell ever parses it
            list(target.argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        return Outcome(False, False, f"cannot be started ({type(exc).__name__})")
    deadline = time.monotonic() + target.timeout_s
    try:
        assert process.stdin is not None
        with contextlib.suppress(OSError):  # a command that does not read its stdin
            # Non-blocking: a body beyond the pipe's buffer that nobody reads must not hold
            # the worker past the deadline (payloads are far smaller than the 64 KiB buffer).
            os.set_blocking(process.stdin.fileno(), False)
            os.write(process.stdin.fileno(), body)
        with contextlib.suppress(OSError):
            process.stdin.close()
        while True:
            try:
                code = process.wait(min(0.2, max(0.0, deadline - time.monotonic())))
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline or (cancel is not None and cancel.cancelled):
                    _stop(process)
                    return Outcome(False, True, f"did not finish within {target.timeout_s:g} s")
    finally:
        if process.poll() is None:
            _stop(process)
    if code == 0:
        return Outcome(True, False, "exit 0")
    return Outcome(False, True, f"exit {code}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the command's session (its own process group), then reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(2.0)
