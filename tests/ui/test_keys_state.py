"""Keys act only where they mean something, and the screen says what state it is in.

Each test is one seen defect: typed text running commands after a quick ``1/``, the drill-down
calling a dialog read-only, ``w`` while paused, keys behind the "terminal too small" message,
a silent container's logs "opening…" forever, "1 lines", lost indentation of wrapped lines, the
header's marks without a legend, ``+`` / ``-`` named by different things.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from textual import events
from textual.app import App
from textual.content import Content
from textual.pilot import Pilot

from gputui.collect.docker.source import DockerSource
from gputui.derive.history import window_label
from gputui.ui.app import GpuTuiApp
from gputui.ui.messages import SelectionChanged, SnapshotReady
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.evidence import EvidenceScreen
from gputui.ui.screens.help import HelpScreen
from gputui.ui.screens.logs import LogsScreen
from gputui.ui.screens.process_detail import ProcessDetailScreen
from tests.support.factories import cid, standard
from tests.support.pilot import current_screen, ready, screen_lines

AppFactory = Callable[..., GpuTuiApp]


def _messages(app: GpuTuiApp) -> list[str]:
    return [n.message for n in app._notifications]


async def _until(pilot: Pilot[Any], check: Callable[[], object], what: str, s: float = 20) -> None:
    deadline = time.monotonic() + s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


async def test_x_on_the_users_tab_says_where_it_acts(make_app: AppFactory) -> None:
    """The Users tab has no container selection: no "select a container first" there."""
    app = make_app()
    async with app.run_test(size=(120, 30), notifications=True) as pilot:
        await ready(pilot)
        await pilot.press("6")
        await pilot.pause()
        assert app.main.active_tab == "users"
        await pilot.press("x")
        await pilot.pause()
        said = _messages(app)[-1]
        assert "select a container" not in said
        assert "it acts on the Containers or Processes tab; press 1 or 2 first" in said


@pytest.mark.parametrize("tab", ["3", "4", "5"])
async def test_s_and_slash_act_only_where_something_sorts_or_filters(
    make_app: AppFactory, tab: str
) -> None:
    """On Health, History and Alerts: no hidden re-sort (nor a saved one), no jump to a filter."""
    app = make_app()
    async with app.run_test(size=(120, 30), notifications=True) as pilot:
        await ready(pilot)
        await pilot.press(tab)
        await pilot.pause()
        shown = app.main.active_tab
        before = (app.main.table.sort_index, app.main.table.reverse, app.main.ctree.sort_index)
        await pilot.press("s", "S")
        await pilot.pause()
        after = (app.main.table.sort_index, app.main.table.reverse, app.main.ctree.sort_index)
        assert after == before
        assert app.prefs.sort is None  # nothing remembered
        assert "has nothing to sort" in _messages(app)[-1]
        # The footer shows s dimmed here (it says the key does nothing on this tab).
        assert app.screen.active_bindings["s"].enabled is False
        await pilot.press("slash")
        await pilot.pause()
        assert app.main.active_tab == shown
        assert not app.main.filter_input.display
        assert "has no filter" in _messages(app)[-1]
        # Where something sorts, s still does.
        await pilot.press("2", "s")
        await pilot.pause()
        assert app.main.table.sort_index == 1
        assert app.prefs.sort == "sm"


async def test_typing_right_after_1_slash_goes_to_the_filter(make_app: AppFactory) -> None:
    """``1`` then ``/`` at once: the tab's activation must not take the focus from the filter."""
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await ready(pilot)
        await pilot.press("2", "slash", "x", "enter")  # a filter used on the Processes tab
        await pilot.pause()
        # One burst, as a fast typist's keys reach the app: all queued before any is handled,
        # so the tab's activation message comes after the filter was opened.
        driver = app._driver
        assert driver is not None
        for key, char in (("1", "1"), ("slash", "/"), ("e", "e"), ("r", "r")):
            event = events.Key(key, char)
            event.set_sender(app)
            driver.send_message(event)  # as the terminal driver delivers them, no wait between
        for _ in range(5):
            await pilot.pause()
        assert app.main.active_tab == "containers"
        assert current_screen(app) is app.main  # "e" did not open the evidence view
        assert app.collector.health_requests == 0  # type: ignore[attr-defined]  # nor "r"
        assert app.main.cpane.filter_input.has_focus
        assert app.main.cpane.filter_input.value == "er"


async def test_the_drill_down_is_not_read_only_under_a_dialog(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("1")
        await pilot.pause()
        tree = app.main.ctree
        tree.move_cursor(tree.nodes_by_key["p:612:1"])
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        detail = current_screen(app)
        assert isinstance(detail, ProcessDetailScreen)
        await pilot.press("T")
        await pilot.pause()
        assert isinstance(current_screen(app), ConfirmScreen)
        # Refreshes arrive while the dialog is open: the drill-down redraws under it.
        for _ in range(3):
            app.post_message(_ready_for(app))
            await pilot.pause()
        assert "read-only" not in str(detail.keys_line.content)
        await pilot.press("n")
        await pilot.pause()
        back = current_screen(app)
        assert isinstance(back, ProcessDetailScreen)
        assert "T SIGTERM  K SIGKILL" in str(back.keys_line.content)


def _ready_for(app: GpuTuiApp) -> SnapshotReady:
    fresh = standard(taken_at=1_000_100.0)
    return SnapshotReady(fresh, app.analyzer.analyse(fresh))


async def test_w_while_paused_changes_the_chart(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("4", "p")
        await pilot.pause()
        assert app.paused
        before = window_label(app.window)
        assert before in str(app.main.history_panel.title_label.content)
        await pilot.press("w")
        await pilot.pause()
        after = window_label(app.window)
        assert after != before
        assert after in str(app.main.history_panel.title_label.content)
        # A hidden tab is caught up when shown (it too is drawn for the new window).
        await pilot.press("1", "w", "4")
        await pilot.pause()
        assert window_label(app.window) in str(app.main.history_panel.title_label.content)


async def test_no_key_acts_behind_the_too_small_message(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(30, 10)) as pilot:
        await ready(pilot)
        assert app.main.has_class("-too-small")
        cursor = app.main.ctree.cursor_line
        await pilot.press("2", "p", "tab", "down", "d", "question_mark")
        await pilot.pause()
        assert app.main.active_tab == "containers"
        assert not app.paused
        assert app.main.ctree.cursor_line == cursor
        assert current_screen(app) is app.main
        assert app.current_theme.dark  # d did not switch to light
        await pilot.resize_terminal(120, 30)
        await pilot.pause()
        await pilot.pause()
        assert not app.main.has_class("-too-small")
        await pilot.press("2")
        await pilot.pause()
        assert app.main.active_tab == "processes"  # keys act again


class _LogsApp(App[None]):
    def __init__(self, source: DockerSource, container_id: str) -> None:
        super().__init__()
        self.logs = LogsScreen(
            "silent",
            "gputui-test · running",
            lambda: source.open_logs(container_id, tail=100, follow=True),
            follow=True,
        )

    def on_mount(self) -> None:
        self.push_screen(self.logs)


def _status(app: _LogsApp) -> str:
    return str(app.logs.query_one("#logs-status").render())


async def test_logs_of_a_silent_container_say_following_and_one_line_is_one_line(
    run_container: Callable[..., Any], free_run_id: str
) -> None:
    source = DockerSource(label=f"gputui-test={free_run_id}")
    silent = run_container(["sleep", "600"], name=f"logs-silent-{free_run_id}", network_mode="none")
    app = _LogsApp(source, silent.id)
    try:
        async with app.run_test(size=(100, 20)) as pilot:
            await _until(pilot, lambda: "following" in _status(app), "the stream to open")
            assert "following · no output yet" in _status(app)
            assert "opening" not in _status(app)
    finally:
        source.close()
    source = DockerSource(label=f"gputui-test={free_run_id}")
    talker = run_container(
        ["sh", "-c", "echo hello; exec sleep 600"],
        name=f"logs-one-{free_run_id}",
        network_mode="none",
    )
    app = _LogsApp(source, talker.id)
    try:
        async with app.run_test(size=(100, 20)) as pilot:
            await _until(pilot, lambda: len(app.logs.view.lines) == 1, "the one line")
            await pilot.pause()
            assert "· 1 line ·" in _status(app)
    finally:
        source.close()


def test_a_wrapped_line_keeps_its_indentation() -> None:
    from gputui.ui.widgets.hanging import HANG, hanging

    line = Content("  image       " + "registry.example/team/" * 6)
    lines = hanging(line, 40).plain.split("\n")
    assert len(lines) > 1
    assert all(len(x) <= 40 for x in lines)
    assert all(x.startswith(" " * (2 + HANG)) and x[2 + HANG] != " " for x in lines[1:])
    assert "".join(x.strip() for x in lines) == line.plain.replace(" ", "")
    assert hanging(Content("short\n  also short"), 40).plain == "short\n  also short"


async def test_evidence_wraps_under_its_indentation_at_80x24(make_app: AppFactory) -> None:
    """The drill-down's Parents use the same widget (its body is a HangingStatic too)."""
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        tree = app.main.ctree
        tree.move_cursor(tree.nodes_by_key[f"c:{cid(1)}"])
        await pilot.pause()
        await pilot.press("e")
        await pilot.pause()
        await pilot.pause()
        assert isinstance(current_screen(app), EvidenceScreen)
        rows = screen_lines(app)
        at = next(i for i, row in enumerate(rows) if "shared: trainer-a (this)" in row)
        indent = len(rows[at]) - len(rows[at].lstrip())
        follow = rows[at + 1]
        assert "of memory" in follow  # the same fact, wrapped
        assert len(follow) - len(follow.lstrip()) >= indent + 2  # hanging.HANG


async def test_the_help_has_a_legend_and_names_refresh_keys_by_speed(
    make_app: AppFactory,
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 60)) as pilot:
        await ready(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        helped = current_screen(app)
        assert isinstance(helped, HelpScreen)
        texts = dict(helped.rows)
        assert texts["+/="].startswith("Slower refresh")
        assert texts["-"].startswith("Faster refresh")
        legend = str(helped.query_one("#help-screen-legend").render())
        assert "⇄" in legend and "N pending" in legend
        # The binding ids [keys] takes are listed (the README says so).
        ids = str(helped.query_one("#help-binding-ids").render())
        assert "exec-smi" in ids and "tab.health" in ids


async def test_a_selection_message_left_queued_at_exit_is_ignored(make_app: AppFactory) -> None:
    # Seen in a loaded run: the tree posted SelectionChanged while the app was closing, and
    # by the time it was handled the screens were popped; asking which keys apply raised
    # ScreenStackError out of the app's teardown.
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
    assert not app.screen_stack
    app.on_selection_changed(SelectionChanged())  # the late message: no screen, no error
