"""The container tree's cheap paths agree with the slow ones they replace."""

from __future__ import annotations

from dataclasses import replace

from rich.text import Text
from ui_factories import cid, container, proc, standard

from gputui.derive.tree import Marker
from gputui.ui.widgets import process_table as pt
from gputui.ui.widgets import tree_labels as tl


def test_sep_equals_text_assemble() -> None:
    parts: list[tuple[str, str] | str] = [
        ("name", "bold"),
        "  ",
        ("", "dim"),
        "x",
        ("bell\x07", ""),
    ]
    for chosen in (parts[:4], parts):
        fast = tl.assemble_parts(chosen)
        slow = Text.assemble(*chosen, no_wrap=True, overflow="ellipsis")
        assert (fast.plain, fast.spans, fast.no_wrap, fast.overflow) == (
            slow.plain,
            slow.spans,
            slow.no_wrap,
            slow.overflow,
        )


def test_equal_process_inputs_mean_equal_labels() -> None:
    base = standard()
    marks = (Marker("gpu_shared", "shared GPU 0: 50%", "info"),)
    for process in base.processes:
        a = tl.process_label(process, marks)
        # A value the label does not show moves (start time): inputs and label stay equal.
        moved = replace(process, info=replace(process.info, start_time=5.0))
        assert tl.process_inputs(moved, marks) == tl.process_inputs(process, marks)
        assert tl.process_label(moved, marks) == a
        # A value it shows moves: the inputs differ.
        busier = replace(process, sample=replace(process.sample, sm_util=77))
        assert tl.process_inputs(busier, marks) != tl.process_inputs(process, marks)


def test_container_inputs_ignore_cpu_and_memory_figures() -> None:
    processes = [proc(611, 0, 13290, cid(1))]
    usage = container(1, "trainer", processes, cpu_percent=10.0, memory_used_bytes=1)
    moved = replace(usage, info=replace(usage.info, cpu_percent=99.0, memory_used_bytes=2))
    assert tl.container_inputs(moved, 1, 2, ()) == tl.container_inputs(usage, 1, 2, ())
    assert tl.container_label(moved, 1, 2) == tl.container_label(usage, 1, 2)
    renamed = replace(usage, info=replace(usage.info, image="other:1"))
    assert tl.container_inputs(renamed, 1, 2, ()) != tl.container_inputs(usage, 1, 2, ())


def test_row_inputs_cover_row_cells() -> None:
    base = standard()
    for process in base.processes:
        name = pt.container_name(process, base)
        assert pt._name(process, pt._names(base)) == name
        moved = replace(process, info=replace(process.info, start_time=5.0))
        assert pt.row_inputs(moved, name) == pt.row_inputs(process, name)
        assert pt.row_cells(moved, name) == pt.row_cells(process, name)
        busier = replace(process, info=replace(process.info, cpu_percent=91.0))
        if process.info.exists:
            assert pt.row_inputs(busier, name) != pt.row_inputs(process, name)
