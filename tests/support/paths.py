"""Where things are, for tests at any depth under tests/."""

from __future__ import annotations

from pathlib import Path

#: The repository's root (the checkout the tests run from).
REPO = Path(__file__).resolve().parents[2]
#: Recorded answers and scenario files the tests read.
FIXTURES = REPO / "tests" / "fixtures"
