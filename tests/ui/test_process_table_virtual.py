"""The process table draws only what is on screen, sorts only when the order can change."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pytest
from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from gputui.model.snapshot import Snapshot
from gputui.ui.app import GpuTuiApp
from gputui.ui.textual_compat import (
    LazyLabelNode,
    RowSource,
    repaint_tree_nodes,
    set_tree_node_label,
)
from gputui.ui.widgets import container_tree
from gputui.ui.widgets import process_table as pt
from gputui.ui.widgets.container_tree import NodeRef
from tests.support.factories import FakeCollector, cid, container, proc, snapshot
from tests.support.pilot import AppFactory, push, ready, screen_lines

ROWS = 2000


def many(step: int = 0, taken_at: float = 1_000_000.0) -> Snapshot:
    """2,000 host processes; ``step`` moves every CPU % (not the GPU memory they sort by)."""
    processes = [
        proc(10_000 + i, i % 8, mem_mib=100 + i, cpu=float((i + step * 7) % 300))
        for i in range(ROWS)
    ]
    return snapshot(taken_at, processes=processes)


class Spy:
    """Counts the cells a table builds and the sorts it does."""

    def __init__(self, table: pt.ProcessTable) -> None:
        self.cells: list[tuple[str, str]] = []
        self.sorts = 0
        build, sort = table.build_cell, table._sort

        def build_cell(row: pt.ProcessRow, column: str) -> pt.Cell:
            self.cells.append((row.key, column))
            return build(row, column)

        def count_sort(keep: str | None) -> None:
            self.sorts += 1
            sort(keep)

        table.build_cell = build_cell  # type: ignore[method-assign]  # spies on the instance
        table._sort = count_sort  # type: ignore[method-assign]


async def _open(pilot: Pilot[None]) -> pt.ProcessTable:
    app = await ready(pilot)
    await pilot.press("2")
    await pilot.pause()
    return app.main.table


def _visible(table: pt.ProcessTable) -> set[str]:
    top = round(table.scroll_y)
    height = table.scrollable_content_region.height - 1
    return set(table.row_keys()[top : top + height])


async def test_only_visible_rows_are_built_when_every_value_moves(make_app: AppFactory) -> None:
    app = make_app(FakeCollector([many()]))
    async with app.run_test(size=(80, 24)) as pilot:
        table = await _open(pilot)
        assert table.row_count == ROWS
        spy = Spy(table)
        await push(pilot, many(step=1, taken_at=1_000_001.0))
        await pilot.pause()
        visible = _visible(table)
        built = {key for key, _ in spy.cells}
        assert built and built <= visible, built - visible
        assert {column for _, column in spy.cells} == {"cpu"}  # only the moved column
        assert spy.sorts == 0  # CPU % moved, the table sorts by GPU memory
        # The screen shows the new values.
        first = table.row_keys()[0]
        cpu = table.get_cell(first, "cpu").text.plain
        assert any(first.split(":")[0] in line and cpu in line for line in screen_lines(app))


async def test_sorts_when_the_sort_column_moves(make_app: AppFactory) -> None:
    app = make_app(FakeCollector([many()]))
    async with app.run_test(size=(80, 24)) as pilot:
        table = await _open(pilot)
        await pilot.press("s", "s")  # SM %, then CPU %
        await pilot.pause()
        assert table.sort_label.startswith("CPU")
        spy = Spy(table)
        await push(pilot, many(step=1, taken_at=1_000_001.0))
        assert spy.sorts == 1
        cpus = [table._rows[k].process.info.cpu_percent or 0.0 for k in table.row_keys()]
        assert cpus == sorted(cpus, reverse=True)


async def test_unchanged_lines_are_not_redrawn(make_app: AppFactory) -> None:
    app = make_app(FakeCollector([many()]))
    async with app.run_test(size=(80, 24)) as pilot:
        table = await _open(pilot)
        key = table.row_keys()[3]
        strip = table._row_strip(3)
        await push(pilot, many(step=0, taken_at=1_000_001.0))
        assert table._row_strip(3) is strip  # same values: the cached line
        assert table.row_keys()[3] == key


async def test_selection_follows_the_process_and_scrolls_into_view(make_app: AppFactory) -> None:
    app = make_app(FakeCollector([many()]))
    async with app.run_test(size=(80, 24)) as pilot:
        table = await _open(pilot)
        await pilot.press("pagedown", "pagedown")
        await pilot.pause()
        row = table.cursor_row
        assert row > 20 and row in range(round(table.scroll_y), round(table.scroll_y) + 22)
        chosen = table.selected
        assert chosen is not None
        await pilot.press("pageup")
        assert table.cursor_row < row
        await pilot.press("pagedown")
        assert table.cursor_row == row
        # Reverse the sort: the same process stays selected, far down the list, on screen.
        await pilot.press("S")
        await pilot.pause()
        assert table.selected is not None and table.selected.pid == chosen.pid
        assert table.cursor_row == ROWS - 1 - row
        top = round(table.scroll_y)
        assert top <= table.cursor_row < top + table.scrollable_content_region.height - 1
        await pilot.press("end")
        assert table.cursor_row == ROWS - 1
        assert any(str(table.selected.pid) in line for line in screen_lines(app) if table.selected)


async def test_click_selects_the_row_under_the_mouse(make_app: AppFactory) -> None:
    app = make_app(FakeCollector([many()]))
    async with app.run_test(size=(120, 30)) as pilot:
        table = await _open(pilot)
        await pilot.press("pagedown")
        await pilot.pause()
        top = round(table.scroll_y)
        assert await pilot.click(pt.ProcessTable, offset=(3, 4))
        await pilot.pause()
        assert table.cursor_row == top + 3  # line 0 is the header
        assert isinstance(app, GpuTuiApp)
        _, process = app.main.selection()
        assert process is not None and process_key(process) == table.row_keys()[top + 3]


def process_key(process: object) -> str:
    """The table's row key of a process."""
    from gputui.derive.tree import process_key as key
    from gputui.model.processes import GpuProcess

    assert isinstance(process, GpuProcess)
    return key(process)


async def test_every_line_fills_the_width_exactly(make_app: AppFactory) -> None:
    for size in ((60, 15), (80, 24), (120, 30), (160, 50)):
        app = make_app(FakeCollector([many()]))
        async with app.run_test(size=size) as pilot:
            table = await _open(pilot)
            width = table.scrollable_content_region.width
            height = table.scrollable_content_region.height
            for y in range(height):
                assert table.render_line(y).cell_length == width, (size, y)
            assert table.render_line(0).text.split()[0] == "PID"
            table.scroll_to(x=table.max_scroll_x, animate=False)
            await pilot.pause()
            for y in range(height):
                assert table.render_line(y).cell_length == width, (size, y)


async def test_filter_and_zero_rows(make_app: AppFactory) -> None:
    app = make_app(FakeCollector([many()]))
    async with app.run_test(size=(80, 24)) as pilot:
        table = await _open(pilot)
        table.filter_text = "nothing matches this"
        app.main.sync_tab("processes", force=True)
        await pilot.pause()
        assert table.row_count == 0 and table.selected is None
        assert table.render_line(1).text.strip() == ""
        assert "nothing matches this" in app.main.proc_empty.text
        table.filter_text = "10007"
        app.main.sync_tab("processes", force=True)
        await pilot.pause()
        assert table.row_keys() == ["10007:7"]
        assert table.selected is not None and table.selected.pid == 10007


def in_containers(step: int = 0, taken_at: float = 1_000_000.0) -> Snapshot:
    """100 containers of 20 processes each; ``step`` moves every CPU %."""
    processes = [
        proc(
            10_000 + i,
            i % 8,
            mem_mib=100 + i,
            cpu=float((i + step * 7) % 300),
            container_id=cid(i % 100 + 1),
        )
        for i in range(ROWS)
    ]
    containers = [container(n + 1, f"job-{n:03d}", processes) for n in range(100)]
    return snapshot(taken_at, processes=processes, containers=containers)


async def test_tree_builds_labels_only_for_lines_drawn_or_read(make_app: AppFactory) -> None:
    app = make_app(FakeCollector([in_containers()]))
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        tree = app.main.ctree
        await push(pilot, in_containers(step=1, taken_at=1_000_001.0))
        await pilot.pause()
        nodes = [node for key, node in tree.nodes_by_key.items() if key.startswith("p:")]
        assert len(nodes) == ROWS
        pending = [node for node in nodes if isinstance(node, LazyLabelNode) and node.pending]
        # Every process label changed; only those on screen (~20 lines) were built.
        assert ROWS - 40 <= len(pending) < ROWS
        # A label read off screen is built then, with the new figures.
        far = pending[-1]
        assert far.data is not None and far.data.process is not None
        cpu = far.data.process.info.cpu_percent
        assert isinstance(far.label, Text) and f"{cpu:.0f}" in far.label.plain
        assert not far.pending


async def _tree_screen(make_app: AppFactory) -> list[str]:
    app = make_app(FakeCollector([in_containers()]))
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        for step in (1, 2):
            await push(pilot, in_containers(step=step, taken_at=1_000_000.0 + step))
        await pilot.press("j", "j", "j")
        await pilot.pause()
        return screen_lines(app)


async def test_lazy_tree_labels_draw_what_eager_labels_draw(
    make_app: AppFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    lazy = await _tree_screen(make_app)

    def eager(tree: Tree[NodeRef], node: TreeNode[NodeRef], build: Callable[[], Text]) -> None:
        set_tree_node_label(tree, node, build())

    def eager_rows(nodes: Iterable[TreeNode[NodeRef]], source: RowSource[NodeRef]) -> None:
        # Every label built now, every line on screen repainted.
        nodes = list(nodes)
        for index, node in enumerate(nodes):
            node.data = source.row_data(index)
            set_tree_node_label(node.tree, node, source.row_label(index))
        if nodes:
            repaint_tree_nodes(nodes[0].tree, nodes)

    monkeypatch.setattr(container_tree, "set_lazy_label", eager)
    monkeypatch.setattr(container_tree, "attach_rows", eager_rows)
    assert await _tree_screen(make_app) == lazy


def _process_line(app: GpuTuiApp, pid: int) -> str:
    return next(line for line in screen_lines(app) if f" {pid} " in f" {line} ")


async def test_tree_rows_scrolled_back_to_show_their_new_figures(make_app: AppFactory) -> None:
    """A line drawn before its figures moved off screen is drawn anew when scrolled back to."""
    app = make_app(FakeCollector([in_containers()]))
    async with app.run_test(size=(160, 40)) as pilot:
        await ready(pilot)
        tree = app.main.ctree
        tree.focus()
        await pilot.press("G")  # the last container's processes are drawn (and cached) now
        await pilot.pause()
        far = tree.cursor_node
        assert far is not None and far.data is not None and far.data.process is not None
        pid = far.data.process.pid
        before = _process_line(app, pid)
        await pilot.press("g")
        await pilot.pause()
        moved = in_containers(step=5, taken_at=1_000_001.0)
        await push(pilot, moved)
        node = tree.nodes_by_key[far.data.key]
        assert node is far  # same process set: the nodes stay, only their figures move
        await pilot.press("G")
        await pilot.pause()
        after = _process_line(app, pid)
        new = next(p for p in moved.processes if p.pid == pid)
        cpu = f"{new.info.cpu_percent:.0f}%"
        assert after != before and cpu in after.split()
        # The node's data is the new snapshot's process (actions read it).
        assert far.data is not None and far.data.process is new


async def test_tree_rows_follow_processes_starting_and_ending(make_app: AppFactory) -> None:
    first = snapshot(
        1_000_000.0,
        processes=[proc(501, 0, container_id=cid(1)), proc(502, 0, container_id=cid(1))],
        containers=[container(1, "job")],
    )
    app = make_app(FakeCollector([first]))
    async with app.run_test(size=(160, 30)) as pilot:
        await ready(pilot)
        tree = app.main.ctree
        kept = tree.nodes_by_key["p:502:0"]
        # 501 ends, 503 and 500 start: the nodes follow, 502's node stays (and its cursor would).
        second = snapshot(
            1_000_001.0,
            processes=[
                proc(500, 1, container_id=cid(1)),
                proc(502, 0, cpu=77.0, container_id=cid(1)),
                proc(503, 0, container_id=cid(1)),
            ],
            containers=[container(1, "job")],
        )
        await push(pilot, second)
        group = tree.nodes_by_key[f"c:{cid(1)}"]
        keys = [c.data.key for c in group.children if c.data is not None]
        assert keys == ["p:500:1", "p:502:0", "p:503:0"]
        assert "p:501:0" not in tree.nodes_by_key
        assert tree.nodes_by_key["p:502:0"] is kept
        assert "77%" in _process_line(app, 502).split()
        for pid in (500, 503):
            assert _process_line(app, pid)
        # All of them leave: the container has no process line and no expander.
        await push(pilot, snapshot(1_000_002.0, containers=[container(1, "job")]))
        group = tree.nodes_by_key[f"c:{cid(1)}"]
        assert not group.children and not group.allow_expand
        assert not [k for k in tree.nodes_by_key if k.startswith("p:")]
