"""The idle-GPU policy in the monitor: the reclaim line, audited notices, no stop by itself."""

from __future__ import annotations

from pathlib import Path

from gputui.model.snapshot import Snapshot
from gputui.notify.audit import read_audit
from tests.support.factories import FakeCollector, container, snapshot
from tests.support.pilot import AppFactory, push, ready


def idle(taken_at: float) -> Snapshot:
    return snapshot(taken_at, containers=[container(1, "idle-notebook", gpu_request=("0",))])


async def test_a_container_due_for_reclaim_is_named_and_nothing_is_stopped(
    make_app: AppFactory, tmp_path: Path
) -> None:
    audit = tmp_path / "audit.jsonl"
    config = tmp_path / "config.toml"
    config.write_text(
        '[idle_policy]\nenabled = true\nidle_for = "60s"\nescalate_after = 0\n'
        f'reclaim_after = 0\nauto_reclaim = true\ndry_run = false\naudit = "{audit}"\n'
    )
    start = 2_000_000.0
    app = make_app(FakeCollector([idle(start)]), config=config)
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        for at in (start + 30, start + 60, start + 61):
            await push(pilot, idle(at), analyse=True)
        assert not any("reclaim" in n.message for n in app._notifications)
        await push(pilot, idle(start + 62), analyse=True)
        lines = [n.message for n in app._notifications if n.title == "Idle GPU policy"]
        assert len(lines) == 1 and "GPU reclaim due" in lines[0] and "idle-notebook" in lines[0]
        await push(pilot, idle(start + 63), analyse=True)
        lines = [n.message for n in app._notifications if n.title == "Idle GPU policy"]
        assert len(lines) == 1  # the same line: not shown again
    events = [r["event"] for r in read_audit(audit)[0]]
    # No label opt-in: the reclaim stage is reached and audited, nothing is stopped.
    assert events == ["notice", "escalate", "reclaim"]
