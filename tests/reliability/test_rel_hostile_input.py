"""Hostile input: labels, env values and command lines built to attack a terminal or a shell.

Container names and image tags are restricted by Docker; labels, environment values the image
or user sets, and process command lines are the open doors. Each goes through the real path
(a real container or host process, a scenario naming its PID, ``gputui --once``) and must come
out as inert text: no escape or control byte in the text report, valid JSON that keeps the
value exactly (escaped), and commands executed as argv, never through a shell.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gputui.boundary.sanitise import safe_text
from gputui.collect.collector import Collector
from gputui.collect.docker.parse import MAX_NAME_CHARS
from gputui.collect.docker.source import DockerSource
from gputui.collect.linux.proc_reader import ProcSource
from gputui.collect.standins.scenario import ScenarioSource
from tests.support.gputui_process import gpu, run_gputui, terminal_unsafe, write_scenario

ESC_SEQS = "\x1b[2J\x1b[31mRED\x1b]0;pwned-title\x07\x1b]52;c;cHduZWQ=\x07\x9b31m\x1bPq#\x1b\\"
CONTROL = "\x01\x07\x08\x0b\x0c\x0d\x7f\x85"
SHELL = "$(touch /tmp/pwned) `id` ; rm -rf / | cat && echo ${HOME} > x"
LONG = "L" * 20_000
HOSTILE = ESC_SEQS + CONTROL + SHELL + "\u202eevil\u200b" + LONG
#: A user's usual locale (en_US.UTF-8) makes stdout strict UTF-8; C.UTF-8 would let Python
#: write undecodable bytes through raw (surrogateescape), which is no better for a terminal.
STRICT = {"PYTHONIOENCODING": "utf-8:strict"}


def _assert_inert(result: subprocess.CompletedProcess[bytes]) -> str:
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-2000:]
    assert b"Traceback" not in result.stderr
    assert terminal_unsafe(result.stdout) == []
    return result.stdout.decode()


def test_safe_text_neutralises_everything() -> None:
    out = safe_text(HOSTILE + "\udcff\udcfe", 300)
    assert len(out) <= 300
    assert not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in out)
    assert not any(0xD800 <= ord(c) <= 0xDFFF for c in out)
    out.encode("utf-8")  # writable by any UTF-8 stream


def test_host_process_with_hostile_non_utf8_argv(
    host_sleeper: Callable[..., subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    # Bytes that are not UTF-8: psutil hands them back as lone surrogates, which crashed
    # --once's text output (UnicodeEncodeError) before procs.clean_text.
    proc = host_sleeper(b"\xff\xfe\xc3(" + ESC_SEQS.encode() + b"\x80", HOSTILE)
    scenario = write_scenario(tmp_path / "s.json", {"gpus": [gpu(0, [proc.pid])]})
    text = _assert_inert(run_gputui("--once", "--scenario", str(scenario), env=STRICT))
    assert f"{proc.pid}" in text  # listed (its command cut to the column, minus escapes)
    result = run_gputui("--once", "--json", "--scenario", str(scenario))
    assert result.returncode == 0, result.stderr.decode()
    assert terminal_unsafe(result.stdout) == []  # JSON escapes control characters too
    [row] = [p for p in json.loads(result.stdout)["processes"] if p["pid"] == proc.pid]
    assert "\ufffd" in row["command"]  # the undecodable bytes, replaced
    assert ESC_SEQS in row["command"]  # JSON keeps the value exactly, escaped
    # psutil reads cmdline in text mode with universal newlines: a CR arrives as LF.
    assert row["command"].endswith(HOSTILE.replace("\r", "\n"))
    for args in (("export", "--once"), ("doctor",)):
        out = run_gputui(*args, "--scenario", str(scenario), env=STRICT)
        assert out.returncode in (0, 1), out.stderr.decode()[-2000:]
        assert b"Traceback" not in out.stderr
        assert terminal_unsafe(out.stdout) == []


def test_container_labels_env_and_command_line(
    run_container: Callable[..., Any], tmp_path: Path
) -> None:
    # The container's own process gets a non-UTF-8, escape-laden $0 through the shell inside
    # it (the Docker API itself only carries UTF-8).
    inner = r'exec sh -c "sleep 600; :" "$(printf "\033[31mEVIL\033]0;pwn\007\377\376 ; id")"'
    ct = run_container(
        ["sh", "-c", inner],
        labels={
            "com.docker.compose.project": "p" + ESC_SEQS + SHELL,
            "com.docker.compose.service": "s" + CONTROL + LONG,
            "io.kubernetes.pod.name": ESC_SEQS + "\x00nul",
            "io.kubernetes.pod.namespace": SHELL,
        },
        environment={
            "NVIDIA_VISIBLE_DEVICES": "0" + ESC_SEQS,
            "NVIDIA_DRIVER_CAPABILITIES": "compute,utility" + ESC_SEQS,
        },
    )
    pid = int(ct.attrs["State"]["Pid"])
    deadline = time.monotonic() + 10
    while b"EVIL" not in Path(f"/proc/{pid}/cmdline").read_bytes():
        assert time.monotonic() < deadline, "the container's shell never exec'd"
        time.sleep(0.05)
    scenario = write_scenario(tmp_path / "s.json", {"gpus": [gpu(0, [pid])]})
    text = _assert_inert(run_gputui("--once", "--scenario", str(scenario), env=STRICT))
    assert ct.name in text
    result = run_gputui("--once", "--json", "--scenario", str(scenario))
    report = json.loads(result.stdout)
    [row] = [c for c in report["containers"] if c["id"] == ct.id]
    assert row["compose_project"] == "p" + ESC_SEQS + SHELL
    # Exact in JSON (escaped by the encoder), but bounded: the engine's strings are cut at
    # MAX_NAME_CHARS before use, so a 20,000-character label costs at most that much.
    assert row["compose_service"] == ("s" + CONTROL + LONG)[:MAX_NAME_CHARS]
    assert row["pids"] == [pid]
    [proc] = [p for p in report["processes"] if p["pid"] == pid]
    assert "\ufffd" in proc["command"] and "\x1b[31mEVIL" in proc["command"]
    assert proc["container"]["id"] == ct.id
    doctor = run_gputui("doctor", "--scenario", str(scenario))
    assert b"Traceback" not in doctor.stderr
    assert terminal_unsafe(doctor.stdout) == []


def test_exec_is_argv_only(run_container: Callable[..., Any], monkeypatch: Any) -> None:
    ct = run_container(["sleep", "300"])
    source = DockerSource()
    spawned: list[Any] = []

    def no_local_process(*args: Any, **kwargs: Any) -> Any:
        spawned.append(args)
        raise AssertionError(f"exec spawned a local process: {args!r}")

    # Exec goes through the engine API: no shell, no process at all, on this side.
    for module, name in ((subprocess, "Popen"), (os, "system"), (os, "posix_spawn")):
        monkeypatch.setattr(module, name, no_local_process)
    try:
        payload = "; touch /tmp/pwned; $(touch /tmp/pwned2) `touch /tmp/pwned3`"
        result = source.exec(ct.id, ["cat", payload], 20)
        assert result.argv == ("cat", payload)
        assert result.exit_code == 1
        assert payload in result.stderr  # cat got it as one file name, verbatim
        result = source.exec(ct.id, ["nvidia-smi", "; touch /tmp/pwned"], 20)
        assert result.exit_code == 0
        check = source.exec(ct.id, ["ls", "/tmp"], 20)
        assert check.exit_code == 0
        assert "pwned" not in check.stdout
    finally:
        monkeypatch.undo()
        source.close()
    assert spawned == []
    # The interactive exec (docker CLI under the TUI) is an argv list, the payload one element.
    collector = Collector(ScenarioSource({"gpus": []}), ProcSource(), DockerSource())
    try:
        # Actions go to the source that listed the container at the last collection.
        deadline = time.monotonic() + 60
        while collector.container_owner(ct.id) is None and time.monotonic() < deadline:
            collector.collect()
        argv = collector.interactive_exec_argv(ct.id, ["sh", "-c", "; id"])
        assert argv is not None
        assert argv[-4:] == [ct.id, "sh", "-c", "; id"]
    finally:
        collector.close()


@pytest.mark.parametrize(
    "env", [{"TERM": "dumb"}, {"NO_COLOR": "1"}, {"TERM": "dumb", "NO_COLOR": "1"}]
)
def test_once_plain_terminals(env: dict[str, str], tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path / "s.json", {"gpus": [gpu(0, [os.getpid()])]})
    for args in (("--once",), ("--once", "--json"), ("--demo", "--once")):
        out = (
            run_gputui(*args, "--scenario", str(scenario), env=env)
            if "--demo" not in args
            else run_gputui(*args, env=env)
        )
        _assert_inert(out)
    assert sys.executable  # the scenario named this test's own PID: attributed to the host


def test_report_quotes_of_container_facts_are_inert() -> None:
    # Health summaries and fixes quote env values an image sets (NVIDIA_DRIVER_CAPABILITIES),
    # and the GPU request column shows NVIDIA_VISIBLE_DEVICES: both reached the terminal raw.
    from gputui.model.containers import ContainerInfo
    from gputui.model.snapshot import ContainerUsage, HostInfo, Snapshot
    from gputui.model.status import Finding, FindingSeverity, HealthCheck, HealthStatus
    from gputui.present.text_report import format_checks, snapshot_to_text

    check = HealthCheck(
        "container.caps:" + ESC_SEQS, HealthStatus.WARN, "caps " + ESC_SEQS, fix=ESC_SEQS
    )
    lines = format_checks([check], {HealthStatus.WARN})
    assert terminal_unsafe("\n".join(lines).encode()) == []
    info = ContainerInfo(
        "a" * 64, "x", "img", "running", gpu_request=("0" + ESC_SEQS,), gpu_request_via="env"
    )
    snap = Snapshot(
        taken_at=0.0,
        mode="live",
        host=HostInfo("h"),
        containers=(ContainerUsage(info),),
        health=(check,),
    )
    finding = Finding("oom_killed", "container:x", FindingSeverity.WARN, "OOM " + ESC_SEQS)
    assert terminal_unsafe(snapshot_to_text(snap, [finding]).encode()) == []
