"""Real load for the scale runs: labelled busybox containers and cheap ``sleep`` processes.

Everything made here is registered for removal, and removal runs on normal exit, on an
exception, on Ctrl-C and on SIGTERM/SIGHUP (turned into SystemExit). Containers carry the label
``gputui-bench=<run id>``; only containers with the ``gputui-bench`` label are ever removed.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench import common
from tests.support.images import ensure_busybox_image

BENCH_IMAGE = "gputui-bench:latest"
BENCH_LABEL = "gputui-bench"
RUN_ID = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
#: Spawned sleeps and bench containers outlive a crashed benchmark by at most this long, unless
#: the run asks for longer (a soak's load must outlive the soak, or its scenario changes midway).
SLEEP_SECONDS = 1800

_cleanups: list[Callable[[], None]] = []


def run_cleanups() -> None:
    """Remove everything made so far (also registered with atexit as a last resort)."""
    _run_cleanups()


def _run_cleanups() -> None:
    while _cleanups:
        fn = _cleanups.pop()
        try:
            fn()
        except Exception as exc:  # keep cleaning the rest
            common.log(f"cleanup failed: {type(exc).__name__}: {exc}")


def install_cleanup_handlers() -> None:
    """Cleanups on exit; SIGTERM/SIGHUP become SystemExit so ``finally`` blocks run too."""
    atexit.register(_run_cleanups)

    def _exit(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _exit)


# --- processes -------------------------------------------------------------------------------


class Sleepers:
    """``n`` sleeping processes (posix_spawn: no Python fork per child, about 1 ms each)."""

    def __init__(self, lifetime_s: int = SLEEP_SECONDS) -> None:
        self.pids: list[int] = []
        self.lifetime = str(lifetime_s)
        self._sleep = shutil.which("sleep") or "/bin/sleep"
        _cleanups.append(self.kill_all)

    @staticmethod
    def headroom() -> int:
        """How many more processes this machine takes, keeping a quarter of pid_max free."""
        pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
        threads_max = int(Path("/proc/sys/kernel/threads-max").read_text())
        in_use = sum(1 for e in os.listdir("/proc") if e.isdigit())
        limit = min(pid_max, threads_max) * 3 // 4 - in_use
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
        if soft != resource.RLIM_INFINITY and os.geteuid() != 0:
            limit = min(limit, soft - in_use)  # a rough bound: the limit counts this user only
        return max(0, limit)

    def grow_to(self, n: int) -> None:
        while len(self.pids) < n:
            self.pids.append(os.posix_spawn(self._sleep, ["sleep", self.lifetime], os.environ))

    def kill_all(self) -> None:
        for pid in self.pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in self.pids:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        self.pids.clear()


# --- containers ------------------------------------------------------------------------------


def _run_alive(run_id: str) -> bool:
    """Whether the benchmark run that labelled a container is still running (a parallel soak)."""
    pid = run_id.partition("-")[0]
    return pid.isdigit() and int(pid) != os.getpid() and os.path.exists(f"/proc/{pid}")


class Containers:
    """Busybox containers labelled ``gputui-bench=<run id>``, created and started in parallel."""

    def __init__(self, client: Any, workers: int = 8, lifetime_s: int = SLEEP_SECONDS) -> None:
        self.client = client
        self.workers = workers
        self.lifetime = str(lifetime_s)
        self.ids: list[str] = []
        self.pids: dict[str, int] = {}
        self._serial = 0  # the next name suffix: churned containers never reuse a name
        _cleanups.append(self.remove_all)
        self._image()
        self.sweep_leftovers()

    def _image(self) -> None:
        # The tests' builder (tests.support.images, which imports no pytest); a NoBusybox
        # error stops the benchmark with its one line.
        ensure_busybox_image(self.client, BENCH_IMAGE)

    def sweep_leftovers(self) -> None:
        """Remove bench containers an earlier, killed run left behind (same label key)."""
        old = [
            c
            for c in self.client.containers.list(
                all=True, sparse=True, filters={"label": BENCH_LABEL}
            )
            if not _run_alive(str((c.attrs.get("Labels") or {}).get(BENCH_LABEL, "")))
        ]
        if old:
            common.log(f"removing {len(old)} containers left by an earlier benchmark run")
            self._remove([c.id for c in old])

    def _one(self, i: int) -> tuple[str, int]:
        c = self.client.containers.create(
            BENCH_IMAGE,
            ["sleep", self.lifetime],
            name=f"gputui-bench-{RUN_ID}-{i}",
            labels={BENCH_LABEL: RUN_ID},
            network_mode="none",  # no veth per container: faster start, nothing to clean up
        )
        self.ids.append(c.id)  # before start: a failed start must still be removed
        c.start()
        pid = self.client.api.inspect_container(c.id)["State"]["Pid"]
        return c.id, int(pid)

    def grow_to(self, n: int) -> None:
        start, t0 = len(self.pids), time.monotonic()
        first = self._serial
        self._serial += max(0, n - start)
        with ThreadPoolExecutor(self.workers) as pool:
            for cid, pid in pool.map(self._one, range(first, self._serial)):
                self.pids[cid] = pid
        if n > start:
            common.log(f"started {n - start} containers in {time.monotonic() - t0:.1f} s")

    def churn(self, keep: int, count: int) -> None:
        """Replace the ``count`` oldest containers after the first ``keep`` with new ones."""
        victims = list(self.pids)[keep : keep + count]
        self._remove(victims)
        for cid in victims:
            del self.pids[cid]
            self.ids.remove(cid)
        start = self._serial
        self._serial += len(victims)
        with ThreadPoolExecutor(self.workers) as pool:
            for cid, pid in pool.map(self._one, range(start, self._serial)):
                self.pids[cid] = pid

    def _remove(self, ids: list[str]) -> None:
        def rm(cid: str) -> None:
            with contextlib.suppress(Exception):  # already gone
                self.client.api.remove_container(cid, force=True)

        try:
            with ThreadPoolExecutor(self.workers) as pool:
                list(pool.map(rm, ids))
        except RuntimeError:  # at interpreter shutdown (atexit) no new threads: one by one
            for cid in ids:
                rm(cid)

    def remove_all(self) -> None:
        mine = self.client.containers.list(
            all=True, sparse=True, filters={"label": f"{BENCH_LABEL}={RUN_ID}"}
        )
        ids = sorted({*self.ids, *(c.id for c in mine)})
        if ids:
            t0 = time.monotonic()
            self._remove(ids)
            common.log(f"removed {len(ids)} bench containers in {time.monotonic() - t0:.1f} s")
        self.ids.clear()
        self.pids.clear()
