"""Fixtures for the collector's tests: real child processes to read and to signal."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from tests.support.procfs import SLEEP_CODE, Spawn, children


@pytest.fixture
def spawn() -> Iterator[Spawn]:
    """``spawn(code, *argv, **popen_kwargs)``: a ``python -c`` child, up when returned."""
    with children() as start:
        yield start


@pytest.fixture
def sleeper(spawn: Spawn) -> subprocess.Popen[bytes]:
    """A sleeping child of this test process."""
    return spawn(SLEEP_CODE)


@pytest.fixture
def victim(spawn: Spawn) -> subprocess.Popen[bytes]:
    """Another sleeping child: one that a wrong signal (or a wrong PID) would hit."""
    return spawn(SLEEP_CODE)
