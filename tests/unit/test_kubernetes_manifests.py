"""contrib/kubernetes/: the DaemonSet, Service and ServiceMonitor are valid for a current
Kubernetes release and fit together.

The built-in kinds are checked against the OpenAPI schemas of Kubernetes itself, in strict mode
(an unknown or misspelt field fails), as shipped in the ``kubernetes-validate`` wheel: no cluster
and no network. The ServiceMonitor is a custom resource: it is checked against the
``openAPIV3Schema`` of prometheus-operator's CRD, vendored in ``tests/fixtures/kubernetes``, with
every field required to be one the schema declares. The exporter's arguments are parsed by gputui's
own ``export`` parser.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from gputui.exporter.run import parse_listen
from tests.support.paths import REPO

try:
    import jsonschema
    import kubernetes_validate
    import yaml
except ImportError as exc:  # the test extra holds them; CI must not pass by skipping
    if os.environ.get("CI"):
        raise
    pytest.skip(f"kubernetes-validate is not installed ({exc})", allow_module_level=True)

MANIFESTS = REPO / "contrib" / "kubernetes"
CRD = REPO / "tests" / "fixtures" / "kubernetes" / "monitoring.coreos.com_servicemonitors.yaml"
#: The Kubernetes releases checked: an older one that long-lived and managed clusters still run,
#: and the newest the installed kubernetes-validate ships.
RELEASES = ("1.33", kubernetes_validate.latest_version())


def _documents() -> list[tuple[str, dict[str, Any]]]:
    docs = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                docs.append((f"{path.name}:{doc['kind']}/{doc['metadata']['name']}", doc))
    return docs


DOCS = _documents()
BUILTIN = [(name, doc) for name, doc in DOCS if doc["kind"] != "ServiceMonitor"]


def _one(kind: str) -> dict[str, Any]:
    found = [doc for _, doc in DOCS if doc["kind"] == kind]
    assert len(found) == 1, f"{kind}: {len(found)} documents"
    return found[0]


def test_the_manifests_hold_every_kind() -> None:
    kinds = sorted(doc["kind"] for _, doc in DOCS)
    assert kinds == ["DaemonSet", "Namespace", "Service", "ServiceAccount", "ServiceMonitor"]


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize(("name", "doc"), BUILTIN, ids=[n for n, _ in BUILTIN])
def test_builtin_kinds_match_the_kubernetes_schema(
    name: str, doc: dict[str, Any], release: str
) -> None:
    kubernetes_validate.validate(doc, release, strict=True)


def test_the_strict_schema_catches_a_misspelt_field() -> None:
    """The check above can fail: a typo in the security context is refused."""
    doc = _one("DaemonSet")
    bad = yaml.safe_load(yaml.safe_dump(doc))
    bad["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFs"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, RELEASES[-1], strict=True)


def _crd_schema() -> dict[str, Any]:
    crd = yaml.safe_load(CRD.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def _undeclared(value: Any, schema: Mapping[str, Any], where: str) -> Iterator[str]:
    """Fields the structural schema does not declare (the API server would prune them)."""
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if props is not None and key in props:
                yield from _undeclared(item, props[key], f"{where}.{key}")
            elif isinstance(extra, dict):
                yield from _undeclared(item, extra, f"{where}.{key}")
            elif not schema.get("x-kubernetes-preserve-unknown-fields") and where != "":
                yield f"{where}.{key}"
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for n, item in enumerate(value):
            yield from _undeclared(item, schema["items"], f"{where}[{n}]")


def _servicemonitor_problems(doc: dict[str, Any]) -> list[str]:
    schema = _crd_schema()
    validator = jsonschema.Draft7Validator(schema)
    problems = [f"{'.'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(doc)]
    body = {k: v for k, v in doc.items() if k not in ("apiVersion", "kind", "metadata")}
    problems += [f"not in the CRD: {p}" for p in _undeclared(body, schema, "")]
    return problems


def test_servicemonitor_matches_the_operators_crd() -> None:
    doc = _one("ServiceMonitor")
    assert doc["apiVersion"] == "monitoring.coreos.com/v1"
    assert _servicemonitor_problems(doc) == []


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("spec", "endpoints", 0, "honourLabels"), True),  # misspelt: pruned by the server
        (("spec", "endpoints", 0, "interval"), "fifteen seconds"),  # not a duration
        (("spec", "endpoints", 0, "relabelings", 0, "action"), "dropLabel"),  # not an action
    ],
)
def test_the_crd_check_catches_a_wrong_servicemonitor(path: tuple[Any, ...], value: Any) -> None:
    doc = yaml.safe_load(yaml.safe_dump(_one("ServiceMonitor")))
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert _servicemonitor_problems(doc) != []


def test_service_monitor_service_and_pods_fit_together() -> None:
    daemonset, service, monitor = _one("DaemonSet"), _one("Service"), _one("ServiceMonitor")
    pod = daemonset["spec"]["template"]
    labels = pod["metadata"]["labels"]
    assert daemonset["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert service["spec"]["selector"].items() <= labels.items()
    service_labels = service["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service_labels.items()
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [service["metadata"]["namespace"]]
    (container,) = pod["spec"]["containers"]
    (port,) = container["ports"]
    (service_port,) = service["spec"]["ports"]
    assert service_port["targetPort"] == port["name"]
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == [service_port["name"]]
    listen = next(a for a in container["args"] if a.startswith("--listen="))
    assert parse_listen(listen.partition("=")[2]) == ("0.0.0.0", port["containerPort"])
    assert pod["spec"]["serviceAccountName"] == _one("ServiceAccount")["metadata"]["name"]


def test_the_exporter_pod_is_least_privilege() -> None:
    spec = _one("DaemonSet")["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    ctx = container["securityContext"]
    assert ctx["privileged"] is False
    assert ctx["allowPrivilegeEscalation"] is False
    assert ctx["readOnlyRootFilesystem"] is True
    assert ctx["capabilities"] == {"drop": ["ALL"]}
    assert spec["hostPID"] is True
    assert not spec.get("hostNetwork") and not spec.get("hostIPC")
    assert spec["automountServiceAccountToken"] is False
    assert all(m["readOnly"] is True for m in container["volumeMounts"])
    paths = {v["hostPath"]["path"] for v in spec["volumes"]}
    assert paths == {"/run/containerd", "/sys/fs/cgroup", "/var/lib/kubelet/pod-resources"}
    assert {"requests", "limits"} <= container["resources"].keys()
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == "utility"
    assert "nvidia.com/gpu" not in str(container["resources"])  # no GPU is reserved


def test_the_exporter_arguments_are_gputui_exports(capsys: pytest.CaptureFixture[str]) -> None:
    """``gputui export`` takes the DaemonSet's arguments (a bad one would exit 2)."""
    from gputui.cli.export import export

    (container,) = _one("DaemonSet")["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    assert args[0] == "export"
    assert "--kernel-log=off" in args and "--engine=containerd" in args
    assert export([*args[1:], "--once", "--demo"]) == 0
    assert "gputui_info" in capsys.readouterr().out


def test_the_dockerfile_installs_the_package() -> None:
    text = (REPO / "contrib" / "Dockerfile").read_text()
    copied = [line.split()[1:-1] for line in text.splitlines() if line.startswith("COPY ")]
    for names in copied:
        for name in names:
            assert (REPO / name).exists(), name
    assert 'ENTRYPOINT ["gputui"]' in text


def test_the_crd_fixture_is_the_servicemonitor_crd() -> None:
    crd = yaml.safe_load(Path(CRD).read_text())
    assert crd["metadata"]["name"] == "servicemonitors.monitoring.coreos.com"
