"""The key footer: binding changes before one refresh recompose it once, and it shows the last."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets._footer import FooterKey

from gputui.ui.widgets.footer import Footer


class _CountingFooter(Footer):
    recomposed = 0

    async def recompose(self) -> None:
        type(self).recomposed += 1
        await super().recompose()


class _KeysApp(App[None]):
    BINDINGS = [Binding("k", "kill", "Kill"), Binding("q", "quit", "Quit")]

    def __init__(self) -> None:
        super().__init__()
        self.can_kill = True

    def compose(self) -> ComposeResult:
        yield _CountingFooter()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "kill":
            return True if self.can_kill else None  # None: shown dimmed
        return True

    def action_kill(self) -> None:
        return None


def _kill_key(app: _KeysApp) -> FooterKey:
    return next(key for key in app.query(FooterKey) if key.action == "kill")


async def test_several_binding_changes_before_a_refresh_recompose_once() -> None:
    app = _KeysApp()
    async with app.run_test(size=(80, 5)) as pilot:
        await pilot.pause()
        await pilot.pause()
        assert not _kill_key(app).has_class("-disabled")
        _CountingFooter.recomposed = 0
        for can_kill in (False, True, False):  # three signals within one refresh
            app.can_kill = can_kill
            app.refresh_bindings()
        await pilot.pause()
        await pilot.pause()
        assert _CountingFooter.recomposed == 1
        assert _kill_key(app).has_class("-disabled")  # the state when it recomposed: the last one
        app.can_kill = True  # a later change is recomposed again
        app.refresh_bindings()
        await pilot.pause()
        await pilot.pause()
        assert _CountingFooter.recomposed == 2
        assert not _kill_key(app).has_class("-disabled")
