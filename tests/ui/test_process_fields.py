"""The per-process field table generates the JSON, the scenario keys, the table's columns and
its sort orders: a field added with one entry shows in all of them."""

from __future__ import annotations

from dataclasses import replace

import pytest
from textual.app import App, ComposeResult

from gputui.collect.standins import scenario_format
from gputui.config import ui_state
from gputui.model.process_fields import (
    PROCESS_FIELDS,
    ProcessColumn,
    ProcessField,
    ProcessScenarioKey,
    ProcessSortOrder,
    columns,
    process_to_json,
    scenario_bounds,
    scenario_keys,
    sort_names,
)
from gputui.model.processes import GpuProcess
from gputui.present.json_report import snapshot_to_json
from gputui.ui.widgets import process_table as pt
from tests.support.factories import cid, container, proc, snapshot

#: A made-up figure: the encoder utilization NVML reports per process, as a column and a sort.
ENCODER = ProcessField(
    "enc_util",
    "encoder utilization",
    lambda s, p: p.sample.enc_util,
    ProcessScenarioKey("enc_util", (0, 100)),
    ProcessColumn(
        "enc",
        "ENC%",
        5,
        45,
        lambda p, c: p.sample.enc_util,
        sort=ProcessSortOrder("encoder %", True, 6),
    ),
)
FIELDS = (*PROCESS_FIELDS, ENCODER)


def _with_encoder(process: GpuProcess, enc: int) -> GpuProcess:
    return replace(process, sample=replace(process.sample, enc_util=enc))


def _frame() -> tuple[GpuProcess, ...]:
    return (
        _with_encoder(proc(611, 0, 4000, cid(1)), 10),
        _with_encoder(proc(612, 0, 1000, cid(1)), 70),
        _with_encoder(proc(613, 1, 2000, cid(1)), 40),
    )


def test_the_table_is_the_report_scenario_and_sort_vocabulary() -> None:
    """Today's names, generated: the JSON keys in order, the scenario keys, [ui] sort."""
    processes = _frame()
    shot = snapshot(processes=processes, containers=(container(1, "trainer", processes),))
    doc = snapshot_to_json(shot)
    assert list(doc["processes"][0]) == [f.key for f in PROCESS_FIELDS]
    assert scenario_keys() == scenario_format.PROCESS_KEYS
    assert scenario_keys() == {"pid", "used_memory_mib", "sm_util", "mem_util", "type"}
    names = ("mem", "sm", "cpu", "pid", "container", "elapsed", "gpu")
    assert ui_state.SORTS == sort_names() == names
    assert pt.SORTS[0] == ("mem", "GPU mem", True)
    assert [key for key, _, _ in pt.COLUMNS][-1] == "command"
    with pytest.raises(ValueError, match="unique"):
        columns((*PROCESS_FIELDS, PROCESS_FIELDS[0]))


def test_a_field_added_with_one_entry_is_in_the_json_and_the_scenario_keys() -> None:
    processes = _frame()
    shot = snapshot(processes=processes, containers=(container(1, "trainer", processes),))
    out = process_to_json(shot, processes[1], FIELDS)
    assert list(out)[-1] == "enc_util" and out["enc_util"] == 70
    assert out == {**process_to_json(shot, processes[1]), "enc_util": 70}  # nothing else moved
    assert "enc_util" in scenario_keys(FIELDS)
    assert scenario_bounds(FIELDS)["enc_util"] == (0, 100)


class _TableApp(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.table = pt.ProcessTable(fields=FIELDS)

    def compose(self) -> ComposeResult:
        yield self.table


async def test_a_field_added_with_one_entry_is_a_column_and_a_sort_order() -> None:
    processes = _frame()
    shot = snapshot(processes=processes, containers=(container(1, "trainer", processes),))
    app = _TableApp()
    async with app.run_test(size=(160, 20)) as pilot:
        table = app.table
        table.sync(shot)
        await pilot.pause()
        headers = table.header_labels()
        assert "ENC%" in headers
        assert headers.index("ENC%") == headers.index("SM%") + 1  # its position: after SM %
        key = next(k for k in table.row_keys() if k.startswith("612:"))
        assert table.get_cell(key, "enc").text.plain == "70"
        assert "ENC%" in "".join(seg.text for seg in table.render_line(0))
        # s cycles to it (the last order); the rows follow the encoder, biggest first.
        for _ in range(len(table.columns.sorts) - 1):
            table.cycle_sort()
        assert table.sort_label == "encoder % ▼"
        assert [table.processes[k].pid for k in table.row_keys()] == [612, 613, 611]
        table.reverse_sort()
        assert [table.processes[k].pid for k in table.row_keys()] == [611, 613, 612]
