"""The view scope narrows what is shown, never what is judged (derive/scope.py, the Analyzer)."""

from __future__ import annotations

from gputui.boundary.glyphs import to_ascii
from gputui.derive.analysis import Analysis, Analyzer
from gputui.model.settings import ViewScope
from tests.support.factories import demo_snapshots


def test_sinks_see_the_whole_snapshot_and_the_views_the_part_in_scope() -> None:
    seen: list[Analysis] = []
    scope = ViewScope(users=("alice",))
    analyzer = Analyzer((), [seen.append], scope=scope)
    snapshot = demo_snapshots(3)[-1]
    shown = analyzer.analyse(snapshot)
    (whole,) = seen
    # The idle policy and alert delivery judge every container: none looks idle because
    # another user's processes were hidden.
    assert whole.snapshot is snapshot
    assert {u.info.name for u in whole.snapshot.containers} >= {"llm-trainer-1", "vllm-server"}
    assert [p.pid for p in shown.snapshot.processes] == [3121]
    assert shown.snapshot.containers == ()
    assert shown.groups is not None and shown.totals is not None
    assert [u.label for u in shown.totals.users] == ["alice"]
    # The same snapshot again (a paused replay) is narrowed the same way, the sink not called.
    again = analyzer.analyse(snapshot)
    assert len(seen) == 1 and again.snapshot.processes == shown.snapshot.processes


def test_no_scope_is_the_whole_analysis_itself() -> None:
    snapshot = demo_snapshots(2)[-1]
    analysis = Analyzer((), scope=ViewScope()).analyse(snapshot)
    assert analysis.snapshot is snapshot and analysis.activity is None


def test_ascii_keeps_every_cell() -> None:
    # Box drawing, blocks, sparklines, markers, a wide CJK name, a combining accent.
    text = "┌─┐│└┘├┤ █▌░ ▁▂▃▄▅▆▇█ ▼▲ ⇄ ✗✓⚠ • · … 66°C 日本 e\u0301 naïve"
    out = to_ascii(text)
    assert out.isascii()
    assert out == "+-+|++++ #|. _.:-=+*# v^ & x+! * . ~ 66 C ???? e naive"
