"""Runtime-health orchestration: every check runs, crashes stay contained, output formatting."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from gputui.collect.sources import HealthInputs
from gputui.health import gpu as health_gpu
from gputui.health import registry, runner
from gputui.health.context import HealthRoots
from gputui.health.result import Result
from gputui.health.runner import installed_version, run_checks, run_version_output
from gputui.model.status import HealthCheck, HealthStatus, worst_status
from tests.support.health import (
    container,
    containers_reading,
    gpu,
    gpu_reading,
    inputs,
    make_roots,
    run,
)

S = HealthStatus

HOST_IDS = {
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
    "cgroup.driver",
    "cgroup.nvml_hazard",
    "gputui.visibility",
}


def test_healthy_machine_runs_every_check_once(tmp_path: Path) -> None:
    checks = run(
        inputs(
            gpu_reading(gpu(0), gpu(1)),
            containers_reading(container("web")),
        ),
        make_roots(tmp_path),
    )
    assert set(checks) >= HOST_IDS
    for base in ("gpu.lost", "gpu.persistence", "gpu.ecc", "gpu.remap", "gpu.throttle", "gpu.mig"):
        assert checks[f"{base}:0"].status is S.PASS
        assert checks[f"{base}:1"].subject == "1"
    # Only the missing nvidia runtime and the absent CDI spec are findings on this machine.
    assert {c.id for c in checks.values() if c.status in (S.FAIL, S.WARN)} == {
        "docker.nvidia_runtime"
    }
    assert not any(id_.endswith(".error") for id_ in checks)


def test_nvml_down_skips_gpu_checks_with_the_reason(tmp_path: Path) -> None:
    checks = run(
        inputs(
            gpu_reading(ok=False, kind="LibraryNotFound", error="NVML Shared Library Not Found")
        ),
        make_roots(tmp_path),
    )
    for check_id in ("nvml.driver", "gpu.xid", "gpu.persistence", "gpu.ecc", "gpu.mig"):
        assert checks[check_id].status is S.SKIP, check_id
        assert "NVML unavailable" in checks[check_id].summary
        assert "NVML Shared Library Not Found" in checks[check_id].summary
    assert checks["nvml.loadable"].status is S.FAIL


def test_docker_down_skips_docker_checks(tmp_path: Path) -> None:
    checks = run(
        inputs(docker=containers_reading(ok=False, kind="unreachable", error="connection refused")),
        make_roots(tmp_path),
    )
    for check_id in (
        "docker.nvidia_runtime",
        "cgroup.nvml_hazard",
        "container.gpu_visible",
        "container.gpu_unrequested",
        "container.utility_cap",
        "container.cuda",
    ):
        assert checks[check_id].status is S.SKIP, check_id
        assert checks[check_id].summary == "Docker engine unreachable"
    assert checks["docker.engine"].status is S.FAIL


def test_a_crashing_check_becomes_a_visible_fail_and_the_others_still_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(ctx: object, sample: object) -> Result:
        raise ZeroDivisionError("boom")

    patched = tuple(replace(c, run=broken) if c.id == "gpu.ecc" else c for c in registry.CHECKS)
    monkeypatch.setattr(registry, "CHECKS", patched)
    checks = run(inputs(gpu_reading(gpu(0), gpu(1))), make_roots(tmp_path))
    for index in (0, 1):
        error = checks[f"gpu.ecc.error:{index}"]
        assert error.status is S.FAIL
        assert "ZeroDivisionError: boom" in error.summary
        assert error.subject == str(index)
        assert checks[f"gpu.mig:{index}"].status is S.PASS
    assert "gpu.ecc:0" not in checks


def test_a_crashing_host_check_is_reported_under_its_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(ctx: object) -> Result:
        raise KeyError("missing")

    patched = tuple(replace(c, run=broken) if c.id == "gpu.xid" else c for c in registry.CHECKS)
    monkeypatch.setattr(registry, "CHECKS", patched)
    checks = run(inputs(), make_roots(tmp_path))
    assert checks["gpu.xid.error"].status is S.FAIL
    assert "KeyError" in checks["gpu.xid.error"].summary
    assert checks["nvml.loadable"].status is S.PASS


def test_lost_gpu_skips_its_other_checks(tmp_path: Path) -> None:
    checks = run(
        inputs(gpu_reading(gpu(0, lost=True, error="GpuIsLost"), gpu(1))), make_roots(tmp_path)
    )
    assert checks["gpu.lost:0"].status is S.FAIL
    assert checks["gpu.ecc:0"].status is S.SKIP
    assert checks["gpu.ecc:0"].summary == "GPU lost (see gpu.lost)"
    assert checks["gpu.ecc:1"].status is S.PASS


def test_stopped_containers_only_get_cuda_and_runtime_checks(tmp_path: Path) -> None:
    stopped = container(
        "old",
        status="exited",
        gpu_request="all",
        gpu_request_via="env",
        runtime="runc",
        cuda_version="12.4.1",
    )
    checks = run(inputs(docker=containers_reading(stopped)), make_roots(tmp_path))
    assert checks["container.cuda:old"].status is S.PASS
    assert "container.gpu_visible:old" not in checks
    assert "container.utility_cap:old" not in checks


def test_default_roots_are_the_real_paths() -> None:
    roots = HealthRoots()
    assert (roots.proc, roots.sys, roots.daemon_json) == (
        "/proc",
        "/sys",
        "/etc/docker/daemon.json",
    )
    assert roots.cdi_dirs == ("/etc/cdi", "/var/run/cdi")


def test_run_checks_defaults_work_on_this_machine() -> None:
    # Real which / subprocess / importlib.metadata: whatever the host has, nothing crashes.
    checks = run_checks(
        HealthInputs(
            gpu=gpu_reading(ok=False, kind="LibraryNotFound"),
            containers=containers_reading(ok=False, kind="unreachable"),
            processes=(),
            visibility=inputs().visibility,
        )
    )
    assert not [c for c in checks if c.id.endswith(".error")]
    assert {c.id for c in checks} >= HOST_IDS


# --- worst_status -----------------------------------------------------------


def _check(status: HealthStatus, check_id: str = "x.y", **kw: object) -> HealthCheck:
    return HealthCheck(id=check_id, status=status, summary=f"{status.value} summary", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("statuses", "worst"),
    [
        ([S.PASS, S.FAIL, S.WARN], S.FAIL),
        ([S.PASS, S.INFO, S.WARN], S.WARN),
        ([S.SKIP, S.INFO, S.PASS], S.INFO),
        ([S.SKIP, S.PASS], S.PASS),
        ([S.SKIP], S.SKIP),
        ([], None),
    ],
)
def test_worst_status(statuses: list[HealthStatus], worst: HealthStatus | None) -> None:
    assert worst_status(_check(s) for s in statuses) is worst


# --- the default helpers ----------------------------------------------------------------------


def test_run_version_output_runs_without_a_shell() -> None:
    out = run_version_output([sys.executable, "--version"])
    assert out is not None
    assert out.startswith("Python ")
    # A shell would expand this; argv is passed as is, so python sees a missing file and fails.
    assert run_version_output([sys.executable, "$(echo nope)"]) is None
    assert run_version_output(["/nonexistent/nvidia-ctk", "--version"]) is None


def test_run_version_output_times_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "VERSION_TIMEOUT_S", 0.2)
    assert run_version_output([sys.executable, "-c", "import time; time.sleep(5)"]) is None


def test_installed_version() -> None:
    assert installed_version("pytest") == pytest.__version__
    assert installed_version("no-such-distribution-for-gputui") is None


def test_health_modules_import_no_ui_or_vendor_library() -> None:
    import ast

    for module in (runner, health_gpu):
        assert module.__file__ is not None
    folder = Path(runner.__file__).parent
    paths = sorted(folder.glob("*.py"))
    # Every module of the package, not a pattern that could match nothing.
    assert {"runner.py", "registry.py", "containers.py", "gpu.py"} <= {p.name for p in paths}
    for path in paths:
        tree = ast.parse(path.read_text())
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
        assert not names & {"textual", "rich", "pynvml", "docker"}, path.name
