"""``gputui free``: which GPUs a new job can use now, and why each other GPU cannot.

The verdict's rules are checked on snapshots built from the model; the command itself runs on
scenarios against the real Docker engine (a reserved idle container, a busy GPU, a GPU held by
a PID nobody can find, free GPUs).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gputui.derive.free import FreeRules, free_gpus, reserves
from gputui.model.containers import ContainerInfo
from gputui.model.gpu import GpuProcessSample, GpuSample
from gputui.model.processes import GpuProcess, ProcessInfo, Visibility
from gputui.model.snapshot import ContainerUsage, HostInfo, Snapshot
from gputui.model.status import Finding, FindingSeverity, SourceStatus
from tests.support.gputui_process import run_free, run_free_settled

MIB = 1024 * 1024
GIB = 1024 * MIB
NOW = 1_750_000_000.0
TEST_LABEL = "gputui-test"  # the label tests/conftest.py puts on every test container


def _gpu(index: int, used_mib: int = 0, total_mib: int = 80_000, **kw: Any) -> GpuSample:
    return GpuSample(
        index=index,
        uuid=f"GPU-{index:04d}",
        name="NVIDIA H200",
        memory_used_bytes=used_mib * MIB,
        memory_total_bytes=total_mib * MIB,
        utilization_gpu=kw.pop("util", 0),
        **kw,
    )


def _container(
    name: str,
    request: str | tuple[str, ...] | None,
    status: str = "running",
    pids: tuple[int, ...] = (),
    **kw: Any,
) -> ContainerUsage:
    info = ContainerInfo(
        id=(name.encode().hex() * 64)[:64],
        name=name,
        image="img",
        status=status,
        gpu_request=request,
        started_at=kw.pop("started_at", NOW - 7200),
    )
    return ContainerUsage(info, pids=pids, **kw)


def _proc(
    pid: int,
    gpu: int,
    mib: int,
    *,
    exists: bool = True,
    hidden: bool = False,
    cid: str | None = None,
) -> GpuProcess:
    return GpuProcess(
        GpuProcessSample(pid=pid, gpu_index=gpu, used_memory_bytes=mib * MIB, sm_util=50),
        ProcessInfo(pid=pid, exists=exists, proc_hidden=hidden, name="python", user="root"),
        cid,
    )


def _snap(
    gpus: tuple[GpuSample, ...],
    containers: tuple[ContainerUsage, ...] = (),
    processes: tuple[GpuProcess, ...] = (),
    **kw: Any,
) -> Snapshot:
    return Snapshot(
        NOW,
        "scenario",
        HostInfo("node"),
        gpus=gpus,
        containers=containers,
        processes=processes,
        **kw,
    )


def _codes(snapshot: Snapshot, rules: FreeRules | None = None) -> dict[int, list[str]]:
    return {g.index: [e.code for e in g.exclusions] for g in free_gpus(snapshot, rules).gpus}


def test_unclaimed_gpus_qualify_most_free_memory_first_then_by_index() -> None:
    snap = _snap((_gpu(0, used_mib=500), _gpu(1), _gpu(2, total_mib=143_771), _gpu(3)))
    answer = free_gpus(snap)
    assert [g.index for g in answer.usable] == [2, 1, 3, 0]
    assert answer.excluded == ()


def test_reservation_by_index_uuid_and_all_in_reserving_states_only() -> None:
    gpus = (_gpu(0), _gpu(1), _gpu(2), _gpu(3))
    snap = _snap(
        gpus,
        containers=(
            _container("by-index", ("1",)),
            _container("by-uuid", ("gpu-0002",)),  # UUIDs compare without case
            _container("gone", "all", status="exited"),
            _container("never-started", ("3",), status="created"),
        ),
    )
    assert _codes(snap) == {0: [], 1: ["reserved"], 2: ["reserved"], 3: ["reserved"]}
    everything = _snap(gpus, containers=(_container("greedy", "all", status="paused"),))
    assert all(codes == ["reserved"] for codes in _codes(everything).values())
    assert not reserves(_container("none", None), gpus[0])


def test_idle_reservation_says_for_how_long() -> None:
    notebook = _container("notebook-3", ("1",), started_at=NOW - 9 * 3600)
    snap = _snap((_gpu(0), _gpu(1)), containers=(notebook,))
    (verdict,) = free_gpus(snap).excluded
    assert verdict.exclusions[0].text == (
        "reserved by idle container notebook-3 (up 9h00m, no GPU process)"
    )
    assert verdict.exclusions[0].container == "notebook-3"
    # With the findings engine's idle time (a monitor that has watched it), that is said.
    finding = Finding(
        "idle_reservation",
        f"container:{notebook.info.id}",
        FindingSeverity.WARN,
        "idle",
        (("idle_seconds", 7200.0),),
    )
    (verdict,) = free_gpus(snap, findings=(finding,)).excluded
    assert verdict.exclusions[0].text == "reserved by idle container notebook-3 for 2h00m"


def test_processes_orphans_and_hidden_processes_hold_their_gpus() -> None:
    trainer = _container("trainer", ("0",), pids=(10,))
    snap = _snap(
        (_gpu(0, 4000), _gpu(1, 3000), _gpu(2, 2000), _gpu(3)),
        containers=(trainer,),
        processes=(
            _proc(10, 0, 4000, cid=trainer.info.id),
            _proc(11, 1, 3000),
            _proc(999_999, 2, 2000, exists=False),
            _proc(12, 3, 10, hidden=True),
        ),
    )
    answer = free_gpus(snap)
    assert _codes(snap) == {
        0: ["reserved", "processes"],
        1: ["processes"],
        2: ["orphan"],
        3: ["hidden"],
    }
    texts = {g.index: [e.text for e in g.exclusions] for g in answer.gpus}
    assert texts[0][0] == "reserved by container trainer (1 GPU process)"
    assert texts[0][1] == "used by 1 process (3.9GiB, trainer): PID 10"
    assert texts[1] == ["used by 1 process (2.9GiB, host): PID 11"]
    assert texts[2] == ["2.0GiB held by PID 999999 nobody can see (no such process here)"]
    assert "/proc hides it" in texts[3][0]


def test_memory_in_use_with_no_process_listed_beyond_the_drivers_share() -> None:
    # 600 MiB is the driver's own; 5 GiB with no process listed is someone NVML cannot name.
    snap = _snap((_gpu(0, 600), _gpu(1, 5 * 1024)))
    assert _codes(snap) == {0: [], 1: ["unexplained_memory"]}
    unknown = _snap((GpuSample(index=0, uuid=None, name=None),))
    assert _codes(unknown) == {0: ["memory_unknown"]}


def test_min_free_memory_and_max_util() -> None:
    snap = _snap((_gpu(0, total_mib=40_000, util=0), _gpu(1, util=30), _gpu(2, util=None)))
    rules = FreeRules(min_free_memory_bytes=60 * GIB, max_util=10)
    codes = _codes(snap, rules)
    assert codes == {0: ["low_memory"], 1: ["busy"], 2: ["busy"]}
    assert _codes(snap, FreeRules(min_free_memory_bytes=39 * GIB)) == {0: [], 1: [], 2: []}


def test_max_util_judges_the_interval_not_the_point_read() -> None:
    """A job busy part of each second reads 0 % at the driver's last 200 ms: ``--max-util``
    judges the interval's busy time (GPM's graphics activity, else the samples' mean)."""
    periodic = _gpu(0, util=0, utilization_gpu_mean=42.0)
    gpm = _gpu(1, util=100, utilization_gpu_mean=100.0, gpm_graphics_active=3.0)
    point_only = _gpu(2, util=30)
    edge = _gpu(3, util=0, utilization_gpu_mean=10.4)  # shown as 10 %: within 10 %
    answer = free_gpus(_snap((periodic, gpm, point_only, edge)), FreeRules(max_util=10))
    by_index = {g.index: g for g in answer.gpus}
    assert [e.code for e in by_index[0].exclusions] == ["busy"]
    assert by_index[0].exclusions[0].text == "42% busy (at most 10% asked)"
    assert by_index[1].usable and by_index[1].busy_percent == 3.0
    assert [e.code for e in by_index[2].exclusions] == ["busy"]  # no better figure: the read
    assert by_index[3].usable


def test_lost_and_mig_gpus_are_left_out() -> None:
    lost = GpuSample(index=0, uuid=None, name=None, lost=True, error="GPU is lost")
    snap = _snap((lost, _gpu(1, mig_mode_current=True), _gpu(2)))
    answer = free_gpus(snap)
    assert _codes(snap) == {0: ["lost"], 1: ["mig"], 2: []}
    assert answer.excluded[0].exclusions[0].text == "lost: GPU is lost"


def test_caveats_when_docker_or_pids_cannot_be_trusted() -> None:
    down = SourceStatus("docker", ok=False, error="timed out", kind="unreachable")
    absent = SourceStatus("docker", ok=False, error="no socket", kind="not_found")
    assert (
        "reservations are not known"
        in free_gpus(_snap((_gpu(0),), sources={"docker": down})).caveats[0]
    )
    assert free_gpus(_snap((_gpu(0),), sources={"docker": absent})).caveats == ()
    hidden = _snap((_gpu(0),), visibility=Visibility(host_pid_namespace=False))
    assert "PID namespace" in free_gpus(hidden).caveats[0]


def test_hostile_container_name_is_inert_in_the_explanation() -> None:
    evil = _container("x\x1b]0;pwned\x07\nGPU 9: free", ("0",))
    (verdict,) = free_gpus(_snap((_gpu(0),), containers=(evil,))).excluded
    text = verdict.exclusions[0].text
    assert "\x1b" not in text and "\n" not in text and "\x07" not in text


# -- the command ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["-n", "0"],
        ["-n", "two"],
        ["--max-util", "101"],
        ["--min-free-memory", "12X"],
        ["--demo", "--scenario", "x.json"],
        ["--bogus"],
    ],
)
def test_bad_input_is_one_line_and_status_2(args: list[str]) -> None:
    result = run_free(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_bad_scenario_is_one_line_and_status_2(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text('{"gpus": [{"utilization_gpu": 150}]}')
    result = run_free("--scenario", str(path))
    assert result.returncode == 2
    assert "utilization_gpu" in result.stderr and len(result.stderr.splitlines()) == 1


def test_demo_machine_has_no_free_gpu_but_a_free_mig_device_and_says_why() -> None:
    result = run_free("--demo", "-n", "2")
    assert result.returncode == 1
    assert result.stdout == ""
    err = result.stderr
    assert "0 of 4 GPUs qualify, 2 asked for" in err
    # GPU 3 is split into MIG devices: the notebook reserves one of them, not the whole GPU.
    assert "GPU 3: MIG mode is on" in err
    assert "MIG device 3:1: reserved by idle container notebook-gpu3" in err
    assert "held by PID 999999 nobody can see" in err
    # One device for one job: the free MIG device 3:2, by its UUID.
    one = run_free("--demo")
    assert one.returncode == 0 and one.stdout.startswith("MIG-"), one.stderr


def test_free_never_loads_textual(tmp_path: Path) -> None:
    code = (
        "import sys; from gputui.cli.main import main; "
        "status = main(['free', '--demo', '--json', '-n', '2']); "
        "assert 'textual' not in sys.modules and 'rich' not in sys.modules, 'UI loaded'; "
        "sys.exit(status)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1, result.stderr
    assert json.loads(result.stdout)["enough"] is False


def _host_pid(container: Any) -> int:
    container.reload()
    return int(container.attrs["State"]["Pid"])


def _absent_pid() -> int:
    return next(p for p in range(4_194_000, 4_194_300) if not os.path.exists(f"/proc/{p}"))


def test_free_on_a_machine_with_a_reserved_idle_container_a_busy_and_an_orphan_held_gpu(
    sole_gpu_reservations: None,
    run_container: Callable[..., Any],
    free_run_id: str,
    tmp_path: Path,
) -> None:
    scope = f"{TEST_LABEL}={free_run_id}"
    idle_name = f"notebook-{free_run_id}"
    run_container(["sleep", "300"], name=idle_name, environment={"NVIDIA_VISIBLE_DEVICES": "1"})
    busy = run_container(["sleep", "300"], name=f"busy-{free_run_id}")
    orphan = _absent_pid()
    scenario = {
        "gpus": [
            {"index": 0, "memory_total_mib": 80000, "memory_used_mib": 400},
            {"index": 1, "memory_total_mib": 143771},
            {
                "index": 2,
                "memory_used_mib": 30000,
                "utilization_gpu": 97,
                "processes": [{"pid": _host_pid(busy), "used_memory_mib": 30000, "sm_util": 95}],
            },
            {
                "index": 3,
                "memory_used_mib": 2000,
                "processes": [{"pid": orphan, "used_memory_mib": 2000}],
            },
            {"index": 4, "memory_total_mib": 143771, "memory_used_mib": 300},
        ]
    }
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps(scenario))

    # Default: the qualifying GPUs, best first, and nothing else on stdout.
    result = run_free_settled(scope, "--scenario", str(path))
    assert (result.returncode, result.stdout, result.stderr) == (0, "4,0\n", "")

    explained = run_free_settled(scope, "--scenario", str(path), "--explain", "-n", "1")
    assert (explained.returncode, explained.stdout) == (0, "4\n")
    lines = explained.stderr.splitlines()
    assert lines[0].startswith("gputui free: 2 of 5 GPUs qualify: 4 (")
    why = {line.split(":", 1)[0].strip(): line.split(":", 1)[1] for line in lines[1:]}
    assert f"reserved by idle container {idle_name} (up " in why["GPU 1"]
    assert (
        f"used by 1 process (29.3GiB, busy-{free_run_id}): PID {_host_pid(busy)}" in (why["GPU 2"])
    )
    assert f"2.0GiB held by PID {orphan} nobody can see" in why["GPU 3"]
    assert set(why) == {"GPU 1", "GPU 2", "GPU 3"}

    # Too few: nothing on stdout (an empty CUDA_VISIBLE_DEVICES, never a short list), the
    # reasons on stderr, status 1.
    short = run_free_settled(scope, "--scenario", str(path), "-n", "3")
    assert (short.returncode, short.stdout) == (1, "")
    assert "2 of 5 GPUs qualify, 3 asked for" in short.stderr
    assert "GPU 3:" in short.stderr

    # A memory floor leaves GPU 0 (80000 MiB) out.
    big = run_free_settled(scope, "--scenario", str(path), "--min-free-memory", "100G")
    assert (big.returncode, big.stdout) == (0, "4\n")

    doc = json.loads(run_free_settled(scope, "--scenario", str(path), "--json", "-n", "2").stdout)
    assert doc["selected"] == [4, 0] and doc["cuda_visible_devices"] == "4,0"
    assert doc["enough"] is True and doc["asked"]["count"] == 2
    verdicts = {g["index"]: g for g in doc["gpus"]}
    assert [e["code"] for e in verdicts[1]["excluded_because"]] == ["reserved"]
    assert verdicts[1]["excluded_because"][0]["container"] == idle_name
    assert [e["code"] for e in verdicts[2]["excluded_because"]] == ["processes"]
    assert [e["code"] for e in verdicts[3]["excluded_because"]] == ["orphan"]
    assert verdicts[4]["usable"] is True and verdicts[4]["free_memory_bytes"] == (
        (143771 - 300) * 1024 * 1024
    )


def test_without_a_driver_no_gpu_qualifies_and_the_reason_is_said(tmp_path: Path) -> None:
    path = tmp_path / "nodriver.json"
    path.write_text('{"nvml": "DriverNotLoaded"}')
    result = run_free("--scenario", str(path), "--json")
    assert result.returncode == 1
    doc = json.loads(result.stdout)
    assert doc["gpus"] == [] and doc["selected"] == [] and doc["enough"] is False
    assert doc["caveats"][0].startswith("NVML: ")
    assert "gputui free: warning: NVML: " in result.stderr
    assert "0 of 0 GPUs qualify, 1 asked for" in result.stderr


def test_uuid_output_names_the_same_gpus_as_the_indexes(
    sole_gpu_reservations: None, free_run_id: str, tmp_path: Path
) -> None:
    scope = f"{TEST_LABEL}={free_run_id}"
    uuids = {
        0: "GPU-00000000-1111-2222-3333-444444444444",
        1: "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",
    }
    scenario = {
        "gpus": [
            {"index": 0, "uuid": uuids[0], "memory_total_mib": 80000},
            {"index": 1, "uuid": uuids[1], "memory_total_mib": 143771},
        ]
    }
    path = tmp_path / "uuids.json"
    path.write_text(json.dumps(scenario))
    plain = run_free_settled(scope, "--scenario", str(path), "--uuid")
    doc = json.loads(run_free_settled(scope, "--scenario", str(path), "--uuid", "--json").stdout)
    assert doc["cuda_visible_devices"] == ",".join(uuids[i] for i in doc["selected"])
    assert [e for g in doc["gpus"] for e in g["excluded_because"]] == []
    assert doc["selected"] == [1, 0]  # most free memory first
    assert doc["cuda_visible_devices"] == f"{uuids[1]},{uuids[0]}"
    assert (plain.returncode, plain.stdout) == (0, f"{uuids[1]},{uuids[0]}\n")
    indexes = run_free_settled(scope, "--scenario", str(path), "-n", "1")
    assert indexes.stdout == "1\n", indexes.stderr


class _Reads:
    """Collects whose Docker read is slow ``slow`` times, then quick (the snapshot says which)."""

    def __init__(self, slow: int) -> None:
        self.slow = slow
        self.calls = 0

    def collect(self) -> Snapshot:
        import time

        self.calls += 1
        if self.calls <= self.slow:
            time.sleep(0.06)
        return _snap((_gpu(self.calls),))


def test_slow_docker_reads_are_read_again_and_said(monkeypatch: pytest.MonkeyPatch) -> None:
    from gputui.cli import free
    from gputui.collect import settle

    monkeypatch.setattr(settle, "_SETTLE_S", 0.05)
    reads = _Reads(slow=1)
    snap, settled = settle.collect_settled(reads)  # type: ignore[arg-type]
    assert (reads.calls, settled, snap.gpus[0].index) == (2, True, 2)
    reads = _Reads(slow=5)
    snap, settled = settle.collect_settled(reads)  # type: ignore[arg-type]
    assert (reads.calls, settled) == (3, False)
    assert "reservations may be missing" in free.FREE_UNSETTLED


GOOD_UUID = "GPU-57d57e22-be4b-9496-673e-11cc7638ed19"


@pytest.mark.parametrize(
    ("uuids", "said"),
    [
        (["GPU-0,1"], "expected GPU-<uuid> or MIG-<uuid>"),
        ([GOOD_UUID + ",GPU-x"], "expected GPU-<uuid> or MIG-<uuid>"),
        (["GPU-\x1b]0;owned\x07"], "expected GPU-<uuid> or MIG-<uuid>"),
        ([GOOD_UUID + " "], "expected GPU-<uuid> or MIG-<uuid>"),
        ([GOOD_UUID, GOOD_UUID.upper().replace("GPU-", "GPU-")], "is also gpus[0]'s UUID"),
    ],
)
def test_scenario_uuids_are_nvml_forms_and_unique(
    uuids: list[str], said: str, tmp_path: Path
) -> None:
    path = tmp_path / "uuids.json"
    gpus = [{"index": i, "uuid": u} for i, u in enumerate(uuids)]
    path.write_text(json.dumps({"gpus": gpus}))
    result = run_free("--scenario", str(path), "--uuid")
    assert result.returncode == 2, result
    assert result.stdout == ""  # nothing for CUDA_VISIBLE_DEVICES
    assert len(result.stderr.splitlines()) == 1 and said in result.stderr, result.stderr
    assert "\x1b" not in result.stderr and "Traceback" not in result.stderr


def test_a_mig_uuid_twice_is_refused(tmp_path: Path) -> None:
    mig = "MIG-5c1e0a77-3b1d-5c2e-9f4a-0d8b7e6c5a41"
    instances = [{"gi_id": 1, "ci_id": 0, "uuid": mig}, {"gi_id": 2, "ci_id": 0, "uuid": mig}]
    path = tmp_path / "mig.json"
    path.write_text(json.dumps({"gpus": [{"index": 0, "mig_instances": instances}]}))
    result = run_free("--scenario", str(path))
    assert result.returncode == 2
    assert "gpus[0].mig_instances[1].uuid" in result.stderr and "is also" in result.stderr


def test_a_uuid_nvml_mangles_is_printed_as_its_index() -> None:
    from gputui.derive.free import GpuChoice, device_list

    def choice(index: int, uuid: str | None) -> GpuChoice:
        return GpuChoice(index, uuid, "NVIDIA H200", GIB, GIB, 0)

    shared = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
    every = (
        choice(0, GOOD_UUID),
        choice(1, "GPU-1,2\x1b[31m"),
        choice(2, None),
        choice(3, shared),
        choice(4, shared.upper().replace("GPU-", "GPU-")),
        choice(5, "MIG-GPU-57d57e22-be4b-9496-673e-11cc7638ed19/1/0"),
    )
    devices, notes = device_list(every, every, uuids=True)
    assert devices == f"{GOOD_UUID},1,2,3,4,MIG-GPU-57d57e22-be4b-9496-673e-11cc7638ed19/1/0"
    assert all(c.isprintable() and not c.isspace() for c in devices)
    assert len(notes) == 4 and all(n.endswith("printed its index instead") for n in notes)
    assert notes[0].startswith("GPU 1: its UUID GPU-1,2") and "\x1b" not in notes[0]
    assert "no UUID" in notes[1] and "also another GPU's" in notes[2]
    assert device_list(every, every, uuids=False) == ("0,1,2,3,4,5", ())


def test_a_hostile_uuid_from_nvml_is_inert_and_never_printed_for_cuda() -> None:
    # The NVML path: the pynvml-shaped stand-in, unvalidated, plays the UUID a broken driver
    # could return through the real NVML adapter.
    from gputui.collect.standins.scenario import ScenarioSource
    from gputui.derive.free import device_list
    from gputui.exporter import run
    from gputui.present.text_report import snapshot_to_text

    hostile = "GPU-1,2 \x1b]0;owned\x07"
    reading = ScenarioSource({"gpus": [{"index": 0, "uuid": hostile}]}).read()
    assert reading.gpus[0].uuid == hostile  # the adapter passes it on; the front-ends must not
    snapshot = Snapshot(NOW, "scenario", HostInfo("node"), gpus=reading.gpus)
    answer = free_gpus(snapshot, FreeRules(), ())
    devices, notes = device_list(answer.usable, answer.gpus, uuids=True)
    assert devices == "0" and len(notes) == 1 and "\x1b" not in notes[0]
    for text in (snapshot_to_text(snapshot), run.render_once(snapshot).decode()):
        assert "\x1b" not in text and "\x07" not in text


def test_a_container_whose_gpu_request_is_unknown_is_a_caveat() -> None:
    stub = ContainerInfo(
        id="ab" * 32,
        name="annotated",
        image="img",
        status="running",
        inspect_problem="inspect reply over 2 MiB: labels/GPU request unknown",
    )
    snapshot = Snapshot(
        NOW, "scenario", HostInfo("node"), gpus=(_gpu(0),), containers=(ContainerUsage(stub),)
    )
    answer = free_gpus(snapshot)
    assert any("container annotated is unknown" in c for c in answer.caveats), answer.caveats
