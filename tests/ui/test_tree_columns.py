"""The container tree in aligned columns: offsets, units, natural sort, s / S and / filtering."""

from __future__ import annotations

import re
from dataclasses import replace

from textual.widgets import Input

from gputui.model.processes import GpuProcess
from gputui.model.snapshot import ContainerUsage, Snapshot
from gputui.ui.app import GpuTuiApp
from gputui.ui.widgets import tree_labels as tl
from tests.support.factories import GIB, FakeCollector, cid, container, proc, snapshot, standard
from tests.support.pilot import AppFactory, focused, node_label, ready

SIZE = (200, 50)


def tree_lines(app: GpuTuiApp) -> list[str]:
    """What the tree draws, line by line (guides, expanders and labels)."""
    tree = app.main.ctree
    return [tree.render_line(y).text.rstrip() for y in range(tree.last_line + 1)]


def column(line: str, header: str, title: str, layout: tl.TreeLayout = tl.FULL) -> str:
    """The cells of ``line`` under the column titled ``title`` in ``layout`` (the tree's own)."""
    spans: list[tuple[str, int, bool]] = [
        (spec.title, width, spec.right)
        for spec, width in zip(tl.TREE_COLUMNS, layout.widths, strict=True)
        if width
    ]
    spans += [("FLAGS", layout.flags, False), ("IMAGE", layout.image, False)]
    spans.append(("COMPOSE/POD", layout.group, False))
    start = tl.EXPANDER_WIDTH
    for name, width, right in spans:
        if not width:
            continue
        if name == title:
            cells = header[start : start + width]
            # The title heads exactly these cells (numbers and their titles right-aligned).
            assert (cells.lstrip() if right else cells.rstrip()) == title, (cells, title)
            return line[start : start + width]
        start += width + 1
    raise AssertionError(f"no column {title} in {layout}")


def named(
    n: int, name: str, mem_mib: int, cpu_percent: float, memory_used_bytes: int
) -> tuple[list[GpuProcess], ContainerUsage]:
    processes = [proc(100 + n, 0, mem_mib, cid(n), f"python3 job{n}.py", cpu=float(n))]
    usage = container(
        n, name, processes, cpu_percent=cpu_percent, memory_used_bytes=memory_used_bytes
    )
    return processes, usage


async def test_every_row_has_its_figures_at_the_same_offset(make_app: AppFactory) -> None:
    base = standard()
    # A container with a big GPU total and one with host memory figures: each column keeps one
    # unit, whatever the size.
    big = [proc(4000, 1, 122_880, cid(7), "python3 big.py")]
    containers = (
        *base.containers,
        container(7, "big", big, memory_used_bytes=3 * GIB, cpu_percent=250.0),
    )
    snap = replace(base, processes=(*base.processes, *big), containers=containers)
    app = make_app(FakeCollector([snap]))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.main.ctree.root.expand_all()
        await pilot.pause()
        header = app.main.cpane.header_line
        lines = tree_lines(app)
        assert len(lines) >= 14
        layout = app.main.ctree.columns
        memory_cells = [column(line, header, "GPU MEM", layout).strip() for line in lines]
        status_cells = [column(line, header, "STATUS", layout).strip() for line in lines]
        # The one size format (binary units, adaptive; "-" where nothing applies).
        size = r"\d+(\.\d+)?(B|KiB|MiB|GiB|TiB)"
        assert all(re.fullmatch(rf"({size}|-|)", cell) for cell in memory_cells), memory_cells
        assert "120GiB" in memory_cells  # the big container: 122,880 MiB
        assert "13.0GiB" in memory_cells  # a process: 13,290 MiB
        # Statuses start in their column on container rows at depth 0 and 1 (under others).
        assert {"running", "unknown"} <= set(status_cells)
        web = next(line for line in lines if "web" in line)  # under "other containers"
        assert column(web, header, "STATUS", layout).strip() == "running"
        assert column(web, header, "IMAGE", layout).strip() == "nginx:1"
        # Process rows put their figures under the same titles as containers.
        row_611 = next(line for line in lines if "611 (1)" in line)
        assert column(row_611, header, "GPU MEM", layout).strip() == "13.0GiB"
        assert column(row_611, header, "SM%", layout).strip() == "30%"
        assert column(row_611, header, "CPU%", layout).strip() == "12%"
        assert column(row_611, header, "MEM", layout).strip() == "512MiB"
        assert column(row_611, header, "ELAPSED", layout).strip() == "11d13h"
        # The cgroup-only badge sits in FLAGS, before the image, and the status in its column.
        cgroup = "  " + node_label(app.main.ctree.nodes_by_key[f"c:{cid(5)}"]).plain
        assert "CGROUP" in column(cgroup, header, "FLAGS", layout).split()
        assert column(cgroup, header, "STATUS", layout).strip() == "unknown"


async def test_rows_with_and_without_children_start_their_columns_alike(
    make_app: AppFactory,
) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        lines = tree_lines(app)
        header = app.main.cpane.header_line
        trainer = next(line for line in lines if "trainer-a" in line)  # has processes
        idle = next(line for line in lines if "reserved-idle" in line)  # a leaf
        assert trainer.startswith("▼ trainer-a") and idle.startswith("  reserved-idle")
        assert header.startswith("  NAME")
        layout = app.main.ctree.columns
        for title in ("STATUS", "GPUS", "IMAGE"):
            assert column(trainer, header, title, layout).strip(), title
            assert column(idle, header, title, layout).strip(), title


async def test_container_names_sort_naturally_on_screen(make_app: AppFactory) -> None:
    containers = [container(n, name) for n, name in enumerate(["c10", "c2", "c1"], 1)]
    app = make_app(FakeCollector([snapshot(containers=containers)]))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        names = [line.split()[0] for line in tree_lines(app)]
        assert names == ["c1", "c2", "c10"]


def _sortable() -> Snapshot:
    processes: list[GpuProcess] = []
    containers = []
    for n, name, mem, cpu in ((1, "c10", 9000, 5.0), (2, "c2", 1000, 80.0), (3, "c1", 4000, 20.0)):
        mine, usage = named(n, name, mem, cpu_percent=cpu, memory_used_bytes=n * GIB)
        processes += mine
        containers.append(usage)
    return snapshot(processes=processes, containers=containers)


async def test_s_cycles_container_sort_columns_and_S_reverses(make_app: AppFactory) -> None:
    app = make_app(FakeCollector([_sortable()]))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        tree, pane = app.main.ctree, app.main.cpane

        def order() -> list[str]:
            return [
                n.data.container.info.name
                for n in tree.root.children
                if n.data and n.data.container
            ]

        assert order() == ["c10", "c1", "c2"]  # GPU use: GPU memory, largest first
        assert "sort GPU use ▼" in pane.status_text
        assert not pane.status.display  # the default order spends no row on saying so
        node = tree.nodes_by_key[f"c:{cid(1)}"]
        await pilot.press("s")
        assert tree.sort_label == "name ▲" and order() == ["c1", "c2", "c10"]
        assert "sort name ▲" in pane.status_text and pane.status.display
        assert tree.nodes_by_key[f"c:{cid(1)}"] is node  # moved, not re-created
        await pilot.press("S")
        assert tree.sort_label == "name ▼" and order() == ["c10", "c2", "c1"]
        await pilot.press("s", "s", "s", "s")  # status, GPU mem, SM %, CPU %
        assert tree.sort_label == "CPU % ▼" and order() == ["c2", "c1", "c10"]
        await pilot.press("S")
        assert order() == ["c10", "c1", "c2"]
        await pilot.press("s")  # memory (the container's own), in its natural direction again
        assert tree.sort_label == "memory ▼" and order() == ["c1", "c2", "c10"]
        # A refresh keeps the chosen order.
        await pilot.pause()
        assert order() == ["c1", "c2", "c10"]


async def test_slash_filters_containers_and_escape_clears(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        tree, pane = app.main.ctree, app.main.cpane
        total = tree.total_containers
        await pilot.press("slash")
        assert app.main.active_tab == "containers"  # it filters the tree, not the table
        assert isinstance(app.focused, Input) and app.focused is pane.filter_input

        async def show(text: str) -> list[str]:
            pane.filter_input.value = text
            await pilot.pause()
            return sorted(tree.nodes_by_key)

        # By image: "web" (nginx:1) is the only match; it stays under "other containers".
        assert await show("nginx") == ["c:" + cid(4), "g:others"]
        assert (
            "filter “nginx”" in pane.status_text and f"1 of {total} containers" in pane.status_text
        )
        # By compose service.
        assert await show("trainer") == ["c:" + cid(1), "p:611:0", "p:612:1"]
        # By a process's command: its container stays, with the matching process only.
        assert await show("serve.py") == ["c:" + cid(2), "p:700:1"]
        assert await show("worker.py") == ["c:" + cid(1), "p:612:1"]
        # Processes outside containers keep their group.
        assert await show("xorg") == ["g:host", "p:900:0"]
        assert await show("no such thing") == []
        await pilot.press("escape")
        await pilot.pause()
        assert not pane.filter_input.display and tree.filter_text == ""
        assert tree.shown_containers == total and "g:others" in tree.nodes_by_key
        assert "filter" not in pane.status_text.split("(")[0]
        assert focused(app) is tree
        # Enter keeps the filter and goes back to the tree.
        await pilot.press("slash", *"infer", "enter")
        await pilot.pause()
        assert focused(app) is tree and tree.filter_text == "infer"
        assert sorted(tree.nodes_by_key) == ["c:" + cid(2), "p:700:1"]


async def test_filter_by_pod_and_user(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        tree = app.main.ctree
        tree.set_filter("infer-7d9")
        await pilot.pause()
        assert sorted(tree.nodes_by_key) == ["c:" + cid(2), "p:700:1"]
        tree.set_filter("nobody")  # the user of the cgroup-only container's process
        await pilot.pause()
        assert sorted(tree.nodes_by_key) == ["c:" + cid(5), "p:800:0"]


def test_elapsed_texts() -> None:
    assert tl.elapsed(5) == "5s"
    assert tl.elapsed(59.9) == "59s"
    assert tl.elapsed(60) == "1m"
    assert tl.elapsed(12 * 60 + 34) == "12m"
    assert tl.elapsed(3 * 3600 + 5 * 60 + 59) == "3h05m"
    assert tl.elapsed(3 * 86400 + 4 * 3600 + 1) == "3d04h"
    assert tl.elapsed(-30) == "0s"  # clock skew
    assert tl.since(None, 10.0) == tl.NONE and tl.since(1.0, None) == tl.NONE


def test_elapsed_key_changes_when_the_text_does() -> None:
    """The key a row's inputs compare: a new key whenever the shown text moves, and, past the
    first minute, none while it stays (a row of young jobs is not rebuilt every second)."""
    start = 1_000.0
    previous_key, previous_text = None, None
    changes = 0
    for second in range(0, 2 * 3600, 1):
        now = start + second + 0.5
        key, text = tl.elapsed_key(start, now), tl.since(start, now)
        if previous_text is not None and text != previous_text:
            assert key != previous_key, (second, text)
        if key != previous_key:
            changes += 1
        previous_key, previous_text = key, text
    assert changes == 60 + (2 * 3600 - 60) // 60  # each second of the first minute, then minutes


async def test_uptime_and_elapsed_in_the_tree(make_app: AppFactory) -> None:
    now = 1_000_000.0
    processes = [
        replace(p, info=replace(p.info, start_time=now - (12 * 60 + 34)))
        for p in [proc(611, 0, 1000, cid(1))]
    ]
    usage = container(1, "trainer", processes, started_at=now - (3 * 86400 + 4 * 3600))
    app = make_app(FakeCollector([snapshot(now, processes=processes, containers=[usage])]))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        header = app.main.cpane.header_line
        lines = tree_lines(app)
        assert column(lines[0], header, "ELAPSED").strip() == "3d04h"
        assert column(lines[1], header, "ELAPSED").strip() == "12m"


async def test_titles_follow_sideways_scrolling(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(90, 30)) as pilot:
        await ready(pilot)
        tree, pane = app.main.ctree, app.main.cpane
        assert tree.max_scroll_x > 0
        tree.scroll_to(x=10, animate=False)
        await pilot.pause()
        titles = tl.header_text(tree.columns)
        assert pane.header_line == titles[10:]
        assert str(pane.header.render()).startswith(titles[10:40])


async def test_empty_tree_and_table_say_why(make_app: AppFactory) -> None:
    app = make_app(FakeCollector([snapshot()]))  # GPUs, no container, no GPU process
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.pause()
        assert "Nothing uses a GPU" in app.main.cpane.empty.text
        await pilot.press("2")
        await pilot.pause()
        assert "No process is using a GPU" in app.main.proc_empty.text


async def test_a_filter_matching_nothing_says_so_and_clears(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        pane = app.main.cpane
        assert pane.empty.text == ""
        await pilot.press("slash", *"zzz")
        await pilot.pause()
        assert "Nothing matches “zzz”" in pane.empty.text
        await pilot.press("escape")
        await pilot.pause()
        assert pane.empty.text == "" and app.main.ctree.root.children


async def test_a_pods_containers_and_processes_nest_under_the_pod(make_app: AppFactory) -> None:
    processes = [proc(11, 0, 4000, cid(1), "python3 train.py"), proc(12, 1, 2000, cid(2))]
    containers = [
        container(1, "trainer", processes, k8s_pod="train-7d9c", k8s_namespace="ml"),
        container(2, "sidecar", processes, k8s_pod="train-7d9c", k8s_namespace="ml"),
    ]
    app = make_app(FakeCollector([snapshot(processes=processes, containers=containers)]))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        tree = app.main.ctree
        pod_node = tree.nodes_by_key["g:pod:ml/train-7d9c"]
        assert [c.data.key for c in pod_node.children if c.data] == ["c:" + cid(1), "c:" + cid(2)]
        trainer = tree.nodes_by_key["c:" + cid(1)]
        assert [c.data.key for c in trainer.children if c.data] == ["p:11:0"]
        lines = tree_lines(app)
        assert lines[0].startswith("▼ pod ml/train-7d9c") and "2 containers" in lines[0]
        assert tree.total_containers == 2
        # A filter shows the matching container on its own, as without pods.
        tree.set_filter("sidecar")
        await pilot.pause()
        assert sorted(tree.nodes_by_key) == ["c:" + cid(2), "p:12:1"]
