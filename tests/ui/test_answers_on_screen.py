"""The answers gputui exists for are on every row at every size, and no verdict without data.

FLAGS badges at 80x24 ... 200x60; one size formatter; "not in Docker" / "not shared" only when
the engine / NVML answered.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from gputui.derive import units
from gputui.model.status import SourceStatus
from gputui.present.text_report import snapshot_to_text
from gputui.ui.widgets import tree_labels as tl
from tests.support.factories import GIB, MIB, cid, container, demo_app, proc, snapshot
from tests.support.pilot import ready, screen_lines

SIZES = [(80, 24), (120, 30), (160, 50), (200, 60)]


def _row(lines: list[str], name: str) -> str:
    hits = [line for line in lines if name in line]
    assert hits, f"no row with {name!r} in:\n" + "\n".join(lines)
    return hits[0]


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_demo_badges_on_their_rows_without_scrolling(size: tuple[int, int]) -> None:
    """The idle reservation, the shared GPU and the CPU-throttled container, each on its row."""
    app = demo_app(refreshes=20)
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        lines = screen_lines(app)
        notebook = _row(lines, "  notebook-gp")  # reserved MIG 3:1, runs nothing
        assert "IDLE" in notebook and "SHARED" not in notebook and "THR " not in notebook
        bert = _row(lines, "▼ bert ")  # shares GPU 1 with the host, 4-CPU quota
        assert "SHARED" in bert and "THR " in bert and "IDLE" not in bert
        assert "SHARED" in _row(lines, "▼ host ")  # the host's side of GPU 1
        header = _row(lines, "NAME")
        assert "FLAGS" in header
        # Badges never write into the column after FLAGS (a group row included): OWNER, shown
        # where it fits (the demo names its containers' owners), else IMAGE.
        after = next((h for h in ("OWNER", "IMAGE") if h in header), None)
        if after is not None:
            column_at = header.index(after)
            assert _row(lines, "▼ host ")[column_at - 1] == " "
            assert _row(lines, "▼ bert ")[column_at - 1] == " "
            if size[0] >= 120:  # the owners are on their rows, after whole badges
                assert _row(lines, "▼ bert ")[column_at:].split()[0] == "bob"
                assert _row(lines, "  notebook-gp")[column_at:].split()[0] == "dave"
        # Whole badges: never a cut one.
        assert "SHARE…" not in "\n".join(lines) and "[s" not in "\n".join(lines)


def test_layout_keeps_badges_and_a_command_at_every_width() -> None:
    for width in range(30, 260):
        for flags in (0, 6, 14, 28):
            layout = tl.tree_layout(width, flags)
            assert layout.flags == min(flags, tl.FLAGS_MAX, layout.tail or 0)
            if width >= 76:  # an 80-column terminal's tree
                assert layout.flags == min(flags, tl.FLAGS_MAX) or flags > 27
                assert (layout.tail or 0) >= tl.MIN_TAIL
            header = tl.header_text(layout)
            if width >= 56:  # narrower, the name, status, GPU and SM columns alone are wider
                assert len(header) <= width + tl.EXPANDER_WIDTH, (width, flags, header)


def test_one_size_formatter_no_zero_gib() -> None:
    assert units.size(300 * MIB) == "300MiB"
    assert units.size(int(3.2 * GIB)) == "3.2GiB"
    assert units.size(120 * GIB) == "120GiB"
    small = container(1, "tiny", memory_used_bytes=200 * MIB)
    label = tl.container_label(small, None, None).plain
    assert "200MiB" in label and "0.0GiB" not in label and "0.2GiB" not in label
    text = snapshot_to_text(snapshot(processes=[proc(7, 0, 600, cid(1))], containers=[small]), ())
    assert "600MiB" in text and "0.6GiB" not in text


def test_docker_unreachable_is_unknown_not_not_in_docker() -> None:
    procs = [proc(7, 0, 600, cid(1))]
    stub = replace(container(1, "containerd-0101", procs, known=False), engine_answered=False)
    down = SourceStatus("docker", False, "connection refused", "unreachable")
    snap = replace(snapshot(processes=procs, containers=[stub]), sources={"docker": down})
    text = snapshot_to_text(snap, ())
    assert "not in Docker" not in text and "Docker unreachable: unknown" in text
    label = tl.container_label(stub, 600 * MIB, 30).plain
    assert "CGROUP" not in label and "DOCKER?" in label
    known = replace(stub, engine_answered=True)
    assert "not in Docker" in snapshot_to_text(replace(snap, containers=(known,)), ())
    assert "CGROUP" in tl.container_label(known, 600 * MIB, 30).plain


def test_demo_processes_are_younger_than_their_containers_and_of_several_ages() -> None:
    from gputui.collect.standins import demo

    starts = {c.id: c.started_at for c in demo.DEMO_CONTAINERS}
    ages = set()
    for pid, cid_, *_ in demo.PROCESSES:
        start = demo.process_start(pid, cid_)
        ages.add(start)
        container_start = starts.get(cid_ or "")
        if container_start is not None:
            assert start > container_start, pid
        assert start < demo.DEMO_EPOCH
    assert len(ages) == len(demo.PROCESSES)  # not every process exactly 1h00m


def _seconds(elapsed: str) -> int:
    """An ELAPSED cell back to seconds (``36s``, ``49m``, ``5h58m``, ``1d23h``)."""
    if match := re.fullmatch(r"(\d+)d(\d+)h", elapsed):
        return int(match[1]) * 86400 + int(match[2]) * 3600
    if match := re.fullmatch(r"(\d+)h(\d+)m", elapsed):
        return int(match[1]) * 3600 + int(match[2]) * 60
    if match := re.fullmatch(r"(\d+)m", elapsed):
        return int(match[1]) * 60
    match = re.fullmatch(r"(\d+)s", elapsed)
    assert match, elapsed
    return int(match[1])


def _column(line: str, header: str, title: str) -> str:
    """The right-aligned cell under ``title`` in ``header`` ("" when blank)."""
    end = header.index(title) + len(title)
    return line[end - len(title) - 1 : end].strip()


async def test_demo_screen_shows_no_process_older_than_its_container() -> None:
    """What a newcomer sees: each process's ELAPSED within its container's, ages that differ."""
    app = demo_app(refreshes=5)
    async with app.run_test(size=(200, 60)) as pilot:
        await ready(pilot)
        lines = [line.split("│")[-1] for line in screen_lines(app)]  # the tree, not the GPUs
        header = _row(lines, " NAME ")
        parent: int | None = None
        checked = 0
        for line in lines:
            if "▼ " in line and "host" not in line:
                cell = _column(line, header, "ELAPSED")
                parent = None if cell in ("", "-", "N/A") else _seconds(cell)
            elif ("├─" in line or "└─" in line) and parent is not None:
                child = _seconds(_column(line, header, "ELAPSED"))
                assert child <= parent, line
                checked += 1
        assert checked >= 4  # every containerised demo process was compared
        await pilot.press("2")
        await pilot.pause()
        await pilot.pause()
        lines = [line.split("│")[-1] for line in screen_lines(app)]
        header = _row(lines, " ELAPSED ")
        ages = [
            _column(line, header, "ELAPSED")
            for line in lines[lines.index(header) + 1 :]
            if re.match(r"\s+\d+ ", line)
        ]
        ages = [age for age in ages if age not in ("", "-", "N/A")]
        assert len(ages) >= 6 and len(set(ages)) == len(ages), ages  # not all "1h00m"


def _host_pid(container: object) -> int:
    top = container.top()  # type: ignore[attr-defined]
    column = top["Titles"].index("PID")
    return sorted(int(row[column]) for row in top["Processes"])[0]


async def test_real_containers_badges_at_every_size(
    run_container: Callable[..., Any], free_run_id: str
) -> None:
    """Real containers (NVML a scenario naming their PIDs): idle, shared and throttled badges."""
    from gputui.collect.collector import Collector
    from gputui.collect.docker.source import DockerSource
    from gputui.collect.linux.proc_reader import ProcSource
    from gputui.collect.standins.scenario import ScenarioSource
    from gputui.model.settings import Settings
    from gputui.ui.app import GpuTuiApp

    short = free_run_id[-6:]
    quiet: dict[str, Any] = {"network_mode": "none"}
    one = run_container(["sleep", "300"], name=f"sha-{short}", **quiet)
    two = run_container(["sleep", "300"], name=f"shb-{short}", **quiet)
    idle = run_container(
        ["sleep", "300"],
        name=f"idl-{short}",
        environment={"NVIDIA_VISIBLE_DEVICES": "1"},
        **quiet,
    )
    # A busy loop under a tenth of a CPU: throttled nearly every period.
    hot = run_container(
        ["sh", "-c", "while :; do :; done"], name=f"thr-{short}", nano_cpus=10**8, **quiet
    )
    gpu: dict[str, Any] = {"name": "NVIDIA H200", "memory_total_mib": 143771}
    scenario = {
        "nvml": "ok",
        "gpus": [
            {
                **gpu,
                "index": 0,
                "memory_used_mib": 3000,
                "utilization_gpu": 80,
                "processes": [
                    {"pid": _host_pid(one), "used_memory_mib": 2000, "sm_util": 50},
                    {"pid": _host_pid(two), "used_memory_mib": 1000, "sm_util": 30},
                ],
            },
            {
                **gpu,
                "index": 1,
                "memory_used_mib": 500,
                "utilization_gpu": 5,
                "processes": [{"pid": _host_pid(hot), "used_memory_mib": 500, "sm_util": 5}],
            },
        ],
    }
    collector = Collector(
        ScenarioSource(scenario),
        ProcSource(),
        DockerSource(label=f"gputui-test={free_run_id}"),
        mode="scenario",
        health=None,
    )
    app = GpuTuiApp(collector, Settings(interval=1.0))
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await ready(pilot, tries=500)
            deadline = time.monotonic() + 90
            while True:  # the throttle finding needs a window of CPU periods
                lines = screen_lines(app)
                if any(hot.name in line and "THR " in line for line in lines):
                    break
                assert time.monotonic() < deadline, "\n".join(lines)
                await pilot.pause(0.2)
            for size in SIZES:
                await pilot.resize_terminal(*size)
                await pilot.pause()
                await pilot.pause()
                lines = screen_lines(app)
                rows = {
                    "IDLE": [_row(lines, f"  {idle.name}")],
                    "SHARED": [_row(lines, f"▼ {one.name}"), _row(lines, f"▼ {two.name}")],
                    "THR ": [_row(lines, f"▼ {hot.name}")],
                }
                # Each badge on its own rows, and only there (a badge on every row says nothing).
                for badge in rows:
                    for other, others in rows.items():
                        for row in others:
                            assert (badge in row) is (other == badge), (size, badge, row)
    finally:
        collector.close()


def test_a_group_rows_summary_takes_every_cell_after_its_badges() -> None:
    """With the OWNER column shown, IMAGE may not fit: a group row's one text still runs to the
    tree's edge instead of stopping at OWNER's 12 cells."""
    summary = "1 GPU process outside containers, 2 without GPU use"
    for width in range(60, 200):
        layout = tl.tree_layout(width, 6, owners=True)
        if not layout.owner:
            continue
        line = tl.row(0, [], flags=["SHARED"], layout=layout, texts=[[summary]]).plain
        shown = line.split("SHARED", 1)[1].strip()
        room = (layout.tail or 0) - layout.flags - 1
        assert shown == summary or len(shown) == room, (width, layout, shown)
