"""The demo's host: /proc and /sys files the demo's health checks read, made once per process."""

from __future__ import annotations

import tempfile
import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from gputui.collect.sources import HealthInputs
from gputui.health.context import HealthRoots
from gputui.health.runner import run_checks
from gputui.model.status import HealthCheck

if TYPE_CHECKING:
    pass


#: The simulated host's files, for the file-reading health checks: what a host with the driver,
#: the toolkit and Docker's nvidia runtime configured holds at these paths (relative to its root).
#: /dev/char is there without NVIDIA links, as on a default install (the daemon-reload hazard).
DEMO_HOST_FILES: dict[str, str] = {
    "proc/driver/nvidia/version": (
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  "
        "(dvs-builder@U22-I3-AM02-24-3)  Wed Oct  1 12:00:00 UTC 2025\n"
        "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n"
    ),
    "proc/2/comm": "kthreadd\n",
    "sys/module/nvidia/version": "580.159.04\n",
    "sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory hugetlb pids rdma misc\n",
    "etc/docker/daemon.json": (
        '{\n    "runtimes": {\n        "nvidia": {\n            "args": [],\n'
        '            "path": "nvidia-container-runtime"\n        }\n    }\n}\n'
    ),
    "dev/char/.keep": "",
}

_demo_root: tempfile.TemporaryDirectory[str] | None = None
_demo_root_lock = threading.Lock()


def demo_host_root() -> str:
    """A private temporary directory holding :data:`DEMO_HOST_FILES` (made once per process).

    The health checks read real files, so the simulated host's are written out; the directory
    goes when the process exits. Paths the checks print are shown without it (see
    :func:`demo_health`), as they would read on the simulated host.
    """
    global _demo_root
    with _demo_root_lock:
        if _demo_root is None:
            root = tempfile.TemporaryDirectory(prefix="gputui-demo-host-")
            for relative, text in DEMO_HOST_FILES.items():
                path = Path(root.name, relative)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
            _demo_root = root
        return _demo_root.name


def _as_on_host(check: HealthCheck, root: str) -> HealthCheck:
    def clean(text: str) -> str:
        return text.replace(root, "")

    return replace(
        check,
        summary=clean(check.summary),
        details=tuple(clean(line) for line in check.details),
        fix=None if check.fix is None else clean(check.fix),
        subject=None if check.subject is None else clean(check.subject),
    )


def demo_health(inputs: HealthInputs) -> tuple[HealthCheck, ...]:
    """Run the real health checks on the simulated machine, with a simulated toolkit install.

    Files come from :func:`demo_host_root`; the paths in the results read as on the simulated
    host (``/etc/docker/daemon.json``), without the temporary directory that serves them.
    """
    versions = {
        "nvidia-ctk": "NVIDIA Container Toolkit CLI version 1.17.8\ncommit: 5bf2c1b",
        "nvidia-container-cli": "cli-version: 1.17.8\nlib-version: 1.17.8",
        "nvidia-container-runtime": "NVIDIA Container Runtime version 1.17.8",
        "nvidia-container-runtime-hook": "NVIDIA Container Runtime Hook version 1.17.8",
    }
    root = demo_host_root()
    roots = HealthRoots(
        proc=f"{root}/proc",
        sys=f"{root}/sys",
        daemon_json=f"{root}/etc/docker/daemon.json",
        cdi_dirs=(f"{root}/etc/cdi", f"{root}/var/run/cdi"),
        dev=f"{root}/dev",
        containers_conf=(f"{root}/etc/containers/containers.conf",),
        hooks_dirs=(f"{root}/usr/share/containers/oci/hooks.d",),
        host=root,
    )
    checks = run_checks(
        inputs,
        roots=roots,
        which=lambda name: f"/usr/bin/{name}" if name in versions else None,
        run_version=lambda argv: versions.get(argv[0].rsplit("/", 1)[-1]),
        dist_version=lambda dist: "13.615.71" if dist == "nvidia-ml-py" else None,
    )
    return tuple(_as_on_host(check, root) for check in checks)
