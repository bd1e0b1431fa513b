"""Reliability: stale containers in a Docker outage; no write action in read-only."""

from __future__ import annotations

from dataclasses import replace

from rich.style import Style as RichStyle
from textual.pilot import Pilot
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from gputui.model.status import SourceStatus
from gputui.ui.machine_actions import READ_ONLY_REFUSAL
from gputui.ui.styles import MUTED, themed
from gputui.ui.widgets.container_tree import STALE_TEXT
from tests.support.factories import FakeCollector, cid, standard
from tests.support.pilot import AppFactory, node_label, push, ready, screen_lines


async def _settle(pilot: Pilot[None]) -> None:
    await pilot.pause()
    await pilot.pause()


# ------------------------------------------------------------------------ 4. Docker outage


def _outage(taken_at: float) -> object:
    base = standard(taken_at)
    down = SourceStatus(
        "docker", False, "Cannot connect to the Docker daemon", kind="unreachable", fix="start it"
    )
    return replace(base, sources={**base.sources, "docker": down})


async def test_docker_outage_marks_kept_containers_stale(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(160, 40)) as pilot:
        await ready(pilot)
        tree = app.main.ctree
        label = node_label(tree.nodes_by_key[f"c:{cid(1)}"])
        assert STALE_TEXT not in label.plain
        assert "Docker ok" in app.main.header.text

        await push(pilot, _outage(1_000_001.0))  # type: ignore[arg-type]
        header = app.main.header.text
        assert "Docker unreachable" in header, header
        for n in (1, 2, 3):  # GPU users and the idle reservation: the engine's last list
            label = node_label(tree.nodes_by_key[f"c:{cid(n)}"])
            assert STALE_TEXT in label.plain, label.plain
            assert label.style == MUTED, label.style  # the whole line muted
            assert themed(label).style == RichStyle(dim=True)  # drawn dim on every theme
        assert STALE_TEXT in node_label(tree.nodes_by_key["g:others"]).plain
        # Seen in a cgroup, not from the engine: not stale.
        assert STALE_TEXT not in node_label(tree.nodes_by_key[f"c:{cid(5)}"]).plain
        text = "\n".join(screen_lines(app))
        assert STALE_TEXT in text

        await push(pilot, standard(1_000_002.0))  # the engine is back
        for n in (1, 2, 3):
            label = node_label(tree.nodes_by_key[f"c:{cid(n)}"])
            assert STALE_TEXT not in label.plain
            assert label.style != MUTED
        assert STALE_TEXT not in node_label(tree.nodes_by_key["g:others"]).plain
        assert "Docker ok" in app.main.header.text
        assert STALE_TEXT not in "\n".join(screen_lines(app))


# ------------------------------------------------------------------ 5. read-only: no writes


async def test_read_only_offers_no_write_action_anywhere(make_app: AppFactory) -> None:
    collector = FakeCollector(interactive_argv=["docker", "exec", "-it"])
    app = make_app(collector, read_only=True)
    async with app.run_test(size=(160, 40)) as pilot:
        await ready(pilot)
        tree = app.main.ctree
        tree.move_cursor(tree.nodes_by_key["p:611:0"])  # a running process in a container
        await _settle(pilot)
        # The footer as drawn: no x, and the write actions are absent from every binding.
        footer = app.screen.query_one(Footer)
        drawn = {key.key for key in footer.query(FooterKey)}
        assert drawn and "x" not in drawn, drawn
        bound = {b.binding.action for b in app.screen.active_bindings.values()}
        assert not {a for a in bound if a.startswith(("exec_", "signal"))}, bound
        # The palette as typed into: no nvidia-smi, no SIGTERM / SIGKILL.
        await pilot.press("ctrl+p")
        await _settle(pilot)
        assert app.screen.__class__.__name__ == "CommandPalette"
        for query in ("nvidia", "SIG"):
            await pilot.press(*query)
            await pilot.pause(0.3)
            shown = "\n".join(screen_lines(app))
            assert "nvidia-smi in container" not in shown and "SIGKILL" not in shown, shown
            assert "SIGTERM" not in shown
            for _ in query:
                await pilot.press("backspace")
        await pilot.press("escape")
        await _settle(pilot)
        assert app.screen is app.main
        # Invoked directly (a stale binding, a script): each refuses and says why.
        for run in (app.action_exec_smi, app.action_exec_interactive, lambda: app.action_signal(9)):
            app.clear_notifications()
            run()
            await _settle(pilot)
            assert app.screen is app.main
            assert [n.message for n in app._notifications] == [READ_ONLY_REFUSAL]
        await app.run_action("signal(15)")
        await _settle(pilot)
        assert app.screen is app.main
        assert collector.exec_calls == []
        assert collector.signals == []
