"""The Containers tab: container → its GPU processes, reconciled in place on every refresh.

Node identity is a key (``c:<container id>``, ``p:<pid>:<gpu>``, ``g:host``...), so a refresh
updates labels in place, keeps expansion and the cursor, removes vanished nodes and inserts new
ones where they belong; nothing is rebuilt from scratch. Every untrusted string goes through
``fmt.safe_text`` into a Rich ``Text`` (never markup), so names and commands cannot inject styles
or terminal sequences.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from rich.text import Span, Text
from textual.binding import Binding
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from gputui.derive import fmt
from gputui.derive.tree import HOST_KEY, ORPHANS_KEY, Group, GroupKind, Marker, Markers, process_key
from gputui.model import ContainerUsage, GpuProcess

ERROR = "bold red"
#: Shown on every container (and the others group) while the Docker engine is unreachable: the
#: collector keeps the last container list, which must not pass for live.
STALE_TEXT = "[engine unreachable: last known]"
WARN = "bold dark_orange"
MUTED = "dim"
EMPH = "bold"


@dataclass(frozen=True, slots=True)
class NodeRef:
    """What a tree node stands for.

    Attributes:
        key: Stable identity across refreshes.
        kind: ``container``, ``process``, ``host``, ``orphans`` or ``others``.
        container: The container of this node (or of this process), if any.
        process: The process of a process node.
    """

    key: str
    kind: str
    container: ContainerUsage | None = None
    process: GpuProcess | None = None


@dataclass(frozen=True, slots=True)
class _Item:
    ref: NodeRef
    # Every raw value the label is built from: a node whose inputs are unchanged keeps its
    # label, so a refresh builds (and repaints) labels only for nodes whose figures moved.
    inputs: tuple[object, ...]
    build: Callable[[], Text]
    children: tuple[_Item, ...] | None = None  # None: a leaf
    expand: bool = True


#: What ``Text.append`` strips (rich.control.strip_control_codes): bell, backspace, VT, FF, CR.
_STRIPPED = frozenset("\x07\x08\x0b\x0c\x0d")


def _sep(parts: list[tuple[str, str] | str], dim: bool = False) -> Text:
    """``Text.assemble(*parts, no_wrap=True, overflow="ellipsis")``, built in one go.

    ``Text.assemble`` appends part by part (15 appends, each stripping control codes); a label is
    rebuilt for every moving node on every refresh, so join once and place the spans directly.
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


def container_inputs(
    usage: ContainerUsage,
    memory: int | None,
    sm: int | None,
    markers: tuple[Marker, ...],
    stale: bool = False,
) -> tuple[object, ...]:
    """What :func:`container_label` reads (not CPU/memory figures that move every refresh)."""
    info = usage.info
    return (
        stale,
        info.name,
        usage.known_to_engine,
        usage.idle_reserved,
        markers,
        info.status,
        info.running,
        info.gpu_request,
        bool(usage.pids),
        memory,
        sm,
        info.image,
        info.compose_project,
        info.compose_service,
        info.k8s_pod,
        info.k8s_namespace,
    )


def process_inputs(process: GpuProcess, markers: tuple[Marker, ...]) -> tuple[object, ...]:
    """What :func:`process_label` reads."""
    info, sample = process.info, process.sample
    return (
        process.pid,
        info.container_pid,
        info.exists,
        sample.gpu_index,
        sample.used_memory_bytes,
        info.user,
        sample.sm_util,
        info.cpu_percent,
        markers,
        info.rss_bytes,
        info.command,
        info.name,
    )


#: Marker severity -> style.
MARKER_STYLE = {"fail": ERROR, "warn": WARN, "info": "bold cyan"}


def marker_parts(markers: tuple[Marker, ...]) -> list[tuple[str, str] | str]:
    """``  [shared GPU 1: 75%]  [CPU throttled 45%]``: one bracketed flag per marker."""
    parts: list[tuple[str, str] | str] = []
    for marker in markers:
        parts += ["  ", (f"[{marker.text}]", MARKER_STYLE.get(marker.severity, WARN))]
    return parts


def container_label(
    group_usage: ContainerUsage,
    memory: int | None,
    sm: int | None,
    markers: tuple[Marker, ...] = (),
    stale: bool = False,
) -> Text:
    """``name  [markers]  status  GPU all  13.0GiB  SM 60%  image  project/service``.

    Markers and numbers come first so a narrow terminal cuts the image, not the facts. The
    idle marker comes from the findings (with how long) when they ran, else from the snapshot.
    ``stale``: the engine is unreachable and this is its last known list: the row is dimmed and
    says so (a cgroup-only container is not from the engine and stays as it is).
    """
    info = group_usage.info
    stale = stale and group_usage.known_to_engine
    parts: list[tuple[str, str] | str] = [(fmt.safe_text(info.name, 40), EMPH)]
    if stale:
        parts += ["  ", (STALE_TEXT, MUTED)]
    if not group_usage.known_to_engine:
        parts += ["  ", ("[cgroup only: not known to Docker]", WARN)]
    if group_usage.idle_reserved and not any(m.kind == "idle_reservation" for m in markers):
        parts += ["  ", ("[idle: reserved GPU, no GPU process]", WARN)]
    parts += marker_parts(markers)
    status = fmt.safe_text(info.status, 12)
    parts += ["  ", (status, MUTED if info.running else WARN)]
    if info.gpu_request is not None:
        parts += [("  GPU ", MUTED), fmt.safe_text(fmt.gpu_request(info.gpu_request), 24)]
    if group_usage.pids:
        parts += ["  ", (fmt.size(memory), EMPH), ("  SM ", MUTED), fmt.pct(sm)]
    if info.image:
        parts += ["  ", (fmt.safe_text(info.image, 40), MUTED)]
    if info.compose_service:
        project = fmt.safe_text(info.compose_project, 24, na="")
        service = fmt.safe_text(info.compose_service, 24)
        parts += ["  ", (f"{project}/{service}" if project else service, "italic")]
    if info.k8s_pod:
        namespace = fmt.safe_text(info.k8s_namespace, 24, na="")
        pod = fmt.safe_text(info.k8s_pod, 40)
        parts += ["  ", (f"pod {namespace}/{pod}" if namespace else f"pod {pod}", "italic")]
    return _sep(parts, dim=stale)


def process_label(process: GpuProcess, markers: tuple[Marker, ...] = ()) -> Text:
    """``611 (1)  root  GPU 0  13290MiB  SM 60%  CPU 12%  [markers]  RSS 512MiB  python3 …``."""
    info, sample = process.info, process.sample
    parts: list[tuple[str, str] | str] = [(str(process.pid), EMPH)]
    if info.container_pid is not None and info.container_pid != process.pid:
        parts += [(f" ({info.container_pid})", MUTED)]
    if not info.exists:
        parts += [
            ("  GPU ", MUTED),
            str(sample.gpu_index),
            "  ",
            (fmt.mib(sample.used_memory_bytes), EMPH),
            ("  PID not found: memory held by a process nobody can see", ERROR),
        ]
        return _sep(parts)
    parts += [
        "  ",
        (fmt.safe_text(info.user, 16, na="?"), MUTED),
        ("  GPU ", MUTED),
        str(sample.gpu_index),
        "  ",
        (fmt.mib(sample.used_memory_bytes), EMPH),
        ("  SM ", MUTED),
        fmt.pct(sample.sm_util),
        ("  CPU ", MUTED),
        fmt.pct(info.cpu_percent),
        *marker_parts(markers),
        ("  RSS ", MUTED),
        fmt.size(info.rss_bytes),
        "  ",
        fmt.safe_text(info.command or info.name, 120, na="?"),
    ]
    return _sep(parts)


def _process_item(usage: ContainerUsage | None, process: GpuProcess, markers: Markers) -> _Item:
    mine = markers.get(f"pid:{process.pid}", ())
    return _Item(
        NodeRef(f"p:{process_key(process)}", "process", usage, process),
        process_inputs(process, mine),
        partial(process_label, process, mine),
    )


def _container_item(
    usage: ContainerUsage,
    memory: int | None,
    sm: int | None,
    markers: Markers,
    children: tuple[_Item, ...] | None,
    stale: bool = False,
) -> _Item:
    mine = markers.get(f"container:{usage.info.id}", ())
    return _Item(
        NodeRef(f"c:{usage.info.id}", "container", usage),
        container_inputs(usage, memory, sm, mine, stale),
        partial(container_label, usage, memory, sm, mine, stale),
        children,
    )


def _host_label(count: int, memory: int | None, sm: int | None, mine: tuple[Marker, ...]) -> Text:
    return _sep(
        [
            ("host", EMPH),
            ("  processes outside containers: ", MUTED),
            str(count),
            "  ",
            (fmt.size(memory), EMPH),
            ("  SM ", MUTED),
            fmt.pct(sm),
            *marker_parts(mine),
        ]
    )


def _orphans_label(count: int, memory: int | None, mine: tuple[Marker, ...]) -> Text:
    return _sep(
        [
            ("unfindable GPU memory", ERROR),
            "  ",
            (fmt.size(memory), EMPH),
            *marker_parts(mine),
            (f"  held by {count} PID{'s' if count != 1 else ''} not visible here", MUTED),
        ]
    )


def _others_label(count: int, stale: bool = False) -> Text:
    parts: list[tuple[str, str] | str] = [("other containers", EMPH)]
    if stale:
        parts += ["  ", (STALE_TEXT, MUTED)]
    parts.append((f"  {count} without GPU use", MUTED))
    return _sep(parts, dim=stale)


def _group_item(group: Group, markers: Markers, stale: bool = False) -> _Item:
    children = tuple(_process_item(group.usage, p, markers) for p in group.processes)
    if group.kind is GroupKind.CONTAINER and group.usage is not None:
        # The group key is the container id, so this is the node key c:<group.key>.
        memory, sm = group.gpu_memory_bytes, group.sm_util
        return _container_item(group.usage, memory, sm, markers, children or None, stale)
    count = len(group.processes)
    memory, sm = group.gpu_memory_bytes, group.sm_util
    if group.kind is GroupKind.HOST:
        mine = markers.get(HOST_KEY, ())
        build = partial(_host_label, count, memory, sm, mine)
        return _Item(NodeRef("g:host", "host"), (count, memory, sm, mine), build, children)
    if group.kind is GroupKind.ORPHANS:
        mine = markers.get(ORPHANS_KEY, ())
        build = partial(_orphans_label, count, memory, mine)
        return _Item(NodeRef("g:orphans", "orphans"), (count, memory, mine), build, children)
    others = tuple(_container_item(u, None, None, markers, None, stale) for u in group.containers)
    build = partial(_others_label, len(others), stale)
    inputs = (len(others), stale)
    return _Item(NodeRef("g:others", "others"), inputs, build, others, expand=False)


class ContainerTree(Tree[NodeRef]):
    """Containers and their GPU processes, with vim-style movement keys."""

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("g", "scroll_home", "First", show=False),
        Binding("G", "scroll_end", "Last", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("containers", id=id)
        self.show_root = False
        self.guide_depth = 3
        self.nodes_by_key: dict[str, TreeNode[NodeRef]] = {}
        self._inputs: dict[str, tuple[object, ...]] = {}
        self._relabelled: list[TreeNode[NodeRef]] = []

    @property
    def selected(self) -> NodeRef | None:
        """The node under the cursor, if any."""
        node = self.cursor_node
        return None if node is None else node.data

    def sync(
        self, groups: Sequence[Group], markers: Markers | None = None, stale: bool = False
    ) -> None:
        """Reconcile the tree with a new set of groups (keyed, in place).

        Args:
            groups: From :func:`gputui.derive.tree.build_groups`.
            markers: Sharing and finding markers by subject (see
                :func:`gputui.derive.tree.node_markers`).
            stale: The Docker engine is unreachable: the containers are its last known list.
        """
        markers = markers or {}
        cursor = self.cursor_node
        cursor_key = cursor.data.key if cursor is not None and cursor.data else None
        cursor_parent = cursor.parent if cursor is not None else None
        parent_key = cursor_parent.data.key if cursor_parent and cursor_parent.data else None
        self._reconcile(self.root, tuple(_group_item(g, markers, stale) for g in groups))
        self._repaint_relabelled()
        if cursor_key is None:
            if self.cursor_line == -1 and self.root.children:
                self.call_after_refresh(self._move_to, self.root.children[0])
            return
        target = self.nodes_by_key.get(cursor_key)
        if target is None and parent_key is not None:
            target = self.nodes_by_key.get(parent_key)  # the process left; stay on its container
        if target is not cursor:
            if target is None and self.root.children:
                target = self.root.children[min(len(self.root.children) - 1, 0)]
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

    def _reconcile(self, parent: TreeNode[NodeRef], items: tuple[_Item, ...]) -> None:
        wanted = {item.ref.key for item in items}
        for old in list(parent.children):
            if old.data is None or old.data.key not in wanted:
                self._forget(old)
                old.remove()
        for position, item in enumerate(items):
            key = item.ref.key
            children = parent.children
            node: TreeNode[NodeRef] | None = self.nodes_by_key.get(key)
            if node is not None and node.parent is not parent:
                # Moved to another parent (a container got its first GPU process): re-create it.
                self._forget(node)
                node.remove()
                node = None
            expand = item.expand
            if node is not None and (position >= len(children) or children[position] is not node):
                expand = node.is_expanded
                self._forget(node)
                node.remove()
                node = None
            if node is None:
                before = position if position < len(parent.children) else None
                node = parent.add(
                    item.build(),
                    item.ref,
                    before=before,
                    expand=expand,
                    allow_expand=item.children is not None,
                )
                self.nodes_by_key[key] = node
                self._inputs[key] = item.inputs
            else:
                node.data = item.ref
                if self._inputs.get(key) != item.inputs:
                    self._inputs[key] = item.inputs
                    self._relabel(node, item.build())
                if node.allow_expand != (item.children is not None):
                    node.allow_expand = item.children is not None
            self._reconcile(node, item.children or ())

    def _relabel(self, node: TreeNode[NodeRef], label: Text) -> None:
        # TreeNode.set_label queues one call_later per node, each scanning the visible lines
        # (12,000 messages a refresh at 2,000 processes). Set the label and bump the node's
        # render-cache counter the way set_label does, and repaint the visible ones once, after
        # the reconcile (_repaint_relabelled). Labels are single-line (safe_text), so the
        # first-line cut Tree.process_label makes is needed only for multi-line text.
        node._label = label if "\n" not in label.plain else self.process_label(label)
        node._updates += 1
        self._relabelled.append(node)

    def _repaint_relabelled(self) -> None:
        changed, self._relabelled = self._relabelled, []
        lines = self._tree_lines_cached
        if lines is None:
            return  # the structure changed: the whole tree is rebuilt and repainted anyway
        top, height = self.scroll_offset.y, self.size.height
        for node in changed:
            # Only lines on screen; a node off screen or under a collapsed parent is drawn from
            # its new label when it is scrolled to or expanded (its render cache key changed).
            line = node._line
            if top <= line < top + height and line < len(lines) and lines[line].node is node:
                self._refresh_line(line)
