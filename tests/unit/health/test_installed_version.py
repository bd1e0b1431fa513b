"""The installed-version lookup of the bindings check agrees with importlib.metadata."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import pytest

from gputui.health.runner import installed_version


def _reference(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def test_versions_of_this_environment_match_importlib_metadata() -> None:
    for name in ("textual", "psutil", "nvidia-ml-py", "nvidia_ml_py", "PyTest", "no-such-dist-x"):
        assert installed_version(name) == _reference(name), name


def test_dist_info_egg_info_and_the_first_on_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "a", tmp_path / "b"

    def installed(where: Path, entry: str, name: str, version: str, meta: str) -> None:
        (where / entry).mkdir(parents=True)
        text = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n"
        (where / entry / meta).write_text(text)

    installed(first, "nvidia_ml_py-13.580.82.dist-info", "nvidia-ml-py", "13.580.82", "METADATA")
    installed(second, "nvidia_ml_py-12.535.133.dist-info", "nvidia-ml-py", "12.535.133", "METADATA")
    installed(second, "pynvml-11.4.1-py3.8.egg-info", "pynvml", "11.4.1", "PKG-INFO")
    # An egg-info can be a single file.
    egg = "Metadata-Version: 1.0\nName: nvidia-ml-py3\nVersion: 7.352.0\n"
    (second / "nvidia_ml_py3-7.352.0.egg-info").write_text(egg)
    # A development install's entry carries no version in its name: read from its metadata.
    bare = second / "Some.Tool.egg-info"
    bare.mkdir()
    (bare / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: some.tool\nVersion: 2.0.1\n\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "missing"), str(first), str(second)])
    assert installed_version("nvidia-ml-py") == "13.580.82"  # the first along sys.path wins
    assert installed_version("pynvml") == "11.4.1"
    assert installed_version("nvidia-ml-py3") == "7.352.0"
    assert installed_version("some-tool") == "2.0.1"
    assert installed_version("docker") is None
    for name in ("nvidia-ml-py", "pynvml", "nvidia-ml-py3", "some-tool", "docker"):
        assert installed_version(name) == _reference(name), name
