"""Kernel-log faults: XID errors and OOM kills with what they were attributed to."""

from __future__ import annotations

from gputui.model.records import record


@record
class FaultCandidate:
    """A process that was on the faulting GPU when a fault named no process.

    Attributes:
        pid: Host PID.
        process_name: Its name, None when unknown.
        container_id: Its container, None for a host process (or one nobody could place).
        container_name: The container's name, None when unknown.
    """

    pid: int
    process_name: str | None = None
    container_id: str | None = None
    container_name: str | None = None


@record
class KernelFault:
    """One fault from the kernel log (an NVIDIA XID line or an OOM kill), attributed.

    Attributes:
        kind: ``xid`` or ``oom``.
        at: When the kernel logged it (seconds since the epoch, from the record's time stamp).
        seq: The kernel log record's sequence number.
        raw: The kernel's line as logged (at most 1024 characters; sanitise before showing).
        fault_class: ``application``, ``memory``, ``bus``, ``nvlink``, ``gsp``, ``driver``,
            ``unknown`` for an XID (gputui's XID catalogue); ``memory_limit`` for a cgroup OOM
            kill, ``host_memory`` for the host running out.
        meaning: What it means, for people.
        fix: What to do, for people.
        xid: The XID number, None for an OOM kill.
        pci_bus_id: The GPU's PCI address as the line gives it (``0000:3b:00``).
        gpu_index: The GPU with that address, None when no GPU of this refresh has it.
        mig_device: The MIG device (``0:1``) the line's GPU and compute instance name.
        gpu_instance: The line's MIG GPU instance id (``GPU-I:``).
        compute_instance: The line's MIG compute instance id (``GPU-CI:``).
        pid: The host PID the line names, None when it names none.
        process_name: The process's name (the line's, or the one gputui saw).
        container_id: The container the process (or the OOM-killed cgroup) belongs to.
        container_name: That container's name, None when unknown.
        attribution: How the process and container were found: ``process`` (the PID was
            alive and had started before the line), ``recent_process`` (it had exited; gputui
            saw it within the last minute), ``pid_only`` (a PID nobody saw), ``cgroup`` (the OOM
            line's memory cgroup), ``candidates`` (no PID: the processes on that GPU then),
            ``none``.
        candidates: With ``attribution == "candidates"``: the processes on that GPU (or MIG
            device) at that moment; none of them is known to be the one.
        injected: True when a program wrote the line into ``/dev/kmsg`` (syslog facility not
            the kernel's): a test or an operator, not the driver.
    """

    kind: str
    at: float
    seq: int
    raw: str
    fault_class: str
    meaning: str
    fix: str
    xid: int | None = None
    pci_bus_id: str | None = None
    gpu_index: int | None = None
    mig_device: str | None = None
    gpu_instance: int | None = None
    compute_instance: int | None = None
    pid: int | None = None
    process_name: str | None = None
    container_id: str | None = None
    container_name: str | None = None
    attribution: str = "none"
    candidates: tuple[FaultCandidate, ...] = ()
    injected: bool = False


@record
class FaultCount:
    """How many kernel faults of one kind gputui has seen since it started (a counter).

    Attributes:
        kind: ``xid`` or ``oom``.
        gpu_index: The GPU, None when not known (every OOM kill).
        xid: The XID, None for OOM kills.
        fault_class: The fault's class.
        container_id: The container it was attributed to, None for none.
        container_name: That container's name, None when unknown.
        count: Faults seen.
    """

    kind: str
    gpu_index: int | None
    xid: int | None
    fault_class: str
    container_id: str | None
    container_name: str | None
    count: int
