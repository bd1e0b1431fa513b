"""Run-time settings, built once by the CLI and passed down (no global state)."""

from __future__ import annotations

from pathlib import Path

from gputui.model.records import record

#: Refresh periods below this are refused: NVML and /proc reads would dominate the host's CPU.
MIN_INTERVAL_S = 0.1
#: Refresh periods above this are refused: no monitor waits longer, and every wait stays far
#: below ``threading.TIMEOUT_MAX``.
MAX_INTERVAL_S = 86400.0


@record
class ViewScope:
    """What the views show (nvitop's ``--only``, ``--user``, ``--pid``); None: no narrowing.

    A scope narrows what is shown, never what is read or judged: alerts, notifications, the
    idle policy and the ledger see the whole machine (:mod:`gputui.derive.scope`).

    Attributes:
        gpus: Only these GPU indexes (``--only``), their processes and the containers on them.
        users: Only processes of these users (``--user``): user names, or uids as text.
        pids: Only these host PIDs (``--pid``).
    """

    gpus: tuple[int, ...] | None = None
    users: tuple[str, ...] | None = None
    pids: tuple[int, ...] | None = None

    @property
    def narrows(self) -> bool:
        """True when any of the three is given."""
        return self.gpus is not None or self.users is not None or self.pids is not None

    @property
    def narrows_processes(self) -> bool:
        """True when processes are chosen by user or PID (containers follow their processes)."""
        return self.users is not None or self.pids is not None


@record
class Settings:
    """What the user asked for.

    Attributes:
        interval: Seconds between refreshes.
        read_only: No exec or shell, no signals, no container stop/start/restart/pause anywhere
            (logs, which only read, stay).
        hide_sensitive: No action that shows what can hold secrets: container logs
            (``--no-logs``; ``gputui serve``'s read-only monitors run so).
        demo: Use the built-in simulated machine instead of NVML, Docker and /proc.
        scenario: A scenario file replacing NVML (Docker and /proc stay real).
        history_seconds: How far back the sparkline histories reach.
        health_interval: Seconds between runs of the runtime-health checks.
        slow_interval: Seconds between slow NVML reads (PCIe throughput, per-process utilization,
            the total-energy counter).
        exec_timeout: Bound on ``nvidia-smi`` inside a container.
        config: The config file (``--config``); None reads the default XDG location, where a
            missing file means the default alert rules.
        bell: Ring the terminal bell when an alert starts firing (``--bell``).
        kernel_log: Where to read kernel-log faults (XID lines, OOM kills) from
            (``--kernel-log``): None for the default (``/dev/kmsg`` on a live machine, nothing
            with a scenario or the demo), ``off`` for nowhere, else a path.
        owner_labels: Container labels that name a container's owner, strongest first
            (the config's ``[owners] labels``; ``gputui.owner`` is always read after them).
        engines: The ``--engine`` values (``docker``, ``podman=unix:///PATH``, ``auto``...):
            which container engines are read; empty reads every engine the host shows.
        scope: The GPUs, users and PIDs the views show (``--only``, ``--user``, ``--pid``).
        ascii: Draw with ASCII only (``--ascii`` / ``--no-unicode``): bars, borders,
            sparklines and markers.
    """

    interval: float = 1.0
    read_only: bool = False
    hide_sensitive: bool = False
    demo: bool = False
    scenario: Path | None = None
    history_seconds: float = 1800.0
    health_interval: float = 30.0
    slow_interval: float = 5.0
    exec_timeout: float = 15.0
    config: Path | None = None
    bell: bool = False
    kernel_log: str | None = None
    owner_labels: tuple[str, ...] = ()
    engines: tuple[str, ...] = ()
    scope: ViewScope = ViewScope()
    ascii: bool = False

    @property
    def mode(self) -> str:
        """``demo``, ``scenario`` or ``live``."""
        if self.demo:
            return "demo"
        if self.scenario is not None:
            return "scenario"
        return "live"
