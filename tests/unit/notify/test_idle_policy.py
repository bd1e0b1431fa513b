"""The idle-GPU policy on a fake clock: six containers, a day of refreshes, every stage audited.

The engine (gputui/derive/idle_policy.py) is pure: snapshots built here, time from
``taken_at``, the time of day from an injected function (UTC). The runner
(gputui/notify/policy.py) writes a real audit file, delivers to a real receiver on 127.0.0.1
and stops a real container only when the policy and the container's label both opt in.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from gputui.derive.analysis import Analysis
from gputui.derive.idle_policy import IdlePolicyEngine, Notice, Stage
from gputui.model.containers import ContainerInfo, Owner
from gputui.model.gpu import GpuProcessSample
from gputui.model.processes import GpuProcess, ProcessInfo
from gputui.model.settings import IdlePolicy, Settings
from gputui.model.snapshot import ContainerUsage, HostInfo, Snapshot
from gputui.notify.audit import AuditLog, read_audit
from gputui.notify.config import NotifyTarget
from gputui.notify.policy import PolicyRunner, live_control
from gputui.notify.worker import Notifier
from gputui.wiring.compose import build_collector
from tests.support.net import QuietHTTPServer

T0 = 1_800_000_000.0 - (1_800_000_000 % 86400)  # a UTC midnight
INTERVAL = 60.0
D = 3600.0
POLICY = IdlePolicy(
    enabled=True, idle_for_s=D, escalate_after_s=1800.0, reclaim_after_s=1800.0, min_active_s=30.0
)
GIB = 1 << 30


def cid(n: int) -> str:
    return f"{n:x}".rjust(64, "c")


IDLE, SPORADIC, BUSY, PAUSED, MIG = (cid(i) for i in range(1, 6))


def utc_minute(at: float) -> int:
    return int(at % 86400) // 60


def _proc(pid: int, gpu: int, sm: int | None, container: str | None, user: str) -> GpuProcess:
    return GpuProcess(
        GpuProcessSample(pid, gpu, used_memory_bytes=8 * GIB, sm_util=sm),
        ProcessInfo(pid, user=user, command="python train.py"),
        container,
    )


def _usage(
    container: str,
    name: str,
    request: tuple[str, ...],
    *,
    status: str = "running",
    procs: tuple[GpuProcess, ...] = (),
    labels: tuple[tuple[str, str], ...] = (),
    mig: tuple[str, ...] = (),
) -> ContainerUsage:
    info = ContainerInfo(
        container, name, "trainer:1", status, gpu_request=request, policy_labels=labels
    )
    sms = [p.sample.sm_util for p in procs if p.sample.sm_util is not None]
    return ContainerUsage(
        info,
        gpu_memory_bytes=sum(p.sample.used_memory_bytes or 0 for p in procs),
        pids=tuple(p.pid for p in procs),
        gpu_indexes=tuple(sorted({p.sample.gpu_index for p in procs})),
        sm_util=max(sms) if sms else None,
        mig_devices=mig,
    )


def machine(t: float, labels: tuple[tuple[str, str], ...] = ()) -> Snapshot:
    """The six parties at time ``t``."""
    minute = int((t - T0) // 60)
    sporadic_sm = 70 if minute % 20 < 3 else 0  # three minutes of work every 20 minutes
    procs = (
        _proc(200, 1, sporadic_sm, SPORADIC, "bob"),
        _proc(300, 2, 90, BUSY, "carol"),
        _proc(600, 6, 0, None, "root"),  # a host process holding 8 GiB, no container
    )
    containers = (
        _usage(IDLE, "idle-notebook", ("0",), labels=(("gputui.owner", "alice"), *labels)),
        _usage(SPORADIC, "sporadic-eval", ("1",), procs=procs[:1]),
        _usage(BUSY, "busy-train", ("2",), procs=procs[1:2]),
        _usage(PAUSED, "paused-job", ("3",), status="paused"),
        _usage(MIG, "idle-mig-slice", ("MIG-4f1e2d3c-aaaa-bbbb-cccc-000000000001",)),
    )
    return Snapshot(t, "scenario", HostInfo("gpu-host-1"), processes=procs, containers=containers)


def run_day(
    engine: IdlePolicyEngine, hours: float = 24.0, make: Callable[[float], Snapshot] = machine
) -> list[Notice]:
    out: list[Notice] = []
    steps = int(hours * 3600 / INTERVAL)
    for i in range(steps + 1):
        out += engine.update(make(T0 + i * INTERVAL))
    return out


def test_only_the_idle_reservations_are_flagged_once_each_in_a_day() -> None:
    notices = run_day(IdlePolicyEngine(POLICY, utc_minute))
    flagged = {n.container_id for n in notices}
    assert flagged == {IDLE, MIG}  # not sporadic, busy, paused, nor the host process
    for container in (IDLE, MIG):
        stages = [n for n in notices if n.container_id == container]
        assert [n.stage for n in stages] == [Stage.NOTICE, Stage.ESCALATE, Stage.RECLAIM]
        notice, escalate, reclaim = (n.at - T0 for n in stages)
        assert D - INTERVAL <= notice <= D + INTERVAL
        assert abs(escalate - notice - 1800) <= INTERVAL
        assert abs(reclaim - escalate - 1800) <= INTERVAL
    first = next(n for n in notices if n.container_id == IDLE)
    assert first.owner == "alice"
    evidence = dict(first.evidence)
    assert evidence["active_s"] == 0 and evidence["window_s"] == D
    assert float(evidence["observed_s"]) >= D and evidence["gpu_request"] == "0"
    assert not any(n.auto for n in notices)  # no opt-in: nothing may stop by itself


def test_a_container_back_in_use_is_cleared_and_not_noticed_again_within_a_day() -> None:
    engine = IdlePolicyEngine(POLICY, utc_minute)
    busy_from, busy_to = T0 + 2 * D, T0 + 2 * D + 600

    def flipping(t: float) -> Snapshot:
        snap = machine(t)
        if busy_from <= t < busy_to:  # the idle notebook works for ten minutes, once
            proc = _proc(100, 0, 80, IDLE, "alice")
            usage = _usage(IDLE, "idle-notebook", ("0",), procs=(proc,))
            return replace(snap, containers=(usage, *snap.containers[1:]))
        return snap

    notices = [n for n in run_day(engine, make=flipping) if n.container_id == IDLE]
    stages = [n.stage for n in notices]
    assert stages.count(Stage.NOTICE) == 1  # idle again an hour later: no second notice
    assert Stage.CLEARED in stages
    cleared = next(n for n in notices if n.stage is Stage.CLEARED)
    assert busy_from <= cleared.at <= busy_from + INTERVAL
    # After the flip the stages go on (silently noticed), then escalate and reclaim again.
    after = [n.stage for n in notices if n.at > cleared.at]
    assert after == [Stage.ESCALATE, Stage.RECLAIM]


def test_quiet_hours_defer_every_stage_and_exclusions_are_never_judged() -> None:
    policy = replace(POLICY, quiet_hours=(0, 6 * 60), exclude=("idle-mig-*",))
    notices = run_day(IdlePolicyEngine(policy, utc_minute), hours=12)
    assert {n.container_id for n in notices} == {IDLE}
    first = notices[0]
    assert first.stage is Stage.NOTICE and first.at == T0 + 6 * 3600  # the first refresh after
    labelled = run_day(
        IdlePolicyEngine(POLICY, utc_minute),
        hours=3,
        make=lambda t: machine(t, (("gputui.idle-policy", "exclude"),)),
    )
    assert {n.container_id for n in labelled} == {MIG}


def test_a_gap_in_collection_is_no_evidence_of_idleness() -> None:
    engine = IdlePolicyEngine(POLICY, utc_minute)
    assert engine.update(machine(T0)) == []
    # gputui was not watching for two hours: the observation starts again at T0 + 2 D, so the
    # verdict waits for a whole window of refreshes after the gap.
    notices: list[Notice] = []
    for i in range(int(D / INTERVAL) + 2):
        notices += engine.update(machine(T0 + 2 * D + i * INTERVAL))
    assert {n.container_id for n in notices} == {IDLE, MIG}
    assert all(abs(n.at - (T0 + 3 * D)) <= INTERVAL for n in notices)


# -- the runner: audit, delivery, stops --------------------------------------------------------


@contextmanager
def receiver() -> Iterator[list[dict[str, Any]]]:
    got: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            got.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return

    httpd = QuietHTTPServer(("127.0.0.1", 0), Handler)
    got.append({"port": httpd.server_address[1]})
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield got
    finally:
        httpd.shutdown()
        httpd.server_close()


def wait_for(check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


def test_every_notice_is_audited_and_delivered_as_an_idle_event(tmp_path: Path) -> None:
    audit = tmp_path / "state" / "idle-audit.jsonl"
    with receiver() as got:
        port = got.pop(0)["port"]
        target = NotifyTarget(
            "hook", "webhook", url=f"http://127.0.0.1:{port}/", events=frozenset({"idle"})
        )
        notifier = Notifier([target], "gpu-host-1")
        try:
            runner = PolicyRunner(
                POLICY,
                AuditLog(audit),
                "gpu-host-1",
                notifier=notifier,
                engine=IdlePolicyEngine(POLICY, utc_minute),
            )
            for i in range(int(3 * D / INTERVAL) + 1):
                runner.observe(Analysis(machine(T0 + i * INTERVAL)))
            wait_for(notifier.idle)
        finally:
            notifier.close()
    records, _ = read_audit(audit)
    assert [(r["name"], r["event"]) for r in records] == [
        (name, stage)
        for stage in ("notice", "escalate", "reclaim")
        for name in ("idle-notebook", "idle-mig-slice")
    ]
    assert all(r["evidence"]["active_s"] == 0 and r["by"] == "policy" for r in records)
    assert oct(audit.stat().st_mode & 0o777) == "0o600"
    assert sorted((b["name"], b["subject"][10:]) for b in got) == sorted(
        (f"idle-{stage}", c) for stage in ("notice", "escalate", "reclaim") for c in (IDLE, MIG)
    )
    assert runner.banner() is not None and "idle-notebook" in (runner.banner() or "")


@pytest.mark.parametrize(
    ("auto", "label", "dry_run", "read_only", "stopped", "event"),
    [
        (False, True, False, False, False, None),  # the label alone
        (True, False, False, False, False, None),  # the policy alone
        (True, True, True, False, False, "stop-dry-run"),  # both, but a dry run (the default)
        (True, True, False, True, False, "stop-refused"),  # both, read-only
        (True, True, False, False, True, "stop"),  # both, for real
    ],
    ids=["label-only", "policy-only", "dry-run", "read-only", "double-opt-in"],
)
def test_an_automatic_stop_needs_both_opt_ins_and_is_audited(
    run_container: Any,
    tmp_path: Path,
    auto: bool,
    label: bool,
    dry_run: bool,
    read_only: bool,
    stopped: bool,
    event: str | None,
) -> None:
    container = run_container(["sleep", "300"], network_mode="none")
    real = container.id
    labels = (("gputui.idle-policy", "reclaim"),) if label else ()
    policy = replace(POLICY, auto_reclaim=auto, dry_run=dry_run)
    collector = build_collector(Settings(read_only=read_only), once=True, health=False)
    # Actions go to the source that listed the container at the last collection: collect
    # until Docker has listed it (a loaded engine may miss one read's deadline).
    deadline = time.monotonic() + 60
    while collector.container_owner(real) is None and time.monotonic() < deadline:
        collector.collect()
    assert collector.container_owner(real) is not None, "Docker never listed the container"

    def with_real(t: float) -> Snapshot:
        snap = machine(t, labels)
        idle = snap.containers[0]
        usage = replace(idle, info=replace(idle.info, id=real))
        return replace(snap, containers=(usage, *snap.containers[1:]))

    audit = tmp_path / "audit.jsonl"
    try:
        runner = PolicyRunner(
            policy,
            AuditLog(audit),
            "gpu-host-1",
            control=live_control(collector),
            read_only=read_only,
            engine=IdlePolicyEngine(policy, utc_minute),
        )
        for i in range(int(3 * D / INTERVAL) + 1):
            runner.observe(Analysis(with_real(T0 + i * INTERVAL)))
        for thread in list(runner.stopping.values()):
            thread.join(60)
    finally:
        collector.close()
    container.reload()
    assert (container.status != "running") is stopped
    mine = [r for r in read_audit(audit)[0] if r["container_id"] == real]
    events = [r["event"] for r in mine]
    assert events[:3] == ["notice", "escalate", "reclaim"]
    assert events[3:] == ([event] if event else [])
    if event:
        assert mine[3]["evidence"]["active_s"] == 0 and mine[3]["by"] == "policy"


def test_the_notice_names_the_owner_found_from_evidence_but_not_a_low_confidence_guess() -> None:
    def with_owner(owner: Owner) -> Callable[[float], Snapshot]:
        def make(t: float) -> Snapshot:
            snap = machine(t)
            mig = next(u for u in snap.containers if u.info.id == MIG)
            info = replace(mig.info, owner=owner)
            others = tuple(u for u in snap.containers if u.info.id != MIG)
            return replace(snap, containers=(*others, replace(mig, info=info)))

        return make

    for owner, told in (
        (Owner("dana", "medium", "owns the compose project's directory /srv/dana"), "dana"),
        (Owner("erin", "low", "owns its bind mount /data/erin"), None),
    ):
        notices = run_day(IdlePolicyEngine(POLICY, utc_minute), 1.5, with_owner(owner))
        first = next(n for n in notices if n.container_id == MIG)
        assert first.owner == told, owner
