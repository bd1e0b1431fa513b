"""What a panel with nothing to show says instead: why, the fix, and where to look next.

One module for every panel (GPU panel, container tree, process table), so a first run on a
machine without a GPU or without Docker reads as deliberate: each empty panel names the source
that is missing (from the snapshot's :class:`~gputui.model.status.SourceStatus`), its fix,
and points
to the Health tab (``3``), ``gputui doctor`` and ``gputui --demo``.

Every text from the snapshot passes :func:`gputui.boundary.sanitise.safe_text`.
"""

from __future__ import annotations

from textual.content import Content

from gputui.boundary import sanitise
from gputui.derive.tree import build_groups
from gputui.model.snapshot import Snapshot
from gputui.model.status import HealthStatus, SourceStatus

#: Where to look next, on every empty state that comes from a missing source.
WHERE_TO_LOOK = "see  3 (Health tab) · gputui doctor · gputui --demo (simulated GPUs)"

_SOURCE_NAMES = {"nvml": "NVML", "docker": "Docker", "procs": "/proc"}
_KINDS = {
    "LibraryNotFound": "is not installed (no libnvidia-ml.so: no NVIDIA driver)",
    "DriverNotLoaded": "is installed but the NVIDIA kernel driver is not loaded",
    "NoPermission": "refused access (permission denied)",
    "permission": "refused access (permission denied)",
}
#: Kinds whose source error already is a sentence naming the endpoint (the Docker adapter's).
_SAYS_WHERE = {"docker": {"unreachable", "not_found", "permission", "slow"}}
_FIXES = {
    "nvml": "install the NVIDIA driver, or run gputui where the GPUs are",
    "docker": "start the Docker engine (systemctl start docker) or set DOCKER_HOST",
}


def source_problem(status: SourceStatus) -> str:
    """``NVML (the NVIDIA driver's library) is not installed (...)``: one line, sanitised."""
    name = _SOURCE_NAMES.get(status.name, sanitise.safe_text(status.name, 20))
    if status.error and (status.kind or "") in _SAYS_WHERE.get(status.name, set()):
        return f"{name}: {sanitise.safe_text(status.error, 160)}"
    kind = _KINDS.get(status.kind or "")
    if kind is None:
        detail = sanitise.safe_text(status.error, 160, na="")
        return f"{name} failed: {detail}" if detail else f"{name} failed"
    return f"{name} {kind}"


def source_fix(snapshot: Snapshot, source: str) -> str:
    """The fix for ``source``: its own, else a failing health check's of that area, else ours."""
    status = snapshot.sources.get(source)
    if status is not None and status.fix:
        return sanitise.safe_text(status.fix, 200)
    for check in snapshot.health:
        if check.status is HealthStatus.FAIL and check.id.startswith(source) and check.fix:
            return sanitise.safe_text(check.fix, 200)
    return _FIXES.get(source, "see the Health tab")


def _down(snapshot: Snapshot, source: str) -> SourceStatus | None:
    status = snapshot.sources.get(source)
    return status if status is not None and not status.ok else None


def _explain(snapshot: Snapshot, source: str, status: SourceStatus, consequence: str) -> Content:
    return Content.assemble(
        (consequence, "bold"),
        ": ",
        (source_problem(status), "$text-warning"),
        "\n",
        ("fix  ", "$text-muted"),
        source_fix(snapshot, source),
        "\n",
        (WHERE_TO_LOOK, "$text-muted"),
    )


def gpus_empty(snapshot: Snapshot | None) -> Content:
    """What the GPU panel says when there is no GPU to show.

    Args:
        snapshot: The latest refresh (None before the first).

    Returns:
        Up to three lines: why, the fix, where to look.
    """
    if snapshot is None:
        return Content.styled("Reading the GPUs…", "$text-muted")
    nvml = _down(snapshot, "nvml")
    if nvml is not None:
        return _explain(snapshot, "nvml", nvml, "No GPU data")
    return Content.assemble(
        ("No GPU", "bold"),
        ": NVML answers but reports no NVIDIA GPU on this machine (or none visible to it)",
        "\n",
        ("check  ", "$text-muted"),
        "CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES, and nvidia-smi -L",
        "\n",
        (WHERE_TO_LOOK, "$text-muted"),
    )


def containers_empty(snapshot: Snapshot | None) -> Content | None:
    """What the container tree says when it has no row, None when it has some.

    Args:
        snapshot: The latest refresh (None before the first).

    Returns:
        Why the tree is empty (Docker down, NVML down, nothing uses a GPU), the fix, and where
        to look; None when the tree has rows to show.
    """
    if snapshot is None:
        return Content.styled("Reading containers…", "$text-muted")
    if build_groups(snapshot):
        return None
    docker = _down(snapshot, "docker")
    if docker is not None:
        return _explain(snapshot, "docker", docker, "No containers")
    nvml = _down(snapshot, "nvml")
    if nvml is not None:
        return _explain(snapshot, "nvml", nvml, "No GPU processes to attribute")
    # Containers without GPU use would be rows ("other containers"): here there are none.
    return Content.assemble(
        ("Nothing uses a GPU", "bold"),
        ": no container, and no GPU process outside containers either.",
        "\n",
        ("try  ", "$text-muted"),
        "docker run --rm --gpus all IMAGE nvidia-smi  (it shows up here while it runs)",
        "\n",
        ("see  2 (every GPU process) · 3 (Health tab) · gputui --demo", "$text-muted"),
    )


def processes_empty(
    snapshot: Snapshot | None, filter_text: str = "", shown: int = 0, scope: int | None = None
) -> Content | None:
    """What the process table says when it has no row, None when it has some.

    Args:
        snapshot: The latest refresh (None before the first).
        filter_text: The table's filter; when it hides every process, that is the reason.
        shown: Rows the table shows now (after the filter): any row means no note.
        scope: The GPU the table is scoped to (``f``); None: every GPU.

    Returns:
        Why no GPU process is listed, and what to do; None when there are processes to list.
    """
    if snapshot is None:
        return Content.styled("Reading processes…", "$text-muted")
    if snapshot.processes:
        if shown > 0 or not (filter_text or scope is not None):
            return None
        if not filter_text:
            return scoped_empty(scope, len(snapshot.processes), "GPU processes")
        needle = sanitise.safe_text(filter_text, 40)
        return Content.assemble(
            ("No process matches ", "bold"),
            (f"“{needle}”", "bold $text-warning"),
            f" (of {len(snapshot.processes)}).",
            "\n",
            ("/ edits the filter, Escape clears it", "$text-muted"),
        )
    nvml = _down(snapshot, "nvml")
    if nvml is not None:
        return _explain(snapshot, "nvml", nvml, "No GPU processes")
    return Content.assemble(
        ("No process is using a GPU right now.", "bold"),
        "\n",
        ("Processes show up here as soon as one opens a GPU (CUDA, nvidia-smi, Xorg).", "dim"),
    )


def scoped_empty(scope: int | None, total: int, what: str) -> Content:
    """``Nothing runs on GPU 3 (of 7 GPU processes).``: a GPU scope hides every row."""
    return Content.assemble(
        ("Nothing runs on ", "bold"),
        (f"GPU {scope}", "bold $accent"),
        f" (of {total} {what}).",
        "\n",
        ("f scopes to the next GPU, Escape shows every GPU", "$text-muted"),
    )
