"""Beyond one screen, in the TUI: alerts (header, toasts, bell, Alerts tab) and replay keys."""

from __future__ import annotations

from pathlib import Path

from gputui.config.file import load_config
from gputui.derive.alerts import Alert, AlertPhase, AlertRule
from gputui.derive.analysis import Analysis, Analyzer
from gputui.model.settings import Settings
from gputui.model.snapshot import Snapshot
from gputui.model.status import AlertSeverity
from gputui.recording.player import ReplayCollector
from gputui.ui.app import GpuTuiApp
from gputui.ui.messages import SnapshotReady
from tests.support.factories import FakeCollector, gpu, snapshot, standard
from tests.support.pilot import AppFactory, push, ready

HOT_RULE = """
[alerts]
defaults = false

[[alerts.rules]]
id = "util-hot"
metric = "gpu_util"
threshold = 70
for = "20s"
severity = "critical"
"""


def hot(taken_at: float, util: int) -> Snapshot:
    return snapshot(taken_at, gpus=[gpu(0, util=util)])


def write_config(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(HOT_RULE, encoding="utf-8")
    return path


async def test_alert_firing_reaches_header_toast_bell_and_tab(
    make_app: AppFactory, tmp_path: Path
) -> None:
    app = make_app(FakeCollector([hot(1000.0, 50)]), config=write_config(tmp_path), bell=True)
    bells: list[int] = []
    app.bell = lambda: bells.append(1)  # type: ignore[method-assign]
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        await push(pilot, hot(1010.0, 90), analyse=True)  # pending: holds for 0 of 20 s
        assert "1 pending" in app.main.header.text
        assert not bells
        await push(pilot, hot(1040.0, 95), analyse=True)  # held 30 s: firing
        assert "⚠ 1 alert firing (critical)" in app.main.header.text
        assert any(
            "util-hot" in (n.title or "") and "gpu0: gpu_util 95%" in n.message
            for n in app._notifications
        )
        assert bells == [1]
        assert app.main.alerts_title == "Alerts ⚠ 1"
        await pilot.press("5")
        await pilot.pause()
        assert app.main.active_tab == "alerts"
        panel = app.main.alerts
        assert panel.active.keys() == ["util-hot|gpu0"]
        row = panel.active.get_row("util-hot|gpu0")
        assert [str(c) for c in row[:4]] == ["firing", "critical", "util-hot", "gpu0"]
        assert "1 firing" in str(panel.summary.content)
        assert len(panel.history.keys()) == 1
        # Still firing on the next refresh: no second toast, no second bell.
        count = len(app._notifications)
        await push(pilot, hot(1050.0, 96), analyse=True)
        assert len(app._notifications) == count
        assert bells == [1]
        # Resolved: gone from the header and the active table, a second history row, newest first.
        await push(pilot, hot(1060.0, 10), analyse=True)
        assert "firing" not in app.main.header.text
        assert panel.active.keys() == []
        history = panel.history.keys()
        assert len(history) == 2
        assert "|resolved|" in history[0]
        assert str(panel.history.get_row(history[0])[1]) == "resolved"
        assert app.main.alerts_title == "Alerts"


async def test_default_rules_without_a_config_file(make_app: AppFactory) -> None:
    app = make_app()
    assert [r.id for r in app.analyzer.rules] == [
        "gpu-util-high",
        "gpu-memory-high",
        "gpu-temperature-high",
    ]


async def test_the_app_takes_the_loaded_config_and_never_reads_the_file(tmp_path: Path) -> None:
    # The command line loads the file once (a bad one stops it there) and hands it over: what
    # the file says by the time the monitor starts changes nothing.
    path = write_config(tmp_path)
    config = load_config(path)
    path.write_text("[alerts\n", encoding="utf-8")  # no longer valid TOML
    app = GpuTuiApp(FakeCollector(), Settings(interval=60.0, config=path), config=config)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert [r.id for r in app.analyzer.rules] == ["util-hot"]
        assert not [n for n in app._notifications if n.severity == "error"]


def test_a_replaced_snapshot_hands_its_new_alerts_on() -> None:
    alert = Alert(
        "r", "gpu0", AlertPhase.FIRING, 95.0, 70.0, 1.0, 1.0, severity=AlertSeverity.CRITICAL
    )
    older = SnapshotReady(standard(1.0), Analysis(standard(1.0), started=(alert,)))
    newer = SnapshotReady(standard(2.0))
    assert older.can_replace(newer)
    assert newer.analysis.started == (alert,)


def test_analyzer_announces_once_and_restarts_when_time_goes_back() -> None:
    rule = AlertRule("hot", "gpu_util", threshold=70.0)
    analyzer = Analyzer([rule])
    first = standard(100.0, util=90)
    once = analyzer.analyse(first)
    assert [a.rule for a in once.started] == ["hot"]
    again = analyzer.analyse(first)  # the same object: no double feeding, nothing new
    assert again.findings == once.findings
    assert again.started == ()
    assert analyzer.analyse(standard(150.0, util=90)).started == ()
    later = analyzer.analyse(standard(200.0))
    idle = [f for f in later.findings if f.kind == "idle_reservation"]
    assert idle and idle[0].figure("idle_seconds") == 100.0
    earlier = analyzer.analyse(standard(50.0))  # a replay seeking back
    idle = [f for f in earlier.findings if f.kind == "idle_reservation"]
    assert idle and idle[0].figure("idle_seconds") == 0.0


# -- replay ----------------------------------------------------------------------------------


def recording(count: int = 20, step: float = 10.0) -> list[Snapshot]:
    return [standard(1_800_000_000.0 + step * i, util=10 + i) for i in range(count)]


async def test_replay_header_and_keys(make_app: AppFactory) -> None:
    player = ReplayCollector(recording(), source="test")
    app = make_app(player, read_only=True)
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        header = app.main.header.text
        assert "REPLAY" in header
        assert "1/20 2027-01-15 08:00:00Z" in header
        assert "READ-ONLY" not in header  # a replay is read-only anyway
        for action in ("replay_step", "replay_seek"):
            assert app.check_action(action, ()) is True

        async def at(index: int) -> None:
            for _ in range(100):
                if app.main.snapshot is not None and f" {index + 1}/20 " in app.main.header.text:
                    return
                await pilot.pause(0.02)
            raise AssertionError(app.main.header.text)

        await pilot.press("full_stop")  # step: pauses the player there
        await at(1)
        assert player.paused and player.position == 1
        assert app.main.snapshot is not None
        assert app.main.snapshot.taken_at == 1_800_000_010.0
        await pilot.press("greater_than_sign")  # +60 s
        await at(7)
        await pilot.press("right_square_bracket")
        await at(13)
        await pilot.press("comma")
        await at(12)
        await pilot.press("less_than_sign")  # -60 s: back in time, history restarts
        await at(6)
        assert app.history.last_time == 1_800_000_060.0
        await pilot.press("left_square_bracket", "left_square_bracket")  # clamped at the start
        await at(0)
        assert player.position == 0
        await pilot.press("p")  # stepping paused the player; p plays on
        assert not player.paused
        assert "PAUSED" not in app.main.header.text
        await at(1)  # resuming wakes the collector thread, which advances one snapshot
        await pilot.press("p")
        assert player.paused
        assert "PAUSED" in app.main.header.text


async def test_replay_keys_hidden_outside_replay(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        for action in ("replay_step", "replay_seek"):
            assert app.check_action(action, ()) is False
        await pilot.press("full_stop")
        await pilot.pause()
        assert "REPLAY" not in app.main.header.text
        footer_keys = {b.binding.action for b in app.active_bindings.values()}
        assert "replay_step(1)" not in footer_keys
        commands = [c.title for c in app.get_system_commands(app.screen)]
        assert not any(title.startswith("Replay") for title in commands)
        assert "Evidence" in commands
