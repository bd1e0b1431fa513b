"""The Containers tab: container → its GPU processes, reconciled in place on every refresh.

Node identity is a key (``c:<container id>``, ``p:<pid>:<gpu>``, ``g:host``...), so a refresh
updates labels in place, keeps expansion and the cursor, removes vanished nodes and inserts new
ones where they belong; nothing is rebuilt from scratch. The labels are aligned columns built in
:mod:`gputui.ui.widgets.tree_labels` (untrusted strings through ``sanitise.safe_text``, never
markup);
:class:`ContainerPane` puts the column titles, the active sort and filter and the filter input
above the tree.

``s`` cycles the sort column (:data:`TREE_SORTS`), ``S`` reverses it, ``/`` filters containers
by name, image, compose project/service, pod, or the user, command, PID or GPU of a process (a
container stays with the processes that match); ``gpu:3`` / ``gpu:0,2`` and the monitor's GPU
scope keep what runs on (or reserved) those GPUs. Tagged processes (Space) carry a mark.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from itertools import chain
from operator import attrgetter

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Input, Static
from textual.widgets.tree import TreeNode

from gputui.boundary import sanitise
from gputui.derive.tree import (
    HOST_KEY,
    ORPHANS_KEY,
    Group,
    GroupKind,
    Marker,
    Markers,
    flat,
    natural_key,
    process_key,
)
from gputui.model.processes import GpuProcess
from gputui.model.records import record
from gputui.model.snapshot import ContainerUsage
from gputui.ui.empty_states import scoped_empty
from gputui.ui.filters import key_hint, parse_filter, requests_gpu, scope_parts
from gputui.ui.styles import themed
from gputui.ui.textual_compat import (
    TREE_TOGGLE_STYLE,
    LazyLabelTree,
    attach_rows,
    known_label_width,
    redraw_tree_nodes,
    reorder_tree_children,
    repaint_moved_rows,
    repaint_tree_nodes,
    set_lazy_label,
    tree_node_label,
)
from gputui.ui.widgets.process_table import TAG_MARK, EmptyNote, gpu_text
from gputui.ui.widgets.tree_labels import (
    EXPANDER_WIDTH,
    FULL,
    INDENT,
    SIDE_STEP,
    STALE_TEXT,
    TreeLayout,
    badges_of,
    badges_width,
    container_badges,
    container_inputs,
    container_label,
    header_text,
    host_label,
    orphans_label,
    others_label,
    pod_label,
    process_inputs,
    process_label,
    tree_layout,
)


@record
class NodeRef:
    """What a tree node stands for.

    Attributes:
        key: Stable identity across refreshes.
        kind: ``container``, ``process``, ``pod``, ``host``, ``orphans`` or ``others``.
        container: The container of this node (or of this process), if any.
        process: The process of a process node.
    """

    key: str
    kind: str
    container: ContainerUsage | None = None
    process: GpuProcess | None = None


# -- sort and filter ---------------------------------------------------------------------------

#: A container's sort value: (the container, its GPU memory, its SM %, now) -> a number or text,
#: None when unknown (unknown values go last in either direction).
SortValue = Callable[[ContainerUsage, int | None, int | None, float | None], object]


def _uptime_s(usage: ContainerUsage, now: float | None) -> float | None:
    started = usage.info.started_at
    if not usage.info.running or started is None or now is None:
        return None
    return now - started


@record
class TreeSort:
    """One order ``s`` cycles through.

    Attributes:
        key: The column it sorts by (``gpu_use``: the default order of ``build_groups``).
        label: What the status line calls it.
        descending: Largest first by default (``S`` reverses).
        value: The value compared; None for the default order.
    """

    key: str
    label: str
    descending: bool
    value: SortValue | None = None


#: The orders ``s`` cycles through, the default first (GPU users by GPU memory, then idle
#: reservations, then cgroup-only containers: the report's order).
TREE_SORTS: tuple[TreeSort, ...] = (
    TreeSort("gpu_use", "GPU use", True),
    TreeSort("name", "name", False, lambda u, m, s, n: natural_key(u.info.name)),
    TreeSort("status", "status", False, lambda u, m, s, n: u.info.status),
    TreeSort("gpu_mem", "GPU mem", True, lambda u, m, s, n: m if u.pids else None),
    TreeSort("sm", "SM %", True, lambda u, m, s, n: s if u.pids else None),
    TreeSort("cpu", "CPU %", True, lambda u, m, s, n: u.info.cpu_percent),
    TreeSort("mem", "memory", True, lambda u, m, s, n: u.info.memory_used_bytes),
    TreeSort("elapsed", "uptime", True, lambda u, m, s, n: _uptime_s(u, n)),
    # By the lowest GPU index its processes use ("who is on GPU 0" first); none: last.
    TreeSort("gpu", "GPU", False, lambda u, m, s, n: min(u.gpu_indexes) if u.gpu_indexes else None),
)


def container_matches(usage: ContainerUsage, needle: str) -> bool:
    """The (lower-case) needle occurs in the name, image, compose labels, pod or short id."""
    info = usage.info
    fields = (
        info.name,
        info.image,
        info.compose_project,
        info.compose_service,
        info.k8s_pod,
        info.k8s_namespace,
        info.short_id,
    )
    return any(needle in field.lower() for field in fields if field)


def process_matches(process: GpuProcess, needle: str) -> bool:
    """The (lower-case) needle occurs in the process's command, name, user, PID or GPU."""
    info = process.info
    fields = (info.command, info.name, info.user, str(process.pid), gpu_text(process))
    return any(needle in field.lower() for field in fields if field)


def _filtered(group: Group, needle: str, gpus: frozenset[int] | None = None) -> Group | None:
    """The group as the filter shows it (None: nothing of it matches).

    ``gpus`` first: only the processes on those GPUs stay (a container without one goes, an
    idle container stays when it reserved one of them); then the text, as before.
    """
    if gpus is not None:
        if group.kind is GroupKind.OTHERS:
            kept = tuple(u for u in group.containers if requests_gpu(u.info.gpu_request, gpus))
            if not kept:
                return None
            group = replace(group, containers=kept)
        elif not group.processes:
            # An idle reservation is "on" the GPUs it asked for.
            usage = group.usage
            if usage is None or not requests_gpu(usage.info.gpu_request, gpus):
                return None
        else:
            on = tuple(p for p in group.processes if p.sample.gpu_index in gpus)
            if not on:
                return None
            if len(on) != len(group.processes):
                group = replace(group, processes=on)
    if not needle:
        return group
    if group.kind is GroupKind.OTHERS:
        kept = tuple(u for u in group.containers if container_matches(u, needle))
        return replace(group, containers=kept) if kept else None
    if group.usage is not None and container_matches(group.usage, needle):
        return group  # the container matches: all of its processes stay
    processes = tuple(p for p in group.processes if process_matches(p, needle))
    return replace(group, processes=processes) if processes else None


def _sorted_usages(
    entries: Sequence[tuple[ContainerUsage, int | None, int | None]],
    order: TreeSort,
    reverse: bool,
    now: float | None,
) -> list[int]:
    """Positions of ``entries`` in the order asked for; unknown values last, ties by name."""
    descending = order.descending != reverse
    if order.value is None:
        positions = list(range(len(entries)))
        return positions[::-1] if reverse else positions
    value = order.value
    by_name = sorted(range(len(entries)), key=lambda i: natural_key(entries[i][0].info.name))
    values = {i: value(*entries[i], now) for i in by_name}
    known = [i for i in by_name if values[i] is not None]
    unknown = [i for i in by_name if values[i] is None]
    # A stable sort keeps names in order among equal values, in either direction.
    known.sort(key=lambda i: values[i], reverse=descending)  # type: ignore[arg-type, return-value]
    return known + unknown


def tree_view(
    groups: Sequence[Group],
    needle: str = "",
    order: TreeSort = TREE_SORTS[0],
    reverse: bool = False,
    now: float | None = None,
    scope: int | None = None,
) -> tuple[Group, ...]:
    """The groups the tree shows: filtered by ``needle``, containers in the asked order.

    Args:
        groups: From :func:`gputui.derive.tree.build_groups`.
        needle: Filter text (matched case-blind, ``gpu:3`` / ``gpu:0,2`` tokens name GPUs);
            empty shows everything.
        order: The sort order.
        reverse: ``S``: the other direction.
        now: The snapshot's time (uptime).
        scope: The GPU the monitor is scoped to (None: every GPU).

    Returns:
        The container groups sorted, then host, orphans and the other containers (also sorted)
        as ``build_groups`` places them.
    """
    query = parse_filter(needle, scope)
    if query.empty and order.value is None and not reverse:
        return tuple(groups)  # the common case costs nothing
    # A filter or a sort orders containers: a pod's containers take their own places then.
    groups = flat(groups)
    needle = query.text.lower()
    featured: list[tuple[Group, ContainerUsage]] = []
    rest: list[Group] = []
    for group in groups:
        shown = group if query.empty else _filtered(group, needle, query.gpus)
        if shown is None:
            continue
        if shown.kind is GroupKind.CONTAINER and shown.usage is not None:
            featured.append((shown, shown.usage))
        else:
            rest.append(shown)
    entries = [(usage, g.gpu_memory_bytes, g.sm_util) for g, usage in featured]
    ordered = [featured[i][0] for i in _sorted_usages(entries, order, reverse, now)]
    for group in rest:
        if group.kind is GroupKind.OTHERS:
            usages = [(u, None, None) for u in group.containers]
            positions = _sorted_usages(usages, order, reverse, now)
            group = replace(group, containers=tuple(group.containers[i] for i in positions))
        ordered.append(group)
    return tuple(ordered)


def container_count(groups: Sequence[Group]) -> int:
    """Containers among ``groups`` (those with GPU use and the others)."""
    return sum(
        len(g.containers)
        if g.kind is GroupKind.OTHERS
        else len(g.members)
        if g.kind is GroupKind.POD
        else int(g.kind is GroupKind.CONTAINER)
        for g in groups
    )


# -- items -------------------------------------------------------------------------------------


# Not frozen: a frozen dataclass sets each field through object.__setattr__, and 2,200 items are
# made every refresh at 2,000 processes. Items live for one sync and are never changed.
@dataclass(slots=True)
class _Item:
    ref: NodeRef
    # Every raw value the label is built from: a node whose inputs are unchanged keeps its
    # label, so a refresh builds (and repaints) labels only for nodes whose figures moved.
    inputs: tuple[object, ...]
    build: Callable[[], Text]
    children: tuple[_Item, ...] | None = None  # None: a leaf
    expand: bool = True
    # A group's process lines: drawn from the rows source when read, never one item each.
    rows: _ProcessRows | None = None


_SAMPLE = attrgetter("sample")
_PID_AND_GPU = attrgetter("pid", "gpu_index")


class _ProcessRows:
    """One group's processes as tree lines: inputs, label and node data built when read.

    A refresh hands every process line of a group the new source in one pass; only the lines
    drawn (or read by code) build their inputs and labels, so 2,000 processes whose figures all
    move cost an attribute set each, not an item, a label builder and a node reference each.
    """

    __slots__ = ("ident", "indent", "layout", "markers", "now", "processes", "usage")

    def __init__(
        self,
        usage: ContainerUsage | None,
        processes: tuple[GpuProcess, ...],
        markers: Markers,
        now: float | None,
        layout: TreeLayout = FULL,
        indent: int = INDENT,
    ) -> None:
        self.usage = usage
        self.indent = indent
        self.processes = processes
        self.markers = markers
        self.now = now
        self.layout = layout
        # The lines' identities in order (build_groups sorts by PID, then GPU): while they stay
        # the same, the nodes stay and only the source changes. Made for every group on every
        # refresh (2,000 processes at the target point): C-level getters, not a generator.
        self.ident = tuple(map(_PID_AND_GPU, map(_SAMPLE, processes)))

    def key(self, index: int) -> str:
        return f"p:{process_key(self.processes[index])}"

    def _markers(self, process: GpuProcess) -> tuple[Marker, ...]:
        return self.markers.get(f"pid:{process.pid}", ())

    def row_inputs(self, index: int) -> tuple[object, ...]:
        process = self.processes[index]
        return process_inputs(process, self._markers(process), self.now, self.indent, self.layout)

    def row_label(self, index: int) -> Text:
        process = self.processes[index]
        return process_label(process, self._markers(process), self.now, self.indent, self.layout)

    def row_data(self, index: int) -> NodeRef:
        return NodeRef(self.key(index), "process", self.usage, self.processes[index])


def _container_item(
    usage: ContainerUsage,
    memory: int | None,
    sm: int | None,
    markers: Markers,
    children: tuple[_Item, ...] | None,
    stale: bool = False,
    now: float | None = None,
    indent: int = 0,
    layout: TreeLayout = FULL,
    pending: Mapping[str, str] | None = None,
) -> _Item:
    mine = markers.get(f"container:{usage.info.id}", ())
    doing = pending.get(usage.info.id) if pending else None
    return _Item(
        NodeRef(f"c:{usage.info.id}", "container", usage),
        container_inputs(usage, memory, sm, mine, stale, now, indent, layout, doing),
        partial(container_label, usage, memory, sm, mine, stale, now, indent, layout, doing),
        children,
    )


def _group_item(
    group: Group,
    markers: Markers,
    stale: bool = False,
    now: float | None = None,
    layout: TreeLayout = FULL,
    pending: Mapping[str, str] | None = None,
) -> _Item:
    rows = None
    if group.kind is GroupKind.POD and group.pod is not None:
        members = tuple(
            _pod_member(member, markers, stale, now, layout, pending) for member in group.members
        )
        namespace, name = group.pod
        build = partial(pod_label, namespace, name, len(members), group.gpu_memory_bytes,
                        group.sm_util, layout)  # fmt: skip
        inputs: tuple[object, ...] = (layout, group.pod, len(members), group.gpu_memory_bytes,
                                      group.sm_util)  # fmt: skip
        return _Item(NodeRef(f"g:{group.key}", "pod"), inputs, build, members)
    if group.processes:
        rows = _ProcessRows(group.usage, group.processes, markers, now, layout)
    if group.kind is GroupKind.CONTAINER and group.usage is not None:
        # The group key is the container id, so this is the node key c:<group.key>.
        memory, sm = group.gpu_memory_bytes, group.sm_util
        item = _container_item(
            group.usage, memory, sm, markers, None, stale, now, 0, layout, pending
        )
        item.rows = rows
        return item
    count = len(group.processes)
    memory, sm = group.gpu_memory_bytes, group.sm_util
    if group.kind is GroupKind.HOST:
        mine = markers.get(HOST_KEY, ())
        build = partial(host_label, count, memory, sm, mine, layout)
        inputs = (layout, count, memory, sm, mine)
        return _Item(NodeRef("g:host", "host"), inputs, build, (), rows=rows)
    if group.kind is GroupKind.ORPHANS:
        mine = markers.get(ORPHANS_KEY, ())
        build = partial(orphans_label, count, memory, mine, layout)
        ref = NodeRef("g:orphans", "orphans")
        return _Item(ref, (layout, count, memory, mine), build, (), rows=rows)
    others = tuple(
        _container_item(u, None, None, markers, None, stale, now, INDENT, layout, pending)
        for u in group.containers
    )
    build = partial(others_label, len(others), stale, layout)
    inputs = (layout, len(others), stale)
    return _Item(NodeRef("g:others", "others"), inputs, build, others, expand=False)


def _pod_member(
    group: Group,
    markers: Markers,
    stale: bool,
    now: float | None,
    layout: TreeLayout,
    pending: Mapping[str, str] | None,
) -> _Item:
    """A container of a pod, one level in, its processes two levels in."""
    assert group.usage is not None
    item = _container_item(group.usage, group.gpu_memory_bytes, group.sm_util, markers, None,
                           stale, now, INDENT, layout, pending)  # fmt: skip
    if group.processes:
        item.rows = _ProcessRows(group.usage, group.processes, markers, now, layout, 2 * INDENT)
    return item


def owners_known(groups: Sequence[Group]) -> bool:
    """Whether some container of ``groups`` has a named owner (the OWNER column shows then)."""
    for group in flat(groups):
        usages = (group.usage,) if group.usage is not None else group.containers
        if any(u.info.owner is not None and u.info.owner.name for u in usages):
            return True
    return False


def flags_width(groups: Sequence[Group], markers: Markers, stale: bool) -> int:
    """Cells the widest badges of the rows of ``groups`` take (the FLAGS column's width)."""
    widest = 0
    widths: dict[tuple[object, ...], int] = {}
    for group in flat(groups):
        if group.kind is GroupKind.CONTAINER and group.usage is not None:
            usages: Iterable[ContainerUsage] = (group.usage,)
        elif group.kind is GroupKind.OTHERS:
            usages = group.containers
            widest = max(widest, badges_width(badges_of((), stale=stale)))
        else:
            usages = ()
            mine = markers.get(HOST_KEY if group.kind is GroupKind.HOST else ORPHANS_KEY, ())
            widest = max(widest, badges_width(badges_of(mine)))
        for usage in usages:
            # Each refresh passes every container here (200 on a busy host), most with the
            # same few facts: each set of facts is made into badges once.
            mine = markers.get(f"container:{usage.info.id}", ())
            facts = (mine, usage.known_to_engine, usage.not_in_engine, usage.engine_answered,
                     usage.idle_reserved, bool(usage.info.inspect_problem))  # fmt: skip
            width = widths.get(facts)
            if width is None:
                width = widths[facts] = badges_width(container_badges(usage, mine, stale))
            widest = max(widest, width)
    return widest


__all__ = ["STALE_TEXT", "TAG_MARK", "ContainerPane", "ContainerTree", "NodeRef"]
#: The tagged lines' colour (a theme variable, resolved when drawn).
TAG_STYLE = "bold $text-warning"

#: Seconds a container's row says ``stopping…`` (or ``restarting…``, ``starting…``) at most,
#: when the engine's status does not move: Docker's stop grace is 10 s, then SIGKILL.
PENDING_SECONDS = 30.0


class ContainerTree(LazyLabelTree[NodeRef]):
    """Containers and their GPU processes in aligned columns, sortable and filterable."""

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("g", "scroll_home", "First", show=False),
        Binding("G", "scroll_end", "Last", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("containers", id=id)
        self.show_root = False
        self.guide_depth = INDENT
        self.nodes_by_key: dict[str, TreeNode[NodeRef]] = {}
        self._inputs: dict[str, tuple[object, ...]] = {}
        self._relabelled: list[TreeNode[NodeRef]] = []
        # Per group node key: the identities of its process lines when last reconciled.
        self._row_idents: dict[str, tuple[tuple[int, int], ...]] = {}
        # Process lines that got new figures in place this sync (repainted if on screen).
        self._moved_rows: list[Iterable[TreeNode[NodeRef]]] = []
        self.sort_index = 0
        self.reverse = False
        self.filter_text = ""
        self.shown_containers = 0
        self.total_containers = 0
        self._last: tuple[tuple[Group, ...], Markers | None, bool, float | None] | None = None
        #: Called after every change of what the tree shows (the pane's status line and header).
        self.on_view_change: Callable[[], None] | None = None
        #: The columns the labels were last built for (from the tree's width and the badges).
        self.columns: TreeLayout = FULL
        self._sized_for: int | None = None
        #: Container id -> (what its status reads meanwhile, its status and start time when
        #: asked, the monotonic deadline): an action asked of the engine and not yet seen done.
        self.pending: dict[str, tuple[str, tuple[object, ...], float]] = {}
        #: The GPU the monitor is scoped to (``f``, a click on a GPU): only what runs there.
        self.scope_gpu: int | None = None
        #: The PIDs tagged with Space: their lines carry :data:`TAG_MARK`.
        self.tagged: frozenset[int] = frozenset()

    @property
    def selected(self) -> NodeRef | None:
        """The node under the cursor, if any."""
        node = self.cursor_node
        return None if node is None else node.data

    @property
    def sort(self) -> TreeSort:
        """The active sort order."""
        return TREE_SORTS[self.sort_index]

    @property
    def sort_label(self) -> str:
        """The active sort, e.g. ``GPU mem ▼`` (``▲`` ascending)."""
        order = self.sort
        return f"{order.label} {'▼' if order.descending != self.reverse else '▲'}"

    def cycle_sort(self) -> None:
        """``s``: the next sort column, in its natural direction."""
        self.sort_index = (self.sort_index + 1) % len(TREE_SORTS)
        self.reverse = False
        self.resync()

    def reverse_sort(self) -> None:
        """``S``: the same column, the other way round."""
        self.reverse = not self.reverse
        self.resync()

    def sort_choices(self) -> tuple[str, ...]:
        """F6's list: the orders ``s`` cycles through."""
        return tuple(order.label for order in TREE_SORTS)

    def sort_current(self) -> int:
        """The order sorted by now."""
        return self.sort_index

    def sort_by(self, index: int) -> None:
        """Sort by order ``index`` of :data:`TREE_SORTS`, in its natural direction."""
        self.sort_index = index % len(TREE_SORTS)
        self.reverse = False
        self.resync()

    def set_scope(self, gpu: int | None) -> None:
        """Show only what runs on GPU ``gpu`` (None: every GPU)."""
        if gpu != self.scope_gpu:
            self.scope_gpu = gpu
            self.resync()

    def set_tagged(self, pids: frozenset[int]) -> None:
        """Mark the lines of the tagged PIDs (Space), repainting only the lines that change."""
        changed = pids ^ self.tagged
        self.tagged = pids
        if not changed:
            return
        nodes = [
            node
            for key, node in self.nodes_by_key.items()
            if key.startswith("p:")
            and node.data is not None
            and node.data.process is not None
            and node.data.process.pid in changed
        ]
        redraw_tree_nodes(self, nodes)  # drawn again with (or without) the mark

    def toggle_all(self) -> None:
        """``C``: collapse every expanded top-level node, or, when none is, expand them all."""
        nodes = [node for node in self.root.children if node.allow_expand]
        if any(node.is_expanded for node in nodes):
            for node in nodes:
                node.collapse()
        else:
            for node in nodes:
                node.expand()

    def set_filter(self, text: str) -> None:
        """Show only containers (and processes) matching ``text``; empty shows everything."""
        text = text.strip()
        if text != self.filter_text:
            self.filter_text = text
            self.resync()

    def resync(self) -> None:
        """Show the last groups again (after a sort or filter change)."""
        if self._last is not None:
            groups, markers, stale, now = self._last
            self.sync(groups, markers, stale, now)
        elif self.on_view_change is not None:
            self.on_view_change()

    def sync(
        self,
        groups: Sequence[Group],
        markers: Markers | None = None,
        stale: bool = False,
        now: float | None = None,
    ) -> None:
        """Reconcile the tree with a new set of groups (keyed, in place).

        Args:
            groups: From :func:`gputui.derive.tree.build_groups`.
            markers: Sharing and finding markers by subject (see
                :func:`gputui.derive.tree.node_markers`).
            stale: The Docker engine is unreachable: the containers are its last known list.
            now: The snapshot's time: containers' uptime and processes' elapsed time.
        """
        groups = tuple(groups)
        self._last = (groups, markers, stale, now)
        shown = tree_view(groups, self.filter_text, self.sort, self.reverse, now, self.scope_gpu)
        self.total_containers = container_count(groups)
        self.shown_containers = self.total_containers if shown is groups else container_count(shown)
        markers = markers or {}
        cursor = self.cursor_node
        cursor_key = cursor.data.key if cursor is not None and cursor.data else None
        cursor_parent = cursor.parent if cursor is not None else None
        parent_key = cursor_parent.data.key if cursor_parent and cursor_parent.data else None
        self.columns = layout = tree_layout(
            self.label_width(), flags_width(shown, markers, stale), owners_known(shown)
        )
        pending = self._pending_texts(groups)
        items = tuple(_group_item(g, markers, stale, now, layout, pending) for g in shown)
        self._reconcile(self.root, items)
        self._repaint_relabelled()
        if self.on_view_change is not None:
            self.on_view_change()
        if cursor_key is None:
            if self.cursor_line == -1 and self.root.children:
                self.call_after_refresh(self._move_to, self.root.children[0])
            return
        target = self.nodes_by_key.get(cursor_key)
        if target is None and parent_key is not None:
            target = self.nodes_by_key.get(parent_key)  # the process left; stay on its container
        if target is not cursor:
            if target is None and self.root.children:
                target = self.root.children[0]
            self.call_after_refresh(self._move_to, target)

    def _move_to(self, node: TreeNode[NodeRef] | None) -> None:
        if (
            node is not None
            and node.tree is self
            and node.data
            and (self.nodes_by_key.get(node.data.key) is node)
        ):
            self.move_cursor(node)

    def _forget(self, node: TreeNode[NodeRef]) -> None:
        for child in node.children:
            self._forget(child)
        if node.data is not None and self.nodes_by_key.get(node.data.key) is node:
            del self.nodes_by_key[node.data.key]
            self._inputs.pop(node.data.key, None)
            self._row_idents.pop(node.data.key, None)

    def _reconcile(self, parent: TreeNode[NodeRef], items: tuple[_Item, ...]) -> None:
        wanted = {item.ref.key for item in items}
        for old in list(parent.children):
            if old.data is None or old.data.key not in wanted:
                self._forget(old)
                old.remove()
        ordered: list[TreeNode[NodeRef]] = []
        for item in items:
            key = item.ref.key
            node: TreeNode[NodeRef] | None = self.nodes_by_key.get(key)
            if node is not None and node.parent is not parent:
                # Moved to another parent (a container got its first GPU process): re-create it.
                self._forget(node)
                node.remove()
                node = None
            expandable = item.children is not None or item.rows is not None
            if node is None:
                # Added at the end; the reorder below puts it where it belongs.
                node = parent.add(
                    item.build(), item.ref, expand=item.expand, allow_expand=expandable
                )
                self.nodes_by_key[key] = node
                self._inputs[key] = item.inputs
            else:
                node.data = item.ref
                if self._inputs.get(key) != item.inputs:
                    self._inputs[key] = item.inputs
                    self._relabel(node, item.build)
                if node.allow_expand != expandable:
                    node.allow_expand = expandable
            ordered.append(node)
            if item.rows is not None:
                self._sync_rows(node, item.rows)
            elif item.children:
                self._reconcile(node, item.children)
            elif node.children:
                self._reconcile(node, ())  # it lost its children
                self._row_idents.pop(key, None)
            # else a leaf that stays one: nothing under it to reconcile
        children = parent.children
        if any(a is not b for a, b in zip(children, ordered, strict=True)):
            # The order moved (a sort, GPU memory changing places): move the nodes, keeping
            # them (and everything under them) instead of re-creating them.
            # The tree keeps its cursor node, whose line it recomputes when it rebuilds.
            reorder_tree_children(self, parent, ordered)

    def _sync_rows(self, parent: TreeNode[NodeRef], rows: _ProcessRows) -> None:
        """Give a group's process lines their new figures (keyed, in place).

        While the group's processes are the same ones in the same order (the usual refresh),
        its lines only get the new source; otherwise lines are added, removed and reordered by
        key first. Either way labels are built when drawn or read, and the visible lines whose
        figures moved are repainted.
        """
        assert parent.data is not None
        group_key = parent.data.key
        children = parent.children
        if self._row_idents.get(group_key) != rows.ident or len(children) != len(rows.ident):
            keys = [rows.key(i) for i in range(len(rows.processes))]
            wanted = set(keys)
            for old in list(children):
                if old.data is None or old.data.key not in wanted:
                    self._forget(old)
                    old.remove()
            ordered: list[TreeNode[NodeRef]] = []
            new: list[TreeNode[NodeRef]] = []
            for key in keys:
                node = self.nodes_by_key.get(key)
                if node is not None and node.parent is not parent:
                    self._forget(node)  # moved to another group: re-created under this one
                    node.remove()
                    node = None
                if node is None:
                    node = parent.add(Text(), None, allow_expand=False)
                    self.nodes_by_key[key] = node
                    new.append(node)
                ordered.append(node)
            if any(a is not b for a, b in zip(parent.children, ordered, strict=True)):
                reorder_tree_children(self, parent, ordered)
            self._row_idents[group_key] = rows.ident
            attach_rows(ordered, rows)
            for node in new:
                tree_node_label(node)  # built now: the tree measures new lines' widths
            return
        attach_rows(children, rows)
        self._moved_rows.append(children)

    def _relabel(self, node: TreeNode[NodeRef], build: Callable[[], Text]) -> None:
        # TreeNode.set_label queues one call_later per node (12,000 messages a refresh at 2,000
        # processes) and builds the label now: set the label's builder quietly (the label is
        # built when drawn or read, so off-screen lines cost nothing) and repaint the visible
        # ones once, after the reconcile (_repaint_relabelled).
        set_lazy_label(self, node, build)
        self._relabelled.append(node)

    def get_label_width(self, node: TreeNode[NodeRef]) -> int:
        """The width of a node's line as last built (measuring must not build every label).

        A label waiting to be built is measured as it was last built: only its figures moved,
        and they are drawn in fixed-width columns; the tree re-measures when it next rebuilds.
        """
        return EXPANDER_WIDTH + known_label_width(node)

    def _repaint_relabelled(self) -> None:
        changed, self._relabelled = self._relabelled, []
        repaint_tree_nodes(self, changed)
        moved, self._moved_rows = self._moved_rows, []
        if moved:
            repaint_moved_rows(self, chain.from_iterable(moved))

    def render_label(self, node: TreeNode[NodeRef], base_style: Style, style: Style) -> Text:
        """The node's label after its expander, or two blanks on a leaf (columns stay aligned).

        Theme-variable styles are resolved for the current theme.
        """
        label = tree_node_label(node).copy()
        label.stylize(style)
        data = node.data
        if node.allow_expand:
            icon = self.ICON_NODE_EXPANDED if node.is_expanded else self.ICON_NODE
            prefix = Text(icon, style=base_style + TREE_TOGGLE_STYLE)
        elif data is not None and data.process is not None and data.process.pid in self.tagged:
            # A tagged process (Space): its mark where a leaf has no expander, and its line in
            # the tag colour (htop's), so the rows the signal keys will act on stand out.
            prefix = Text(TAG_MARK.ljust(EXPANDER_WIDTH), style=base_style + Style(bold=True))
            label.stylize(TAG_STYLE)
            prefix.stylize(TAG_STYLE)
        else:
            prefix = Text(" " * EXPANDER_WIDTH, style=base_style)
        return themed(Text.assemble(prefix, label))

    def mark_pending(self, usage: ContainerUsage, text: str) -> None:
        """Show ``text`` (``stopping…``) as the container's status from now on.

        Until the engine reports another status or start time (the next refresh after the
        action is done), or :data:`PENDING_SECONDS` pass, whichever comes first.
        """
        info = usage.info
        deadline = time.monotonic() + PENDING_SECONDS
        self.pending[info.id] = (text, (info.status, info.started_at), deadline)
        self.resync()

    def clear_pending(self, container_id: str) -> None:
        """The action on the container is over: its row shows the engine's status again."""
        if self.pending.pop(container_id, None) is not None:
            self.resync()

    def _pending_texts(self, groups: Sequence[Group]) -> dict[str, str]:
        if not self.pending:
            return {}
        usages: dict[str, ContainerUsage] = {}
        for group in flat(groups):
            if group.usage is not None:
                usages[group.usage.info.id] = group.usage
            for usage in group.containers:
                usages[usage.info.id] = usage
        now = time.monotonic()
        shown: dict[str, str] = {}
        for cid, (text, before, deadline) in list(self.pending.items()):
            now_usage = usages.get(cid)
            moved = now_usage is not None and (
                (now_usage.info.status, now_usage.info.started_at) != before
            )
            if moved or now > deadline:
                del self.pending[cid]
            else:
                shown[cid] = text
        return shown

    def selected_markers(self) -> tuple[Marker, ...]:
        """The markers of the row under the cursor (their whole texts, for the flags line)."""
        ref = self.selected
        if ref is None or self._last is None:
            return ()
        markers = self._last[1] or {}
        if ref.kind == "process" and ref.process is not None:
            return markers.get(f"pid:{ref.process.pid}", ())
        if ref.kind == "container" and ref.container is not None:
            return markers.get(f"container:{ref.container.info.id}", ())
        if ref.kind in ("host", "orphans"):
            return markers.get(HOST_KEY if ref.kind == "host" else ORPHANS_KEY, ())
        return ()

    def action_scroll_left(self) -> None:
        """← : :data:`SIDE_STEP` columns left (one at a time crawls along a command)."""
        self.scroll_to(x=max(0, self.scroll_x - SIDE_STEP), animate=False)

    def action_scroll_right(self) -> None:
        """→ : :data:`SIDE_STEP` columns right."""
        self.scroll_to(x=min(self.max_scroll_x, self.scroll_x + SIDE_STEP), animate=False)

    def label_width(self) -> int | None:
        """Cells a label may use: the tree's width less the expander and the scrollbar.

        The scrollbar's cells are always kept: counting them only while it shows would change
        the labels, and so the rows, each time it appears.
        """
        width = self.size.width
        if width <= 0:
            return None
        return max(1, width - EXPANDER_WIDTH - self.styles.scrollbar_size_vertical)

    def on_resize(self) -> None:
        """A new width: fit the columns again (labels are rebuilt for the new layout)."""
        width = self.label_width()
        if width != self._sized_for:
            self._sized_for = width
            self.resync()

    def watch_scroll_x(self, old_value: float, new_value: float) -> None:
        """Scrolled sideways: the column titles follow."""
        super().watch_scroll_x(old_value, new_value)
        if self.on_view_change is not None and round(old_value) != round(new_value):
            self.on_view_change()


class ContainerPane(Vertical):
    """The filter input, a status line (sort, filter, counts), the column titles, the tree."""

    DEFAULT_CSS = """
    ContainerPane #tree-filter { height: 3; margin: 0; }
    ContainerPane #tree-status { height: 1; padding: 0 1; }
    ContainerPane #tree-header { height: 1; text-style: bold; background: $surface; }
    ContainerPane #tree-flags { height: 1; padding: 0 1; background: $surface; }
    """

    def __init__(self, tree: ContainerTree, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.ctree = tree
        self.filter_input = Input(
            placeholder="filter containers: name, image, compose, pod, process command or user",
            id="tree-filter",
        )
        self.status = Static("", id="tree-status")
        self.header = Static("", id="tree-header")
        self.empty = EmptyNote(id="tree-empty")
        #: The selected row's flags in full (``SHARED shared GPU 1: 75%``), under the tree.
        self.flags = Static("", id="tree-flags")
        self._flags_shown: tuple[Marker, ...] | None = None
        self._why_empty: Content | None = None
        self._shown: tuple[str, Content] | None = None
        self._header_x: tuple[int, TreeLayout] | None = None
        tree.on_view_change = self.refresh_status

    def compose(self) -> ComposeResult:
        """Filter (hidden until ``/``), status line, column titles, tree."""
        yield self.filter_input
        yield self.status
        yield self.header
        yield self.empty
        yield self.ctree
        yield self.flags

    def show_empty(self, why: Content | None) -> None:
        """Why the tree has no row before any filter (None: it has rows); shown while empty.

        Args:
            why: From :func:`gputui.ui.empty_states.containers_empty`.
        """
        self._why_empty = why
        self.refresh_status()

    def on_mount(self) -> None:
        """The filter input stays hidden until asked for."""
        self.filter_input.display = False
        self.flags.display = False
        self.refresh_status()

    def refresh_status(self) -> None:
        """Show the sort, the filter and the counts; the titles follow the tree's scroll."""
        tree = self.ctree
        needle = tree.filter_text
        counts = f"{tree.shown_containers} of {tree.total_containers} containers"
        parts: list[tuple[str, str] | str] = [
            ("sort ", "$text-muted"),
            (tree.sort_label, "bold"),
            (f"  ·  {counts}", "$text-muted"),
        ]
        tagged = len(tree.tagged)
        parts += scope_parts(tree.scope_gpu, tagged)
        if needle:
            parts.append((f"  ·  filter “{sanitise.safe_text(needle, 60)}”", "$text-warning"))
        parts.append((f"   ({key_hint(tree.scope_gpu, tagged)})", "$text-muted"))
        key = "".join(p if isinstance(p, str) else p[0] for p in parts)
        # The default order needs no line of its own (the titles say what the rows are): the
        # status shows once a sort or a filter is chosen, as the tree has few rows to spare.
        chosen = (
            bool(needle)
            or tree.sort_index != 0
            or tree.reverse
            or tree.scope_gpu is not None
            or bool(tagged)
        )
        if self.status.display != chosen:
            self.status.display = chosen
        if self._shown is None or self._shown[0] != key:
            content = Content.assemble(*parts)
            self._shown = (key, content)
            self.status.update(content)
        self._show_empty()
        self.refresh_flags()
        x = round(tree.scroll_x)
        if (x, tree.columns) != self._header_x:
            self._header_x = (x, tree.columns)
            self.header.update(Content(header_text(tree.columns)[x:]))

    def refresh_flags(self) -> None:
        """Show the selected row's flags in full under the tree (hidden when it has none)."""
        markers = self.ctree.selected_markers()
        if markers == self._flags_shown:
            return
        self._flags_shown = markers
        self.flags.display = bool(markers)
        parts: list[tuple[str, str] | str] = []
        for marker in markers:
            if parts:
                parts.append(("  ·  ", "$text-muted"))
            parts += [(marker.badge or "•", "bold"), " ", marker.text]
        self.flags.update(Content.assemble(*parts))

    @property
    def flags_text(self) -> str:
        """The flags line as shown (empty while hidden)."""
        return " · ".join(m.text for m in self._flags_shown or ()) if self.flags.display else ""

    def _show_empty(self) -> None:
        tree = self.ctree
        titled = bool(tree.root.children) or bool(tree.filter_text)
        if self.header.display != titled:
            self.header.display = titled
        if tree.root.children:
            self.empty.show(None)
        elif not tree.filter_text and tree.scope_gpu is not None and self._why_empty is None:
            self.empty.show(scoped_empty(tree.scope_gpu, tree.total_containers, "containers"))
        elif tree.filter_text and self._why_empty is None:
            shown = sanitise.safe_text(tree.filter_text, 40)
            self.empty.show(
                Content.assemble(
                    ("Nothing matches ", "bold"),
                    (f"“{shown}”", "bold $text-warning"),
                    f" (of {tree.total_containers} containers and their processes).",
                    "\n",
                    ("/ edits the filter, Escape clears it", "$text-muted"),
                )
            )
        else:
            self.empty.show(self._why_empty)

    @property
    def status_text(self) -> str:
        """The status line as shown (for tests)."""
        return self._shown[0] if self._shown is not None else ""

    @property
    def header_line(self) -> str:
        """The column titles as shown."""
        return header_text(self.ctree.columns)[round(self.ctree.scroll_x) :]

    def open_filter(self) -> None:
        """``/``: show and focus the filter input (at once: see ``open_process_filter``)."""
        self.filter_input.display = True
        self.screen.set_focus(self.filter_input)

    def close_filter(self) -> bool:
        """Escape: clear and hide the filter; True when there was one to close."""
        if not (self.filter_input.has_focus or self.filter_input.display):
            return False
        self.filter_input.value = ""
        self.filter_input.display = False
        self.ctree.set_filter("")
        self.ctree.focus()
        return True

    def on_input_changed(self, event: Input.Changed) -> None:
        """Filter as you type."""
        if event.input is self.filter_input:
            event.stop()
            self.ctree.set_filter(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter keeps the filter and returns to the tree (an empty one hides the input)."""
        if event.input is self.filter_input:
            event.stop()
            if not event.value.strip():
                self.filter_input.display = False
            self.ctree.focus()
