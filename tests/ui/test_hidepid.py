"""A process /proc hides (hidepid) says so in the tree, the process table and the evidence view."""

from __future__ import annotations

from dataclasses import replace

from gputui.model.gpu import GpuProcessSample
from gputui.model.processes import GpuProcess, ProcessInfo
from gputui.ui.screens import evidence
from gputui.ui.widgets.tree_labels import HIDDEN_TEXT
from tests.support.factories import MIB, FakeCollector, proc, standard
from tests.support.pilot import AppFactory, node_label, ready, screen_lines


def _hidden(pid: int = 700, container_id: str | None = None) -> GpuProcess:
    """What the collector reports for a PID NVML lists but hidepid hides from gputui."""
    return GpuProcess(
        sample=GpuProcessSample(pid=pid, gpu_index=0, used_memory_bytes=2048 * MIB, sm_util=None),
        info=ProcessInfo(pid, access_denied=True, proc_hidden=True),
        container_id=container_id,
    )


async def test_hidden_process_is_named_hidden_in_tree_and_table(make_app: AppFactory) -> None:
    base = standard()
    snapshot = replace(base, processes=(*base.processes, _hidden()))
    collector = FakeCollector([snapshot])
    app = make_app(collector)
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        tree = app.main.ctree
        label = node_label(tree.nodes_by_key["p:700:0"]).plain
        assert HIDDEN_TEXT in label, label
        assert "?" not in label and "2.0GiB" in label  # the tree's GPU MEM column is in GiB
        # Not under "host": hidepid hides its cgroup too, so where it runs is unknown.
        parent = tree.nodes_by_key["p:700:0"].parent
        assert parent is tree.nodes_by_key["g:orphans"], parent
        assert any(HIDDEN_TEXT in line for line in screen_lines(app))
        await pilot.press("2")
        await pilot.pause()
        table = app.main.table
        row = [str(cell.text.plain) for cell in table.get_row("700:0")]
        assert HIDDEN_TEXT in row, row
        assert row[1] == "?"  # its container cannot be read either: not "-" (the host)
        assert "" in row and row.count("?") == 1  # no made-up user
        table.move_cursor(row=table.get_row_index("700:0"))
        await pilot.pause()
        await pilot.press("T")
        await pilot.pause()
        assert app.screen is app.main  # no confirmation for a PID gputui cannot check
        assert "hidden by /proc (hidepid)" in [n.message for n in app._notifications][-1]
        assert collector.signals == []


def test_hidden_process_in_the_evidence_view() -> None:
    base = standard()
    usage = base.containers[0]
    shown = proc(611, container_id=usage.info.id)
    snapshot = replace(base, processes=(shown, _hidden(container_id=usage.info.id)))
    parts = evidence._processes(usage, snapshot)
    text = "".join(p if isinstance(p, str) else p[0] for p in parts)
    assert HIDDEN_TEXT in text and "python3 train.py" in text
