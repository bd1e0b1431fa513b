"""``gputui --help`` lists every subcommand: the list is generated from the subcommand table,
and so is the dispatch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gputui.cli import main


def test_each_subcommand_has_one_row() -> None:
    names = [sub.name for sub in main.SUBCOMMANDS]
    assert len(names) == len(set(names))
    assert all(sub.summary for sub in main.SUBCOMMANDS)


@pytest.mark.parametrize("sub", main.SUBCOMMANDS, ids=lambda sub: sub.name)
def test_each_row_runs_its_own_subcommand(
    sub: main.Subcommand, capsys: pytest.CaptureFixture[str]
) -> None:
    # Through the dispatch, the way the command line reaches it: the parser that answers
    # --help is the one of the row's name.
    with pytest.raises(SystemExit) as exited:
        main.main([sub.name, "--help"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: gputui {sub.name} ")


def test_help_names_every_subcommand_fleet_included() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "gputui", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    ).stdout
    # argparse wraps the description, at spaces and after hyphens ("GPU-" / "hours").
    described = " ".join(out.split()).replace("- ", "-")
    for sub in main.SUBCOMMANDS:
        assert f" {sub.usage} ({sub.summary})" in described, sub.name
    assert "fleet (the GPU hosts a Prometheus scrapes, one row each)" in described
    assert "record FILE (record snapshots)" in described
