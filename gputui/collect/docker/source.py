"""The Docker engine as a :class:`~gputui.collect.sources.ContainerSource`.

This is the only module that imports ``docker``. Design, in short:

* The client is created lazily in :meth:`DockerSource.read` (the collector thread), so building
  the source never blocks. Connection failures become a :class:`SourceStatus` and are retried
  with a back-off, so a dead engine does not cost a timeout on every refresh.
* The container set is one list plus one cached inspect per container, kept fresh by a thread
  reading the events stream; with nothing changing, :meth:`DockerSource.read` makes no API call.
* CPU and memory come from the containers' cgroup files, not from the stats API (see
  :mod:`gputui.collect.linux.cgroup_usage` for why), with the docker CLI's formulas.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import docker
import docker.errors
import requests
from docker.context import ContextAPI
from docker.context.config import get_current_context_name
from docker.utils import kwargs_from_env

from gputui.collect.docker import parse as dp
from gputui.collect.docker.endpoint import Endpoint as _Endpoint
from gputui.collect.docker.endpoint import (
    docker_cli_available,
    interactive_argv,
    unix_socket_answers,
)
from gputui.collect.docker.endpoint import one_line as _one_line
from gputui.collect.linux.cgroup_usage import CgroupSampler
from gputui.model import ContainerInfo, ContainerReading, EngineInfo, ExecResult, SourceStatus

_T = TypeVar("_T")

#: Events that change what inspect says about a container. ``exec_*`` events are left out on
#: purpose: every ``nvidia-smi`` exec would otherwise trigger a re-inspect.
EVENT_ACTIONS = (
    "create", "start", "restart", "die", "stop", "kill", "destroy", "rename",
    "pause", "unpause", "oom", "update", "health_status",
)  # fmt: skip
_MIN_BACKOFF_S = 2.0
_MAX_BACKOFF_S = 10.0
# Errors that mean "the engine is not there (any more)": drop the client and back off.
_CONNECTION_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException, OSError)


class DockerSource:
    """Containers, engine facts and exec, from a Docker engine.

    Attributes:
        api_calls: Docker API requests made so far (read, events, exec), for tests and benchmarks.
    """

    def __init__(
        self,
        base_url: str | None = None,
        timeout: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        *,
        cgroup_root: str | os.PathLike[str] = "/sys/fs/cgroup",
        proc_root: str | os.PathLike[str] = "/proc",
        label: str | None = None,
    ) -> None:
        """Remember the settings; no I/O happens until the first :meth:`read`.

        Args:
            base_url: Engine URL; None honours ``DOCKER_HOST``, then the active docker context.
            timeout: Seconds for each API request.
            clock: Monotonic clock, injectable for back-off tests.
            cgroup_root: Where the host's cgroup hierarchy is mounted (tests point it elsewhere).
            proc_root: Where the host's ``/proc`` is.
            label: Only watch containers carrying this label (``key`` or ``key=value``), as
                ``docker ps --filter label=...`` does; None watches every container.
        """
        self.api_calls = 0
        self._label_filter: dict[str, list[str]] = {"label": [label]} if label else {}
        self._base_url = base_url
        self._timeout = timeout
        self._clock = clock
        self._sampler = CgroupSampler(Path(cgroup_root), Path(proc_root))
        self._lock = threading.Lock()  # guards the fields the events thread writes
        self._client: docker.DockerClient | None = None
        self._endpoint: _Endpoint | None = None
        self._engine: EngineInfo | None = None
        self._api_version: str | None = None
        self._failure: SourceStatus | None = None
        self._last_url: str | None = None  # the endpoint of the last connection attempt
        self._next_retry = 0.0
        self._backoff = _MIN_BACKOFF_S
        self._cache: dict[str, ContainerInfo] = {}
        self._dirty: set[str] = set()
        self._gone: set[str] = set()
        self._need_resync = True
        self._stream_ok = False
        self._generation = 0
        self._stop_events = threading.Event()
        self._events_stream: Any = None
        self._events_thread: threading.Thread | None = None

    # --- connection ------------------------------------------------------------------------

    def _count(self, n: int = 1) -> None:
        with self._lock:
            self.api_calls += n

    def _call(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        self._count()
        return fn(*args, **kwargs)

    def _resolve(self) -> _Endpoint:
        """Endpoint from the argument, ``DOCKER_HOST`` or the docker CLI context (local files)."""
        if self._base_url:
            return _Endpoint(self._base_url, False, None, explicit=True)
        if os.environ.get("DOCKER_HOST"):
            params = kwargs_from_env()
            return _Endpoint(str(params["base_url"]), params.get("tls", False), None, False)
        # docker SDK >= 7.2 does this inside from_env(); doing it here as well works with 7.1 and
        # tells us the context's name for the engine panel and the interactive exec.
        name = os.environ.get("DOCKER_CONTEXT") or get_current_context_name() or "default"
        ctx = ContextAPI.get_context(name)
        if ctx is None:
            raise docker.errors.ContextNotFound(name)
        tls = ctx.TLSConfig if ctx.TLSConfig is not None else False
        return _Endpoint(str(ctx.Host or "unix:///var/run/docker.sock"), tls, name, False)

    def _connect(self) -> SourceStatus | None:
        """Create the client, read engine facts, start the events thread; a status on failure."""
        client: docker.DockerClient | None = None
        try:
            endpoint = self._resolve()
            self._last_url = endpoint.base_url
            self._count()  # the constructor negotiates the API version with GET /version
            client = docker.DockerClient(
                base_url=endpoint.base_url,
                tls=endpoint.tls,
                version=None,
                timeout=max(1, math.ceil(self._timeout)),
            )
            info = self._call(client.api.info)
            version = self._call(client.api.version)
        except Exception as exc:  # any failure to connect is a status, never an exception
            if client is not None:
                client.close()
            kind, fix = dp.classify_connect_error(f"{type(exc).__name__}: {exc}")
            return SourceStatus("docker", ok=False, error=_one_line(exc), kind=kind, fix=fix)
        self._client, self._endpoint = client, endpoint
        self._api_version = client.api.api_version
        self._engine = dp.parse_engine(
            info, version, endpoint.base_url, endpoint.context, self._api_version
        )
        self._cache.clear()
        self._sampler.clear()
        self._start_events(client)
        return None

    def _teardown(self) -> None:
        """Stop the events thread and drop the client (idempotent)."""
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
            self._events_thread.join(timeout=2.0)
            self._events_thread = None
        if self._client is not None:
            self._client.close()
            self._client = None

    def close(self) -> None:
        """Stop the events thread and close the client (idempotent)."""
        self._teardown()

    def _fail(self, status: SourceStatus) -> ContainerReading:
        self._teardown()
        self._failure = status
        self._next_retry = self._clock() + self._backoff
        self._backoff = min(self._backoff * 2, _MAX_BACKOFF_S)
        return ContainerReading(status=status, engine=None)

    # --- events ----------------------------------------------------------------------------

    def _start_events(self, client: docker.DockerClient) -> None:
        with self._lock:
            self._generation += 1
            generation = self._generation
        self._stop_events = threading.Event()
        subscribed = threading.Event()
        self._events_thread = threading.Thread(
            target=self._events_loop,
            args=(client, generation, self._stop_events, subscribed),
            name="gputui-docker-events",
            daemon=True,
        )
        self._events_thread.start()
        # Subscribe before the first list, so no change between list and subscription is lost.
        subscribed.wait(self._timeout)

    def _events_loop(
        self,
        client: docker.DockerClient,
        generation: int,
        stop: threading.Event,
        subscribed: threading.Event,
    ) -> None:
        since: int | None = None
        backoff = 0.5
        while not stop.is_set():
            try:
                self._count()
                stream = client.api.events(
                    since=since,
                    filters={
                        "type": "container",
                        "event": list(EVENT_ACTIONS),
                        **self._label_filter,
                    },
                    decode=True,
                )
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
                    since = int(event.get("time") or since or 0) or None
                    self._on_event(generation, event)
            except Exception:  # disconnect or close(): both end in the reconnect logic below
                pass
            with self._lock:
                if generation == self._generation:
                    self._stream_ok = False
                    self._events_stream = None
            if not stop.is_set():
                stop.wait(backoff)

    def _on_event(self, generation: int, event: dict[str, Any]) -> None:
        action = str(event.get("Action") or event.get("status") or "").split(":", 1)[0]
        cid = (event.get("Actor") or {}).get("ID") or event.get("id")
        if not cid or action not in EVENT_ACTIONS:
            return
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
        """The current container set with CPU/memory; never raises for engine errors.

        Returns:
            A reading whose status says whether the engine answered (with a fix text if not).
        """
        if self._client is None:
            if (
                self._failure is not None
                and self._clock() < self._next_retry
                and not unix_socket_answers(self._last_url)
            ):
                return ContainerReading(status=self._failure)
            failure = self._connect()
            if failure is not None:
                return self._fail(failure)
        elif self._local() and not unix_socket_answers(self._last_url):
            # With nothing changing a read makes no API call, so a stopped engine would look
            # fine until the events thread saw its stream end; a connect() to the local socket
            # (no API call, tens of microseconds) tells at once.
            message = f"the Docker engine at {self._last_url} does not accept connections"
            kind, fix = dp.classify_connect_error(f"ConnectionRefusedError: {message}")
            return self._fail(SourceStatus("docker", False, message, kind, fix))
        try:
            self._sync()
        except _CONNECTION_ERRORS as exc:
            kind, fix = dp.classify_connect_error(f"{type(exc).__name__}: {exc}")
            return self._fail(SourceStatus("docker", False, _one_line(exc), kind, fix))
        self._failure = None
        self._backoff = _MIN_BACKOFF_S
        containers = self._with_usage(sorted(self._cache.values(), key=lambda c: c.name))
        return ContainerReading(SourceStatus("docker", ok=True), tuple(containers), self._engine)

    def _sync(self) -> None:
        """Apply events since the last read; list everything only when the stream was down."""
        assert self._client is not None
        api = self._client.api
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
            listed = {
                c["Id"]: (c.get("State"), "/".join(c.get("Names") or ()).lstrip("/"))
                for c in self._call(api.containers, all=True, filters=self._label_filter)
            }
            for cid in [c for c in self._cache if c not in listed]:
                self._forget(cid)
            dirty |= {
                cid
                for cid, seen in listed.items()
                if cid not in self._cache
                or seen != (self._cache[cid].status, self._cache[cid].name)
            }
        retry: set[str] = set()
        for cid in dirty:
            try:
                data = self._call(api.inspect_container, cid)
            except docker.errors.NotFound:
                self._forget(cid)
                continue
            except docker.errors.APIError:
                # One container the engine cannot describe (a 500) must not take the whole
                # source down: keep what we had and try it again next read.
                retry.add(cid)
                continue
            self._cache[cid] = dp.parse_inspect(data)
            self._sampler.inspected(cid, (data.get("HostConfig") or {}).get("CgroupParent") or None)
            del data  # holds Config.Env: never keep it past parsing
        if retry:
            with self._lock:
                self._dirty |= retry

    def _forget(self, cid: str) -> None:
        self._cache.pop(cid, None)
        self._sampler.forget(cid)

    # --- CPU and memory --------------------------------------------------------------------

    def _with_usage(self, containers: list[ContainerInfo]) -> list[ContainerInfo]:
        """Add CPU %, memory and throttling from the cgroup files (local engines only)."""
        if self._engine is None or not self._local():
            return containers
        return self._sampler.sample(containers, self._engine)

    # The sampler's caches, under the names the cache-size checks look for.
    @property
    def _cgroup_parent(self) -> dict[str, str | None]:
        return self._sampler.parent

    @property
    def _cgroup_dirs(self) -> dict[str, tuple[Path | None, ...]]:
        return self._sampler.dirs

    @property
    def _cpu_prev(self) -> dict[str, tuple[int, int, float | None]]:
        return self._sampler.cpu_prev

    def _local(self) -> bool:
        url = self._endpoint.base_url if self._endpoint else ""
        return url.startswith(("unix://", "http+unix://"))

    # --- exec ------------------------------------------------------------------------------

    def exec(self, container_id: str, argv: Sequence[str], timeout_s: float) -> ExecResult:
        """Run ``argv`` (no shell) in a running container, bounded by ``timeout_s``.

        The exec'd process is not killed on timeout: Docker cannot stop an exec'd process when
        the client goes away, so only bounded commands should be run.

        Args:
            container_id: Full or short id, or name.
            argv: The command and its arguments.
            timeout_s: Seconds to wait for it.

        Returns:
            Exit code and decoded output, or an explanation in ``error``.
        """
        args = tuple(argv)
        started = self._clock()
        if self._client is None and self.read().status.ok is False:
            status = self._failure
            reason = status.error if status is not None else "not connected"
            return ExecResult(args, None, error=f"Docker engine unreachable: {reason}")
        result: list[ExecResult] = []
        worker = threading.Thread(
            target=lambda: result.append(self._exec_blocking(container_id, args, timeout_s)),
            name="gputui-docker-exec",
            daemon=True,  # an abandoned exec must not keep gputui from exiting
        )
        worker.start()
        worker.join(timeout_s)
        duration = self._clock() - started
        if not result:
            return ExecResult(
                args,
                None,
                duration_s=duration,
                timed_out=True,
                error=f"{args[0] if args else 'command'} did not finish within {timeout_s:g} s; "
                "it may keep running inside the container (Docker cannot stop exec'd processes)",
            )
        return dataclasses.replace(result[0], duration_s=duration)

    def _exec_blocking(
        self, container_id: str, argv: tuple[str, ...], timeout_s: float
    ) -> ExecResult:
        assert self._endpoint is not None
        known = self._cache.get(container_id)
        label = known.name if known else container_id[:12]
        # A client of its own, whose socket timeout covers a silent command (the shared client's
        # few seconds would cut a slow nvidia-smi short) and which the worker thread may close.
        api = docker.APIClient(
            base_url=self._endpoint.base_url,
            tls=self._endpoint.tls,
            version=self._api_version,
            timeout=max(1, math.ceil(timeout_s + self._timeout)),
        )
        try:
            try:
                exec_id = self._call(api.exec_create, container_id, list(argv))["Id"]
            except docker.errors.NotFound:
                return ExecResult(argv, None, error=f"no such container: {label}")
            except docker.errors.APIError as exc:
                if exc.status_code != 409:
                    raise
                status = self._call(api.inspect_container, container_id)["State"]["Status"]
                return ExecResult(argv, None, error=f"container {label} is not running ({status})")
            self._count()
            out, err = api.exec_start(exec_id, demux=True)
            code = self._call(api.exec_inspect, exec_id).get("ExitCode")
        except docker.errors.APIError as exc:
            return ExecResult(argv, None, error=f"exec failed: {_one_line(exc)}")
        except _CONNECTION_ERRORS as exc:
            return ExecResult(argv, None, error=f"Docker engine unreachable: {_one_line(exc)}")
        finally:
            api.close()
        stdout = (out or b"").decode("utf-8", errors="replace")
        stderr = (err or b"").decode("utf-8", errors="replace")
        return ExecResult(
            argv, code, stdout, stderr, error=dp.exec_error(argv, code, stdout + stderr)
        )

    def interactive_exec_argv(self, container_id: str, argv: Sequence[str]) -> list[str]:
        """The docker CLI command for an interactive ``exec -it`` on this source's engine."""
        try:
            endpoint: _Endpoint | None = self._endpoint or self._resolve()
        except Exception:  # a broken context: let the CLI report it itself
            endpoint = None
        return interactive_argv(endpoint, container_id, argv)


__all__ = ["EVENT_ACTIONS", "DockerSource", "docker_cli_available"]
