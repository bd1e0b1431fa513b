"""What a filter box's text asks for: words to match, and ``gpu:N`` tokens naming GPUs.

``/`` on the Containers and Processes tabs takes free text (matched in names, commands, users,
PIDs and the GPU column) and ``gpu:3`` or ``gpu:0,2`` (only what runs on those GPUs, by NVML
index: "who is on GPU 3?"). The GPU scope (``f``, or a click on a GPU) narrows the same way.
"""

from __future__ import annotations

import re

from gputui.model.processes import GpuProcess
from gputui.model.records import record

#: ``gpu:3``, ``gpu:0,2`` (case-blind); anything else after ``gpu:`` stays plain text.
_GPU_TOKEN = re.compile(r"^gpu:(\d{1,4}(?:,\d{1,4})*)$", re.IGNORECASE)


@record
class FilterQuery:
    """A filter text taken apart.

    Attributes:
        text: The words to match (case-blind), ``gpu:`` tokens removed; empty: every row.
        gpus: The GPU indexes rows must be on (None: any GPU).
    """

    text: str
    gpus: frozenset[int] | None

    @property
    def empty(self) -> bool:
        """Whether it lets every row through."""
        return not self.text and self.gpus is None

    def on_gpus(self, process: GpuProcess) -> bool:
        """Whether the process runs on one of :attr:`gpus` (always, with no GPU asked for)."""
        return self.gpus is None or process.sample.gpu_index in self.gpus


def parse_filter(text: str, scope: int | None = None) -> FilterQuery:
    """Split a filter's text into words and ``gpu:`` tokens, narrowed by the GPU scope.

    Args:
        text: What the user typed.
        scope: The GPU the monitor is scoped to (``f``), None for every GPU.

    Returns:
        The query. Several ``gpu:`` tokens add up (``gpu:0 gpu:2`` is ``gpu:0,2``); with a
        scope too, only the scoped GPU among them is kept (nothing, when it is not one of them).
    """
    words: list[str] = []
    gpus: set[int] | None = None
    for word in text.split():
        found = _GPU_TOKEN.match(word)
        if found is None:
            words.append(word)
            continue
        gpus = (gpus or set()) | {int(n) for n in found.group(1).split(",")}
    if scope is not None:
        gpus = {scope} if gpus is None else gpus & {scope}
    return FilterQuery(" ".join(words), None if gpus is None else frozenset(gpus))


def requests_gpu(request: str | tuple[str, ...] | None, gpus: frozenset[int]) -> bool:
    """Whether a container's GPU request (``"all"``, indexes or UUIDs) names one of ``gpus``.

    A container with no GPU process is "on" a GPU it reserved: an idle reservation of GPU 3 is
    an answer to "who is on GPU 3?".
    """
    if request is None:
        return False
    items = request.split(",") if isinstance(request, str) else request
    names = {str(g) for g in gpus}
    return any(item.strip() == "all" or item.strip() in names for item in items)


def scope_parts(scope: int | None, tagged: int) -> list[tuple[str, str]]:
    """The status lines' ``GPU 3 only`` and ``2 tagged`` (nothing when neither applies)."""
    parts: list[tuple[str, str]] = []
    if scope is not None:
        parts.append((f"  ·  GPU {scope} only", "bold $accent"))
    if tagged:
        parts.append((f"  ·  {tagged} tagged", "bold $text-warning"))
    return parts


def key_hint(scope: int | None, tagged: int) -> str:
    """The status lines' key hint: sort and filter, and how to leave a scope or untag."""
    hint = "s/S: sort  /: filter"
    if scope is not None:
        hint += "  f: next GPU  Esc: all GPUs"
    if tagged:
        hint += "  u: untag"
    return hint
