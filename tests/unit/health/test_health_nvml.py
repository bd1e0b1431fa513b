"""nvml.* checks and container.cuda: driver, library, bindings and image CUDA requirements."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputui.health.containers import evaluate_cuda_requirement
from gputui.model.status import HealthCheck, HealthStatus
from tests.support.health import (
    DRIVER,
    container,
    containers_reading,
    gpu_reading,
    inputs,
    make_roots,
    run,
)

S = HealthStatus


# --- nvml.loadable --------------------------------------------------------------------------


def test_loadable_pass(tmp_path: Path) -> None:
    check = run(inputs(), make_roots(tmp_path))["nvml.loadable"]
    assert check.status is S.PASS
    assert f"driver {DRIVER}" in check.details


@pytest.mark.parametrize(
    ("kind", "summary_part", "fix_part"),
    [
        ("LibraryNotFound", "not found", "--gpus all"),
        ("NVMLError_LibraryNotFound", "not found", "utility"),
        ("DriverNotLoaded", "kernel module is not loaded", "modprobe nvidia"),
        ("NoPermission", "No permission", "/dev/nvidia"),
        ("Unknown", "Unknown Error", "daemon-reload"),
        ("LibRmVersionMismatch", "version mismatch", "Reboot"),
    ],
)
def test_loadable_fail_kinds(tmp_path: Path, kind: str, summary_part: str, fix_part: str) -> None:
    check = run(inputs(gpu_reading(ok=False, kind=kind, error="boom")), make_roots(tmp_path))[
        "nvml.loadable"
    ]
    assert check.status is S.FAIL
    assert summary_part in check.summary
    assert check.fix is not None
    assert fix_part in check.fix
    assert "error: boom" in check.details


def test_loadable_unknown_kind_uses_source_fix(tmp_path: Path) -> None:
    reading = gpu_reading(ok=False, kind="Weird", error="odd failure", fix="do the thing")
    check = run(inputs(reading), make_roots(tmp_path))["nvml.loadable"]
    assert check.status is S.FAIL
    assert "odd failure" in check.summary
    assert check.fix == "do the thing"


# --- nvml.version_mismatch -------------------------------------------------------------------

PROC_VERSION = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {v}  Release Build  "
    "(dvs-builder@U22-I3-AE18-23-3)  Mon Sep  1 00:00:00 UTC 2025\n"
    "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n"
)


def _module_files(tmp_path: Path, proc: str | None, sys_version: str | None) -> None:
    if proc is not None:
        (tmp_path / "proc/driver/nvidia").mkdir(parents=True)
        (tmp_path / "proc/driver/nvidia/version").write_text(PROC_VERSION.format(v=proc))
    if sys_version is not None:
        (tmp_path / "sys/module/nvidia").mkdir(parents=True)
        (tmp_path / "sys/module/nvidia/version").write_text(sys_version + "\n")


def test_version_mismatch_pass_when_module_matches(tmp_path: Path) -> None:
    roots = make_roots(tmp_path)
    _module_files(tmp_path, DRIVER, DRIVER)
    check = run(inputs(), roots)["nvml.version_mismatch"]
    assert check.status is S.PASS
    assert any(DRIVER in d and "driver/nvidia/version" in d for d in check.details)


@pytest.mark.parametrize(("proc", "sysfs"), [("575.57.08", None), (None, "575.57.08")])
def test_version_mismatch_fail_from_files(
    tmp_path: Path, proc: str | None, sysfs: str | None
) -> None:
    roots = make_roots(tmp_path)
    _module_files(tmp_path, proc, sysfs)
    check = run(inputs(), roots)["nvml.version_mismatch"]
    assert check.status is S.FAIL
    assert "575.57.08" in check.summary
    assert DRIVER in check.summary
    assert check.fix is not None
    assert "Reboot" in check.fix


def test_version_mismatch_fail_from_nvml_error(tmp_path: Path) -> None:
    roots = make_roots(tmp_path)
    _module_files(tmp_path, "575.57.08", None)
    reading = gpu_reading(
        ok=False, kind="LibRmVersionMismatch", error="Driver/library version mismatch"
    )
    check = run(inputs(reading), roots)["nvml.version_mismatch"]
    assert check.status is S.FAIL
    assert "kernel module 575.57.08" in check.details[0]


def test_version_mismatch_without_files(tmp_path: Path) -> None:
    roots = make_roots(tmp_path)
    assert run(inputs(), roots)["nvml.version_mismatch"].status is S.PASS
    down = gpu_reading(ok=False, kind="LibraryNotFound")
    assert run(inputs(down), roots)["nvml.version_mismatch"].status is S.SKIP


def test_version_mismatch_info_when_module_loaded_but_nvml_down(tmp_path: Path) -> None:
    roots = make_roots(tmp_path)
    _module_files(tmp_path, None, DRIVER)
    down = gpu_reading(ok=False, kind="NoPermission")
    assert run(inputs(down), roots)["nvml.version_mismatch"].status is S.INFO


# --- nvml.bindings -----------------------------------------------------------------------------


def test_bindings_pass(tmp_path: Path) -> None:
    check = run(inputs(), make_roots(tmp_path))["nvml.bindings"]
    assert check.status is S.PASS
    assert "13.615.71" in check.summary


@pytest.mark.parametrize(
    ("dists", "summary_part"),
    [
        ({"nvidia-ml-py": "13.615.71", "pynvml": "13.0.1"}, "Deprecated pynvml 13.0.1"),
        ({"nvidia-ml-py": "13.615.71", "pynvml": "11.5.0"}, "shadows nvidia-ml-py"),
        ({"nvidia-ml-py3": "7.352.0"}, "Stale nvidia-ml-py3 7.352.0"),
        ({}, "not installed"),
    ],
)
def test_bindings_warn_on_conflicting_packages(
    tmp_path: Path, dists: dict[str, str], summary_part: str
) -> None:
    check = run(inputs(), make_roots(tmp_path), dists=dists.get)["nvml.bindings"]
    assert check.status is S.WARN
    assert summary_part in check.summary
    assert check.fix is not None
    assert "nvidia-ml-py" in check.fix


def test_bindings_warn_on_driver_skew(tmp_path: Path) -> None:
    reading = gpu_reading(binding=("nvmlDeviceGetComputeRunningProcesses_v3",), driver="470.82.01")
    check = run(inputs(reading), make_roots(tmp_path))["nvml.bindings"]
    assert check.status is S.WARN
    assert "newer than driver 470.82.01" in check.summary
    assert any("nvmlDeviceGetComputeRunningProcesses_v3" in d for d in check.details)
    assert check.fix is not None
    assert "pin an older nvidia-ml-py" in check.fix


def test_bindings_several_problems_are_all_listed(tmp_path: Path) -> None:
    reading = gpu_reading(binding=("nvmlX",))
    check = run(
        inputs(reading),
        make_roots(tmp_path),
        dists={"nvidia-ml-py": "13.615.71", "pynvml": "13.0.1"}.get,
    )["nvml.bindings"]
    assert check.status is S.WARN
    assert "(+1 more)" in check.summary
    assert check.fix is not None
    assert "pip uninstall" in check.fix
    assert "older nvidia-ml-py" in check.fix


# --- nvml.driver -------------------------------------------------------------------------------


def test_driver_info(tmp_path: Path) -> None:
    check = run(inputs(), make_roots(tmp_path))["nvml.driver"]
    assert check.status is S.INFO
    assert check.summary == f"Driver {DRIVER}, CUDA up to 13.0"


# --- container.cuda ----------------------------------------------------------------------------


def _cuda(tmp_path: Path, driver_cuda: str | None = "12.2", **env: str) -> HealthCheck:
    c = container(
        "cuda-app",
        image="nvidia/cuda:12.4.1-base-ubuntu22.04",
        gpu_request="all",
        gpu_request_via="device_requests",
        **env,
    )
    reading = gpu_reading(cuda=driver_cuda, driver="535.183.01")
    return run(inputs(reading, containers_reading(c)), make_roots(tmp_path))[
        "container.cuda:cuda-app"
    ]


def test_cuda_pass(tmp_path: Path) -> None:
    check = _cuda(tmp_path, driver_cuda="12.4", cuda_version="12.4.1")
    assert check.status is S.PASS


def test_cuda_fail_from_cuda_version_only(tmp_path: Path) -> None:
    check = _cuda(tmp_path, cuda_version="12.4.1")
    assert check.status is S.FAIL
    assert check.summary == "Image needs CUDA 12.4, driver supports only 12.2"
    assert check.fix is not None
    assert "Upgrade the host driver" in check.fix


def test_cuda_fail_from_requirement(tmp_path: Path) -> None:
    check = _cuda(tmp_path, cuda_requirement="cuda>=12.4", cuda_version="12.4.1")
    assert check.status is S.FAIL
    assert any("unsatisfied condition: cuda>=12.4" in d for d in check.details)


def test_cuda_brand_clause_matching_driver_warns(tmp_path: Path) -> None:
    requirement = "cuda>=12.4 brand=tesla,driver>=470,driver<471 brand=tesla,driver>=535,driver<536"
    check = _cuda(tmp_path, cuda_requirement=requirement)
    assert check.status is S.WARN
    assert "forward-compat" in check.summary


def test_cuda_brand_clause_for_other_driver_fails(tmp_path: Path) -> None:
    check = _cuda(tmp_path, cuda_requirement="cuda>=12.4 brand=tesla,driver>=470,driver<471")
    assert check.status is S.FAIL


def test_cuda_skip_without_driver_cuda(tmp_path: Path) -> None:
    check = _cuda(tmp_path, driver_cuda=None, cuda_version="12.4.1")
    assert check.status is S.SKIP


def test_cuda_no_row_for_non_cuda_or_non_gpu_containers(tmp_path: Path) -> None:
    cpu_only = container("cpu", cuda_version="99.0")  # CUDA image, no GPU request
    nvidia_runtime = container("rt", runtime="nvidia", cuda_version="99.0")
    checks = run(
        inputs(docker=containers_reading(container("plain"), cpu_only, nvidia_runtime)),
        make_roots(tmp_path),
    )
    assert "container.cuda:plain" not in checks
    assert "container.cuda:cpu" not in checks
    assert checks["container.cuda:rt"].status is S.FAIL


@pytest.mark.parametrize(
    ("requirement", "cuda", "driver", "expected"),
    [
        ("cuda>=12.4", (12, 4), (550, 54), (True, False)),
        ("cuda>=12.4", (12, 3), (550, 54), (False, False)),
        ("cuda>=12", (12, 0), None, (True, False)),
        ("cuda<12", (12, 0), None, (False, False)),
        ("cuda>=13.0 driver>=580", (12, 8), (580, 65, 6), (True, False)),
        ("cuda>=13.0 arch=sm_90", (12, 8), None, (True, True)),
        ("cuda>=13.0 brand=tesla,driver>=470,driver<471", (12, 8), None, (True, True)),
        ("garbage cuda>=11.0", (12, 0), None, (True, False)),
    ],
)
def test_evaluate_cuda_requirement(
    requirement: str,
    cuda: tuple[int, int],
    driver: tuple[int, ...] | None,
    expected: tuple[bool, bool],
) -> None:
    satisfied, assumed, _ = evaluate_cuda_requirement(requirement, cuda, driver)
    assert (satisfied, assumed) == expected


def test_two_pods_containers_of_one_name_are_two_subjects(tmp_path: Path) -> None:
    # Pod specs share container names (`server`): each pod's is judged, and shown, apart.
    image = "nvidia/cuda:12.4.1-base-ubuntu22.04"
    pods = [
        container("server", id=(str(n) * 64), image=image, gpu_request="all",
                  gpu_request_via="device_requests", cuda_version=version,
                  k8s_pod=f"infer-{n}", k8s_namespace="serving")
        for n, version in ((1, "12.4.1"), (2, "12.9.0"))
    ]  # fmt: skip
    reading = gpu_reading(cuda="12.4", driver="550.54.15")
    checks = run(inputs(reading, containers_reading(*pods)), make_roots(tmp_path))
    first, second = (
        checks["container.cuda:serving/infer-1/server"],
        checks["container.cuda:serving/infer-2/server"],
    )
    assert first.status is S.PASS and second.status is S.FAIL
