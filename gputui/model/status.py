"""Health checks, findings, alert severities and the state of each source."""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum

from gputui.model.records import record


class HealthStatus(str, Enum):
    """Outcome of one runtime-health check, ordered from worst to best by :data:`STATUS_RANK`."""

    FAIL = "fail"
    WARN = "warn"
    INFO = "info"
    PASS = "pass"
    SKIP = "skip"


#: Lower is worse; used to pick the worst status for a tab title or an exit code.
STATUS_RANK: dict[HealthStatus, int] = {
    HealthStatus.FAIL: 0,
    HealthStatus.WARN: 1,
    HealthStatus.INFO: 2,
    HealthStatus.PASS: 3,
    HealthStatus.SKIP: 4,
}


class FindingSeverity(str, Enum):
    """How bad a :class:`Finding` is; a ``str`` whose text is the value (``warn``) everywhere."""

    FAIL = "fail"
    WARN = "warn"
    INFO = "info"

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        # Python 3.10 and 3.11 format a str-mixin member as its value, 3.12 as __str__: the
        # value either way, so f-strings print ``warn``.
        return format(str(self.value), spec)


#: Lower is worse; findings are listed (and kept when capped) worst first.
FINDING_RANK: dict[FindingSeverity, int] = {
    FindingSeverity.FAIL: 0,
    FindingSeverity.WARN: 1,
    FindingSeverity.INFO: 2,
}


class AlertSeverity(str, Enum):
    """The severity of an alert rule (docs/alerts.md); a ``str`` whose text is the value."""

    CRITICAL = "critical"
    WARNING = "warning"

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


@record
class SourceStatus:
    """Whether one data source (``nvml``, ``docker``, ``procs``) answered, and if not, why.

    Attributes:
        name: The source's name.
        ok: True when the last read succeeded.
        error: One-line description of the failure, or None.
        kind: Machine-readable failure kind, e.g. ``LibraryNotFound``, ``DriverNotLoaded``,
            ``permission``, ``unreachable``, ``not_found``; None when ok.
        fix: What the user can do about it, or None.
    """

    name: str
    ok: bool
    error: str | None = None
    kind: str | None = None
    fix: str | None = None


@record
class HealthCheck:
    """One runtime-health finding.

    Attributes:
        id: Stable dotted id, e.g. ``docker.nvidia_runtime`` (per-subject checks append
            ``:<subject>``, e.g. ``container.gpu_visible:trainer-a``).
        status: pass/warn/fail/info/skip.
        summary: One line.
        details: What the check saw, one fact per line.
        fix: What to run or change, None when nothing needs doing.
        docs: A documentation URL, when one exists.
        subject: What the check is about (a GPU index, a container name), None for host checks.
    """

    id: str
    status: HealthStatus
    summary: str
    details: tuple[str, ...] = ()
    fix: str | None = None
    docs: str | None = None
    subject: str | None = None


@record
class Finding:
    """A conclusion drawn from several snapshots: sharing, leaks, idle reservations, throttling.

    Attributes:
        kind: ``gpu_shared``, ``memory_growth``, ``idle_reservation``, ``cpu_throttled``,
            ``memory_pressure``, ``oom_killed``, ``restarting``, and from GPM figures
            ``gpu_idle_between_kernels``, ``memory_bandwidth_bound``, ``tensor_cores_unused``.
        subject: What it is about: ``gpu:0``, ``container:<id>``, ``pid:<pid>``.
        severity: info, warn or fail (its text, e.g. ``"warn"``, is taken as the enum).
        summary: One line for people.
        figures: The numbers behind it (rates, shares, durations), by name.
    """

    kind: str
    subject: str
    severity: FindingSeverity
    summary: str
    figures: tuple[tuple[str, float | int | str], ...] = ()

    def __post_init__(self) -> None:
        # One type whoever builds it: a plain "warn" (a test, a newer caller) becomes the enum.
        if not isinstance(self.severity, FindingSeverity):
            object.__setattr__(self, "severity", FindingSeverity(self.severity))

    def figure(self, name: str) -> float | int | str | None:
        """One figure by name, None when absent."""
        return next((v for k, v in self.figures if k == name), None)


def worst_status(checks: Iterable[HealthCheck]) -> HealthStatus | None:
    """The worst status among ``checks`` (``fail`` < ``warn`` < ``info`` < ``pass`` < ``skip``).

    Returns:
        None for no checks at all: nothing was judged.
    """
    return min((c.status for c in checks), key=STATUS_RANK.__getitem__, default=None)
