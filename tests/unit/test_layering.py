"""Architecture rules, checked by machine: one adapter module per foreign library, the layers of
pyproject.toml (import-linter), and a data layer that never loads the UI toolkit or the driver."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO

PACKAGE = REPO / "gputui"

#: Each foreign library and the one module that imports it (grpc: the unix-socket client under
#: both gRPC peers, the kubelet's pod-resources and containerd's CRI, importing it at a call;
#: pynvml: ``load_pynvml`` of the early start, which the NVML source reads it through).
ADAPTERS: dict[str, tuple[str, ...]] = {
    "pynvml": ("collect/nvml/early.py",),
    "docker": ("collect/docker/source.py",),
    "psutil": ("collect/linux/psutil_facts.py",),
    "prometheus_client": ("exporter/families.py",),
    "grpc": ("collect/grpc_unix.py",),
    "yaml": ("boundary/yaml_limits.py",),
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize(("library", "owners"), sorted(ADAPTERS.items()))
def test_each_foreign_library_has_one_adapter(library: str, owners: tuple[str, ...]) -> None:
    importers = sorted(
        str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if library in _imports(p)
    )
    assert importers == sorted(owners)


def test_importing_the_collector_loads_no_ui_and_no_driver() -> None:
    code = (
        "import sys\n"
        "import gputui.collect.collector, gputui.present.text_report\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich', 'pynvml'))\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_import_contracts_hold() -> None:
    """The layer and Textual/Rich contracts of pyproject.toml, checked by import-linter."""
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports())",
        ],
        capture_output=True,
        text=True,
        cwd=PACKAGE.parent,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
