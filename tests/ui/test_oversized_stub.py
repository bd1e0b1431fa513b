"""A container shown from the list only (inspect over the cap) says so: tree, header, Evidence."""

from __future__ import annotations

from dataclasses import replace

from gputui.collect.docker.source import OVERSIZED_INSPECT
from gputui.derive.analysis import Analyzer
from gputui.model.snapshot import Snapshot
from gputui.model.status import SourceStatus
from gputui.ui.screens import evidence
from tests.support.factories import FakeCollector, standard
from tests.support.pilot import AppFactory, node_label, ready, screen_lines


def _stubbed() -> Snapshot:
    base = standard()
    usage = base.containers[0]
    info = replace(usage.info, gpu_request=None, inspect_problem=OVERSIZED_INSPECT)
    stub = replace(usage, info=info)
    status = SourceStatus("docker", True, "1 container shown from the list only", "partial")
    return replace(
        base,
        containers=(stub, *base.containers[1:]),
        sources={**base.sources, "docker": status},
    )


async def test_stub_is_flagged_in_tree_and_header(make_app: AppFactory) -> None:
    snapshot = _stubbed()
    app = make_app(FakeCollector([snapshot]))
    async with app.run_test(size=(200, 50)) as pilot:
        await ready(pilot)
        usage = snapshot.containers[0]
        label = node_label(app.main.ctree.nodes_by_key[f"c:{usage.info.id}"]).plain
        # The row carries the badge (the help's legend says what it means); the full text is
        # in the Evidence view (below).
        assert "INSPECT?" in label, label
        assert any("ok (partial)" in line for line in screen_lines(app))


def test_stub_is_explained_in_the_evidence_view() -> None:
    snapshot = _stubbed()
    usage = snapshot.containers[0]
    analysis = Analyzer([]).analyse(snapshot)
    assert OVERSIZED_INSPECT in evidence.evidence_content(usage, analysis).plain
