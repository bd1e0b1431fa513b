"""Kernel-log faults end to end: real lines written into ``/dev/kmsg``, real containers, real
OOM kills, the real reader, collector and ``gputui --once --json``.

Lines a test writes carry a marker unique to the test, so parallel runs (and the kernel's own
lines) never mix into its assertions. Skipped, with the reason, where ``/dev/kmsg`` cannot be
written or read (not root, a container without the device).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gputui.collect.fault_attribution import FaultAttributor, KernelFaultTracker
from gputui.collect.linux.kernel_faults import KmsgRecord, OomKill, XidLine, parse_line
from gputui.collect.linux.kmsg import KMSG_FIX, KMSG_PATH, FaultLine, KmsgReader, read_history
from gputui.model.settings import Settings
from gputui.model.status import SourceStatus
from gputui.present.json_report import snapshot_to_json
from gputui.recording.codec import snapshot_from_report
from gputui.wiring.compose import build_collector
from tests.support.paths import FIXTURES

KMSG = Path(KMSG_PATH)
CORPUS = FIXTURES / "kmsg-corpus.txt"
#: The corpus's lines (tests/fixtures/kmsg-corpus.txt says where they come from).
CORPUS_LINES = [
    raw.partition(" || ")[2]
    for raw in CORPUS.read_text(encoding="utf-8").splitlines()
    if raw.strip() and not raw.startswith("#")
]


def _kmsg_problem() -> str | None:
    for flags, what in ((os.O_WRONLY, "written"), (os.O_RDONLY | os.O_NONBLOCK, "read")):
        try:
            os.close(os.open(KMSG, flags))
        except OSError as exc:
            return f"/dev/kmsg cannot be {what} here ({exc.strerror}): needs root on the host"
    return None


needs_kmsg = pytest.mark.skipif(_kmsg_problem() is not None, reason=str(_kmsg_problem()))


def write_kmsg(line: str) -> None:
    """One record into the kernel log (level err, as the driver logs XIDs)."""
    fd = os.open(KMSG, os.O_WRONLY)
    try:
        os.write(fd, f"<3>{line}\n".encode())  # the newline ends the record: readers see it
    finally:
        os.close(fd)


def _marker() -> str:
    return f"gputui-test-{uuid.uuid4().hex[:12]}"


def _deadline_poll(predicate: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def _host_pid(container: Any) -> int:
    container.reload()
    return int(container.attrs["State"]["Pid"])


@needs_kmsg
def test_every_corpus_line_written_to_kmsg_is_read_back_and_parsed() -> None:
    marker = _marker()
    since = time.time() - 5
    expected = []
    for line in CORPUS_LINES:
        write_kmsg(f"{marker} {line}")
        parsed = parse_line(line)
        if isinstance(parsed, (XidLine, OomKill)):
            expected.append(parsed)

    def mine() -> list[FaultLine]:
        lines, status = read_history(since)
        assert status.ok, status
        return [f for f in lines if marker in f.record.message]

    got = _deadline_poll(lambda: len(mine()) >= len(expected) and mine())
    assert [f.parsed for f in got] == expected  # 100 % parsed, in order, nothing extra
    for fault in got:
        assert fault.record.facility == 1  # written by a program: marked as injected
        assert since <= fault.at <= time.time() + 2
    assert sum(isinstance(p, XidLine) for p in expected) >= 50


@needs_kmsg
def test_reader_follows_new_lines_and_keeps_the_recent_past() -> None:
    marker = _marker()
    write_kmsg(f"{marker} NVRM: Xid (PCI:0000:3b:00): 31, pid=1, name=before, Ch 00000010")
    reader = KmsgReader(lookback_s=60, background=True, interval=0.05)
    reader.start()
    try:
        first = _deadline_poll(lambda: [f for f in reader.take() if marker in f.record.message])
        assert [f.parsed.process_name for f in first] == ["before"]
        write_kmsg(f"{marker} NVRM: Xid (PCI:0000:3b:00): 31, pid=1, name=after, Ch 00000010")
        later = _deadline_poll(lambda: [f for f in reader.take() if marker in f.record.message])
        assert [f.parsed.process_name for f in later] == ["after"]
        assert reader.status().ok
    finally:
        reader.close()


def test_unreadable_kernel_log_names_the_capability(tmp_path: Path) -> None:
    reader = KmsgReader(str(tmp_path / "no" / "kmsg"), background=False)
    assert reader.drain() == []
    status = reader.status()
    assert not status.ok and status.kind == "not_found"
    assert status.fix is not None and "CAP_SYSLOG" in status.fix
    assert "dmesg_restrict" in status.fix


def test_health_warns_with_the_capability_when_kmsg_is_not_readable(tmp_path: Path) -> None:
    from tests.support.health import inputs, make_roots, run

    denied = SourceStatus(
        "kmsg",
        ok=False,
        error="/dev/kmsg: Operation not permitted",
        kind="permission",
        fix=KMSG_FIX,
    )
    roots = make_roots(tmp_path)
    result = run(replace(inputs(), kmsg=denied), roots)["host.kernel_log"]
    assert result.status.value == "warn"
    assert "CAP_SYSLOG" in " ".join(result.details)
    assert result.fix is not None and "CAP_SYSLOG" in result.fix
    ok = run(replace(inputs(), kmsg=SourceStatus("kmsg", ok=True)), roots)["host.kernel_log"]
    assert ok.status.value == "pass"
    assert run(inputs(), roots)["host.kernel_log"].status.value == "skip"


def _scenario(tmp_path: Path, pid: int) -> Path:
    scenario = {
        "nvml": "ok",
        "gpus": [
            {
                "index": 0,
                "name": "NVIDIA H200",
                "pci_bus_id": "00000000:3B:00.0",
                "memory_total_mib": 143771,
                "memory_used_mib": 5000,
                "processes": [{"pid": pid, "used_memory_mib": 1000, "sm_util": 60}],
            },
            {"index": 1, "name": "NVIDIA H200", "pci_bus_id": "00000000:3C:00.0"},
        ],
    }
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(scenario))
    return path


@needs_kmsg
def test_once_json_attributes_a_live_containerised_pid_and_lists_candidates(
    run_container: Callable[..., Any], free_run_id: str, tmp_path: Path
) -> None:
    trainer = run_container(["sleep", "300"], name=f"xid-{free_run_id}", network_mode="none")
    pid = _host_pid(trainer)
    marker = _marker()
    write_kmsg(
        f"NVRM: Xid (PCI:0000:3b:00): 31, pid={pid}, name=sleep, channel 0x0000001a, intr "
        f"00000000. MMU Fault: ENGINE GRAPHICS GPC10 GPCCLIENT_T1_5 faulted @ 0x725f_fb800000. "
        f"{marker}"
    )
    write_kmsg(f"NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus. {marker}")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gputui",
            "--once",
            "--json",
            "--scenario",
            str(_scenario(tmp_path, pid)),
            "--kernel-log",
            KMSG_PATH,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode in (0, 1), done.stderr
    doc = json.loads(done.stdout)
    assert doc["sources"]["kmsg"]["ok"] is True
    faults = [f for f in doc["kernel_faults"] if marker in f["raw"]]
    assert [f["xid"] for f in faults] == [31, 79]
    mmu, bus = faults
    assert mmu["gpu_index"] == 0 and mmu["pci_bus_id"] == "0000:3b:00"
    assert mmu["pid"] == pid and mmu["attribution"] == "process"
    assert doc["sources"]["docker"]["ok"] is True, doc["sources"]["docker"]
    assert mmu["container"] == {"id": trainer.id, "name": f"xid-{free_run_id}"}
    assert mmu["class"] == "application" and "the GPU is fine" in mmu["fix"]
    assert mmu["injected"] is True
    assert bus["class"] == "bus" and bus["pid"] is None and bus["container"] is None
    assert bus["attribution"] == "candidates"
    assert [(c["pid"], c["container"]["id"]) for c in bus["candidates"]] == [(pid, trainer.id)]
    counted = [
        c
        for c in doc["fault_counts"]
        if c["xid"] == 31 and c["container"] and c["container"]["id"] == trainer.id
    ]
    assert counted and counted[0]["count"] >= 1
    # A replay of the report (gputui --replay report.json) reads the faults back as written.
    again = snapshot_to_json(snapshot_from_report(doc))
    assert again["kernel_faults"] == doc["kernel_faults"]
    assert again["fault_counts"] == doc["fault_counts"]
    # The container and its process carry the fault as a finding (the tree's XID badge); the
    # candidates of the bus error are not marked.
    marked = {
        (f["subject"], f["figures"]["xid"], f["severity"])
        for f in doc["findings"]
        if f["kind"] == "kernel_fault"
    }
    assert (f"container:{trainer.id}", 31, "warn") in marked
    assert (f"pid:{pid}", 31, "warn") in marked
    assert not any(xid == 79 for _, xid, _ in marked if _.endswith(trainer.id))
    exported = subprocess.run(
        [
            sys.executable,
            "-m",
            "gputui",
            "export",
            "--once",
            "--scenario",
            str(_scenario(tmp_path, pid)),
            "--kernel-log",
            KMSG_PATH,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert exported.returncode == 0, exported.stderr
    series = {
        (s.labels["gpu"], s.labels["xid"], s.labels["class"], s.labels["container"]): s.value
        for family in text_string_to_metric_families(exported.stdout)
        if family.name == "gputui_xid"
        for s in family.samples
        if s.name == "gputui_xid_total"
    }
    assert series[("0", "31", "application", f"xid-{free_run_id}")] >= 1
    assert series[("0", "79", "bus", "")] >= 1


@needs_kmsg
def test_a_process_that_exited_before_the_line_is_still_attributed(
    run_container: Callable[..., Any], free_run_id: str, tmp_path: Path
) -> None:
    job = run_container(["sleep", "300"], name=f"gone-{free_run_id}", network_mode="none")
    pid = _host_pid(job)
    settings = Settings(scenario=_scenario(tmp_path, pid), kernel_log=KMSG_PATH)
    collector = build_collector(settings, once=True, health=False)
    try:
        first = collector.collect()
        assert [p.container_id for p in first.processes] == [job.id]
        job.kill()
        assert _deadline_poll(lambda: not Path(f"/proc/{pid}").exists())
        exited_at = time.time()
        marker = _marker()
        write_kmsg(f"NVRM: Xid (PCI:0000:3b:00): 43, pid={pid}, name=sleep, Ch 00000010 {marker}")
        line_at = time.time()
        assert line_at - exited_at < 2.0
        second = collector.collect()
    finally:
        collector.close()
    faults = [f for f in second.kernel_faults if marker in f.raw]
    assert len(faults) == 1
    fault = faults[0]
    assert fault.attribution == "recent_process"
    assert (fault.pid, fault.container_id, fault.gpu_index) == (pid, job.id, 0)
    assert fault.container_name == f"gone-{free_run_id}"
    assert fault.fault_class == "application"


def test_a_pid_started_after_the_line_is_not_its_process() -> None:
    # A real process that started now, and a line logged a minute ago naming its PID: the PID
    # was reused, so the line is not about this process.
    proc = subprocess.Popen(["sleep", "30"])
    try:
        assert _deadline_poll(lambda: Path(f"/proc/{proc.pid}/stat").exists())
        attributor = FaultAttributor()
        at = time.time() - 60
        message = f"NVRM: Xid (PCI:0000:3b:00): 13, pid={proc.pid}, name=old, Graphics Exception"
        parsed = parse_line(message)
        assert isinstance(parsed, XidLine)
        attributor.attribute([FaultLine(KmsgRecord(3, 0, 1, 0, message), at, parsed)], [])
        assert attributor.faults()[0].attribution == "pid_only"
        # The same line logged now names the live process.
        attributor.attribute([FaultLine(KmsgRecord(3, 0, 2, 0, message), time.time(), parsed)], [])
        assert attributor.faults()[1].attribution == "process"
    finally:
        proc.kill()
        proc.wait()


@needs_kmsg
def test_oom_kill_of_a_real_container_lands_on_it(
    run_container: Callable[..., Any], free_run_id: str
) -> None:
    since = time.time() - 2
    hog = run_container(
        ["sh", "-c", "head -c 200m /dev/zero | tail"],
        name=f"oom-{free_run_id}",
        network_mode="none",
        mem_limit="32m",
        memswap_limit="32m",
    )
    assert hog.wait(timeout=60)["StatusCode"] != 0
    tracker = KernelFaultTracker(KmsgReader(lookback_s=time.time() - since, background=False))

    def mine() -> list[Any]:
        faults, _, _ = tracker.update([], [], [])
        return [f for f in faults if f.kind == "oom" and f.container_id == hog.id]

    try:
        found = _deadline_poll(mine)
    finally:
        tracker.close()
    assert found, "the kernel logged no OOM kill of the container"
    fault = found[0]
    assert fault.attribution == "cgroup" and fault.fault_class == "memory_limit"
    assert fault.process_name in ("head", "tail", "sh")
    assert fault.injected is False  # the kernel's own line
    assert "Killed process" in fault.raw


def test_tracker_counts_survive_the_fault_buffer() -> None:
    class Lines:
        def __init__(self) -> None:
            self.batches: list[list[FaultLine]] = []

        def drain(self) -> list[FaultLine]:
            return self.batches.pop(0) if self.batches else []

        def status(self) -> SourceStatus:
            return SourceStatus("kmsg", ok=True)

        def start(self) -> None:
            pass

        def close(self) -> None:
            pass

    message = "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."
    parsed = parse_line(message)
    assert isinstance(parsed, XidLine)
    lines = Lines()
    lines.batches = [
        [FaultLine(KmsgRecord(3, 0, i, 0, message), time.time(), parsed) for i in range(300)]
    ]
    tracker = KernelFaultTracker(lines)
    faults, counts, _ = tracker.update([], [], [])
    assert len(faults) == 256  # bounded
    assert [(c.xid, c.fault_class, c.count) for c in counts] == [(79, "bus", 300)]


@needs_kmsg
def test_faults_command_lists_attributed_faults_of_the_span(
    run_container: Callable[..., Any], free_run_id: str
) -> None:
    job = run_container(["sleep", "300"], name=f"hist-{free_run_id}", network_mode="none")
    pid = _host_pid(job)
    marker = _marker()
    write_kmsg(
        f"NVRM: Xid (PCI:0000:3b:00): 13, pid={pid}, name=sleep, Graphics Exception {marker}"
    )
    done = subprocess.run(
        [sys.executable, "-m", "gputui", "faults", "--since", "10m", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    mine = [f for f in doc["faults"] if marker in f["raw"]]
    assert len(mine) == 1
    assert mine[0]["container"] == {"id": job.id, "name": f"hist-{free_run_id}"}
    assert mine[0]["attribution"] == "process" and mine[0]["class"] == "application"
    text = subprocess.run(
        [sys.executable, "-m", "gputui", "faults", "--since", "10m"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert text.returncode == 0
    assert any(
        f"hist-{free_run_id}" in line and "XID 13" in line for line in text.stdout.splitlines()
    )


def test_faults_command_refuses_a_bad_span_in_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gputui", "faults", "--since", "7x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and "--since" in done.stderr
    assert "Traceback" not in done.stderr


def test_fault_badges_and_evidence_lines() -> None:
    from gputui.derive.analysis import Analyzer
    from gputui.derive.tree import BADGES
    from gputui.model.containers import ContainerInfo
    from gputui.model.faults import KernelFault
    from gputui.model.gpu import GpuProcessSample
    from gputui.model.processes import GpuProcess, ProcessInfo
    from gputui.model.snapshot import ContainerUsage, HostInfo, Snapshot
    from gputui.ui.screens.evidence import evidence_content

    cid = "c" * 64
    now = time.time()
    app = KernelFault(
        "xid",
        now - 5,
        1,
        "NVRM: Xid (PCI:0000:3b:00): 31, pid=7, name=py\x1b[31m",
        "application",
        "GPU memory page fault",
        "fix or restart the container; the GPU is fine",
        xid=31,
        gpu_index=0,
        pid=7,
        container_id=cid,
        attribution="process",
    )
    bus = KernelFault(
        "xid",
        now - 4,
        2,
        "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
        "bus",
        "the GPU has fallen off the bus",
        "the node: drain it",
        xid=79,
        gpu_index=0,
        container_id=cid,
        attribution="process",
    )
    oom = KernelFault(
        "oom",
        now - 3,
        3,
        "Memory cgroup out of memory: Killed process 9 (tail)",
        "memory_limit",
        "killed",
        "raise its limit",
        pid=9,
        container_id=cid,
        attribution="cgroup",
    )
    usage = ContainerUsage(ContainerInfo(cid, "trainer", "img", "running"))
    process = GpuProcess(GpuProcessSample(7, 0, 1 << 20), ProcessInfo(7), container_id=cid)
    snapshot = Snapshot(
        now,
        "live",
        HostInfo("h"),
        processes=(process,),
        containers=(usage,),
        kernel_faults=(app, bus, oom),
    )
    analysis = Analyzer(()).analyse(snapshot)
    badges = {(m.badge, str(m.severity)) for m in analysis.markers[f"container:{cid}"]}
    assert {("XID 31", "warn"), ("XID 79", "fail"), ("OOMK", "warn")} <= badges
    assert {m.badge for m in analysis.markers["pid:7"]} == {"XID 31"}
    assert {"XID n", "OOMK"} <= {b for b, _ in BADGES}
    text = evidence_content(usage, analysis).plain
    assert "Kernel log" in text and "XID 79" in text and "fallen off the bus" in text
    assert "\x1b" not in text  # the raw line went through the sanitiser
    # A container the snapshot no longer lists, a PID that holds no GPU memory: no row, no
    # finding (the faults stay in kernel_faults).
    gone = Analyzer(()).analyse(replace(snapshot, containers=(), processes=(), taken_at=now + 1))
    assert not [f for f in gone.findings if f.kind == "kernel_fault"]
