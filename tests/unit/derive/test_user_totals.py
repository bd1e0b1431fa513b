"""User and project totals: computed once per snapshot by the analysis, printed by every front-end.

``--once`` (JSON and text) and the exporter's user series take the rows the analysis carries
(:attr:`Analysis.totals`); handed totals that differ from what the snapshot would give, each
prints the handed ones, which is how a recomputation would show. The Users tab's side is in
tests/ui/test_history_recording_thread.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from prometheus_client.parser import text_string_to_metric_families

from gputui.derive.analysis import Analysis, Analyzer
from gputui.derive.users import UserTotals, owner_usage, user_totals
from gputui.exporter.families import SnapshotMetrics
from gputui.model.containers import Owner
from gputui.model.processes import GpuProcess
from gputui.model.settings import Settings
from gputui.model.snapshot import Snapshot
from gputui.present.json_report import project_to_json, snapshot_to_json, user_to_json
from gputui.present.text_report import snapshot_to_text
from gputui.wiring.compose import build_collector


def _demo() -> Snapshot:
    collector = build_collector(Settings(demo=True), once=True, health=False)
    try:
        return collector.collect()
    finally:
        collector.close()


def _exported_users(snapshot: Snapshot, analysis: Analysis) -> dict[str, float]:
    metrics = SnapshotMetrics(user_series=True, hostname="h")
    metrics.publish(snapshot, analysis)
    metrics.rebuild()
    text = metrics.exposition().decode()
    return {
        s.labels["user"]: s.value
        for family in text_string_to_metric_families(text)
        if family.name == "gputui_user_gpu_memory_used_bytes"
        for s in family.samples
    }


def test_the_analysis_computes_the_totals_of_its_snapshot() -> None:
    snapshot = _demo()
    analysis = Analyzer(()).analyse(snapshot)
    assert analysis.totals == user_totals(snapshot)
    assert analysis.totals is not None and analysis.totals.users and analysis.totals.projects
    assert Analysis.bare(snapshot).totals == analysis.totals


def test_json_text_and_exporter_print_the_one_computation_they_are_handed() -> None:
    snapshot = _demo()
    analysis = Analyzer(()).analyse(snapshot)
    assert analysis.totals is not None
    # Totals that the snapshot itself would not give: the first user alone, memory doubled.
    first = analysis.totals.users[0]
    marked = replace(first, label="only-from-the-analysis", gpu_memory_bytes=2 * 1024**3)
    handed = UserTotals((marked,), analysis.totals.projects[:1])
    doc = snapshot_to_json(snapshot, analysis.findings, analysis.alerts, handed)
    assert doc["users"] == [user_to_json(marked)]
    assert doc["compose_projects"] == [project_to_json(p) for p in handed.projects]
    text = snapshot_to_text(snapshot, analysis.findings, analysis.alerts, handed)
    users_section = text.split("\nUsers\n")[1].split("\n\n")[0].splitlines()
    assert len(users_section) == 2 and "only-from-the-analysis" in users_section[1]
    exported = _exported_users(snapshot, replace(analysis, totals=handed))
    assert exported == {"only-from-the-analysis": 2.0 * 1024**3}


def test_json_and_exporter_agree_on_the_demo() -> None:
    snapshot = _demo()
    analysis = Analyzer(()).analyse(snapshot)
    doc = snapshot_to_json(snapshot, analysis.findings, analysis.alerts, analysis.totals)
    from_json = {u["user"]: float(u["gpu_memory_bytes"]) for u in doc["users"]}
    assert from_json == _exported_users(snapshot, analysis)
    # Without handed totals (a caller with no analysis) the same rows are computed.
    assert snapshot_to_json(snapshot)["users"] == doc["users"]


def _owned(snapshot: Snapshot, owners: Mapping[str, Owner | None]) -> Snapshot:
    containers = tuple(
        replace(u, info=replace(u.info, owner=owners[u.info.name])) if u.info.name in owners else u
        for u in snapshot.containers
    )
    return replace(snapshot, containers=containers)


def test_owners_add_up_their_containers_and_their_host_processes() -> None:
    # The demo names its containers' owners; here every owner is this test's own.
    snapshot = _owned(_demo(), {u.info.name: None for u in _demo().containers})
    assert owner_usage(snapshot) == ()  # no owner known: no owners' rows
    by_container: dict[str, list[GpuProcess]] = {}
    host: dict[str, list[GpuProcess]] = {}
    for proc in snapshot.processes:
        if proc.container_id is not None:
            usage = snapshot.container(proc.container_id)
            assert usage is not None
            by_container.setdefault(usage.info.name, []).append(proc)
        elif proc.on_host and proc.info.user:
            host.setdefault(proc.info.user, []).append(proc)
    names = sorted(by_container)
    assert len(names) >= 3 and host, (names, host)
    host_user = sorted(host)[0]
    # Two containers are the host user's own (one named by a label, one a guess), one is
    # someone else's, the rest name nobody.
    owners = {
        names[0]: Owner(host_user, "high", "label gputui.owner"),
        names[1]: Owner("carol", "low", "owns its bind mount /srv/carol"),
        names[2]: Owner(host_user, "medium", "runs as --user 1000"),
    }
    rows = {r.label: r for r in owner_usage(_owned(snapshot, owners))}

    def memory(procs: list[GpuProcess]) -> int:
        return sum(p.sample.used_memory_bytes or 0 for p in procs)

    mine = by_container[names[0]] + by_container[names[2]] + host[host_user]
    assert rows[host_user].gpu_memory_bytes == memory(mine)
    assert rows["carol?"].gpu_memory_bytes == memory(by_container[names[1]])
    rest = [p for n in names[3:] for p in by_container[n]]
    if rest:
        assert rows["owner unknown"].gpu_memory_bytes == memory(rest)
    # Every process is some row's: the owners add up to what NVML listed.
    assert sum(r.gpu_memory_bytes for r in rows.values()) == memory(list(snapshot.processes))


def test_the_demo_names_its_owners_through_the_owner_chain() -> None:
    owners = {u.info.name: u.info.owner for u in _demo().containers}
    found = {
        name: (o.name, o.confidence, o.evidence.split(" /")[0])
        for name, o in owners.items()
        if o is not None
    }
    assert found == {
        "llm-trainer-1": ("alice", "medium", "owns the compose project's directory"),
        "redis": ("alice", "medium", "owns the compose project's directory"),
        "bert": ("bob", "high", "label gputui.owner"),
        "vllm-server": ("carol", "low", "owns its bind mount"),
        "notebook-gpu3": ("dave", "medium", "runs as --user 1004:1004"),
        "etl-nightly": (None, "none", found["etl-nightly"][2]),
    }
    # Below a label, each says how to be sure; the containerd container's engine is not read.
    assert all(o.hint for o in owners.values() if o is not None and o.confidence != "high")
    assert "containerd-a35f0eee8e43" not in found


def _containers_section(text: str) -> list[str]:
    return text.split("\nContainers\n")[1].split("\n\n")[0].splitlines()


def test_the_text_report_shows_owners_once_some_are_known() -> None:
    snapshot = _demo()
    text = snapshot_to_text(snapshot)
    rows = _containers_section(text)
    assert rows[0].split()[:3] == ["NAME", "OWNER", "IMAGE"]
    vllm = next(r for r in rows if "vllm-server" in r)
    assert vllm.split()[1] == "carol?"  # a low-confidence guess reads as one
    assert next(r for r in rows if "etl-nightly" in r).split()[1] == "-"
    # The name and its owner fit an 80-column terminal together.
    assert rows[0].index("IMAGE") < 80
    owners = text.split("\nOwners\n")[1].split("\n\n")[0].splitlines()
    assert owners[0].split()[0] == "OWNER" and any("alice" in r for r in owners)
    # No owner known: neither the column nor the section (as the tree's OWNER column).
    bare = snapshot_to_text(_owned(snapshot, {u.info.name: None for u in snapshot.containers}))
    assert "OWNER" not in bare and "\nOwners\n" not in bare
    assert _containers_section(bare)[0].split()[:2] == ["NAME", "IMAGE"]


def test_a_hostile_owner_name_is_cleaned_and_bounded_in_the_text_report() -> None:
    snapshot = _demo()
    hostile = Owner("\x1b]0;pwned\x07eve\x1b[31m" + "x" * 200, "high", "label gputui.owner")
    text = snapshot_to_text(_owned(snapshot, {"vllm-server": hostile}))
    assert "\x1b" not in text and "\x07" not in text
    vllm = next(r for r in _containers_section(text) if "vllm-server" in r)
    cell = vllm.split()[1]
    assert cell.endswith("…") and len(cell) <= 20, cell
