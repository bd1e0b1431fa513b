"""Container churn while monitoring: 30 real containers created, started and removed.

The collector runs at a short interval on the machine's engine while four workers churn
labelled containers; the scenario names the PIDs of whichever churn containers run at that
moment. Checks: no exception, every live PID attributed to its own container, no container
listed 2 refreshes after its removal finished, and no cache still holding a removed one.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gputui.collect.collector import Collector
from gputui.collect.docker.source import DockerSource
from gputui.collect.linux.proc_reader import ProcSource
from gputui.collect.standins.scenario import ScenarioSource
from tests.support.gputui_process import gpu

CONTAINERS = 30
INTERVAL = 0.25


def test_churn_leaves_no_stale_rows_or_cache_entries(
    docker_engine: Any, run_container: Callable[..., Any], test_image: str, free_run_id: str
) -> None:
    lock = threading.Lock()
    running: dict[str, int] = {}  # churn container id -> host PID, while it runs
    removed_at: dict[str, float] = {}  # container id -> monotonic time its removal finished
    rng = random.Random(7)

    def churn(i: int) -> None:
        c = docker_engine.containers.create(
            test_image, ["sleep", "300"], name=f"gputui-churn-{free_run_id}-{i}",
            labels={"gputui-test": free_run_id}, network_mode="none",
        )  # fmt: skip
        c.start()
        pid = int(docker_engine.api.inspect_container(c.id)["State"]["Pid"])
        with lock:
            running[c.id] = pid
        # Several refreshes (0.25 s) long: a shorter life is often over before a loaded
        # engine has even answered the inspect, and on a loaded CI machine one refresh can
        # take most of a second (in one full run only 13 of 30 lives of 0.3-1.0 s were seen).
        time.sleep(rng.uniform(0.6, 1.5))
        with lock:
            del running[c.id]
        c.remove(force=True)
        with lock:
            removed_at[c.id] = time.monotonic()

    scenario = ScenarioSource({"gpus": [gpu(0, [])]})
    # The churn containers only: others' on a shared engine would lengthen every read and
    # blur the "2 refreshes after removal" bound.
    docker = DockerSource(label=f"gputui-test={free_run_id}")
    procs = ProcSource()
    collector = Collector(scenario, procs, docker, mode="scenario")
    samples: list[tuple[float, Any, dict[str, int]]] = []
    try:
        collector.collect()
        with ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(churn, i) for i in range(CONTAINERS)]
            while not all(f.done() for f in futures):
                with lock:
                    named = dict(running)
                scenario.nvml._gpus[0]["processes"] = [  # type: ignore[index]
                    {"pid": pid, "used_memory_mib": 10} for pid in named.values()
                ]
                started = time.monotonic()
                samples.append((started, collector.collect(), named))
                time.sleep(max(0.0, INTERVAL - (time.monotonic() - started)))
            for f in futures:
                f.result()  # a churn worker's own failure fails the test
        scenario.nvml._gpus[0]["processes"] = []  # type: ignore[index]
        for _ in range(2):
            time.sleep(INTERVAL)
            samples.append((time.monotonic(), collector.collect(), {}))
        churned = set(removed_at)
        assert len(churned) == CONTAINERS
        stale = [
            (cid[:12], round(t - removed_at[cid], 2))
            for t, snap, _ in samples
            for cid in {u.info.id for u in snap.containers} & churned
            if cid in removed_at and t >= removed_at[cid] + 2 * INTERVAL
        ]
        assert stale == [], f"listed 2 refreshes after removal: {stale[:5]}"
        seen = set()
        for _, snap, named in samples:
            by_pid = {pid: cid for cid, pid in named.items()}
            for p in snap.processes:
                if p.info.exists and p.pid in by_pid:
                    assert p.container_id == by_pid[p.pid], "PID attributed to the wrong container"
                    seen.add(p.container_id)
        assert len(seen) >= CONTAINERS // 2, "churn containers were hardly ever attributed"
        for name, ids in docker.tracked_ids().items():
            left = ids & churned
            assert not left, (
                f"DockerSource's {name} cache still holds {len(left)} removed containers"
            )
        assert all(not pids for pids in procs.tracked_pids().values())
    finally:
        collector.close()
