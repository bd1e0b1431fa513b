"""containerd's CRI API (``runtime.v1.RuntimeService``): exec and the log file of a pod's container.

containerd's CRI plugin serves the kubelet's runtime API on containerd's own socket
(``/run/containerd/containerd.sock``; k3s: ``/run/k3s/containerd/containerd.sock``). gputui asks
it two things, for a Kubernetes pod's container only: ``ExecSync`` (run a command, no shell, and
capture its output: ``x``) and ``ContainerStatus`` (the container's log file: ``l``). Nothing
that changes a pod is ever sent: a stop through CRI is undone by the kubelet, which restarts the
container, so the lifecycle keys stay the kubelet's (``kubectl delete pod``).

gRPC is ``grpcio``, the optional extra ``pip install 'gputui[kubernetes]'``, spoken through
:mod:`gputui.collect.grpc_unix` (the only importer of ``grpc``), imported only when a call is
made; without it a call fails with :data:`GRPC_FIX`. The messages (numbered as in
``k8s.io/cri-api`` ``pkg/apis/runtime/v1/api.proto``) are written and read by hand with
:mod:`~gputui.collect.kubelet.protowire`, bounded: a reply at most :data:`MAX_REPLY_BYTES`
(grpcio refuses a larger one before it is read whole), :data:`MAX_FIELDS` fields of decoding, a
deadline on every call, and every call in flight cancelled by :meth:`CriClient.close` from any
thread.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gputui.collect.grpc_unix import GrpcFailure, UnixGrpcClient
from gputui.collect.kubelet.protowire import (
    LENGTH,
    VARINT,
    Budget,
    WireError,
    encode,
    fields,
    message,
    signed,
    text,
)
from gputui.model.records import record

if TYPE_CHECKING:
    from gputui.collect.criapi.listing import CriList

#: The service, as the proto names it: package ``runtime.v1``, service ``RuntimeService``.
SERVICE = "/runtime.v1.RuntimeService/"
#: containerd's socket, in its state directory (``/run/containerd``, ``/run/k3s/containerd``).
SOCKET_NAME = "containerd.sock"
#: The largest reply read: an exec's output (containerd cuts each stream at 16 MiB itself).
MAX_REPLY_BYTES = 4 << 20
#: Fields decoded per reply: a container's status has a few dozen (mounts, labels, annotations).
MAX_FIELDS = 20_000
#: Seconds the decoding of one reply may take.
MAX_DECODE_S = 1.0
#: Seconds a ``ContainerStatus`` call may take (connect, request and reply).
STATUS_TIMEOUT_S = 2.0
#: Seconds an exec's reply may come after its own timeout: containerd kills the command at its
#: timeout (whole seconds) and then answers.
EXEC_GRACE_S = 2.0
#: The longest log path taken from a reply (a Linux path is at most 4096 bytes).
MAX_PATH_CHARS = 4096
#: What a failure says when grpcio is missing.
GRPC_FIX = (
    "Install gRPC for containerd's CRI API (exec and logs of a pod's container): "
    "pip install 'gputui[kubernetes]' (grpcio)."
)


#: A gRPC failure's kind, where a CRI error's differs: a closed client's calls are cancelled.
_KINDS = {"closed": "cancelled", "unimplemented": "error"}


class CriError(Exception):
    """A CRI call that gave no answer (one line).

    Attributes:
        kind: ``missing_dependency``, ``timeout``, ``unavailable``, ``too_large``,
            ``malformed``, ``not_found``, ``cancelled`` or ``error``.
        detail: The engine's own words, one line (empty when it said nothing).
    """

    def __init__(self, message: str, kind: str, detail: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.detail = detail


@record
class ExecOutput:
    """An ``ExecSyncResponse``.

    Attributes:
        stdout: Its standard output (at most what the reply held).
        stderr: Its standard error.
        exit_code: The command's exit status.
    """

    stdout: bytes
    stderr: bytes
    exit_code: int


def socket_path(state_dir: str | os.PathLike[str]) -> str | None:
    """The socket in containerd's state directory, or None when there is none (``stat`` only)."""
    path = Path(state_dir) / SOCKET_NAME
    try:
        return str(path) if stat.S_ISSOCK(os.stat(path).st_mode) else None
    except (OSError, ValueError):
        return None


def parse_exec(data: bytes, budget: Budget | None = None) -> ExecOutput:
    """An ``ExecSyncResponse``: ``stdout = 1`` (bytes), ``stderr = 2`` (bytes), ``exit_code = 3``.

    Raises:
        WireError: a known field of the wrong wire type, bytes that are not a message, or an
            exit code out of ``int32``'s range.
    """
    budget = budget if budget is not None else Budget(MAX_FIELDS, MAX_DECODE_S)
    stdout = stderr = b""
    code = 0
    for number, kind, value in fields(data, budget):
        if number in (1, 2):
            if kind != LENGTH:
                raise WireError("an output field is not bytes")
            if number == 1:
                stdout = bytes(message(value))
            else:
                stderr = bytes(message(value))
        elif number == 3:
            if kind != VARINT:
                raise WireError("the exit code is not a varint")
            code = signed(value, 32)
    return ExecOutput(stdout, stderr, code)


def parse_log_path(data: bytes, budget: Budget | None = None) -> str:
    """``ContainerStatusResponse.status`` (1) ``.log_path`` (15); empty when it names none.

    Raises:
        WireError: the status or the path is of the wrong wire type, or the path too long.
    """
    budget = budget if budget is not None else Budget(MAX_FIELDS, MAX_DECODE_S)
    path = ""
    for number, _kind, value in fields(data, budget):
        if number != 1:
            continue  # info (2): only with verbose, which is never asked
        for n, _k, v in fields(message(value), budget):
            if n == 15:
                path = text(v, MAX_PATH_CHARS)
    return path


class CriClient:
    """containerd's ``RuntimeService``: ``ExecSync`` and ``ContainerStatus``, bounded.

    Calls may run on several threads at once (an exec and a logs screen); :meth:`close`
    cancels every one in flight.

    Args:
        path: containerd's socket (``/run/containerd/containerd.sock``).
        max_reply_bytes: The largest reply read (grpcio refuses a larger one).
    """

    def __init__(self, path: str, *, max_reply_bytes: int = MAX_REPLY_BYTES) -> None:
        self.path = path
        self._rpc = UnixGrpcClient(path, max_reply_bytes=max_reply_bytes, max_send_bytes=1 << 20)

    def exec_sync(self, container_id: str, argv: Sequence[str], timeout_s: float) -> ExecOutput:
        """Run ``argv`` (no shell) in the container and wait for its output.

        containerd is given the timeout in whole seconds (at least 1) and kills the command
        there; this call waits :data:`EXEC_GRACE_S` beyond it for that answer, then gives up
        (cancelling the call, which also makes containerd kill the command).

        Raises:
            CriError: no answer (``timeout`` once the deadline passed), a refusal (the engine's
                words in ``detail``), or a malformed reply.
        """
        seconds = max(1, int(timeout_s))
        request = encode((1, container_id), *((2, arg) for arg in argv), (3, seconds))
        reply = self._call("ExecSync", request, max(timeout_s, 0.001) + EXEC_GRACE_S)
        try:
            return parse_exec(reply)
        except WireError as exc:
            raise CriError(f"malformed ExecSync reply: {exc}", "malformed") from exc

    def log_path(self, container_id: str, timeout_s: float = STATUS_TIMEOUT_S) -> str:
        """The container's log file, as ``ContainerStatus`` names it (empty when none).

        Raises:
            CriError: as :meth:`exec_sync`.
        """
        reply = self._call("ContainerStatus", encode((1, container_id)), timeout_s)
        try:
            return parse_log_path(reply)
        except WireError as exc:
            raise CriError(f"malformed ContainerStatus reply: {exc}", "malformed") from exc

    def _call(self, method: str, request: bytes, timeout_s: float) -> bytes:
        try:
            return self._rpc.call(SERVICE + method, request, timeout_s)
        except GrpcFailure as failure:
            raise self._failure(failure, method, timeout_s) from None

    def _failure(self, failure: GrpcFailure, method: str, timeout_s: float) -> CriError:
        shown = (failure.details or "")[:300]
        if failure.kind == "timeout":
            # containerd's own timeout of an exec names it ("timeout 1s exceeded"); gRPC's
            # deadline on this side says only "Deadline Exceeded".
            own = "timeout" in shown.lower()
            said = f"containerd: {shown}" if own else f"no answer within {timeout_s:.2g} s"
            return CriError(said, "timeout", shown)
        words = {
            "missing_dependency": f"grpcio is not installed: {GRPC_FIX}",
            "closed": "the CRI client is closed",
            "cancelled": "the CRI call was cancelled",
            "malformed": f"the {method} reply is not bytes",
            "too_large": (
                f"containerd's {method} reply is over {self._rpc.max_reply_bytes >> 20} MiB"
            ),
            "unavailable": f"containerd does not answer on {self.path}",
            "not_found": "containerd's CRI does not know this container",
            "unimplemented": (
                f"{self.path} serves no runtime.v1 CRI (its CRI plugin is off, or older than "
                "containerd 1.6)"
            ),
        }
        name = failure.code
        said = words.get(failure.kind, f"{name}: {shown}" if shown else name)
        return CriError(said, _KINDS.get(failure.kind, failure.kind), shown)

    def close(self) -> None:
        """Cancel every call in flight (from any thread) and close the channel."""
        self._rpc.close()

    def list_containers(
        self, timeout_s: float = STATUS_TIMEOUT_S, keep: Callable[[str], bool] | None = None
    ) -> CriList:
        """Every container the runtime keeps (``ListContainers``, no filter), bounded.

        Args:
            timeout_s: The deadline over connect, request and reply.
            keep: Which label and annotation keys to keep (None: all, up to the cap).

        Raises:
            CriError: as :meth:`exec_sync`.
        """
        from gputui.collect.criapi import listing  # the CRI's lists: runtime-neutral parsing

        reply = self._call("ListContainers", encode((1, b"")), timeout_s)
        try:
            return listing.parse_containers(reply, keep or (lambda _key: True))
        except WireError as exc:
            raise CriError(f"malformed ListContainers reply: {exc}", "malformed") from exc

    def list_pod_sandboxes(
        self, timeout_s: float = STATUS_TIMEOUT_S, keep: Callable[[str], bool] | None = None
    ) -> CriList:
        """Every pod sandbox the runtime keeps (``ListPodSandbox``, no filter), bounded.

        Raises:
            CriError: as :meth:`exec_sync`.
        """
        from gputui.collect.criapi import listing

        reply = self._call("ListPodSandbox", encode((1, b"")), timeout_s)
        try:
            return listing.parse_sandboxes(reply, keep or (lambda _key: True))
        except WireError as exc:
            raise CriError(f"malformed ListPodSandbox reply: {exc}", "malformed") from exc

    def list_container_stats(self, timeout_s: float = STATUS_TIMEOUT_S) -> CriList:
        """Every container's CPU and memory figures (``ListContainerStats``, no filter), bounded.

        Raises:
            CriError: as :meth:`exec_sync`.
        """
        from gputui.collect.criapi import listing

        reply = self._call("ListContainerStats", encode((1, b"")), timeout_s)
        try:
            return listing.parse_stats(reply)
        except WireError as exc:
            raise CriError(f"malformed ListContainerStats reply: {exc}", "malformed") from exc

    def version(self, timeout_s: float = STATUS_TIMEOUT_S) -> tuple[str, str]:
        """``(runtime_name, runtime_version)`` as ``Version`` answers (``cri-o``, ``1.30.4``).

        Raises:
            CriError: as :meth:`exec_sync`.
        """
        from gputui.collect.criapi import listing

        reply = self._call("Version", encode((1, "v1")), timeout_s)
        try:
            return listing.parse_version(reply)
        except WireError as exc:
            raise CriError(f"malformed Version reply: {exc}", "malformed") from exc
