"""Per-user and per-compose-project GPU totals (``users`` / ``compose_projects``, the text report).

The rules are checked on snapshots built from the model; the end-to-end tests run real
containers as chosen uids, NVML replaced by a scenario naming their host PIDs.
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gputui.derive.users import gpu_list, project_usage, sort_rows, user_of, user_usage
from gputui.model.containers import ContainerInfo
from gputui.model.gpu import GpuProcessSample
from gputui.model.processes import GpuProcess, ProcessInfo
from gputui.model.snapshot import ContainerUsage, HostInfo, Snapshot
from gputui.present.text_report import snapshot_to_text

MIB = 1024 * 1024


def _usage(name: str, project: str | None = None, request: str | None = None) -> ContainerUsage:
    info = ContainerInfo(
        id=(name.encode().hex() * 64)[:64],
        name=name,
        image="img",
        status="running",
        compose_project=project,
        gpu_request=request,
    )
    return ContainerUsage(info)


def _proc(
    pid: int,
    gpu: int,
    mib: int,
    user: str | None,
    container: ContainerUsage | None = None,
    *,
    sm: int | None = 10,
    exists: bool = True,
    hidden: bool = False,
) -> GpuProcess:
    return GpuProcess(
        GpuProcessSample(pid=pid, gpu_index=gpu, used_memory_bytes=mib * MIB, sm_util=sm),
        ProcessInfo(pid=pid, exists=exists, proc_hidden=hidden, user=user),
        container.info.id if container else None,
    )


def _snap(procs: tuple[GpuProcess, ...], containers: tuple[ContainerUsage, ...]) -> Snapshot:
    return Snapshot(0.0, "scenario", HostInfo("node"), processes=procs, containers=containers)


TRAINER = _usage("trainer", project="llm", request="all")
NOTEBOOK = _usage("notebook")
OTHER = _usage("other")
CACHE = _usage("cache", project="llm")
RESERVER = _usage("reserver", project="batch", request="0")


def _demo() -> Snapshot:
    return _snap(
        (
            _proc(10, 0, 4000, "root", TRAINER, sm=60),
            _proc(10, 1, 4000, "root", TRAINER, sm=50),  # one process on two GPUs
            _proc(11, 2, 1000, "root"),  # the host's root: the same user
            _proc(20, 3, 2000, "1000", NOTEBOOK, sm=None),
            _proc(21, 3, 500, "1000", OTHER, sm=None),  # same number, another container
            _proc(22, 2, 300, "1000"),  # and on the host
            _proc(30, 2, 700, "alice", CACHE),
            _proc(999_999, 3, 100, None, exists=False),
            _proc(40, 1, 50, None, hidden=True),
            _proc(41, 1, 25, None),
        ),
        (TRAINER, NOTEBOOK, OTHER, CACHE, RESERVER),
    )


def test_users_add_up_across_host_and_containers() -> None:
    rows = {u.key: u for u in user_usage(_demo())}
    root = rows["user:root"]
    assert (root.label, root.kind) == ("root", "user")
    assert root.gpu_memory_bytes == 9000 * MIB
    # SM % per GPU: the mean over its three GPUs, never their sum (120 % would be no GPU's figure).
    assert root.sm_util == (60 + 50 + 10) // 3
    assert root.processes == 2  # PID 10 on two GPUs counts once
    assert root.gpu_indexes == (0, 1, 2)
    assert root.containers == ("host", "trainer")
    assert rows["user:alice"].containers == ("cache",)


def test_a_uid_without_a_host_name_is_one_row_per_container() -> None:
    rows = {u.key: u for u in user_usage(_demo())}
    notebook = rows[f"uid:1000@{NOTEBOOK.info.id}"]
    assert (notebook.label, notebook.kind) == ("uid 1000 (notebook)", "uid")
    assert notebook.gpu_memory_bytes == 2000 * MIB
    assert notebook.sm_util is None  # no process reported any
    assert rows[f"uid:1000@{OTHER.info.id}"].label == "uid 1000 (other)"
    assert rows["uid:1000"].label == "uid 1000"
    assert rows["uid:1000"].containers == ("host",)


def test_unknown_hidden_and_unreadable_owners_have_rows_so_totals_add_up() -> None:
    snapshot = _demo()
    rows = {u.key: u for u in user_usage(snapshot)}
    assert rows["unknown"].label == "PIDs nobody can find"
    assert rows["unknown"].containers == ("unknown",)
    assert rows["hidden"].label == "another user (hidden by /proc)"
    # hidepid hides the process and its cgroup: where it runs is unknown, not the host.
    assert rows["hidden"].containers == ("unknown",)
    assert rows["unreadable"].kind == "unreadable"
    total = sum(p.sample.used_memory_bytes or 0 for p in snapshot.processes)
    assert sum(u.gpu_memory_bytes for u in rows.values()) == total


def test_users_sort_by_each_column_and_reverse() -> None:
    rows = user_usage(_demo())
    assert rows[0].label == "root"  # most memory first by default
    assert [u.label for u in sort_rows(rows, "sm")][:1] == ["root"]
    by_name = [u.label for u in sort_rows(rows, "name")]
    assert by_name == sorted(by_name, key=str.casefold)
    assert [u.label for u in sort_rows(rows, "name", reverse=True)] == by_name[::-1]
    assert sort_rows(rows, "gpus")[0].label == "root"
    assert sort_rows(rows, "processes")[0].processes == max(u.processes for u in rows)


def test_compose_projects_sum_their_containers() -> None:
    projects = {p.project: p for p in project_usage(_demo())}
    llm = projects["llm"]
    assert llm.gpu_memory_bytes == 8700 * MIB
    assert llm.processes == 2
    assert llm.containers == ("cache", "trainer")
    assert llm.users == ("alice", "root")
    assert gpu_list(llm.gpu_indexes) == "0,1,2"
    # A project that only reserved GPUs is listed, with nothing used.
    assert projects["batch"].gpu_memory_bytes == 0 and projects["batch"].containers == ("reserver",)
    assert next(iter(projects)) == "llm"


def test_user_of_a_container_the_engine_does_not_know_uses_its_short_id() -> None:
    proc = GpuProcess(
        GpuProcessSample(pid=5, gpu_index=0, used_memory_bytes=MIB),
        ProcessInfo(pid=5, user="4242"),
        "f" * 64,
    )
    assert user_of(_snap((proc,), ()), proc)[1] == "uid 4242 (ffffffffffff)"


def test_text_report_has_users_and_projects_with_hostile_names_made_inert() -> None:
    evil = _usage("x\x1b[31mred\nline", project="p\x1b]0;t\x07")
    snapshot = _snap((_proc(7, 0, 10, "5000", evil), _proc(8, 0, 5, "bob")), (evil,))
    text = snapshot_to_text(snapshot)
    assert "\nUsers\n" in text and "\nCompose projects\n" in text
    assert "\x1b" not in text and "\x07" not in text
    users = text.split("\nUsers\n")[1].split("\n\n")[0].splitlines()
    assert users[0].split() == ["USER", "GPU-MEM", "SM", "PROCS", "GPUS", "WHERE"]
    assert users[1].lstrip().startswith("uid 5000 (x")
    assert users[2].split()[:2] == ["bob", "5.0MiB"]
    assert "Users" not in snapshot_to_text(_snap((), ()))


# -- end to end: real containers, real uids -----------------------------------------------------


def _host_pid(container: Any) -> int:
    container.reload()
    return int(container.attrs["State"]["Pid"])


def _unnamed_uid() -> int:
    for uid in range(4242, 4342):
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid
    raise AssertionError("no uid without a passwd entry")


def test_once_json_and_text_name_users_by_host_uid(
    run_container: Callable[..., Any], free_run_id: str, tmp_path: Path
) -> None:
    uid = _unnamed_uid()
    me = pwd.getpwuid(os.getuid()).pw_name
    stranger = run_container(["sleep", "300"], name=f"uid-{free_run_id}", user=str(uid))
    rooted = run_container(
        ["sleep", "300"],
        name=f"root-{free_run_id}",
        labels={"com.docker.compose.project": f"proj-{free_run_id}"},
    )
    scenario = {
        "gpus": [
            {
                "index": 0,
                "memory_used_mib": 7000,
                "processes": [
                    {"pid": _host_pid(stranger), "used_memory_mib": 3000, "sm_util": 40},
                    {"pid": _host_pid(rooted), "used_memory_mib": 2000, "sm_util": 30},
                    {"pid": os.getpid(), "used_memory_mib": 1000, "sm_util": 20},
                ],
            },
            {"index": 1, "processes": [{"pid": _host_pid(rooted), "used_memory_mib": 500}]},
        ]
    }
    path = tmp_path / "users.json"
    path.write_text(json.dumps(scenario))
    base = [sys.executable, "-m", "gputui", "--scenario", str(path), "--once"]
    for _ in range(5):  # a Docker engine slowed by other work may miss the one-shot deadline
        result = subprocess.run([*base, "--json"], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        doc = json.loads(result.stdout)
        # A read that ran into its deadline leaves containers for the next one (named then
        # by their cgroup only, ``docker-<id>``): a one-shot under load may need another try.
        named = {c["name"] for c in doc["containers"]} >= {
            f"uid-{free_run_id}",
            f"root-{free_run_id}",
        }
        if doc["sources"]["docker"]["ok"] and named:
            break
    assert doc["sources"]["docker"]["ok"], doc["sources"]["docker"]
    users = {u["user"]: u for u in doc["users"]}
    assert f"uid {uid} (uid-{free_run_id})" in users, sorted(users)
    mine = users[f"uid {uid} (uid-{free_run_id})"]
    assert mine["kind"] == "uid" and mine["gpu_memory_bytes"] == 3000 * MIB
    assert mine["containers"] == [f"uid-{free_run_id}"]
    # The container's root is the host's root (no user-namespace remapping here).
    root = users["root"]
    assert f"root-{free_run_id}" in root["containers"]
    assert root["gpu_indexes"] == [0, 1]
    if me == "root":  # this test process is a host process of the same user
        assert "host" in root["containers"]
        assert root["gpu_memory_bytes"] == 3500 * MIB and root["processes"] == 2
    else:
        assert users[me]["containers"] == ["host"]
    projects = {p["project"]: p for p in doc["compose_projects"]}
    assert projects[f"proj-{free_run_id}"]["gpu_memory_bytes"] == 2500 * MIB
    assert projects[f"proj-{free_run_id}"]["users"] == ["root"]
    text = subprocess.run(base, capture_output=True, text=True, timeout=120)
    assert text.returncode == 0, text.stderr
    assert f"uid {uid} (uid-{free_run_id})" in text.stdout.split("\nUsers\n")[1]
    assert f"proj-{free_run_id}" in text.stdout.split("\nCompose projects\n")[1]


# -- the exporter ---------------------------------------------------------------------------


def _series(body: bytes, name: str) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            if sample.name == name:
                out[sample.labels.get("user", sample.labels.get("family", ""))] = sample.value
                assert sample.labels["Hostname"] == "node"
    return out


def test_user_series_only_when_asked_and_capped() -> None:
    from gputui.exporter import families, run

    snapshot = _demo()
    assert _series(run.render_once(snapshot), "gputui_user_gpu_memory_used_bytes") == {}
    body = run.render_once(snapshot, user_series=True)
    memory = _series(body, "gputui_user_gpu_memory_used_bytes")
    assert memory["root"] == 9000 * MIB
    assert memory["uid 1000 (notebook)"] == 2000 * MIB
    assert memory["PIDs nobody can find"] == 100 * MIB
    assert _series(body, "gputui_user_gpu_processes")["root"] == 2
    sm = _series(body, "gputui_user_sm_util")
    assert sm["root"] == 40 and "uid 1000 (notebook)" not in sm  # no sample: absent, not 0
    dropped = _series(body, "gputui_series_dropped")
    assert dropped["gputui_user_gpu_memory_used_bytes"] == 0
    assert "gputui_user_gpu_memory_used_bytes" not in _series(
        run.render_once(snapshot), "gputui_series_dropped"
    )
    many = _snap(
        tuple(_proc(100 + i, 0, 1 + i, str(5000 + i)) for i in range(families.MAX_USER_SERIES + 6)),
        (),
    )
    body = run.render_once(many, user_series=True)
    kept = _series(body, "gputui_user_gpu_memory_used_bytes")
    assert len(kept) == families.MAX_USER_SERIES
    assert "uid 5000" not in kept  # the smallest users are the ones left out
    assert _series(body, "gputui_series_dropped")["gputui_user_gpu_memory_used_bytes"] == 6


def test_user_label_is_sanitised() -> None:
    from gputui.exporter import run

    evil = _usage("c\x1b]0;owned\x07")
    body = run.render_once(
        _snap((_proc(1, 0, 10, "6000", evil),), (evil,)), user_series=True
    ).decode()
    assert "\x1b" not in body and "\x07" not in body
    assert 'user="uid 6000 (c' in body


def test_export_once_user_series_flag() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gputui", "export", "--demo", "--once", "--user-series"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert 'gputui_user_gpu_memory_used_bytes{Hostname="demo-gpu-node",user="alice"}' in (
        result.stdout
    )


def test_a_hidden_process_is_unknown_not_host_in_every_front_end() -> None:
    from gputui.derive.analysis import Analyzer
    from gputui.derive.tree import ORPHANS_KEY, build_groups
    from gputui.exporter import run

    hidden = _proc(40, 1, 50, None, hidden=True)
    host = _proc(11, 0, 1000, "root")
    snapshot = _snap((hidden, host), ())
    text = snapshot_to_text(snapshot)
    line = next(line for line in text.splitlines() if line.lstrip().startswith("40 "))
    assert "(host)" not in line and "unknown" in line, line
    assert "(host)" in next(ln for ln in text.splitlines() if ln.lstrip().startswith("11 "))
    groups = {g.key: g for g in build_groups(snapshot)}
    assert [p.pid for p in groups[ORPHANS_KEY].processes] == [40]  # not in the host group
    assert [p.pid for p in groups["host"].processes] == [11]
    shares = Analyzer([]).analyse(snapshot).shares
    assert {s.party for s in shares.get(1, ())} == {"unknown"}
    body = run.render_once(snapshot).decode()
    sample = next(
        ln
        for ln in body.splitlines()
        if ln.startswith("gputui_process_gpu_memory_bytes{") and 'gpu="1"' in ln
    )
    assert 'user="another user (hidden by /proc)"' in sample, sample
    assert not hidden.on_host and host.on_host  # the one rule every front-end follows


def test_one_user_is_one_label_in_process_and_user_series() -> None:
    from gputui.exporter import run

    snapshot = _demo()
    body = run.render_once(snapshot, user_series=True)
    users = set(_series(body, "gputui_user_gpu_memory_used_bytes"))
    text = body.decode()
    process_users = {
        ln.split('user="', 1)[1].split('"', 1)[0]
        for ln in text.splitlines()
        if ln.startswith("gputui_process_gpu_memory_bytes{")
    }
    assert "uid 1000 (notebook)" in process_users and "1000" not in process_users
    # The same user, the same value, in both families (unfindable PIDs have their own family).
    assert process_users == users - {"PIDs nobody can find"}
    report = snapshot_to_text(snapshot)
    assert "uid 1000 (notebook)" in report.split("GPU processes", 1)[1].split("Containers", 1)[0]
