"""CDI specs as the checks read them: which devices a spec offers and which host paths it names.

A CDI spec (the Container Device Interface, ``cdiVersion``, ``kind``, ``devices[].name``,
``devices[].containerEdits`` and the spec-wide ``containerEdits``: ``deviceNodes``, ``mounts``,
``hooks``) is a system file in YAML or JSON. Every spec is read bounded: a directory's first
:data:`MAX_SPEC_FILES` spec files, each opened non-blocking as a regular file of at most
:data:`MAX_SPEC_BYTES` (a FIFO or a device planted there is refused, never read), its nesting
and node count measured before it is built (:func:`gputui.boundary.yaml_limits.load_bounded_yaml`,
:func:`gputui.boundary.json_limits.json_depth`), and at most :data:`MAX_DEVICES` devices and
:data:`MAX_PATHS` host paths taken from it; a field of the wrong type is passed over. A file is
parsed again only when it changes (inode, size, modification time).
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

from gputui.boundary.json_limits import json_depth, no_constant
from gputui.boundary.sanitise import safe_text
from gputui.boundary.userfiles import UserFileError, read_user_file
from gputui.boundary.yaml_limits import YamlLimitError, load_bounded_yaml
from gputui.health.context import CheckContext
from gputui.model.records import record

#: The kind NVIDIA's toolkit writes its GPUs under (``--device nvidia.com/gpu=0``).
NVIDIA_GPU_KIND = "nvidia.com/gpu"
SPEC_SUFFIXES = (".yaml", ".yml", ".json")

#: Bounds of one spec. A generated spec of 8 GPUs, by index and UUID, is some 30 KiB and 3,000
#: nodes; these are far above any real one and keep a hostile file to a fraction of a second.
MAX_SPEC_BYTES = 1024 * 1024
MAX_SPEC_FILES = 64
MAX_DEPTH = 32
MAX_NODES = 100_000
MAX_DEVICES = 4096
MAX_PATHS = 8192
#: A name or path longer than this is not one the toolkit writes (kept shortened in details).
MAX_NAME = 512

# A spec that does not parse may still be NVIDIA's: said by its text.
_NVIDIA_KIND_TEXT = re.compile(rb"""["']?kind["']?\s*:\s*["']?nvidia\.com/gpu""")
# Generated specs mount driver libraries by full name, e.g. libcuda.so.580.159.04.
_SO_VERSION = re.compile(r"\.so\.(\d{3}\.\d+(?:\.\d+)?)$")


@record(slots=False)
class CdiSpec:
    """What one spec file offers.

    Attributes:
        path: The file.
        kind: Its ``kind`` (None when unreadable or not a string).
        version: Its ``cdiVersion``.
        devices: Its devices' names, in order (at most :data:`MAX_DEVICES`).
        device_nodes: Host paths of its device nodes (``hostPath``, else ``path``).
        mounts: Host paths of its mounts (the driver's libraries and binaries).
        hooks: Paths of the programs its hooks run (``nvidia-cdi-hook``, ``nvidia-ctk``).
        problem: Why it could not be read, None when it was.
        nvidia_text: Its text names ``kind: nvidia.com/gpu``, or, when it could not be read
            at all, its file name says ``nvidia`` (what an unreadable spec is taken for).
    """

    path: str
    kind: str | None = None
    version: str | None = None
    devices: tuple[str, ...] = ()
    device_nodes: tuple[str, ...] = ()
    mounts: tuple[str, ...] = ()
    hooks: tuple[str, ...] = ()
    problem: str | None = None
    nvidia_text: bool = False

    @property
    def nvidia(self) -> bool:
        """A readable spec of NVIDIA's GPUs."""
        return self.problem is None and self.kind == NVIDIA_GPU_KIND

    @property
    def driver_versions(self) -> frozenset[str]:
        """The driver versions its libraries are named by (``libcuda.so.580.159.04``)."""
        found = (_SO_VERSION.search(path) for path in self.mounts)
        return frozenset(m.group(1) for m in found if m is not None)


@record(slots=False)
class CdiInventory:
    """The specs of a set of CDI directories.

    Attributes:
        specs: Every spec file read (or refused), directory by directory, by name.
        notes: One line per directory that could not be listed, or was listed in part.
    """

    specs: tuple[CdiSpec, ...]
    notes: tuple[str, ...]

    @property
    def nvidia(self) -> tuple[CdiSpec, ...]:
        """The readable NVIDIA specs."""
        return tuple(s for s in self.specs if s.nvidia)

    @property
    def unreadable_nvidia(self) -> tuple[CdiSpec, ...]:
        """Specs that could not be read whose text names NVIDIA's kind."""
        return tuple(s for s in self.specs if s.problem is not None and s.nvidia_text)


def inventory(ctx: CheckContext, dirs: Sequence[str]) -> CdiInventory:
    """The specs of ``dirs``, read once per health pass whichever check asks first."""
    return ctx.once(f"cdi.inventory:{'|'.join(dirs)}", lambda: read_inventory(dirs))


def read_inventory(dirs: Iterable[str]) -> CdiInventory:
    """Read the spec files of each directory (bounded; see the module docstring)."""
    specs: list[CdiSpec] = []
    notes: list[str] = []
    for directory in dirs:
        try:
            with os.scandir(directory) as listing:
                names = sorted(
                    entry.name
                    for _, entry in zip(range(4 * MAX_SPEC_FILES), listing, strict=False)
                    if entry.name.endswith(SPEC_SUFFIXES)
                )
        except FileNotFoundError:
            notes.append(f"{directory}: absent")
            continue
        except OSError as exc:
            notes.append(f"{directory}: cannot list ({exc.strerror or exc})")
            continue
        if len(names) > MAX_SPEC_FILES:
            notes.append(f"{directory}: more than {MAX_SPEC_FILES} spec files, the rest not read")
        specs.extend(read_spec(os.path.join(directory, name)) for name in names[:MAX_SPEC_FILES])
    return CdiInventory(tuple(specs), tuple(notes))


_cache: dict[str, tuple[tuple[int, int, int, int], CdiSpec]] = {}
_cache_lock = threading.Lock()


def read_spec(path: str) -> CdiSpec:
    """One spec file, bounded; parsed again only when the file changed."""
    try:
        st = os.stat(path)
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    except OSError:
        key = None
    if key is not None:
        with _cache_lock:
            kept = _cache.get(path)
        if kept is not None and kept[0] == key:
            return kept[1]
    spec = _parse_spec(path)
    if key is not None:
        with _cache_lock:
            if len(_cache) >= 4 * MAX_SPEC_FILES:
                _cache.clear()
            _cache[path] = (key, spec)
    return spec


def _parse_spec(path: str) -> CdiSpec:
    try:
        data = read_user_file(Path(path), "CDI spec", MAX_SPEC_BYTES)
    except UserFileError as exc:
        # Not read (too large, a FIFO): NVIDIA's as far as its name says.
        return CdiSpec(path, problem=exc.reason, nvidia_text="nvidia" in os.path.basename(path))
    nvidia_text = _NVIDIA_KIND_TEXT.search(data) is not None
    try:
        document = _decode(path, data)
    except ValueError as exc:
        return CdiSpec(path, problem=str(exc), nvidia_text=nvidia_text)
    if not isinstance(document, dict):
        shape = "empty" if document is None else f"a {type(document).__name__}, not a mapping"
        return CdiSpec(path, problem=f"top level is {shape}", nvidia_text=nvidia_text)
    kind = _string(document.get("kind"))
    if kind is None:
        return CdiSpec(path, problem="no kind", nvidia_text=nvidia_text)
    paths = _Paths()
    paths.add_edits(document.get("containerEdits"))
    devices: list[str] = []
    raw_devices = document.get("devices")
    for device in raw_devices[:MAX_DEVICES] if isinstance(raw_devices, list) else ():
        if not isinstance(device, dict):
            continue
        name = _string(device.get("name"))
        if name is not None:
            devices.append(name)
        paths.add_edits(device.get("containerEdits"))
    return CdiSpec(
        path,
        kind=kind,
        version=_string(document.get("cdiVersion")),
        devices=tuple(devices),
        device_nodes=tuple(paths.device_nodes),
        mounts=tuple(paths.mounts),
        hooks=tuple(paths.hooks),
        nvidia_text=nvidia_text,
    )


def _decode(path: str, data: bytes) -> object:
    """The document of a JSON or YAML spec, measured before it is built."""
    text = data.decode("utf-8", errors="replace")
    if path.endswith(".json"):
        if json_depth(data) > MAX_DEPTH:
            raise ValueError(f"nested deeper than {MAX_DEPTH}")
        try:
            return json.loads(text, parse_constant=no_constant)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not valid JSON: {exc.msg} at line {exc.lineno}") from None
    try:
        return load_bounded_yaml(text, max_depth=MAX_DEPTH, max_nodes=MAX_NODES)
    except YamlLimitError as exc:
        raise ValueError(str(exc)) from None


def _string(value: object) -> str | None:
    if isinstance(value, str) and 0 < len(value) <= MAX_NAME:
        return value
    return None


class _Paths:
    """The host paths of a spec's edits, deduplicated, at most :data:`MAX_PATHS` in all."""

    def __init__(self) -> None:
        self.device_nodes: dict[str, None] = {}
        self.mounts: dict[str, None] = {}
        self.hooks: dict[str, None] = {}
        self.count = 0

    def _add(self, into: dict[str, None], value: object) -> None:
        path = _string(value)
        if path is None or not path.startswith("/") or path in into or self.count >= MAX_PATHS:
            return
        into[path] = None
        self.count += 1

    def add_edits(self, edits: object) -> None:
        if not isinstance(edits, dict):
            return
        for key, into, field_names in (
            ("deviceNodes", self.device_nodes, ("hostPath", "path")),
            ("mounts", self.mounts, ("hostPath",)),
            ("hooks", self.hooks, ("path",)),
        ):
            entries = edits.get(key)
            for entry in entries[:MAX_PATHS] if isinstance(entries, list) else ():
                if not isinstance(entry, dict):
                    continue
                # A device node's host path is hostPath when it differs from its path in
                # the container, else path.
                value = next((entry[f] for f in field_names if _string(entry.get(f))), None)
                self._add(into, value)


def shown(path: str) -> str:
    """A path or name from a spec or a directory listing, safe for one line of details."""
    return safe_text(path, limit=160)
