"""The labels of the container tree's rows, and the raw inputs each is built from.

Rows are aligned columns (:data:`TREE_COLUMNS`): the name, then fixed-width figures at the same
screen offset on every row whatever its depth (``indent``), then FLAGS (short badges: ``IDLE``,
``SHARED``, ``THR 45%``), then the image and compose/pod columns, which yield their width first.
A :class:`TreeLayout` fits the columns to the tree's width: on a narrow terminal the image goes,
then the elapsed time, the host memory and the name's width, never the badges; a process's
command takes every cell left after its figures (as nvitop gives it).

Every untrusted string goes through ``sanitise.safe_text`` into a Rich ``Text`` (never markup), so
names and commands cannot inject styles or terminal sequences.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache

from rich.cells import cell_len, set_cell_size
from rich.text import Span, Text

from gputui.boundary import sanitise
from gputui.derive import units
from gputui.derive.tree import BADGES, Marker
from gputui.model.containers import Owner
from gputui.model.processes import GpuProcess
from gputui.model.records import record
from gputui.model.snapshot import ContainerUsage
from gputui.ui.styles import EMPH, ERROR, MUTED, severity_style
from gputui.ui.styles import WARNING as WARN

#: The badge of every container (and the others group) while the Docker engine is unreachable:
#: the collector keeps the last container list, which must not pass for live.
STALE_TEXT = "STALE"

#: In place of the command (and owner) of a process that ``/proc`` hides (``hidepid``): it exists
#: and holds GPU memory, but gputui may not read who runs what, nor its container.
HIDDEN_TEXT = "hidden by /proc (hidepid)"

#: Cells every row spends before its label: the expander (``▼ ``) or, on a leaf, two blanks, so
#: rows with and without children start their columns at the same place.
EXPANDER_WIDTH = 2

#: Columns ← / → scroll the tree and the process table by (one at a time crawls along a command).
SIDE_STEP = 8

#: What the tree indents each level by (``Tree.guide_depth``).
INDENT = 3

#: What a column shows when its figure does not apply to the row or is unknown.
NONE = "-"


@record
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


#: The figure columns in display order; FLAGS, IMAGE and COMPOSE/POD follow them.
TREE_COLUMNS: tuple[TreeColumn, ...] = (
    TreeColumn("name", "NAME", 21),
    TreeColumn("status", "STATUS", 11),
    TreeColumn("gpus", "GPUS", 7),
    TreeColumn("gpu_mem", "GPU MEM", 7, right=True),
    TreeColumn("sm", "SM%", 4, right=True),
    TreeColumn("cpu", "CPU%", 5, right=True),
    TreeColumn("mem", "MEM", 7, right=True),
    TreeColumn("elapsed", "ELAPSED", 7, right=True),
)

#: Cells of the owner, image and compose/pod columns when the width allows (less when it does
#: not; the owner, a key answer, yields last).
OWNER_WIDTH = 12
IMAGE_WIDTH = 24
GROUP_WIDTH = 20
#: A text column narrower than this is left out rather than cut to a stub.
MIN_TEXT = 8
#: The most cells the FLAGS column takes (further badges read ``+N``).
FLAGS_MAX = 32
#: Cells the area after the figures keeps at least (badges, a process's command), as long as
#: dropping figure columns can give them.
MIN_TAIL = 20
#: How the figures make room on a narrow tree, in order: (column, its new width; 0 drops it).
_NARROWING: tuple[tuple[int, int], ...] = ((7, 0), (0, 16), (6, 0), (5, 0))


@record
class TreeLayout:
    """Which columns a tree of some width shows, and how wide each is.

    Attributes:
        widths: Cells of each of :data:`TREE_COLUMNS` (0: the column is left out).
        flags: Cells of the FLAGS column (0: no row has a badge).
        owner: Cells of the OWNER column (0: left out, or no container's owner is known).
        image: Cells of the IMAGE column (0: left out).
        group: Cells of the COMPOSE/POD column (0: left out).
        tail: Cells from the FLAGS column to the tree's right edge (None: width unknown).
    """

    widths: tuple[int, ...]
    flags: int
    image: int
    group: int
    tail: int | None
    owner: int = 0


def tree_layout(width: int | None, flags: int = 0, owners: bool = False) -> TreeLayout:
    """The columns for a tree whose labels have ``width`` cells, with ``flags`` cells of badges.

    Args:
        width: Cells a label may use (the tree's width less its expander and scrollbar); None
            before the tree has a size (every column at full width).
        flags: Cells the widest row's badges take (0 without badges; cut to :data:`FLAGS_MAX`).
        owners: Some container's owner is known (the OWNER column is shown only then).

    Returns:
        The layout: figure columns narrowed or dropped (:data:`_NARROWING`) until the badges
        and :data:`MIN_TAIL` cells fit, the owner, image and compose/pod columns in what is
        left, in that order.
    """
    flags = max(0, min(flags, FLAGS_MAX))
    widths = [column.width for column in TREE_COLUMNS]
    if width is None:
        owner = OWNER_WIDTH if owners else 0
        return TreeLayout(tuple(widths), flags, IMAGE_WIDTH, GROUP_WIDTH, None, owner)

    def rest() -> int:
        shown = [w for w in widths if w]
        return width - (sum(shown) + len(shown) - 1) - 1

    need = max(flags, MIN_TAIL)
    for index, narrower in _NARROWING:
        if rest() >= need:
            break
        widths[index] = narrower
    tail = max(0, rest())
    flags = min(flags, tail)
    left = tail - (flags + 1 if flags else 0)
    owner = min(OWNER_WIDTH, left) if owners and left >= MIN_TEXT else 0
    left -= owner + 1 if owner else 0
    image = min(IMAGE_WIDTH, left) if left >= MIN_TEXT else 0
    left -= image + 1 if image else 0
    group = min(GROUP_WIDTH, left) if left >= MIN_TEXT else 0
    return TreeLayout(tuple(widths), flags, image, group, tail, owner)


#: Every column at full width (a label built before the tree has a size).
FULL = tree_layout(None)


#: What ``Text.append`` strips (rich.control.strip_control_codes): bell, backspace, VT, FF, CR.
_STRIPPED = frozenset("\x07\x08\x0b\x0c\x0d")

Part = tuple[str, str] | str

#: ``sanitise.safe_text``, remembered: labels are rebuilt for moving figures while names, images and
#: commands stay the same, and sanitising them again each refresh cost more than the rest of
#: the label. Bounded, so changing strings cannot grow it.
safe = lru_cache(maxsize=16384)(sanitise.safe_text)


def gib(value: int | float | None) -> str:
    """Bytes as :func:`gputui.derive.units.size` writes them (``512MiB``, ``13.0GiB``), or ``-``."""
    return units.size(value, na=NONE)


def elapsed(seconds: float | None) -> str:
    """How long something has run: ``45s``, ``12m``, ``3h05m``, ``3d04h`` (k9s's AGE).

    Seconds only in the first minute, so a row's text moves at most once a minute after it
    and a screen of young jobs (a benchmark's, a freshly started service's) is not rewritten
    every second for its clock. Negative durations (clock skew) read ``0s``.
    """
    if seconds is None:
        return NONE
    return units.duration(max(0.0, seconds))


def elapsed_key(start: float | None, now: float | None) -> int | None:
    """A number equal for two times exactly when :func:`since` shows them alike, cheaply.

    Seconds in the first minute, whole minutes after (what :func:`elapsed` shows changes at
    most once a minute there, and at most once an hour after a day: a spurious change only
    costs one rebuilt label); None when either time is unknown.
    """
    if start is None or now is None:
        return None
    s = int(now - start)  # negative (clock skew) reads 0s; distinct keys are harmless
    return s if s < 60 else 60 + s // 60


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


def _cell(column: TreeColumn, width: int, cell: Sequence[Part], pad: bool) -> Sequence[Part]:
    """One column's parts placed in ``width`` cells (ASCII fitting texts without measuring)."""
    if not cell:
        return (" " * width,) if pad else ()
    size = 0
    for part in cell:
        text = part if isinstance(part, str) else part[0]
        size = size + len(text) if text.isascii() else width + 1
    if size <= width:
        # The common cell, ASCII texts that fit (every figure, a process's PID and user):
        # placed as they are, padded; no cell-width measuring.
        if pad and size < width:
            blank = " " * (width - size)
            return (blank, *cell) if column.right else (*cell, blank)
        return cell
    return fit(cell, width, column.right, pad)


def row(
    indent: int,
    cells: Sequence[Sequence[Part]],
    tail: Sequence[Part] = (),
    flags: Sequence[Part] = (),
    dim: bool = False,
    layout: TreeLayout = FULL,
    texts: Sequence[Sequence[Part]] = (),
) -> Text:
    """One aligned row: ``cells`` fill the figure columns, then FLAGS, then texts or ``tail``.

    Args:
        indent: Cells the tree indents this row by (its depth times :data:`INDENT`): the name
            column is that much narrower, so every other column starts at the same offset.
        cells: The parts of each figure column, from the first; fewer than all is fine.
        tail: Free text after the badges (a process's command), whole.
        flags: The row's badges (:func:`badge_parts`), placed in the FLAGS column.
        dim: Dim the whole row (not live).
        layout: The columns to fill (:func:`tree_layout`).
        texts: The owner, image and compose/pod cells of a container row (one text spans
            them all).

    Returns:
        The label.
    """
    out: list[Part] = []
    widths = layout.widths
    first = True
    for index, column in enumerate(TREE_COLUMNS):
        width = widths[index]
        if not width:
            continue
        if index == 0:
            width = max(1, width - indent)
        if not first:
            out.append(" ")
        first = False
        cell = cells[index] if index < len(cells) else ()
        out.extend(_cell(column, width, cell, True))
    after: list[Part] = []
    if tail:
        if flags:
            after += [*flags, " "]
        # Whole: the command starts where the figures end, takes the rest of the width and
        # goes on past it; the tree scrolls sideways (8 cells a key, ^ / $ to either end).
        after += tail
    else:
        columns: list[tuple[int, Sequence[Part]]] = []
        # Badges always show: in their column, or as wide as they are when the layout was
        # made without them.
        wide = layout.flags or sum(cell_len(p if isinstance(p, str) else p[0]) for p in flags)
        if wide:
            columns.append((wide, flags))
        spans: tuple[int, ...] = (layout.owner, layout.image, layout.group)
        if len(texts) == 1:
            # One text over them all, and over the cells a column too narrow to show left
            # unused (the OWNER column can leave IMAGE out): a group row's summary is whole.
            shown = [w for w in spans if w]
            span = sum(shown) + len(shown) - 1 if shown else 0
            if shown and layout.tail is not None:
                span = max(span, layout.tail - (wide + 1 if wide else 0))
            spans = (span,)
        for width, cell in zip(spans, texts, strict=False):
            if width:
                columns.append((width, cell))
        while columns and not columns[-1][1]:
            columns.pop()  # no trailing blanks: they would only widen the tree
        for number, (width, cell) in enumerate(columns):
            if number:
                after.append(" ")
            after.extend(_cell(_TEXT, width, cell, number < len(columns) - 1))
    if after:
        out.append(" ")
        out.extend(after)
    else:
        while out and isinstance(out[-1], str) and not out[-1].strip():
            out.pop()  # a row without texts ends at its last figure
    return assemble_parts(out, dim=dim)


#: How a text column (flags, image, compose/pod) is placed.
_TEXT = TreeColumn("text", "", 0)


def header_text(layout: TreeLayout = FULL) -> str:
    """The column titles, aligned with the rows (expander cells included)."""
    cells = [[column.title] for column in TREE_COLUMNS]
    texts = [["OWNER"], ["IMAGE"], ["COMPOSE/POD"]]
    flags: list[Part] = ["FLAGS"] if layout.flags else []
    line = row(0, cells, flags=flags, layout=layout, texts=texts).plain
    return " " * EXPANDER_WIDTH + line


def badges_of(
    markers: tuple[Marker, ...],
    stale: bool = False,
    cgroup: bool = False,
    idle: bool = False,
    unknown: bool = False,
    inspect: bool = False,
) -> tuple[tuple[str, str], ...]:
    """A row's badges, each once: ``(text, style)`` in :data:`gputui.derive.tree.BADGES` order.

    Args:
        markers: The row's markers (from the findings and the GPU shares).
        stale: The engine is unreachable: the row is its last known state.
        cgroup: Known from cgroups only.
        idle: The snapshot says it reserved a GPU and runs nothing (before the findings ran).
        unknown: Seen in cgroups while Docker is unreachable: whether Docker knows it is
            unknown.
        inspect: Its inspect reply was over the cap: labels and GPU request unknown.
    """
    if not (markers or unknown or stale or cgroup or inspect or idle):
        return ()  # most rows of a busy host: nothing to flag
    found: list[tuple[str, str]] = []
    if unknown:
        found.append(("DOCKER?", MUTED))
    if stale:
        found.append((STALE_TEXT, MUTED))
    if cgroup:
        found.append(("CGROUP", WARN))
    if inspect:
        found.append(("INSPECT?", WARN))
    if idle and not any(m.badge == "IDLE" for m in markers):
        found.append(("IDLE", WARN))
    for marker in markers:
        badge = marker.badge or marker.text
        if all(badge != text for text, _ in found):
            found.append((badge, f"bold {severity_style(marker.severity)}"))
    if len(found) > 1:
        found.sort(key=_badge_rank)
    return tuple(found)


#: Each badge's place in :data:`gputui.derive.tree.BADGES`, by its word (``THR n%``: ``THR``
#: and a percentage).
_BADGE_RANKS = {word: rank for rank, (word, _) in enumerate(BADGES)}


def _badge_rank(badge: tuple[str, str]) -> int:
    text = badge[0]
    return _BADGE_RANKS.get(text.split()[0] + (" n%" if "%" in text else ""), 99)


def badges_width(badges: Sequence[tuple[str, str]]) -> int:
    """Cells the badges take side by side (one blank between two)."""
    return sum(cell_len(text) for text, _ in badges) + max(0, len(badges) - 1)


def badge_parts(badges: Sequence[tuple[str, str]], width: int | None = None) -> list[Part]:
    """The badges side by side in at most ``width`` cells: whole badges only, then ``+N``."""
    parts: list[Part] = []
    used = 0
    for number, (text, style) in enumerate(badges):
        size = cell_len(text) + (1 if parts else 0)
        rest = len(badges) - number - 1
        more = len(f" +{rest}") if rest else 0
        if width is not None and used + size + more > width:
            hidden = f"+{len(badges) - number}"
            if used + len(hidden) + (1 if parts else 0) <= width:
                parts += [" "] if parts else []
                parts.append((hidden, MUTED))
            break
        if parts:
            parts.append(" ")
        parts.append((text, style))
        used += size
    return parts


def marker_parts(markers: tuple[Marker, ...]) -> list[Part]:
    """``SHARED THR 45%``: the markers' badges side by side (see :func:`badges_of`)."""
    return badge_parts(badges_of(markers))


def _pct(value: float | None) -> str:
    return units.pct(value, na=NONE)


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


def owner_parts(owner: Owner | None) -> list[Part]:
    """The OWNER cell: the name, ``alice?`` dimmed for a low-confidence guess, else blank.

    What named the owner, and how to be sure, is in the Evidence view (``e``).
    """
    if owner is None or owner.name is None:
        return []
    name = safe(owner.name, 40)
    if owner.confidence == "low":
        return [(f"{name}?", MUTED)]
    return [name]


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
    layout: TreeLayout = FULL,
    pending: str | None = None,
) -> tuple[object, ...]:
    """What :func:`container_label` reads: CPU, memory and uptime as the texts it shows.

    Raw CPU and memory figures move every refresh; their shown texts much less often, so a
    container's label is rebuilt only when what it shows changes.
    """
    info = usage.info
    return (
        layout,
        pending,
        stale,
        indent,
        info.name,
        usage.known_to_engine,
        usage.engine_answered,
        usage.idle_reserved,
        markers,
        info.status,
        info.exit_code,
        info.gpu_request,
        usage.mig_devices,
        usage.gpu_indexes,
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
        info.inspect_problem,
        info.owner,
    )


def process_inputs(
    process: GpuProcess,
    markers: tuple[Marker, ...],
    now: float | None = None,
    indent: int = INDENT,
    layout: TreeLayout = FULL,
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
        layout,
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


def gpus_text(usage: ContainerUsage) -> str:
    """The GPUS cell: the GPUs (or MIG devices) its processes use, else ``req`` and its request.

    A container asking for all GPUs whose processes run on 0, 2 and 3 reads ``0,2,3``; one that
    runs nothing reads ``req all`` (what it asked for, not what it uses).
    """
    if usage.mig_devices:
        return safe(",".join(usage.mig_devices), 24)
    if usage.info.inspect_problem and usage.info.gpu_request is None:
        return "?"  # not "none": the request is in the inspect reply gputui could not read
    if usage.gpu_indexes:
        return ",".join(str(index) for index in usage.gpu_indexes)
    request = usage.info.gpu_request
    if request is None or request == ():
        return NONE
    return "req " + safe(units.gpu_request(request, na=NONE), 24)


def container_badges(
    usage: ContainerUsage, markers: tuple[Marker, ...], stale: bool = False
) -> tuple[tuple[str, str], ...]:
    """The badges of a container's row (see :func:`badges_of`)."""
    return badges_of(
        markers,
        stale=stale and usage.known_to_engine,
        cgroup=usage.not_in_engine,
        unknown=not usage.engine_answered and not usage.known_to_engine,
        idle=usage.idle_reserved,
        inspect=bool(usage.info.inspect_problem),
    )


def container_label(
    group_usage: ContainerUsage,
    memory: int | None,
    sm: int | None,
    markers: tuple[Marker, ...] = (),
    stale: bool = False,
    now: float | None = None,
    indent: int = 0,
    layout: TreeLayout = FULL,
    pending: str | None = None,
) -> Text:
    """``name  status  GPUs  GPU mem  SM%  CPU%  mem  uptime  FLAGS  image  project/service``.

    The idle badge comes from the findings when they ran, else from the snapshot. ``stale``:
    the engine is unreachable and this is its last known list: the row is dimmed and says so
    (a cgroup-only container is not from the engine and stays as it is). ``pending``: an
    action asked of the engine and not yet seen done (``stopping…``), shown as the status.
    """
    info = group_usage.info
    stale = stale and group_usage.known_to_engine
    using = bool(group_usage.pids)
    if pending is not None:
        status: Part = (pending, f"bold {WARN}")
    else:
        shown = units.container_status(info.status, info.exit_code)
        status = (safe(shown, 16), MUTED if info.running else WARN)
    cells: list[list[Part]] = [
        [(safe(info.name, 64), EMPH)],
        [status],
        [gpus_text(group_usage)],
        [(gib(memory) if using else NONE, EMPH if using else MUTED)],
        [_pct(sm) if using else NONE],
        [_pct(info.cpu_percent)],
        [gib(info.memory_used_bytes)],
        [_uptime(group_usage, now)],
    ]
    texts: list[list[Part]] = [
        owner_parts(info.owner),
        [(safe(info.image, 80, na=""), MUTED)],
        [(_group_text(group_usage), "italic")],
    ]
    flags = badge_parts(container_badges(group_usage, markers, stale), layout.flags or None)
    return row(indent, cells, flags=flags, dim=stale, layout=layout, texts=texts)


def _process_name(process: GpuProcess) -> list[Part]:
    info = process.info
    parts: list[Part] = [(str(process.pid), EMPH)]
    if info.container_pid is not None and info.container_pid != process.pid:
        parts.append((f" ({info.container_pid})", MUTED))
    if info.exists and not info.proc_hidden:
        parts.append((" " + safe(info.user, 16, na="?"), MUTED))
    return parts


def process_badges(process: GpuProcess, markers: tuple[Marker, ...]) -> list[Part]:
    """A process row's badges (``MPS`` for an MPS client, then its markers')."""
    badges = list(badges_of(markers))
    if process.sample.mps:
        # An MPS client (nvidia-smi's M+C): its SM % may be credited to the MPS server.
        badges.insert(0, ("MPS", MUTED))
    return badge_parts(badges)


def process_label(
    process: GpuProcess,
    markers: tuple[Marker, ...] = (),
    now: float | None = None,
    indent: int = INDENT,
    layout: TreeLayout = FULL,
) -> Text:
    """``611 (1) root  0  13.0GiB  60%  12%  512MiB  3h05m  [badges] python3 train.py``.

    The name column holds the PID, its PID in the container and the user; the command takes
    every cell left after the figures (and the row's badges, first), the rest scrolls.
    """
    info, sample = process.info, process.sample
    memory = (gib(sample.used_memory_bytes), EMPH)
    gpu = str(sample.gpu_index)
    if sample.mig_index is not None:  # the MIG device, as --gpus device=0:1 names it
        gpu = f"{gpu}:{sample.mig_index}"
    flags = process_badges(process, markers)
    if not info.exists:
        cells: list[list[Part]] = [_process_name(process), [("not found", ERROR)], [gpu], [memory]]
        tail: list[Part] = [("PID not found: memory held by a process nobody can see", ERROR)]
        return row(indent, cells, tail, flags, layout=layout)
    if info.proc_hidden:
        cells = [_process_name(process), [("hidden", WARN)], [gpu], [memory]]
        return row(indent, cells, [(HIDDEN_TEXT, WARN)], flags, layout=layout)
    cells = [
        _process_name(process),
        [],
        [gpu],
        [memory],
        [_pct(sample.sm_util)],
        [_pct(info.cpu_percent)],
        [gib(info.rss_bytes)],
        [since(info.start_time, now)],
    ]
    command: list[Part] = [safe(info.command or info.name, 120, na="?")]
    return row(indent, cells, command, flags, layout=layout)


def host_label(
    count: int,
    memory: int | None,
    sm: int | None,
    mine: tuple[Marker, ...],
    layout: TreeLayout = FULL,
) -> Text:
    """``host  …  1.2GiB  5%  SHARED  2 GPU processes outside containers``.

    Its badges sit in the FLAGS column like a container's; the description takes the image
    and compose/pod columns.
    """
    cells: list[list[Part]] = [[("host", EMPH)], [], [], [(gib(memory), EMPH)], [_pct(sm)]]
    noun = "process" if count == 1 else "processes"
    return _group_row(cells, f"{count} GPU {noun} outside containers", mine, layout)


def pod_label(
    namespace: str,
    name: str,
    count: int,
    memory: int | None,
    sm: int | None,
    layout: TreeLayout = FULL,
) -> Text:
    """``pod ml/trainer-0  …  2.0GiB  40%  3 containers``: a Kubernetes pod's containers."""
    pod = safe(name, 40)
    shown = f"pod {safe(namespace, 24)}/{pod}" if namespace else f"pod {pod}"
    cells: list[list[Part]] = [[(shown, EMPH)], [], [], [(gib(memory), EMPH)], [_pct(sm)]]
    return _group_row(cells, f"{count} containers", (), layout)


def _group_row(
    cells: list[list[Part]],
    text: str,
    mine: tuple[Marker, ...],
    layout: TreeLayout,
    stale: bool = False,
    dim: bool = False,
) -> Text:
    flags = badge_parts(badges_of(mine, stale=stale), layout.flags or None)
    return row(0, cells, flags=flags, dim=dim, layout=layout, texts=[[(text, MUTED)]])


def orphans_label(
    count: int, memory: int | None, mine: tuple[Marker, ...], layout: TreeLayout = FULL
) -> Text:
    """``unfindable GPU memory  …  1.0GiB  SHARED  held by 1 PID not visible here``."""
    cells: list[list[Part]] = [[("unfindable GPU memory", ERROR)], [], [], [(gib(memory), EMPH)]]
    text = f"held by {count} PID{'s' if count != 1 else ''} not visible here"
    return _group_row(cells, text, mine, layout)


def others_label(count: int, stale: bool = False, layout: TreeLayout = FULL) -> Text:
    """``other containers  …  3 without GPU use`` (badged and dimmed while the engine is down)."""
    cells: list[list[Part]] = [[("other containers", EMPH)]]
    return _group_row(cells, f"{count} without GPU use", (), layout, stale=stale, dim=stale)
