"""Run-time settings, built once by the CLI and passed down (no global state).

With them, the config file's sections that the ledger and the idle policy read (:class:`Prices`,
:class:`IdlePolicy`): plain records here, so that reading a config imports neither.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
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


@record
class Prices:
    """``[ledger]`` prices of the config file.

    Attributes:
        kwh: Price of one kWh (None: energy is not priced).
        gpu_hour: Price of one reserved-or-occupied GPU-hour, per GPU model name.
        currency: Shown beside costs.
    """

    kwh: float | None = None
    gpu_hour: Mapping[str, float] = field(default_factory=dict)
    currency: str = ""

    @property
    def any(self) -> bool:
        """True when something is priced."""
        return self.kwh is not None or bool(self.gpu_hour)


@record
class IdlePolicy:
    """``[idle_policy]`` of the config file (docs/notify.md).

    Attributes:
        enabled: The policy runs at all (off by default).
        idle_for_s: D: how long a reservation must be observed idle, and the sliding window
            the active time is measured over.
        min_active_s: Active time within the window at or above which the container is in use.
        active_sm: SM % at or above which a refresh counts as active.
        escalate_after_s: From the notice to the escalation.
        reclaim_after_s: From the escalation to the reclaim stage.
        renotify_s: No second notice for a container within this.
        auto_reclaim: The policy's half of the automatic stop (the label is the other half).
        dry_run: Automatic stops are audited and announced, never done (the default).
        exclude: Container names or images (shell patterns) never judged.
        quiet_hours: ``(start, end)`` minutes of the local day in which no stage is reached
            (``end`` before ``start`` wraps past midnight); None: no quiet hours.
        max_gap_s: A gap between two refreshes longer than this restarts the observation
            (gputui was not watching: the gap is no evidence of idleness).
        audit: The audit file; None: ``$XDG_STATE_HOME/gputui/idle-audit.jsonl``.
    """

    enabled: bool = False
    idle_for_s: float = 4 * 3600.0
    min_active_s: float = 30.0
    active_sm: float = 5.0
    escalate_after_s: float = 3600.0
    reclaim_after_s: float = 3600.0
    renotify_s: float = 86400.0
    auto_reclaim: bool = False
    dry_run: bool = True
    exclude: tuple[str, ...] = ()
    quiet_hours: tuple[int, int] | None = None
    max_gap_s: float = 600.0
    audit: str | None = None
