"""The idle-GPU policy: "reserved and idle for at least D", then notice, escalate, reclaim.

Pure: :class:`IdlePolicyEngine` keeps per-container state between :meth:`~IdlePolicyEngine.update`
calls and takes the time from ``Snapshot.taken_at`` (and the time of day from an injectable
function), so a fake clock plays a day in a test exactly as it would happen.

A container is *reserved* while it runs and asked for GPUs (a whole GPU or a MIG device) and
NVML gave a process list. A refresh is *active* when one of its GPU processes runs at or above
``active_sm`` % SM (a process whose SM figure is unknown counts as active: no verdict without
data). The container is *idle* once it has been observed reserved for at least ``idle_for``
and its active time within the last ``idle_for`` (a sliding window) is under ``min_active``: a
container that works a few minutes every 20 minutes is in use, one that has done nothing for
the whole window is not. Paused containers, host processes and containers outside the
policy's reach (excluded by name, image or label) are never judged.

Stages, each once: ``notice`` (the owner is told), ``escalate`` (``escalate_after`` later, still
idle), ``reclaim`` (``reclaim_after`` after that: the container may be stopped, by a person
with ``gputui reclaim``, or automatically when the policy *and* the container's label
``gputui.idle-policy=reclaim`` both opt in). A container back in use is ``cleared``. Within
quiet hours no stage is reached (they are reached at the first refresh after). No second
notice for a container within ``renotify`` (24 h by default), however often it flips.
"""

from __future__ import annotations

import fnmatch
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from gputui.boundary import sanitise
from gputui.derive import units
from gputui.model.records import record
from gputui.model.settings import IdlePolicy
from gputui.model.snapshot import ContainerUsage, Snapshot

#: The label a container opts in (``reclaim``) or out (``exclude``) with.
POLICY_LABEL = "gputui.idle-policy"
#: The label naming the container's owner (a user name, an e-mail address, a team).
OWNER_LABEL = "gputui.owner"


class Stage(str, Enum):
    """What the policy says about a container now."""

    NOTICE = "notice"
    ESCALATE = "escalate"
    RECLAIM = "reclaim"
    CLEARED = "cleared"

    def __str__(self) -> str:
        return str(self.value)


@record
class Notice:
    """A stage a container reached.

    Attributes:
        stage: notice, escalate, reclaim or cleared.
        container_id: The container's full id.
        name: Its name.
        owner: The ``gputui.owner`` label, else the container's owner when known at high or
            medium confidence, else the users of its processes, else None.
        at: When (the snapshot's time).
        auto: At ``reclaim``: both the policy and the container's label opt in to the stop.
        evidence: What the verdict rests on, by name (idle and active seconds, the window,
            the GPUs asked for, the processes and their memory).
    """

    stage: Stage
    container_id: str
    name: str
    owner: str | None
    at: float
    auto: bool = False
    evidence: tuple[tuple[str, float | int | str], ...] = ()

    @property
    def summary(self) -> str:
        """One line for people (sanitised)."""
        name = sanitise.safe_text(self.name, 60)
        idle = dict(self.evidence).get("observed_s")
        span = units.duration(float(idle)) if isinstance(idle, (int, float)) else "long"
        gpus = sanitise.safe_text(str(dict(self.evidence).get("gpu_request", "?")), 60)
        if self.stage is Stage.CLEARED:
            why = sanitise.safe_text(str(dict(self.evidence).get("reason", "in use again")), 60)
            return f"{name}: no longer an idle reservation ({why})"
        what = {
            Stage.NOTICE: "reserved and idle",
            Stage.ESCALATE: "still reserved and idle",
            Stage.RECLAIM: "reclaim due: reserved and idle",
        }[self.stage]
        return f"{name}: {what} for {span} (GPU {gpus})"


@dataclass(slots=True)
class _Track:
    observed_since: float
    last_at: float
    active: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=4096))
    stage: Stage | None = None
    stage_at: float = 0.0


def local_minute(at: float) -> int:
    """The minute of the local day at ``at`` (0-1439)."""
    moment = time.localtime(at)
    return moment.tm_hour * 60 + moment.tm_min


def in_quiet_hours(minute: int, quiet: tuple[int, int] | None) -> bool:
    """Whether ``minute`` of the day falls in ``quiet`` (which may wrap past midnight)."""
    if quiet is None:
        return False
    start, end = quiet
    if start <= end:
        return start <= minute < end
    return minute >= start or minute < end


def excluded(usage: ContainerUsage, policy: IdlePolicy) -> bool:
    """Out of the policy's reach: its label says ``exclude``, or a pattern names it or its image."""
    info = usage.info
    if info.label(POLICY_LABEL) == "exclude":
        return True
    return any(
        fnmatch.fnmatchcase(info.name, p) or fnmatch.fnmatchcase(info.image, p)
        for p in policy.exclude
    )


def reserved(usage: ContainerUsage) -> bool:
    """Running, asking for GPUs (or a MIG device), with NVML's process list to judge by."""
    info = usage.info
    return usage.gpu_data and info.status == "running" and info.gpu_request is not None


class IdlePolicyEngine:
    """Follows every reserved container and says when it reaches a stage.

    Args:
        policy: The policy in force.
        minute_of_day: The local minute of the day of a moment (tests pass a fixed zone).
    """

    def __init__(
        self, policy: IdlePolicy, minute_of_day: Callable[[float], int] = local_minute
    ) -> None:
        self.policy = policy
        self._minute = minute_of_day
        self._tracks: dict[str, _Track] = {}
        # Kept apart from the tracks: a container that flips back to idle is not noticed twice.
        self._noticed_at: dict[str, float] = {}
        self._last_at: float | None = None

    def stage_of(self, container_id: str) -> Stage | None:
        """The stage a container has reached (None: not idle, or not followed)."""
        track = self._tracks.get(container_id)
        return track.stage if track is not None else None

    def update(self, snapshot: Snapshot) -> list[Notice]:
        """Feed one snapshot; the stages reached with it."""
        now = snapshot.taken_at
        if self._last_at is not None and now < self._last_at:
            self._tracks.clear()  # time ran backwards (a replay sought back): start again
        self._last_at = now
        policy = self.policy
        quiet = in_quiet_hours(self._minute(now), policy.quiet_hours)
        out: list[Notice] = []
        seen: set[str] = set()
        for usage in snapshot.containers:
            cid = usage.info.id
            if not reserved(usage) or excluded(usage, policy):
                continue
            seen.add(cid)
            notice = self._follow(snapshot, usage, now, quiet)
            if notice is not None:
                out.append(notice)
        for cid in [c for c in self._tracks if c not in seen]:
            track = self._tracks.pop(cid)
            if track.stage is not None:
                gone = snapshot.container(cid)
                reason = "stopped or gone" if gone is None else f"now {gone.info.status}"
                name = gone.info.name if gone is not None else cid[:12]
                evidence = (("reason", reason),)
                out.append(Notice(Stage.CLEARED, cid, name, None, now, evidence=evidence))
        cutoff = now - 2 * policy.renotify_s
        self._noticed_at = {c: t for c, t in self._noticed_at.items() if t >= cutoff}
        return out

    def _follow(
        self, snapshot: Snapshot, usage: ContainerUsage, now: float, quiet: bool
    ) -> Notice | None:
        policy = self.policy
        cid = usage.info.id
        track = self._tracks.get(cid)
        if track is None or now - track.last_at > policy.max_gap_s:
            stage = track.stage if track is not None else None
            track = self._tracks[cid] = _Track(now, now, stage=stage, stage_at=now)
        active = bool(usage.pids) and (usage.sm_util is None or usage.sm_util >= policy.active_sm)
        if active and now > track.last_at:
            last = track.active[-1] if track.active else None
            if last is not None and last[1] >= track.last_at:
                track.active[-1] = (last[0], now)
            else:
                track.active.append((track.last_at, now))
        track.last_at = now
        start = now - policy.idle_for_s
        while track.active and track.active[0][1] <= start:
            track.active.popleft()
        active_s = sum(min(e, now) - max(s, start) for s, e in track.active if e > start)
        observed = now - track.observed_since
        idle = observed >= policy.idle_for_s and active_s < policy.min_active_s
        if not idle:
            if track.stage is None:
                return None
            track.stage = None
            return self._notice(Stage.CLEARED, snapshot, usage, now, observed, active_s, "in use")
        if quiet:
            return None
        if track.stage is None:
            track.stage, track.stage_at = Stage.NOTICE, now
            noticed = self._noticed_at.get(cid)
            if noticed is not None and now - noticed < policy.renotify_s:
                return None  # noticed within renotify: the stages go on, silently
            self._noticed_at[cid] = now
            return self._notice(Stage.NOTICE, snapshot, usage, now, observed, active_s)
        if track.stage is Stage.NOTICE and now - track.stage_at >= policy.escalate_after_s:
            track.stage, track.stage_at = Stage.ESCALATE, now
            return self._notice(Stage.ESCALATE, snapshot, usage, now, observed, active_s)
        if track.stage is Stage.ESCALATE and now - track.stage_at >= policy.reclaim_after_s:
            track.stage, track.stage_at = Stage.RECLAIM, now
            return self._notice(Stage.RECLAIM, snapshot, usage, now, observed, active_s)
        return None

    def _notice(
        self,
        stage: Stage,
        snapshot: Snapshot,
        usage: ContainerUsage,
        now: float,
        observed: float,
        active_s: float,
        reason: str | None = None,
    ) -> Notice:
        info = usage.info
        policy = self.policy
        processes = [p for p in snapshot.processes if p.container_id == info.id]
        evidence: list[tuple[str, float | int | str]] = [
            ("observed_s", round(observed, 1)),
            ("active_s", round(active_s, 1)),
            ("window_s", policy.idle_for_s),
            ("min_active_s", policy.min_active_s),
            ("active_sm", policy.active_sm),
            ("gpu_request", units.gpu_request(info.gpu_request)),
            ("gpu_processes", len(usage.pids)),
            ("gpu_memory_bytes", usage.gpu_memory_bytes),
            ("sm_util", usage.sm_util if usage.sm_util is not None else -1),
            ("image", info.image),
        ]
        if usage.mig_devices:
            evidence.append(("mig_devices", ",".join(usage.mig_devices)))
        if reason is not None:
            evidence.append(("reason", reason))
        owner = info.label(OWNER_LABEL)
        if owner is None and info.owner is not None and info.owner.confidence in ("high", "medium"):
            # The owner found from evidence (a configured label, a rootless engine's user, the
            # compose directory, --user); a low-confidence guess is not told it idles.
            owner = info.owner.name
        if owner is None:
            users = sorted({p.info.user for p in processes if p.info.user})
            owner = ",".join(users) or None
        auto = (
            stage is Stage.RECLAIM and policy.auto_reclaim and info.label(POLICY_LABEL) == "reclaim"
        )
        return Notice(stage, info.id, info.name, owner, now, auto, tuple(evidence))
