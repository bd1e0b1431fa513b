"""``gputui ledger`` and ``gputui daemon`` on the command line, with real containers.

Bad input is one line and exit 2. On a scenario whose GPU processes are real processes of real
containers (one busy, one idle reservation, each with an owner's label), ``gputui record
--store`` writes the ledger live; the ledger recomputed from the recording it made equals it per
container, per owner and per GPU; occupied time adds up to GPUs x the window and energy to the
counters' deltas; the idle container's waste is its reservation.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gputui.ledger.quantities import Amounts, Device, Subject
from gputui.ledger.store import Store
from tests.support.paths import REPO

ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def gputui(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        text=True,
        capture_output=True,
        timeout=120,
        env=ENV,
        cwd=REPO,
    )


def _one_line_2(result: subprocess.CompletedProcess[str], needle: str) -> None:
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], result.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["ledger", "--since", "yesterday-ish"], "--since: expected 30d"),
        (["ledger", "--since", "99999999d"], "--since"),
        (["ledger", "--since", "1d", "--until", "2d"], "--until must be later"),
        (["ledger", "--by", "planet"], "invalid choice: 'planet'"),
        (["ledger", "--format", "xml"], "invalid choice: 'xml'"),
        (["ledger", "--from-recording", "/nonexistent/rec"], "/nonexistent/rec"),
        (["ledger", "--from-recording", "a", "--store", "b"], "cannot be combined"),
        (["ledger", "--config", "/nonexistent/config.toml"], "config.toml"),
        (["daemon", "--demo"], "--demo writes only into a store named with --store"),
        (["daemon", "--commit-every", "0", "--store", "x"], "0.05 to 60 seconds"),
        (["daemon", "--count", "-3", "--store", "x"], "positive integer"),
        (["daemon", "--interval", "0.01", "--store", "x"], "--interval"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], needle: str) -> None:
    _one_line_2(gputui(*args), needle)


def test_bad_ledger_config_is_one_line(tmp_path: Path) -> None:
    for text, needle in (
        ("[ledger]\nkwh_price = -1\n", "ledger.kwh_price"),
        ("[ledger]\ngpu_hour_price = {'NVIDIA H200' = 'free'}\n", "ledger.gpu_hour_price"),
        ("[ledger]\ncolour = 'red'\n", "ledger: unknown key 'colour'"),
        ("[ledger]\nidle_power_w = {'X' = 1e9}\n", "ledger.idle_power_w"),
        ("owners = 'x'\n", "owners must be a table"),
        ("[owners]\nlabel = 3\n", "owners: '3' is not a label name"),
        ("[owners]\nlabels = 'org.example.owner'\n", "owners.labels must be a list"),
        ("[owners]\nlabels = ['a b']\n", "owners: 'a b' is not a label name"),
        ("[owners]\nlabels = [" + "'a'," * 9 + "]\n", "owners: at most 8 labels"),
        ("[owners]\nteam = 'x'\n", "owners: unknown key 'team'"),
    ):
        config = tmp_path / "config.toml"
        config.write_text(text)
        _one_line_2(gputui("ledger", "--config", str(config), "--store", "x"), needle)


def test_every_section_the_docs_name_is_accepted(tmp_path: Path) -> None:
    """A config using each section loads (a section read by its parser but unknown to the
    file's list was refused as "unknown section", as [owners] once was)."""
    config = tmp_path / "config.toml"
    config.write_text(
        "[ui]\ntheme = 'nord'\n"
        "[ledger]\nkwh_price = 0.3\n"
        "[owners]\nlabels = ['org.example.owner']\n"
        "[engines]\nuse = ['docker']\n"
        "[idle_policy]\nenabled = false\n"
        "[fleet]\n"
        "[keys]\n"
        "[alerts]\ndefaults = true\n"
    )
    result = gputui("--demo", "--once", "--config", str(config))
    assert result.returncode == 0, result.stderr


def _hostile_store(path: Path) -> None:
    store = Store.open_writer(path, "test")
    hostile = Subject(
        "container",
        "e" * 64,
        "evil\x1b]0;pwned\x07\n\u202ename",
        "img\x1b[31m",
        owner="mal\x1b[2Jlory\u202e",
    )
    try:
        store.write(
            {(1_790_000_000, Device("0", "GPU-0", "H200\x1b[2J"), hostile): Amounts(1, 1, 1)},
            {1_790_000_000: (1.0, 1.0, 0.0)},
            [],
            1_790_000_001,
        )
    finally:
        store.close()


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
@pytest.mark.parametrize("by", ["container", "image", "gpu", "owner"])
def test_names_from_outside_are_inert_in_every_format(fmt: str, by: str, tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    _hostile_store(path)
    result = gputui(
        "ledger", "--store", str(path), "--since", "2026-01-01", "--by", by, "--format", fmt
    )
    assert result.returncode == 0, result.stderr
    for bad in ("\x1b", "\x07", "\u202e"):
        assert bad not in result.stdout
    if fmt == "json":
        doc = json.loads(result.stdout)
        assert len(doc["rows"]) == 1 and "\n" not in doc["rows"][0]["key"]


def _container_pid(container: Any) -> int:
    container.reload()
    return int(container.attrs["State"]["Pid"])


def test_live_ledger_of_real_containers_equals_the_one_recomputed_from_the_recording(
    sole_gpu_reservations: None,
    run_container: Callable[..., Any],
    free_run_id: str,
    tmp_path: Path,
) -> None:
    # Owners named two ways: the built-in label, and a label the config names.
    alice, ivan = f"alice-{free_run_id}", f"ivan-{free_run_id}"
    busy = run_container(
        ["sleep", "300"],
        name=f"ledger-busy-{free_run_id}",
        labels={"gputui.owner": alice},
        network_mode="none",
    )
    idle = run_container(
        ["sleep", "300"],
        name=f"ledger-idle-{free_run_id}",
        environment={"NVIDIA_VISIBLE_DEVICES": "1"},
        labels={"org.example.owner": ivan},
        network_mode="none",
    )
    assert idle.status in ("running", "created")
    energy = [10**9 + k * 250_000 for k in range(2000)]
    # GPU 2's counter goes back half-way (a driver reload): power x wall stands in for it.
    reloaded = [10**9 + k * 170_000 for k in range(12)] + [k * 170_000 for k in range(1988)]
    scenario = {
        "gpus": [
            {
                "index": 0,
                "utilization_gpu": 50,
                "memory_used_mib": 20000,
                "power_w": 345.678,
                "total_energy_mj": energy,
                "processes": [
                    {"pid": _container_pid(busy), "used_memory_mib": 20000, "sm_util": 50}
                ],
            },
            {"index": 1, "utilization_gpu": 0, "power_w": 81.25, "total_energy_mj": energy},
            {"index": 2, "utilization_gpu": 0, "power_w": 170.125, "total_energy_mj": reloaded},
        ]
    }
    path = tmp_path / "lab.json"
    path.write_text(json.dumps(scenario))
    config = tmp_path / "gputui.toml"
    config.write_text('[owners]\nlabels = ["org.example.owner"]\n')
    store = tmp_path / "live.sqlite"
    recording = tmp_path / "rec.jsonl"
    result = gputui(
        "record",
        str(recording),
        "--scenario",
        str(path),
        "--interval",
        "0.2",
        "--count",
        "25",
        "--store",
        str(store),
        "--config",
        str(config),
    )
    assert result.returncode == 0, result.stderr
    assert f"gputui record: ledger: writing {store}" in result.stderr

    def ledger(by: str, *source: str) -> dict[str, Any]:
        out = gputui("ledger", *source, "--since", "1d", "--by", by, "--format", "json")
        assert out.returncode == 0, out.stderr
        doc: dict[str, Any] = json.loads(out.stdout)
        return doc

    # The same run's two ledgers: the one written live, the one recomputed from its recording
    # (no config: the owners travel in the recording). Equal within the JSON's rounding.
    docs = {}
    for by in ("container", "owner", "gpu"):
        live = ledger(by, "--store", str(store))
        again = ledger(by, "--from-recording", str(recording))
        rows = {r["key"]: r for r in live["rows"]}
        assert rows.keys() == {r["key"] for r in again["rows"]}, by
        for other in again["rows"]:
            for column, value in other.items():
                if column != "key" and value is not None:
                    expected = rows[other["key"]][column]
                    assert value == pytest.approx(expected, abs=2e-6), (by, other["key"], column)
        assert live["coverage"] == pytest.approx(again["coverage"], abs=0.01)
        assert live["gaps"] == again["gaps"] == []
        docs[by] = rows
    live = ledger("container", "--store", str(store))
    rows = docs["container"]

    busy_row, idle_row = rows[busy.name], rows[idle.name]
    window_h = live["coverage"]["wall_s"] / 3600
    assert window_h > 0
    # Conservation: every GPU's time is somebody's or unallocated, and energy is the counter's.
    occupied = sum(r["occupied_gpu_h"] for r in live["rows"])
    assert occupied == pytest.approx(3 * window_h, rel=1e-3)
    assert live["coverage"]["device_s"] == pytest.approx(3 * live["coverage"]["wall_s"], abs=0.01)
    assert sum(r["kwh"] for r in live["rows"]) * 3.6e6 == pytest.approx(
        live["coverage"]["energy_j"], rel=5e-3
    )
    # The busy container: GPU 0 to itself, half busy; the idle one: all reserved, all waste.
    assert busy_row["occupied_gpu_h"] == pytest.approx(window_h, rel=1e-3)
    assert busy_row["busy_gpu_h"] == pytest.approx(window_h / 2, rel=1e-3)
    assert idle_row["reserved_gpu_h"] == pytest.approx(window_h, rel=1e-3)
    assert idle_row["waste_gpu_h"] == idle_row["reserved_gpu_h"]
    assert idle_row["busy_gpu_h"] == 0 and idle_row["occupied_gpu_h"] == 0
    # Per owner: each container's time and energy under the person its label names.
    owners = docs["owner"]
    for person, row in ((alice, busy_row), (ivan, idle_row)):
        for column in ("reserved_gpu_h", "occupied_gpu_h", "busy_gpu_h", "waste_gpu_h", "kwh"):
            assert owners[person][column] == pytest.approx(row[column], abs=2e-6), column
    assert owners[alice]["kwh"] > 0 and owners[ivan]["kwh"] > 0


def test_the_systemd_unit_runs_a_daemon_this_gputui_accepts(tmp_path: Path) -> None:
    unit = (REPO / "contrib" / "gputui-daemon.service").read_text()
    (line,) = [x for x in unit.splitlines() if x.startswith("ExecStart=")]
    argv = line.removeprefix("ExecStart=").split()
    assert argv[:3] == ["/usr/bin/env", "gputui", "daemon"]
    args = argv[3:]
    store = args.index("--store") + 1
    assert args[store].startswith("/var/lib/gputui/")  # StateDirectory=gputui
    args[store] = str(tmp_path / "ledger.sqlite")
    result = gputui("daemon", *args, "--demo", "--count", "2")
    assert result.returncode == 0, result.stderr
    assert "gputui daemon: ledger: writing" in result.stderr
    assert "StateDirectory=gputui" in unit and "KillSignal=SIGTERM" in unit
