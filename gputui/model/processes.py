"""Processes: what /proc says about a PID, what the viewer may see, a GPU process joined."""

from __future__ import annotations

from collections.abc import Iterable

from gputui.model.gpu import GpuProcessSample
from gputui.model.records import record


@record
class ProcessInfo:
    """Host-side facts about one PID (from /proc and psutil).

    Attributes:
        pid: Host PID.
        exists: False when the PID is not (or no longer) present in /proc.
        command: Full command line joined by spaces (or the process name), None if unknown.
        name: Process name.
        user: Owner's user name (or uid as text when it has no name).
        cpu_percent: CPU % since the previous refresh (100 = one core), None on the first sample.
        rss_bytes: Resident set size.
        start_time: Process start, seconds since the epoch.
        container_id: 64-hex container id found in /proc/<pid>/cgroup, or None (host).
        runtime: Which runtime's cgroup naming matched (``docker``, ``containerd``, ``crio``,
            ``podman``, ``kubernetes``), or None.
        pod_uid: Kubernetes pod UID from the cgroup path, or None.
        container_pid: The PID inside the process's own PID namespace (last ``NSpid`` field).
        access_denied: True when some facts could not be read for permission reasons.
        proc_hidden: True when the process exists but ``/proc`` hides it from gputui (``hidepid``
            mount option): its GPU memory is held by a process of another user, not an orphan.
        sampled_at: When ``cpu_percent`` and ``rss_bytes`` were read (seconds since the epoch),
            set only when a refresh reads a rotating share of many GPU processes; None means
            this refresh read them.
    """

    pid: int
    exists: bool = True
    command: str | None = None
    name: str | None = None
    user: str | None = None
    cpu_percent: float | None = None
    rss_bytes: int | None = None
    start_time: float | None = None
    container_id: str | None = None
    runtime: str | None = None
    pod_uid: str | None = None
    container_pid: int | None = None
    access_denied: bool = False
    proc_hidden: bool = False
    sampled_at: float | None = None


@record
class Visibility:
    """What gputui itself can see of the host.

    Attributes:
        host_pid_namespace: True when gputui shares the host's PID namespace (NVML PIDs resolve),
            None when unknown.
        private_cgroup_namespace: True when other processes' cgroup paths show ``..`` (gputui runs
            in its own cgroup namespace), None when unknown.
        proc_hidepid: The ``hidepid=`` value of the ``/proc`` mount (``2``, ``invisible``...) when
            it hides other users' processes from gputui; None when it hides nothing (or unknown).
    """

    host_pid_namespace: bool | None = None
    private_cgroup_namespace: bool | None = None
    proc_hidepid: str | None = None


@record
class GpuProcess:
    """One GPU process joined with its host process facts and its container.

    Attributes:
        sample: What NVML said.
        info: What /proc and psutil said (``info.exists`` False: nobody can find the PID).
        container_id: The container owning the process, None for a host process and for one
            whose ``/proc`` entry could not be read (see :attr:`on_host`). It may name a
            container the Docker engine does not know (another runtime such as containerd).
    """

    sample: GpuProcessSample
    info: ProcessInfo
    container_id: str | None = None

    @property
    def pid(self) -> int:
        """Host PID."""
        return self.sample.pid

    @property
    def on_host(self) -> bool:
        """True only for a process ``/proc`` showed to be in no container.

        No container id does not mean "the host": a PID nobody can find, or one ``hidepid``
        hides, may well run in a container, and gputui cannot tell. Every front-end (text
        report, tree, Users tab, exporter, ``free --explain``) places a process through this
        one rule, so none calls an unknown process a host one.
        """
        return self.container_id is None and self.info.exists and not self.info.proc_hidden


def per_gpu_sm(processes: Iterable[GpuProcess]) -> int | None:
    """The SM % of a set of GPU processes as one GPU would read it: the mean over their GPUs.

    Processes on one GPU (or MIG device) share its SMs, so their figures add up there (at most
    100 %); a container on three busy GPUs is 90 %, not 270 %. GPUs without a reading are left
    out; None when no GPU reported one. The tree, the Users tab, the report and the JSON output
    all show this figure.

    Args:
        processes: Rows of one container, user or project (one row per process and GPU).

    Returns:
        The whole-percent mean over the GPUs used, or None.
    """
    by_gpu: dict[tuple[int, int | None], int] = {}
    for process in processes:
        sample = process.sample
        if sample.sm_util is not None:
            device = (sample.gpu_index, sample.mig_index)
            by_gpu[device] = min(100, by_gpu.get(device, 0) + max(0, sample.sm_util))
    if not by_gpu:
        return None
    return round(sum(by_gpu.values()) / len(by_gpu))
