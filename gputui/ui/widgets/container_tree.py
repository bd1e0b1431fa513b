"""The Containers tab: container → its GPU processes, reconciled in place on every refresh.

Node identity is a key (``c:<container id>``, ``p:<pid>:<gpu>``, ``g:host``...), so a refresh
updates labels in place, keeps expansion and the cursor, removes vanished nodes and inserts new
ones where they belong; nothing is rebuilt from scratch. The labels are built in
:mod:`gputui.ui.widgets.tree_labels` (untrusted strings through ``fmt.safe_text``, never markup).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from gputui.derive.tree import HOST_KEY, ORPHANS_KEY, Group, GroupKind, Markers, process_key
from gputui.model import ContainerUsage, GpuProcess
from gputui.ui.styles import themed
from gputui.ui.textual_compat import repaint_tree_nodes, set_tree_node_label
from gputui.ui.widgets.tree_labels import (
    STALE_TEXT,
    container_inputs,
    container_label,
    host_label,
    orphans_label,
    others_label,
    process_inputs,
    process_label,
)


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
        build = partial(host_label, count, memory, sm, mine)
        return _Item(NodeRef("g:host", "host"), (count, memory, sm, mine), build, children)
    if group.kind is GroupKind.ORPHANS:
        mine = markers.get(ORPHANS_KEY, ())
        build = partial(orphans_label, count, memory, mine)
        return _Item(NodeRef("g:orphans", "orphans"), (count, memory, mine), build, children)
    others = tuple(_container_item(u, None, None, markers, None, stale) for u in group.containers)
    build = partial(others_label, len(others), stale)
    inputs = (len(others), stale)
    return _Item(NodeRef("g:others", "others"), inputs, build, others, expand=False)


__all__ = ["STALE_TEXT", "ContainerTree", "NodeRef"]


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
        # TreeNode.set_label queues one call_later per node (12,000 messages a refresh at 2,000
        # processes): set the labels quietly and repaint the visible ones once, after the
        # reconcile (_repaint_relabelled).
        set_tree_node_label(self, node, label)
        self._relabelled.append(node)

    def _repaint_relabelled(self) -> None:
        changed, self._relabelled = self._relabelled, []
        repaint_tree_nodes(self, changed)

    def render_label(self, node: TreeNode[NodeRef], base_style: Style, style: Style) -> Text:
        """The node's label with its theme-variable styles resolved for the current theme."""
        return themed(super().render_label(node, base_style, style))
