"""Host checks: container toolkit, CDI specs, cgroups, the daemon-reload hazard, visibility."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from gputui.health.docker import parse_tool_version
from gputui.health.host import configured_cgroup_driver
from gputui.model.processes import Visibility
from gputui.model.status import HealthCheck, HealthStatus
from tests.support.health import (
    CLI_OUTPUT,
    CTK_OUTPUT,
    DRIVER,
    container,
    containers_reading,
    engine,
    gpu_reading,
    inputs,
    make_roots,
    run,
)

S = HealthStatus

# --- toolkit.installed ----------------------------------------------------------------------------


def _toolkit(tmp_path: Path, tools: dict[str, str | None]) -> HealthCheck:
    return run(inputs(), make_roots(tmp_path), tools=tools)["toolkit.installed"]


def test_toolkit_pass_with_versions(tmp_path: Path) -> None:
    check = _toolkit(tmp_path, {"nvidia-ctk": CTK_OUTPUT, "nvidia-container-cli": CLI_OUTPUT})
    assert check.status is S.PASS
    assert check.summary == "NVIDIA Container Toolkit 1.20.0"
    assert "nvidia-ctk: 1.20.0 (/usr/bin/nvidia-ctk)" in check.details
    assert "nvidia-container-cli: 1.20.0 (/usr/bin/nvidia-container-cli)" in check.details
    assert "nvidia-container-runtime: not found on PATH" in check.details


def test_toolkit_absent_warns(tmp_path: Path) -> None:
    check = _toolkit(tmp_path, {})
    assert check.status is S.WARN
    assert "Install it" in check.summary or "install it" in check.summary
    assert check.fix is not None
    assert "Install the NVIDIA Container Toolkit" in check.fix
    assert check.docs is not None
    assert "install-guide" in check.docs


def test_toolkit_legacy_cli_only_warns(tmp_path: Path) -> None:
    check = _toolkit(tmp_path, {"nvidia-container-cli": "cli-version: 1.9.0\nlib-version: 1.9.0\n"})
    assert check.status is S.WARN
    assert (
        check.summary
        == "Only nvidia-container-cli 1.9.0 found, no nvidia-ctk: the toolkit predates 1.12"
    )


def test_toolkit_version_call_failing_warns(tmp_path: Path) -> None:
    check = _toolkit(tmp_path, {"nvidia-ctk": None})
    assert check.status is S.WARN
    assert "gave no version" in check.summary


@pytest.mark.parametrize(
    ("output", "version"),
    [
        (CTK_OUTPUT, "1.20.0"),
        (CLI_OUTPUT, "1.20.0"),
        ("NVIDIA Container Runtime version 1.17.8\ncommit: abc\nspec: 1.2.0", "1.17.8"),
        ("nvidia-ctk version v1.14.0-rc.2", "1.14.0-rc.2"),
        ("no numbers here", None),
        (None, None),
    ],
)
def test_parse_tool_version(output: str | None, version: str | None) -> None:
    assert parse_tool_version(output) == version


# --- cdi.specs ------------------------------------------------------------------------------------

NVIDIA_SPEC = f"""---
cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
containerEdits:
  mounts:
  - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.{DRIVER}
    containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.{DRIVER}
"""


def _cdi(
    tmp_path: Path,
    specs: dict[str, str] | None = None,
    cdi_dirs: tuple[str, ...] | None = ("/etc/cdi", "/var/run/cdi"),
    request_cdi: bool = False,
) -> HealthCheck:
    roots = make_roots(tmp_path)
    for name, text in (specs or {}).items():
        (tmp_path / name).write_text(text)
    c = (
        container("cdi-user", gpu_request="all", gpu_request_via="cdi")
        if request_cdi
        else container()
    )
    reading = containers_reading(c, engine_info=engine(cdi_spec_dirs=cdi_dirs))
    return run(inputs(docker=reading), roots)["cdi.specs"]


def test_cdi_pass_with_nvidia_spec(tmp_path: Path) -> None:
    check = _cdi(tmp_path, {"etc/cdi/nvidia.yaml": NVIDIA_SPEC, "etc/cdi/README": "x"})
    assert check.status is S.PASS
    assert check.summary == "NVIDIA CDI spec present (1 file(s))"
    assert any(d.endswith(f"nvidia.yaml: NVIDIA spec for driver {DRIVER}") for d in check.details)


def test_cdi_json_spec_in_run_dir(tmp_path: Path) -> None:
    spec = '{"cdiVersion": "0.6.0", "kind": "nvidia.com/gpu", "devices": []}'
    check = _cdi(tmp_path, {"run/cdi/nvidia.json": spec})
    assert check.status is S.PASS


def test_cdi_absent_is_info_with_generate_fix(tmp_path: Path) -> None:
    check = _cdi(tmp_path, {"etc/cdi/other.yaml": "cdiVersion: 0.5.0\nkind: vendor.com/fpga\n"})
    assert check.status is S.INFO
    assert check.fix is not None
    assert "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml" in check.fix
    assert any("CDI spec (not NVIDIA)" in d for d in check.details)


def test_cdi_absent_but_requested_warns(tmp_path: Path) -> None:
    check = _cdi(tmp_path, request_cdi=True)
    assert check.status is S.WARN
    assert "no NVIDIA CDI spec" in check.summary
    assert "containers requesting CDI devices: cdi-user" in check.details


def test_cdi_disabled_in_engine(tmp_path: Path) -> None:
    quiet = _cdi(tmp_path, {"etc/cdi/nvidia.yaml": NVIDIA_SPEC}, cdi_dirs=())
    assert quiet.status is S.INFO
    assert "disabled in the engine" in quiet.summary
    requested = _cdi(tmp_path, cdi_dirs=(), request_cdi=True)
    assert requested.status is S.WARN
    assert requested.fix is not None
    assert '"features": {"cdi": true}' in requested.fix


def test_cdi_not_reported_by_old_engine(tmp_path: Path) -> None:
    check = _cdi(tmp_path, {"etc/cdi/nvidia.yaml": NVIDIA_SPEC}, cdi_dirs=None)
    assert check.status is S.PASS
    assert "engine does not report CDI (older than Docker 25)" in check.details


def test_cdi_spec_for_an_older_driver_warns(tmp_path: Path) -> None:
    check = _cdi(tmp_path, {"etc/cdi/nvidia.yaml": NVIDIA_SPEC.replace(DRIVER, "570.86.15")})
    assert check.status is S.WARN
    assert "regenerate" in check.summary
    assert check.fix is not None
    assert "cdi generate" in check.fix


def test_a_fifo_or_a_huge_file_among_the_specs_is_refused_not_waited_on(tmp_path: Path) -> None:
    roots = make_roots(tmp_path)
    os.mkfifo(tmp_path / "etc/cdi/nvidia.yaml")  # no writer: a blocking open never returns
    (tmp_path / "run/cdi/big.json").write_text(" " * (2 * 1024 * 1024))
    found: list[HealthCheck] = []
    worker = threading.Thread(target=lambda: found.append(run(inputs(), roots)["cdi.specs"]))
    worker.daemon = True
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "cdi.specs blocked on the FIFO"
    (check,) = found
    assert f"{tmp_path}/etc/cdi/nvidia.yaml: is a FIFO (named pipe), not a regular file" in (
        check.details
    )
    assert any(d.startswith(f"{tmp_path}/run/cdi/big.json: larger than") for d in check.details)


def test_cdi_missing_dirs_are_reported(tmp_path: Path) -> None:
    roots = make_roots(tmp_path)
    (tmp_path / "run/cdi").rmdir()
    check = run(inputs(), roots)["cdi.specs"]
    assert f"{tmp_path / 'run/cdi'}: absent" in check.details


# --- cgroup.driver --------------------------------------------------------------------------------


def test_cgroup_driver_info(tmp_path: Path) -> None:
    check = run(inputs(), make_roots(tmp_path))["cgroup.driver"]
    assert check.status is S.INFO
    assert check.summary == "cgroup v2, driver cgroupfs"


def test_cgroup_v1_host_and_mismatch_noted(tmp_path: Path) -> None:
    roots = make_roots(tmp_path)
    (tmp_path / "sys/fs/cgroup/cgroup.controllers").unlink()
    reading = containers_reading(engine_info=engine(cgroup_version="2", cgroup_driver="systemd"))
    check = run(inputs(docker=reading), roots)["cgroup.driver"]
    assert "cgroup v1 seen by gputui" in check.details
    assert any("different cgroup versions" in d for d in check.details)
    assert check.summary == "cgroup v2, driver systemd"


def test_cgroup_driver_skip_when_nothing_known(tmp_path: Path) -> None:
    roots = make_roots(tmp_path)
    (tmp_path / "sys/fs/cgroup/cgroup.controllers").unlink()
    (tmp_path / "sys/fs/cgroup").rmdir()
    check = run(inputs(docker=containers_reading(ok=False)), roots)["cgroup.driver"]
    assert check.status is S.SKIP


# --- cgroup.nvml_hazard ---------------------------------------------------------------------------


def _hazard(tmp_path: Path, *containers: object, driver: str = "systemd") -> HealthCheck:
    roots = make_roots(tmp_path)
    reading = containers_reading(*containers, engine_info=engine(cgroup_driver=driver))  # type: ignore[arg-type]
    return run(inputs(docker=reading), roots)["cgroup.nvml_hazard"]


def test_hazard_cgroupfs_passes(tmp_path: Path) -> None:
    gpu_user = container("t", gpu_request="all", gpu_request_via="device_requests")
    assert _hazard(tmp_path, gpu_user, driver="cgroupfs").status is S.PASS


def test_hazard_systemd_with_gpu_containers_warns(tmp_path: Path) -> None:
    gpu_user = container("trainer", gpu_request="all", gpu_request_via="device_requests")
    cdi_user = container("cdi", gpu_request="all", gpu_request_via="cdi")
    check = _hazard(tmp_path, gpu_user, cdi_user, container("web"))
    assert check.status is S.WARN
    assert "1 GPU container(s) will lose their GPUs" in check.summary
    assert "GPU containers using runc-style injection: trainer" in check.details
    assert check.fix is not None
    for part in (
        "create-dev-char-symlinks --create-all",
        "71-nvidia-dev-char.rules",
        "native.cgroupdriver=cgroupfs",
        "CDI",
    ):
        assert part in check.fix
    assert check.docs is not None
    assert "failed-to-initialize-nvml-unknown-error" in check.docs


def test_hazard_systemd_without_gpu_containers_is_info(tmp_path: Path) -> None:
    check = _hazard(tmp_path, container("web"))
    assert check.status is S.INFO


def test_hazard_mitigated_by_dev_char_symlinks(tmp_path: Path) -> None:
    roots = make_roots(tmp_path)
    os.symlink("../nvidia0", tmp_path / "dev/char/195:0")
    os.symlink("../sda", tmp_path / "dev/char/8:0")
    gpu_user = container("trainer", gpu_request="all", gpu_request_via="device_requests")
    reading = containers_reading(gpu_user, engine_info=engine(cgroup_driver="systemd"))
    check = run(inputs(docker=reading), roots)["cgroup.nvml_hazard"]
    assert check.status is S.PASS
    assert "/dev/char NVIDIA symlinks: 1" in check.details


def test_hazard_skip_when_driver_unknown(tmp_path: Path) -> None:
    roots = make_roots(tmp_path)
    reading = containers_reading(engine_info=engine(cgroup_driver=None))
    assert run(inputs(docker=reading), roots)["cgroup.nvml_hazard"].status is S.SKIP


# --- cgroup.nvml_hazard: the driver daemon.json asks for ----------------------------------------


@pytest.mark.parametrize(
    ("config", "wanted"),
    [
        (None, (None, None)),
        ({}, (None, None)),
        ({"exec-opts": []}, (None, None)),
        ({"exec-opts": ["native.cgroupdriver=systemd"]}, ("systemd", None)),
        ({"exec-opts": ["  Native.CgroupDriver = cgroupfs "]}, ("cgroupfs", None)),
        # The first entry wins; entries without '=' and of other types are passed over.
        (
            {
                "exec-opts": [
                    "native.cgroupdriver",
                    7,
                    "native.cgroupdriver=cgroupfs",
                    "native.cgroupdriver=systemd",
                ]
            },
            ("cgroupfs", None),
        ),
        ({"exec-opts": ["native.umask=normal"]}, (None, None)),
    ],
)
def test_the_configured_driver_is_read_as_dockerd_reads_it(
    config: dict[str, object] | None, wanted: tuple[str | None, str | None]
) -> None:
    assert configured_cgroup_driver(config) == wanted


@pytest.mark.parametrize(
    "config",
    [
        {"exec-opts": "native.cgroupdriver=systemd"},
        {"exec-opts": ["native.cgroupdriver=SystemD"]},  # the value is exact
        {"exec-opts": ["native.cgroupdriver=none"]},  # dockerd's own, refused when given
        {"exec-opts": ["native.cgroupdriver="]},
    ],
)
def test_a_driver_dockerd_refuses_is_a_problem(config: dict[str, object]) -> None:
    _driver, problem = configured_cgroup_driver(config)
    assert problem is not None and "\n" not in problem


def _hazard_with(
    tmp_path: Path, daemon_json: str, *containers: object, **engine_changes: object
) -> HealthCheck:
    roots = make_roots(tmp_path)
    Path(roots.daemon_json).write_text(daemon_json)
    reading = containers_reading(*containers, engine_info=engine(**engine_changes))  # type: ignore[arg-type]
    return run(inputs(docker=reading), roots)["cgroup.nvml_hazard"]


GPU_USER = {"gpu_request": "all", "gpu_request_via": "device_requests"}


def test_cgroupfs_asked_but_not_in_effect_says_restart(tmp_path: Path) -> None:
    check = _hazard_with(
        tmp_path,
        '{"exec-opts": ["native.cgroupdriver=cgroupfs"]}',
        container("trainer", **GPU_USER),
        cgroup_driver="systemd",
    )
    assert check.status is S.WARN
    assert (
        "daemon.json: native.cgroupdriver=cgroupfs, not in effect (the engine runs systemd)"
        in check.details
    )
    assert check.fix is not None and check.fix.startswith("daemon.json already sets")
    assert "sudo systemctl restart docker" in check.fix
    assert "(b)" not in check.fix  # not advised again: it is written already


def test_systemd_asked_while_cgroupfs_runs_warns_ahead(tmp_path: Path) -> None:
    check = _hazard_with(
        tmp_path,
        '{"exec-opts": ["native.cgroupdriver=systemd"]}',
        container("trainer", **GPU_USER),
        cgroup_driver="cgroupfs",
    )
    assert check.status is S.INFO
    assert "asks for systemd from the next restart" in check.summary
    assert check.fix is not None and "create-dev-char-symlinks" in check.fix


def test_a_driver_dockerd_refuses_warns_before_the_next_restart(tmp_path: Path) -> None:
    for driver in ("systemd", "cgroupfs"):
        check = _hazard_with(
            tmp_path, '{"exec-opts": ["native.cgroupdriver=systemD"]}', cgroup_driver=driver
        )
        assert check.status is S.WARN, driver
        assert "Docker will not start again" in check.summary
        assert "native.cgroupdriver=systemD is not a driver dockerd takes" in check.summary


def test_systemd_in_daemon_json_and_in_effect_adds_the_line(tmp_path: Path) -> None:
    check = _hazard_with(
        tmp_path,
        '{"exec-opts": ["native.cgroupdriver=systemd"]}',
        container("trainer", **GPU_USER),
        cgroup_driver="systemd",
    )
    assert check.status is S.WARN and "daemon.json: native.cgroupdriver=systemd" in check.details
    assert check.fix is not None and "(b)" in check.fix


def test_a_rootless_engine_is_not_told_to_leave_systemd(tmp_path: Path) -> None:
    check = _hazard_with(
        tmp_path,
        '{"exec-opts": ["native.cgroupdriver=bogus"]}',  # root's file: not this engine's
        container("trainer", **GPU_USER),
        cgroup_driver="systemd",
        rootless=True,
    )
    assert check.status is S.WARN and "will lose their GPUs" in check.summary
    assert check.fix is not None and "native.cgroupdriver=cgroupfs" not in check.fix
    assert "CDI" in check.fix and "rootless engine keeps the systemd driver" in check.fix


def test_a_remote_engines_driver_is_not_judged_by_this_hosts_file(tmp_path: Path) -> None:
    check = _hazard_with(
        tmp_path,
        '{"exec-opts": ["native.cgroupdriver=bogus"]}',
        cgroup_driver="cgroupfs",
        endpoint="tcp://gpu-7:2376",
    )
    assert check.status is S.PASS


# --- gputui.visibility ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host_pid", "private", "status"),
    [
        (True, False, S.PASS),
        (False, False, S.FAIL),
        (False, True, S.FAIL),
        (True, True, S.WARN),
    ],
)
def test_visibility(tmp_path: Path, host_pid: bool, private: bool, status: HealthStatus) -> None:
    check = run(inputs(visibility=Visibility(host_pid, private)), make_roots(tmp_path))[
        "gputui.visibility"
    ]
    assert check.status is status
    if status is not S.PASS:
        assert check.fix is not None
        assert (
            "--pid=host --cgroupns=host -v /var/run/docker.sock:/var/run/docker.sock:ro --gpus all"
            in check.fix
        )


@pytest.mark.parametrize(
    ("comm", "status"), [("kthreadd\n", S.PASS), (None, S.FAIL), ("bash\n", S.FAIL)]
)
def test_visibility_falls_back_to_proc(
    tmp_path: Path, comm: str | None, status: HealthStatus
) -> None:
    roots = make_roots(tmp_path)
    (tmp_path / "proc/1").mkdir()
    if comm is not None:
        (tmp_path / "proc/2").mkdir()
        (tmp_path / "proc/2/comm").write_text(comm)
    check = run(inputs(visibility=Visibility(None, None)), roots)["gputui.visibility"]
    assert check.status is status


def test_visibility_unknown_is_info(tmp_path: Path) -> None:
    check = run(inputs(visibility=Visibility(None, None)), make_roots(tmp_path))[
        "gputui.visibility"
    ]
    assert check.status is S.INFO


def test_nvml_down_does_not_break_host_checks(tmp_path: Path) -> None:
    checks = run(inputs(gpu_reading(ok=False, kind="LibraryNotFound")), make_roots(tmp_path))
    assert checks["toolkit.installed"].status is S.PASS
    assert checks["cdi.specs"].status is S.INFO


# --- gputui.visibility: /proc mounted with hidepid ------------------------------------------------


@pytest.mark.parametrize("host_pid", [True, None])
@pytest.mark.parametrize("hidepid", ["2", "invisible"])
def test_visibility_hidepid_is_named_with_its_fix(
    tmp_path: Path, host_pid: bool | None, hidepid: str
) -> None:
    # With hidepid, kthreadd (PID 2) is hidden too, so the PID namespace may read as unknown:
    # the cause is the mount option, and the check must say so rather than blame a namespace.
    visibility = Visibility(host_pid, False, proc_hidepid=hidepid)
    check = run(inputs(visibility=visibility), make_roots(tmp_path))["gputui.visibility"]
    assert check.status is S.WARN
    assert check.summary == (
        f"/proc is mounted with hidepid={hidepid}: processes of other users are hidden"
    )
    assert check.fix is not None
    assert "Run gputui as root" in check.fix
    assert f"remount,hidepid={hidepid},gid=" in check.fix
    assert "--pid=host" not in check.fix
    assert "namespace" not in check.summary
    assert f"/proc mount option: hidepid={hidepid}" in check.details


def test_visibility_outside_the_host_namespace_still_fails_with_hidepid(tmp_path: Path) -> None:
    visibility = Visibility(False, False, proc_hidepid="2")
    check = run(inputs(visibility=visibility), make_roots(tmp_path))["gputui.visibility"]
    assert check.status is S.FAIL
    assert "/proc mount option: hidepid=2" in check.details
