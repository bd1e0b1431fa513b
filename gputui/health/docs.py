"""Documentation pages the checks' results point to."""

from __future__ import annotations

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
