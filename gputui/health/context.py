"""What every check receives: the sources' readings, where to read files, and the probes.

The health checks never import ``pynvml``, ``docker``, ``textual`` or ``rich``: they judge the
model objects other sources produced, plus a few file reads (all under :class:`HealthRoots`) and
``--version`` calls of command-line tools (through an injectable runner).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import field
from functools import cached_property
from typing import TypeVar, cast

from gputui.collect.sources import HealthInputs
from gputui.health.result import Result
from gputui.model.containers import ContainerInfo, EngineInfo
from gputui.model.processes import GpuProcess
from gputui.model.records import record

#: ``shutil.which``-shaped lookup: command name → absolute path, or None.
Which = Callable[[str], "str | None"]
#: Runs an argv (never a shell) with a short timeout and returns its output, or None on failure.
RunVersion = Callable[[Sequence[str]], "str | None"]
#: Installed version of a Python distribution, or None when it is not installed.
DistVersion = Callable[[str], "str | None"]

T = TypeVar("T")


@record(slots=False)
class HealthRoots:
    """Where the checks read the file system; tests point these at prepared directories.

    Attributes:
        proc: The procfs mount (``/proc``).
        sys: The sysfs mount (``/sys``).
        daemon_json: The Docker daemon configuration file.
        cdi_dirs: Directories holding CDI specs (the CDI defaults).
        dev: The device directory; ``<dev>/char`` holds the ``/dev/char`` symlinks whose absence
            makes GPU containers lose their devices on ``systemctl daemon-reload``.
        containers_conf: podman's configuration, read in this order (a later file wins; a
            directory's ``*.conf`` files by name): its CDI spec dirs and hooks dirs.
        hooks_dirs: podman's OCI hooks directories unless containers.conf names others.
        host: The root under which the absolute paths a CDI spec, a hook or containers.conf
            names are looked up (``/``).
    """

    proc: str = "/proc"
    sys: str = "/sys"
    daemon_json: str = "/etc/docker/daemon.json"
    cdi_dirs: tuple[str, ...] = ("/etc/cdi", "/var/run/cdi")
    dev: str = "/dev"
    containers_conf: tuple[str, ...] = (
        "/usr/share/containers/containers.conf",
        "/etc/containers/containers.conf",
        "/etc/containers/containers.conf.d",
    )
    hooks_dirs: tuple[str, ...] = (
        "/usr/share/containers/oci/hooks.d",
        "/etc/containers/oci/hooks.d",
    )
    host: str = "/"


@record(slots=False)
class CheckContext:
    """Everything a check may use; bundled so every check of a scope has the same signature."""

    inputs: HealthInputs
    roots: HealthRoots
    which: Which
    run_version: RunVersion
    dist_version: DistVersion
    _memo: dict[str, object] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def nvml_ok(self) -> bool:
        """True when NVML answered."""
        return self.inputs.gpu.status.ok

    @property
    def docker_ok(self) -> bool:
        """True when the Docker engine answered (the first container source, when it is one)."""
        status = self.inputs.containers.status
        return status.ok and status.name == "docker"

    def engine_of(self, container: ContainerInfo) -> EngineInfo | None:
        """The facts of the engine that lists ``container`` (the first source's, unknown)."""
        owner = self.inputs.owners.get(container.id)
        if owner is not None and owner in self.inputs.engines:
            return self.inputs.engines[owner]
        return self.inputs.containers.engine

    def product_of(self, container: ContainerInfo) -> str:
        """``docker``, ``podman`` or ``containerd``: whose words a container's advice takes."""
        engine = self.engine_of(container)
        return (engine.product if engine is not None else None) or "docker"

    def running_containers(self) -> tuple[ContainerInfo, ...]:
        """Containers whose processes can run."""
        return tuple(c for c in self.inputs.containers.containers if c.running)

    def processes_of(self, container_id: str) -> tuple[GpuProcess, ...]:
        """GPU processes that belong to this container."""
        return self._processes_by_container.get(container_id, ())

    @cached_property
    def _processes_by_container(self) -> dict[str, tuple[GpuProcess, ...]]:
        # Indexed once per pass: container checks run once per container, and a scan of every
        # GPU process each time costs containers x processes (400,000 steps at 200 x 2,000).
        found: dict[str, list[GpuProcess]] = {}
        for proc in self.inputs.processes:
            if proc.container_id is not None:
                found.setdefault(proc.container_id, []).append(proc)
        return {cid: tuple(procs) for cid, procs in found.items()}

    def once(self, key: str, compute: Callable[[], T]) -> T:
        """``compute()`` the first time ``key`` is asked in this health pass, then its answer.

        A context lives for one pass, so work several checks share (a /proc scan) runs once
        per pass whoever asks first.
        """
        if key not in self._memo:
            self._memo[key] = compute()
        return cast(T, self._memo[key])

    def nvml_skip(self) -> Result:
        """The ``skip`` result of a check that needs NVML while NVML is down."""
        status = self.inputs.gpu.status
        reason = status.error or status.kind or "not initialised"
        return Result.skip(f"NVML unavailable ({reason})", details=("see nvml.loadable",))

    def docker_skip(self, *more: str) -> Result:
        """The ``skip`` result of a check that needs the Docker engine while it is unreachable.

        Args:
            *more: What the check could still see without the engine, appended to the details.
        """
        status = self.inputs.containers.status
        if status.name != "docker":  # the first source is another engine (podman, containerd)
            return Result.skip(
                "No Docker engine is connected", details=("see docker.engine", *more)
            )
        error = (f"engine error: {status.error}",) if status.error else ()
        return Result.skip(
            "Docker engine unreachable", details=(*error, "see docker.engine", *more)
        )
