"""Refresh behaviour: keyed updates, vanishing nodes, a stalled source, layout, safety."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from gputui.derive.history import container_key
from gputui.derive.tree import HOST_KEY, ORPHANS_KEY, OTHERS_KEY
from gputui.model.status import HealthCheck, HealthStatus, SourceStatus
from gputui.ui.widgets import process_table as pt
from gputui.ui.widgets.container_tree import ContainerTree
from gputui.ui.widgets.spark import Spark
from tests.support.factories import (
    GIB,
    FakeCollector,
    cid,
    container,
    gpu,
    proc,
    snapshot,
    standard,
)
from tests.support.pilot import AppFactory, node_label, push, ready, tree_keys


def _node(tree: ContainerTree, key: str):  # type: ignore[no-untyped-def]
    return tree.nodes_by_key[key]


async def test_tree_structure_and_markers(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        tree = app.main.ctree
        # GPU users by GPU memory (trainer 15 GiB, inference 4 GiB, cgroup-only 0.5 GiB), then
        # the idle reservation: the collector's order.
        assert tree_keys(app) == [
            f"c:{cid(1)}",
            f"c:{cid(2)}",
            f"c:{cid(5)}",
            f"c:{cid(3)}",
            f"g:{HOST_KEY}",
            f"g:{ORPHANS_KEY}",
            f"g:{OTHERS_KEY}",
        ]
        labels = {k: str(n.label) for k, n in tree.nodes_by_key.items()}
        assert "CGROUP" in labels[f"c:{cid(5)}"]
        assert "IDLE" in labels[f"c:{cid(3)}"]
        assert "pod ml/infer-7d9" in labels[f"c:{cid(2)}"]
        assert "lab/trainer" in labels[f"c:{cid(1)}"]
        assert "15.0GiB" in labels[f"c:{cid(1)}"]
        # SM % column: 30 % on GPU 0 and 30 % on GPU 1 is 30 % per GPU, not 60 %.
        assert " 30% " in labels[f"c:{cid(1)}"]
        assert "unfindable GPU memory" in labels["g:orphans"]
        assert "PID not found" in labels["p:999:1"]
        proc_label = labels["p:611:0"]
        for part in (
            "611 (1)",
            "root",
            "python3 /lab/load.py 12 120",
            " 0 ",  # GPU
            "13.0GiB",  # GPU memory
            " 30% ",  # SM %
        ):
            assert part in proc_label
        for part in (" 12% ", " 512MiB "):  # CPU %, RSS
            assert part in proc_label
        assert [n.data.key for n in _node(tree, f"c:{cid(1)}").children] == ["p:611:0", "p:612:1"]
        assert not _node(tree, "g:others").is_expanded
        assert f"c:{cid(4)}" in tree.nodes_by_key  # "web", listed under other containers


async def test_refresh_keeps_expansion_cursor_and_node_identity(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        tree = app.main.ctree
        trainer = _node(tree, f"c:{cid(1)}")
        trainer.collapse()
        _node(tree, "g:others").expand()
        await pilot.pause()  # let the tree re-lay its lines before placing the cursor by line
        inference_proc = _node(tree, "p:700:1")
        tree.move_cursor(inference_proc)
        await pilot.pause()
        # A new container holding the most GPU memory sorts first, above the cursor; values
        # change everywhere.
        base = standard(2_000_000.0, util=80)
        extra = proc(1234, 0, 100_000, cid(9), "new job")
        processes = (*base.processes, extra)
        containers = (*base.containers, container(9, "aaa-new", processes))
        await push(pilot, replace(base, processes=processes, containers=containers))
        assert tree_keys(app)[0] == f"c:{cid(9)}"
        assert _node(tree, f"c:{cid(1)}") is trainer  # same node object: updated, not rebuilt
        assert not trainer.is_expanded
        assert _node(tree, "g:others").is_expanded
        assert tree.cursor_node is inference_proc
        assert tree.selected is not None
        assert tree.selected.key == "p:700:1"


async def test_vanished_container_removes_its_node(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        tree = app.main.ctree
        tree.move_cursor(_node(tree, "p:611:0"))
        await pilot.pause()
        base = standard(2_000_000.0)
        processes = tuple(p for p in base.processes if p.container_id != cid(1))
        containers = tuple(c for c in base.containers if c.info.id != cid(1))
        await push(pilot, replace(base, processes=processes, containers=containers))
        await pilot.pause()
        assert f"c:{cid(1)}" not in tree.nodes_by_key
        assert "p:611:0" not in tree.nodes_by_key
        assert f"c:{cid(1)}" not in tree_keys(app)
        assert tree.cursor_node is not None
        assert tree.cursor_node.data is not None
        assert tree.cursor_node.data.key in tree.nodes_by_key


async def test_process_leaving_keeps_cursor_on_its_container(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        tree = app.main.ctree
        tree.move_cursor(_node(tree, "p:612:1"))
        await pilot.pause()
        base = standard(2_000_000.0)
        processes = tuple(p for p in base.processes if p.pid != 612)
        containers = tuple(
            container(1, "trainer-a", processes) if c.info.id == cid(1) else c
            for c in base.containers
        )
        await push(pilot, replace(base, processes=processes, containers=containers))
        await pilot.pause()
        assert tree.selected is not None
        assert tree.selected.key == f"c:{cid(1)}"


async def test_container_becoming_idle_moves_to_others(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        base = standard(2_000_000.0)
        processes = tuple(p for p in base.processes if p.container_id != cid(2))
        containers = tuple(
            container(2, "inference", processes, gpu_request=None) if c.info.id == cid(2) else c
            for c in base.containers
        )
        await push(pilot, replace(base, processes=processes, containers=containers))
        tree = app.main.ctree
        assert f"c:{cid(2)}" not in tree_keys(app)
        others = _node(tree, "g:others")
        assert f"c:{cid(2)}" in [n.data.key for n in others.children if n.data]


async def test_process_table_keyed_cell_updates(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        await pilot.press("2")
        table = app.main.table
        await pilot.press("j", "j")  # cursor on 612:1 (third by GPU memory)
        assert table.selected is not None
        assert table.selected.pid == 612
        await pilot.pause()
        calls: list[tuple[object, object]] = []
        original = table.build_cell

        def spy(row: pt.ProcessRow, column: str) -> pt.Cell:
            calls.append((row.key, column))
            return original(row, column)

        table.build_cell = spy  # type: ignore[method-assign]  # a spy on the instance
        base = standard(1_000_001.0)  # a second later: no elapsed text moves
        changed = tuple(
            replace(p, sample=replace(p.sample, used_memory_bytes=60_000 * 1024 * 1024))
            if p.pid == 612
            else p
            for p in base.processes
            if p.pid != 800
        )
        await push(pilot, replace(base, processes=changed))
        await pilot.pause()
        assert calls == [("612:1", "mem")]  # only the one changed cell, when drawn
        assert table.get_cell("612:1", "mem").text.plain == "58.6GiB"  # and it shows
        assert "800:0" not in table.row_keys()
        assert table.row_keys()[0] == "612:1"  # re-sorted by GPU memory
        assert table.selected is not None
        assert table.selected.pid == 612  # the cursor followed its row
        await push(pilot, replace(base, taken_at=1_000_002.0, processes=changed))
        await pilot.pause()
        assert calls == [("612:1", "mem")]  # nothing changed: nothing built


async def test_ui_stays_responsive_while_collect_blocks(make_app: AppFactory) -> None:
    collector = FakeCollector(block_after=1)
    app = make_app(collector, interval=0.1)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        for _ in range(40):  # wait until the loop is stuck inside collect()
            if collector.calls == 1 and len(collector.collect_threads) == 1:
                await pilot.pause(0.05)
                break
        await pilot.press("2")
        await pilot.press("3")
        await pilot.press("question_mark")
        await pilot.pause()
        assert app.main.active_tab == "health"
        assert app.screen.__class__.__name__ == "HelpScreen"
        # Still blocked inside collect() (released only below): the keys were served meanwhile.
        assert collector.calls == 1 and not collector.release.is_set()
        collector.release.set()
        await asyncio.sleep(0.2)


async def test_source_failures_in_header(make_app: AppFactory) -> None:
    sources = {
        "nvml": SourceStatus("nvml", False, "NVML: no permission", kind="permission"),
        "docker": SourceStatus("docker", False, "cannot connect", kind="unreachable"),
    }
    collector = FakeCollector([snapshot(sources=sources)])
    app = make_app(collector)
    async with app.run_test(size=(160, 40)) as pilot:
        await ready(pilot)
        assert "NVML permission denied" in app.main.header.text
        assert "Docker unreachable" in app.main.header.text


async def test_health_tab_title_and_detail(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(160, 40)) as pilot:
        await ready(pilot)
        assert app.main.health_title == "Health ✗ 1 fail"
        await pilot.press("3")
        panel = app.main.health
        assert panel.table.row_count == 3
        assert panel.selected is not None
        assert panel.selected.id == "docker.cdi"  # worst first
        await pilot.press("j")
        await pilot.pause()
        detail = str(panel.detail.content)
        assert "nvidia-ctk runtime configure" in detail
        assert "runtimes: runc" in detail
        checks = (HealthCheck("nvml.init", HealthStatus.WARN, "slow"),)
        await push(pilot, replace(standard(2e6), health=checks))
        assert app.main.health_title == "Health ! 1 warn"
        await push(pilot, replace(standard(3e6), health=()))
        assert app.main.health_title == "Health"


async def test_lost_gpu_flagged(make_app: AppFactory) -> None:
    lost = gpu(1, lost=True, error="GpuIsLost", utilization_gpu=None)
    collector = FakeCollector([snapshot(gpus=[gpu(0), lost])])
    app = make_app(collector)
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        card = app.main.gpus.cards[1]
        assert card.has_class("-lost")
        assert "LOST" in str(card.gauges.render())
        assert "1 GPU lost" in app.main.header.text


async def test_resize_toggles_narrow_and_compact(make_app: AppFactory) -> None:
    gpus = [gpu(i) for i in range(8)]
    collector = FakeCollector([snapshot(gpus=gpus)])
    app = make_app(collector)
    async with app.run_test(size=(200, 60)) as pilot:
        await ready(pilot)
        panel = app.main.gpus
        assert not app.main.has_class("-narrow")  # wide enough for the side column
        assert not panel.has_class("-compact")  # 8 cards x 6 lines fit in 57 rows
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        await pilot.pause()
        assert app.main.has_class("-narrow")
        assert panel.has_class("-compact")
        assert panel.size.height >= 8  # every GPU on its own line
        assert app.main.query_one("#containers").size.height >= 7  # and the tree has room
        for card in panel.cards.values():
            assert card.gauges.size.height == 1
        await pilot.resize_terminal(200, 30)
        await pilot.pause()
        await pilot.pause()
        assert not app.main.has_class("-narrow")
        assert panel.has_class("-compact")  # 8 x 6 > 27 rows: still one line each
        await pilot.resize_terminal(200, 60)
        await pilot.pause()
        await pilot.pause()
        assert not panel.has_class("-compact")


async def test_untrusted_text_cannot_inject_markup_or_escapes(make_app: AppFactory) -> None:
    evil = "[bold red]pwn[/]\x1b[31mred\x1b]0;title\x07"
    processes = [proc(42, 0, 10, cid(7), command=evil, user=evil)]
    containers = [container(7, evil, processes, image=evil)]
    collector = FakeCollector([snapshot(processes=processes, containers=containers)])
    app = make_app(collector)
    async with app.run_test(size=(200, 40)) as pilot:
        await ready(pilot)
        tree = app.main.ctree
        for key in (f"c:{cid(7)}", "p:42:0"):
            label = node_label(tree.nodes_by_key[key])
            assert "[bold red]pwn[/]" in label.plain
            assert "\x1b" not in label.plain
            assert "\x07" not in label.plain
            assert not any("red" in str(span.style) for span in label.spans)
        await pilot.press("2")
        cells = app.main.table.get_row("42:0")
        assert all("\x1b" not in cell.text.plain for cell in cells)
        assert any("[bold red]pwn[/]" in cell.text.plain for cell in cells)


async def test_history_sparklines_follow_snapshots_and_selection(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        for step in range(1, 4):
            await push(pilot, standard(1_000_000.0 + step, util=10 * step))
        card = app.main.gpus.cards[0]
        assert card.util_spark.data == (50.0, 10.0, 20.0, 30.0)
        tree = app.main.ctree
        tree.move_cursor(tree.nodes_by_key["p:611:0"])
        await pilot.pause()
        await pilot.press("4")
        await pilot.pause()
        panel = app.main.history_panel
        assert "trainer-a" in str(panel.container_row.name_label.content)
        expected = app.history.series(container_key(cid(1)), app.window)
        assert panel.container_row.values == expected
        assert len(expected) == 4
        sparks = panel.query(Spark)
        assert len(sparks) == 1 + 4 * 2  # container + 4 metrics x 2 GPUs
        data_before = card.util_spark.data
        await push(pilot, standard(1_000_010.0, util=99))
        assert card.util_spark.data is not data_before  # a fresh tuple, so it repaints
        assert card.util_spark.data[-1] == 99.0


async def test_no_color_env_is_respected(make_app: AppFactory, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        assert app.no_color
        assert any(type(f).__name__ in ("NoColor", "Monochrome") for f in app._filters)


async def test_gpu_memory_totals_in_gib(make_app: AppFactory) -> None:
    g = gpu(0, used_gib=70.5)
    collector = FakeCollector([snapshot(gpus=[g])])
    app = make_app(collector)
    async with app.run_test(size=(160, 40)) as pilot:
        await ready(pilot)
        text = str(app.main.gpus.cards[0].gauges.render())
        assert "70.5GiB/141GiB" in text
        assert GIB == 1024**3
