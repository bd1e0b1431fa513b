"""The process table: COMMAND last, PID fixed, sort marks and reverse, Home / End, ELAPSED."""

from __future__ import annotations

from dataclasses import replace

from gputui.ui.widgets import process_table as pt
from tests.support.factories import FakeCollector, proc, snapshot, standard
from tests.support.pilot import AppFactory, ready


async def test_command_is_the_last_column_and_pid_stays_put(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press("2")
        await pilot.pause()
        table = app.main.table
        labels = table.header_labels()
        assert labels[-1] == "COMMAND"
        assert labels.index("CPID") < labels.index("COMMAND")
        assert labels.index("RSS") < labels.index("COMMAND")
        assert labels.index("ELAPSED") < labels.index("COMMAND")
        assert table.fixed_columns == 1 and labels[0] == "PID"
        # Scrolled all the way right, the header and the rows still start with the PID.
        assert table.max_scroll_x > 0
        table.scroll_to(x=table.max_scroll_x, animate=False)
        await pilot.pause()
        assert table.scroll_x > 0
        assert table.render_line(0).text.split()[0] == "PID"
        first = table.row_keys()[0].split(":")[0]
        assert table.render_line(1).text.split()[0] == first


async def test_sort_column_marked_and_reversed(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(160, 40)) as pilot:
        await ready(pilot)
        await pilot.press("2")
        table = app.main.table
        assert "GPU MEM ▼" in table.header_labels()
        assert table.row_keys()[0] == "611:0"  # the most GPU memory first
        await pilot.press("S")
        await pilot.pause()
        assert "GPU MEM ▲" in table.header_labels() and table.sort_label == "GPU mem ▲"
        assert table.row_keys()[-1] == "611:0"
        assert "sort GPU mem ▲" in str(app.main.proc_status.render())
        await pilot.press("s")  # SM %, in its natural direction again
        await pilot.pause()
        labels = table.header_labels()
        assert "SM% ▼" in labels and "GPU MEM" in labels  # the old column lost its mark
        await pilot.press("s", "s")  # CPU %, PID
        await pilot.pause()
        assert "PID ▲" in table.header_labels()
        assert [k.split(":")[0] for k in table.row_keys()] == [
            "611",
            "612",
            "700",
            "800",
            "900",
            "999",
        ]
        await pilot.press("S")
        await pilot.pause()
        assert "PID ▼" in table.header_labels()
        assert [k.split(":")[0] for k in table.row_keys()] == [
            "999",
            "900",
            "800",
            "700",
            "612",
            "611",
        ]


async def test_home_and_end_go_to_the_first_and_last_row(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press("2")
        await pilot.pause()
        table = app.main.table
        assert table.cursor_row == 0
        await pilot.press("end")
        await pilot.pause()
        assert table.cursor_row == table.row_count - 1
        assert table.scroll_x == 0  # not sideways
        await pilot.press("home")
        await pilot.pause()
        assert table.cursor_row == 0 and table.scroll_x == 0


async def test_elapsed_column_and_its_sort(make_app: AppFactory) -> None:
    now = 1_000_000.0
    started = {
        1: now - 5,
        2: now - (12 * 60 + 34),
        3: now - (3 * 3600 + 5 * 60),
        4: now - 3 * 86400 - 4 * 3600,
    }
    processes = [
        replace(p, info=replace(p.info, start_time=started[p.pid]))
        for p in (proc(pid, 0, 100 * pid) for pid in started)
    ]
    app = make_app(FakeCollector([snapshot(now, processes=processes)]))
    async with app.run_test(size=(160, 40)) as pilot:
        await ready(pilot)
        await pilot.press("2")
        await pilot.pause()
        table = app.main.table
        texts = {key: table.get_cell(key, "elapsed").text.plain for key in table.row_keys()}
        assert texts == {"1:0": "5s", "2:0": "12m", "3:0": "3h05m", "4:0": "3d04h"}
        elapsed = [key for key, _, _ in pt.SORTS].index("elapsed")
        for _ in range(elapsed):  # to the elapsed sort
            await pilot.press("s")
        await pilot.pause()
        assert "ELAPSED ▼" in table.header_labels()
        assert table.row_keys() == ["4:0", "3:0", "2:0", "1:0"]  # longest running first


def test_rss_column_in_the_one_size_format() -> None:
    base = standard()
    sizes = [
        pt.CELL_BUILDERS["rss"](
            replace(base.processes[0], info=replace(base.processes[0].info, rss_bytes=b)), "c", None
        ).text.plain
        for b in (512 * 1024**2, 12 * 1024**3)
    ]
    # The one size formatter of every screen (binary units, adaptive), as the GPU MEM column.
    assert sizes == ["512MiB", "12.0GiB"]
