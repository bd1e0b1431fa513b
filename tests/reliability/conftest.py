"""Fixtures of the disruption suite: a private real dockerd, the gputui CLI, scenario files.

The engine-restart tests stop and start a *second* dockerd of their own (``PrivateEngine``:
own socket, data root and network namespace), so the machine's engine and everybody's
containers on it are never touched. It needs root, ``dockerd`` and ``unshare``, as CI has;
without them those tests skip, except in CI where they fail (a CI run must not pass by
skipping them).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.procfs import children

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # scripts/ holds the engine helpers shared with the script
    sys.path.insert(0, str(REPO))


from scripts.engine_control import PrivateEngine, import_image  # noqa: E402


def _in_ci() -> bool:
    return bool(os.environ.get("CI")) or os.environ.get("GPUTUI_REQUIRE_DOCKER") == "1"


@pytest.fixture(scope="module")
def private_engine() -> Iterator[tuple[PrivateEngine, Any]]:
    """A private, real dockerd (live-restore) with the disruption image, and a client for it."""
    reason = None
    if os.geteuid() != 0:
        reason = "stopping and starting a dockerd needs root"
    elif shutil.which("dockerd") is None or shutil.which("unshare") is None:
        reason = "no dockerd (or unshare) binary"
    if reason:
        if _in_ci():
            pytest.fail(f"engine restart tests required in CI but {reason}")
        pytest.skip(reason)
    import docker

    engine = PrivateEngine(live_restore=True)
    client = None
    try:
        engine.start()
        client = docker.DockerClient(base_url=engine.url, timeout=30)
        import_image(client)
        yield engine, client
    finally:
        if client is not None and not engine.running():
            engine.start()  # to remove what it holds
        engine.close(client)
        if client is not None:
            client.close()


@pytest.fixture
def host_sleeper() -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Factory for host processes (extra argv allowed, bytes too); all killed at the end."""
    code = "import sys, time; print('ready', flush=True); time.sleep(120)"
    with children() as spawn:

        def start(*extra: str | bytes, **kwargs: Any) -> subprocess.Popen[bytes]:
            return spawn(code, *extra, **kwargs)

        yield start
