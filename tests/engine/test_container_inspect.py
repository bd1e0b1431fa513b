"""A container's inspect facts and all of its processes through the source seam, against
real containers: Docker's inspect reply, the container's cgroup and this host's ``/proc``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gputui.collect.collector import Collector
from gputui.collect.docker.source import DockerSource
from gputui.collect.linux.container_top import ContainerTop
from gputui.collect.linux.proc_reader import ProcSource
from gputui.collect.standins.scenario import ScenarioSource

SECRET = "hunter2-never-shown"


def _source(free_run_id: str) -> DockerSource:
    source = DockerSource(label=f"gputui-test={free_run_id}")
    assert source.read().status.ok
    return source


def test_details_name_mounts_labels_policy_and_env_names_never_values(
    run_container: Callable[..., Any], free_run_id: str, tmp_path: Path
) -> None:
    container = run_container(
        ["sleep", "300"],
        name=f"inspect-{free_run_id}",
        network_mode="none",
        environment={"API_TOKEN": SECRET, "TRAINING_EPOCHS": "3"},
        labels={"team": "vision", "long": "x" * 5000},
        restart_policy={"Name": "on-failure", "MaximumRetryCount": 3},
        volumes={str(tmp_path): {"bind": "/data", "mode": "ro"}},
        tmpfs={"/scratch": ""},
    )
    source = _source(free_run_id)
    try:
        details = source.details(container.id)
        assert details.error is None
        assert details.command == ("sleep", "300")
        assert details.restart_policy == "on-failure:3"
        assert details.networks == ("none",)
        assert details.image == "gputui-test:latest"
        assert details.created_at is not None and details.started_at is not None
        assert details.started_at >= details.created_at
        mounts = {m.destination: m for m in details.mounts}
        assert mounts["/data"].kind == "bind" and mounts["/data"].read_only
        assert mounts["/data"].source == str(tmp_path)
        labels = dict(details.labels)
        assert labels["team"] == "vision" and len(labels["long"]) == 256  # bounded
        assert {"API_TOKEN", "TRAINING_EPOCHS"} <= set(details.env_names)
        # The values are in no field of the result.
        assert SECRET not in repr(details) and "=3" not in repr(details.env_names)
        missing = source.details("0" * 64)
        assert missing.error is not None and "no such container" in missing.error
        assert source.details("../version").error is not None
    finally:
        source.close()


def test_processes_are_every_process_of_the_container_with_both_pids(
    run_container: Callable[..., Any], free_run_id: str
) -> None:
    container = run_container(
        ["sh", "-c", "sleep 301 & sleep 302 & while true; do :; done"],
        name=f"inspect-top-{free_run_id}",
        network_mode="none",
    )
    source = _source(free_run_id)
    try:
        # The shell forks its sleeps after the container is running: read until both are seen.
        deadline = time.monotonic() + 20.0
        while True:
            first = source.processes(container.id)
            assert first.error is None, first.error
            commands = {p.command: p for p in first.processes}
            if {"sleep 301", "sleep 302"} <= commands.keys() or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert {"sleep 301", "sleep 302"} <= commands.keys(), commands
        init = container.attrs["State"]["Pid"]
        shell = next(p for p in first.processes if p.pid == init)
        assert shell.container_pid == 1 and shell.user == "root"
        assert commands["sleep 301"].container_pid not in (None, commands["sleep 301"].pid)
        assert all(p.rss_bytes > 0 for p in first.processes)
        assert first.total == len(first.processes) == 3
        time.sleep(0.5)
        again = source.processes(container.id)
        busy = next(p for p in again.processes if p.pid == init)
        assert busy.cpu_percent is not None and busy.cpu_percent > 30, busy  # a busy loop
        # No process of this test's own (the host's) is listed.
        assert os.getpid() not in {p.pid for p in again.processes}
    finally:
        source.close()


def test_processes_in_a_sub_pid_namespace_show_their_pid_in_the_container(
    run_container: Callable[..., Any], free_run_id: str
) -> None:
    """``unshare -fp`` in the container: its sleeps are PIDs 1 and 2 of a namespace below the
    container's; the list shows their PIDs in the container's namespace, as the tree does."""
    inner = "busybox sleep 3101 & exec busybox sleep 3102"
    box = run_container(
        ["sh", "-c", f"busybox unshare -fp --mount-proc busybox sh -c '{inner}' & wait"],
        name=f"inspect-subns-{free_run_id}",
        network_mode="none",
        cap_add=["SYS_ADMIN"],  # unshare(CLONE_NEWPID) and the proc mount need it
    )
    source = _source(free_run_id)
    try:
        deadline = time.monotonic() + 20
        while True:
            listed = {p.command: p for p in source.processes(box.id).processes}
            if {"busybox sleep 3101", "busybox sleep 3102"} <= listed.keys():
                break
            assert time.monotonic() < deadline, listed
            time.sleep(0.1)
    finally:
        source.close()
    script = 'for d in /proc/[0-9]*; do echo "${d#/proc/} $(tr "\\0" " " < $d/cmdline)"; done'
    inside = {}
    for line in box.exec_run(["sh", "-c", script]).output.decode().splitlines():
        number, _, command = line.partition(" ")
        if number.isdigit():
            inside[command.strip()] = int(number)
    for command in ("busybox sleep 3101", "busybox sleep 3102"):
        assert listed[command].container_pid == inside[command], (command, listed[command])
        assert listed[command].container_pid not in (1, 2)  # not the sub-namespace's


def test_processes_are_capped_and_counted(
    run_container: Callable[..., Any], free_run_id: str
) -> None:
    container = run_container(
        ["sh", "-c", "for i in 1 2 3 4 5 6; do sleep 300 & done; wait"],
        name=f"inspect-cap-{free_run_id}",
        network_mode="none",
    )
    container.reload()
    top = ContainerTop(limit=3)
    deadline = time.monotonic() + 10
    while True:
        read = top.read(container.id, container.attrs["State"]["Pid"])
        if read.total >= 7 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert len(read.processes) == 3 and read.total == 7
    assert top.read(container.id, None).error is not None
    # A PID that is not the container's: not listed as its processes.
    assert top.read(container.id, os.getpid()).error is not None


def test_collector_routes_inspect_to_the_owner_and_refuses_the_unlisted(
    run_container: Callable[..., Any], free_run_id: str
) -> None:
    container = run_container(
        ["sleep", "300"], name=f"inspect-r-{free_run_id}", network_mode="none"
    )
    scenario = {"nvml": "ok", "driver_version": "580.1", "gpus": []}
    collector = Collector(
        ScenarioSource(scenario),
        ProcSource(),
        DockerSource(label=f"gputui-test={free_run_id}"),
        mode="scenario",
        read_only=True,  # inspect only reads: read-only does not refuse it
        health=None,
    )
    try:
        collector.collect()
        assert collector.container_details(container.id).command == ("sleep", "300")
        assert collector.container_processes(container.id).total == 1
        unlisted = collector.container_details("f" * 64)
        assert unlisted.error is not None and "no connected engine" in unlisted.error
    finally:
        collector.close()
