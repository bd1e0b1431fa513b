"""MIG device names and the tokens a container's GPU request names them by."""

from __future__ import annotations

from collections.abc import Iterable

from gputui.model.gpu import GpuProcessSample, GpuSample, MigInstance


def mig_device_name(gpu_index: int, mig_index: int) -> str:
    """The name a MIG device goes by in ``--gpus device=…`` and in gputui: ``0:1``."""
    return f"{gpu_index}:{mig_index}"


def mig_request(token: str, gpus: Iterable[GpuSample]) -> tuple[GpuSample, MigInstance] | None:
    """The MIG device one GPU-request token names, None for a whole GPU or nothing known.

    Understands what the NVIDIA container toolkit accepts for a MIG device: ``0:1`` (GPU index
    and MIG device index, from ``--gpus device=0:1`` or CDI ``nvidia.com/gpu=0:1``), a
    ``MIG-<uuid>`` and the older ``MIG-GPU-<uuid>/<gi>/<ci>``.

    Args:
        token: One entry of a container's ``gpu_request``.
        gpus: The GPUs of the refresh.
    """
    text = token.strip()
    gpus = tuple(gpus)
    gpu_part, sep, mig_part = text.partition(":")
    if sep and gpu_part.isdigit() and mig_part.isdigit() and len(text) <= 12:
        for gpu in gpus:
            if gpu.index == int(gpu_part):
                for inst in gpu.mig_instances:
                    if inst.index == int(mig_part):
                        return gpu, inst
        return None
    if text[:4].upper() != "MIG-":
        return None
    lowered = text.lower()
    for gpu in gpus:
        for inst in gpu.mig_instances:
            if inst.uuid and inst.uuid.lower() == lowered:
                return gpu, inst
    legacy = lowered[4:].split("/")
    if len(legacy) == 3 and legacy[1].isdigit() and legacy[2].isdigit():
        for gpu in gpus:
            if (gpu.uuid or "").lower() != legacy[0]:
                continue
            for inst in gpu.mig_instances:
                if inst.index >= 0 and (inst.gpu_instance_id, inst.compute_instance_id) == (
                    int(legacy[1]),
                    int(legacy[2]),
                ):
                    return gpu, inst
    return None


def is_mig_token(token: str) -> bool:
    """True when a GPU-request token names a MIG device (``0:1``, ``MIG-…``), known or not."""
    text = token.strip()
    gpu_part, sep, mig_part = text.partition(":")
    return text[:4].upper() == "MIG-" or bool(sep and gpu_part.isdigit() and mig_part.isdigit())


def mig_instance_of(gpu: GpuSample, sample: GpuProcessSample) -> MigInstance | None:
    """The MIG device a process runs on (matched by GI and CI id), None off MIG."""
    if sample.mig_gi_id is None:
        return None
    for inst in gpu.mig_instances:
        if (
            inst.index >= 0
            and inst.gpu_instance_id == sample.mig_gi_id
            and (sample.mig_ci_id is None or inst.compute_instance_id == sample.mig_ci_id)
        ):
            return inst
    return None
