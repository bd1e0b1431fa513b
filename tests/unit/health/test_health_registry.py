"""The check registry: one place per check id, one builder for results, one fixed display order."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import cast

import pytest

from gputui.health import registry, runner
from gputui.health.context import CheckContext
from gputui.health.registry import CONTAINER, GPU, HOST, Scope, check
from gputui.health.result import Result
from gputui.model.containers import ContainerInfo
from gputui.model.gpu import GpuSample
from gputui.model.status import HealthStatus
from tests.support.health import (
    container,
    containers_reading,
    gpu,
    gpu_reading,
    inputs,
    make_roots,
    run,
)

PACKAGE = Path(runner.__file__).parent

#: The display order `gputui doctor` has always had; changing it changes every front-end.
HOST_ORDER = [
    "nvml.loadable",
    "nvml.version_mismatch",
    "nvml.bindings",
    "nvml.driver",
    "gpu.xid",
    "docker.engine",
    "engines.sources",
    "docker.nvidia_runtime",
    "toolkit.installed",
    "cdi.specs",
    "podman.cdi",
    "podman.hooks",
    "cgroup.driver",
    "cgroup.nvml_hazard",
    "gputui.visibility",
    "host.kernel_log",
    "mps.daemon",
]
GPU_ORDER = [
    "gpu.lost",
    "gpu.persistence",
    "gpu.ecc",
    "gpu.remap",
    "gpu.throttle",
    "gpu.mig",
    "gpu.mig_layout",
]
CONTAINER_ORDER = [
    "container.cuda",
    "container.runtime",
    "container.gpu_visible",
    "container.gpu_unrequested",
    "container.utility_cap",
    "container.mig_device",
    "container.mps",
]


def _ids(scope: Scope) -> list[str]:
    return [c.id for c in registry.in_order(scope, runner.CHECK_MODULES)]


def test_every_registered_id_is_unique_and_in_the_documented_order() -> None:
    counts = Counter(c.id for c in registry.CHECKS)
    assert [i for i, n in counts.items() if n > 1] == []
    assert _ids(HOST) == HOST_ORDER
    assert _ids(GPU) == GPU_ORDER
    assert _ids(CONTAINER) == CONTAINER_ORDER
    assert len(registry.CHECKS) == len(HOST_ORDER) + len(GPU_ORDER) + len(CONTAINER_ORDER)


def test_only_stopped_container_judging_checks_see_stopped_containers() -> None:
    flags = {c.id: c.running_only for c in registry.CHECKS if c.scope is CONTAINER}
    assert [i for i, running_only in flags.items() if not running_only] == [
        "container.cuda",
        "container.runtime",
        "container.mig_device",
    ]
    assert [c.id for c in registry.CHECKS if c.on_lost_gpu] == ["gpu.lost"]


def test_run_checks_follows_the_registry_order(tmp_path: Path) -> None:
    both = (
        container(
            "a",
            gpu_request="all",
            gpu_request_via="device_requests",
            runtime="runc",
            cuda_version="12.4.1",
        ),
        container("b", status="exited", runtime="nvidia", cuda_version="12.4.1"),
    )
    checks = run(
        inputs(gpu_reading(gpu(0), gpu(1)), containers_reading(*both)), make_roots(tmp_path)
    )
    expected = [
        *HOST_ORDER,
        *(f"{i}:{n}" for n in (0, 1) for i in GPU_ORDER),
        "container.cuda:a",
        "container.gpu_visible:a",
        "container.utility_cap:a",
        "container.cuda:b",
        "container.runtime:b",
    ]
    assert list(checks) == expected


def test_the_order_does_not_depend_on_which_check_module_is_imported_first() -> None:
    # Tests and tools import single check modules; that must not reorder `gputui doctor`.
    code = (
        "import gputui.health.containers, gputui.health.host, gputui.health.gpu\n"
        "from gputui.health import registry, runner\n"
        "for scope in registry.Scope:\n"
        "    print(' '.join(c.id for c in registry.in_order(scope, runner.CHECK_MODULES)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        " ".join(HOST_ORDER),
        " ".join(GPU_ORDER),
        " ".join(CONTAINER_ORDER),
    ]


def _modules() -> dict[str, ast.Module]:
    return {p.name: ast.parse(p.read_text(), filename=str(p)) for p in PACKAGE.glob("*.py")}


def _check_modules() -> set[str]:
    return {c.module.rsplit(".", 1)[1] + ".py" for c in registry.CHECKS}


def test_no_check_module_builds_a_health_check_by_hand() -> None:
    check_modules = _check_modules()
    assert check_modules == {
        "nvml.py",
        "gpu.py",
        "docker.py",
        "podman.py",
        "host.py",
        "containers.py",
        "mig_mps.py",
        "kernel_log.py",
    }
    builders: dict[str, int] = {}
    for name, tree in _modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                if called == "HealthCheck":
                    builders[name] = builders.get(name, 0) + 1
            if name in check_modules and isinstance(node, ast.ImportFrom):
                # Not even imported: a check cannot stamp an id of its own.
                assert "HealthCheck" not in {a.name for a in node.names}, name
    # The one place a HealthCheck is made: Result.to_check, which the runner calls.
    assert builders == {"result.py": 1}


def test_each_check_id_is_written_once_in_the_package() -> None:
    literals: Counter[str] = Counter()
    for tree in _modules().values():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                literals[node.value] += 1
    ids = [c.id for c in registry.CHECKS]
    assert {i: literals[i] for i in ids} == dict.fromkeys(ids, 1)


def test_every_check_module_is_in_the_runner_order() -> None:
    listed = set(runner.CHECK_MODULES)
    assert {c.module for c in registry.CHECKS} == listed


def test_a_second_function_cannot_take_a_registered_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "CHECKS", registry.CHECKS)
    before = registry.CHECKS

    def impostor(ctx: CheckContext) -> Result:
        return Result.passed("never")

    with pytest.raises(ValueError, match="registered twice"):
        check("docker.engine", scope=HOST)(impostor)
    assert before == registry.CHECKS


@pytest.mark.parametrize(
    ("check_id", "kwargs", "message"),
    [
        ("docker", {}, "malformed"),
        ("gpu.ecc:0", {"scope": Scope.GPU}, "malformed"),
        ("Docker.Engine", {}, "malformed"),
        ("x.host", {"scope": Scope.HOST, "running_only": True}, "running_only"),
        ("x.gpu", {"scope": Scope.CONTAINER, "on_lost_gpu": True, "running_only": False}, "lost"),
    ],
)
def test_malformed_registrations_are_refused(
    check_id: str, kwargs: dict[str, object], message: str
) -> None:
    before = registry.CHECKS
    with pytest.raises(ValueError, match=message):
        # Deliberately outside the overloads: the runtime check is what is tested.
        check(check_id, **kwargs)  # type: ignore[call-overload]
    assert before == registry.CHECKS


def test_registering_the_same_function_again_keeps_its_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What a module reload does: the registry must neither refuse it nor move the check.
    monkeypatch.setattr(registry, "CHECKS", registry.CHECKS)
    entry = next(c for c in registry.CHECKS if c.id == "gpu.ecc")
    position = registry.CHECKS.index(entry)
    run = cast("Callable[[CheckContext, GpuSample], Result]", entry.run)
    check("gpu.ecc", scope=Scope.GPU)(run)
    assert registry.CHECKS.index(entry) == position
    assert len(registry.CHECKS) == len(HOST_ORDER) + len(GPU_ORDER) + len(CONTAINER_ORDER)


def test_a_new_check_runs_with_its_id_and_subject_stamped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry, "CHECKS", registry.CHECKS)

    def temperature(ctx: CheckContext, sample: GpuSample) -> Result:
        return Result.warn(f"{sample.temperature_c} °C", details=["hot"], fix="cool it")

    def label(ctx: CheckContext, box: ContainerInfo) -> Result | None:
        return None if box.name == "quiet" else Result.info(box.image)

    check("gpu.temperature", scope=Scope.GPU)(temperature)
    check("container.label", scope=Scope.CONTAINER, running_only=True)(label)
    loud = container("loud", gpu_request="all", gpu_request_via="device_requests")
    checks = run(
        inputs(gpu_reading(gpu(3)), containers_reading(loud, container("quiet"))),
        make_roots(tmp_path),
    )
    hot = checks["gpu.temperature:3"]
    assert (hot.status, hot.summary, hot.details, hot.fix, hot.subject) == (
        HealthStatus.WARN,
        "40 °C",
        ("hot",),
        "cool it",
        "3",
    )
    assert checks["container.label:loud"].subject == "loud"
    assert "container.label:quiet" not in checks
    # A module outside the runner's list runs after the listed ones, never silently not at all.
    order = list(checks)
    assert order[order.index("gpu.mig_layout:3") + 1] == "gpu.temperature:3"
    assert order[-3:] == [
        "container.gpu_visible:loud",
        "container.utility_cap:loud",
        "container.label:loud",
    ]


def test_a_crashing_container_check_fails_under_its_id_and_container(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(ctx: object, box: object) -> Result:
        raise RuntimeError("bad container")

    patched = tuple(
        replace(c, run=broken) if c.id == "container.utility_cap" else c for c in registry.CHECKS
    )
    monkeypatch.setattr(registry, "CHECKS", patched)
    web = container("web", gpu_request="all", gpu_request_via="device_requests")
    checks = run(inputs(docker=containers_reading(web)), make_roots(tmp_path))
    error = checks["container.utility_cap.error:web"]
    assert error.status is HealthStatus.FAIL
    assert error.subject == "web"
    assert "RuntimeError: bad container" in error.summary
    assert error.details[0].startswith("at test_health_registry.py:")
    assert "container.gpu_visible:web" in checks


def test_source_down_skips_go_through_the_builder(tmp_path: Path) -> None:
    checks = run(
        inputs(
            gpu_reading(ok=False, kind="DriverNotLoaded"),
            containers_reading(ok=False, kind="unreachable", error="refused"),
        ),
        make_roots(tmp_path),
    )
    for check_id in GPU_ORDER:
        skipped = checks[check_id]
        assert (skipped.status, skipped.summary, skipped.subject) == (
            HealthStatus.SKIP,
            "NVML unavailable (DriverNotLoaded)",
            None,
        )
        assert skipped.details == ("see nvml.loadable",)
    for check_id in CONTAINER_ORDER:
        assert checks[check_id].details == ("engine error: refused", "see docker.engine")
    # docker.nvidia_runtime adds what it could still read without the engine.
    runtime = checks["docker.nvidia_runtime"].details
    assert runtime[:2] == ("engine error: refused", "see docker.engine")
    assert runtime[2].endswith("daemon.json: absent")


def test_result_builder() -> None:
    built = Result.fail("bad", details=["a", "b"], fix="do", docs="https://example.org")
    assert built == Result(HealthStatus.FAIL, "bad", ("a", "b"), "do", "https://example.org")
    stamped = built.to_check("x.y", "gpu-7")
    assert (stamped.id, stamped.subject, stamped.details) == ("x.y:gpu-7", "gpu-7", ("a", "b"))
    assert Result.passed("ok").to_check("x.y").id == "x.y"
    assert [r.status for r in (Result.info("i"), Result.warn("w"), Result.skip("s"))] == [
        HealthStatus.INFO,
        HealthStatus.WARN,
        HealthStatus.SKIP,
    ]
    # One string would become one detail line per character.
    with pytest.raises(TypeError, match="not one string"):
        Result.warn("w", details="oops")
