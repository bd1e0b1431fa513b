"""The labels of the container tree's rows, and the raw inputs each is built from.

Every untrusted string goes through ``fmt.safe_text`` into a Rich ``Text`` (never markup), so
names and commands cannot inject styles or terminal sequences.
"""

from __future__ import annotations

from rich.text import Span, Text

from gputui.derive import fmt
from gputui.derive.tree import Marker
from gputui.model import ContainerUsage, GpuProcess
from gputui.ui.styles import EMPH, ERROR, MUTED, severity_style
from gputui.ui.styles import WARNING as WARN

#: Shown on every container (and the others group) while the Docker engine is unreachable: the
#: collector keeps the last container list, which must not pass for live.
STALE_TEXT = "[engine unreachable: last known]"

#: In place of the command (and owner) of a process that ``/proc`` hides (``hidepid``): it exists
#: and holds GPU memory, but gputui may not read who runs what, nor its container.
HIDDEN_TEXT = "hidden by /proc (hidepid)"


#: What ``Text.append`` strips (rich.control.strip_control_codes): bell, backspace, VT, FF, CR.
_STRIPPED = frozenset("\x07\x08\x0b\x0c\x0d")


def assemble_parts(parts: list[tuple[str, str] | str], dim: bool = False) -> Text:
    """``Text.assemble(*parts, no_wrap=True, overflow="ellipsis")``, built in one go.

    ``Text.assemble`` appends part by part (15 appends, each stripping control codes); a label is
    rebuilt for every moving node on every refresh, so join once and place the spans directly.
    ``dim`` dims the whole line (a row that is not live).
    """
    texts: list[str] = []
    spans: list[Span] = []
    offset = 0
    for part in parts:
        text, style = (part, "") if isinstance(part, str) else part
        if text:
            end = offset + len(text)
            if style:
                spans.append(Span(offset, end, style))
            texts.append(text)
            offset = end
    plain = "".join(texts)
    style = MUTED if dim else ""
    if not _STRIPPED.isdisjoint(plain):
        # Stripping would shift the spans; let rich do it part by part (never for safe_text).
        return Text.assemble(*parts, style=style, no_wrap=True, overflow="ellipsis")
    return Text(plain, style=style, no_wrap=True, overflow="ellipsis", spans=spans)


def container_inputs(
    usage: ContainerUsage,
    memory: int | None,
    sm: int | None,
    markers: tuple[Marker, ...],
    stale: bool = False,
) -> tuple[object, ...]:
    """What :func:`container_label` reads (not CPU/memory figures that move every refresh)."""
    info = usage.info
    return (
        stale,
        info.name,
        usage.known_to_engine,
        usage.idle_reserved,
        markers,
        info.status,
        info.running,
        info.gpu_request,
        bool(usage.pids),
        memory,
        sm,
        info.image,
        info.compose_project,
        info.compose_service,
        info.k8s_pod,
        info.k8s_namespace,
    )


def process_inputs(process: GpuProcess, markers: tuple[Marker, ...]) -> tuple[object, ...]:
    """What :func:`process_label` reads."""
    info, sample = process.info, process.sample
    return (
        process.pid,
        info.container_pid,
        info.exists,
        info.proc_hidden,
        sample.gpu_index,
        sample.used_memory_bytes,
        info.user,
        sample.sm_util,
        info.cpu_percent,
        markers,
        info.rss_bytes,
        info.command,
        info.name,
    )


def marker_parts(markers: tuple[Marker, ...]) -> list[tuple[str, str] | str]:
    """``  [shared GPU 1: 75%]  [CPU throttled 45%]``: one bracketed flag per marker."""
    parts: list[tuple[str, str] | str] = []
    for marker in markers:
        parts += ["  ", (f"[{marker.text}]", severity_style(marker.severity))]
    return parts


def container_label(
    group_usage: ContainerUsage,
    memory: int | None,
    sm: int | None,
    markers: tuple[Marker, ...] = (),
    stale: bool = False,
) -> Text:
    """``name  [markers]  status  GPU all  13.0GiB  SM 60%  image  project/service``.

    Markers and numbers come first so a narrow terminal cuts the image, not the facts. The
    idle marker comes from the findings (with how long) when they ran, else from the snapshot.
    ``stale``: the engine is unreachable and this is its last known list: the row is dimmed and
    says so (a cgroup-only container is not from the engine and stays as it is).
    """
    info = group_usage.info
    stale = stale and group_usage.known_to_engine
    parts: list[tuple[str, str] | str] = [(fmt.safe_text(info.name, 40), EMPH)]
    if stale:
        parts += ["  ", (STALE_TEXT, MUTED)]
    if not group_usage.known_to_engine:
        parts += ["  ", ("[cgroup only: not known to Docker]", WARN)]
    if group_usage.idle_reserved and not any(m.kind == "idle_reservation" for m in markers):
        parts += ["  ", ("[idle: reserved GPU, no GPU process]", WARN)]
    parts += marker_parts(markers)
    status = fmt.safe_text(info.status, 12)
    parts += ["  ", (status, MUTED if info.running else WARN)]
    if info.gpu_request is not None:
        parts += [("  GPU ", MUTED), fmt.safe_text(fmt.gpu_request(info.gpu_request), 24)]
    if group_usage.pids:
        parts += ["  ", (fmt.size(memory), EMPH), ("  SM ", MUTED), fmt.pct(sm)]
    if info.image:
        parts += ["  ", (fmt.safe_text(info.image, 40), MUTED)]
    if info.compose_service:
        project = fmt.safe_text(info.compose_project, 24, na="")
        service = fmt.safe_text(info.compose_service, 24)
        parts += ["  ", (f"{project}/{service}" if project else service, "italic")]
    if info.k8s_pod:
        namespace = fmt.safe_text(info.k8s_namespace, 24, na="")
        pod = fmt.safe_text(info.k8s_pod, 40)
        parts += ["  ", (f"pod {namespace}/{pod}" if namespace else f"pod {pod}", "italic")]
    return assemble_parts(parts, dim=stale)


def process_label(process: GpuProcess, markers: tuple[Marker, ...] = ()) -> Text:
    """``611 (1)  root  GPU 0  13290MiB  SM 60%  CPU 12%  [markers]  RSS 512MiB  python3 …``."""
    info, sample = process.info, process.sample
    parts: list[tuple[str, str] | str] = [(str(process.pid), EMPH)]
    if info.container_pid is not None and info.container_pid != process.pid:
        parts += [(f" ({info.container_pid})", MUTED)]
    if not info.exists:
        parts += [
            ("  GPU ", MUTED),
            str(sample.gpu_index),
            "  ",
            (fmt.mib(sample.used_memory_bytes), EMPH),
            ("  PID not found: memory held by a process nobody can see", ERROR),
        ]
        return assemble_parts(parts)
    if info.proc_hidden:
        parts += [
            ("  GPU ", MUTED),
            str(sample.gpu_index),
            "  ",
            (fmt.mib(sample.used_memory_bytes), EMPH),
            *marker_parts(markers),
            "  ",
            (HIDDEN_TEXT, WARN),
        ]
        return assemble_parts(parts)
    parts += [
        "  ",
        (fmt.safe_text(info.user, 16, na="?"), MUTED),
        ("  GPU ", MUTED),
        str(sample.gpu_index),
        "  ",
        (fmt.mib(sample.used_memory_bytes), EMPH),
        ("  SM ", MUTED),
        fmt.pct(sample.sm_util),
        ("  CPU ", MUTED),
        fmt.pct(info.cpu_percent),
        *marker_parts(markers),
        ("  RSS ", MUTED),
        fmt.size(info.rss_bytes),
        "  ",
        fmt.safe_text(info.command or info.name, 120, na="?"),
    ]
    return assemble_parts(parts)


def host_label(count: int, memory: int | None, sm: int | None, mine: tuple[Marker, ...]) -> Text:
    """``host  processes outside containers: 2  1.2GiB  SM 5%  [markers]``."""
    return assemble_parts(
        [
            ("host", EMPH),
            ("  processes outside containers: ", MUTED),
            str(count),
            "  ",
            (fmt.size(memory), EMPH),
            ("  SM ", MUTED),
            fmt.pct(sm),
            *marker_parts(mine),
        ]
    )


def orphans_label(count: int, memory: int | None, mine: tuple[Marker, ...]) -> Text:
    """``unfindable GPU memory  1.0GiB  [markers]  held by 1 PID not visible here``."""
    return assemble_parts(
        [
            ("unfindable GPU memory", ERROR),
            "  ",
            (fmt.size(memory), EMPH),
            *marker_parts(mine),
            (f"  held by {count} PID{'s' if count != 1 else ''} not visible here", MUTED),
        ]
    )


def others_label(count: int, stale: bool = False) -> Text:
    """``other containers  3 without GPU use`` (marked and dimmed while the engine is down)."""
    parts: list[tuple[str, str] | str] = [("other containers", EMPH)]
    if stale:
        parts += ["  ", (STALE_TEXT, MUTED)]
    parts.append((f"  {count} without GPU use", MUTED))
    return assemble_parts(parts, dim=stale)
