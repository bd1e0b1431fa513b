"""The container tree's cheap paths agree with the slow ones they replace."""

from __future__ import annotations

from dataclasses import replace

from rich.text import Text

from gputui.derive.tree import Marker
from gputui.model.status import FindingSeverity
from gputui.ui.widgets import process_table as pt
from gputui.ui.widgets import tree_labels as tl
from tests.support.factories import GIB, cid, container, proc, standard


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
    now = base.taken_at
    marks = (Marker("gpu_shared", "shared GPU 0: 50%", FindingSeverity.INFO),)
    for process in base.processes:
        a = tl.process_label(process, marks, now)
        # A value the label does not show moves (the runtime), and a second passes after the
        # first hour (the elapsed text shows minutes): inputs and label stay equal.
        info = process.info
        moved = replace(process, info=replace(info, runtime="containerd"))
        assert tl.process_inputs(moved, marks, now + 1) == tl.process_inputs(process, marks, now)
        assert tl.process_label(moved, marks, now + 1) == a
        # A value it shows moves: the inputs differ.
        busier = replace(process, sample=replace(process.sample, sm_util=77))
        assert tl.process_inputs(busier, marks, now) != tl.process_inputs(process, marks, now)
        if info.exists:
            assert tl.process_inputs(process, marks, now + 86400) != tl.process_inputs(
                process, marks, now
            )


def test_container_inputs_follow_the_shown_cpu_and_memory() -> None:
    processes = [proc(611, 0, 13290, cid(1))]
    usage = container(1, "trainer", processes, cpu_percent=10.0, memory_used_bytes=GIB)
    # Moves the row does not show (a fraction of a percent, a few bytes): same inputs and label.
    moved = replace(usage, info=replace(usage.info, cpu_percent=10.2, memory_used_bytes=GIB + 9))
    assert tl.container_inputs(moved, 1, 2, ()) == tl.container_inputs(usage, 1, 2, ())
    assert tl.container_label(moved, 1, 2) == tl.container_label(usage, 1, 2)
    # Moves it shows: new inputs, and the label says so.
    busier = replace(usage, info=replace(usage.info, cpu_percent=99.0, memory_used_bytes=2 * GIB))
    assert tl.container_inputs(busier, 1, 2, ()) != tl.container_inputs(usage, 1, 2, ())
    assert "99%" in tl.container_label(busier, 1, 2).plain
    assert "2.0GiB" in tl.container_label(busier, 1, 2).plain
    renamed = replace(usage, info=replace(usage.info, image="other:1"))
    assert tl.container_inputs(renamed, 1, 2, ()) != tl.container_inputs(usage, 1, 2, ())


def test_row_inputs_cover_row_cells() -> None:
    base = standard()
    now = base.taken_at
    for process in base.processes:
        name = pt.container_name(process, base)
        assert pt._name(process, pt._names(base)) == name
        moved = replace(process, sample=replace(process.sample, mig_gi_id=3))
        assert pt.row_inputs(moved, name, now) == pt.row_inputs(process, name, now)
        assert pt.row_cells(moved, name, now) == pt.row_cells(process, name, now)
        busier = replace(process, info=replace(process.info, cpu_percent=91.0))
        if process.info.exists:
            assert pt.row_inputs(busier, name, now) != pt.row_inputs(process, name, now)
            # An hour on, the elapsed text (and so the inputs and the cell) moved.
            later = pt.row_inputs(process, name, now + 3600)
            assert later != pt.row_inputs(process, name, now)
            assert (
                pt.row_cells(process, name, now + 3600)["elapsed"]
                != pt.row_cells(process, name, now)["elapsed"]
            )
