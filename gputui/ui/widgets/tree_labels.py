"""The labels of the container tree's rows, and the raw inputs each is built from.

Rows are aligned columns (:data:`TREE_COLUMNS`): the name, then fixed-width figures at the same
screen offset on every row whatever its depth (``indent``), each column in one unit, then the
variable-width texts, and the bracketed flags last, so a narrow terminal cuts flags, not facts.

Every untrusted string goes through ``fmt.safe_text`` into a Rich ``Text`` (never markup), so
names and commands cannot inject styles or terminal sequences.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from rich.cells import cell_len, set_cell_size
from rich.text import Span, Text

from gputui.derive import fmt
from gputui.derive.tree import Marker
from gputui.model import ContainerUsage, GpuProcess
from gputui.ui.styles import EMPH, ERROR, MUTED, severity_style
from gputui.ui.styles import WARNING as WARN

#: Shown on every container (and the others group) while the Docker engine is unreachable: the
#: collector keeps the last container list, which must not pass for live.
STALE_TEXT = "[engine unreachable: last known]"

#: In place of the command (and owner) of a process that ``/proc`` hides (``hidepid``): it exists
#: and holds GPU memory, but gputui may not read who runs what, nor its container.
HIDDEN_TEXT = "hidden by /proc (hidepid)"

#: Cells every row spends before its label: the expander (``▼ ``) or, on a leaf, two blanks, so
#: rows with and without children start their columns at the same place.
EXPANDER_WIDTH = 2

#: What the tree indents each level by (``Tree.guide_depth``).
INDENT = 3

#: What a column shows when its figure does not apply to the row or is unknown.
NONE = "-"


@dataclass(frozen=True, slots=True)
class TreeColumn:
    """One column of the container tree.

    Attributes:
        key: Identity (also the sort key name).
        title: The header's text.
        width: Cells; texts are cut with an ellipsis, numbers right-aligned.
        right: Right-aligned (numbers).
    """

    key: str
    title: str
    width: int
    right: bool = False


#: The tree's columns in display order; flags follow the last one.
TREE_COLUMNS: tuple[TreeColumn, ...] = (
    TreeColumn("name", "NAME", 21),
    TreeColumn("status", "STATUS", 10),
    TreeColumn("gpus", "GPUS", 5),
    TreeColumn("gpu_mem", "GPU MEM", 9, right=True),
    TreeColumn("sm", "SM%", 4, right=True),
    TreeColumn("cpu", "CPU%", 5, right=True),
    TreeColumn("mem", "MEM", 8, right=True),
    TreeColumn("elapsed", "ELAPSED", 7, right=True),
    TreeColumn("image", "IMAGE", 24),
    TreeColumn("group", "COMPOSE/POD", 20),
)

#: The columns a process row fills one by one; its command spans the image and compose/pod ones.
_FIGURES = len(TREE_COLUMNS) - 2
_COMMAND_WIDTH = TREE_COLUMNS[-2].width + 1 + TREE_COLUMNS[-1].width


#: What ``Text.append`` strips (rich.control.strip_control_codes): bell, backspace, VT, FF, CR.
_STRIPPED = frozenset("\x07\x08\x0b\x0c\x0d")

Part = tuple[str, str] | str

#: ``fmt.safe_text``, remembered: labels are rebuilt for moving figures while names, images and
#: commands stay the same, and sanitising them again each refresh cost more than the rest of
#: the label. Bounded, so changing strings cannot grow it.
safe = lru_cache(maxsize=16384)(fmt.safe_text)


def gib(value: int | float | None) -> str:
    """Bytes as :func:`gputui.derive.fmt.size` writes them (``512MiB``, ``13.0GiB``), or ``-``."""
    return fmt.size(value, na=NONE)


def elapsed(seconds: float | None) -> str:
    """How long something has run: ``0:05``, ``12:34`` (m:ss), ``3h05m``, ``3d04h``.

    Minutes and seconds only in the first hour, so older rows change text once a minute and
    their labels are not rebuilt every refresh. Negative durations (clock skew) read ``0:00``.
    """
    if seconds is None:
        return NONE
    s = int(seconds)
    if s < 0:
        s = 0
    if s < 3600:
        return f"{s // 60}:{s % 60:02d}"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600:02d}h"


def elapsed_key(start: float | None, now: float | None) -> int | None:
    """A number equal for two times exactly when :func:`since` shows them alike, cheaply.

    Seconds in the first hour, whole minutes after (what :func:`elapsed` shows changes at
    most once a minute there); None when either time is unknown.
    """
    if start is None or now is None:
        return None
    s = int(now - start)  # negative (clock skew) reads 0:00; distinct keys are harmless
    return s if s < 3600 else 3600 + s // 60


def since(start: float | None, now: float | None) -> str:
    """:func:`elapsed` from a start time to ``now`` (``-`` when either is unknown)."""
    if start is None or now is None:
        return NONE
    return elapsed(now - start)


def fit(parts: Sequence[Part], width: int, right: bool = False, pad: bool = True) -> list[Part]:
    """Styled parts cut or padded to exactly ``width`` cells (cut with ``…``).

    Args:
        parts: Texts, each plain or ``(text, style)``.
        width: Cells the column has.
        right: Pad on the left (numbers).
        pad: Pad at all (False for the last text of a row: no trailing blanks).

    Returns:
        The parts, the one crossing the edge cut, with the padding added.
    """
    sizes = [cell_len(part if isinstance(part, str) else part[0]) for part in parts]
    total = sum(sizes)
    if total <= width:
        if not pad or total == width:
            return list(parts)
        blank = " " * (width - total)
        return [blank, *parts] if right else [*parts, blank]
    out: list[Part] = []
    room = width - 1  # one cell for the ellipsis
    for part, size in zip(parts, sizes, strict=True):
        if size <= room:
            out.append(part)
            room -= size
            continue
        text, style = (part, "") if isinstance(part, str) else part
        out.append((set_cell_size(text, room) + "…" if room > 0 else "…", style))
        break
    return out


def assemble_parts(parts: Sequence[Part], dim: bool = False) -> Text:
    """``Text.assemble(*parts, no_wrap=True, overflow="ellipsis")``, built in one go.

    ``Text.assemble`` appends part by part (15 appends, each stripping control codes); a label is
    rebuilt for every moving node on every refresh, so join once and place the spans directly.
    ``dim`` dims the whole line (a row that is not live).
    """
    texts: list[str] = []
    spans: list[Span] = []
    offset = 0
    for part in parts:
        text, style = (part, "") if isinstance(part, str) else part
        if text:
            end = offset + len(text)
            if style:
                spans.append(Span(offset, end, style))
            texts.append(text)
            offset = end
    plain = "".join(texts)
    style = MUTED if dim else ""
    if not _STRIPPED.isdisjoint(plain):
        # Stripping would shift the spans; let rich do it part by part (never for safe_text).
        return Text.assemble(*parts, style=style, no_wrap=True, overflow="ellipsis")
    return Text(plain, style=style, no_wrap=True, overflow="ellipsis", spans=spans)


def _place(parts: Iterable[Part], texts: list[str], spans: list[Span], offset: int) -> int:
    """Append ``parts`` to a label's texts and spans starting at ``offset``; the new offset."""
    for part in parts:
        text, style = (part, "") if isinstance(part, str) else part
        if text:
            if style:
                spans.append(Span(offset, offset + len(text), style))
            texts.append(text)
            offset += len(text)
    return offset


def row(
    indent: int,
    cells: Sequence[Sequence[Part]],
    tail: Sequence[Part] = (),
    flags: Sequence[Part] = (),
    dim: bool = False,
) -> Text:
    """One aligned row: ``cells`` fill :data:`TREE_COLUMNS` from the left, then ``tail``, flags.

    Args:
        indent: Cells the tree indents this row by (its depth times :data:`INDENT`): the name
            column is that much narrower, so every other column starts at the same offset.
        cells: The parts of each column, from the first; fewer than all columns is fine.
        tail: Free text after the last filled column (a process's command).
        flags: The row's bracketed flags, last.
        dim: Dim the whole row (not live).

    Returns:
        The label.
    """
    # One pass straight into the label's text and spans (no intermediate part list): a label
    # is rebuilt for every moving row on every refresh.
    texts: list[str] = []
    spans: list[Span] = []
    offset = 0
    last = len(cells) - 1
    more = bool(tail) or bool(flags)
    for index, (column, cell) in enumerate(zip(TREE_COLUMNS, cells, strict=False)):
        width = column.width if index else column.width - indent
        if width < 1:
            width = 1
        # No trailing blanks after the row's last text: they would only widen the tree.
        pad = index < last or more
        if index:
            texts.append(" ")
            offset += 1
        placed: Sequence[Part]
        if not cell:
            placed = (" " * width,) if pad else ()
        else:
            size = 0
            for part in cell:
                text = part if isinstance(part, str) else part[0]
                size = size + len(text) if text.isascii() else width + 1
            if size <= width:
                # The common cell, ASCII texts that fit (every figure, a process's PID and
                # user): placed as they are, padded; no cell-width measuring.
                placed = cell
                if pad and size < width:
                    blank = " " * (width - size)
                    placed = (blank, *cell) if column.right else (*cell, blank)
            else:
                placed = fit(cell, width, column.right, pad)
        offset = _place(placed, texts, spans, offset)
    offset = _place((*((" ", *tail) if tail else ()), *flags), texts, spans, offset)
    plain = "".join(texts)
    if not _STRIPPED.isdisjoint(plain):
        # Stripping would shift the spans; let rich do it part by part (never for safe_text).
        return _assemble_slowly(indent, cells, tail, flags, dim)
    return Text(plain, style=MUTED if dim else "", no_wrap=True, overflow="ellipsis", spans=spans)


def _assemble_slowly(
    indent: int,
    cells: Sequence[Sequence[Part]],
    tail: Sequence[Part],
    flags: Sequence[Part],
    dim: bool,
) -> Text:
    parts: list[Part] = []
    last = len(cells) - 1
    for index, (column, cell) in enumerate(zip(TREE_COLUMNS, cells, strict=False)):
        width = max(1, column.width - indent) if index == 0 else column.width
        if index:
            parts.append(" ")
        parts += fit(cell, width, column.right, index < last or bool(tail) or bool(flags))
    if tail:
        parts += [" ", *tail]
    parts += flags
    return assemble_parts(parts, dim=dim)


def header_text() -> str:
    """The column titles, aligned with the rows (expander cells included)."""
    cells = [[column.title] for column in TREE_COLUMNS]
    return " " * EXPANDER_WIDTH + row(0, cells, flags=["  FLAGS"]).plain


def _flag(text: str, style: str) -> list[Part]:
    return ["  ", (text, style)]


def marker_parts(markers: tuple[Marker, ...]) -> list[Part]:
    """``  [shared GPU 1: 75%]  [CPU throttled 45%]``: one bracketed flag per marker."""
    parts: list[Part] = []
    for marker in markers:
        parts += _flag(f"[{marker.text}]", severity_style(marker.severity))
    return parts


def _pct(value: float | None) -> str:
    return fmt.pct(value, na=NONE)


def _group_text(usage: ContainerUsage) -> str:
    info = usage.info
    if info.compose_service:
        project = safe(info.compose_project, 24, na="")
        service = safe(info.compose_service, 24)
        return f"{project}/{service}" if project else service
    if info.k8s_pod:
        namespace = safe(info.k8s_namespace, 24, na="")
        pod = safe(info.k8s_pod, 40)
        return f"pod {namespace}/{pod}" if namespace else f"pod {pod}"
    return ""


def _uptime(usage: ContainerUsage, now: float | None) -> str:
    return since(usage.info.started_at, now) if usage.info.running else NONE


def container_inputs(
    usage: ContainerUsage,
    memory: int | None,
    sm: int | None,
    markers: tuple[Marker, ...],
    stale: bool = False,
    now: float | None = None,
    indent: int = 0,
) -> tuple[object, ...]:
    """What :func:`container_label` reads: CPU, memory and uptime as the texts it shows.

    Raw CPU and memory figures move every refresh; their shown texts much less often, so a
    container's label is rebuilt only when what it shows changes.
    """
    info = usage.info
    return (
        stale,
        indent,
        info.name,
        usage.known_to_engine,
        usage.idle_reserved,
        markers,
        info.status,
        info.gpu_request,
        usage.mig_devices,
        bool(usage.pids),
        memory,
        sm,
        _pct(info.cpu_percent),
        gib(info.memory_used_bytes),
        _uptime(usage, now),
        info.image,
        info.compose_project,
        info.compose_service,
        info.k8s_pod,
        info.k8s_namespace,
    )


def process_inputs(
    process: GpuProcess, markers: tuple[Marker, ...], now: float | None = None, indent: int = INDENT
) -> tuple[object, ...]:
    """What :func:`process_label` reads (elapsed time as :func:`elapsed_key`).

    CPU and RSS enter raw: formatting them for 2,000 processes a refresh costs more than the
    labels it would spare.
    """
    info, sample = process.info, process.sample
    start = info.start_time
    if start is None or now is None:
        age = None
    else:  # elapsed_key, inline: this runs for every process on every refresh
        age = int(now - start)
        if age >= 3600:
            age = 3600 + age // 60
    return (
        indent,
        process.pid,
        info.container_pid,
        info.exists,
        info.proc_hidden,
        sample.gpu_index,
        sample.mig_index,
        sample.mps,
        sample.used_memory_bytes,
        info.user,
        sample.sm_util,
        info.cpu_percent,
        markers,
        info.rss_bytes,
        age,
        info.command,
        info.name,
    )


def _gpus_text(usage: ContainerUsage) -> str:
    """The GPUs a container asked for; the MIG devices it runs on by name (``0:1``)."""
    if usage.mig_devices:
        return safe(",".join(usage.mig_devices), 24)
    return safe(fmt.gpu_request(usage.info.gpu_request, na=NONE), 24)


def container_label(
    group_usage: ContainerUsage,
    memory: int | None,
    sm: int | None,
    markers: tuple[Marker, ...] = (),
    stale: bool = False,
    now: float | None = None,
    indent: int = 0,
) -> Text:
    """``name  status  GPUs  GPU mem  SM%  CPU%  mem  uptime  image  project/service  [flags]``.

    The idle flag comes from the findings (with how long) when they ran, else from the snapshot.
    ``stale``: the engine is unreachable and this is its last known list: the row is dimmed and
    says so (a cgroup-only container is not from the engine and stays as it is).
    """
    info = group_usage.info
    stale = stale and group_usage.known_to_engine
    using = bool(group_usage.pids)
    cells: list[list[Part]] = [
        [(safe(info.name, 64), EMPH)],
        [(safe(info.status, 12), MUTED if info.running else WARN)],
        [_gpus_text(group_usage)],
        [(gib(memory) if using else NONE, EMPH if using else MUTED)],
        [_pct(sm) if using else NONE],
        [_pct(info.cpu_percent)],
        [gib(info.memory_used_bytes)],
        [_uptime(group_usage, now)],
        [(safe(info.image, 80, na=""), MUTED)],
        [(_group_text(group_usage), "italic")],
    ]
    flags: list[Part] = []
    if stale:
        flags += _flag(STALE_TEXT, MUTED)
    if not group_usage.known_to_engine:
        flags += _flag("[cgroup only: not known to Docker]", WARN)
    if group_usage.idle_reserved and not any(m.kind == "idle_reservation" for m in markers):
        flags += _flag("[idle: reserved GPU, no GPU process]", WARN)
    flags += marker_parts(markers)
    return row(indent, cells, flags=flags, dim=stale)


def _process_name(process: GpuProcess) -> list[Part]:
    info = process.info
    parts: list[Part] = [(str(process.pid), EMPH)]
    if info.container_pid is not None and info.container_pid != process.pid:
        parts.append((f" ({info.container_pid})", MUTED))
    if info.exists and not info.proc_hidden:
        parts.append((" " + safe(info.user, 16, na="?"), MUTED))
    return parts


def process_label(
    process: GpuProcess,
    markers: tuple[Marker, ...] = (),
    now: float | None = None,
    indent: int = INDENT,
) -> Text:
    """``611 (1) root  GPU 0  13.0GiB  60%  12%  0.5GiB  3h05m  python3 train.py  [flags]``.

    The name column holds the PID, its PID in the container and the user; the command takes
    the image and compose/pod columns (cut to them when flags follow, whole otherwise).
    """
    info, sample = process.info, process.sample
    memory = (gib(sample.used_memory_bytes), EMPH)
    gpu = str(sample.gpu_index)
    if sample.mig_index is not None:  # the MIG device, as --gpus device=0:1 names it
        gpu = f"{gpu}:{sample.mig_index}"
    flags = marker_parts(markers)
    if sample.mps:
        # An MPS client (nvidia-smi's M+C): its SM % may be credited to the MPS server.
        flags = [*_flag("[MPS client]", MUTED), *flags]
    if not info.exists:
        cells: list[list[Part]] = [_process_name(process), [("not found", ERROR)], [gpu], [memory]]
        cells += [[]] * (_FIGURES - len(cells))
        tail: list[Part] = [("PID not found: memory held by a process nobody can see", ERROR)]
        return row(indent, cells, tail, flags)
    if info.proc_hidden:
        cells = [_process_name(process), [("hidden", WARN)], [gpu], [memory]]
        cells += [[]] * (_FIGURES - len(cells))
        return row(indent, cells, [(HIDDEN_TEXT, WARN)], flags)
    name = _process_name(process)
    figures = (
        gpu,
        memory[0],
        _pct(sample.sm_util),
        _pct(info.cpu_percent),
        gib(info.rss_bytes),
        since(info.start_time, now),
    )
    command: list[Part] = [safe(info.command or info.name, 120, na="?")]
    if flags:
        # Flags last, at the same offset as a container's: the command keeps the columns' width.
        command = fit(command, _COMMAND_WIDTH)
    fast = _process_row(indent, name, figures, command, flags)
    if fast is not None:
        return fast
    cells = [name, []]
    for text in figures:
        cells.append([text])
    cells[3] = [memory]
    return row(indent, cells, command, flags)


#: The figure columns of a process row (blank status, GPU, GPU mem, SM%, CPU%, MEM, ELAPSED).
_PROCESS_FIGURES = " ".join(
    f"{{:{'>' if c.right else '<'}{c.width}}}" for c in TREE_COLUMNS[2:_FIGURES]
)
_FIGURE_WIDTHS = tuple(c.width for c in TREE_COLUMNS[2:_FIGURES])
#: Where GPU mem starts within the figures (after the blank status column and the GPU column).
_MEMORY_AT = 1 + TREE_COLUMNS[1].width + 1 + TREE_COLUMNS[2].width + 1


def _process_row(
    indent: int,
    name: list[Part],
    figures: tuple[str, ...],
    command: list[Part],
    flags: list[Part],
) -> Text | None:
    """:func:`row` for a live process, formatted in one go; None when a text does not fit.

    2,000 processes a refresh make this the tree's hottest label: one format call places the
    figure columns, whose offsets are fixed. Same text and spans as :func:`row`.
    """
    width = TREE_COLUMNS[0].width - indent
    size = 0
    for part in name:
        text = part if isinstance(part, str) else part[0]
        if not text.isascii():
            return None
        size += len(text)
    if size > width:
        return None
    for text, room in zip(figures, _FIGURE_WIDTHS, strict=True):
        if len(text) > room or not text.isascii():
            return None
    texts: list[str] = []
    spans: list[Span] = []
    offset = 0
    offset = _place(name, texts, spans, offset)
    if size < width:
        texts.append(" " * (width - size))
        offset = width
    block = " " + " " * TREE_COLUMNS[1].width + " " + _PROCESS_FIGURES.format(*figures)
    memory_end = offset + _MEMORY_AT + TREE_COLUMNS[3].width  # right-aligned: style the text
    spans.append(Span(memory_end - len(figures[1]), memory_end, EMPH))
    texts.append(block)
    offset += len(block)
    offset = _place((" ", *command, *flags), texts, spans, offset)
    plain = "".join(texts)
    if not _STRIPPED.isdisjoint(plain):
        return None
    return Text(plain, no_wrap=True, overflow="ellipsis", spans=spans)


def host_label(count: int, memory: int | None, sm: int | None, mine: tuple[Marker, ...]) -> Text:
    """``host  …  1.2GiB  5%  2 GPU processes outside containers  [flags]``."""
    cells: list[list[Part]] = [[("host", EMPH)], [], [], [(gib(memory), EMPH)], [_pct(sm)]]
    cells += [[]] * (_FIGURES - len(cells))
    noun = "process" if count == 1 else "processes"
    tail: list[Part] = [(f"{count} GPU {noun} outside containers", MUTED)]
    return row(0, cells, tail, marker_parts(mine))


def orphans_label(count: int, memory: int | None, mine: tuple[Marker, ...]) -> Text:
    """``unfindable GPU memory  …  1.0GiB  …  held by 1 PID not visible here  [flags]``."""
    cells: list[list[Part]] = [[("unfindable GPU memory", ERROR)], [], [], [(gib(memory), EMPH)]]
    cells += [[]] * (_FIGURES - len(cells))
    tail: list[Part] = [(f"held by {count} PID{'s' if count != 1 else ''} not visible here", MUTED)]
    return row(0, cells, tail, marker_parts(mine))


def others_label(count: int, stale: bool = False) -> Text:
    """``other containers  …  3 without GPU use`` (flagged and dimmed while the engine is down)."""
    cells: list[list[Part]] = [[("other containers", EMPH)]]
    cells += [[]] * (_FIGURES - len(cells))
    tail: list[Part] = [(f"{count} without GPU use", MUTED)]
    return row(0, cells, tail, _flag(STALE_TEXT, MUTED) if stale else [], dim=stale)
