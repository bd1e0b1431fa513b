from __future__ import annotations

from gputui.derive.tree import (
    HOST_KEY,
    ORPHANS_KEY,
    OTHERS_KEY,
    GroupKind,
    build_groups,
    process_key,
)
from gputui.model.snapshot import Snapshot
from tests.support.factories import cid, container, proc, snapshot, standard


def test_standard_order_and_kinds() -> None:
    groups = build_groups(standard())
    assert [g.key for g in groups] == [
        cid(1),  # trainer-a: 15 GiB
        cid(2),  # inference: 4 GiB
        cid(5),  # cgroup-only: 0.5 GiB
        cid(3),  # reserved-idle
        HOST_KEY,
        ORPHANS_KEY,
        OTHERS_KEY,
    ]
    kinds = [g.kind for g in groups]
    assert kinds[:4] == [GroupKind.CONTAINER] * 4
    assert kinds[4:] == [GroupKind.HOST, GroupKind.ORPHANS, GroupKind.OTHERS]


def test_container_processes_and_totals() -> None:
    groups = {g.key: g for g in build_groups(standard())}
    trainer = groups[cid(1)]
    assert [process_key(p) for p in trainer.processes] == ["611:0", "612:1"]
    assert trainer.gpu_memory_bytes == (13290 + 2048) * 1024 * 1024
    assert trainer.sm_util == 30  # 30 % on each of its two GPUs: per GPU, not 60
    idle = groups[cid(3)]
    assert idle.usage is not None
    assert idle.usage.idle_reserved
    assert idle.processes == ()
    cgroup_only = groups[cid(5)]
    assert cgroup_only.usage is not None
    assert not cgroup_only.usage.known_to_engine


def test_host_orphans_others() -> None:
    groups = {g.key: g for g in build_groups(standard())}
    assert [p.pid for p in groups[HOST_KEY].processes] == [900]
    assert groups[HOST_KEY].sm_util is None  # no SM % reported: unknown, not zero
    assert [p.pid for p in groups[ORPHANS_KEY].processes] == [999]
    assert groups[ORPHANS_KEY].gpu_memory_bytes == 1024 * 1024 * 1024
    assert [u.info.name for u in groups[OTHERS_KEY].containers] == ["web"]


def test_empty_groups_are_left_out() -> None:
    processes = [proc(1, 0, 10, cid(1))]
    groups = build_groups(snapshot(processes=processes, containers=[container(1, "a", processes)]))
    assert [g.key for g in groups] == [cid(1)]
    assert build_groups(snapshot()) == ()


def test_process_in_unlisted_container_gets_a_stub() -> None:
    processes = [proc(5, 0, 10, cid(9))]
    (group,) = build_groups(snapshot(processes=processes))
    assert group.key == cid(9)
    assert group.usage is not None
    assert not group.usage.known_to_engine
    assert group.usage.info.name == cid(9)[:12]
    assert group.gpu_memory_bytes == 10 * 1024 * 1024


def test_multi_gpu_process_two_rows_ordered() -> None:
    processes = [proc(7, 1, 10, cid(1)), proc(7, 0, 20, cid(1)), proc(3, 1, 5, cid(1))]
    (group,) = build_groups(
        snapshot(processes=processes, containers=[container(1, "a", processes)])
    )
    assert [process_key(p) for p in group.processes] == ["3:1", "7:0", "7:1"]


def test_others_running_first() -> None:
    containers = [
        container(1, "zz", gpu_request=None),
        container(2, "aa", gpu_request=None, status="exited"),
        container(3, "mm", gpu_request=None),
    ]
    (others,) = build_groups(snapshot(containers=containers))
    assert [u.info.name for u in others.containers] == ["mm", "zz", "aa"]


def test_container_names_sort_naturally() -> None:
    # Two idle reservations (same rank, no memory) and three others: names decide.
    names = ["c10", "c2", "c1"]
    containers = [container(n, name) for n, name in enumerate(names, 1)]
    containers += [container(n, name, gpu_request=None) for n, name in enumerate(names, 4)]
    groups = build_groups(snapshot(containers=containers))
    assert [g.usage.info.name for g in groups if g.usage is not None] == ["c1", "c2", "c10"]
    assert [u.info.name for u in groups[-1].containers] == ["c1", "c2", "c10"]


def test_natural_key_bounded_and_case_blind() -> None:
    from gputui.derive.tree import natural_key

    long = "9" * 10_000  # digit runs compare without parsing a number
    assert sorted(["job" + long, "job10", "Job9"], key=natural_key) == [
        "Job9",
        "job10",
        "job" + long,
    ]


def test_sm_of_a_container_on_three_gpus_is_per_gpu_not_summed() -> None:
    """A container busy at 90 % on GPUs 0, 2 and 3 reads 90 % (the mean), never 270 %."""
    from gputui.collect.collector import attribute_containers
    from gputui.model.containers import ContainerReading
    from gputui.model.status import SourceStatus
    from gputui.ui.widgets.tree_labels import container_label

    procs = [proc(10 + g, g, 1000, cid(1), sm=90) for g in (0, 2, 3)]
    # Two processes on one GPU share its SMs: their figures add up there (at most 100 %).
    procs += [proc(20, 1, 500, cid(2), sm=30), proc(21, 1, 500, cid(2), sm=40)]
    made = container(1, "tp3", procs, gpu_request="0")
    reading = ContainerReading(SourceStatus("docker", ok=True), (made.info,))
    usages = {u.info.id: u for u in attribute_containers(reading, procs)}
    assert usages[cid(1)].sm_util == 90
    assert usages[cid(2)].sm_util == 70
    groups = {g.key: g for g in build_groups(snapshot(processes=procs, containers=[made]))}
    assert groups[cid(1)].sm_util == 90
    label = container_label(made, groups[cid(1)].gpu_memory_bytes, groups[cid(1)].sm_util).plain
    assert " 90%" in label and "270" not in label


def _pod_snapshot() -> Snapshot:
    processes = [proc(11, 0, 4000, cid(1)), proc(12, 1, 2000, cid(2)), proc(13, 0, 500, cid(3))]
    containers = [
        container(1, "trainer", processes, k8s_pod="train-7d9c", k8s_namespace="ml"),
        container(2, "sidecar", processes, k8s_pod="train-7d9c", k8s_namespace="ml"),
        container(3, "solo", processes, k8s_pod="infer-1", k8s_namespace="ml"),
    ]
    return snapshot(processes=processes, containers=containers)


def test_a_pod_of_two_containers_is_one_group_with_its_containers_under_it() -> None:
    groups = build_groups(_pod_snapshot())
    assert [g.kind for g in groups] == [GroupKind.POD, GroupKind.CONTAINER]
    pod = groups[0]
    assert pod.key == "pod:ml/train-7d9c" and pod.pod == ("ml", "train-7d9c")
    assert [m.usage.info.name for m in pod.members if m.usage] == ["trainer", "sidecar"]
    assert [[p.pid for p in m.processes] for m in pod.members] == [[11], [12]]
    assert pod.gpu_memory_bytes == (4000 + 2000) * 1024 * 1024
    # A pod of one featured container stays that container, its row naming the pod.
    assert groups[1].key == cid(3)
