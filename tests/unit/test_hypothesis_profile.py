"""The suite's Hypothesis settings: one profile, registered in tests/conftest.py, no deadline."""

from __future__ import annotations

from pathlib import Path

from hypothesis import settings

from tests.support.paths import REPO


def test_property_tests_run_without_a_deadline() -> None:
    # What a test module's own ``settings(max_examples=...)`` starts from: a deadline here
    # would make property tests fail on a loaded machine for taking their time.
    default = settings.default
    assert default is not None and default.deadline is None
    assert settings(max_examples=5).deadline is None


def test_the_deadline_is_set_in_one_place() -> None:
    tests = REPO / "tests"
    repeated = [
        str(path.relative_to(REPO))
        for path in tests.rglob("*.py")
        if path not in (tests / "conftest.py", Path(__file__))
        and "deadline=None" in path.read_text()
    ]
    assert repeated == [], "the conftest's Hypothesis profile has no deadline already"
