"""``gputui --help`` lists every subcommand: the list is generated from the subcommand table."""

from __future__ import annotations

import subprocess
import sys

from gputui.cli import main


def test_every_subcommand_has_a_summary_and_no_summary_names_none() -> None:
    assert set(main.SUBCOMMAND_SUMMARIES) == {"doctor", *main._SUBCOMMANDS}


def test_help_names_every_subcommand_fleet_included() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "gputui", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    ).stdout
    described = " ".join(out.split())  # argparse wraps the description
    for name in ("doctor", *main._SUBCOMMANDS):
        assert f" {name} (" in described or f" {name} FILE (" in described, name
    assert "fleet (the GPU hosts a Prometheus scrapes, one row each)" in described
