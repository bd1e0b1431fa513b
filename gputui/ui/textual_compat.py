"""The only place gputui touches Textual's private attributes, each behind a small function.

The container tree refreshes thousands of labels a second; the public call for that
(``TreeNode.set_label``) schedules one repaint per label, which dominated refresh cost on big
hosts. These functions do the same work in bulk through Textual internals.
``tests/ui/test_textual_compat.py`` checks every attribute used here exists and behaves as these
functions expect, so a Textual upgrade that changes them fails there, loudly, instead of leaving
stale labels on screen. (The process table draws its own lines through Textual's public line
API, ``ScrollView.render_line``, and needs none of them.)

Checked against Textual 8.2.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, Protocol, TypeVar

from rich.console import RenderableType
from rich.style import Style
from rich.text import Text
from textual.app import App
from textual.binding import Binding, BindingType
from textual.dom import DOMNode
from textual.geometry import Region
from textual.strip import Strip
from textual.widgets import Tree
from textual.widgets._tree import TOGGLE_STYLE
from textual.widgets.tree import TreeNode

#: The style Textual's Tree gives a node's expander so a click on it toggles the node (a
#: ``render_label`` drawing its own expander must carry it too).
TREE_TOGGLE_STYLE = TOGGLE_STYLE


def tree_node_label(node: TreeNode[Any]) -> Text:
    """The label a node draws (``TreeNode._label``; the public ``label`` returns the same)."""
    label: Text = node._label
    return label


def set_tree_node_label(tree: Tree[Any], node: TreeNode[Any], label: Text) -> None:
    """Give ``node`` a new label without scheduling a repaint (see :func:`repaint_tree_nodes`).

    ``TreeNode.set_label`` queues one ``call_later`` per node, each scanning the visible lines.
    This sets the label and bumps the node's render-cache counter (``_updates``) as
    ``set_label`` does. Multi-line text gets the first-line cut ``Tree.process_label`` makes.
    """
    node._label = label if "\n" not in label.plain else tree.process_label(label)
    node._updates += 1


def repaint_tree_nodes(tree: Tree[Any], nodes: Iterable[TreeNode[Any]]) -> None:
    """Repaint the lines of ``nodes`` that are on screen, once each.

    A node off screen or under a collapsed parent is drawn from its new label when it is
    scrolled to or expanded (its render-cache key changed). When the tree's line cache is gone
    (its structure changed) the whole tree is rebuilt and repainted anyway: nothing to do.
    """
    lines = tree._tree_lines_cached
    if lines is None:
        return
    top, height = tree.scroll_offset.y, tree.size.height
    for node in nodes:
        line = node._line
        if top <= line < top + height and line < len(lines) and lines[line].node is node:
            tree._refresh_line(line)


def redraw_tree_nodes(tree: Tree[Any], nodes: Sequence[TreeNode[Any]]) -> None:
    """Draw ``nodes`` again though their labels are unchanged (what ``render_label`` adds moved).

    Bumps each node's render-cache counter (``_updates``, as ``set_label`` does), then repaints
    the lines of those on screen (:func:`repaint_tree_nodes`).
    """
    for node in nodes:
        node._updates += 1
    repaint_tree_nodes(tree, nodes)


NodeData = TypeVar("NodeData")
NodeData_co = TypeVar("NodeData_co", covariant=True)


class RowSource(Protocol[NodeData_co]):
    """The current figures behind a run of sibling lines (one group's processes).

    A refresh gives the lines a new source in one cheap pass (:func:`attach_rows`); each line
    asks it for its inputs, label and data only when it is drawn or read.
    """

    def row_inputs(self, index: int) -> tuple[object, ...]:
        """Every raw value line ``index``'s label is built from."""
        ...

    def row_label(self, index: int) -> Text:
        """Line ``index``'s label."""
        ...

    def row_data(self, index: int) -> NodeData_co:
        """Line ``index``'s node data."""
        ...


class LazyLabelNode(TreeNode[NodeData], Generic[NodeData]):
    """A tree node whose new label is built when it is first read, not when it is set.

    Every read of the label goes through ``TreeNode._label`` (drawing, ``label``, measuring),
    so a label set with :func:`set_lazy_label` is built only once something needs it: at 2,000
    processes whose figures all move, the lines on screen, not 2,000 labels a refresh.

    A node can also draw from a :class:`RowSource` (:func:`attach_rows`): then its label and its
    ``data`` come from the source's line ``index`` when read, the label rebuilt only when the
    line's inputs moved.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._build: Callable[[], Text] | None = None
        self._text = Text()
        self._source: RowSource[NodeData] | None = None
        self._index = 0
        self._label_from: RowSource[NodeData] | None = None  # the source _text was checked against
        self._inputs: tuple[object, ...] | None = None
        self._data_from: RowSource[NodeData] | None = None
        self._data: NodeData | None = None
        super().__init__(*args, **kwargs)

    @property  # TreeNode keeps the label in a plain attribute: every read comes here
    def _label(self) -> Text:
        build = self._build
        if build is not None:
            self._build = None
            self._set_text(build())
        source = self._source
        if source is not None and self._label_from is not source:
            self._label_from = source
            inputs = source.row_inputs(self._index)
            if inputs != self._inputs:
                self._inputs = inputs
                self._set_text(source.row_label(self._index))
        return self._text

    @_label.setter
    def _label(self, label: Text) -> None:
        self._build = None
        self._source = self._label_from = self._data_from = None
        self._inputs = None
        self._text = label

    def _set_text(self, label: Text) -> None:
        self._text = label if "\n" not in label.plain else self._tree.process_label(label)

    @property  # TreeNode.data is a plain attribute too; a row's data is the source's, when read
    def data(self) -> NodeData | None:
        """The node's data (a row's, from its source, when it has one)."""
        source = self._source
        if source is not None and self._data_from is not source:
            self._data_from = source
            self._data = source.row_data(self._index)
        return self._data

    @data.setter
    def data(self, data: NodeData | None) -> None:
        self._data = data
        self._data_from = self._source

    @property
    def known_width(self) -> int:
        """The label's width as last built, without building a pending one."""
        return self._text.cell_len

    @property
    def pending(self) -> bool:
        """Whether a label was set (or a new source attached) that has not been built yet."""
        return self._build is not None or (
            self._source is not None and self._label_from is not self._source
        )

    def row_moved(self) -> bool:
        """Whether the attached source's inputs for this line differ from those last drawn."""
        source = self._source
        if source is None or self._label_from is source:
            return False
        return source.row_inputs(self._index) != self._inputs


class LazyLabelTree(Tree[NodeData], Generic[NodeData]):
    """A ``Tree`` whose nodes are :class:`LazyLabelNode` (``Tree._add_node`` makes them)."""

    #: The widget's style while a frame's lines are rendered (:meth:`render_lines`).
    _frame_style: Style | None = None

    def _add_node(
        self,
        parent: TreeNode[NodeData] | None,
        label: Text,
        data: NodeData | None,
        expand: bool = False,
    ) -> TreeNode[NodeData]:
        # What Tree._add_node does (its node map, its id counter, its update count).
        node: LazyLabelNode[NodeData] = LazyLabelNode(
            self, parent, self._new_id(), label, data, expanded=expand
        )
        self._tree_nodes[node._id] = node
        self._updates += 1
        return node

    def render_lines(self, crop: Region) -> list[Strip]:
        """The lines in ``crop``; the widget's style is computed once for all of them.

        ``Tree.render_line`` asks for ``rich_style`` (a walk over every ancestor's styles, about
        0.13 ms) for each line it renders, and a refresh renders each changed line: the style
        cannot change between two lines of one frame.
        """
        self._frame_style = self.rich_style
        try:
            return super().render_lines(crop)
        finally:
            self._frame_style = None

    def render_line(self, y: int) -> Strip:
        """One line, as ``Tree.render_line`` draws it, with the frame's style (see above)."""
        style = self._frame_style or self.rich_style
        scroll_x, scroll_y = self.scroll_offset
        return self._render_line(y + scroll_y, scroll_x, scroll_x + self.size.width, style)


def set_lazy_label(tree: Tree[Any], node: TreeNode[Any], build: Callable[[], Text]) -> None:
    """Give ``node`` the label ``build`` returns, built when first read; no repaint scheduled.

    A node that is not a :class:`LazyLabelNode` gets the label now. The node's render-cache
    counter (``_updates``) is bumped as ``set_label`` does; repaint with :func:`repaint_tree_nodes`.
    """
    if isinstance(node, LazyLabelNode):
        node._build = build
        node._updates += 1
    else:
        set_tree_node_label(tree, node, build())


def attach_rows(nodes: Iterable[TreeNode[NodeData]], source: RowSource[NodeData]) -> None:
    """Make ``nodes[i]`` draw line ``i`` of ``source`` from now on (built when read).

    Bumps each node's render-cache counter (``_updates``), so a line drawn before is drawn again
    from the new source when it is next painted; repaint the ones on screen that moved with
    :func:`repaint_moved_rows`. A node that is not a :class:`LazyLabelNode` gets its label and
    data now.
    """
    for index, node in enumerate(nodes):
        if isinstance(node, LazyLabelNode):
            node._source = source
            node._index = index
            node._updates += 1
        else:
            node.data = source.row_data(index)
            node._label = source.row_label(index)
            node._updates += 1


def repaint_moved_rows(tree: Tree[Any], nodes: Iterable[TreeNode[Any]]) -> None:
    """Repaint the lines of ``nodes`` on screen whose source inputs moved since last drawn."""
    lines = tree._tree_lines_cached
    if lines is None:
        return  # the structure changed: the whole tree is rebuilt and repainted anyway
    top, height = tree.scroll_offset.y, tree.size.height
    for node in nodes:
        line = node._line
        if (
            top <= line < top + height
            and line < len(lines)
            and lines[line].node is node
            and isinstance(node, LazyLabelNode)
            and node.row_moved()
        ):
            tree._refresh_line(line)


def known_label_width(node: TreeNode[Any]) -> int:
    """A node's label width without building a pending label (its last built width)."""
    if isinstance(node, LazyLabelNode):
        return node.known_width
    return tree_node_label(node).cell_len


def reorder_tree_children(
    tree: Tree[Any], parent: TreeNode[Any], children: Sequence[TreeNode[Any]]
) -> None:
    """Put ``parent``'s children (the same nodes) in the order of ``children``.

    Textual has no call to move a node: removing and re-adding a container re-creates it and
    every process under it, on every refresh the sort order moves (a CPU sort moves it all the
    time). This reorders the child list (``TreeNode._children``) in place and drops the tree's
    line caches once, as ``TreeNode.remove`` does (``Tree._invalidate``).
    """
    if len(children) != len(parent._children) or {id(c) for c in children} != {
        id(c) for c in parent._children
    }:
        raise ValueError("reorder_tree_children takes exactly the parent's children")
    parent._children[:] = children
    tree._invalidate()


def end_app_after_crash(app: App[Any], error: Exception, report: RenderableType) -> None:
    """What Textual's ``App._handle_exception`` does, with our report instead of its traceback.

    Exit status 1 (``_return_code``), the error kept for ``run_test`` to re-raise
    (``_exception``, ``_exception_event``), ``report`` printed after the app's screen is gone
    (``_exit_renderables``), and the message queues closed (``_close_messages_no_wait``).
    """
    app._return_code = 1
    if app._exception is None:
        app._exception = error
        app._exception_event.set()
    app._exit_renderables.append(report)
    app._close_messages_no_wait()


def bind_on_instance(node: DOMNode, bindings: Iterable[BindingType]) -> None:
    """Add ``bindings`` to one node, not its class (``DOMNode._bindings``, a per-instance copy).

    The tab keys come from the tab table the app is given, so they cannot be class
    ``BINDINGS``. Textual builds every key lookup (and applies the keymap, so ``[keys]`` can
    move them) from ``node._bindings``.
    """
    keys = node._bindings.key_to_bindings
    for binding in Binding.make_bindings(bindings):
        # A new list: the instance's map shares its lists with the class's merged bindings.
        keys[binding.key] = [*keys.get(binding.key, ()), binding]
