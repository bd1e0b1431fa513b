"""What a pod's container takes through any CRI runtime: ``x`` (``ExecSync``) and ``l`` (its log).

Shared by the containerd source (which lists from the shims' bundles) and the CRI source (which
lists through the CRI): the command runs with no shell, its output bounded, and the log is the
CRI log file that ``ContainerStatus`` names. A terminal and the lifecycle keys stay the
kubelet's: a container the runtime stops under the kubelet is started again by it, so their
refusals name ``kubectl``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from gputui.collect.containerd import cri
from gputui.collect.containerd.cri_logs import CriLogReader
from gputui.collect.docker import parse as dp
from gputui.collect.docker.engine_api import MAX_EXEC_OUTPUT
from gputui.collect.docker.logs import LogStreamError
from gputui.model.containers import ExecResult

#: What a terminal in a pod's container (``X``, ``E``) is instead.
KUBECTL_TERMINAL = (
    "a terminal in a pod's container is the kubelet's: `kubectl exec -it -n NAMESPACE POD "
    "-c CONTAINER -- COMMAND`"
)


def kubelet_lifecycle(engine: str) -> str:
    """What stops and restarts a pod's container instead, ``engine`` naming the runtime.

    The kubelet starts again what the runtime stops under it.
    """
    return (
        f"a pod's containers are the kubelet's, which starts again what {engine} stops: "
        "`kubectl delete pod -n NAMESPACE POD` (its controller makes a new one)"
    )


def sandbox_refusal(pod: str, sandbox_name: str, what: str) -> str:
    """Why a pod's sandbox (its pause process) takes no ``what`` (``exec``, ``logs``)."""
    return (
        f"{pod[:64]}'s {sandbox_name} is the pod's sandbox (its pause process): it has no "
        f"{what}; choose one of the pod's containers"
    )


#: What the runtime says when the command is not in the container (runc, crun).
_NOT_FOUND_WORDS = ("executable file not found", "no such file or directory")


def _missing(name: str) -> str:
    """A command not found in a pod's container; for NVIDIA's tools, why they are missing."""
    if name.rsplit("/", 1)[-1].startswith("nvidia-"):
        return (
            f"{name} not found in the container: the NVIDIA runtime did not give it the driver's "
            "tools (the pod needs resources.limits nvidia.com/gpu, or runtimeClassName: nvidia "
            "with NVIDIA_DRIVER_CAPABILITIES=utility)"
        )
    return f"{name} not found in the container"


def _exec_error(argv: tuple[str, ...], code: int, output: str) -> str | None:
    """A failed command the user can act on (missing, lost its GPUs), else None."""
    if code in (126, 127):
        return _missing(argv[0] if argv else "command")
    return dp.exec_error(argv, code, output)


def _exec_failure(name: str, label: str, exc: cri.CriError, timeout_s: float, engine: str) -> str:
    """The one line for an ``ExecSync`` that gave no result."""
    said = exc.detail.lower()
    if exc.kind == "timeout":
        return f"{name} did not finish within {timeout_s:g} s; {engine} stops it at its timeout"
    if exc.kind == "not_found":
        return f"no such container in {engine}'s CRI: {label[:64]}"
    if "not in running state" in said or "not running" in said:
        return f"container {label[:64]} is not running"
    if any(words in said for words in _NOT_FOUND_WORDS):
        return _missing(name)
    return f"exec failed: {exc}"


def exec_sync(
    client: cri.CriClient,
    container_id: str,
    argv: Sequence[str],
    timeout_s: float,
    *,
    label: str,
    engine: str,
) -> ExecResult:
    """Run ``argv`` (no shell) in a pod's container through ``ExecSync``, output bounded.

    The runtime kills the command at the timeout (whole seconds, at least 1); the call returns
    within :data:`~gputui.collect.containerd.cri.EXEC_GRACE_S` after it. At most
    :data:`~gputui.collect.docker.engine_api.MAX_EXEC_OUTPUT` bytes of output are kept.

    Args:
        client: The runtime's CRI client.
        container_id: The container's full id.
        argv: The command.
        timeout_s: How long it may run.
        label: How messages name the container (its name).
        engine: How messages name the runtime (``containerd``, ``CRI-O``).

    Returns:
        Exit code and decoded output, or an explanation in ``error``.
    """
    args = tuple(argv)
    started = time.monotonic()
    name = args[0] if args else "command"
    try:
        out = client.exec_sync(container_id, args, timeout_s)
    except cri.CriError as exc:
        return ExecResult(
            args,
            None,
            duration_s=time.monotonic() - started,
            error=_exec_failure(name, label, exc, timeout_s, engine),
            timed_out=exc.kind == "timeout",
        )
    stdout = out.stdout[:MAX_EXEC_OUTPUT]
    stderr = out.stderr[: MAX_EXEC_OUTPUT - len(stdout)]
    cut = len(out.stdout) + len(out.stderr) > MAX_EXEC_OUTPUT
    text_out = stdout.decode("utf-8", errors="replace")
    text_err = stderr.decode("utf-8", errors="replace")
    error = _exec_error(args, out.exit_code, text_out + text_err)
    if cut:
        error = (
            f"{name} printed more than {MAX_EXEC_OUTPUT >> 20} MiB: the output was cut "
            f"there; it ended (exit {out.exit_code})"
        )
    return ExecResult(
        args,
        out.exit_code,
        text_out,
        text_err,
        duration_s=time.monotonic() - started,
        error=error,
        output_cut_bytes=MAX_EXEC_OUTPUT if cut else None,
    )


def open_log(
    client: cri.CriClient, container_id: str, *, tail: int, follow: bool, engine: str
) -> CriLogReader:
    """A pod's container's log file, as ``ContainerStatus`` names it: its tail, then on.

    Raises:
        LogStreamError: the CRI did not answer or named no file, or the file cannot be read
            (one line).
    """
    try:
        path = client.log_path(container_id)
    except cri.CriError as exc:
        raise LogStreamError(f"{engine} did not name the log file: {exc}") from exc
    if not path:
        raise LogStreamError(
            f"{engine} names no log file for it (its pod was made without a log directory)"
        )
    return CriLogReader(path, tail=tail, follow=follow)
