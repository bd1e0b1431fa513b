"""Several real engines at once: names, pods, CPU/memory, exec and logs from each engine's source.

Each test starts its real runtime (tests/support/runtimes.py) beside the shared Docker engine,
names real host PIDs of its containers as GPU processes through a scenario file, and reads
``gputui --once --json`` with ``--engine`` pointing at the private runtime's socket or state
directory (discovery of the standard paths is tested in tests/unit/collect/test_engines.py).
The truth is the runtime's own answer (``podman top``, ``ctr task ls``, the CRI's names).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from gputui.collect.collector import READ_ONLY_REASON
from gputui.collect.docker.logs import LogLine, LogReader, LogStreamError
from gputui.collect.docker.source import DockerSource
from gputui.exporter.families import container_families
from gputui.model.settings import Settings
from gputui.ui.app import GpuTuiApp
from gputui.wiring.compose import build_collector
from tests.support import kubelet
from tests.support.pilot import screen_lines, select_container, toasts
from tests.support.pilot import wait_until as pilot_until
from tests.support.runtimes import (
    CRI_NAMESPACE,
    CTR_NAMESPACE,
    PREFIX,
    RUNTIME_IMAGE,
    Containerd,
    CriClient,
    Podman,
    RootlessDocker,
    containerd,
    rootful_podman,
    rootless_docker,
    rootless_podman,
    runtime_image,
    wait_until,
)

__all__ = [
    "containerd",
    "rootful_podman",
    "rootless_docker",
    "rootless_podman",
    "runtime_image",
]

#: PID 1 is ``sh``, which says hello on its log first; its child ``sleep`` is another process.
COMMAND = ("sh", "-c", "echo gputui-hello; sleep 900 & wait")


def _scenario(tmp_path: Path, pids: list[int]) -> Path:
    path = tmp_path / "scenario.json"
    processes = [{"pid": pid, "used_memory_mib": 100 + i} for i, pid in enumerate(pids)]
    gpu = {"index": 0, "name": "NVIDIA H200", "memory_total_mib": 143771,
           "memory_used_mib": 1000, "processes": processes}  # fmt: skip
    path.write_text(json.dumps({"nvml": "ok", "gpus": [gpu]}))
    return path


def _once(scenario: Path, *engines: str) -> dict[str, Any]:
    argv = [sys.executable, "-m", "gputui", "--scenario", str(scenario), "--once", "--json"]
    for engine in engines:
        argv += ["--engine", engine]
    result = subprocess.run(
        argv, capture_output=True, text=True, timeout=120, env=dict(os.environ), check=False
    )
    assert result.returncode == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def _container(doc: dict[str, Any], container_id: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [
        c for c in doc["containers"] + doc.get("other_containers", []) if c["id"] == container_id
    ]
    assert len(found) == 1, [c["id"] for c in doc["containers"]]
    return found[0]


def _health(doc: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    return [h for h in doc["health"] if h["id"].startswith(prefix)]


def test_podman_and_docker_at_once_by_name_with_figures_exec_and_logs(
    rootful_podman: Podman, tmp_path: Path
) -> None:
    sock = rootful_podman.service()
    name = f"{PREFIX}-{uuid.uuid4().hex[:8]}"
    container_id = rootful_podman.run_container(name, *COMMAND)
    wait_until(lambda: len(rootful_podman.top(name)) == 2, f"{name} did not start", 30)
    pids = [hpid for hpid, _ in rootful_podman.top(name)]
    scenario = _scenario(tmp_path, pids)

    doc = _once(scenario, "docker", f"podman=unix://{sock}")
    # Both engines are read, each under its own name, and podman is told from its /version.
    assert set(doc["sources"]) >= {"docker", "podman"}
    assert doc["sources"]["podman"]["ok"] is True, doc["sources"]["podman"]
    row = _container(doc, container_id)
    assert row["name"] == name  # not podman-<id12>
    assert row["source"] == "podman"
    assert row["runtime"] == "runc"  # not podman's "oci"
    assert sorted(row["pids"]) == sorted(pids)
    assert row["memory_used_bytes"] is not None and row["memory_used_bytes"] > 0
    assert row["cpu_percent"] is not None  # a one-shot samples its cgroup twice
    for proc in doc["processes"]:
        assert proc["container"]["name"] == name
    # No false verdicts from Docker's facts: podman's runtime is podman's.
    runtime_checks = [h for h in _health(doc, "container.runtime") if name in h["id"]]
    assert all(h["status"] != "fail" for h in runtime_checks), runtime_checks
    sources = _health(doc, "engines.sources")
    assert sources and sources[0]["status"] == "pass", sources
    assert any("podman (podman" in d for d in sources[0]["details"]), sources[0]

    # exec and logs go to the source that lists the container: podman's service.
    collector = build_collector(
        Settings(scenario=scenario, engines=("docker", f"podman=unix://{sock}")), health=False
    )
    try:
        deadline = time.monotonic() + 30
        while collector.container_owner(container_id) is None:
            assert time.monotonic() < deadline, "podman's container never listed"
            collector.collect()
        owner = collector.container_owner(container_id)
        assert owner is not None and owner.source == "podman" and owner.capabilities.exec
        # CPU % needs two samples of its cgroup: a live loop's second refresh has it.
        time.sleep(0.3)
        usage = {u.info.id: u for u in collector.collect().containers}[container_id]
        assert usage.info.cpu_percent is not None and usage.info.memory_used_bytes
        result = collector.exec_in_container(container_id, ["echo", "from-podman"], 20)
        assert result.exit_code == 0 and result.stdout.strip() == "from-podman", result
        argv = collector.interactive_exec_argv(container_id, ["sh"])
        assert argv is not None and argv[:3] == ["podman", "--url", f"unix://{sock}"]
        reader = collector.open_container_logs(container_id, tail=10, follow=False)
        try:
            text = ""
            deadline = time.monotonic() + 10
            while "gputui-hello" not in text and time.monotonic() < deadline:
                lines = reader.read()
                if lines is None:
                    break
                text += "\n".join(line.text for line in lines)
        finally:
            reader.close()
        assert "gputui-hello" in text
        # Inspect and top go to podman's service too: the same facts as podman's own top.
        details = collector.container_details(container_id)
        assert details.error is None and details.command == COMMAND, details
        assert details.restart_policy == "no" and details.networks
        top = collector.container_processes(container_id)
        assert top.error is None, top.error
        assert sorted(p.pid for p in top.processes) == sorted(pids)
        assert {p.command for p in top.processes} >= {"sleep 900"}
        # Pause and unpause through podman's service (the cgroup freezer).
        assert collector.container_action(container_id, "pause") is None

        def status() -> str:
            return {u.info.id: u for u in collector.collect().containers}[container_id].info.status

        wait_until(lambda: status() == "paused", "podman's container never read as paused", 15)
        assert collector.container_action(container_id, "unpause") is None
        wait_until(lambda: status() == "running", "podman's container never running again", 15)
    finally:
        collector.close()


#: Advice only a Docker user can follow: never given about a podman-only host.
DOCKER_ONLY = ("systemctl restart docker", "daemon.json", "--runtime=docker", "--gpus")


def test_doctor_judges_a_podman_host_by_podmans_gpu_path(
    rootful_podman: Podman, tmp_path: Path
) -> None:
    sock = rootful_podman.service()
    name = f"{PREFIX}-{uuid.uuid4().hex[:8]}"
    rootful_podman("create", "--name", name, "--runtime", "gpurunc", "--network", "none",
                   RUNTIME_IMAGE, "true")  # fmt: skip
    doctor = subprocess.run(
        [sys.executable, "-m", "gputui", "doctor", "--json", "--scenario",
         str(_scenario(tmp_path, [])), "--engine", f"podman=unix://{sock}"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    checks = {h["id"]: h for h in json.loads(doctor.stdout)["health"]}
    # Its runtime is podman's own inspect's, not the compatible API's "oci": no false FAIL.
    runtime = checks[f"container.runtime:{name}"]
    assert (runtime["status"], runtime["summary"]) == ("pass", "Runtime gpurunc is registered")
    # podman's own GPU checks judge this host (its CDI dirs and hooks.d, whatever they hold).
    cdi, hooks = checks["podman.cdi"], checks["podman.hooks"]
    assert cdi["status"] != "skip" and hooks["status"] != "skip", (cdi, hooks)
    assert "podman engine(s): podman" in cdi["details"]
    docker_cdi = checks["cdi.specs"]
    assert docker_cdi["status"] == "skip" and "podman.cdi" in docker_cdi["summary"]
    advice = {
        check_id: f"{h['summary']}\n{h.get('fix') or ''}"
        for check_id, h in checks.items()
        if h["status"] != "pass" and h["status"] != "skip"
    }
    docker_words = {i: [w for w in DOCKER_ONLY if w in text] for i, text in advice.items()}
    assert {i: words for i, words in docker_words.items() if words} == {}
    assert doctor.returncode in (0, 1), doctor.stderr


def test_a_dead_and_a_removed_podman_container_do_not_stay_running(
    rootful_podman: Podman,
) -> None:
    sock = rootful_podman.service()
    source = DockerSource(f"unix://{sock}", timeout=10.0, name="podman", product="podman")
    try:
        assert source.read().status.ok
        name = f"{PREFIX}-{uuid.uuid4().hex[:8]}"
        container_id = rootful_podman.run_container(name, "sh", "-c", "sleep 3")

        def status() -> str | None:
            listed = {c.id: c for c in source.read().containers}
            return listed[container_id].status if container_id in listed else None

        wait_until(lambda: status() == "running", "the container was never listed running", 30)
        # podman says "died"/"remove" where Docker says "die"/"destroy": the events must count.
        wait_until(lambda: status() == "exited", "a dead podman container stayed running", 30)
        rootful_podman("rm", name)
        wait_until(lambda: status() is None, "a removed podman container stayed listed", 30)
        engine = source.read().engine
        assert engine is not None and engine.product == "podman"
    finally:
        source.close()


def test_containerd_cri_and_ctr_names_pods_and_figures_without_grpc(
    containerd: Containerd, tmp_path: Path
) -> None:
    cri = CriClient(containerd.sock)
    try:
        pod = cri.run_pod(containerd, f"{PREFIX}-trainer-0", "ml", "burstable", COMMAND)
    finally:
        cri.close()
    ctr_name = f"{PREFIX}-{uuid.uuid4().hex[:8]}"
    containerd.ctr(CTR_NAMESPACE, "run", "-d", "docker.io/library/gputui-rt:latest", ctr_name,
                   *COMMAND)  # fmt: skip
    init = containerd.task_pid(CRI_NAMESPACE, pod.container_id)
    ctr_init = containerd.task_pid(CTR_NAMESPACE, ctr_name)
    scenario = _scenario(tmp_path, [init, ctr_init])
    state = containerd.state

    # Only containerd: a node without Docker reads its containers, and nothing FAILs for it.
    doc = _once(scenario, f"containerd={state}")
    assert [k for k in doc["sources"] if k != "nvml"] == ["containerd"]
    assert doc["sources"]["containerd"]["ok"] is True, doc["sources"]["containerd"]
    row = _container(doc, pod.container_id)
    assert row["name"] == pod.container_name
    assert row["k8s_pod"] == pod.name and row["k8s_namespace"] == pod.namespace
    assert row["source"] == "containerd"
    assert row["image"].endswith("gputui-rt:latest")
    # Its own cgroup (/kubepods/burstable/pod<uid>/<id>): its figures, not the node's.
    assert row["memory_used_bytes"] is not None and row["memory_used_bytes"] > 0
    assert row["cpu_percent"] is not None
    sandbox = _container(doc, pod.sandbox_id)
    assert sandbox["name"] == "POD" and sandbox["k8s_pod"] == pod.name
    ctr_row = _container(doc, ctr_name)
    assert ctr_row["name"] == ctr_name and ctr_row["k8s_pod"] is None
    assert [h for h in doc["health"] if h["status"] == "fail"] == []
    # Its containers are judged (against containerd, in Kubernetes' words), not skipped.
    # A pod's container is its own subject: pods share container names (`main`).
    subject = f"container.gpu_unrequested:{pod.namespace}/{pod.name}/main"
    (unrequested,) = [h for h in doc["health"] if h["id"] == subject]
    assert unrequested["status"] == "warn" and "resources.limits" in unrequested["fix"]

    # `gputui doctor` on a node without Docker: no false FAIL, exit 0.
    doctor = subprocess.run(
        [sys.executable, "-m", "gputui", "doctor", "--json", "--scenario", str(scenario),
         "--engine", f"containerd={state}"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    fails = [h for h in json.loads(doctor.stdout)["health"] if h["status"] == "fail"]
    assert doctor.returncode == 0 and not fails, (fails, doctor.stderr)

    # Through the collector: figures, labels, a ctr container's refusals, inspect and top.
    collector = build_collector(Settings(scenario=scenario, engines=(f"containerd={state}",)))
    try:
        collector.collect()
        time.sleep(0.3)
        snapshot = collector.collect()
        usage = {u.info.id: u for u in snapshot.containers}[pod.container_id]
        assert usage.info.cpu_percent is not None  # the second sample of its own cgroup
        # The exporter's pod and namespace labels, as dcgm-exporter's are for the same pod.
        labelled = [
            sample.labels
            for family in container_families(snapshot)
            for sample in family.samples
            if sample.labels.get("container_id") == pod.container_id
        ]
        assert labelled and all(
            (lb["pod"], lb["namespace"], lb["container"]) == (pod.name, pod.namespace, "main")
            for lb in labelled
        ), labelled
        # A ctr container has no CRI: exec and logs are refused, naming ctr's own exec.
        result = collector.exec_in_container(ctr_name, ["true"], 5)
        assert result.exit_code is None and result.error is not None
        assert f"ctr -n {CTR_NAMESPACE} task exec" in result.error, result.error
        with pytest.raises(LogStreamError, match="not a Kubernetes pod's"):
            collector.open_container_logs(ctr_name, tail=10, follow=False)
        # Inspect reads the bundle: the process and mounts; what a bundle lacks is said.
        details = collector.container_details(pod.container_id)
        assert details.error is None and details.command == COMMAND, details
        assert details.mounts and "restart policy" in details.unknown
        top = collector.container_processes(pod.container_id)
        assert top.error is None and top.total == 2, top
        # The pod shares one PID namespace (its sandbox is 1): the PID in it, not the host's.
        assert any(p.pid == init and p.container_pid not in (None, init) for p in top.processes)
    finally:
        collector.close()


#: A pod's container that writes its log as a kubelet's pods do: both streams, a line longer than
#: the runtime's 16 KiB (written as a partial record and its end), and a line seconds later.
CRI_LOGGER = (
    "sh", "-c",
    "echo gputui-hello; echo gputui-oops >&2; printf '%020000d-end\\n' 0; echo gputui-after; "
    "sleep 8; echo gputui-later; sleep 900 & wait",
)  # fmt: skip


def _read_all(reader: LogReader, until: str | None = None, deadline_s: float = 20) -> list[LogLine]:
    """Every line a reader gives until it ends (or, following, until a line says ``until``)."""
    lines: list[LogLine] = []
    deadline = time.monotonic() + deadline_s
    try:
        while time.monotonic() < deadline:
            got = reader.read()
            if got is None:
                break
            lines += got
            if until is not None and any(line.text == until for line in got):
                break
    finally:
        reader.close()
    return lines


def test_a_cri_pods_container_takes_exec_and_logs_through_the_cri(
    containerd: Containerd, tmp_path: Path
) -> None:
    """x and l on a real pod's container: ExecSync runs the command, the CRI log file is read;
    a terminal and the lifecycle keys are refused naming kubectl; --read-only refuses exec."""
    cri = CriClient(containerd.sock)
    try:
        pod = cri.run_pod(containerd, f"{PREFIX}-exec-0", "ml", "burstable", CRI_LOGGER)
    finally:
        cri.close()
    init = containerd.task_pid(CRI_NAMESPACE, pod.container_id)
    scenario = _scenario(tmp_path, [init])
    engines = (f"containerd={containerd.state}",)
    collector = build_collector(Settings(scenario=scenario, engines=engines))
    try:
        collector.collect()
        owner = collector.container_owner(pod.container_id)
        assert owner is not None and owner.source == "containerd"
        assert owner.capabilities.exec and owner.capabilities.logs
        # Following from now (no tail): the line the container writes seconds later arrives.
        follow = collector.open_container_logs(pod.container_id, tail=0, follow=True)
        assert follow.read() == []

        # x: the image's nvidia-smi (a script) runs in the container, in the pod's PID namespace.
        smi = collector.exec_in_container(pod.container_id, ["nvidia-smi"], 10)
        assert (smi.exit_code, smi.error, smi.timed_out) == (0, None, False), smi
        assert "NVIDIA-SMI" in smi.stdout and "NSpid" in smi.stdout
        # The same call keeps each stream and the exit status.
        both = collector.exec_in_container(
            pod.container_id, ["sh", "-c", "echo out; echo err >&2; exit 5"], 10
        )
        assert (both.exit_code, both.stdout, both.stderr, both.error) == (5, "out\n", "err\n", None)
        # A missing nvidia-smi is said as such, with why a pod has none.
        missing = collector.exec_in_container(pod.container_id, ["/opt/none/nvidia-smi"], 10)
        assert missing.exit_code is None and missing.error is not None, missing
        assert "/opt/none/nvidia-smi not found in the container" in missing.error
        assert "nvidia.com/gpu" in missing.error
        # A command past its timeout: the call returns, and containerd has stopped it.
        started = time.monotonic()
        slow = collector.exec_in_container(pod.container_id, ["sleep", "47"], 1)
        assert time.monotonic() - started < 5
        assert slow.timed_out and slow.exit_code is None and "within 1 s" in (slow.error or "")
        wait_until(
            lambda: "sleep 47" not in containerd.in_container_ps(CRI_NAMESPACE, pod.container_id),
            "the timed-out exec still runs",
            10,
        )
        # The sandbox is no container of the pod's to exec in.
        sandbox = collector.exec_in_container(pod.sandbox_id, ["true"], 5)
        assert sandbox.error is not None and "sandbox" in sandbox.error

        # l: the CRI log file, both streams, the long line one line (joined, then cut).
        lines = _read_all(collector.open_container_logs(pod.container_id, tail=100, follow=False))
        texts = [line.text for line in lines]
        # Each stream in its order (containerd copies the two streams apart: not each other's).
        assert [line.text for line in lines if line.stream == "stderr"] == ["gputui-oops"]
        out = [line for line in lines if line.stream == "stdout"]
        assert out[0].text == "gputui-hello" and out[2].text == "gputui-after", texts
        long = out[1]
        assert long.cut and long.text.startswith("0" * 1000) and set(long.text) == {"0"}
        assert all(line.timestamp and line.timestamp.endswith("Z") for line in lines)
        tail = _read_all(collector.open_container_logs(pod.container_id, tail=1, follow=False))
        assert [line.text for line in tail] == [texts[-1]]
        later = _read_all(follow, until="gputui-later")
        assert "gputui-later" in [line.text for line in later], later

        # A terminal and the lifecycle keys stay the kubelet's: refused, naming kubectl.
        assert collector.interactive_exec_argv(pod.container_id, ["sh"]) is None
        assert "kubectl exec -it" in owner.capabilities.why("interactive_exec")
        stop = collector.container_action(pod.container_id, "stop")
        assert stop is not None and "containerd does not offer container stop" in stop
        assert "kubectl delete pod" in stop
        assert containerd.task_pid(CRI_NAMESPACE, pod.container_id) == init  # still running
    finally:
        collector.close()
    read_only = build_collector(Settings(scenario=scenario, engines=engines, read_only=True))
    try:
        read_only.collect()
        refused = read_only.exec_in_container(pod.container_id, ["nvidia-smi"], 5)
        assert (refused.exit_code, refused.error) == (None, READ_ONLY_REASON)
    finally:
        read_only.close()


def _said(shown: list[str], start: str) -> bool:
    """Whether the last toast starts with ``start``."""
    return bool(shown) and shown[-1].startswith(start)


async def test_the_keys_on_a_real_cri_pods_container(
    containerd: Containerd, tmp_path: Path
) -> None:
    """In the TUI: x shows the container's nvidia-smi, l its log; X, E, D and P say which engine
    cannot and what to use instead; with --read-only x is gone and refused."""
    cri = CriClient(containerd.sock)
    try:
        pod = cri.run_pod(containerd, f"{PREFIX}-keys-0", "ml", "burstable", CRI_LOGGER)
    finally:
        cri.close()
    scenario = _scenario(tmp_path, [containerd.task_pid(CRI_NAMESPACE, pod.container_id)])
    engines = (f"containerd={containerd.state}",)
    settings = Settings(scenario=scenario, engines=engines, interval=60.0)
    app = GpuTuiApp(build_collector(settings), settings)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        shown = toasts(app)
        await select_container(app, pilot, pod.container_id)
        await pilot.press("x")
        await pilot_until(pilot, lambda: "NVIDIA-SMI 580" in "\n".join(screen_lines(app)), "x")
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("l")
        await pilot_until(pilot, lambda: "gputui-after" in "\n".join(screen_lines(app)), "l")
        assert "gputui-oops" in "\n".join(screen_lines(app))
        await pilot.press("escape")
        await pilot.pause()
        asked = {
            "X": "containerd does not offer interactive exec (a terminal in a pod's container "
            "is the kubelet's: `kubectl exec -it -n NAMESPACE POD -c CONTAINER -- COMMAND`",
            "E": "containerd does not offer interactive exec (a terminal in a pod's container",
            "D": "containerd does not offer container stop/start/restart/pause (a pod's "
            "containers are the kubelet's, which starts again what containerd stops: "
            "`kubectl delete pod -n NAMESPACE POD`",
            "P": "containerd does not offer container stop/start/restart/pause (a pod's",
        }
        for key, said in asked.items():
            await select_container(app, pilot, pod.container_id)
            await pilot.press(key)
            await pilot_until(pilot, partial(_said, shown, said), key)
            shown.clear()
    read_only = Settings(scenario=scenario, engines=engines, interval=60.0, read_only=True)
    app = GpuTuiApp(build_collector(read_only), read_only)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await select_container(app, pilot, pod.container_id)
        assert app.check_action("exec_smi", ()) is False  # gone with --read-only
        app.machine.exec_smi()  # reached anyway (the palette, a keymap): refused, not run
        await pilot.pause()
        assert [n.message for n in app._notifications][-1].startswith("Read-only mode")


def test_a_cri_pods_idle_gpu_is_found_from_the_kubelets_allocation(
    containerd: Containerd, tmp_path: Path
) -> None:
    """A real CRI pod that the kubelet (our gRPC test peer) gave GPU 0 and that runs nothing on
    it: an idle reservation by its Kubernetes names, in the JSON report and the exporter."""
    cri = CriClient(containerd.sock)
    try:
        pod = cri.run_pod(containerd, f"{PREFIX}-idle-0", "ml", "burstable", COMMAND)
    finally:
        cri.close()
    gpu_uuid = f"GPU-{uuid.uuid4()}"
    scenario = tmp_path / "scenario.json"
    gpu = {"index": 0, "uuid": gpu_uuid, "name": "NVIDIA H200", "memory_total_mib": 143771,
           "memory_used_mib": 0, "processes": []}  # fmt: skip
    scenario.write_text(json.dumps({"nvml": "ok", "gpus": [gpu]}))
    state = containerd.state
    reply = kubelet.answer(
        kubelet.pod(
            pod.name,
            pod.namespace,
            kubelet.container(pod.container_name, kubelet.devices("nvidia.com/gpu", gpu_uuid)),
        )
    )

    def run(*argv: str, sock: str) -> str:
        result = subprocess.run(
            [sys.executable, "-m", "gputui", *argv, "--scenario", str(scenario),
             "--engine", f"containerd={state}"],
            capture_output=True, text=True, timeout=120, check=False,
            env={**os.environ, "GPUTUI_POD_RESOURCES": sock, "GPUTUI_LEDGER": "off"},
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        return result.stdout

    def idle(doc: dict[str, Any]) -> list[str]:
        return [f["subject"] for f in doc["findings"] if f["kind"] == "idle_reservation"]

    # The bundle names no GPU: without the kubelet the reservation is invisible.
    assert idle(json.loads(run("--once", "--json", sock="off"))) == []
    with kubelet.pod_resources_server(tmp_path / "kubelet.sock", lambda _r, _c: reply) as sock:
        doc = json.loads(run("--once", "--json", sock=sock))
        exposition = run("export", "--once", sock=sock)
    row = _container(doc, pod.container_id)
    assert (row["gpu_request"], row["gpu_request_via"]) == ([gpu_uuid], "kubelet")
    assert (row["k8s_pod"], row["k8s_namespace"]) == (pod.name, pod.namespace)
    assert idle(doc) == [f"container:{pod.container_id}"]
    assert row["idle_reserved"] is True
    (line,) = [
        ln
        for ln in exposition.splitlines()
        if ln.startswith("gputui_container_idle_gpu_reservation{") and pod.container_id[:12] in ln
    ]
    assert f'pod="{pod.name}"' in line and f'namespace="{pod.namespace}"' in line
    assert line.endswith(" 1.0"), line


@pytest.fixture(autouse=True)
def _linux_only() -> None:
    if not Path("/proc/self/cgroup").exists():
        pytest.skip("needs Linux /proc and cgroups")


def test_a_one_shot_gives_docker_containers_a_cpu_figure(
    docker_engine: Any, run_container: Any, tmp_path: Path
) -> None:
    # Before, every engine's container CPU % in `--once --json` was null: one cgroup sample.
    box = run_container(["sh", "-c", "while :; do :; done"], network_mode="none")
    box.reload()
    pid = int(box.attrs["State"]["Pid"])
    doc = _once(_scenario(tmp_path, [pid]), "docker")
    row = _container(doc, box.id)
    assert row["source"] == "docker"
    assert row["cpu_percent"] is not None and row["cpu_percent"] > 1.0, row


def test_rootless_podman_and_rootless_docker_by_name_from_their_users_sockets(
    rootless_podman: Podman, rootless_docker: RootlessDocker, tmp_path: Path
) -> None:
    podman_sock = rootless_podman.service()
    podman_name = f"{PREFIX}-{uuid.uuid4().hex[:8]}"
    podman_id = rootless_podman.run_container(podman_name, *COMMAND)
    wait_until(lambda: len(rootless_podman.top(podman_name)) == 2, "podman did not start", 30)
    podman_pid = rootless_podman.top(podman_name)[0][0]
    docker_name = f"{PREFIX}-{uuid.uuid4().hex[:8]}"
    docker_id = rootless_docker(
        "run", "-d", "--name", docker_name, "--network", "none", "gputui-rt:latest", *COMMAND
    ).strip()
    docker_pid = int(rootless_docker("inspect", "--format", "{{.State.Pid}}", docker_name))
    scenario = _scenario(tmp_path, [podman_pid, docker_pid])

    doc = _once(scenario, f"podman=unix://{podman_sock}", f"docker={rootless_docker.host}")
    assert doc["sources"]["podman"]["ok"] and doc["sources"]["docker"]["ok"], doc["sources"]
    podman_row = _container(doc, podman_id)
    docker_row = _container(doc, docker_id)
    assert (podman_row["name"], podman_row["source"]) == (podman_name, "podman")
    assert (docker_row["name"], docker_row["source"]) == (docker_name, "docker")
    # cgroup v1 gives neither a cgroup of its own: their figures are unknown, never the
    # session's (that showed 200 % CPU and the session's memory).
    for row in (podman_row, docker_row):
        assert row["cpu_percent"] is None and row["memory_used_bytes"] is None, row
    procs = {p["pid"]: p for p in doc["processes"]}
    assert procs[podman_pid]["container"]["name"] == podman_name
    assert procs[docker_pid]["container"]["name"] == docker_name


def test_a_podman_pods_containers_carry_its_name(rootful_podman: Podman) -> None:
    sock = rootful_podman.service()
    pod = f"{PREFIX}-pod-{uuid.uuid4().hex[:6]}"
    rootful_podman("pod", "create", "--name", pod, "--infra=false")
    names = [f"{pod}-a", f"{pod}-b"]
    ids = [
        rootful_podman("run", "-d", "--pod", pod, "--name", n, "--network", "none",
                       "docker.io/library/gputui-rt:latest", "sleep", "900").strip()
        for n in names
    ]  # fmt: skip
    source = DockerSource(f"unix://{sock}", timeout=10.0, name="podman", product="podman")
    try:
        deadline = time.monotonic() + 30
        while True:
            listed = {c.id: c for c in source.read().containers}
            if all(i in listed for i in ids) or time.monotonic() > deadline:
                break
        assert [listed[i].name for i in ids] == names
        assert [listed[i].k8s_pod for i in ids] == [pod, pod]  # from podman's own pod record
    finally:
        source.close()
        rootful_podman("pod", "rm", "--force", pod)
