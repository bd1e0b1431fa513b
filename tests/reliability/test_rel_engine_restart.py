"""Engine restarts: a real dockerd stopped and started under a running collector and ``--once``.

The engine is a private dockerd (see conftest), started with ``--live-restore`` so its
container keeps its PID across restarts and the scenario keeps naming a live process. Per
restart: the outage shows (``sources.docker`` not ok, with a kind), nothing is lost meanwhile
(the last known containers stay), and within 2 refreshes of the engine answering again the
snapshot is right again: engine ok, the container listed, its PID attributed to it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from gputui.collect.collector import Collector
from gputui.collect.docker.source import DockerSource
from gputui.collect.linux.proc_reader import ProcSource
from gputui.collect.standins.scenario import ScenarioSource
from gputui.model.snapshot import Snapshot
from tests.support.gputui_process import gpu, run_gputui, write_scenario

RESTARTS = 2
INTERVAL = 0.5  # what matters is the number of refreshes; a short one keeps the test quick


def _correct(snap: Snapshot, cid: str, pid: int) -> bool:
    usage = snap.container(cid)
    return (
        snap.sources["docker"].ok
        and usage is not None
        and usage.known_to_engine
        and usage.info.status == "running"
        and pid in usage.pids
    )


def test_engine_restarts_under_collector_and_once(
    private_engine: tuple[Any, Any], tmp_path: Path
) -> None:
    engine, client = private_engine
    ct = client.containers.run(
        "gputui-disrupt:latest", ["sleep", "600"], detach=True, network_mode="none",
        labels={"gputui-disrupt": "test"},
    )  # fmt: skip
    ct.reload()
    pid = int(ct.attrs["State"]["Pid"])
    scenario = write_scenario(tmp_path / "s.json", {"gpus": [gpu(0, [pid])]})
    env = {"DOCKER_HOST": engine.url}
    collector = Collector(
        ScenarioSource(json.loads(scenario.read_text())),
        ProcSource(),
        DockerSource(base_url=engine.url),
        mode="scenario",
    )
    try:
        assert _correct(collector.collect(), ct.id, pid)
        for restart in range(RESTARTS):
            engine.stop()
            down = collector.collect()
            status = down.sources["docker"]
            assert not status.ok, f"restart {restart}: the outage was not reported"
            assert status.kind in ("unreachable", "not_found"), status
            # Never lose state on an outage: the container is still known, PID still attributed.
            assert down.container(ct.id) is not None
            assert ct.id in {u.info.id for u in down.containers if pid in u.pids}
            once = run_gputui("--once", "--json", "--scenario", str(scenario), env=env)
            assert once.returncode == 0, once.stderr.decode()
            report = json.loads(once.stdout)
            assert report["sources"]["docker"]["ok"] is False
            assert report["sources"]["docker"]["fix"]
            text = run_gputui("--once", "--scenario", str(scenario), env=env)
            assert text.returncode == 0, text.stderr.decode()
            assert b"Docker: " in text.stdout and b"Docker: ok" not in text.stdout

            engine.start()
            refreshes = 0
            while True:
                refreshes += 1
                snap = collector.collect()
                if _correct(snap, ct.id, pid) or refreshes == 2:
                    break
                time.sleep(INTERVAL)
            assert _correct(snap, ct.id, pid), (
                f"restart {restart}: not recovered 2 refreshes after the engine answered: "
                f"{snap.sources['docker']}"
            )
            once = run_gputui("--once", "--json", "--scenario", str(scenario), env=env)
            report = json.loads(once.stdout)
            assert report["sources"]["docker"]["ok"] is True
            [row] = [c for c in report["containers"] if c["id"] == ct.id]
            assert row["status"] == "running"
            assert row["pids"] == [pid]
    finally:
        collector.close()
