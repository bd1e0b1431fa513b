"""Tests of the pure cgroup / status parsers over real file contents of every runtime."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.collect.linux.membership import (
    CgroupMatch,
    has_relative_path,
    parse_cgroup,
    parse_nspid,
    path_names_container,
)
from tests.support.paths import REPO

# Real ids from the research notes (measured hosts and datadog-agent test data).
DOCKER_ID = "c3da37be2142bda84fb414cdb8eb48548f2b3b6b9c24da6b37de18a260e967d8"
K8S_ID = "a51a9f7d073f848e7fc59e56e8f11524f330a2175a4ed26327da2dfe0d28015f"
OUTER_ID = "88ea268e7b8c4d5a1f0e2d3c4b5a69788796a5b4c3d2e1f00112233445566778"
# The notes elide the middle of this one ("1c8f5034…af120"); the filling is made up.
CRI_ID = "1c8f5034" + "0123456789abcdef" * 3 + "b3a" + "af120"
POD_DASH = "15513b48-e7a5-48fc-b9e3-92f713f36504"
POD_UNDERSCORE = "5be537b8_3a4e_4607_af71_31598b3a4fd3"
HEX64 = re.compile(r"[0-9a-f]{64}")

DOCKER_V1_CGROUPFS = f"""12:hugetlb:/docker/{DOCKER_ID}
11:pids:/docker/{DOCKER_ID}
10:cpu,cpuacct:/docker/{DOCKER_ID}
9:name=systemd:/docker/{DOCKER_ID}
4:memory:/docker/{DOCKER_ID}
1:net_cls,net_prio:/docker/{DOCKER_ID}
0::/docker/{DOCKER_ID}
"""

CASES: list[tuple[str, str, CgroupMatch | None]] = [
    (
        "docker-cgroupfs-v1",
        DOCKER_V1_CGROUPFS,
        CgroupMatch(DOCKER_ID, "docker", None, False),
    ),
    (
        "docker-cgroupfs-v1-without-v2-line",
        f"9:name=systemd:/docker/{DOCKER_ID}\n4:memory:/docker/{DOCKER_ID}\n0::/\n",
        CgroupMatch(DOCKER_ID, "docker", None, False),
    ),
    (
        "docker-systemd-v2",
        f"0::/system.slice/docker-{DOCKER_ID}.scope\n",
        CgroupMatch(DOCKER_ID, "docker", None, False),
    ),
    (
        "k8s-cgroupfs-v1",
        f"11:memory:/kubepods/burstable/pod{POD_DASH}/{K8S_ID}\n0::/system.slice/containerd.service\n",
        CgroupMatch(K8S_ID, "kubernetes", POD_DASH, False),
    ),
    (
        "k8s-besteffort-no-qos-dir",
        f"0::/kubepods/pod{POD_DASH}/{K8S_ID}\n",
        CgroupMatch(K8S_ID, "kubernetes", POD_DASH, False),
    ),
    (
        "k8s-systemd-cri-containerd-colon-form",
        "8:memory:/kuberuntime.slice/containerd.service/"
        f"kubepods-burstable-pod{POD_UNDERSCORE}.slice:cri-containerd:{CRI_ID}\n",
        CgroupMatch(CRI_ID, "containerd", POD_UNDERSCORE.replace("_", "-"), False),
    ),
    (
        "k8s-systemd-v2-cri-containerd-scope",
        "0::/kubepods.slice/kubepods-burstable.slice/"
        f"kubepods-burstable-pod{POD_UNDERSCORE}.slice/cri-containerd-{CRI_ID}.scope\n",
        CgroupMatch(CRI_ID, "containerd", POD_UNDERSCORE.replace("_", "-"), False),
    ),
    (
        "containerd-prefix",
        f"0::/system.slice/containerd-{CRI_ID}.scope\n",
        CgroupMatch(CRI_ID, "containerd", None, False),
    ),
    (
        "crio-scope",
        "0::/kubepods.slice/kubepods-besteffort.slice/"
        f"kubepods-besteffort-pod{POD_UNDERSCORE}.slice/crio-{K8S_ID}.scope\n",
        CgroupMatch(K8S_ID, "crio", POD_UNDERSCORE.replace("_", "-"), False),
    ),
    (
        "crio-conmon-ignored",
        "0::/kubepods.slice/kubepods-besteffort.slice/"
        f"kubepods-besteffort-pod{POD_UNDERSCORE}.slice/crio-conmon-{K8S_ID}.scope\n",
        None,
    ),
    (
        "podman-machine-slice",
        f"0::/machine.slice/libpod-{DOCKER_ID}.scope\n",
        CgroupMatch(DOCKER_ID, "podman", None, False),
    ),
    (
        "podman-rootless-container-child",
        "0::/user.slice/user-1000.slice/user@1000.service/user.slice/"
        f"libpod-{DOCKER_ID}.scope/container\n",
        CgroupMatch(DOCKER_ID, "podman", None, False),
    ),
    (
        "podman-conmon-ignored",
        f"0::/machine.slice/libpod-conmon-{DOCKER_ID}.scope\n",
        None,
    ),
    (
        "nested-dind-single-path",
        f"0::/docker/{OUTER_ID}/docker/{DOCKER_ID}\n",
        CgroupMatch(DOCKER_ID, "docker", None, False),
    ),
    (
        "nested-kind-hybrid-v2-line-names-outer-only",
        f"0::/docker/{OUTER_ID}/system.slice/containerd.service\n"
        f"14:name=systemd:/docker/{OUTER_ID}/kubelet/kubepods/burstable/pod{POD_DASH}/{K8S_ID}\n",
        CgroupMatch(K8S_ID, "kubernetes", POD_DASH, False),
    ),
    (
        "private-cgroupns-relative-v2",
        "0::../../../kubepods-burstable.slice/"
        f"kubepods-burstable-pod{POD_UNDERSCORE}.slice/docker-{K8S_ID}.scope\n",
        CgroupMatch(K8S_ID, "docker", POD_UNDERSCORE.replace("_", "-"), True),
    ),
    (
        "private-cgroupns-relative-docker-sibling",
        f"0::/../docker-{DOCKER_ID}.scope\n",
        CgroupMatch(DOCKER_ID, "docker", None, True),
    ),
    (
        "v2-preferred-over-disagreeing-controller",
        f"4:memory:/docker/{OUTER_ID}\n0::/system.slice/docker-{DOCKER_ID}.scope\n",
        CgroupMatch(DOCKER_ID, "docker", None, False),
    ),
    (
        "mount-unit-excluded",
        f"0::/system.slice/docker-{DOCKER_ID}.mount\n",
        None,
    ),
    (
        "mount-unit-excluded-but-scope-found",
        f"0::/system.slice/docker-{DOCKER_ID}.scope/run-{OUTER_ID}.mount\n",
        CgroupMatch(DOCKER_ID, "docker", None, False),
    ),
    (
        "ecs-ec2-bare-id-unknown-runtime",
        f"4:memory:/ecs/8474ac4cec7a4f488834b00591271ec3/{DOCKER_ID}\n",
        CgroupMatch(DOCKER_ID, None, None, False),
    ),
    ("process-api-v2", "0::/process_api/083cb04d791b9b428cc031475d9deac0\n", None),
    (
        "process-api-v1-build-machine",
        "9:name=systemd:/\n4:memory:/process_api/e6f26938792a1c6c9a95fe75a09d7bca\n0::/\n",
        None,
    ),
    (
        "ecs-fargate",
        "0::/ecs/8474ac4cec7a4f488834b00591271ec3/8474ac4cec7a4f488834b00591271ec3-3054012820\n",
        None,
    ),
    ("host-systemd-v2", "0::/user.slice/user-1000.slice/session-3.scope\n", None),
    ("host-root", "0::/\n", None),
    ("uppercase-hex-is-not-an-id", f"0::/docker/{DOCKER_ID.upper()}\n", None),
    ("63-hex-is-not-an-id", f"0::/docker/{DOCKER_ID[:63]}\n", None),
    ("65-hex-is-not-an-id", f"0::/docker/{DOCKER_ID}a\n", None),
    ("empty", "", None),
    ("garbage", "this is not\x00 a cgroup file ::::\n\n:", None),
    ("line-without-colons", f"/docker/{DOCKER_ID}\n", None),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_parse_cgroup(text: str, expected: CgroupMatch | None) -> None:
    assert parse_cgroup(text) == expected


def test_pod_uid_is_normalised_to_dashes() -> None:
    match = parse_cgroup(
        f"0::/kubepods.slice/kubepods-pod{POD_UNDERSCORE}.slice/cri-containerd-{CRI_ID}.scope"
    )
    assert match is not None
    assert match.pod_uid == "5be537b8-3a4e-4607-af71-31598b3a4fd3"


def test_crlf_and_trailing_whitespace_are_tolerated() -> None:
    assert parse_cgroup(f"0::/system.slice/docker-{DOCKER_ID}.scope\r\n") == CgroupMatch(
        DOCKER_ID, "docker", None, False
    )


# Docker 20.10 with the systemd cgroup driver, under systemd as PID 1 of a privileged podman
# container (cgroupfs manager, --cgroupns=private) on this cgroup v1 (hybrid) host, read from the
# host: a container's ``sleep`` and the engine itself (scripts/check_systemd_docker.sh, 2026-12-02).
# Some controllers name the scope below the podman container, some at the hierarchy's root.
SYSTEMD_DOCKER_IN_PODMAN = REPO / "tests/fixtures/cgroup/systemd-docker-in-podman-v1.container"
SYSTEMD_DOCKERD_IN_PODMAN = REPO / "tests/fixtures/cgroup/systemd-docker-in-podman-v1.dockerd"
INNER_ID = "7d0388bb4adfd0a2b4cc00fb554fe9847899783ee95bb52414f420b9a7f9d49e"
PODMAN_ID = "ec752b93fe59feb24510766588fed22669aecae95dd3adecb4600168394a0f28"


def test_systemd_docker_in_a_podman_container_is_the_inner_container() -> None:
    text = SYSTEMD_DOCKER_IN_PODMAN.read_text()
    assert f"0::/libpod_parent/libpod-{PODMAN_ID}/system.slice/docker-{INNER_ID}.scope" in text
    assert f"9:name=systemd:/system.slice/docker-{INNER_ID}.scope" in text
    assert parse_cgroup(text) == CgroupMatch(INNER_ID, "docker", None, False)
    assert not has_relative_path(text)
    # Every line names the inner container, with the podman container above it or not.
    for line in text.splitlines():
        assert path_names_container(line.split(":", 2)[2], INNER_ID), line
        assert parse_cgroup(line + "\n") == CgroupMatch(INNER_ID, "docker", None, False)


def test_the_engine_itself_is_in_the_podman_container() -> None:
    text = SYSTEMD_DOCKERD_IN_PODMAN.read_text()
    assert parse_cgroup(text) == CgroupMatch(PODMAN_ID, "podman", None, False)
    assert not path_names_container(text.splitlines()[-1].split(":", 2)[2], INNER_ID)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0::/../../kubepods.slice\n", True),
        (f"0::../../docker-{DOCKER_ID}.scope\n", True),
        ("4:memory:/..\n0::/\n", True),
        (DOCKER_V1_CGROUPFS, False),
        ("0::/foo..bar/baz\n", False),  # ".." inside a name is not a parent component
        ("", False),
        ("garbage", False),
    ],
)
def test_has_relative_path(text: str, expected: bool) -> None:
    assert has_relative_path(text) is expected


STATUS_CONTAINER_INIT = """Name:\tsleep
Umask:\t0022
State:\tS (sleeping)
Tgid:\t16494
Ngid:\t0
Pid:\t16494
PPid:\t16470
NStgid:\t16494\t1
NSpid:\t16494\t1
NSpgid:\t16494\t1
NSsid:\t16494\t1
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (STATUS_CONTAINER_INIT, 1),
        ("Name:\tpython3\nPid:\t427\nNSpid:\t427\n", 427),
        ("NSpid:\t30001\t2044\t17\n", 17),  # nested namespaces: the innermost is last
        ("Name:\told-kernel\nPid:\t12\n", None),
        ("NSpid:\n", None),
        ("NSpid:\t12\tabc\n", None),
        ("NSpid:\t\u00b2\n", None),  # a Unicode digit int() would reject
        ("NSpid:\t0\n", None),
        ("NSpid:\t" + "9" * 5000 + "\n", None),
        ("", None),
        ("\x00\x01NSpid", None),
    ],
)
def test_parse_nspid(text: str, expected: int | None) -> None:
    assert parse_nspid(text) == expected


# --- fuzzing -------------------------------------------------------------------------------

_hex64 = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)
_known_component = st.one_of(
    st.sampled_from(
        [
            "docker",
            "kubepods",
            "burstable",
            "system.slice",
            "..",
            "",
            "container",
            "containerd.service",
            f"pod{POD_DASH}",
            f"kubepods-burstable-pod{POD_UNDERSCORE}.slice",
        ]
    ),
    _hex64,
    st.builds(
        lambda prefix, cid, suffix: f"{prefix}{cid}{suffix}",
        st.sampled_from(
            ["", "docker-", "libpod-", "cri-containerd-", "crio-", "containerd-", "crio-conmon-"]
        ),
        _hex64,
        st.sampled_from(["", ".scope", ".mount", ".slice"]),
    ),
    st.builds(
        lambda pod, rt, cid: f"kubepods-pod{pod}.slice:{rt}:{cid}",
        st.just(POD_UNDERSCORE),
        st.sampled_from(["cri-containerd", "crio", "docker", "weird", ""]),
        _hex64,
    ),
)
_component = st.one_of(_known_component, st.text(max_size=20))
_line = st.builds(
    lambda hier, ctrl, parts: f"{hier}:{ctrl}:/" + "/".join(parts),
    st.sampled_from(["0", "1", "4", "9", "14", "x", ""]),
    st.sampled_from(["", "memory", "name=systemd", "cpu,cpuacct", "pids:extra"]),
    st.lists(_component, max_size=8),
)
_cgroup_file = st.lists(_line, max_size=6).map("\n".join)


def _check_match(match: CgroupMatch | None) -> None:
    if match is not None:
        assert HEX64.fullmatch(match.container_id)
        assert match.runtime in (None, "docker", "containerd", "crio", "podman", "kubernetes")
        assert match.pod_uid is None or "_" not in match.pod_uid


@given(st.text())
def test_fuzz_arbitrary_text_never_raises(text: str) -> None:
    _check_match(parse_cgroup(text))
    assert isinstance(has_relative_path(text), bool)
    pid = parse_nspid(text)
    assert pid is None or pid > 0


@settings(max_examples=300)
@given(_cgroup_file)
def test_fuzz_cgroup_like_text_never_raises(text: str) -> None:
    match = parse_cgroup(text)
    _check_match(match)
    if match is not None:
        assert match.container_id in text
        assert not match.relative or ".." in text


@given(_hex64, st.lists(_known_component, max_size=5))
def test_fuzz_a_scope_id_is_always_found_below_any_prefix(cid: str, parents: list[str]) -> None:
    text = "0::/" + "/".join([*parents, f"docker-{cid}.scope"])
    match = parse_cgroup(text)
    assert match is not None
    assert match.container_id == cid


@given(st.lists(st.integers(min_value=1, max_value=4_194_304), min_size=1, max_size=4))
def test_fuzz_nspid_returns_the_last_field(pids: list[int]) -> None:
    text = "Name:\tx\nNSpid:\t" + "\t".join(map(str, pids)) + "\nNSsid:\t1\n"
    assert parse_nspid(text) == pids[-1]
