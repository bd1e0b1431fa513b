"""A container's logs (``l``): the last lines, then new ones as they come; search, timestamps.

The stream is read on a daemon thread (a Textual thread worker would hold the app's exit until
the engine closes the stream, and a quiet container's stream stays open for hours); it hands
lines over through a buffer bounded in lines and bytes and one pending message at a time.

The work per UI frame is bounded too: one handler call sanitises and measures at most
:data:`FRAME_BYTES` of lines, and what is left waits for the next frame (:data:`FRAME_S`
later), so keys are answered between them. A container printing faster than that (8 KiB lines
in a loop, ``cat`` of a binary) fills the buffer, whose oldest lines are then dropped and
counted ("N lines skipped" on the status line): the screen shows the newest output, late by at
most the buffer, never minutes behind. Closing the screen closes the stream's socket, which
ends the thread. Every line passes through :func:`~gputui.boundary.sanitise.safe_text` once, when it
is shown: escape sequences, control, bidi and zero-width characters never reach the terminal.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.content import Content
from textual.geometry import Size
from textual.message import Message
from textual.screen import Screen
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Footer, Input, Static

from gputui.boundary import sanitise
from gputui.collect.docker.logs import (
    MAX_LINE_BYTES,
    MAX_PENDING_BYTES,
    MAX_PENDING_LINES,
    LogLine,
    LogReader,
    LogStreamError,
    PendingLines,
)
from gputui.model.records import record
from gputui.ui.widgets.crumbs import Breadcrumbs

#: Characters of one line shown (a cut line says so after them).
MAX_SHOWN_CHARS = MAX_LINE_BYTES
#: Characters the view keeps in all (besides its line bound): 512 lines of the longest kind,
#: at most 16 MiB of text even when every character needs two bytes.
MAX_VIEW_CHARS = 8 << 20
#: Bytes of lines one handler call sanitises and measures: the worst case (8 KiB lines of
#: binary noise, ~0.4 µs a byte through safe_text and cell_len) is ~12 ms of one core.
FRAME_BYTES = 32 << 10
#: Seconds between two handler calls while lines wait: the input and the repaint run between.
FRAME_S = 1 / 30
_STDERR_MARK = Style(color="red", bold=True)
_TIME_STYLE = Style(dim=True)
_CUT_STYLE = Style(italic=True, dim=True)
_MATCH_STYLE = Style(color="black", bgcolor="yellow")
_CURRENT_STYLE = Style(color="black", bgcolor="bright_cyan", bold=True)

#: Opens the stream (blocking; called on the reader thread).
LogOpener = Callable[[], LogReader]


@record
class ShownLine:
    """A log line as shown: sanitised once, on arrival.

    Attributes:
        stderr: Written to standard error (marked in the left column).
        text: The sanitised text.
        timestamp: ``YYYY-MM-DD HH:MM:SS.mmm`` (UTC, as the engine stamps it), or empty.
        cut: The line was longer than gputui keeps.
    """

    stderr: bool
    text: str
    timestamp: str
    cut: bool


def shown_line(line: LogLine) -> ShownLine:
    """Sanitise one line for the screen (tabs expanded first: safe_text makes a tab a space)."""
    text = sanitise.safe_text(line.text.expandtabs(8), MAX_SHOWN_CHARS, na="")
    return ShownLine(line.stream == "stderr", text, short_time(line.timestamp), line.cut)


def short_time(timestamp: str | None) -> str:
    """``2026-11-30T17:26:40.686858555Z`` as ``2026-11-30 17:26:40.686``; empty for None.

    Always milliseconds, so the texts line up (the engine drops trailing zeros: ``…:01Z``).
    """
    if not timestamp:
        return ""
    date, _, clock = timestamp.partition("T")
    seconds, dot, rest = clock[:8], clock[8:9], clock[9:]
    fraction = rest[: len(rest) - len(rest.lstrip("0123456789"))] if dot == "." else ""
    return sanitise.safe_text(f"{date} {seconds}.{(fraction + '000')[:3]}", 30, na="")


class LogView(ScrollView, can_focus=True):
    """The lines, virtual: only the rows on screen are rendered, whatever the buffer holds.

    Attributes:
        lines: The lines kept, oldest first (at most ``max_lines``).
        follow: Keep the newest line in view as lines arrive.
        timestamps: Show each line's time.
        pattern: The search text (case-insensitive), empty for none.
        current: Index of the line of the current match, None for none.
    """

    DEFAULT_CSS = """
    LogView { height: 1fr; }
    """

    BINDINGS = [
        Binding("j", "scroll_down", "Down", show=False),
        Binding("k", "scroll_up", "Up", show=False),
    ]

    def __init__(
        self,
        max_lines: int = MAX_PENDING_LINES,
        *,
        max_chars: int = MAX_VIEW_CHARS,
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self.lines: deque[ShownLine] = deque()
        self.max_lines = max(1, max_lines)
        self.max_chars = max(1, max_chars)
        self._chars = 0
        self.follow = True
        self.timestamps = True
        self.pattern = ""
        self.current: int | None = None
        self._width = 0
        self.dropped = 0

    # ---------------------------------------------------------------------- content

    def add(self, lines: list[ShownLine]) -> None:
        """Append lines (the oldest beyond the bound go), keeping the view where it was."""
        if not lines:
            return
        self.lines.extend(lines)
        self._chars += sum(len(line.text) for line in lines)
        dropped = 0
        while len(self.lines) > self.max_lines or (
            self._chars > self.max_chars and len(self.lines) > 1
        ):
            self._chars -= len(self.lines.popleft().text)
            dropped += 1
        self.dropped += dropped
        self._width = max(self._width, *(self._cells(line) for line in lines))
        self._resize()
        if dropped and self.current is not None:
            self.current = self.current - dropped if self.current >= dropped else None
        if self.follow:
            # After the next refresh: the first lines can arrive before the view has a size.
            self.scroll_end(animate=False, x_axis=False)
        elif dropped:
            self.scroll_to(y=max(0, self.scroll_y - dropped), animate=False, immediate=True)
        self.refresh()

    def on_resize(self) -> None:
        """A following view keeps the newest line in view when the terminal changes size."""
        if self.follow:
            self.scroll_end(animate=False, x_axis=False)

    def _cells(self, line: ShownLine) -> int:
        width = 2 + cell_len(line.text) + (6 if line.cut else 0)
        return width + (len(line.timestamp) + 1 if self.timestamps else 0)

    def _resize(self) -> None:
        self.virtual_size = Size(self._width, len(self.lines))

    def set_timestamps(self, shown: bool) -> None:
        """Show or hide the times (the width is measured again)."""
        self.timestamps = shown
        self._width = max((self._cells(line) for line in self.lines), default=0)
        self._resize()
        self.refresh()

    # The user scrolling towards older lines stops following (as ``less +F`` does).

    class Unfollowed(Message):
        """The user scrolled back: the view no longer follows new lines."""

    def _unfollow(self) -> None:
        if self.follow:
            self.follow = False
            self.post_message(self.Unfollowed())

    def action_scroll_up(self) -> None:
        """One line up (stops following)."""
        self._unfollow()
        super().action_scroll_up()

    def action_page_up(self) -> None:
        """One page up (stops following)."""
        self._unfollow()
        super().action_page_up()

    def action_scroll_home(self) -> None:
        """The oldest line (stops following)."""
        self._unfollow()
        super().action_scroll_home()

    # ----------------------------------------------------------------------- search

    def search(self, pattern: str, forward: bool = True, *, from_top: bool = False) -> bool:
        """Move to the next (or previous) line containing ``pattern``, wrapping around.

        Args:
            pattern: Text to find, case-insensitive; empty clears the search.
            forward: Search towards newer lines.
            from_top: Start at the first line on screen rather than after the current match.

        Returns:
            True when a line matched.
        """
        self.pattern = pattern
        if not pattern or not self.lines:
            self.current = None
            self.refresh()
            return False
        needle = pattern.casefold()
        count = len(self.lines)
        if from_top or self.current is None:
            first = min(int(self.scroll_y), count - 1)
        else:
            first = self.current + (1 if forward else -1)
        for offset in range(count):
            index = (first + offset if forward else first - offset) % count
            if needle in self.lines[index].text.casefold():
                self.current = index
                self.follow = False
                self._show_index(index)
                self.refresh()
                return True
        self.current = None
        self.refresh()
        return False

    def _show_index(self, index: int) -> None:
        height = max(1, self.scrollable_content_region.height)
        if not self.scroll_y <= index < self.scroll_y + height:
            self.scroll_to(y=max(0, index - height // 2), animate=False, immediate=True)

    # -------------------------------------------------------------------- rendering

    def line_text(self, index: int, chars: int | None = None) -> Text:
        """One line as shown: the stderr mark, the time, the text, search matches marked.

        Args:
            index: The line's index in :attr:`lines`.
            chars: Characters of the line's text to include, None for all of it (a row on
                screen needs only those up to its right edge).
        """
        line = self.lines[index]
        text = Text(no_wrap=True, end="")
        text.append("▌ " if line.stderr else "  ", _STDERR_MARK if line.stderr else None)
        if self.timestamps and line.timestamp:
            text.append(line.timestamp + " ", _TIME_STYLE)
        start = len(text)
        whole = chars is None or chars >= len(line.text)
        text.append(line.text if whole else line.text[:chars])
        if line.cut and whole:
            text.append(" (cut)", _CUT_STYLE)
        if self.pattern:
            style = _CURRENT_STYLE if index == self.current else _MATCH_STYLE
            haystack, needle = line.text.casefold(), self.pattern.casefold()
            # casefold can change lengths (ß -> ss): only mark when offsets still line up.
            if len(haystack) == len(line.text):
                at = haystack.find(needle)
                while at >= 0:
                    text.stylize(style, start + at, start + at + len(needle))
                    at = haystack.find(needle, at + max(1, len(needle)))
        return text

    def render_line(self, y: int) -> Strip:
        """The row ``y`` of the widget."""
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.scrollable_content_region.width
        style = self.rich_style
        if index >= len(self.lines):
            return Strip.blank(width, style)
        # Only the characters up to the right edge are rendered: an 8 KiB line of wide or
        # combining characters costs ~5 ms to render whole, for the 100 cells shown. Every
        # character takes one or two cells but combining marks none, hence the margin.
        text = self.line_text(index, 2 * (scroll_x + width) + 64)
        strip = Strip(text.render(self.app.console), text.cell_len)
        return strip.crop_extend(scroll_x, scroll_x + width, style).apply_style(style)

    def plain_lines(self) -> list[str]:
        """Every kept line as shown (without styles), for tests and copying."""
        return [self.line_text(i).plain for i in range(len(self.lines))]


class LogsScreen(Screen[None]):
    """One container's logs, read on a thread while the screen is open.

    Args:
        title: The container's name (already safe).
        subtitle: Its image and state (already safe).
        opener: Opens the stream (called on the reader thread).
        follow: The container runs: new lines keep coming (else the stream ends after the tail).
        max_lines: Lines kept on screen.
        crumbs: Where it was opened from: the tab, the container, ``Logs``.
    """

    DEFAULT_CSS = """
    LogsScreen #logs-title { height: 1; padding: 0 1; background: $panel; }
    LogsScreen #logs-status { height: 1; padding: 0 1; color: $text-muted; }
    LogsScreen #logs-search { dock: bottom; display: none; }
    LogsScreen #logs-search.-open { display: block; }
    """

    BINDINGS = [
        Binding("escape,q", "close", "Close"),
        Binding("slash", "open_search", "Search", key_display="/"),
        Binding("n", "search_next(True)", "Next"),
        Binding("N", "search_next(False)", "Previous", show=False),
        Binding("t", "toggle_timestamps", "Times"),
        Binding("f", "toggle_follow", "Follow"),
        Binding("g", "top", "Top", show=False),
        Binding("G", "bottom", "Bottom", show=False),
    ]

    class Arrived(Message):
        """Lines are waiting in the screen's buffer (at most one such message is pending)."""

    class Opened(Message):
        """The stream is open: the status line stops saying "opening…" (lines may never come)."""

    class Ended(Message):
        """The stream ended (the container stopped, or the tail was all), or failed.

        Attributes:
            error: Why it failed; None when it simply ended.
        """

        def __init__(self, error: str | None) -> None:
            super().__init__()
            self.error = error

    def __init__(
        self,
        title: str,
        subtitle: str,
        opener: LogOpener,
        *,
        follow: bool,
        max_lines: int = MAX_PENDING_LINES,
        crumbs: Sequence[str] = (),
    ) -> None:
        super().__init__()
        #: Where it was opened from: the tab, the container, ``Logs`` (one line on top).
        self.crumbs = Breadcrumbs(crumbs, id="logs-crumbs")
        self.title_text = title
        self.subtitle = subtitle
        self.opener = opener
        self.following_stream = follow
        self.view = LogView(max_lines, id="logs-view")
        self.ended = False
        self.error: str | None = None
        self.tty = False
        self._lock = threading.Lock()
        self._pending = PendingLines(max_lines, MAX_PENDING_BYTES)
        self._posted = False
        self._timer_due = False  # a drain is scheduled for the next frame
        #: Lines dropped before they were shown (they came faster than the screen shows).
        self.skipped = 0
        self._closing = False
        self._reader: LogReader | None = None
        #: Set on the UI thread once the stream is open (the reader itself is the thread's).
        self.opened = False
        self._thread: threading.Thread | None = None

    def compose(self) -> ComposeResult:
        """Path, title, the lines, a status line, the search box (hidden) and the keys."""
        yield self.crumbs
        yield Static(self._title(), id="logs-title")
        yield self.view
        yield Static(self._status(), id="logs-status")
        yield Input(placeholder="search (Enter finds, Esc cancels)", id="logs-search")
        yield Footer()

    def _title(self) -> Content:
        return Content.assemble(
            ("Logs ", "bold"),
            (self.title_text, "bold $accent"),
            ("  ", ""),
            (self.subtitle, "$text-muted"),
        )

    def _status(self) -> Content:
        view = self.view
        shown = len(view.lines)
        if shown == 0 and self.opened and not view.dropped and not self.skipped:
            count = "no output" if self.ended else "no output yet"
        else:
            count = f"{shown:,} line{'' if shown == 1 else 's'}"
        notes = [f"the oldest {view.dropped:,} dropped"] if view.dropped else []
        if self.skipped:
            notes.append(f"{self.skipped:,} skipped: too fast to show")
        if notes:
            count += f" ({'; '.join(notes)})"
        if self.error is not None:
            state: tuple[str, str] = (f"stream failed: {self.error}", "$text-error")
        elif self.ended:
            state = ("stream ended", "$text-warning")
        elif not self.opened:
            state = ("opening…", "$text-warning")
        elif not self.following_stream:
            state = ("reading…", "$text-warning")
        else:
            state = ("following" if view.follow else "paused (f follows)", "$text-success")
        parts: list[tuple[str, str]] = [state, (f" · {count} · ", "")]
        if self.tty:
            parts.append(("TTY: stdout and stderr are one stream", ""))
        else:
            parts += [("▌", "bold $text-error"), (" stderr", "")]
        if view.pattern:
            found = "no match" if view.current is None else f"line {view.current + 1:,}"
            parts.append((f" · /{sanitise.safe_text(view.pattern, 30, na='')}: {found}", ""))
        return Content.assemble(*parts)

    def update_status(self) -> None:
        """Redraw the status line."""
        self.query_one("#logs-status", Static).update(self._status())

    # ------------------------------------------------------------------- the stream

    def on_mount(self) -> None:
        """Start reading."""
        self.view.focus()
        self._thread = threading.Thread(target=self._read, name="gputui-logs", daemon=True)
        self._thread.start()

    def on_unmount(self) -> None:
        """Close the stream: its socket is shut down, the reader thread returns."""
        self.close_stream()

    def close_stream(self) -> None:
        """End reading (idempotent, from the UI thread)."""
        with self._lock:
            self._closing = True
            reader = self._reader
        if reader is not None:
            reader.close()

    @property
    def reader_alive(self) -> bool:
        """The reader thread still runs (tests check that closing ends it)."""
        return self._thread is not None and self._thread.is_alive()

    def _read(self) -> None:
        """On the reader thread: open, read until the end or close, hand lines over."""
        try:
            reader = self.opener()
        except LogStreamError as exc:
            self.post_message(self.Ended(str(exc)))
            return
        except Exception as exc:  # a source must refuse with LogStreamError; say it anyway
            self.post_message(self.Ended(f"{type(exc).__name__}: {' '.join(str(exc).split())}"))
            return
        with self._lock:
            closing = self._closing
            self._reader = reader
        if closing:
            reader.close()
            return
        self.tty = reader.tty
        # A container that prints nothing sends no line: without this the status line said
        # "opening…" for as long as it stayed silent.
        self.post_message(self.Opened())
        error: str | None = None
        try:
            while (lines := reader.read()) is not None:
                with self._lock:
                    if self._closing:
                        break
                    self._pending.extend(lines)
                    wake, self._posted = not self._posted, True
                if wake:
                    self.post_message(self.Arrived())
        except LogStreamError as exc:
            error = str(exc)
        finally:
            reader.close()
        with self._lock:
            closing = self._closing
        if not closing:
            # After the last Arrived: messages to one screen are handled in order.
            self.post_message(self.Ended(error))

    @property
    def pending_bytes(self) -> int:
        """Bytes of lines read and not yet shown (at most the buffer's bound)."""
        with self._lock:
            return self._pending.bytes

    def on_logs_screen_opened(self, message: Opened) -> None:
        """The stream is open: the status line says so (and that nothing came yet)."""
        self.opened = True
        self.update_status()

    def on_logs_screen_arrived(self, message: Arrived) -> None:
        """Show the lines waiting in the buffer, at most :data:`FRAME_BYTES` of them now."""
        if not self._timer_due:
            self._drain()

    def _drain_due(self) -> None:
        self._timer_due = False
        self._drain()

    def _drain(self) -> None:
        with self._lock:
            lines, skipped = self._pending.drain(FRAME_BYTES)
            more = len(self._pending) > 0
            # While lines wait, the reader posts nothing: the timer below comes back for them.
            self._posted = more
        self.skipped += skipped
        self.view.add([shown_line(line) for line in lines])
        self.update_status()
        if more and not self._timer_due:
            self._timer_due = True
            self.set_timer(FRAME_S, self._drain_due)

    def on_log_view_unfollowed(self, message: LogView.Unfollowed) -> None:
        """The status line says the view holds still."""
        self.update_status()

    def on_logs_screen_ended(self, message: Ended) -> None:
        """Say that (and why) the stream ended."""
        self.on_logs_screen_arrived(self.Arrived())  # lines still in the buffer keep coming
        self.ended = True
        self.error = sanitise.safe_text(message.error, 200) if message.error else None
        self.update_status()

    # ---------------------------------------------------------------------- actions

    def action_close(self) -> None:
        """Close the search box if open, else the screen (the stream closes with it)."""
        search = self.query_one("#logs-search", Input)
        if search.has_class("-open"):
            search.remove_class("-open")
            self.view.focus()
            return
        self.dismiss(None)

    def action_open_search(self) -> None:
        """Open the search box."""
        search = self.query_one("#logs-search", Input)
        search.add_class("-open")
        search.value = self.view.pattern
        search.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Find the text from the top of the view, close the box."""
        event.stop()
        event.input.remove_class("-open")
        self.view.focus()
        found = self.view.search(event.value, from_top=True)
        if event.value and not found:
            self.notify("No line matches.", severity="warning", timeout=3)
        self.update_status()

    def action_search_next(self, forward: bool) -> None:
        """The next (``n``) or previous (``N``) matching line."""
        if not self.view.pattern:
            self.notify("/ searches first.", timeout=2)
            return
        self.view.search(self.view.pattern, forward)
        self.update_status()

    def action_toggle_timestamps(self) -> None:
        """Show or hide the times."""
        self.view.set_timestamps(not self.view.timestamps)

    def action_toggle_follow(self) -> None:
        """Follow new lines (jumping to the newest), or hold the view where it is."""
        self.view.follow = not self.view.follow
        if self.view.follow:
            self.view.scroll_end(animate=False, immediate=True, x_axis=False)
        self.update_status()

    def action_top(self) -> None:
        """The oldest kept line (stops following)."""
        self.view.follow = False
        self.view.scroll_home(animate=False, immediate=True)
        self.update_status()

    def action_bottom(self) -> None:
        """The newest line (follows again)."""
        self.view.follow = True
        self.view.scroll_end(animate=False, immediate=True, x_axis=False)
        self.update_status()
