"""The owner of a container, on screen: the Evidence view says who, how sure, and why."""

from __future__ import annotations

from dataclasses import replace

from gputui.derive.analysis import Analyzer
from gputui.model.containers import Owner
from gputui.model.snapshot import Snapshot
from gputui.ui.screens import evidence
from gputui.ui.tab_table import TABS
from tests.support.factories import FakeCollector, standard
from tests.support.pilot import AppFactory, ready, screen_lines


def _with_owner(owner: Owner | None) -> Snapshot:
    base = standard()
    usage = base.containers[0]
    return replace(base, containers=(replace(usage, info=replace(usage.info, owner=owner)),))


def test_the_evidence_view_names_the_owner_with_its_evidence_and_the_way_to_be_sure() -> None:
    hint = "name the owner with a label: docker run --label gputui.owner=<user>"
    snapshot = _with_owner(Owner("alice", "low", "owns its bind mount /home/alice/data", hint))
    text = evidence.evidence_content(snapshot.containers[0], Analyzer([]).analyse(snapshot)).plain
    assert "Owner" in text
    assert "alice  (low confidence)" in text
    assert "owns its bind mount /home/alice/data" in text
    assert hint in text


def test_an_unknown_owner_says_so_and_a_hostile_label_is_shown_harmless() -> None:
    unknown = _with_owner(Owner(None, "none", "runs as root, and nothing names a person", "x"))
    text = evidence.evidence_content(unknown.containers[0], Analyzer([]).analyse(unknown)).plain
    assert "owner       unknown\n" in text
    hostile = _with_owner(Owner("\x1b]0;pwned\x07mallory", "high", "label gputui.owner"))
    text = evidence.evidence_content(hostile.containers[0], Analyzer([]).analyse(hostile)).plain
    assert "\x1b" not in text and "\x07" not in text and "mallory" in text
    # Where the engine says nothing of owners (the demo, a stub), there is no Owner section.
    silent = _with_owner(None)
    text = evidence.evidence_content(silent.containers[0], Analyzer([]).analyse(silent)).plain
    assert "Owner" not in text


async def test_the_tree_has_an_owner_column_once_an_owner_is_known(make_app: AppFactory) -> None:
    base = standard()
    first, second, *rest = base.containers
    owned = replace(
        base,
        containers=(
            replace(first, info=replace(first.info, owner=Owner("alice", "high", "label x"))),
            replace(second, info=replace(second.info, owner=Owner("bob", "low", "bind mount"))),
            *rest,
        ),
    )
    for snapshot, shown in ((base, False), (owned, True)):
        app = make_app(FakeCollector([snapshot]))
        async with app.run_test(size=(160, 50)) as pilot:
            await ready(pilot)
            lines = screen_lines(app)
            at = next(i for i, line in enumerate(lines) if "NAME" in line and "STATUS" in line)
            header, lines = lines[at], lines[at + 1 :]
            assert ("OWNER" in header) is shown, header
            if shown:
                column = header.index("OWNER")
                row_a = next(line for line in lines if first.info.name in line)
                row_b = next(line for line in lines if second.info.name in line)
                assert row_a[column:].startswith("alice"), row_a
                assert row_b[column:].startswith("bob?"), row_b  # a guess says so
                assert header.index("IMAGE") > column  # the image yields first


async def test_the_users_tab_adds_up_owners_once_one_is_known(make_app: AppFactory) -> None:
    base = standard()
    first, *rest = base.containers
    owned = replace(
        base,
        containers=(
            replace(first, info=replace(first.info, owner=Owner("alice", "high", "label x"))),
            *rest,
        ),
    )
    app = make_app(FakeCollector([owned]))
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press(TABS.key("users"))
        await pilot.pause()
        text = "\n".join(screen_lines(app))
        assert "Owners (the person behind each container" in text, text
        assert "OWNER" in text and "alice" in text
        assert app.main.users_view.owners.row_count >= 1
