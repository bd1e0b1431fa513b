"""The registry of health checks: the ``@check`` decorator is the one place a check id is written.

A check module declares each check with its id and scope::

    @check("docker.engine", scope=HOST)
    def check_docker_engine(ctx: CheckContext) -> Result: ...

    @check("gpu.ecc", scope=GPU)
    def check_gpu_ecc(ctx: CheckContext, gpu: GpuSample) -> Result: ...

    @check("container.cuda", scope=CONTAINER, running_only=False)
    def check_container_cuda(ctx: CheckContext, container: ContainerInfo) -> Result | None: ...

The check returns a :class:`~gputui.health.result.Result`; the runner stamps the id (with
``:<gpu index>`` / ``:<container name>`` for per-subject scopes) and the subject. The order of
:data:`CHECKS` within a module is the order of definition; :func:`in_order` puts modules in the
order the runner lists them, so the display order does not depend on which module was imported
first.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any, Final, Literal, TypeVar, overload

from gputui.health.context import CheckContext
from gputui.health.result import Result
from gputui.model.containers import ContainerInfo
from gputui.model.gpu import GpuSample
from gputui.model.records import record


class Scope(Enum):
    """What one run of a check judges."""

    #: The whole host: run once.
    HOST = "host"
    #: One GPU: run once per GPU while NVML answers; id suffix ``:<index>``.
    GPU = "gpu"
    #: One container: run once per container while the engine answers; id suffix ``:<name>``.
    CONTAINER = "container"


HOST: Final = Scope.HOST
GPU: Final = Scope.GPU
CONTAINER: Final = Scope.CONTAINER

HostRun = Callable[[CheckContext], Result]
GpuRun = Callable[[CheckContext, GpuSample], Result]
#: None: the check does not apply to this container (no result at all).
ContainerRun = Callable[[CheckContext, ContainerInfo], "Result | None"]

_Run = TypeVar("_Run", bound=Callable[..., Any])

#: Dotted lower-case words, e.g. ``docker.nvidia_runtime``; ``:`` is reserved for the subject.
_CHECK_ID = re.compile(r"[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)+")


@record(slots=False)
class Check:
    """One registered check.

    Attributes:
        id: The check id, without subject suffix.
        scope: Host, per GPU or per container.
        run: The check function (signature per scope: :data:`HostRun`, :data:`GpuRun`,
            :data:`ContainerRun`).
        module: The module that registered it (orders checks across modules).
        running_only: Container checks: skip containers that are not running.
        on_lost_gpu: GPU checks: also run on a GPU that fell off the bus (the others skip there,
            since a lost GPU answers nothing they could judge).
    """

    id: str
    scope: Scope
    run: Callable[..., Result | None]
    module: str
    running_only: bool = False
    on_lost_gpu: bool = False


#: Every registered check, in registration order; rebound (never mutated) on registration.
CHECKS: tuple[Check, ...] = ()


@overload
def check(check_id: str, *, scope: Literal[Scope.HOST] = ...) -> Callable[[HostRun], HostRun]: ...


@overload
def check(
    check_id: str, *, scope: Literal[Scope.GPU], on_lost_gpu: bool = ...
) -> Callable[[GpuRun], GpuRun]: ...


@overload
def check(
    check_id: str, *, scope: Literal[Scope.CONTAINER], running_only: bool
) -> Callable[[ContainerRun], ContainerRun]: ...


def check(
    check_id: str,
    *,
    scope: Scope = Scope.HOST,
    running_only: bool = False,
    on_lost_gpu: bool = False,
) -> Callable[[_Run], _Run]:
    """Register the decorated function as the check ``check_id``.

    Args:
        check_id: Dotted id, unique across all checks.
        scope: :data:`HOST`, :data:`GPU` or :data:`CONTAINER`.
        running_only: Container checks only: run on running containers only.
        on_lost_gpu: GPU checks only: run on a lost GPU too.

    Returns:
        A decorator that registers the function and returns it unchanged.

    Raises:
        ValueError: A malformed id, an id already taken by another function, or a flag that
            does not belong to the scope.
    """
    if not _CHECK_ID.fullmatch(check_id):
        raise ValueError(f"malformed check id {check_id!r}")
    if running_only and scope is not Scope.CONTAINER:
        raise ValueError(f"{check_id}: running_only applies to container checks only")
    if on_lost_gpu and scope is not Scope.GPU:
        raise ValueError(f"{check_id}: on_lost_gpu applies to GPU checks only")

    def register(run: _Run) -> _Run:
        global CHECKS
        entry = Check(
            id=check_id,
            scope=scope,
            run=run,
            module=run.__module__,
            running_only=running_only,
            on_lost_gpu=on_lost_gpu,
        )
        for index, known in enumerate(CHECKS):
            if known.id != check_id:
                continue
            # The same function registered again (its module was reloaded): keep its place.
            if (known.module, known.run.__qualname__) == (entry.module, run.__qualname__):
                CHECKS = (*CHECKS[:index], entry, *CHECKS[index + 1 :])
                return run
            raise ValueError(
                f"check id {check_id!r} registered twice: "
                f"{known.module}.{known.run.__qualname__} and {entry.module}.{run.__qualname__}"
            )
        CHECKS = (*CHECKS, entry)
        return run

    return register


def in_order(scope: Scope, modules: Sequence[str]) -> tuple[Check, ...]:
    """The registered checks of one scope in display order.

    Args:
        scope: Which checks.
        modules: Module names in display order; within a module, definition order holds.
            Checks from a module not listed come last, in registration order.

    Returns:
        The checks to run, in order.
    """
    rank = {name: position for position, name in enumerate(modules)}
    chosen = [(position, c) for position, c in enumerate(CHECKS) if c.scope is scope]
    chosen.sort(key=lambda item: (rank.get(item[1].module, len(rank)), item[0]))
    return tuple(c for _, c in chosen)
