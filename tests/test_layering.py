"""Architecture rules, checked by machine: one adapter module per foreign library, and a data
layer that never imports the UI toolkit (so ``--once`` stays fast and UI-free)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gputui"

ADAPTERS = {
    "pynvml": "collect/nvml.py",
    "docker": "collect/docker.py",
    "psutil": "collect/procs.py",
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


@pytest.mark.parametrize(("library", "owner"), sorted(ADAPTERS.items()))
def test_each_foreign_library_has_one_adapter(library: str, owner: str) -> None:
    importers = sorted(
        str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if library in _imports(p)
    )
    assert importers == [owner]


def test_data_layer_never_imports_the_ui() -> None:
    offenders = []
    for layer in ("collect", "derive"):
        for path in (PACKAGE / layer).rglob("*.py"):
            bad = _imports(path) & {"textual", "rich"}
            if bad:
                offenders.append(f"{path.relative_to(PACKAGE)}: {sorted(bad)}")
    for path in (PACKAGE / "model.py", PACKAGE / "report.py", PACKAGE / "cli.py"):
        if _imports(path) & {"textual", "rich"}:
            offenders.append(path.name)
    assert offenders == []


def test_importing_the_collector_loads_no_ui_and_no_driver() -> None:
    code = (
        "import sys\n"
        "import gputui.collect.collector, gputui.report\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich', 'pynvml'))\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_modules_stay_small() -> None:
    sizes = {
        str(p.relative_to(PACKAGE)): len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")
    }
    assert {name: n for name, n in sizes.items() if n > 550} == {}
