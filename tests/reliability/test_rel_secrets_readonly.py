"""Secrets never leave gputui, and ``--read-only`` can neither exec nor signal.

Secrets: a real container with ``-e API_KEY=<unique value>`` running a process named in the
scenario; the value must appear in no output gputui can produce (``--once`` text and JSON,
``doctor --json``, ``export --once``, a recording) nor in the repr of any model object.

Read-only: the Collector refuses exec, interactive exec and signals with a reason, and nothing
reaches the container or the process.
"""

from __future__ import annotations

import signal
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gputui.collect.collector import READ_ONLY_REASON, Collector
from gputui.collect.docker.source import DockerSource
from gputui.collect.linux.proc_reader import ProcSource
from gputui.collect.standins.scenario import ScenarioSource
from gputui.model.settings import Settings
from gputui.wiring.compose import build_collector
from tests.support.gputui_process import gpu, run_gputui, write_scenario


def test_environment_values_never_leave(run_container: Callable[..., Any], tmp_path: Path) -> None:
    secret = f"s3cr3t-{uuid.uuid4().hex}"
    ct = run_container(
        ["sh", "-c", "sleep 600; :"],
        environment={"API_KEY": secret, "NVIDIA_VISIBLE_DEVICES": "all"},
    )
    pid = int(ct.attrs["State"]["Pid"])
    scenario = write_scenario(tmp_path / "s.json", {"gpus": [gpu(0, [pid])]})
    recording = tmp_path / "rec.jsonl"
    outputs = {
        "once": run_gputui("--once", "--scenario", str(scenario)),
        "json": run_gputui("--once", "--json", "--scenario", str(scenario)),
        "doctor": run_gputui("doctor", "--json", "--scenario", str(scenario)),
        "export": run_gputui("export", "--once", "--pid-labels", "--scenario", str(scenario)),
        "record": run_gputui(
            "record",
            str(recording),
            "--count",
            "2",
            "--interval",
            "0.1",
            "--scenario",
            str(scenario),
        ),
    }
    for name, out in outputs.items():
        assert out.returncode in (0, 1), (name, out.stderr.decode()[-1000:])
        assert secret.encode() not in out.stdout + out.stderr, name
    assert ct.id.encode() in outputs["json"].stdout  # the container is there, just not the env
    assert recording.stat().st_size > 0
    assert secret.encode() not in recording.read_bytes()
    collector = Collector(ScenarioSource({"gpus": [gpu(0, [pid])]}), ProcSource(), DockerSource())
    try:
        collector.request_health()
        snapshot = collector.collect()
        assert snapshot.container(ct.id) is not None
        assert secret not in repr(snapshot)
        assert secret not in repr(collector.container_sources[0].read())
        assert secret not in repr(vars(collector.container_sources[0]))
    finally:
        collector.close()


def test_read_only_refuses_every_action(
    run_container: Callable[..., Any],
    host_sleeper: Callable[..., subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    ct = run_container(["sleep", "300"])
    proc = host_sleeper()
    scenario = write_scenario(tmp_path / "s.json", {"gpus": [gpu(0, [proc.pid])]})
    collector = build_collector(Settings(read_only=True, scenario=scenario), once=True)
    try:
        snap = collector.collect()
        [gp] = snap.processes
        calls = collector.container_sources[0].api_calls  # type: ignore[attr-defined]
        result = collector.exec_in_container(ct.id, ["nvidia-smi"], 5)
        assert result.error == READ_ONLY_REASON and result.exit_code is None
        assert collector.interactive_exec_argv(ct.id, ["sh"]) is None
        assert collector.container_action(ct.id, "stop") == READ_ONLY_REASON
        for signum in (signal.SIGTERM, signal.SIGKILL, signal.SIGSTOP):
            assert collector.signal_process(gp.pid, signum, gp.info.start_time) == READ_ONLY_REASON
        assert collector.container_sources[0].api_calls == calls  # type: ignore[attr-defined]
    finally:
        collector.close()
    assert proc.poll() is None  # still running, never stopped
    assert proc.pid and _state(proc.pid) != "T"
    ct.reload()
    assert ct.status == "running"
    assert not ct.attrs.get("ExecIDs")  # no exec ever reached the engine


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
