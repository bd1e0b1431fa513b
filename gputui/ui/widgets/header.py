"""The header: host, versions, sources, health, alerts, mode markers; the host's load below.

The header is built from segments, each with a priority. When the line is too wide the least
important segments first switch to a short form, then disappear, so an 80-column terminal gets
one line with the facts that matter (alerts, failures, REPLAY / PAUSED) and never wraps. With two
lines (wide layout) the second shows the host's CPU, load, memory and swap, as nvitop does.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from textual.content import Content
from textual.events import Resize

from gputui.boundary import sanitise
from gputui.boundary.sanitise import safe_text
from gputui.derive import units
from gputui.derive.analysis import Analysis, worst_severity
from gputui.model.snapshot import HostStats, Snapshot
from gputui.model.status import HealthStatus, SourceStatus
from gputui.ui.state import UiState, interval_label
from gputui.ui.widgets.repaint import LineCachedWidget, same_content

_SOURCE_LABELS = {"nvml": "NVML", "docker": "Docker", "procs": "procs"}
_KIND_TEXT = {
    "permission": "permission denied",
    "NoPermission": "permission denied",
    "unreachable": "unreachable",
    "not_found": "not found",
    "LibraryNotFound": "no library",
    "DriverNotLoaded": "no driver",
}

Part = str | tuple[str, str]
SEP: Part = ("  │  ", "$text-muted")


def source_text(status: SourceStatus) -> str:
    """``ok`` or a short reason (``unreachable``, ``permission denied``...) for one source."""
    if status.ok:
        # ok with a kind: answered, but some of what it holds could not be read (a stub).
        return "ok" if status.kind is None else "ok (partial)"
    if status.kind is None:
        return "error"
    return _KIND_TEXT.get(status.kind, safe_text(status.kind, 24))


@dataclass(slots=True)
class Segment:
    """A run of header text that is kept, shortened or dropped as a whole.

    Attributes:
        priority: 0 is never dropped (its short form, if any, is the last resort); higher
            numbers go first when space runs out.
        parts: The full form.
        short: A shorter form tried before dropping, if any.
    """

    priority: int
    parts: list[Part]
    short: list[Part] | None = None


def _width(parts: list[Part]) -> int:
    return sum(len(p if isinstance(p, str) else p[0]) for p in parts)


def fit(segments: list[Segment], width: int) -> list[Part]:
    """The segments' parts, shortened and dropped (least important first) to fit ``width``."""
    chosen: list[list[Part] | None] = [s.parts for s in segments]
    order = sorted(
        (i for i, s in enumerate(segments) if s.priority > 0),
        key=lambda i: (-segments[i].priority, -i),  # least important, then rightmost, first
    )

    def total() -> int:
        return sum(_width(c) for c in chosen if c is not None)

    for index in order:
        if total() <= width:
            break
        short = segments[index].short
        if short is not None and chosen[index] is not short:
            chosen[index] = short
            if total() <= width:
                break
        chosen[index] = None
    # Still too wide with only the essentials left: those with a short form take it (rightmost
    # first) rather than being cut off at the right edge.
    for index in reversed(range(len(segments))):
        if total() <= width:
            break
        if segments[index].priority == 0 and segments[index].short is not None:
            chosen[index] = segments[index].short
    return [part for c in chosen if c is not None for part in c]


def _level(percent: float | None) -> str:
    if percent is None:
        return "$text-muted"
    return "$text-error" if percent >= 95 else "$text-warning" if percent >= 80 else ""


def host_segments(stats: HostStats | None) -> list[Segment]:
    """``host  CPU 38% of 224  load 71.20 69.80 66.10  mem 812GiB/2.0TiB  swap 0B/0B``."""
    if stats is None:
        return [Segment(0, [("host load not available", "$text-muted")])]
    mem = units.ratio(stats.memory_used_bytes, stats.memory_total_bytes)
    swap = units.ratio(stats.swap_used_bytes, stats.swap_total_bytes)
    cpu: list[Part] = [
        ("host  CPU ", "$text-muted"),
        (units.pct(stats.cpu_percent), f"bold {_level(stats.cpu_percent)}".strip()),
    ]
    if stats.cpu_count:
        cpu.append((f" of {stats.cpu_count}", "$text-muted"))
    out = [Segment(0, cpu)]
    if stats.load_avg is not None:
        load = " ".join(f"{v:.2f}" for v in stats.load_avg)
        out.append(Segment(3, [("  load ", "$text-muted"), load]))
    used = f"{units.size(stats.memory_used_bytes)}/{units.size(stats.memory_total_bytes)}"
    swapped = f"{units.size(stats.swap_used_bytes)}/{units.size(stats.swap_total_bytes)}"
    out += [
        Segment(1, [("  mem ", "$text-muted"), (used, _level(mem))]),
        Segment(2, [("  swap ", "$text-muted"), (swapped, _level(swap))]),
    ]
    return out


def _short_host(stats: HostStats | None) -> list[Part] | None:
    if stats is None:
        return None
    mem = units.ratio(stats.memory_used_bytes, stats.memory_total_bytes)
    return [
        ("  CPU ", "$text-muted"),
        units.pct(stats.cpu_percent),
        (" mem ", "$text-muted"),
        (units.pct(mem), _level(mem)),
    ]


def _sources(snapshot: Snapshot) -> Segment | None:
    parts: list[Part] = [SEP]
    bad: list[Part] = [SEP]
    # NVML first, then every container source in the collector's order (a recording's names
    # are outside text: sanitised).
    for name in ("nvml", *(n for n in snapshot.sources if n != "nvml")):
        status = snapshot.sources.get(name)
        if status is None:
            continue
        label = _SOURCE_LABELS.get(name) or sanitise.safe_text(name, 20)
        style = "$text-success" if status.ok else "bold $text-error"
        item: list[Part] = [(f"{label} ", "$text-muted"), (source_text(status), style)]
        parts += [" ", *item] if len(parts) > 1 else item
        if not status.ok:
            bad += [" ", *item] if len(bad) > 1 else item
    if len(parts) == 1:
        return None
    if len(bad) == 1:
        return Segment(5, parts)
    return Segment(1, parts, bad)


def _health(snapshot: Snapshot) -> Segment:
    lost = sum(1 for gpu in snapshot.gpus if gpu.lost)
    lost_parts: list[Part] = [(f"{lost} GPU lost", "bold $text-error"), " "] if lost else []
    if snapshot.health_pending:  # the first snapshot: never "0 fail" before any check ran
        return Segment(
            2,
            [SEP, *lost_parts, ("checks running", "$text-muted")],
            ["  ", *lost_parts, ("checks…", "$text-muted")],
        )
    fails = sum(1 for check in snapshot.health if check.status is HealthStatus.FAIL)
    warns = sum(1 for check in snapshot.health if check.status is HealthStatus.WARN)
    fail_style = "bold $text-error" if fails else "$text-muted"
    warn_style = "bold $text-warning" if warns else "$text-muted"
    return Segment(
        2,
        [SEP, *lost_parts, (f"{fails} fail", fail_style), " / ", (f"{warns} warn", warn_style)],
        ["  ", *lost_parts, (f"✗{fails}", fail_style), " ", (f"!{warns}", warn_style)],
    )


def _alerts(analysis: Analysis | None) -> list[Segment]:
    state = analysis.alerts if analysis is not None else None
    if state is None:
        return []
    firing, pending = state.firing, state.pending
    if firing:
        worst = worst_severity(firing) or "warning"
        style = "bold reverse $text-error" if worst == "critical" else "bold reverse $text-warning"
        noun = "alert" if len(firing) == 1 else "alerts"
        # The count is what matters; the severity word goes first when space runs out.
        return [
            Segment(
                1,
                [SEP, (f" ⚠ {len(firing)} {noun} firing", style)],
                ["  ", (f" ⚠{len(firing)}", style)],
            ),
            Segment(5, [(f" ({worst}) ", style)], [(" ", style)]),
        ]
    if pending:
        return [Segment(6, [SEP, (f"{len(pending)} pending", "$text-warning")])]
    return []


def _replay(state: UiState, snapshot: Snapshot | None) -> list[Segment]:
    if state.replay is None:
        return []
    position, length = state.replay
    counter = f"{position + 1}/{length}"
    # At the last snapshot the player stays there: said, so a still screen is not taken for a
    # stalled one (never dropped: at the narrowest it is "end").
    end: list[Segment] = (
        [Segment(0, ["  ", ("end of recording", "bold $text-warning")], [" ", ("end", "bold")])]
        if length and position + 1 >= length
        else []
    )
    if snapshot is None:
        return [Segment(1, ["  ", (counter, "bold")]), *end]
    when = dt.datetime.fromtimestamp(snapshot.taken_at, dt.timezone.utc)
    return [
        Segment(1, ["  ", (counter, "bold")]),
        # The moment shown: shortened to the time of day, then dropped, before health goes.
        Segment(
            3,
            [" ", (when.strftime("%Y-%m-%d %H:%M:%SZ"), "bold")],
            [" ", (when.strftime("%H:%M:%S"), "bold")],
        ),
        *end,
    ]


def _markers(state: UiState) -> list[Segment]:
    # READ-ONLY and PAUSED (like alerts and failures) are never dropped: a user must always see
    # that actions are off. DEMO / SCENARIO only say where the data comes from: they go before
    # the alert and failure counts do. REPLAY is also why actions are off: kept.
    out = []
    badge = "bold reverse $text-accent"
    if state.mode == "replay":
        out.append(Segment(0, ["  ", (" REPLAY ", badge)]))
    elif state.mode in ("demo", "scenario"):
        out.append(Segment(3, ["  ", (f" {state.mode.upper()} ", badge)]))
    if state.read_only and state.mode != "replay":  # a replay is always read-only: no news
        out.append(Segment(0, ["  ", (" READ-ONLY ", badge)], [" ", (" RO ", badge)]))
    if state.paused:
        out.append(Segment(0, ["  ", (" PAUSED ", "bold reverse $text-warning")]))
    if state.scope is not None:
        # --only/--user/--pid: why GPUs, processes or containers are missing; never dropped.
        out.append(
            Segment(
                0,
                ["  ", (f" ONLY {state.scope} ", "bold reverse $text-warning")],
                [" ", (" ONLY ", "bold reverse $text-warning")],
            )
        )
    return out


def header_content(
    snapshot: Snapshot | None,
    state: UiState,
    analysis: Analysis | None = None,
    width: int = 1000,
    lines: int = 2,
) -> Content:
    """Build the header from the latest snapshot, its analysis and the UI state.

    Args:
        snapshot: The applied snapshot, None before the first one arrives.
        state: Interval, pause, read-only, mode and replay position.
        analysis: Alerts (count, worst severity) of the snapshot, if analysed.
        width: Cells per line; segments are shortened or dropped to fit.
        lines: 2 puts the host's load on its own line; 1 squeezes a short form into the first.

    Returns:
        Styled content; untrusted strings (host name, versions) pass through ``safe_text``.
    """
    segments = [Segment(0, [("gputui", "bold $accent")])]
    if snapshot is None:
        segments.append(Segment(0, [("  collecting…", "$text-muted")]))
    else:
        host = snapshot.host
        name = safe_text(host.hostname, 32)
        segments += [
            Segment(4, ["  ", (name, "bold")], ["  ", (safe_text(host.hostname, 12), "bold")]),
            Segment(8, [("  driver ", "$text-muted"), safe_text(host.driver_version, 24)]),
            Segment(9, [("  CUDA ", "$text-muted"), safe_text(host.cuda_driver_version, 12)]),
        ]
    segments.append(Segment(6, [("  every ", "$text-muted"), interval_label(state.interval)]))
    if snapshot is not None:
        if lines < 2:
            short = _short_host(snapshot.host_stats)
            if short is not None:
                segments.append(Segment(7, short))
        sources = _sources(snapshot)
        if sources is not None:
            segments.append(sources)
        segments.append(_health(snapshot))
        segments += _alerts(analysis)
    segments += _markers(state)
    segments += _replay(state, snapshot)
    first = Content.assemble(*fit(segments, width))
    if lines < 2 or snapshot is None:
        return first
    second = Content.assemble(*fit(host_segments(snapshot.host_stats), width))
    return Content("\n").join([first, second.truncate(width, ellipsis=True)])


class HeaderBar(LineCachedWidget):
    """The top bar (two lines when wide, one when narrow); repaints only when its text changes."""

    DEFAULT_CSS = """
    HeaderBar {
        height: 2;
        padding: 0 1;
        background: $panel;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._inputs: tuple[Snapshot | None, UiState, Analysis | None] | None = None
        self._last: Content | None = None

    def show(self, snapshot: Snapshot | None, state: UiState, analysis: Analysis | None) -> None:
        """Display a snapshot under the given UI state (no-op when nothing visible changed)."""
        self._inputs = (snapshot, state, analysis)
        self._rebuild()

    def _rebuild(self) -> None:
        if self._inputs is None:
            return
        # Before the first layout the size is 0; build for a wide line until it is known.
        width = self.size.width or 1000
        lines = self.size.height or 2
        content = header_content(*self._inputs, width=width, lines=lines)
        if not same_content(content, self._last):
            # Only the changed cells: the host's CPU figure moves every refresh, and repainting
            # both full-width lines for it was most of the idle terminal output.
            old, self._last = self._last, content
            self.show_content(old, content)

    def on_resize(self, event: Resize) -> None:
        """Re-fit the segments to the new width (and repaint it all: the size changed)."""
        self._last = None
        self._rebuild()

    def render(self) -> Content:
        """The content built for the current size."""
        return self._last if self._last is not None else Content("")

    @property
    def text(self) -> str:
        """The plain text shown (for tests and screenshots)."""
        return "" if self._last is None else self._last.plain
