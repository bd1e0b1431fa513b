"""Who is stealing the GPU, in the TUI: sharing, finding markers, host line, evidence view."""

from __future__ import annotations

from dataclasses import replace

from gputui.model.snapshot import HostStats, Snapshot
from gputui.ui.screens.evidence import EvidenceScreen
from gputui.ui.screens.main import MainScreen
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
from tests.support.pilot import AppFactory, push, ready

HOST = HostStats(
    cpu_percent=38.0,
    cpu_count=224,
    load_avg=(71.2, 69.8, 66.1),
    memory_used_bytes=812 * GIB,
    memory_total_bytes=2048 * GIB,
    swap_used_bytes=0,
    swap_total_bytes=0,
)


def flags(app: object, key: str) -> str:
    """A tree row's label and, as the flags line shows them for it, its markers' whole texts."""
    from gputui.ui.app import GpuTuiApp

    assert isinstance(app, GpuTuiApp)
    tree = app.main.ctree
    node = tree.nodes_by_key[key]
    tree.move_cursor(node)
    app.main.cpane.refresh_flags()
    return f"{node.label}  ||  {app.main.cpane.flags_text}"


def slow_trainer(taken_at: float, periods: int, throttled: int) -> Snapshot:
    """A trainer sharing GPU 0 with the host, CPU-throttled, near its memory limit, OOM-killed
    once and restarted: everything the evidence view has to explain."""
    processes = [
        proc(611, 0, 62_000, cid(1), "python train.py", sm=40),
        proc(900, 0, 38_000, None, "python notebook.py", user="alice", sm=25),
    ]
    trainer = container(
        1,
        "trainer",
        processes,
        cpu_percent=395.0,
        cpu_quota_cpus=4.0,
        cpu_periods=periods,
        cpu_throttled_periods=throttled,
        cpu_throttled_seconds=12.5,
        memory_used_bytes=int(15.5 * GIB),
        memory_limit_bytes=16 * GIB,
        oom_killed=True,
        restart_count=4,
    )
    base = snapshot(taken_at, gpus=[gpu(0, util=97, used_gib=100.0)], processes=processes)
    return replace(base, containers=(trainer,), host_stats=HOST)


async def test_shared_gpu_flagged_in_card_and_tree(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(200, 50)) as pilot:  # the side column: 69-column cards
        await ready(pilot)  # standard(): GPU 0 and GPU 1 each used by several parties
        labels = {k: flags(app, k) for k in (f"c:{cid(1)}", f"c:{cid(2)}", "g:host", "g:orphans")}
        assert all(" SHARED" in label for label in labels.values()), labels
        assert "shared GPU 0: 95%" in labels[f"c:{cid(1)}"]  # trainer-a, 13290 of 14058 MiB
        assert "shared GPU 1: 29%" in labels[f"c:{cid(1)}"]
        assert "shared GPU 1: 57%" in labels[f"c:{cid(2)}"]
        assert "shared GPU 0: 2%" in labels["g:host"]
        assert "shared GPU 1: 14%" in labels["g:orphans"]
        gauges = app.main.gpus.cards[0].gauges
        card = gauges.render().plain.splitlines()[0]
        # Three parties in 69 columns: names shortened (never below 6 cells), on one line.
        assert card.startswith("GPU 0 H200  shared: traine")
        assert "95% SM 30 · cgroup" in card
        assert card.endswith("4% SM 30 · host 2%") or card.endswith("+1")
        assert len(card) <= gauges.size.width


async def test_two_party_card_names_both_with_sm(make_app: AppFactory) -> None:
    app = make_app(FakeCollector([slow_trainer(1.0, 10, 0)]))
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        card = app.main.gpus.cards[0].gauges.render().plain.splitlines()[0]
        assert card == "GPU 0 H200  shared: trainer 62% SM 40 · host 38% SM 25"


async def test_unshared_gpu_has_no_marker(make_app: AppFactory) -> None:
    processes = [proc(10, 0, 1000, cid(1))]
    only = snapshot(processes=processes, containers=[container(1, "solo", processes)])
    app = make_app(FakeCollector([only]))
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        assert "shared" not in str(app.main.ctree.nodes_by_key[f"c:{cid(1)}"].label)
        assert "shared" not in app.main.gpus.cards[0].gauges.render().plain


async def test_compact_gpu_line_marks_sharing(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.pause()
        assert "⇄" in app.main.gpus.cards[0].gauges.render().plain


async def test_findings_become_tree_markers(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(200, 50)) as pilot:
        await ready(pilot)
        await push(pilot, slow_trainer(1_000_100.0, 1000, 100), analyse=True)
        await push(pilot, slow_trainer(1_000_110.0, 1100, 190), analyse=True)  # 90 of 100
        label = flags(app, f"c:{cid(1)}")
        for marker in (
            "SHARED THR 90% OOM MEM 97% +2",  # the badges, in the legend's order
            "shared GPU 0: 62%",
            "CPU throttled 90% over 10 s",
            "mem 97% of limit",
            "OOM-killed",
            "restarts 4",
        ):
            assert marker in label, marker


async def test_idle_reservation_marker_says_how_long(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(200, 50)) as pilot:
        await ready(pilot)  # the collector thread analysed standard() at t = 1_000_000
        await push(pilot, standard(1_000_090.0), analyse=True)
        label = flags(app, f"c:{cid(3)}")
        assert "idle: reserved GPU, no GPU process for 1m" in label
        assert label.count("IDLE") == 1  # the finding replaces the snapshot-only badge


async def test_memory_growth_marks_the_process(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(200, 50)) as pilot:
        await ready(pilot)
        for step in range(5):
            processes = [proc(611, 0, 1000 + 200 * step, cid(1))]
            snap = snapshot(
                3_000_000.0 + 30 * step,
                processes=processes,
                containers=[container(1, "leaky", processes)],
            )
            await push(pilot, snap, analyse=True)
        assert "LEAK" in str(app.main.ctree.nodes_by_key["p:611:0"].label)
        assert "||  GPU mem +400 MiB/min" in flags(app, f"c:{cid(1)}")


async def test_host_line_in_wide_header(make_app: AppFactory) -> None:
    app = make_app(FakeCollector([slow_trainer(1.0, 10, 0)]))
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        first, second = app.main.header.text.split("\n")
        assert "lab-1" in first
        assert (
            second == "host  CPU 38% of 224  load 71.20 69.80 66.10  mem 812GiB/2.0TiB  swap 0B/0B"
        )


async def test_narrow_header_is_one_line(make_app: AppFactory) -> None:
    app = make_app(FakeCollector([slow_trainer(1.0, 10, 0)], mode="demo"), read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.pause()
        text = app.main.header.text
        assert "\n" not in text
        assert len(text) <= 78
        for kept in ("gputui", "0 fail", "DEMO"):
            assert kept in text, text
        assert app.main.header.size.height == 1


async def test_evidence_view_answers_why_slow(make_app: AppFactory) -> None:
    app = make_app(FakeCollector([slow_trainer(1_000_000.0, 1000, 100)]))
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        await push(pilot, slow_trainer(1_000_010.0, 1100, 190), analyse=True)
        assert app.main.ctree.selected is not None
        assert app.main.ctree.selected.key == f"c:{cid(1)}"
        await pilot.press("e")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, EvidenceScreen)
        title = str(screen.title_line.content)
        assert "trainer" in title and "running" in title
        body = str(screen.body.content)
        for fact in (
            "CPU throttled 90% of CPU periods over 10 s at its limit of 4 CPUs",  # finding
            "killed by the kernel's OOM killer",
            "restarted 4 times",
            "PID 611",  # its GPU process
            "60.5GiB",
            "GPU 0  util 97%",
            "trainer (this) 62% of memory",  # shares
            "host 38% of memory",
            "395%  of a 4-CPU quota: 99%",
            # The finding's figure, not the counters since the container started (19 %).
            "throttled   90% of CPU periods over 10 s  (90 of 100 periods)",
            "12.5 s throttled in total",
            "15.5GiB of its 16.0GiB limit (97%)",
            "OOM-killed  yes",
            "restarts    4",
        ):
            assert fact in body, fact
        assert screen.rows["cpu"].values == (395.0, 395.0)
        assert screen.rows["mem"].values[-1] == 15.5 * GIB
        assert str(screen.rows["cpu"].value.content) == "395%  min 395%  max 395%"
        assert str(screen.rows["mem"].value.content) == "15.5GiB  min 15.5GiB  max 15.5GiB"
        # It follows the refreshes while open.
        await push(pilot, slow_trainer(1_000_020.0, 1200, 290), analyse=True)
        assert "95% of CPU periods over 20 s  (190 of 200 periods)" in str(screen.body.content)
        # Keys for the monitor's tabs are not offered here.
        assert app.check_action("sort", ()) is False
        assert app.check_action("filter", ()) is False
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)


async def test_evidence_for_a_gone_container_keeps_the_last_facts(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        await pilot.press("e")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, EvidenceScreen)
        await push(pilot, snapshot(2_000_000.0))
        assert "GONE" in str(screen.title_line.content)
        assert "PID 611" in str(screen.body.content)


async def test_evidence_from_the_process_table_and_without_a_container(
    make_app: AppFactory,
) -> None:
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        await pilot.press("2")
        await pilot.pause()
        table = app.main.table
        keys = table.row_keys()
        table.move_cursor(row=keys.index("900:0"))  # Xorg on the host: no container
        await pilot.pause()
        assert app.check_action("evidence", ()) is None  # shown dimmed: nothing to show
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)
        table.move_cursor(row=keys.index("700:1"))
        await pilot.pause()
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, EvidenceScreen)
        assert app.screen.container_id == cid(2)


#: Throttled periods per 5 s refresh of 50 periods: 10 on average (20 %), bunched as real
#: counters are, so one refresh's ratio alone would read 60 -> 0 -> 20 -> 0 %.
_BURSTS = (30, 0, 10, 0)


async def test_one_throttling_figure_in_finding_marker_and_evidence(make_app: AppFactory) -> None:
    def at(step: int) -> Snapshot:
        throttled = 1_000 + 40 * (step // 4) + sum(_BURSTS[: step % 4])
        return slow_trainer(2_000_000.0 + 5 * step, 5_000 + 50 * step, throttled)

    app = make_app(FakeCollector([at(0)]))
    async with app.run_test(size=(200, 50)) as pilot:
        await ready(pilot)
        badges: list[str] = []
        for step in range(1, 17):
            await push(pilot, at(step), analyse=True)
            analysis = app.main.analysis
            assert analysis is not None
            figure = analysis.throttling[cid(1)]
            (finding,) = [f for f in analysis.findings if f.kind == "cpu_throttled"]
            label = flags(app, f"c:{cid(1)}")
            badge = f"CPU throttled {figure.percent}% over {figure.span}"
            assert f" THR {figure.percent}% " in label and badge in label, (step, label)
            assert f"trainer: CPU {figure.text()} at its limit of 4 CPUs" == finding.summary
            badges.append(badge)
        # A full 60 s window of a steady 20 % throttle: one figure, refresh after refresh.
        assert badges[11:] == ["CPU throttled 20% over 60 s"] * 5
        await pilot.press("e")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, EvidenceScreen)
        body = str(screen.body.content)
        assert "CPU throttled 20% of CPU periods over 60 s at its limit of 4 CPUs" in body
        assert "throttled   20% of CPU periods over 60 s  (120 of 600 periods)" in body
        # No other share of throttled periods anywhere on the screen.
        assert body.count("% of CPU periods") == 2
