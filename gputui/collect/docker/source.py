"""The Docker engine as a :class:`~gputui.collect.sources.ContainerSource` (named ``docker``).

This is the only module that imports ``docker``, and only for ``ssh://`` engines. Design, in
short:

* Reads go through :mod:`gputui.collect.docker.engine_api`, a lean standard-library client in
  which every request has an overall deadline and every reply a size bound, so a slow, stuck or
  hostile engine costs at most the deadline and bounded memory. ``ssh://`` endpoints, which it
  does not speak, go through the Docker SDK with the same deadlines.
* The client is created lazily in :meth:`DockerSource.read` (the collector thread), so building
  the source never blocks. Connection failures become a :class:`SourceStatus` and are retried
  with a back-off, so a dead engine does not cost a timeout on every refresh.
* The container set is one list plus one cached inspect per container, kept fresh by a thread
  reading the events stream; with nothing changing, :meth:`DockerSource.read` makes no API call.
* Container ids from the engine are used only when they are 64 lowercase hex digits.
* CPU and memory come from the containers' cgroup files, not from the stats API (see
  :mod:`gputui.collect.linux.cgroup_usage` for why), with the docker CLI's formulas.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from gputui.collect.docker import parse as dp
from gputui.collect.docker.endpoint import Endpoint as _Endpoint
from gputui.collect.docker.endpoint import (
    EndpointError,
    docker_cli_available,
    interactive_argv,
    resolve_endpoint,
    socket_peer_pid,
    unix_socket_answers,
    unix_socket_path,
)
from gputui.collect.docker.endpoint import one_line as _one_line
from gputui.collect.docker.engine_api import (
    LIFECYCLE_ACTIONS,
    MAX_EXEC_OUTPUT,
    MAX_INSPECT_BYTES,
    STOP_GRACE_S,
    EngineApi,
    EngineError,
    EngineReplyError,
    EngineReplyTooLarge,
    EngineSlow,
    EngineStatusError,
    ExecOutput,
    ExecState,
    NotFound,
    exec_state,
    read_multiplexed,
)
from gputui.collect.docker.logs import EngineLogReader, LogStreamError
from gputui.collect.linux.cgroup_usage import CgroupSampler, EarlyCgroupCpu
from gputui.collect.linux.container_top import ContainerTop
from gputui.collect.linux.engine_pids import EnginePids
from gputui.collect.owners import OwnerResolver, owner_label_keys
from gputui.collect.sources import ContainerCapabilities, ContainerSource
from gputui.model.containers import (
    ContainerDetails,
    ContainerInfo,
    ContainerProcesses,
    ContainerReading,
    EngineInfo,
    ExecResult,
)
from gputui.model.status import SourceStatus

_T = TypeVar("_T")

#: Seconds an exec's process that gputui stops gets between SIGTERM and SIGKILL, and again
#: after SIGKILL, before gputui says it may keep running.
EXEC_STOP_GRACE_S = 1.0
#: Seconds each engine call of stopping an exec may take (the exec's own deadline may be over).
_EXEC_STOP_CALL_S = 1.0
#: Seconds the connection that asks who listens on the engine's socket may take.
_PEER_TIMEOUT_S = 0.5

#: Events that change what inspect says about a container. ``exec_*`` events are left out on
#: purpose: every ``nvidia-smi`` exec would otherwise trigger a re-inspect.
EVENT_ACTIONS = (
    "create", "start", "restart", "die", "stop", "kill", "destroy", "rename",
    "pause", "unpause", "oom", "update", "health_status",
)  # fmt: skip
#: podman's names in its Docker-compatible events, as the Docker names they mean. podman
#: filters ``event=`` by its own names (``died``, ``remove``), so a Docker filter drops its
#: deaths and removals: a podman stream is filtered here instead.
PODMAN_EVENT_ACTIONS = {
    "died": "die", "exited": "die", "cleanup": "die", "remove": "destroy", "init": "start",
    "cleanup_failed": "die", "sync": "update",
}  # fmt: skip
_MIN_BACKOFF_S = 2.0
_MAX_BACKOFF_S = 10.0
#: podman pod names kept (more pods than a host runs; the cache starts again beyond).
MAX_PODS = 4096
#: More containers than one engine runs; a longer list is cut (the reply is bounded anyway).
MAX_CONTAINERS = 20_000
#: A container whose inspect reply is over the size cap is a stub from the list reply; the
#: inspect is tried again after this back-off (doubling up to the maximum), or on its events.
OVERSIZED_MIN_BACKOFF_S = 30.0
OVERSIZED_MAX_BACKOFF_S = 600.0
#: What a stub says about itself, in the tree, the Evidence view and the JSON report.
OVERSIZED_INSPECT = f"inspect reply over {MAX_INSPECT_BYTES >> 20} MiB: labels/GPU request unknown"
_OVERSIZED_FIX = (
    "The engine's description of these containers is larger than gputui reads (huge label "
    "sets or annotations): they are shown from the container list, without GPU request, "
    "runtime or environment. `docker inspect NAME | wc -c` shows the size."
)
#: Failure kinds after which a local socket that accepts again means "try at once".
_RECONNECT_AT_ONCE = ("not_found", "unreachable", "permission")
_SLOW_FIX = (
    "The Docker engine accepts connections but answers too slowly: check `docker info`, the "
    "engine's load and its log (journalctl -u docker); gputui keeps showing GPUs meanwhile."
)
_MALFORMED_FIX = (
    "The endpoint did not answer like a Docker engine: check that DOCKER_HOST or the docker "
    "context names a Docker engine (`docker info`)."
)


class _Stream(Protocol):
    def __iter__(self) -> Iterator[dict[str, Any]]: ...

    def close(self) -> None: ...


class _Api(Protocol):
    """What the source needs of a client: the lean one or the SDK adapter."""

    api_version: str | None

    def version(self, timeout: float | None = None) -> dict[str, Any]: ...

    def info(self, timeout: float | None = None) -> dict[str, Any]: ...

    def containers(
        self, filters: Mapping[str, Sequence[str]], timeout: float | None = None
    ) -> list[Any]: ...

    def inspect(self, container_id: str, timeout: float | None = None) -> dict[str, Any]: ...

    def events(self, filters: Mapping[str, Sequence[str]]) -> _Stream: ...

    def exec_create(self, container_id: str, argv: Sequence[str], timeout: float) -> str: ...

    def exec_run(self, exec_id: str, deadline: float, max_output: int) -> ExecOutput: ...

    def exec_exit_code(self, exec_id: str, timeout: float) -> int | None: ...

    def exec_inspect(self, exec_id: str, timeout: float) -> ExecState: ...

    def close(self) -> None: ...


class _LeanApi(EngineApi):
    """The standard-library client; it holds no connection between requests."""

    def close(self) -> None:
        """Nothing to release: every request used its own connection."""


class _SdkApi:
    """The Docker SDK behind the same calls, for ``ssh://`` engines the lean client cannot reach.

    The SDK only has a per-``recv`` timeout, so each call runs on a daemon thread and is given
    up at the deadline (the client is then closed, which ends the stuck call's connection).
    """

    def __init__(self, endpoint: _Endpoint, timeout: float) -> None:
        import docker  # only here: the lean client serves every other endpoint

        self.timeout = timeout
        self.api_version: str | None = None
        self._docker = docker
        self._url = endpoint.base_url
        # Building the client negotiates the API version (GET /version): done in version(),
        # under its deadline. Until then a client pinned to a version every engine speaks.
        self._client = self._new_client("1.24")

    def _new_client(self, version: str) -> Any:
        return self._docker.APIClient(
            base_url=self._url, version=version, timeout=max(1, math.ceil(self.timeout))
        )

    def _bounded(self, fn: Callable[[], _T], timeout: float | None, what: str) -> _T:
        limit = self.timeout if timeout is None else timeout
        box: list[Any] = []

        def run() -> None:
            try:
                box.append((True, fn()))
            except BaseException as exc:  # handed to the caller's thread below
                box.append((False, exc))

        worker = threading.Thread(target=run, name="gputui-docker-sdk", daemon=True)
        worker.start()
        worker.join(max(0.001, limit))
        if not box:
            with contextlib.suppress(Exception):
                self._client.close()
            raise EngineSlow(f"the Docker engine did not answer {what} within {limit:g} s")
        ok, value = box[0]
        if ok:
            return value  # type: ignore[no-any-return]
        errors = self._docker.errors
        if isinstance(value, errors.NotFound):
            raise NotFound(404, f"{what}: {_one_line(value)}") from value
        if isinstance(value, errors.APIError):
            raise EngineStatusError(value.status_code or 500, _one_line(value)) from value
        if isinstance(value, Exception) and not isinstance(value, OSError):
            raise EngineError(f"{type(value).__name__}: {_one_line(value)}") from value
        raise value

    def version(self, timeout: float | None = None) -> dict[str, Any]:
        data = self._bounded(self._client.version, timeout, "GET /version")
        if not isinstance(data, dict):
            raise EngineReplyError("reply to GET /version is not a JSON object")
        version = dp.as_text(data.get("ApiVersion"), 16)
        if version:
            self._client.close()
            self._client = self._new_client(version)
        self.api_version = version
        return data

    def info(self, timeout: float | None = None) -> dict[str, Any]:
        data = self._bounded(self._client.info, timeout, "GET /info")
        return data if isinstance(data, dict) else {}

    def containers(
        self, filters: Mapping[str, Sequence[str]], timeout: float | None = None
    ) -> list[Any]:
        def call() -> Any:
            return self._client.containers(all=True, filters=dict(filters))

        data = self._bounded(call, timeout, "GET /containers/json")
        if not isinstance(data, list):
            raise EngineReplyError("reply to GET /containers/json is not a list")
        return data

    def inspect(self, container_id: str, timeout: float | None = None) -> dict[str, Any]:
        def call() -> Any:
            return self._client.inspect_container(container_id)

        data = self._bounded(call, timeout, "GET /containers/{id}/json")
        if not isinstance(data, dict):
            raise EngineReplyError("reply to GET /containers/{id}/json is not a JSON object")
        return data

    def events(self, filters: Mapping[str, Sequence[str]]) -> _Stream:
        def call() -> Any:
            return self._client.events(filters=dict(filters), decode=True)

        stream: _Stream = self._bounded(call, None, "GET /events")
        return stream

    def exec_create(self, container_id: str, argv: Sequence[str], timeout: float) -> str:
        def call() -> Any:
            return self._client.exec_create(container_id, list(argv))

        reply = self._bounded(call, timeout, "POST /containers/{id}/exec")
        exec_id = reply.get("Id") if isinstance(reply, dict) else None
        if not dp.valid_id(exec_id):
            raise EngineReplyError("reply to POST /containers/{id}/exec has no valid exec id")
        return str(exec_id)

    def exec_run(self, exec_id: str, deadline: float, max_output: int) -> ExecOutput:
        def call() -> Any:
            return self._client.exec_start(exec_id, socket=True)

        handle = self._bounded(call, deadline - time.monotonic(), "POST /exec/{id}/start")
        sock = getattr(handle, "_sock", handle)

        def recv(size: int) -> bytes:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise EngineSlow("deadline passed")
            sock.settimeout(remaining)
            try:
                data: bytes = sock.recv(size)
            except TimeoutError as exc:
                raise EngineSlow("deadline passed") from exc
            return data

        try:
            return read_multiplexed(recv, max_output)
        finally:
            with contextlib.suppress(Exception):
                handle.close()

    def exec_exit_code(self, exec_id: str, timeout: float) -> int | None:
        def call() -> Any:
            return self._client.exec_inspect(exec_id)

        reply = self._bounded(call, timeout, "GET /exec/{id}/json")
        if not isinstance(reply, dict) or reply.get("Running"):
            return None
        return dp.as_int(reply.get("ExitCode"), -1, dp.MAX_INT32)

    def exec_inspect(self, exec_id: str, timeout: float) -> ExecState:
        def call() -> Any:
            return self._client.exec_inspect(exec_id)

        return exec_state(self._bounded(call, timeout, "GET /exec/{id}/json"))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._client.close()


def _rootless_uid(engine: EngineInfo, url: str | None) -> int | None:
    """The user of a rootless engine (its socket's owner); None for a rootful one.

    Both must hold: a socket owned by a user and an engine that says it is rootless. A user's
    socket alone may be a proxy to a rootful engine, whose containers are not theirs.
    """
    path = unix_socket_path(url)
    if not engine.rootless or path is None:
        return None
    try:
        uid = os.stat(path).st_uid
    except OSError:
        return None
    return uid or None


def _make_api(endpoint: _Endpoint, timeout: float) -> _Api:
    """The lean client where it can reach the engine, else the SDK adapter (``ssh://``)."""
    if EngineApi.supports(endpoint.base_url):
        return _LeanApi(endpoint, timeout)
    return _SdkApi(endpoint, timeout)


def _status_for(exc: BaseException, url: str | None = None) -> SourceStatus:
    """A failed engine call as a one-line :class:`SourceStatus` with a fix."""
    if isinstance(exc, EngineSlow):
        return SourceStatus("docker", False, _one_line(exc), "slow", _SLOW_FIX)
    if isinstance(exc, EngineReplyError):
        return SourceStatus("docker", False, _one_line(exc), "error", _MALFORMED_FIX)
    kind, fix = dp.classify_connect_error(f"{type(exc).__name__}: {exc}")
    return SourceStatus("docker", False, _sentence(exc, url), kind, fix)


def _sentence(exc: BaseException, url: str | None) -> str:
    """A connection failure as a sentence naming the endpoint, not ``[Errno 2] ...``."""
    where = unix_socket_path(url) or url or "the configured endpoint"
    if isinstance(exc, FileNotFoundError):
        return f"no Docker socket at {where}"
    if isinstance(exc, ConnectionRefusedError):
        return f"nothing accepts connections at {where}"
    if isinstance(exc, PermissionError):
        return f"no permission to use {where}"
    if isinstance(exc, OSError) and exc.strerror:
        return f"cannot reach the Docker engine at {where}: {exc.strerror.lower()}"
    return _one_line(exc)


#: What the Docker engine offers: everything; exec on the terminal runs the docker CLI. An
#: ``ssh://`` engine's logs and actions are refused by the calls themselves, with the reason.
DOCKER_CAPABILITIES = ContainerCapabilities(
    exec=True, interactive_exec=True, logs=True, lifecycle=True, inspect=True
)
#: The same without the docker CLI on PATH.
DOCKER_WITHOUT_CLI = dataclasses.replace(
    DOCKER_CAPABILITIES, interactive_exec=False, note="the docker CLI is not on PATH"
)
#: podman's service offers the same; exec on the terminal runs the podman CLI.
PODMAN_CAPABILITIES = DOCKER_CAPABILITIES
PODMAN_WITHOUT_CLI = dataclasses.replace(
    DOCKER_CAPABILITIES, interactive_exec=False, note="the podman CLI is not on PATH"
)

#: The fixes a podman source's failures get, by kind (podman has no dockerd, no docker group).
PODMAN_FIXES = {
    "permission": "The socket is its owner's: run gputui as that user or with sudo (a rootless "
    "user's podman service is `systemctl --user start podman.socket`).",
    "not_found": "No podman service at that socket: start it (sudo systemctl start "
    "podman.socket; a user's own: systemctl --user start podman.socket), or give its address "
    "with --engine podman=unix:///PATH.",
    "unreachable": "The podman service does not answer: check `systemctl status podman.socket` "
    "(or `podman system service --time=0` for a one-off service).",
    "slow": "The podman service answers slowly (it starts podman for each connection; /info "
    "takes seconds): `podman info` shows why; GPU data keeps updating meanwhile.",
    "error": "Check `podman --url URL info` against the same socket.",
}


def _as_podman(status: SourceStatus) -> SourceStatus:
    """A failure status in podman's words: no Docker daemon, docker group or daemon.json."""
    error = (status.error or "").replace("Docker engine", "podman service")
    error = error.replace("no Docker socket", "no podman socket")
    fix = PODMAN_FIXES.get(status.kind or "error", PODMAN_FIXES["error"])
    return dataclasses.replace(status, error=error or None, fix=fix)


class DockerSource(ContainerSource):
    """Containers, engine facts, exec, logs and stop/start/restart/pause, from a Docker engine.

    podman's Docker-compatible API service is read by the same source: what answers is told
    from ``/version`` (``EngineInfo.product``), and a podman engine gets podman's event names,
    its own inspect for the runtime and CDI request, and podman's words in every status.

    Attributes:
        name: ``docker`` (or the name it was given: ``podman``, ``docker-alice``): the key of
            its status in the snapshot and the reports.
        api_calls: Docker API requests made so far (read, events, exec), for tests and benchmarks.
    """

    name = "docker"

    def __init__(
        self,
        base_url: str | None = None,
        timeout: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        *,
        cgroup_root: str | os.PathLike[str] = "/sys/fs/cgroup",
        proc_root: str | os.PathLike[str] = "/proc",
        label: str | None = None,
        owner_labels: Sequence[str] = (),
        name: str = "docker",
        product: str | None = None,
        cpu_settle_s: float = 0.0,
        cpu_start: EarlyCgroupCpu | None = None,
    ) -> None:
        """Remember the settings; no I/O happens until the first :meth:`read`.

        Args:
            base_url: Engine URL; None honours ``DOCKER_HOST``, then the active docker context.
            timeout: Seconds one :meth:`read` may spend on the engine, all its requests together.
            clock: Monotonic clock, injectable for back-off tests.
            cgroup_root: Where the host's cgroup hierarchy is mounted (tests point it elsewhere).
            proc_root: Where the host's ``/proc`` is.
            label: Only watch containers carrying this label (``key`` or ``key=value``), as
                ``docker ps --filter label=...`` does; None watches every container.
            owner_labels: Labels naming a container's owner, strongest first (read before
                ``gputui.owner``).
            name: The source's name (its key in the snapshot).
            product: What is expected at the endpoint (``podman`` for a podman socket) until
                the engine's ``/version`` says what it is.
            cpu_settle_s: For a single collection: seconds between the two cgroup samples a
                container's first CPU % needs (see ``CgroupSampler.sample``).
            cpu_start: A one-shot's containers' CPU counters read at start-up, the first of
                those two samples for each container they cover.
        """
        self.name = name
        self._cpu_settle_s = cpu_settle_s
        self._cpu_start = cpu_start
        self._product = product or "docker"
        self.api_calls = 0
        self._cli: bool | None = None  # whether the engine's CLI is on PATH, once looked for
        self._cli_of = ""  # which CLI that was (docker or podman)
        self._label_filter: dict[str, list[str]] = {"label": [label]} if label else {}
        self._owners = OwnerResolver(owner_label_keys(owner_labels))
        self._engine_uid: int | None = None  # a rootless engine's user, from its socket
        self._base_url = base_url
        self._timeout = timeout
        self._clock = clock
        self._sampler = CgroupSampler(Path(cgroup_root), Path(proc_root))
        #: Reads a container's processes for the inspect screen (made on its first use).
        self._top_roots = (Path(proc_root), Path(cgroup_root))
        self._top: ContainerTop | None = None
        #: The engine's PIDs as host PIDs (an engine in a container has PIDs of its own).
        self._pids = EnginePids(proc_root, None)
        self._lock = threading.Lock()  # guards the fields the events thread writes
        self._api: _Api | None = None
        self._endpoint: _Endpoint | None = None
        self._engine: EngineInfo | None = None
        self._api_version: str | None = None
        self._failure: SourceStatus | None = None
        self._last_url: str | None = None  # the endpoint of the last connection attempt
        self._next_retry = 0.0
        self._backoff = _MIN_BACKOFF_S
        self._cache: dict[str, ContainerInfo] = {}
        #: Stubbed containers (inspect reply over the cap): when to inspect again, the back-off.
        self._oversized: dict[str, tuple[float, float]] = {}
        self._dirty: set[str] = set()
        self._gone: set[str] = set()
        self._need_resync = True
        self._stream_ok = False
        self._generation = 0
        self._stop_events = threading.Event()
        self._events_stream: Any = None
        self._events_thread: threading.Thread | None = None
        #: podman pods' names by pod id (asked once each; cleared beyond MAX_PODS).
        self._pod_names: dict[str, str | None] = {}
        #: Execs started and not yet over: exec id -> container id (guarded by _lock).
        self._live_execs: dict[str, str] = {}

    def capabilities(self) -> ContainerCapabilities:
        """Exec, logs and lifecycle; exec on the terminal while the engine's CLI is on PATH.

        The CLI is looked for once (on the read thread): PATH does not change under gputui.
        """
        podman = self._product == "podman"
        if self._cli is None or self._cli_of != self._product:
            self._cli = shutil.which("podman") is not None if podman else docker_cli_available()
            self._cli_of = self._product
        if podman:
            return PODMAN_CAPABILITIES if self._cli else PODMAN_WITHOUT_CLI
        return DOCKER_CAPABILITIES if self._cli else DOCKER_WITHOUT_CLI

    def slow_status(self, waited_s: float) -> SourceStatus:
        """The engine has not answered a read for ``waited_s`` seconds (it goes on)."""
        if self._product == "podman":
            return SourceStatus(
                self.name,
                ok=False,
                error=f"the podman service has not answered for {waited_s:.0f} s; "
                "showing the containers last seen",
                kind="slow",
                fix=PODMAN_FIXES["slow"],
            )
        return SourceStatus(
            self.name,
            ok=False,
            error=f"the Docker engine has not answered for {waited_s:.0f} s; "
            "showing the containers last seen",
            kind="slow",
            fix="Check `docker info`, the engine's load and its log (journalctl -u docker); "
            "GPU data keeps updating meanwhile.",
        )

    # --- connection ------------------------------------------------------------------------

    def _count(self, n: int = 1) -> None:
        with self._lock:
            self.api_calls += n

    def _resolve(self) -> _Endpoint:
        """Endpoint from the argument, ``DOCKER_HOST`` or the docker CLI context (local files)."""
        return resolve_endpoint(self._base_url)

    def _connect(self, deadline: float) -> SourceStatus | None:
        """Create the client, read engine facts, start the events thread; a status on failure."""
        api: _Api | None = None
        try:
            endpoint = self._resolve()
            self._last_url = endpoint.base_url
            api = _make_api(endpoint, self._timeout)
            self._count()
            version = api.version(timeout=_remaining(deadline))
            self._count()
            info = api.info(timeout=_remaining(deadline))
        except EndpointError as exc:
            kind, fix = dp.classify_connect_error(f"ContextNotFound: {exc}")
            return SourceStatus(self.name, ok=False, error=_one_line(exc), kind=kind, fix=fix)
        except Exception as exc:  # any failure to connect is a status, never an exception
            if api is not None:
                api.close()
            return _status_for(exc, self._last_url)
        self._api, self._endpoint = api, endpoint
        self._api_version = api.api_version
        self._engine = dp.parse_engine(
            info, version, endpoint.base_url, endpoint.context, self._api_version
        )
        self._engine_uid = _rootless_uid(self._engine, endpoint.base_url)
        self._product = self._engine.product or self._product
        self._pids = self._engine_pids(endpoint.base_url, deadline)
        self._cache.clear()
        self._oversized.clear()
        self._sampler.clear()
        self._start_events(api, deadline)
        return None

    def _engine_pids(self, url: str, deadline: float) -> EnginePids:
        """The engine's PID namespace, from the process that listens on its socket.

        An engine inside a container (Docker under systemd in a podman container) names PIDs of
        that container's namespace: ``State.Pid`` is not a host PID there. A remote engine's
        PIDs are another host's; they are taken as they are (and not read from this ``/proc``).
        """
        peer = socket_peer_pid(url, min(_PEER_TIMEOUT_S, _remaining(deadline)))
        return EnginePids(self._top_roots[0], peer)

    def _teardown(self) -> None:
        """Stop the events thread and drop the client (idempotent, never waits long)."""
        with self._lock:
            self._generation += 1
            stream, self._events_stream = self._events_stream, None
            self._stream_ok = False
            self._need_resync = True
        self._stop_events.set()
        if stream is not None:
            with contextlib.suppress(Exception):  # already dead: closing is best effort
                stream.close()
        if self._events_thread is not None:
            # The stream's socket was shut down, so the thread ends at once; it is a daemon
            # thread, so even one stuck elsewhere cannot keep gputui from exiting.
            self._events_thread.join(timeout=1.0)
            self._events_thread = None
        if self._api is not None:
            self._api.close()
            self._api = None

    def close(self) -> None:
        """Stop the execs still running, the events thread, and close the client (idempotent).

        A command gputui started in a container must not outlive gputui: each running exec is
        stopped (bounded: see :meth:`_stop_exec`) before the client goes.
        """
        with self._lock:
            live = dict(self._live_execs)
        endpoint = self._endpoint
        if live and endpoint is None:
            with contextlib.suppress(Exception):  # a broken context: nothing could have run
                endpoint = self._resolve()
        if live and endpoint is not None:
            api = _make_api(endpoint, self._timeout)
            try:
                for exec_id, container_id in live.items():
                    self._stop_exec(api, exec_id, container_id)
            finally:
                api.close()
        self._teardown()

    def _fail(self, status: SourceStatus) -> ContainerReading:
        self._teardown()
        status = dataclasses.replace(status, name=self.name)
        if self._product == "podman":
            status = _as_podman(status)
        self._failure = status
        self._next_retry = self._clock() + self._backoff
        self._backoff = min(self._backoff * 2, _MAX_BACKOFF_S)
        return ContainerReading(status=status, engine=None)

    # --- events ----------------------------------------------------------------------------

    def _start_events(self, api: _Api, deadline: float) -> None:
        with self._lock:
            self._generation += 1
            generation = self._generation
        self._stop_events = threading.Event()
        subscribed = threading.Event()
        self._events_thread = threading.Thread(
            target=self._events_loop,
            args=(api, generation, self._stop_events, subscribed),
            name="gputui-docker-events",
            daemon=True,
        )
        self._events_thread.start()
        # Subscribe before the first list, so no change between list and subscription is lost;
        # an engine slow to subscribe only costs a full list on the next read.
        subscribed.wait(_remaining(deadline))

    def _events_loop(
        self,
        api: _Api,
        generation: int,
        stop: threading.Event,
        subscribed: threading.Event,
    ) -> None:
        backoff = 0.5
        filters: dict[str, list[str]] = {"type": ["container"], **self._label_filter}
        if self._product != "podman":
            filters["event"] = list(EVENT_ACTIONS)
        while not stop.is_set():
            try:
                self._count()
                stream = api.events(filters)
            except Exception:  # engine gone: read() notices through its own list call
                subscribed.set()
                stop.wait(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF_S)
                continue
            with self._lock:
                if generation != self._generation:
                    stream.close()
                    return
                self._events_stream = stream
                self._stream_ok = True
                # Events may have been missed while disconnected: one full list on next read.
                self._need_resync = True
            subscribed.set()
            backoff = 0.5
            try:
                for event in stream:
                    self._on_event(generation, event)
            except Exception:  # disconnect, close() or a malformed event: reconnect below
                pass
            with contextlib.suppress(Exception):
                stream.close()
            with self._lock:
                if generation == self._generation:
                    self._stream_ok = False
                    self._events_stream = None
            if not stop.is_set():
                stop.wait(backoff)

    def _on_event(self, generation: int, event: object) -> None:
        event = dp.as_dict(event)
        action = dp.as_text(event.get("Action"), 64) or dp.as_text(event.get("status"), 64) or ""
        action = action.split(":", 1)[0]
        action = PODMAN_EVENT_ACTIONS.get(action, action)
        cid = dp.as_dict(event.get("Actor")).get("ID") or event.get("id")
        if not dp.valid_id(cid) or action not in EVENT_ACTIONS:
            return
        assert isinstance(cid, str)
        with self._lock:
            if generation != self._generation:
                return
            if action == "destroy":
                self._gone.add(cid)
                self._dirty.discard(cid)
            else:
                self._dirty.add(cid)
                self._gone.discard(cid)

    # --- read ------------------------------------------------------------------------------

    def read(self) -> ContainerReading:
        """The current container set with CPU/memory; never raises.

        Takes at most about ``timeout`` seconds, however slow the engine: every request shares
        the read's deadline, and inspects that do not fit are left for the next read.

        Returns:
            A reading whose status says whether the engine answered (with a fix text if not).
        """
        try:
            return self._read(time.monotonic() + self._timeout)
        except Exception as exc:  # the boundary: whatever happened is a status, not a traceback
            status = SourceStatus(
                self.name,
                False,
                f"unexpected {type(exc).__name__}: {_one_line(exc)}",
                "error",
                "Check `docker info` with the same DOCKER_HOST / docker context.",
            )
            return self._fail(status)

    def _read(self, deadline: float) -> ContainerReading:
        if self._api is None:
            failure = self._failure
            if (
                failure is not None
                and self._clock() < self._next_retry
                and not (failure.kind in _RECONNECT_AT_ONCE and unix_socket_answers(self._last_url))
            ):
                return ContainerReading(status=failure)
            failure = self._connect(deadline)
            if failure is not None:
                return self._fail(failure)
        elif self._local() and not unix_socket_answers(self._last_url):
            # With nothing changing a read makes no API call, so a stopped engine would look
            # fine until the events thread saw its stream end; a connect() to the local socket
            # (no API call, tens of microseconds) tells at once.
            message = f"the Docker engine at {self._last_url} does not accept connections"
            kind, fix = dp.classify_connect_error(f"ConnectionRefusedError: {message}")
            return self._fail(SourceStatus(self.name, False, message, kind, fix))
        try:
            self._sync(deadline)
        except (EngineError, OSError) as exc:
            return self._fail(_status_for(exc, self._last_url))
        self._failure = None
        self._backoff = _MIN_BACKOFF_S
        containers = self._with_usage(sorted(self._cache.values(), key=lambda c: c.name))
        return ContainerReading(self._ok_status(), tuple(containers), self._engine)

    def _ok_status(self) -> SourceStatus:
        """``ok``, or ``ok`` with a note naming the containers shown as stubs (never silent)."""
        stubs = sorted(c.name for c in self._cache.values() if c.inspect_problem)
        if not stubs:
            return SourceStatus(self.name, ok=True)
        named = ", ".join(stubs[:3]) + (f" and {len(stubs) - 3} more" if len(stubs) > 3 else "")
        noun = "container" if len(stubs) == 1 else "containers"
        error = f"{len(stubs)} {noun} shown from the list only ({named}): {OVERSIZED_INSPECT}"
        return SourceStatus(self.name, True, error, "partial", _OVERSIZED_FIX)

    def _sync(self, deadline: float) -> None:
        """Apply events since the last read; list everything only when the stream was down."""
        assert self._api is not None
        api = self._api
        with self._lock:
            resync = self._need_resync or not self._stream_ok
            self._need_resync = False
            dirty, self._dirty = self._dirty, set()
            gone, self._gone = self._gone, set()
        for cid in gone:
            self._forget(cid)
        if resync:
            # State and name from the list tell which cached inspects went stale while no
            # events arrived; re-inspecting all of them would cost one call per container.
            self._count()
            try:
                entries = api.containers(self._label_filter, timeout=_remaining(deadline))
            except BaseException:
                with self._lock:  # nothing was applied: the next read must list again
                    self._need_resync = True
                    self._dirty |= dirty
                raise
            listed = dict(
                parsed
                for entry in entries[:MAX_CONTAINERS]
                if (parsed := dp.parse_list_entry(entry)) is not None
            )
            for cid in [c for c in self._cache if c not in listed]:
                self._forget(cid)
            dirty |= {
                cid
                for cid, seen in listed.items()
                if cid not in self._cache
                or seen != (self._cache[cid].status, self._cache[cid].name)
            }
        now = self._clock()
        dirty |= {cid for cid, (due, _) in self._oversized.items() if now >= due}
        self._inspect_all(api, dirty, deadline)

    def _inspect_all(self, api: _Api, dirty: set[str], deadline: float) -> None:
        """Inspect the changed containers, within the read's deadline; the rest wait a read."""
        retry: set[str] = set()
        done = 0
        pending = sorted(dirty)
        for index, cid in enumerate(pending):
            if time.monotonic() >= deadline and done:
                retry.update(pending[index:])
                break
            try:
                self._count()
                data = api.inspect(cid, timeout=_remaining(deadline))
            except NotFound:
                self._forget(cid)
                continue
            except EngineReplyTooLarge:
                # Legal but huge (label sets, annotations): a stub keeps it visible, and its
                # processes keep their container; retried on a back-off, not every read.
                done += 1
                self._stub(api, cid, deadline)
                continue
            except EngineSlow:
                if not done:  # not one inspect fits: the engine is too slow to use
                    with self._lock:
                        self._dirty |= set(pending[index:]) | retry
                    raise
                retry.update(pending[index:])
                break
            except (EngineStatusError, EngineReplyError):
                # One container the engine cannot describe (a 500, a malformed payload) must
                # not take the whole source down: keep what we had and try it again next read.
                retry.add(cid)
                continue
            done += 1
            info = dp.parse_inspect(data)
            parent = dp.cgroup_parent(data)
            facts = dp.owner_facts(data, self._owners.label_keys)
            del data  # holds Config.Env: never keep it past parsing
            if self._product == "podman" and info.id == cid:
                info = self._podman_facts(api, info, deadline)
            if info.id != cid:
                # A payload describing another (or no valid) id is not this container's.
                retry.add(cid)
                continue
            if info.pid is not None and self._pids.depth:
                # Never keep an engine's PID as a host PID: /proc/<it> is another process.
                info = dataclasses.replace(info, pid=self._pids.host_pid(info.pid, cid))
            owner = self._owners.resolve(
                facts, engine_uid=self._engine_uid, budget_s=_remaining(deadline)
            )
            self._cache[cid] = dataclasses.replace(info, owner=owner)
            self._oversized.pop(cid, None)
            self._sampler.inspected(cid, parent)
        if retry:
            with self._lock:
                self._dirty |= retry

    def _podman_facts(self, api: _Api, info: ContainerInfo, deadline: float) -> ContainerInfo:
        """What only podman's own inspect says (runtime, CDI request); ``info`` if unread."""
        libpod: dict[str, Any] = {}
        if isinstance(api, EngineApi):  # the SDK adapter (ssh://) has no libpod call
            try:
                self._count()
                libpod = api.libpod_inspect(info.id, timeout=_remaining(deadline))
            except (EngineError, OSError):
                libpod = {}  # the compatible inspect's facts stand; ``oci`` becomes the default
        default = self._engine.default_runtime if self._engine else None
        result = dp.podman_facts(info, libpod, default)
        pod_id = libpod.get("Pod")
        del libpod  # holds Config.Env too
        if isinstance(api, EngineApi) and dp.valid_id(pod_id) and result.k8s_pod is None:
            assert isinstance(pod_id, str)
            pod = self._pod_name(api, pod_id, deadline)
            if pod:
                result = dataclasses.replace(result, k8s_pod=pod)
        return result

    def _pod_name(self, api: EngineApi, pod_id: str, deadline: float) -> str | None:
        """A podman pod's name, asked once per pod (a few pods; the cache is bounded)."""
        if pod_id in self._pod_names:
            return self._pod_names[pod_id]
        try:
            self._count()
            reply = api.libpod_pod(pod_id, timeout=_remaining(deadline))
        except (EngineError, OSError):
            return None  # asked again at the container's next inspect
        name = dp.as_text(reply.get("Name"), dp.MAX_NAME_CHARS) or None
        if len(self._pod_names) >= MAX_PODS:
            self._pod_names.clear()
        self._pod_names[pod_id] = name
        return name

    def _stub(self, api: _Api, cid: str, deadline: float) -> None:
        """Cache a stub for a container whose inspect reply is over the cap (from a list call).

        The list entry of one container (filtered by id) gives its name, image, state and
        labels; if even that cannot be read, the stub is named by its short id.
        """
        entry: object = None
        try:
            self._count()
            entries = api.containers(
                {**self._label_filter, "id": [cid]}, timeout=_remaining(deadline)
            )
        except (EngineError, OSError):
            entries = None
        if entries is not None:
            entry = next((e for e in entries[:16] if dp.as_dict(e).get("Id") == cid), None)
            if entry is None:  # no longer listed: gone between its event and now
                self._forget(cid)
                return
        stub = dp.parse_list_stub(entry, OVERSIZED_INSPECT) if entry is not None else None
        if stub is None:
            known = self._cache.get(cid)
            stub = dataclasses.replace(known, inspect_problem=OVERSIZED_INSPECT) if known else None
        if stub is None:
            stub = ContainerInfo(cid, cid[:12], "", "unknown", inspect_problem=OVERSIZED_INSPECT)
        self._cache[cid] = stub
        self._sampler.inspected(cid, None)
        _, backoff = self._oversized.get(cid, (0.0, OVERSIZED_MIN_BACKOFF_S / 2))
        backoff = min(backoff * 2, OVERSIZED_MAX_BACKOFF_S)
        self._oversized[cid] = (self._clock() + backoff, backoff)

    def _forget(self, cid: str) -> None:
        self._cache.pop(cid, None)
        self._oversized.pop(cid, None)
        self._sampler.forget(cid)

    # --- CPU and memory --------------------------------------------------------------------

    def _with_usage(self, containers: list[ContainerInfo]) -> list[ContainerInfo]:
        """Add CPU %, memory and throttling from the cgroup files (local engines only)."""
        if self._engine is None or not self._local():
            return containers
        return self._sampler.sample(
            containers, self._engine, settle_s=self._cpu_settle_s, start=self._cpu_start
        )

    def tracked_ids(self) -> dict[str, frozenset[str]]:
        """The container ids each cache holds, by cache (for leak checks: churn tests, soaks).

        Every one must lose a container's id soon after the container is gone.
        """
        with self._lock:
            dirty, gone = frozenset(self._dirty), frozenset(self._gone)
        return {
            "inspect": frozenset(self._cache),
            "oversized": frozenset(self._oversized),
            "cgroup_parent": frozenset(self._sampler.parent),
            "cgroup_dirs": frozenset(self._sampler.dirs),
            "cpu_prev": frozenset(self._sampler.cpu_prev),
            "cgroup_last": frozenset(self._sampler.last),
            "cgroup_order": frozenset(self._sampler.order),
            "cgroup_files": frozenset(self._sampler.files.owners()) - {"host"},
            "dirty": dirty,
            "gone": gone,
        }

    def _local(self) -> bool:
        url = self._endpoint.base_url if self._endpoint else ""
        return url.startswith(("unix://", "http+unix://"))

    # --- exec ------------------------------------------------------------------------------

    def exec(self, container_id: str, argv: Sequence[str], timeout_s: float) -> ExecResult:
        """Run ``argv`` (no shell) in a running container, bounded by ``timeout_s``.

        Runs on the calling thread and returns by the deadline (plus the bounded stop below), its
        connection closed: nothing keeps reading after it. At most
        :data:`~gputui.collect.docker.engine_api.MAX_EXEC_OUTPUT` bytes of output are kept;
        reading stops there. When the output is cut or the deadline passes while the command
        still runs, its process is stopped (the engine has no call for it: gputui signals the
        host PID the engine names, see :meth:`_stop_exec`); so is any exec still running when
        the source is closed.

        Args:
            container_id: The container's full id (64 lowercase hex digits).
            argv: The command and its arguments.
            timeout_s: Seconds it may take, start to end.

        Returns:
            Exit code and decoded output, or an explanation in ``error``.
        """
        args = tuple(argv)
        started = time.monotonic()
        deadline = started + max(0.0, timeout_s)
        if not dp.valid_id(container_id):
            return ExecResult(args, None, error="not a container id (64 hex digits expected)")
        if self._api is None and self._failure is not None and self._clock() < self._next_retry:
            return ExecResult(args, None, error=f"Docker engine unreachable: {self._failure.error}")
        known = self._cache.get(container_id)
        label = known.name if known else container_id[:12]
        try:
            endpoint = self._endpoint or self._resolve()
            api = _make_api(endpoint, self._timeout)
        except Exception as exc:  # a broken context or an unusable endpoint
            return ExecResult(args, None, error=f"Docker engine unreachable: {_one_line(exc)}")
        try:
            return self._exec(api, container_id, args, label, deadline, started, timeout_s)
        finally:
            api.close()

    def _exec(
        self,
        api: _Api,
        container_id: str,
        argv: tuple[str, ...],
        label: str,
        deadline: float,
        started: float,
        timeout_s: float,
    ) -> ExecResult:
        name = argv[0] if argv else "command"
        exec_id: str | None = None

        def timed_out(stopped: str | None) -> ExecResult:
            return ExecResult(
                argv,
                None,
                timed_out=True,
                error=f"{name} did not finish within {timeout_s:g} s; {_fate(stopped)}",
            )

        try:
            try:
                self._count()
                exec_id = api.exec_create(container_id, argv, _remaining(deadline))
            except NotFound:
                return ExecResult(argv, None, error=f"no such container: {label}")
            except EngineStatusError as exc:
                if exc.status != 409:
                    raise
                self._count()
                state = dp.as_dict(api.inspect(container_id, _remaining(deadline)).get("State"))
                status = dp.as_text(state.get("Status"), 32) or "unknown"
                return ExecResult(argv, None, error=f"container {label} is not running ({status})")
            with self._lock:
                self._live_execs[exec_id] = container_id
            self._count()
            output = api.exec_run(exec_id, deadline, MAX_EXEC_OUTPUT)
            code = None
            if not output.timed_out:
                self._count()
                # A command whose output was cut may still run: its exit code is then None.
                code = api.exec_exit_code(exec_id, max(0.5, min(2.0, _remaining(deadline))))
        except EngineSlow:
            fate = None if exec_id is None else self._stop_exec(api, exec_id, container_id)
            return _with_duration(timed_out(fate), started)
        except EngineError as exc:
            return _with_duration(
                ExecResult(argv, None, error=f"exec failed: {_one_line(exc)}"), started
            )
        except OSError as exc:
            return _with_duration(
                ExecResult(argv, None, error=f"Docker engine unreachable: {_one_line(exc)}"),
                started,
            )
        finally:
            # From here this thread stops what still runs; close() no longer needs to.
            with self._lock:
                self._live_execs.pop(exec_id or "", None)
        stdout = output.stdout.decode("utf-8", errors="replace")
        stderr = output.stderr.decode("utf-8", errors="replace")
        stopped: str | None = None
        if output.timed_out or (output.cut and code is None):
            stopped = self._stop_exec(api, exec_id, container_id)
        if output.timed_out:
            result = timed_out(stopped)
            result = ExecResult(argv, None, stdout, stderr, error=result.error, timed_out=True)
        elif output.cut:
            fate = _fate(stopped) if code is None else f"it ended (exit {code})"
            result = ExecResult(
                argv,
                code,
                stdout,
                stderr,
                error=f"{name} printed more than {MAX_EXEC_OUTPUT >> 20} MiB: the output was cut "
                f"there; {fate}",
                output_cut_bytes=MAX_EXEC_OUTPUT,
            )
        else:
            result = ExecResult(
                argv, code, stdout, stderr, error=dp.exec_error(argv, code, stdout + stderr)
            )
        return _with_duration(result, started)

    def _stop_exec(self, api: _Api, exec_id: str, container_id: str) -> str | None:
        """Stop the process of an exec that still runs: SIGTERM, then SIGKILL after a grace.

        Docker has no call to stop an exec, but names its process's PID. That PID is signalled
        through the project's signal path (``ProcSource.send_signal``: argv-free ``pidfd``
        signals, refused outside the host PID namespace, for PID 1, gputui itself, kernel
        threads), and only while it is still the exec's process: the engine says the exec runs
        with that PID, the process's cgroup names the exec's container, and its start time
        (read once, before the first signal) is checked again at each signal.

        Returns:
            None when it no longer runs (stopped, or it had ended); else why it may keep
            running (a remote engine, a refusal, still alive after SIGKILL).
        """
        with self._lock:
            self._live_execs.pop(exec_id, None)
        try:
            url = (self._endpoint or self._resolve()).base_url
        except Exception:  # a broken context: the exec could not have run either
            url = ""
        if not url.startswith(("unix://", "http+unix://")):
            return "the engine is not on this machine, so its PIDs are not gputui's to signal"
        try:
            state = api.exec_inspect(exec_id, _EXEC_STOP_CALL_S)
        except (EngineError, OSError) as exc:
            return f"cannot ask the engine about it: {_one_line(exc)}"
        if not state.running:
            return None
        pid = state.pid
        if pid is None or state.container_id not in (None, container_id):
            return "the engine names no PID of it in this container"
        pid = self._pids.host_pid(pid, container_id)
        if pid is None:
            return (
                f"the engine names it PID {state.pid} of its own PID namespace, and no process "
                "of this host is that one"
            )
        from gputui.collect.linux.proc_reader import ProcSource  # only when an exec must stop

        procs = ProcSource()
        try:
            info = procs.read([pid]).get(pid)
            if info is None or not info.exists:
                return None
            if info.container_id != container_id or info.start_time is None:
                return f"PID {pid} is no longer a process of this container"
            for signum in (signal.SIGTERM, signal.SIGKILL):
                refusal = procs.send_signal(pid, signum, info.start_time)
                if refusal is not None:
                    return None if "already exited" in refusal else refusal
                if self._exec_gone(api, exec_id, time.monotonic() + EXEC_STOP_GRACE_S):
                    return None
            return f"PID {pid} still runs after SIGKILL"
        finally:
            procs.close()

    def _exec_gone(self, api: _Api, exec_id: str, deadline: float) -> bool:
        """Wait until the engine says the exec no longer runs, at most until ``deadline``."""
        while True:
            try:
                if not api.exec_inspect(exec_id, _EXEC_STOP_CALL_S).running:
                    return True
            except (EngineError, OSError):
                return False
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)  # the engine learns of the exit from containerd, soon after it

    def interactive_exec_argv(self, container_id: str, argv: Sequence[str]) -> list[str] | None:
        """The docker CLI command for an interactive ``exec -it``; None for a malformed id."""
        if not dp.valid_id(container_id):
            return None
        try:
            endpoint: _Endpoint | None = self._endpoint or self._resolve()
        except Exception:  # a broken context: let the CLI report it itself
            endpoint = None
        if self._product == "podman" and endpoint is not None:
            # The podman CLI as a client of the service that lists the container: a rootless
            # user's containers are not in root's local storage.
            return ["podman", "--url", endpoint.base_url, "exec", "-it", container_id, *argv]
        return interactive_argv(endpoint, container_id, argv)

    # --- logs and lifecycle -----------------------------------------------------------------

    def _action_api(self, container_id: str) -> EngineApi:
        """A lean client for one logs stream or lifecycle call.

        Raises:
            LogStreamError: a malformed id, an ``ssh://`` engine, or an unusable endpoint.
        """
        if not dp.valid_id(container_id):
            raise LogStreamError("not a container id (64 hex digits expected)")
        try:
            endpoint = self._endpoint or self._resolve()
        except Exception as exc:  # a broken context or an unusable endpoint
            raise LogStreamError(f"Docker engine unreachable: {_one_line(exc)}") from exc
        if not EngineApi.supports(endpoint.base_url):
            raise LogStreamError("container logs and actions need a unix:// or tcp:// engine")
        api = EngineApi(endpoint, self._timeout)
        api.api_version = self._api_version or (self._api.api_version if self._api else None)
        return api

    def open_logs(self, container_id: str, *, tail: int, follow: bool) -> EngineLogReader:
        """Open a container's logs: the last ``tail`` lines, then new ones while ``follow``.

        Blocks for at most the source's timeout twice (an inspect for the TTY setting, then the
        reply's headers); following has no deadline after that: the reader's ``close`` ends it.

        Raises:
            LogStreamError: the engine refused, did not answer in time, or the id is malformed.
        """
        api = self._action_api(container_id)
        try:
            self._count()
            data = api.inspect(container_id)
            tty = dp.as_dict(data.get("Config")).get("Tty") is True
            del data  # holds Config.Env: never kept
            self._count()
            raw = api.logs(container_id, tail=tail, follow=follow)
        except NotFound as exc:
            raise LogStreamError(f"no such container: {container_id[:12]}") from exc
        except (EngineError, OSError) as exc:
            raise LogStreamError(f"cannot read the logs: {_one_line(exc)}") from exc
        if "multiplexed" in raw.content_type:
            tty = False
        elif "raw-stream" in raw.content_type:
            tty = True
        return EngineLogReader(raw, tty)

    def container_action(self, container_id: str, action: str) -> str | None:
        """Stop, start, restart, pause or unpause a container (blocking; stop waits up to 10 s).

        Returns:
            None when the engine did it (or the container already was in that state), else a
            one-line reason.
        """
        if action not in LIFECYCLE_ACTIONS:
            return f"not a container action: {action[:20]}"
        try:
            api = self._action_api(container_id)
        except LogStreamError as exc:
            return str(exc)
        # Stop and restart wait the grace period, then SIGKILL; start runs the runtime's hooks
        # (the NVIDIA hook mounts the driver): both take longer than a read.
        timeout = STOP_GRACE_S + 20.0 if action != "start" else 30.0
        try:
            self._count()
            api.container_action(container_id, action, timeout)
        except NotFound:
            return f"no such container: {container_id[:12]}"
        except EngineSlow:
            return f"the Docker engine did not finish {action} within {timeout:g} s"
        except (EngineError, OSError) as exc:
            return _one_line(exc)
        with self._lock:
            self._dirty.add(container_id)  # the events thread says so too; no need to wait
        return None

    # --- inspect and top ----------------------------------------------------------------------

    def details(self, container_id: str) -> ContainerDetails:
        """The container's inspect facts, asked of the engine now (environment names only).

        Blocks for at most the source's timeout; never raises.
        """
        try:
            api = self._action_api(container_id)
        except LogStreamError as exc:
            return ContainerDetails(container_id, error=str(exc))
        try:
            self._count()
            data = api.inspect(container_id)
        except NotFound:
            return ContainerDetails(container_id, error=f"no such container: {container_id[:12]}")
        except (EngineError, OSError) as exc:
            return ContainerDetails(container_id, error=f"cannot inspect: {_one_line(exc)}")
        details = dp.parse_details(data)
        del data  # holds Config.Env: never kept
        return details

    def processes(self, container_id: str) -> ContainerProcesses:
        """Every process of the container, from this host's ``/proc`` and its cgroup (capped).

        The container's init PID is the one its last inspect gave; an engine on another host
        (``tcp://``, ``ssh://``) has its processes in that host's ``/proc``, not this one's.
        """
        if not dp.valid_id(container_id):
            return ContainerProcesses(error="not a container id (64 hex digits expected)")
        if self._endpoint is not None and not self._local():
            return ContainerProcesses(
                error=f"the {self._product} engine is on another host: its processes are not "
                "in this machine's /proc"
            )
        with self._lock:
            info = self._cache.get(container_id)
        if info is None:
            return ContainerProcesses(error=f"no such container: {container_id[:12]}")
        if info.running and not info.pid and self._pids.depth:
            return ContainerProcesses(
                error=f"the {self._product} engine runs in a PID namespace of its own, and no "
                "process of this host has its PID for this container"
            )
        if self._top is None:
            self._top = ContainerTop(*self._top_roots)
        return self._top.read(container_id, info.pid or None)  # a paused one has its PIDs


def _remaining(deadline: float) -> float:
    """Seconds left until ``deadline`` (a small positive floor: a request needs some time)."""
    return max(0.05, deadline - time.monotonic())


def _fate(stopped: str | None) -> str:
    """What became of a command gputui gave up on (``stopped`` from ``_stop_exec``)."""
    if stopped is None:
        return "gputui stopped it in the container"
    return f"it may keep running inside the container ({stopped})"


def _with_duration(result: ExecResult, started: float) -> ExecResult:
    return dataclasses.replace(result, duration_s=time.monotonic() - started)


__all__ = ["EVENT_ACTIONS", "DockerSource", "docker_cli_available"]
