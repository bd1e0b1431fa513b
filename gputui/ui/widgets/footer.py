"""The key footer, recomposed at most once per refresh however often the bindings change."""

from __future__ import annotations

from textual.screen import Screen
from textual.widgets import Footer as TextualFooter


class Footer(TextualFooter):
    """Textual's footer, whose recompositions after binding changes are coalesced.

    Textual's footer schedules one full recomposition (every key widget built, bound and
    styled again) per ``bindings_updated`` signal, and a start-up sends several before the next
    refresh (the mount, the focus, the tabs, the first snapshot's key availability): seven
    recompositions of seven keys each before the first frame with data. The recomposition reads
    the bindings as they are when it runs, so one per refresh shows the same keys.
    """

    _recompose_pending = False

    def bindings_changed(self, screen: Screen[object]) -> None:
        """Schedule one recomposition after the next refresh (unless one is already)."""
        self._bindings_ready = True
        if not screen.app.app_focus:
            return
        if self.is_attached and screen is self.screen and not self._recompose_pending:
            self._recompose_pending = True
            self.call_after_refresh(self._recompose_once)

    async def _recompose_once(self) -> None:
        self._recompose_pending = False  # a change from here on schedules its own
        await self.recompose()
