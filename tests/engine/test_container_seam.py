"""The container seam is runtime-neutral: a made-up runtime, ``toyrt``, flows through everything.

``ToyRuntime`` is a container source written against the seam alone (no Docker code): it lists
the cgroups under a directory of its own as containers, and the processes in them are real
processes this test starts and moves there. Its containers are attributed, named in the TUI,
the ``--once --json`` report and the exporter; what it does not offer (exec, logs, lifecycle) is
refused with its name. Beside the real Docker engine it is merged by container id, each status
shown. NVML is a scenario (the one faked boundary).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gputui.cli import main
from gputui.collect.collector import Collector
from gputui.collect.docker.logs import LogStreamError
from gputui.collect.docker.source import DockerSource
from gputui.collect.linux.proc_reader import ProcSource
from gputui.collect.sources import ContainerCapabilities, ContainerSource
from gputui.collect.standins.scenario import ScenarioSource
from gputui.model.containers import ContainerInfo, ContainerReading
from gputui.model.settings import Settings
from gputui.model.status import SourceStatus
from gputui.present.json_report import snapshot_to_json
from gputui.present.text_report import snapshot_to_text
from gputui.ui.app import GpuTuiApp
from gputui.wiring import compose

HEX64 = re.compile(r"[0-9a-f]{64}")
#: Seconds a test waits for a screen or a process to reach the state it needs.
WAIT_S = 30.0


def toy_id(n: int) -> str:
    """A 64-hex id no engine on this machine made (a run's ids differ from another run's)."""
    return f"{n:02x}" + (uuid.uuid4().hex * 2)[:62]


class ToyRuntime(ContainerSource):
    """A made-up runtime: each cgroup directory named by a 64-hex id under ``root`` is one
    of its containers, running while processes are in it. It offers nothing but reading.

    Args:
        root: The directory of its cgroups.
        names: Container id -> name (what an engine's database would hold).
        name: The source's name.
    """

    def __init__(self, root: Path, names: Mapping[str, str], name: str = "toyrt") -> None:
        self.name = name
        self.root = root
        self.names = dict(names)
        self.reads = 0
        self.closed = False

    def read(self) -> ContainerReading:
        self.reads += 1
        found = []
        for entry in sorted(self.root.iterdir()):
            if not (entry.is_dir() and HEX64.fullmatch(entry.name)):
                continue
            pids = [int(p) for p in (entry / "cgroup.procs").read_text().split()]
            found.append(
                ContainerInfo(
                    id=entry.name,
                    name=self.names.get(entry.name, f"toy-{entry.name[:8]}"),
                    image="toy.example/trainer:1",
                    status="running" if pids else "exited",
                    pid=min(pids) if pids else None,
                )
            )
        return ContainerReading(SourceStatus(self.name, ok=True), tuple(found))

    def capabilities(self) -> ContainerCapabilities:
        return ContainerCapabilities()

    def close(self) -> None:
        self.closed = True


def _cgroup_base() -> Path:
    """A cgroup hierarchy this test may make cgroups in: v2's root, else v1's pids (or any)."""
    root = Path("/sys/fs/cgroup")
    if (root / "cgroup.controllers").exists():
        return root
    for name in ("pids", "memory", "cpu", "systemd"):
        if (root / name / "cgroup.procs").exists():
            return root / name
    pytest.skip("no cgroup hierarchy at /sys/fs/cgroup")


@dataclass
class Cgroups:
    """Cgroups of this test under one directory, and the processes it started in them."""

    root: Path
    children: list[subprocess.Popen[bytes]] = field(default_factory=list)
    made: list[Path] = field(default_factory=list)

    def directory(self, name: str) -> Path:
        path = self.root / name
        path.mkdir()
        self.made.append(path)
        return path

    def run_in(self, name: str) -> int:
        """A ``sleep`` moved into the cgroup ``name`` (made when new); its PID."""
        path = self.root / name
        if not path.exists():
            self.directory(name)
        child = subprocess.Popen(["sleep", "300"])
        self.children.append(child)
        (path / "cgroup.procs").write_text(f"{child.pid}\n")
        return child.pid


@pytest.fixture
def cgroups() -> Iterator[Cgroups]:
    """A directory of cgroups of this test's own (``gputui-toyrt-<run>``), removed at the end."""
    root = _cgroup_base() / f"gputui-toyrt-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        root.mkdir()
    except OSError as exc:
        pytest.skip(f"cannot make a cgroup at {root}: {exc.strerror}")
    made = Cgroups(root)
    yield made
    for child in made.children:
        child.kill()
        child.wait()
    deadline = time.monotonic() + WAIT_S
    for path in [*reversed(made.made), root]:
        while True:  # a cgroup can be busy for a moment after its last process was reaped
            try:
                path.rmdir()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)


def scenario(pids: Sequence[int]) -> dict[str, Any]:
    """One H200 whose GPU processes are ``pids``, 1 GiB each."""
    return {
        "nvml": "ok",
        "driver_version": "580.159.04",
        "cuda_driver_version": "13.0",
        "gpus": [
            {
                "index": 0,
                "uuid": "GPU-57d57e22-be4b-9496-673e-11cc7638ed19",
                "name": "NVIDIA H200",
                "memory_total_mib": 143771,
                "memory_used_mib": 1024 * len(pids),
                "utilization_gpu": 40,
                "processes": [{"pid": p, "used_memory_mib": 1024} for p in pids],
            }
        ],
    }


def _collector(
    cgroups: Cgroups, pids: Sequence[int], *sources: ContainerSource, **kw: Any
) -> Collector:
    return Collector(
        ScenarioSource(scenario(pids)), ProcSource(), list(sources), mode="scenario", **kw
    )


# --- attribution and routing, the collector alone ------------------------------------------


def test_a_toy_runtime_is_attributed_and_refuses_what_it_does_not_offer(
    cgroups: Cgroups,
) -> None:
    trainer = toy_id(1)
    pid = cgroups.run_in(trainer)
    toy = ToyRuntime(cgroups.root, {trainer: "toy-trainer"})
    collector = _collector(cgroups, [pid], toy, health=None)
    try:
        snap = collector.collect()
        assert list(snap.sources) == ["nvml", "toyrt"]
        assert snap.sources["toyrt"].ok
        usage = snap.container(trainer)
        assert usage is not None
        assert usage.info.name == "toy-trainer" and usage.known_to_engine
        assert usage.pids == (pid,) and usage.gpu_memory_bytes == 1 << 30
        assert usage.engine_answered and usage.cgroup_runtime is None
        [proc] = snap.processes
        assert proc.container_id == trainer
        owner = collector.container_owner(trainer)
        assert owner is not None and owner.source == "toyrt"
        assert owner.capabilities == ContainerCapabilities()
        result = collector.exec_in_container(trainer, ["nvidia-smi"], 5.0)
        assert result.exit_code is None and result.error == "toyrt does not offer exec"
        assert collector.interactive_exec_argv(trainer, ["sh"]) is None
        assert collector.container_action(trainer, "stop") == (
            "toyrt does not offer container stop/start/restart/pause"
        )
        with pytest.raises(LogStreamError, match="toyrt does not offer container logs"):
            collector.open_container_logs(trainer, tail=10, follow=False)
    finally:
        collector.close()
    assert toy.closed


def test_a_stub_keeps_its_cgroups_runtime_and_no_source_owns_it(cgroups: Cgroups) -> None:
    stub = toy_id(2)
    pid = cgroups.run_in(f"containerd-{stub}")  # a containerd cgroup no source lists
    collector = _collector(cgroups, [pid], ToyRuntime(cgroups.root, {}), health=None)
    try:
        snap = collector.collect()
        usage = snap.container(stub)
        assert usage is not None
        assert usage.info.name == f"containerd-{stub[:12]}"  # the display, as before
        assert usage.cgroup_runtime == "containerd" and usage.not_in_engine
        assert collector.container_owner(stub) is None
        result = collector.exec_in_container(stub, ["nvidia-smi"], 5.0)
        assert result.error == f"no connected engine lists container {stub[:12]}"
        assert collector.container_action(stub, "restart") == result.error
        text = snapshot_to_text(snap, ())
        assert "not in toyrt (containerd)" in text
        assert "Docker" not in text.split("\n")[1]  # the sources line names toyrt only
    finally:
        collector.close()


def test_the_first_source_wins_a_clash_of_ids_in_either_order(cgroups: Cgroups) -> None:
    shared = toy_id(3)
    pid = cgroups.run_in(shared)
    first = ToyRuntime(cgroups.root, {shared: "from-first"}, name="first")
    second = ToyRuntime(cgroups.root, {shared: "from-second"}, name="second")
    for order, winner in (((first, second), "first"), ((second, first), "second")):
        collector = _collector(cgroups, [pid], *order, health=None)
        try:
            snap = collector.collect()
            assert list(snap.sources) == ["nvml", *(s.name for s in order)]
            assert [u.info.name for u in snap.containers] == [f"from-{winner}"]
            owner = collector.container_owner(shared)
            assert owner is not None and owner.source == winner
        finally:
            collector.close()


def test_sources_need_distinct_names(cgroups: Cgroups) -> None:
    with pytest.raises(ValueError, match="distinct names"):
        _collector(cgroups, [], ToyRuntime(cgroups.root, {}), ToyRuntime(cgroups.root, {}))


class Stuck(ToyRuntime):
    """A toy runtime whose reads hang until released (an engine that stopped answering)."""

    def __init__(self, root: Path, names: Mapping[str, str], name: str) -> None:
        super().__init__(root, names, name)
        self.release = threading.Event()

    def read(self) -> ContainerReading:
        self.release.wait(WAIT_S)
        return super().read()


class Broken(ToyRuntime):
    """A toy runtime whose read raises (a source must not; the collector copes)."""

    def read(self) -> ContainerReading:
        raise RuntimeError("toy engine exploded\nsecond line")


def test_a_stuck_source_holds_back_neither_the_gpus_nor_another_source(
    cgroups: Cgroups,
) -> None:
    trainer = toy_id(4)
    pid = cgroups.run_in(trainer)
    stuck = Stuck(cgroups.root, {trainer: "stuck-trainer"}, name="stuck")
    toy = ToyRuntime(cgroups.root, {trainer: "toy-trainer"})
    broken = Broken(cgroups.root, {}, name="broken")
    collector = _collector(cgroups, [pid], stuck, toy, broken, health=None, docker_wait=0.3)
    try:
        snap = collector.collect()
        slow = snap.sources["stuck"]
        assert not slow.ok and slow.kind == "slow"
        assert slow.error is not None and slow.error.startswith("the stuck source has not answered")
        assert snap.sources["toyrt"].ok
        failed = snap.sources["broken"]
        assert failed.kind == "error" and failed.error == (
            "RuntimeError: toy engine exploded second line"
        )
        usage = snap.container(trainer)
        assert usage is not None and usage.info.name == "toy-trainer"  # the stuck one listed none
        assert usage.engine_answered  # its own source answered
        owner = collector.container_owner(trainer)
        assert owner is not None and owner.source == "toyrt"
        stuck.release.set()
        deadline = time.monotonic() + WAIT_S
        while not snap.sources["stuck"].ok:  # the late read lands in a later collection
            assert time.monotonic() < deadline, "the released source never answered"
            snap = collector.collect()
        usage = snap.container(trainer)
        assert usage is not None and usage.info.name == "stuck-trainer"  # first wins, now
        assert snap.sources["broken"].kind == "error"
    finally:
        stuck.release.set()
        collector.close()


def test_a_stub_is_unknown_while_any_source_is_silent(cgroups: Cgroups) -> None:
    """Any source that did not answer might list a cgroup-only container: no verdict then."""
    stub, trainer = toy_id(5), toy_id(6)
    pids = [cgroups.run_in(f"containerd-{stub}"), cgroups.run_in(trainer)]
    stuck = Stuck(cgroups.root, {}, name="stuck")
    toy = ToyRuntime(cgroups.root, {trainer: "toy-trainer"})
    collector = _collector(cgroups, pids, toy, stuck, health=None, docker_wait=0.3)
    try:
        snap = collector.collect()
        usage = snap.container(stub)
        assert usage is not None and not usage.engine_answered and not usage.not_in_engine
        listed = snap.container(trainer)
        assert listed is not None and listed.engine_answered  # toyrt answered for its own
    finally:
        stuck.release.set()
        collector.close()


# --- the front-ends: --once --json, the exporter, the TUI ----------------------------------


@pytest.fixture
def toy_wired(
    cgroups: Cgroups, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, Path]:
    """The wiring's list of container sources is the toy runtime alone (its one line)."""
    trainer = toy_id(7)
    pid = cgroups.run_in(trainer)
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(scenario([pid])))
    monkeypatch.setattr(
        compose,
        "container_sources",
        lambda *_, **__: [ToyRuntime(cgroups.root, {trainer: "toy-trainer"})],
    )
    return trainer, path


def test_once_json_names_the_toy_container_and_its_source(
    toy_wired: tuple[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    trainer, path = toy_wired
    assert main.main(["--once", "--json", "--scenario", str(path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc["sources"]) == ["nvml", "toyrt"]
    assert doc["sources"]["toyrt"]["ok"] is True
    [container] = doc["containers"]
    assert container["id"] == trainer and container["name"] == "toy-trainer"
    assert container["gpu_memory_bytes"] == 1 << 30
    [proc] = doc["processes"]
    assert proc["container"] == {
        "id": trainer,
        "name": "toy-trainer",
        "image": "toy.example/trainer:1",
        "known_to_engine": True,
    }
    assert doc["other_containers"] == []
    # No Docker engine here: the Docker checks say so instead of judging toyrt as one.
    [engine] = [h for h in doc["health"] if h["id"] == "docker.engine"]
    assert engine["status"] == "skip" and engine["summary"] == "No Docker engine is connected"


def test_the_exporter_labels_the_toy_container_and_its_source(
    toy_wired: tuple[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    trainer, path = toy_wired
    assert main.main(["export", "--once", "--scenario", str(path)]) == 0
    text = capsys.readouterr().out
    assert re.search(r'^gputui_source_up\{[^}]*source="toyrt"\} 1\.0$', text, re.M)
    memory = re.search(r"^gputui_container_gpu_memory_bytes\{([^}]*)\} (\S+)$", text, re.M)
    assert memory is not None
    assert f'container_id="{trainer}"' in memory.group(1)
    assert 'container="toy-trainer"' in memory.group(1)
    assert float(memory.group(2)) == 1 << 30


def _screen_text(app: GpuTuiApp) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def _until(pilot: Any, check: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


async def _select(pilot: Any, app: GpuTuiApp, container_id: str) -> None:
    """Put the tree's cursor on a container and let the selection follow."""
    tree = app.main.ctree
    # The first snapshot puts the cursor on the first row after a refresh: let it, first.
    await _until(pilot, lambda: app.main.selection()[0] is not None, "the first selection")
    tree.move_cursor(tree.nodes_by_key[f"c:{container_id}"])
    await _until(pilot, lambda: _selected_id(app) == container_id, "the selection")
    await pilot.pause()


def _selected_id(app: GpuTuiApp) -> str | None:
    container = app.main.selection()[0]
    return None if container is None else container.info.id


async def test_the_tui_names_the_toy_container_and_says_what_toyrt_cannot_do(
    cgroups: Cgroups,
) -> None:
    trainer, stub = toy_id(8), toy_id(9)
    pids = [cgroups.run_in(trainer), cgroups.run_in(f"containerd-{stub}")]
    collector = _collector(cgroups, pids, ToyRuntime(cgroups.root, {trainer: "toy-trainer"}))
    app = GpuTuiApp(collector, Settings(interval=60.0))
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        tree = app.main.ctree
        await _until(pilot, lambda: f"c:{trainer}" in tree.nodes_by_key, "the toy container")
        await _until(pilot, lambda: "toy-trainer" in _screen_text(app), "its name on screen")
        assert re.search(r"toyrt\s+ok", _screen_text(app))  # its status in the header
        asked = {
            "x": "toyrt does not offer exec.",
            "X": "toyrt does not offer interactive exec.",
            "E": "toyrt does not offer exec.",
            "l": "toyrt does not offer container logs.",
            "D": "toyrt does not offer container stop/start/restart/pause.",
            "P": "toyrt does not offer container stop/start/restart/pause.",
            "i": "toyrt does not offer container inspect.",
        }
        for key, said in asked.items():
            await _select(pilot, app, trainer)
            await pilot.press(key)
            await pilot.pause()
            messages = [n.message for n in app._notifications]
            assert messages[-1] == said, key
        await _until(pilot, lambda: f"c:{stub}" in tree.nodes_by_key, "the stub")
        await _select(pilot, app, stub)
        for key in ("x", "l"):
            await pilot.press(key)
            await pilot.pause()
            # It says which engine, and how to let gputui reach it.
            assert [n.message for n in app._notifications][-1].endswith(
                f"containerd-{stub[:12]} is seen only in a containerd cgroup: no connected "
                "engine lists it, so nothing here can act on it; to connect one, name "
                "containerd's state directory: --engine containerd=/run/containerd."
            ), key


# --- beside the real Docker engine ----------------------------------------------------------


def test_docker_and_the_toy_runtime_merged_by_id_both_statuses_shown(
    cgroups: Cgroups,
    run_container: Callable[..., Any],
    free_run_id: str,
) -> None:
    boxed = run_container(["sleep", "300"], name=f"seam-{free_run_id}", network_mode="none")
    box_pid = int(boxed.attrs["State"]["Pid"])
    trainer = toy_id(10)
    toy_pid = cgroups.run_in(trainer)
    cgroups.directory(boxed.id)  # the toy runtime claims Docker's container too
    toy = ToyRuntime(cgroups.root, {trainer: "toy-trainer", boxed.id: "toy-claims-it"})
    docker = DockerSource(label=f"gputui-test={free_run_id}")
    collector = _collector(cgroups, [box_pid, toy_pid], docker, toy, health=None)
    try:
        snap = collector.collect()
        deadline = time.monotonic() + 60  # a loaded engine may miss a refresh's 2 s wait
        while snap.container(boxed.id) is None or not snap.sources["docker"].ok:
            assert time.monotonic() < deadline, snap.sources["docker"]
            snap = collector.collect()
        assert list(snap.sources) == ["nvml", "docker", "toyrt"]
        assert snap.sources["docker"].ok and snap.sources["toyrt"].ok
        assert snap.engine is not None  # Docker's facts, the first source's
        by_id = {u.info.id: u for u in snap.containers}
        assert set(by_id) == {boxed.id, trainer}  # one entry for the id both list
        assert by_id[boxed.id].info.name == f"seam-{free_run_id}"  # Docker's: first wins
        assert by_id[boxed.id].pids == (box_pid,)
        assert by_id[trainer].info.name == "toy-trainer" and by_id[trainer].pids == (toy_pid,)
        owners = {cid: collector.container_owner(cid) for cid in by_id}
        docker_owner, toy_owner = owners[boxed.id], owners[trainer]
        assert docker_owner is not None and docker_owner.source == "docker"
        assert docker_owner.capabilities.exec and docker_owner.capabilities.lifecycle
        assert toy_owner is not None and toy_owner.source == "toyrt"
        # Routed to Docker: the test image's nvidia-smi runs; to the toy: refused by name.
        ran = collector.exec_in_container(boxed.id, ["echo", "routed"], 20.0)
        assert ran.exit_code == 0 and ran.stdout.strip() == "routed"
        refused = collector.exec_in_container(trainer, ["echo", "routed"], 20.0)
        assert refused.error == "toyrt does not offer exec"
        text = snapshot_to_text(snap, ())
        sources_line = text.split("\n")[1]
        assert "Docker: ok" in sources_line and "toyrt: ok" in sources_line
    finally:
        collector.close()
    doc = snapshot_to_json(snap)
    assert list(doc["sources"]) == ["nvml", "docker", "toyrt"]
    assert {c["name"] for c in doc["containers"]} == {f"seam-{free_run_id}", "toy-trainer"}
