"""Which layout the monitor uses for a terminal size and a GPU count (no Textual: unit-testable).

Two arrangements:

* **stacked** (most sizes): the GPUs above the tabs, as nvitop does, in the most detailed form
  that leaves the tabs at least half the body: full cards, else one line per GPU, else a single
  summary line (eight GPUs on a 60x15 terminal). The GPU panel takes only the rows its GPUs need;
  every other row goes to the tabs.
* **side**: a column of GPU cards beside the tabs, only when the terminal is wide enough that
  the tabs keep enough columns for the tree's status and image (:data:`SIDE_WIDTH`).

The user can collapse the GPU panel to its summary line (``v``) and pick a layout in the config
file (``[ui] layout``: ``auto``, ``top``, ``side``).
"""

from __future__ import annotations

from enum import Enum

from gputui.model.records import record

#: Terminal widths from which ``auto`` puts the GPU cards in a column beside the tabs.
SIDE_WIDTH = 180
#: Once side by side, the layout stays so down to ``SIDE_WIDTH - SIDE_HYSTERESIS`` columns, so a
#: terminal dragged back and forth across the threshold does not flip it at every column.
SIDE_HYSTERESIS = 2
#: With ``[ui] layout = "side"`` the column is used from this width on (the tabs keep 78).
SIDE_WIDTH_ASKED = 150
#: Columns of the side panel (a card's gauges, its border and padding).
SIDE_PANEL_WIDTH = 72

#: Lines of one full card: title, util + memory, temperature + power, clocks + P-state + fan +
#: throttle reasons, PCIe + encoder/decoder + ECC, the sparkline row.
CARD_HEIGHT = 6
#: The tab bar's rows (tabs and their underline), the tree pane's sort line and column header,
#: and the fewest tree rows worth showing.
MIN_TAB_ROWS = 2 + 2 + 5
#: Lines the "no GPU" explanation needs (reason, fix, where to look).
EMPTY_LINES = 3
#: The footer's rows.
FOOTER_ROWS = 1
#: From this height the header has a second line (the host's CPU, load, memory).
TWO_LINE_HEADER_HEIGHT = 40


class GpuStyle(Enum):
    """How the GPU panel draws its GPUs."""

    CARDS = "cards"  # a multi-line card per GPU
    LINES = "lines"  # one line per GPU
    SUMMARY = "summary"  # one line for all of them
    EMPTY = "empty"  # no GPU: why, the fix, where to look


@record
class Layout:
    """The arrangement for one terminal size.

    Attributes:
        side: The GPU panel is a column beside the tabs (else above them).
        style: How the GPU panel draws.
        gpu_rows: Rows of the stacked GPU panel, its bottom border included (0 when side).
        header_rows: Rows of the header (1 or 2).
    """

    side: bool
    style: GpuStyle
    gpu_rows: int
    header_rows: int


def wants_side(width: int, preference: str, was_side: bool | None) -> bool:
    """Whether the terminal is wide enough for the side column under ``preference``.

    A function of the terminal's width and the current choice only, never of a widget's size:
    switching layouts changes widget sizes, and deciding from those made the two layouts trigger
    each other forever.

    Args:
        width: The terminal's columns.
        preference: ``auto``, ``top`` or ``side`` (``[ui] layout``).
        was_side: The arrangement in use (None before the first choice).

    Returns:
        True for the side column.
    """
    if preference == "top":
        return False
    threshold = SIDE_WIDTH_ASKED if preference == "side" else SIDE_WIDTH
    if was_side:
        threshold -= SIDE_HYSTERESIS
    return width >= threshold


def choose_layout(
    width: int,
    height: int,
    gpus: int,
    *,
    collapsed: bool = False,
    preference: str = "auto",
    was_side: bool | None = None,
) -> Layout:
    """The layout for a ``width`` x ``height`` terminal showing ``gpus`` GPUs.

    Args:
        width: The terminal's columns.
        height: The terminal's rows.
        gpus: GPUs in the snapshot (0 before the first one, or without NVML).
        collapsed: The user collapsed the GPU panel (``v``): its summary line only.
        preference: ``[ui] layout``.
        was_side: The arrangement in use, for the hysteresis.

    Returns:
        The arrangement; the stacked GPU panel never takes rows its GPUs do not need, and
        leaves the tabs at least :data:`MIN_TAB_ROWS` rows when the terminal has them.
    """
    header = 2 if height >= TWO_LINE_HEADER_HEIGHT else 1
    body = max(0, height - header - FOOTER_ROWS)
    if gpus == 0:
        rows = max(2, min(EMPTY_LINES + 1, body - MIN_TAB_ROWS))
        return Layout(False, GpuStyle.EMPTY, rows, header)
    if collapsed:
        return Layout(False, GpuStyle.SUMMARY, 2, header)
    side = wants_side(width, preference, was_side)
    if side:
        style = GpuStyle.CARDS if gpus * CARD_HEIGHT <= body else GpuStyle.LINES
        return Layout(True, style, 0, 2)
    if gpus * CARD_HEIGHT + 1 <= body // 2:
        return Layout(False, GpuStyle.CARDS, gpus * CARD_HEIGHT + 1, header)
    if gpus + 1 <= body - MIN_TAB_ROWS:
        return Layout(False, GpuStyle.LINES, gpus + 1, header)
    return Layout(False, GpuStyle.SUMMARY, 2, header)


#: From this size on (columns, rows) the Containers tab shows the selected container's pane
#: under the tree by itself: at 160x50 the tree alone leaves some 35 rows empty.
PANE_AUTO_SIZE = (140, 44)
#: Below this size the pane yields even when asked for (``o``): the tree keeps its rows.
PANE_MIN_SIZE = (100, 30)


def wants_pane(width: int, height: int, asked: bool | None) -> bool:
    """Whether the Containers tab shows the selected container's pane under the tree.

    Args:
        width: The terminal's columns.
        height: The terminal's rows.
        asked: The user's choice (``o``); None follows the size.

    Returns:
        True to show it: from :data:`PANE_AUTO_SIZE` on unless hidden, from
        :data:`PANE_MIN_SIZE` on when asked for, never below.
    """
    if asked is False or width < PANE_MIN_SIZE[0] or height < PANE_MIN_SIZE[1]:
        return False
    return asked is True or (width >= PANE_AUTO_SIZE[0] and height >= PANE_AUTO_SIZE[1])
