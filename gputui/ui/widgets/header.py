"""The one- or two-line header: host, versions, refresh period, sources, alerts, mode markers."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from gputui.derive.fmt import safe_text
from gputui.model import HealthStatus, Snapshot, SourceStatus
from gputui.ui.state import UiState, interval_label

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


def source_text(status: SourceStatus) -> str:
    """``ok`` or a short reason (``unreachable``, ``permission denied``...) for one source."""
    if status.ok:
        return "ok"
    if status.kind is None:
        return "error"
    return _KIND_TEXT.get(status.kind, safe_text(status.kind, 24))


def header_content(snapshot: Snapshot | None, state: UiState) -> Content:
    """Build the header line(s) from the latest snapshot and the UI state.

    Args:
        snapshot: The applied snapshot, None before the first one arrives.
        state: Interval, pause, read-only and mode.

    Returns:
        Styled content; untrusted strings (host name, versions) pass through ``safe_text``.
    """
    sep: Part = ("  │  ", "$text-muted")
    parts: list[Part] = [("gputui", "bold $accent"), "  "]
    if snapshot is None:
        parts.append(("collecting…", "$text-muted"))
    else:
        host = snapshot.host
        parts += [
            (safe_text(host.hostname, 32), "bold"),
            ("  driver ", "$text-muted"),
            safe_text(host.driver_version, 24),
            ("  CUDA ", "$text-muted"),
            safe_text(host.cuda_driver_version, 12),
        ]
    parts += [("  every ", "$text-muted"), interval_label(state.interval)]
    if snapshot is not None:
        parts.append(sep)
        for index, name in enumerate(("nvml", "docker", "procs")):
            status = snapshot.sources.get(name)
            if status is None:
                continue
            if index:
                parts.append(" ")
            label = _SOURCE_LABELS.get(name, name)
            style = "$text-success" if status.ok else "bold $text-error"
            parts += [(f"{label} ", "$text-muted"), (source_text(status), style)]
        lost = sum(1 for gpu in snapshot.gpus if gpu.lost)
        fails = sum(1 for check in snapshot.health if check.status is HealthStatus.FAIL)
        warns = sum(1 for check in snapshot.health if check.status is HealthStatus.WARN)
        parts.append(sep)
        if lost:
            parts += [(f"{lost} GPU lost", "bold $text-error"), " "]
        parts += [
            (f"{fails} fail", "bold $text-error" if fails else "$text-muted"),
            " / ",
            (f"{warns} warn", "bold $text-warning" if warns else "$text-muted"),
        ]
    markers = []
    if state.mode == "demo":
        markers.append("DEMO")
    elif state.mode == "scenario":
        markers.append("SCENARIO")
    if state.read_only:
        markers.append("READ-ONLY")
    if state.paused:
        markers.append("PAUSED")
    for marker in markers:
        style = "bold reverse $text-warning" if marker == "PAUSED" else "bold reverse $text-accent"
        parts += ["  ", (f" {marker} ", style)]
    return Content.assemble(*parts)


def same_content(a: Content, b: Content | None) -> bool:
    """Text *and* styles equal (``Content.__eq__`` compares the text only)."""
    return b is not None and a.plain == b.plain and a.spans == b.spans


class HeaderBar(Static):
    """The top bar; repaints only when its text actually changes."""

    DEFAULT_CSS = """
    HeaderBar {
        height: auto;
        max-height: 2;
        padding: 0 1;
        background: $panel;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id)
        self._last: Content | None = None

    def show(self, snapshot: Snapshot | None, state: UiState) -> None:
        """Display a snapshot under the given UI state (no-op when nothing visible changed)."""
        content = header_content(snapshot, state)
        if not same_content(content, self._last):
            self._last = content
            self.update(content)

    @property
    def text(self) -> str:
        """The plain text shown (for tests and screenshots)."""
        return "" if self._last is None else self._last.plain
