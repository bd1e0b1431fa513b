"""The one busybox image builder: the tests' ``gputui-test`` image and the benchmarks' load.

An image from a static busybox on this machine, imported straight into the engine: no
registry, no network, no Dockerfile. ``tests/conftest.py`` (the ``test_image`` fixture),
``bench/fixtures.py`` (the benchmarks' load) and ``scripts/engine_control.py`` (the disruption
suite's engines) all build through here.

The dependency runs from bench/ and scripts/ to tests/support and never back: the test suite
is what CI needs and must not change when a benchmark does, while the benchmarks and scripts
always run from a checkout that has tests/ (``python -m bench.run``, ``python -m
scripts.disruption`` from the repository root). So this module imports no pytest: those runs
need only gputui's own dependencies. Callers turn a missing
busybox (:class:`NoBusybox`) into a skip or an error of their own.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import tarfile
from typing import Any

#: Busybox applets linked into the image.
APPLETS = (
    "sh", "sleep", "cat", "ls", "yes", "echo", "grep", "head", "true", "false", "env", "ps",
    "kill", "timeout", "dd", "tail", "wc",
)  # fmt: skip

#: A fake ``nvidia-smi``: prints a plausible table and exits 0, so exec paths can be tested
#: without a GPU. The NSpid line shows which PID namespace the exec ran in.
FAKE_NVIDIA_SMI = """#!/bin/sh
cat <<'EOF'
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.159.04             Driver Version: 580.159.04     CUDA Version: 13.0     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|=========================================+========================+======================|
|   0  NVIDIA H200                    On  |   00000000:00:05.0 Off |                    0 |
| N/A   35C    P0             120W /  700W |    1024MiB / 143771MiB |     42%      Default |
+-----------------------------------------+------------------------+----------------------+
EOF
grep NSpid /proc/self/status
exit 0
"""

NO_BUSYBOX = "no static busybox on this machine (Debian: apt-get install busybox-static)"


class NoBusybox(RuntimeError):
    """This machine has no busybox binary to build the image from."""


def find_busybox() -> str | None:
    """The path of this machine's busybox binary, or None."""
    for candidate in (shutil.which("busybox"), "/bin/busybox", "/usr/bin/busybox"):
        if candidate and os.path.isfile(candidate):
            return candidate
    return None


def rootfs_tar(busybox: str) -> bytes:
    """A busybox-static root file system as a tar archive, built in memory.

    The archive is the same bytes for the same busybox (no times, no owners): its digest says
    whether an image already holds it.
    """
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:

        def add_dir(name: str) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)

        def add_file(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.mode, info.size = 0o755, len(data)
            tar.addfile(info, io.BytesIO(data))

        for name in ("bin", "usr", "usr/bin", "etc", "proc", "sys", "dev", "tmp"):
            add_dir(name)
        with open(busybox, "rb") as fh:
            add_file("bin/busybox", fh.read())
        for applet in APPLETS:
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(link)
        add_file("usr/bin/nvidia-smi", FAKE_NVIDIA_SMI.encode())
        add_file("etc/passwd", b"root:x:0:0:root:/:/bin/sh\n")
    return buf.getvalue()


def ensure_busybox_image(client: Any, image: str) -> str:
    """Import the busybox image as ``image`` (``repository:tag``) unless it is already there.

    The image is reused when its root file system is unchanged: importing on every run left an
    untagged image behind each time. The label ``<repository>.rootfs`` records which rootfs the
    tag holds.

    Args:
        client: A connected ``docker.DockerClient``.
        image: The tag to give it, e.g. ``gputui-test:latest``.

    Returns:
        ``image``.

    Raises:
        NoBusybox: This machine has no busybox binary.
    """
    busybox = find_busybox()
    if busybox is None:
        raise NoBusybox(NO_BUSYBOX)
    rootfs = rootfs_tar(busybox)
    digest = hashlib.sha256(rootfs).hexdigest()[:16]
    repository, tag = image.split(":")
    label = f"{repository}.rootfs"
    previous = None
    with contextlib.suppress(Exception):
        previous = client.api.inspect_image(image)
    if (
        previous is not None
        and ((previous.get("Config") or {}).get("Labels") or {}).get(label) == digest
    ):
        return image
    client.api.import_image_from_data(
        rootfs,
        repository=repository,
        tag=tag,
        changes=['CMD ["sleep", "3600"]', f"LABEL {label}={digest}"],
    )
    if previous is not None:
        # The old rootfs lost its tag; remove it unless a container still uses it.
        with contextlib.suppress(Exception):
            client.api.remove_image(previous["Id"])
    return image
