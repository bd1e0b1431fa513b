"""The Textual internals gputui uses still exist and behave as ui/textual_compat.py expects.

A Textual upgrade that renames or changes any of them fails here, not silently on screen.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.app import App, ComposeResult
from textual.strip import Strip
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from gputui.ui import textual_compat as tc


class _Host(App[None]):
    def compose(self) -> ComposeResult:
        yield Tree("root", id="tree")


def _line_text(tree: Tree[str], y: int) -> str:
    return "".join(segment.text for segment in tree.render_line(y))


async def test_tree_internals() -> None:
    app = _Host()
    async with app.run_test(size=(60, 20)) as pilot:
        tree: Tree[str] = app.query_one(Tree)
        tree.show_root = False
        nodes = [tree.root.add_leaf(f"old {i}", str(i)) for i in range(3)]
        await pilot.pause()
        assert "old 1" in _line_text(tree, 1)
        updates = nodes[1]._updates
        tc.set_tree_node_label(tree, nodes[1], Text("new 1"))
        assert nodes[1]._updates == updates + 1  # the render cache key moved
        label = nodes[1].label
        assert isinstance(label, Text)
        assert tc.tree_node_label(nodes[1]).plain == "new 1" == label.plain
        tc.set_tree_node_label(tree, nodes[2], Text("two\nlines"))
        assert tc.tree_node_label(nodes[2]).plain == "two"  # Tree.process_label's first line
        assert tree._tree_lines_cached is not None
        assert nodes[1]._line == 1 and tree._tree_lines_cached[1].node is nodes[1]
        refreshed: list[int] = []
        original = tree._refresh_line

        def refresh_line(line: int) -> None:
            refreshed.append(line)
            original(line)

        tree._refresh_line = refresh_line  # type: ignore[method-assign]  # a spy on the instance
        tc.repaint_tree_nodes(tree, [nodes[1]])
        assert refreshed == [1]
        await pilot.pause()
        assert "new 1" in _line_text(tree, 1)
        tree.root.add_leaf("structure changed")
        assert tree._tree_lines_cached is None  # rebuilt on the next draw: nothing to repaint
        tc.repaint_tree_nodes(tree, [nodes[1]])
        assert refreshed == [1]


def test_app_crash_internals() -> None:
    """The attributes ``end_app_after_crash`` sets are the ones Textual's own handler sets."""
    import inspect

    from textual.app import App

    app: App[None] = App()
    for name in ("_return_code", "_exception", "_exception_event", "_exit_renderables"):
        assert hasattr(app, name), name
    assert callable(app._close_messages_no_wait)
    handler = inspect.getsource(App._handle_exception) + inspect.getsource(App._fatal_error)
    for name in ("_return_code", "_exception", "_exit_renderables", "_close_messages_no_wait"):
        assert name in handler, f"Textual's crash handler no longer uses {name}"


class _LazyHost(App[None]):
    def compose(self) -> ComposeResult:
        yield tc.LazyLabelTree[str]("root", id="lazy")


async def test_lazy_label_tree_internals() -> None:
    app = _LazyHost()
    async with app.run_test(size=(60, 20)) as pilot:
        tree: tc.LazyLabelTree[str] = app.query_one(tc.LazyLabelTree)
        tree.show_root = False
        nodes = [tree.root.add_leaf(f"old {i}", str(i)) for i in range(3)]
        assert all(isinstance(node, tc.LazyLabelNode) for node in nodes)
        assert tree._tree_nodes[nodes[1]._id] is nodes[1]  # Tree._add_node's node map kept
        await pilot.pause()
        built: list[str] = []

        def build(text: str) -> Text:
            built.append(text)
            return Text(text)

        updates = nodes[1]._updates
        tc.set_lazy_label(tree, nodes[1], lambda: build("new 1"))
        assert nodes[1]._updates == updates + 1 and built == []  # not built when set
        assert tc.known_label_width(nodes[1]) == len("old 1")
        tc.repaint_tree_nodes(tree, [nodes[1]])
        await pilot.pause()
        assert built == ["new 1"]  # drawn: built once
        assert "new 1" in _line_text(tree, 1)
        tc.set_lazy_label(tree, nodes[2], lambda: build("two\nlines"))
        label = nodes[2].label
        assert isinstance(label, Text) and label.plain == "two"  # read: built, first line
        assert built == ["new 1", "two\nlines"]


class _BothTrees(App[None]):
    def compose(self) -> ComposeResult:
        yield Tree("root", id="plain")
        yield tc.LazyLabelTree[str]("root", id="lazy")


async def test_lazy_label_tree_lines_equal_tree_lines_with_one_style_walk() -> None:
    """``LazyLabelTree.render_line`` is ``Tree.render_line`` (via ``Tree._render_line``), with
    the widget's style computed once per frame instead of once per line."""
    app = _BothTrees()
    async with app.run_test(size=(60, 20)) as pilot:
        plain = app.query_one("#plain", Tree)
        lazy = app.query_one("#lazy", tc.LazyLabelTree)
        for tree in (plain, lazy):
            tree.show_root = False
            group = tree.root.add("group", expand=True)
            for i in range(4):
                group.add_leaf(f"leaf {i}")
        await pilot.pause()
        lazy.cursor_line = plain.cursor_line = 2
        app.set_focus(None)  # the focused tree draws its cursor: neither is
        await pilot.pause()
        region = lazy.size.region

        def drawn(lines: list[Strip]) -> list[list[tuple[object, ...]]]:
            # Text and look; the meta differs (each tree numbers its nodes itself).
            return [
                [(seg.text, seg.style and seg.style.without_color, seg.style and seg.style.color,
                  seg.style and seg.style.bgcolor) for seg in line]
                for line in lines
            ]  # fmt: skip

        assert drawn(lazy.render_lines(region)) == drawn(plain.render_lines(plain.size.region))
        walks = 0
        cls = type(lazy)
        original = Tree.rich_style

        def counted(self: Tree[str]) -> Style:
            nonlocal walks
            walks += 1
            return original.fget(self)  # type: ignore[attr-defined, no-any-return]

        cls.rich_style = property(counted)  # type: ignore[assignment, method-assign]
        try:
            lazy._line_cache.clear()
            lazy._styles_cache.clear()
            lines = lazy.render_lines(region)
        finally:
            del cls.rich_style
        assert len(lines) == region.height and walks == 1


class _Rows:
    """A row source counting what is asked of it."""

    def __init__(self, figures: list[int]) -> None:
        self.figures = figures
        self.asked: list[tuple[str, int]] = []

    def row_inputs(self, index: int) -> tuple[object, ...]:
        self.asked.append(("inputs", index))
        return (self.figures[index],)

    def row_label(self, index: int) -> Text:
        self.asked.append(("label", index))
        return Text(f"row {index} = {self.figures[index]}")

    def row_data(self, index: int) -> str:
        return f"data {index} {self.figures[index]}"


async def test_rows_drawn_from_a_source_when_read() -> None:
    app = _LazyHost()
    async with app.run_test(size=(60, 20)) as pilot:
        tree: tc.LazyLabelTree[str] = app.query_one(tc.LazyLabelTree)
        tree.show_root = False
        nodes = [tree.root.add_leaf("", None) for _ in range(3)]
        lazy = [node for node in nodes if isinstance(node, tc.LazyLabelNode)]
        assert len(lazy) == 3
        first = _Rows([10, 20, 30])
        tc.attach_rows(nodes, first)
        assert first.asked == []  # nothing built when attached
        assert nodes[1].data == "data 1 20" and all(node.pending for node in lazy)
        await pilot.pause()
        assert "row 2 = 30" in _line_text(tree, 2)  # drawn from the source
        assert not any(node.pending for node in lazy)
        # The next refresh: only row 0 moved. Nothing is built until asked; then only row 0's
        # label (the others' inputs are unchanged), and only row 0's line is repainted.
        second = _Rows([11, 20, 30])
        updates = [node._updates for node in nodes]
        tc.attach_rows(nodes, second)
        assert second.asked == [] and [n._updates for n in nodes] == [u + 1 for u in updates]
        assert isinstance(nodes[0], tc.LazyLabelNode) and nodes[0].row_moved()
        assert isinstance(nodes[1], tc.LazyLabelNode) and not nodes[1].row_moved()
        tc.repaint_moved_rows(tree, nodes)
        await pilot.pause()
        assert "row 0 = 11" in _line_text(tree, 0) and nodes[0].data == "data 0 11"
        assert ("label", 1) not in second.asked and ("label", 0) in second.asked
        # A label set directly detaches the node from its source.
        tc.set_tree_node_label(tree, nodes[2], Text("fixed"))
        tc.attach_rows(nodes[:2], _Rows([0, 0]))
        assert nodes[2].label == Text("fixed") and not lazy[2].pending


class _MarkedTree(Tree[str]):
    """A tree whose lines carry a mark the label does not hold (as the tagged processes')."""

    marked: frozenset[str] = frozenset()

    def render_label(self, node: TreeNode[str], base_style: Style, style: Style) -> Text:
        text = super().render_label(node, base_style, style)
        return Text("* ") + text if node.data in self.marked else text


class _MarkedHost(App[None]):
    def compose(self) -> ComposeResult:
        yield _MarkedTree("root", id="tree")


async def test_redraw_tree_nodes_draws_an_unchanged_label_again() -> None:
    app = _MarkedHost()
    async with app.run_test(size=(60, 20)) as pilot:
        tree = app.query_one(_MarkedTree)
        tree.show_root = False
        nodes = [tree.root.add_leaf(f"leaf {i}", str(i)) for i in range(3)]
        await pilot.pause()
        assert "* " not in _line_text(tree, 1)
        tree.marked = frozenset({"1"})
        assert "* " not in _line_text(tree, 1)  # the line cache still holds the old line
        tc.redraw_tree_nodes(tree, [nodes[1]])
        await pilot.pause()
        assert "* leaf 1" in _line_text(tree, 1)
        assert "* " not in _line_text(tree, 0)
