"""MIG device requests: every way a container names a MIG device, and the scenario format."""

from __future__ import annotations

import json

import pytest

from gputui.collect.docker.parse import parse_inspect
from gputui.collect.standins.scenario import ScenarioSource
from gputui.collect.standins.scenario_format import ScenarioError, parse_scenario
from gputui.model.gpu import GpuSample, MigInstance
from gputui.model.mig import is_mig_token, mig_request
from tests.support.paths import FIXTURES

FIXTURE = FIXTURES / "mig-three-instances.json"
GPU_UUID = "GPU-57d57e22-be4b-9496-673e-11cc7638ed19"
MIG_UUID = "MIG-22222222-2222-5222-8222-222222222222"


def _inspect(**host: object) -> dict[str, object]:
    return {"Id": "a" * 64, "Name": "/x", "Config": {"Env": []}, "HostConfig": host}


@pytest.mark.parametrize(
    ("host", "wanted", "via"),
    [
        (
            {
                "DeviceRequests": [
                    {"Driver": "nvidia", "DeviceIDs": ["0:1"], "Capabilities": [["gpu"]]}
                ]
            },
            ("0:1",),
            "device_requests",
        ),
        (
            {"DeviceRequests": [{"Driver": "cdi", "DeviceIDs": ["nvidia.com/gpu=0:1"]}]},
            ("0:1",),
            "cdi",
        ),
        (
            {
                "DeviceRequests": [
                    {"Driver": "", "DeviceIDs": [MIG_UUID], "Capabilities": [["gpu"]]}
                ]
            },
            (MIG_UUID,),
            "device_requests",
        ),
    ],
)
def test_mig_requests_keep_the_device_name(
    host: dict[str, object], wanted: tuple[str, ...], via: str
) -> None:
    info = parse_inspect(_inspect(**host))
    assert (info.gpu_request, info.gpu_request_via) == (wanted, via)


def test_the_env_request_names_a_mig_uuid() -> None:
    data = _inspect()
    data["Config"] = {"Env": [f"NVIDIA_VISIBLE_DEVICES={MIG_UUID}", "TOKEN=s3cret"]}
    info = parse_inspect(data)
    assert info.gpu_request == (MIG_UUID,)
    assert "s3cret" not in repr(info)


def _mig_gpu() -> GpuSample:
    source = ScenarioSource(json.loads(FIXTURE.read_text()))
    gpus = source.read().gpus
    source.close()
    return gpus[0]


@pytest.mark.parametrize(
    ("token", "index"),
    [
        ("0:1", 1),
        (MIG_UUID, 1),
        (MIG_UUID.lower(), 1),
        (f"MIG-{GPU_UUID}/3/0", 2),  # the pre-R470 form: GPU UUID, GI, CI
        ("0:2", 2),
    ],
)
def test_every_form_resolves_to_its_mig_device(token: str, index: int) -> None:
    gpu = _mig_gpu()
    hit = mig_request(token, [gpu])
    assert hit is not None and hit[1].index == index
    assert is_mig_token(token)


@pytest.mark.parametrize("token", ["0", "all", "0:9", "1:0", GPU_UUID, "MIG-nope", "0:x"])
def test_whole_gpus_and_unknown_devices_resolve_to_nothing(token: str) -> None:
    assert mig_request(token, [_mig_gpu()]) is None


def test_a_gpu_instance_without_compute_instance_is_not_a_device() -> None:
    gpu = _mig_gpu()
    empty = [m for m in gpu.mig_instances if m.index < 0]
    assert empty == [MigInstance(-1, None, 5, None, None, None)]
    assert mig_request("0:3", [gpu]) is None


@pytest.mark.parametrize(
    ("mig", "message"),
    [
        ([{"ci_id": 0}], "must be an object with a gi_id"),
        ([{"gi_id": 99}], "gi_id: must be an integer in [0, 14]"),
        ([{"gi_id": 1}, {"gi_id": 1}], "gi_id and ci_id must be unique"),
        ([{"gi_id": 1, "color": "red"}], "unknown key 'color'"),
        ([{"gi_id": 1, "memory_used_mib": -1}], "memory_used_mib: expected a number"),
        ([{"gi_id": 1, "ci_id": None, "processes": [{"pid": 5}]}], "runs nothing"),
        ([{"gi_id": 1, "processes": [{"pid": 0}]}], "processes[0].pid"),
        ("x", "mig_instances: must be a list"),
    ],
)
def test_bad_mig_instances_are_refused_with_one_line(mig: object, message: str) -> None:
    text = json.dumps({"gpus": [{"index": 0, "mig_mode_current": True, "mig_instances": mig}]})
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text, "s.json")
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_mig_off_hides_the_instances_and_answers_like_an_h200_without_mig() -> None:
    data = json.loads(FIXTURE.read_text())
    data["gpus"][0]["mig_mode_current"] = False
    source = ScenarioSource(data)
    gpu = source.read().gpus[0]
    source.close()
    assert gpu.mig_mode_current is False and gpu.mig_instances == ()
    assert (
        source.nvml.nvmlDeviceGetMaxMigDeviceCount(source.nvml.nvmlDeviceGetHandleByIndex(0)) == 0
    )
