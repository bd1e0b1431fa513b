"""Shared pieces of the runtime-health checks: inputs, file roots, the check context, helpers.

The health checks never import ``pynvml``, ``docker``, ``textual`` or ``rich``: they judge the
model objects other sources produced, plus a few file reads (all under :class:`HealthRoots`) and
``--version`` calls of command-line tools (through an injectable runner).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gputui.collect.sources import HealthInputs
from gputui.model import (
    ContainerInfo,
    GpuProcess,
    HealthCheck,
    HealthStatus,
)

#: ``shutil.which``-shaped lookup: command name → absolute path, or None.
Which = Callable[[str], "str | None"]
#: Runs an argv (never a shell) with a short timeout and returns its output, or None on failure.
RunVersion = Callable[[Sequence[str]], "str | None"]
#: Installed version of a Python distribution, or None when it is not installed.
DistVersion = Callable[[str], "str | None"]

DOCS_TOOLKIT_INSTALL = (
    "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html"
)
DOCS_TOOLKIT_TROUBLESHOOTING = (
    "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/troubleshooting.html"
)
DOCS_NVML_UNKNOWN_ERROR = (
    DOCS_TOOLKIT_TROUBLESHOOTING
    + "#containers-losing-access-to-gpus-with-error-failed-to-initialize-nvml-unknown-error"
)
DOCS_CDI = (
    "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/cdi-support.html"
)
DOCS_DOCKER_SPECIALIZED = (
    "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/"
    "docker-specialized.html"
)
DOCS_XID = "https://docs.nvidia.com/deploy/xid-errors/index.html"
DOCS_PERSISTENCE = "https://docs.nvidia.com/deploy/driver-persistence/index.html"
DOCS_MEMORY_ERRORS = "https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html"
DOCS_MIG = "https://docs.nvidia.com/datacenter/tesla/mig-user-guide/index.html"
DOCS_CUDA_COMPAT = "https://docs.nvidia.com/deploy/cuda-compatibility/index.html"
DOCS_DOCKER_DAEMON_ACCESS = "https://docs.docker.com/engine/install/linux-postinstall/"
DOCS_NVML_PYTHON = "https://pypi.org/project/nvidia-ml-py/"

#: The command that runs gputui in a container with everything it needs to see the host.
GPUTUI_CONTAINER_FLAGS = (
    "--pid=host --cgroupns=host -v /var/run/docker.sock:/var/run/docker.sock:ro --gpus all"
)

#: Short names for the statuses every check module uses.
PASS, INFO, WARN, FAIL, SKIP = (
    HealthStatus.PASS,
    HealthStatus.INFO,
    HealthStatus.WARN,
    HealthStatus.FAIL,
    HealthStatus.SKIP,
)

#: Runtimes that inject GPUs the legacy way (OCI hook, no CDI): the ones the systemd
#: ``daemon-reload`` hazard applies to.
LEGACY_RUNTIMES = frozenset({"runc", "nvidia", ""})


@dataclass(frozen=True)
class HealthRoots:
    """Where the checks read the file system; tests point these at prepared directories.

    Attributes:
        proc: The procfs mount (``/proc``).
        sys: The sysfs mount (``/sys``).
        daemon_json: The Docker daemon configuration file.
        cdi_dirs: Directories holding CDI specs (the CDI defaults).
        dev: The device directory; ``<dev>/char`` holds the ``/dev/char`` symlinks whose absence
            makes GPU containers lose their devices on ``systemctl daemon-reload``.
    """

    proc: str = "/proc"
    sys: str = "/sys"
    daemon_json: str = "/etc/docker/daemon.json"
    cdi_dirs: tuple[str, ...] = ("/etc/cdi", "/var/run/cdi")
    dev: str = "/dev"


@dataclass(frozen=True)
class CheckContext:
    """Everything a check may use; bundled so every check has the same signature."""

    inputs: HealthInputs
    roots: HealthRoots
    which: Which
    run_version: RunVersion
    dist_version: DistVersion

    @property
    def nvml_ok(self) -> bool:
        """True when NVML answered."""
        return self.inputs.gpu.status.ok

    @property
    def docker_ok(self) -> bool:
        """True when the Docker engine answered."""
        return self.inputs.containers.status.ok

    def running_containers(self) -> tuple[ContainerInfo, ...]:
        """Containers whose processes can run."""
        return tuple(c for c in self.inputs.containers.containers if c.running)

    def processes_of(self, container_id: str) -> tuple[GpuProcess, ...]:
        """GPU processes that belong to this container."""
        return tuple(p for p in self.inputs.processes if p.container_id == container_id)


def nvml_skip(ctx: CheckContext, check_id: str, subject: str | None = None) -> HealthCheck:
    """A ``skip`` result for a check that needs NVML while NVML is down."""
    status = ctx.inputs.gpu.status
    reason = status.error or status.kind or "not initialised"
    return HealthCheck(
        id=check_id,
        status=HealthStatus.SKIP,
        summary=f"NVML unavailable ({reason})",
        details=("see nvml.loadable",),
        subject=subject,
    )


def docker_skip(ctx: CheckContext, check_id: str, subject: str | None = None) -> HealthCheck:
    """A ``skip`` result for a check that needs the Docker engine while it is unreachable."""
    status = ctx.inputs.containers.status
    details = (f"engine error: {status.error}",) if status.error else ()
    return HealthCheck(
        id=check_id,
        status=HealthStatus.SKIP,
        summary="Docker engine unreachable",
        details=(*details, "see docker.engine"),
        subject=subject,
    )


def read_text(path: Path) -> tuple[str | None, str | None]:
    """Read a small text file.

    Returns:
        ``(text, None)`` on success, else ``(None, reason)`` where reason is ``"absent"``,
        ``"permission denied"`` or the OS error text.
    """
    try:
        return path.read_text(encoding="utf-8", errors="replace"), None
    except FileNotFoundError:
        return None, "absent"
    except PermissionError:
        return None, "permission denied"
    except OSError as exc:  # EIO on a flaky procfs entry, EISDIR on a bad root...
        return None, exc.strerror or str(exc)


_VERSION_NUMBERS = re.compile(r"\d+")


def version_tuple(text: str | None) -> tuple[int, ...] | None:
    """``"12.4.1"`` → ``(12, 4, 1)``; None for text without any number."""
    if text is None:
        return None
    numbers = _VERSION_NUMBERS.findall(text)
    if not numbers:
        return None
    return tuple(int(n) for n in numbers)


def major_minor(text: str | None) -> tuple[int, int] | None:
    """``"12.4.1"`` → ``(12, 4)``; ``"13"`` → ``(13, 0)``; None when unparsable."""
    parts = version_tuple(text)
    if parts is None:
        return None
    return (parts[0], parts[1] if len(parts) > 1 else 0)
