"""The Textual internals gputui uses still exist and behave as ui/textual_compat.py expects.

A Textual upgrade that renames or changes any of them fails here, not silently on screen.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import Tree

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
