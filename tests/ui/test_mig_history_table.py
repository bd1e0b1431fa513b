"""MIG devices in the History tab (memory per device, under its GPU) and the Processes table.

The demo machine's GPU 3 is split into three MIG devices (3:0 3g.71gb, 3:1 2g.35gb, 3:2 1g.18gb).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from textual.widgets import Label

from gputui.derive.history import History, mig_devices, mig_key
from gputui.model.processes import GpuProcess
from gputui.ui.widgets.history import HistoryPanel
from gputui.ui.widgets.process_table import (
    MPS_MARK,
    ProcessTable,
    gpu_text,
    row_cells,
    row_inputs,
    sort_value,
)
from tests.support.factories import demo_app, demo_snapshots, proc
from tests.support.pilot import push, ready, screen_lines


@pytest.mark.parametrize("size", [(80, 24), (160, 50)])
async def test_history_tab_shows_each_mig_device_under_its_gpu(size: tuple[int, int]) -> None:
    app = demo_app(refreshes=20)
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        await pilot.press("4")
        await pilot.pause()
        await pilot.pause()
        panel = app.query_one(HistoryPanel)
        gpus = {g.index: g for g in app.main.snapshot.gpus}
        ids = {g.index: (g.uuid or "") for g in gpus.values()}
        # Only GPU 3 has MIG rows; the others have none.
        assert [len(panel.mig_rows.get(ids[i], {})) for i in sorted(ids)] == [0, 0, 0, 3]
        rows = panel.mig_rows[ids[3]]
        labels = [str(r.name_label.content) for r in rows.values()]
        assert labels == ["3:0 3g.71gb", "3:1 2g.35gb", "3:2 1g.18gb"]
        # Each device's row charts its own series, in bytes: 3:0 has 6.5 GiB in use.
        first = rows[mig_key(gpus[3], mig_devices(gpus[3])[0])[1]]
        assert first.values and first.values[-1] == float(6979321856)
        assert str(first.value.content).startswith("6.5GiB")
        # Under GPU 3's own rows: the device rows follow its temperature row.
        children = list(panel.children)
        temp = children.index(panel.rows[ids[3]]["temp"])
        assert children[temp + 1 : temp + 4] == list(rows.values())
        # And they are on screen once scrolled to.
        panel.focus()
        await pilot.press("end")
        await pilot.pause()
        text = "\n".join(screen_lines(app))
        assert "3:0 3g.71gb" in text and "3:2 1g.18gb" in text
        if size[0] >= 160:
            assert "6.5GiB  min" in text


async def test_mig_rows_go_when_the_device_goes() -> None:
    app = demo_app(refreshes=5)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        app.loop.pause()  # the demo collector's next delivery would show all three again
        await pilot.press("4")
        await pilot.pause()
        panel = app.query_one(HistoryPanel)
        snap = app.main.snapshot
        gpu3 = snap.gpus[3]
        assert len(panel.mig_rows[gpu3.uuid or ""]) == 3
        fewer = replace(gpu3, mig_instances=gpu3.mig_instances[:1])
        gpus = (*snap.gpus[:3], fewer)
        history = History(1800.0, 1.0)  # the app's own is written by its collector thread
        history.record(replace(snap, taken_at=snap.taken_at + 1, gpus=gpus))
        panel.show(gpus, history, 60.0, None)
        await pilot.pause()
        assert [str(r.name_label.content) for r in panel.mig_rows[gpu3.uuid or ""].values()] == [
            "3:0 3g.71gb"
        ]
        # The removed rows are unmounted, not only forgotten.
        names = [str(label.content) for label in panel.query(".name").results(Label)]
        assert "3:0 3g.71gb" in names and not [n for n in names if n.startswith(("3:1", "3:2"))]


@pytest.mark.parametrize("size", [(80, 24), (160, 50)])
async def test_processes_table_names_the_mig_device(size: tuple[int, int]) -> None:
    app = demo_app(refreshes=5)
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        await pilot.press("2")
        await pilot.pause()
        table = app.query_one(ProcessTable)
        on_mig = {key: p for key, p in table.processes.items() if p.sample.mig_index is not None}
        assert on_mig, "the demo has processes on MIG devices"
        for key, process in on_mig.items():
            shown = table.get_cell(key, "gpu").text.plain
            assert shown == f"3:{process.sample.mig_index}"
        plain = [k for k, p in table.processes.items() if p.sample.mig_index is None]
        assert plain and ":" not in table.get_cell(plain[0], "gpu").text.plain
        if size[0] >= 160:
            assert any(" 3:0 " in line for line in screen_lines(app))


def test_gpu_column_sorts_by_gpu_then_mig_device_and_moves_with_it() -> None:
    whole = proc(1, 3)
    dev0 = GpuProcess(replace(whole.sample, mig_index=0), whole.info)
    dev1 = GpuProcess(replace(whole.sample, mig_index=1), whole.info)
    next_gpu = proc(2, 4)
    values = [sort_value("gpu", p, "c") for p in (whole, dev0, dev1, next_gpu)]
    assert values == sorted(values) and len(set(values)) == 4
    assert [row_cells(p, "c")["gpu"].sort_key for p in (whole, dev0, dev1)] == values[:3]
    assert [gpu_text(p) for p in (whole, dev0, next_gpu)] == ["3", "3:0", "4"]
    assert row_inputs(dev0, "c") != row_inputs(dev1, "c")  # the cell is rebuilt when it moves


def test_an_mps_client_is_marked_in_the_command_cell() -> None:
    plain = proc(7, 0, command="python serve.py")
    client = GpuProcess(replace(plain.sample, kind="M+C", mps=True), plain.info)
    assert row_cells(client, "c")["command"].text.plain == f"{MPS_MARK} python serve.py"
    assert MPS_MARK == "[MPS client]"  # the container tree's words
    assert MPS_MARK not in row_cells(plain, "c")["command"].text.plain
    assert row_inputs(client, "c") != row_inputs(plain, "c")


async def test_an_mps_client_row_is_marked_on_screen() -> None:
    snap = demo_snapshots(3)[-1]
    first = snap.processes[0]
    client = GpuProcess(replace(first.sample, mps=True, kind="M+C"), first.info)
    app = demo_app(refreshes=3)
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        # The demo collector re-delivers its snapshot every second: stop it, or a refresh
        # landing between the push and the read (a loaded machine) would replace ours.
        app.loop.pause()
        await pilot.press("2")
        await pilot.pause()
        await push(
            pilot,
            replace(snap, taken_at=snap.taken_at + 1, processes=(client, *snap.processes[1:])),
        )
        text = "\n".join(screen_lines(app))
        assert MPS_MARK in text
