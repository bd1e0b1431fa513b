"""podman's own GPU checks: its CDI spec (present, current, every GPU) and the legacy OCI hook.

Real files in a temporary root: the CDI spec as ``nvidia-ctk cdi generate`` writes it, the device
nodes and libraries it names, containers.conf, hooks.d. Hostile files (huge, deep, aliases, wrong
types, a FIFO) are bounded like every other system file.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path

import pytest

from gputui.collect.sources import HealthInputs
from gputui.model.processes import Visibility
from gputui.model.status import HealthCheck, HealthStatus
from tests.support.health import (
    DRIVER,
    HOOK_FILE,
    LIB,
    container,
    host_files,
    inputs,
    make_roots,
    podman_inputs,
    run,
    spec_yaml,
    write_hook,
)

S = HealthStatus


@pytest.fixture(autouse=True)
def _prepared(tmp_path: Path) -> None:
    """The root's directories exist before a test writes its files into them."""
    make_roots(tmp_path)


def checks(tmp_path: Path, health_inputs: HealthInputs | None = None) -> dict[str, HealthCheck]:
    return run(health_inputs or podman_inputs(), make_roots(tmp_path))


# --- when the checks run ----------------------------------------------------------------------


def test_without_a_podman_engine_the_podman_checks_skip(tmp_path: Path) -> None:
    found = run(inputs(), make_roots(tmp_path))
    for check_id in ("podman.cdi", "podman.hooks"):
        assert found[check_id].status is S.SKIP
        assert found[check_id].summary == "No podman engine is read"


# --- podman.cdi ---------------------------------------------------------------------------------


def test_no_spec_warns_with_the_generate_fix_in_podmans_words(tmp_path: Path) -> None:
    found = checks(tmp_path)
    cdi = found["podman.cdi"]
    assert cdi.status is S.WARN
    assert cdi.summary.startswith("No NVIDIA CDI spec: podman cannot give containers GPUs")
    assert cdi.fix is not None
    # The first CDI dir podman reads (the prepared /etc/cdi here).
    generate = f"sudo nvidia-ctk cdi generate --output={tmp_path}/etc/cdi/nvidia.yaml"
    assert cdi.fix.startswith(generate)
    assert "podman engine(s): podman" in cdi.details
    hooks = found["podman.hooks"]
    assert hooks.status is S.WARN
    assert "no NVIDIA CDI spec and no NVIDIA OCI hook" in hooks.summary
    # Docker's CDI check leaves podman's specs to podman.cdi instead of judging Docker's engine.
    assert found["cdi.specs"].status is S.SKIP
    assert "podman.cdi" in found["cdi.specs"].summary


def test_no_spec_with_a_container_that_asks_for_cdi_devices_fails(tmp_path: Path) -> None:
    asks = container("cuda", status="exited", gpu_request=("0",), gpu_request_via="cdi")
    cdi = checks(tmp_path, podman_inputs(asks))["podman.cdi"]
    assert cdi.status is S.FAIL
    assert "podman containers requesting CDI devices: cuda" in cdi.details


def test_a_current_spec_for_every_gpu_passes(tmp_path: Path) -> None:
    host_files(tmp_path)
    (tmp_path / "etc/cdi/nvidia.yaml").write_text(spec_yaml(2))
    found = checks(tmp_path)
    cdi = found["podman.cdi"]
    assert cdi.status is S.PASS, cdi
    assert cdi.summary == "NVIDIA CDI spec for podman: 3 device name(s), every one of the 2 GPU(s)"
    spec_line = (
        f"{tmp_path}/etc/cdi/nvidia.yaml: nvidia.com/gpu, cdiVersion 0.5.0, devices 0, 1, all"
    )
    assert spec_line in cdi.details
    assert f"{tmp_path}/run/cdi: absent" not in cdi.details  # it exists (empty) here
    assert found["podman.hooks"].status is S.PASS


def test_a_spec_in_json_and_by_uuid_counts_too(tmp_path: Path) -> None:
    host_files(tmp_path)
    spec = {
        "cdiVersion": "0.6.0",
        "kind": "nvidia.com/gpu",
        "devices": [
            {
                "name": f"GPU-{i:08d}",
                "containerEdits": {"deviceNodes": [{"path": f"/dev/nvidia{i}"}]},
            }
            for i in range(2)
        ],
        "containerEdits": {"deviceNodes": [{"path": "/dev/nvidiactl"}]},
    }
    (tmp_path / "run/cdi/nvidia.json").write_text(json.dumps(spec))
    assert checks(tmp_path)["podman.cdi"].status is S.PASS


@pytest.mark.parametrize(
    ("remove", "said"),
    [
        ("dev/nvidia1", "1 device node(s) no longer exist: /dev/nvidia1"),
        (f"{LIB.lstrip('/')}/libcuda.so.{DRIVER}", "1 library or file mount(s) no longer exist"),
        ("usr/bin/nvidia-cdi-hook", "1 hook program(s) no longer exist: /usr/bin/nvidia-cdi-hook"),
    ],
)
def test_a_spec_naming_paths_the_host_no_longer_has_is_stale(
    tmp_path: Path, remove: str, said: str
) -> None:
    host_files(tmp_path)
    (tmp_path / "etc/cdi/nvidia.yaml").write_text(spec_yaml(2))
    (tmp_path / remove).unlink()
    cdi = checks(tmp_path)["podman.cdi"]
    assert cdi.status is S.WARN
    assert "stale" in cdi.summary
    assert any(said in line for line in cdi.details), cdi.details
    assert cdi.fix is not None and "nvidia-ctk cdi generate" in cdi.fix


def test_a_spec_written_for_the_previous_driver_is_stale(tmp_path: Path) -> None:
    host_files(tmp_path, driver="570.86.15")  # the old library is still on disk
    (tmp_path / "etc/cdi/nvidia.yaml").write_text(spec_yaml(2, driver="570.86.15"))
    cdi = checks(tmp_path)["podman.cdi"]
    assert cdi.status is S.WARN
    assert any(f"the running driver is {DRIVER}" in line for line in cdi.details), cdi.details


def test_a_spec_with_fewer_gpus_than_nvml_sees_warns(tmp_path: Path) -> None:
    host_files(tmp_path, gpus=1)
    (tmp_path / "etc/cdi/nvidia.yaml").write_text(spec_yaml(1))
    cdi = checks(tmp_path, podman_inputs(gpus=3))["podman.cdi"]
    assert cdi.status is S.WARN
    assert cdi.summary == (
        "The NVIDIA CDI spec lists 1 of the 3 GPUs NVML sees: GPU 1, 2 cannot be requested"
    )
    assert cdi.fix is not None and "nvidia-ctk cdi generate" in cdi.fix


def test_containers_conf_cdi_spec_dirs_are_the_dirs_podman_reads(tmp_path: Path) -> None:
    host_files(tmp_path)
    (tmp_path / "etc/cdi/nvidia.yaml").write_text(spec_yaml(2))  # not a dir podman reads now
    (tmp_path / "etc/containers/containers.conf").write_text(
        '[engine]\ncdi_spec_dirs = ["/etc/cdi"]\n'
    )
    # A drop-in read after the main file wins.
    (tmp_path / "etc/containers/containers.conf.d/50-gpu.conf").write_text(
        '[engine]\ncdi_spec_dirs = ["/srv/cdi"]\n'
    )
    cdi = checks(tmp_path)["podman.cdi"]
    assert cdi.status is S.WARN, cdi
    assert "CDI spec dirs (containers.conf cdi_spec_dirs): /srv/cdi" in cdi.details
    assert cdi.fix is not None
    assert cdi.fix.startswith("sudo nvidia-ctk cdi generate --output=/srv/cdi/nvidia.yaml")
    (tmp_path / "srv/cdi").mkdir(parents=True)
    (tmp_path / "srv/cdi/nvidia.yaml").write_text(spec_yaml(2))
    assert checks(tmp_path)["podman.cdi"].status is S.PASS


def test_a_containers_conf_of_the_wrong_shape_is_passed_over(tmp_path: Path) -> None:
    host_files(tmp_path)
    (tmp_path / "etc/cdi/nvidia.yaml").write_text(spec_yaml(2))
    (tmp_path / "etc/containers/containers.conf").write_text('[engine]\ncdi_spec_dirs = "/x"\n')
    (tmp_path / "etc/containers/containers.conf.d/bad.conf").write_text("[engine\n")
    cdi = checks(tmp_path)["podman.cdi"]
    assert cdi.status is S.PASS, cdi  # the defaults stand
    assert any("cdi_spec_dirs is not a list of paths" in line for line in cdi.details)
    assert any("bad.conf: not valid TOML" in line for line in cdi.details)


# --- hostile spec files -----------------------------------------------------------------------

DEEP = "a:\n" + "".join("  " * i + "- \n" for i in range(1, 200))
LAUGHS = "kind: nvidia.com/gpu\na: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
    for i in range(20)
)
DEEP_JSON = '{"kind": "nvidia.com/gpu", "x": ' + "[" * 5000 + "]" * 5000 + "}"
WRONG_TYPES = (
    "kind: nvidia.com/gpu\n"
    "cdiVersion: [1]\n"
    "containerEdits: [not, a, mapping]\n"
    "devices:\n"
    "- 7\n"
    "- name: 5\n"
    '- name: "0"\n'
    "  containerEdits:\n"
    "    deviceNodes: {path: /dev/nvidia0}\n"
    "    mounts:\n"
    "    - hostPath: [x]\n"
    "    - hostPath: relative/path\n"
)


@pytest.mark.parametrize(
    ("name", "content", "problem"),
    [
        ("nvidia.yaml", "kind: nvidia.com/gpu\n" + "#" * (1024 * 1024 + 1), "larger than"),
        ("nvidia.yaml", "kind: nvidia.com/gpu\n" + DEEP, "nested deeper than"),
        ("nvidia.yaml", LAUGHS, "anchors and aliases"),
        ("nvidia.json", DEEP_JSON, "nested deeper than"),
        ("nvidia.yaml", "kind: nvidia.com/gpu\ndevices: [\n", "not valid YAML"),
        ("nvidia.yaml", "kind: nvidia.com/gpu\n!!python/object:os.system x\n", "not valid YAML"),
        ("nvidia.yaml", "- kind: nvidia.com/gpu\n", "top level is a list"),
        ("nvidia.yaml", "kind: nvidia.com/gpu\n\x00\xff junk", "not valid YAML"),
    ],
    ids=["huge", "deep", "aliases", "deep-json", "unclosed", "python-tag", "a-list", "junk"],
)
def test_a_hostile_nvidia_spec_is_refused_bounded_and_reported(
    tmp_path: Path, name: str, content: str, problem: str
) -> None:
    (tmp_path / "etc/cdi" / name).write_text(content)
    started = time.monotonic()
    cdi = checks(tmp_path)["podman.cdi"]
    assert time.monotonic() - started < 3
    assert cdi.status is S.WARN
    assert cdi.summary.startswith("The NVIDIA CDI spec cannot be read"), cdi.summary
    assert problem in cdi.summary
    assert any("NVIDIA spec not read" in line for line in cdi.details)


def test_many_nodes_are_refused_before_they_are_built(tmp_path: Path) -> None:
    many = "kind: nvidia.com/gpu\ndevices:\n" + "- {name: x}\n" * 60_000
    (tmp_path / "etc/cdi/nvidia.yaml").write_text(many)
    cdi = checks(tmp_path)["podman.cdi"]
    assert "more than 100000 nodes" in cdi.summary


def test_a_spec_of_wrong_types_keeps_what_is_right(tmp_path: Path) -> None:
    host_files(tmp_path, gpus=1)
    (tmp_path / "etc/cdi/nvidia.yaml").write_text(WRONG_TYPES)
    cdi = checks(tmp_path, podman_inputs(gpus=1))["podman.cdi"]
    assert cdi.status is S.PASS, cdi
    assert any("cdiVersion ?, devices 0" in line for line in cdi.details), cdi.details


def test_a_fifo_named_like_a_spec_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "etc/cdi/nvidia.yaml")
    started = time.monotonic()
    cdi = checks(tmp_path)["podman.cdi"]
    assert time.monotonic() - started < 3
    assert cdi.status is S.WARN
    assert cdi.summary == (
        "The NVIDIA CDI spec cannot be read: is a FIFO (named pipe), not a regular file"
    )


def test_another_vendors_spec_is_not_nvidias(tmp_path: Path) -> None:
    (tmp_path / "etc/cdi/vendor.yaml").write_text("cdiVersion: 0.6.0\nkind: vendor.com/fpga\n")
    cdi = checks(tmp_path)["podman.cdi"]
    assert cdi.status is S.WARN and cdi.summary.startswith("No NVIDIA CDI spec")
    assert f"{tmp_path}/etc/cdi/vendor.yaml: vendor.com/fpga (not NVIDIA)" in cdi.details


# --- podman.hooks -----------------------------------------------------------------------------


def test_the_hook_beside_a_cdi_spec_is_double_injection(tmp_path: Path) -> None:
    host_files(tmp_path)
    (tmp_path / "usr/bin/nvidia-container-toolkit").write_text("")
    (tmp_path / "etc/cdi/nvidia.yaml").write_text(spec_yaml(2))
    hook = write_hook(tmp_path)
    found = checks(tmp_path)["podman.hooks"]
    assert found.status is S.WARN
    assert "both inject GPUs" in found.summary
    assert found.fix is not None and f"sudo rm {hook}" in found.fix
    assert f"{hook}: runs /usr/bin/nvidia-container-toolkit" in found.details


def test_the_hook_alone_is_the_legacy_path(tmp_path: Path) -> None:
    (tmp_path / "usr/bin").mkdir(parents=True)
    (tmp_path / "usr/bin/nvidia-container-toolkit").write_text("")
    write_hook(tmp_path)
    found = checks(tmp_path)["podman.hooks"]
    assert found.status is S.INFO
    assert found.fix is not None and "nvidia-ctk cdi generate" in found.fix


def test_a_hook_whose_program_is_gone_warns(tmp_path: Path) -> None:
    write_hook(tmp_path, "/usr/bin/nvidia-container-runtime-hook")
    found = checks(tmp_path)["podman.hooks"]
    assert found.status is S.WARN
    assert "which does not exist" in found.summary


def test_a_containers_conf_hooks_dir_replaces_the_defaults(tmp_path: Path) -> None:
    write_hook(tmp_path, "/usr/bin/nvidia-container-runtime-hook")  # in a default dir
    (tmp_path / "etc/containers/containers.conf").write_text(
        '[engine]\nhooks_dir = ["/opt/hooks.d"]\n'
    )
    found = checks(tmp_path)["podman.hooks"]
    assert found.status is S.WARN and "no NVIDIA OCI hook" in found.summary
    assert "OCI hooks dirs: /opt/hooks.d" in found.details


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("{" * 10_000, "nested too deep"),
        ('{"hook": ' + "1" * (64 * 1024) + "}", "larger than"),
        ('{"hook": {"path": 7}}', "no hook.path"),
        ("not json", "not valid JSON"),
    ],
    ids=["deep", "huge", "wrong-type", "not-json"],
)
def test_a_hostile_hook_file_is_bounded(tmp_path: Path, content: str, said: str) -> None:
    (tmp_path / HOOK_FILE).write_text(content)
    found = checks(tmp_path)["podman.hooks"]
    assert any(said in line for line in found.details), found.details


# --- podman's words in the other checks -------------------------------------------------------

DOCKER_ONLY = ("systemctl restart docker", "daemon.json", "--runtime=docker", "--gpus")


def _docker_words(check: HealthCheck) -> list[str]:
    text = f"{check.summary}\n{check.fix or ''}"
    return [w for w in DOCKER_ONLY if w in text]


def test_a_podman_only_host_is_given_no_docker_advice(tmp_path: Path) -> None:
    mig = container("mig", gpu_request=("0:9",), gpu_request_via="cdi")
    odd = container("odd", runtime="kata", gpu_request=("0",), gpu_request_via="device_requests")
    found = run(podman_inputs(mig, odd), make_roots(tmp_path), tools={})
    toolkit = found["toolkit.installed"]
    assert toolkit.status is S.WARN
    assert "nvidia-ctk cdi generate" in (toolkit.fix or "")
    advice = [c for c in found.values() if c.status in (S.FAIL, S.WARN, S.INFO)]
    assert any(c.id == "container.mig_device:mig" for c in advice)
    assert "podman run --device nvidia.com/gpu=" in (found["container.mig_device:mig"].fix or "")
    assert any(c.id == "container.gpu_visible:odd" for c in advice)
    assert {c.id: _docker_words(c) for c in advice if _docker_words(c)} == {}


def test_gputui_in_a_container_on_a_podman_host_is_told_podmans_flags(tmp_path: Path) -> None:
    outside = dataclasses.replace(podman_inputs(), visibility=Visibility(host_pid_namespace=False))
    fix = run(outside, make_roots(tmp_path))["gputui.visibility"].fix or ""
    assert fix.startswith("Run gputui on the host, or in a container with: podman run --pid=host")
    assert "/run/podman/podman.sock" in fix and "--device nvidia.com/gpu=all" in fix
    assert not [w for w in DOCKER_ONLY if w in fix]


def test_a_host_with_both_engines_is_told_both_ways(tmp_path: Path) -> None:
    found = run(podman_inputs(docker_too=True), make_roots(tmp_path), tools={})
    fix = found["toolkit.installed"].fix or ""
    assert "--runtime=docker" in fix and "nvidia-ctk cdi generate" in fix
