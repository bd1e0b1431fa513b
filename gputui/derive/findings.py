"""Who is stealing the GPU: findings drawn from a sequence of snapshots.

* **Sharing**: a GPU used by processes of two or more parties (containers, the host), with each
  party's share of its GPU memory and SM.
* **Memory growth**: GPU memory of a process or container that only grows over the window (a leak
  or an ever-growing cache), with the rate and the time until the GPU is full at that rate.
* **Idle reservations**: containers that asked for GPUs and run nothing on them, with how long.
* **CPU-side evidence**: CFS throttling, memory near the limit, OOM kills, restarts.
* **What the GPU really does** (NVML GPM, Hopper+): busy but idle between kernels (util high,
  SM activity low), FP32 math without tensor cores, a memory-bandwidth-bound job. Never raised
  without GPM figures: ``utilization.gpu`` alone cannot tell these apart.

CFS throttling is one smoothed figure per container (:class:`Throttling`): throttled periods over
all periods in the last :data:`THROTTLE_WINDOW_S` seconds of the cgroup's counters. The finding,
the tree marker and the evidence view all print that one figure, with its window.

Pure and deterministic: time comes from ``Snapshot.taken_at``, never from a clock, so tests feed
scenario-driven snapshot sequences. :class:`FindingsEngine` keeps the little state the trends need.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Mapping
from typing import TypeVar

from gputui.boundary import sanitise
from gputui.derive import units
from gputui.derive.windows import SampledWindow
from gputui.model.gpu import busy_percent
from gputui.model.mig import is_mig_token, mig_device_name, mig_instance_of, mig_request
from gputui.model.processes import GpuProcess
from gputui.model.records import record
from gputui.model.snapshot import ContainerUsage, Snapshot
from gputui.model.status import Finding, FindingSeverity

_MIB = 1024 * 1024
HOST = "host"

_K = TypeVar("_K", bound=Hashable)

#: How far back the CPU throttling figure looks: long enough that one refresh's handful of CFS
#: periods (10 per second at the default 100 ms period) does not swing it, short enough to follow
#: a job that changes phase.
THROTTLE_WINDOW_S = 60.0
#: Counter readings kept per container: a 60 s window at 10 refreshes per second needs 600.
_THROTTLE_SAMPLES = 1024


@record
class FindingRules:
    """Thresholds of the detectors (the config file may override them).

    Attributes:
        growth_window_s: How far back the growth detector looks.
        growth_min_span_s: Growth must be observed over at least this long.
        growth_min_rate_mib_per_min: Slower growth is not reported.
        growth_max_drop_fraction: A fall by more than this fraction of the running peak means the
            memory is released now and then (a sawtooth), which is not a leak.
        idle_sm_threshold: A reserving container whose processes' SM % stays under this is idle.
        idle_min_s: How long a reservation with no GPU process must last to be reported
            (0: at once; its uptime is shown).
        low_util_min_s: How long GPU processes must stay under the SM threshold to be reported
            (a moment of low SM is normal between batches).
        throttle_window_s: How far back the throttling figure looks.
        throttle_ratio: Share of CFS periods throttled (over ``throttle_window_s``) above which a
            container is flagged.
        memory_pressure_ratio: Memory use against the limit above which it is flagged.
        gpm_busy_util: ``utilization.gpu`` (or a MIG instance's GPM graphics activity) at or
            above which a GPU counts as "busy" for the idle-between-kernels finding.
        gpm_idle_sm_active: GPM SM activity at or under which such a busy GPU is mostly idle.
        gpm_fp32_active: FP32 pipe activity at or above which math is done in FP32.
        gpm_tensor_idle: Tensor activity under which the tensor cores count as unused.
        gpm_dram_bound: DRAM bandwidth use at or above which a job is memory-bandwidth-bound.
    """

    growth_window_s: float = 600.0
    throttle_window_s: float = THROTTLE_WINDOW_S
    growth_min_span_s: float = 60.0
    growth_min_rate_mib_per_min: float = 10.0
    growth_max_drop_fraction: float = 0.02
    idle_sm_threshold: float = 5.0
    idle_min_s: float = 0.0
    low_util_min_s: float = 600.0
    throttle_ratio: float = 0.2
    memory_pressure_ratio: float = 0.9
    gpm_busy_util: float = 80.0
    gpm_idle_sm_active: float = 20.0
    gpm_fp32_active: float = 10.0
    gpm_tensor_idle: float = 1.0
    gpm_dram_bound: float = 80.0


@record
class Share:
    """One party's use of one GPU."""

    party: str
    label: str
    memory_bytes: int
    memory_share: float
    sm_util: int | None


def span_text(seconds: float) -> str:
    """A window's length as the throttling figure states it: ``"60 s"``, ``"12 s"``, ``"5 min"``."""
    if seconds >= 120:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


@record
class Throttling:
    """A container's CFS throttling over a recent window of its cgroup counters.

    Attributes:
        throttled: Throttled periods within the window (``nr_throttled`` difference).
        periods: CFS periods within the window (``nr_periods`` difference).
        span_s: Seconds the window actually covers (shorter than ``window_s`` while it fills).
        window_s: The window asked for.
    """

    throttled: int
    periods: int
    span_s: float
    window_s: float

    @property
    def ratio(self) -> float:
        """Throttled periods / periods (0 when no period elapsed: the container did not run)."""
        return self.throttled / self.periods if self.periods > 0 else 0.0

    @property
    def percent(self) -> int:
        """The ratio as a whole percentage: the one number every view prints."""
        return round(self.ratio * 100)

    @property
    def span(self) -> str:
        """The covered window for people: ``"60 s"``."""
        return span_text(self.span_s)

    def text(self) -> str:
        """``throttled 18% of CPU periods over 60 s``."""
        return f"throttled {self.percent}% of CPU periods over {self.span}"


class ThrottleTracker:
    """Cumulative ``cpu.stat`` counters per container → :class:`Throttling` over a window.

    One refresh sees only a few CFS periods (10 per second at the default 100 ms period), so a
    ratio of one refresh's differences jumps between 0 and 100 % for a container throttled a
    steady fifth of the time; differences over the whole window do not.

    Args:
        window_s: How far back the figure looks.
    """

    def __init__(self, window_s: float = THROTTLE_WINDOW_S) -> None:
        self.window_s = window_s
        self._readings: dict[str, deque[tuple[float, int, int]]] = {}

    def update(
        self, container_id: str, at: float, periods: int, throttled: int
    ) -> Throttling | None:
        """Add one reading; the figure over the window, None until there are two readings.

        Args:
            container_id: Whose counters.
            at: The snapshot's time.
            periods: ``nr_periods`` (cumulative since the cgroup was created).
            throttled: ``nr_throttled`` (cumulative).
        """
        readings = self._readings.get(container_id)
        if readings is None:
            readings = self._readings[container_id] = deque(maxlen=_THROTTLE_SAMPLES)
        if readings:
            last_at, last_periods, last_throttled = readings[-1]
            if at <= last_at:
                return self._figure(readings)  # the same snapshot again: nothing new to count
            if periods < last_periods or throttled < last_throttled:
                readings.clear()  # a new cgroup (the container restarted): counters began at 0
        readings.append((at, max(0, periods), max(0, throttled)))
        while len(readings) > 2 and readings[1][0] <= at - self.window_s:
            # Keep one reading at or before the window's start as its baseline.
            readings.popleft()
        return self._figure(readings)

    def _figure(self, readings: deque[tuple[float, int, int]]) -> Throttling | None:
        if len(readings) < 2:
            return None
        (t0, p0, th0), (t1, p1, th1) = readings[0], readings[-1]
        periods = p1 - p0
        throttled = min(max(0, th1 - th0), periods) if periods > 0 else 0
        return Throttling(throttled, max(0, periods), t1 - t0, self.window_s)

    def forget(self, live: set[str]) -> None:
        """Drop the readings of containers no longer listed."""
        for key in [k for k in self._readings if k not in live]:
            del self._readings[key]


def party_of(snapshot: Snapshot, proc: GpuProcess) -> tuple[str, str]:
    """(key, label) of the party a GPU process belongs to: its container, the host, or unknown."""
    if proc.container_id is not None:
        usage = snapshot.container(proc.container_id)
        return proc.container_id, usage.info.name if usage else proc.container_id[:12]
    if not proc.on_host:  # gone or hidden by /proc: it may run in a container
        return "unknown", "unknown PIDs"
    return HOST, HOST


def gpu_shares(snapshot: Snapshot) -> dict[int, tuple[Share, ...]]:
    """Per GPU, each party's GPU memory and SM, biggest first (GPUs with one party included).

    Processes on MIG devices are left out: a MIG-partitioned GPU is split, not shared; its
    devices' sharing is :func:`mig_shares`.
    """
    return _shares(
        snapshot, lambda proc: None if proc.sample.mig_gi_id is not None else proc.sample.gpu_index
    )


def mig_shares(snapshot: Snapshot) -> dict[str, tuple[Share, ...]]:
    """Per MIG device (``0:1``), each party's memory and SM on it, biggest first."""
    gpus = {g.index: g for g in snapshot.gpus if g.mig_instances}
    if not gpus:
        return {}  # no GPU is split: nothing to look up for each process

    def device(proc: GpuProcess) -> str | None:
        gpu = gpus.get(proc.sample.gpu_index)
        inst = None if gpu is None else mig_instance_of(gpu, proc.sample)
        return None if inst is None else mig_device_name(proc.sample.gpu_index, inst.index)

    return _shares(snapshot, device)


def _shares(
    snapshot: Snapshot, where: Callable[[GpuProcess], _K | None]
) -> dict[_K, tuple[Share, ...]]:
    memory: dict[_K, dict[str, int]] = {}
    sm: dict[_K, dict[str, int]] = {}
    labels: dict[str, str] = {}
    for proc in snapshot.processes:
        gpu = where(proc)
        if gpu is None:
            continue
        key, labels[key] = party_of(snapshot, proc)
        memory.setdefault(gpu, {})[key] = memory.get(gpu, {}).get(key, 0) + (
            proc.sample.used_memory_bytes or 0
        )
        if proc.sample.sm_util is not None:
            sm.setdefault(gpu, {})[key] = sm.get(gpu, {}).get(key, 0) + proc.sample.sm_util
    shares: dict[_K, tuple[Share, ...]] = {}
    for gpu, parties in memory.items():
        total = sum(parties.values()) or 1
        rows = [
            Share(key, labels[key], used, used / total, sm.get(gpu, {}).get(key))
            for key, used in parties.items()
        ]
        shares[gpu] = tuple(sorted(rows, key=lambda s: (-s.memory_bytes, s.label)))
    return shares


def sharing_findings(
    snapshot: Snapshot, known: Mapping[int, tuple[Share, ...]] | None = None
) -> list[Finding]:
    """A finding for every GPU, and every MIG device, used by two or more parties.

    A MIG device's finding has the subject ``mig:<gpu>:<device>`` and a ``party:<key>`` figure
    per party (its share), so the tree can mark the parties' nodes.

    Args:
        snapshot: The snapshot.
        known: Its :func:`gpu_shares`, where the caller has them already.
    """
    out = []
    by_gpu = gpu_shares(snapshot) if known is None else known
    everything: list[tuple[str, str, tuple[Share, ...]]] = [
        (f"gpu:{gpu}", f"GPU {gpu}", gpu_share) for gpu, gpu_share in sorted(by_gpu.items())
    ]
    by_index = {g.index: g for g in snapshot.gpus}
    for name, shares in sorted(mig_shares(snapshot).items()):
        gpu_index, _, mig_index = name.partition(":")
        gpu = by_index.get(int(gpu_index))
        inst = (
            next((m for m in gpu.mig_instances if m.index == int(mig_index)), None) if gpu else None
        )
        profile = f" ({sanitise.safe_text(inst.profile, 16)})" if inst and inst.profile else ""
        everything.append((f"mig:{name}", f"MIG device {name}{profile}", shares))
    for subject, what, shares in everything:
        if len(shares) < 2:
            continue
        parts = ", ".join(
            f"{sanitise.safe_text(s.label, 40)} {s.memory_share * 100:.0f}%"
            + (f" (SM {s.sm_util}%)" if s.sm_util is not None else "")
            for s in shares
        )
        figures: list[tuple[str, float | int | str]] = [("parties", len(shares))]
        for s in shares:
            figures.append((f"memory_share:{s.label}", round(s.memory_share, 4)))
            figures.append((f"memory_bytes:{s.label}", s.memory_bytes))
            if s.sm_util is not None:
                figures.append((f"sm_util:{s.label}", s.sm_util))
        if subject.startswith("mig:"):
            figures += [(f"party:{s.party}", round(s.memory_share, 4)) for s in shares]
        out.append(
            Finding(
                "gpu_shared",
                subject,
                FindingSeverity.INFO,
                f"{what} shared by {len(shares)} parties: {parts}",
                tuple(figures),
            )
        )
    return out


def gpm_findings(snapshot: Snapshot, rules: FindingRules | None = None) -> list[Finding]:
    """What GPM says the GPUs (and MIG devices) do: only where GPM figures were read."""
    rules = rules or FindingRules()
    out: list[Finding] = []
    for gpu in snapshot.gpus:
        if gpu.lost:
            continue
        devices: list[tuple[str, str, float | None, float | None, float | None, float | None]]
        devices = [
            (
                f"gpu:{gpu.index}",
                f"GPU {gpu.index}",
                # Busy as time (GPM's graphics activity beside its SM activity, the interval's
                # mean, else the point read): a point read can catch a busy 200 ms of an idle
                # second and claim "util 100 %".
                busy_percent(gpu),
                gpu.gpm_sm_active,
                gpu.gpm_tensor_active,
                gpu.gpm_dram_active,
            )
        ]
        for inst in gpu.mig_instances:
            if inst.index >= 0:
                name = mig_device_name(gpu.index, inst.index)
                devices.append(
                    (
                        f"mig:{name}",
                        f"MIG device {name}",
                        inst.gpm_graphics_active,  # a MIG device's "util", from GPM too
                        inst.gpm_sm_active,
                        inst.gpm_tensor_active,
                        inst.gpm_dram_active,
                    )
                )
        for subject, what, util, sm, tensor, dram in devices:
            if sm is None:
                continue  # no GPM figures: nothing to say beyond util
            if util is not None and util >= rules.gpm_busy_util and sm <= rules.gpm_idle_sm_active:
                out.append(
                    Finding(
                        "gpu_idle_between_kernels",
                        subject,
                        FindingSeverity.WARN,
                        f"{what}: busy {util:.0f}% but SM activity {sm:.0f}%: the GPU is mostly "
                        "idle between kernels (input pipeline, synchronisation, small batches); "
                        "try larger batches, more data-loader workers, CUDA graphs",
                        (("busy_percent", round(util, 1)), ("sm_active", round(sm, 1))),
                    )
                )
            if (
                dram is not None
                and dram >= rules.gpm_dram_bound
                and (tensor is None or tensor < dram / 2)
            ):
                out.append(
                    Finding(
                        "memory_bandwidth_bound",
                        subject,
                        FindingSeverity.INFO,
                        f"{what}: DRAM bandwidth {dram:.0f}% used, SM activity {sm:.0f}%"
                        + ("" if tensor is None else f", tensor {tensor:.0f}%")
                        + ": memory-bandwidth-bound (LLM decoding, element-wise kernels); "
                        "more compute will not help: try larger batches, fused kernels, "
                        "lower-precision weights",
                        (
                            ("dram_active", round(dram, 1)),
                            ("sm_active", round(sm, 1)),
                            *((("tensor_active", round(tensor, 1)),) if tensor is not None else ()),
                        ),
                    )
                )
        fp32 = gpu.gpm_fp32_active
        tensor = gpu.gpm_tensor_active
        if (
            gpu.gpm_sm_active is not None
            and fp32 is not None
            and tensor is not None
            and fp32 >= rules.gpm_fp32_active
            and tensor < rules.gpm_tensor_idle
        ):
            out.append(
                Finding(
                    "tensor_cores_unused",
                    f"gpu:{gpu.index}",
                    FindingSeverity.INFO,
                    f"GPU {gpu.index}: tensor activity {tensor:.0f}% while the FP32 pipes are "
                    f"{fp32:.0f}% busy: matmuls in plain FP32 (a training job without mixed "
                    "precision?); enable TF32 (torch.backends.cuda.matmul.allow_tf32) or "
                    "bf16/fp16 autocast",
                    (("tensor_active", round(tensor, 1)), ("fp32_active", round(fp32, 1))),
                )
            )
    return out


def slope_per_s(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (t, value) points, per second (0 for fewer than two)."""
    n = len(points)
    if n < 2:
        return 0.0
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    if var == 0:
        return 0.0
    return sum((t - mean_t) * (v - mean_v) for t, v in points) / var


def grows_without_falling(values: list[float], max_drop_fraction: float) -> bool:
    """True when no value falls more than ``max_drop_fraction`` below the running peak."""
    peak = 0.0
    for v in values:
        peak = max(peak, v)
        if peak > 0 and v < peak * (1.0 - max_drop_fraction):
            return False
    return True


class FindingsEngine:
    """Feeds on snapshots in order; :meth:`update` returns the findings for the latest one."""

    def __init__(self, rules: FindingRules | None = None) -> None:
        self.rules = rules or FindingRules()
        self._memory: dict[str, SampledWindow] = {}
        self._idle_since: dict[str, float] = {}
        self._throttle = ThrottleTracker(self.rules.throttle_window_s)
        #: The CPU throttling figure of each container after the latest :meth:`update` (only
        #: containers whose counters were read at least twice).
        self.throttling: dict[str, Throttling] = {}

    def update(
        self, snapshot: Snapshot, shares: Mapping[int, tuple[Share, ...]] | None = None
    ) -> tuple[Finding, ...]:
        """Findings for ``snapshot`` given the ones seen before it.

        Args:
            snapshot: The latest snapshot.
            shares: Its :func:`gpu_shares`, where the caller has them already.
        """
        findings = sharing_findings(snapshot, shares)
        findings += gpm_findings(snapshot, self.rules)
        findings += self._growth(snapshot)
        self.throttling = {}
        for usage in snapshot.containers:
            findings += self._container_evidence(snapshot, usage)
        live = {u.info.id for u in snapshot.containers}
        # Bounded state: forget what is gone.
        self._idle_since = {k: v for k, v in self._idle_since.items() if k in live}
        self._throttle.forget(live)
        return tuple(findings)

    # -- memory growth ------------------------------------------------------------------------

    def _growth(self, snapshot: Snapshot) -> list[Finding]:
        now = snapshot.taken_at
        # Every GPU process and container is a series each refresh, but few ever grow: the
        # label is made, and the window's points copied, only for a series that might.
        series: dict[str, tuple[float, GpuProcess | ContainerUsage, int]] = {}
        for proc in snapshot.processes:
            if not proc.info.exists or proc.sample.used_memory_bytes is None:
                continue
            # A PID plus its start time names one process even when PIDs are reused.
            key = f"pid:{proc.pid}:{proc.info.start_time}"
            value, _, gpu = series.get(key, (0.0, proc, proc.sample.gpu_index))
            series[key] = (value + proc.sample.used_memory_bytes, proc, gpu)
        for usage in snapshot.containers:
            if usage.pids:
                key = f"container:{usage.info.id}"
                series[key] = (float(usage.gpu_memory_bytes), usage, usage.gpu_indexes[0])
        free = {
            g.index: (g.memory_total_bytes or 0) - (g.memory_used_bytes or 0) for g in snapshot.gpus
        }
        out = []
        for key, (value, party, gpu) in series.items():
            window = self._memory.get(key)
            if window is None:
                window = self._memory[key] = SampledWindow(self.rules.growth_window_s)
            window.add(now, value)
            if not self._may_grow(window):
                continue
            finding = self._growth_finding(
                key, _growth_label(party), window.points(), free.get(gpu, 0)
            )
            if finding is not None:
                out.append(finding)
        for key in [k for k in self._memory if k not in series]:
            del self._memory[key]
        return out

    def _may_grow(self, window: SampledWindow) -> bool:
        """Whether a window spans enough time and ends above its start (else no growth)."""
        ends = window.ends()
        if ends is None or len(window) < 3:
            return False
        (t0, v0), (t1, v1) = ends
        return t1 - t0 >= self.rules.growth_min_span_s and v1 > v0

    def _growth_finding(
        self, key: str, label: str, points: list[tuple[float, float]], free_bytes: int
    ) -> Finding | None:
        rules = self.rules
        if len(points) < 3 or points[-1][0] - points[0][0] < rules.growth_min_span_s:
            return None
        rate_mib_min = slope_per_s(points) * 60 / _MIB
        values = [v for _, v in points]
        if rate_mib_min < rules.growth_min_rate_mib_per_min or values[-1] <= values[0]:
            return None
        if not grows_without_falling(values, rules.growth_max_drop_fraction):
            return None
        fill_s = free_bytes / (rate_mib_min * _MIB / 60) if free_bytes > 0 else 0.0
        subject = key.rsplit(":", 1)[0] if key.startswith("pid:") else key
        return Finding(
            "memory_growth",
            subject,
            FindingSeverity.WARN,
            f"{label}: GPU memory grows {rate_mib_min:.0f} MiB/min without falling; "
            f"GPU full in {units.duration(fill_s)} at this rate",
            (
                ("rate_mib_per_min", round(rate_mib_min, 2)),
                ("time_to_fill_s", round(fill_s, 1)),
                ("window_s", round(points[-1][0] - points[0][0], 1)),
                ("memory_bytes", int(values[-1])),
            ),
        )

    # -- per container --------------------------------------------------------------------------

    def _container_evidence(self, snapshot: Snapshot, usage: ContainerUsage) -> list[Finding]:
        info = usage.info
        subject = f"container:{info.id}"
        name = sanitise.safe_text(info.name, 40)
        out: list[Finding] = []
        idle = self._idle(snapshot, usage)
        if idle is not None:
            out.append(idle)
        throttle = self._throttling(snapshot, usage)
        if throttle is not None:
            out.append(throttle)
        used, limit = info.memory_used_bytes, info.memory_limit_bytes
        host_total = snapshot.host_stats.memory_total_bytes if snapshot.host_stats else None
        limited = limit is not None and (host_total is None or limit < host_total)
        pressure = units.ratio(used, limit)
        if (
            info.running
            and limited
            and pressure is not None
            and pressure >= self.rules.memory_pressure_ratio * 100
        ):
            out.append(
                Finding(
                    "memory_pressure",
                    subject,
                    FindingSeverity.WARN,
                    f"{name}: memory at {pressure:.0f}% of its {units.size(limit)} limit",
                    (("memory_used_bytes", used or 0), ("memory_limit_bytes", limit or 0)),
                )
            )
        if info.oom_killed:
            out.append(
                Finding(
                    "oom_killed",
                    subject,
                    FindingSeverity.FAIL,
                    f"{name}: killed by the kernel's OOM killer (memory limit {units.size(limit)})",
                    (("exit_code", info.exit_code if info.exit_code is not None else -1),),
                )
            )
        if info.restart_count:
            out.append(
                Finding(
                    "restarting",
                    subject,
                    FindingSeverity.WARN if info.restart_count >= 3 else FindingSeverity.INFO,
                    f"{name}: restarted {info.restart_count} times",
                    (("restart_count", info.restart_count),),
                )
            )
        return out

    def _throttling(self, snapshot: Snapshot, usage: ContainerUsage) -> Finding | None:
        info = usage.info
        if info.cpu_periods is None or info.cpu_throttled_periods is None:
            return None
        figure = self._throttle.update(
            info.id, snapshot.taken_at, info.cpu_periods, info.cpu_throttled_periods
        )
        if figure is None:
            return None
        self.throttling[info.id] = figure
        if not info.running or figure.ratio < self.rules.throttle_ratio:
            return None
        cpus = info.cpu_quota_cpus
        quota = f" at its limit of {cpus:g} CPU{'' if cpus == 1 else 's'}" if cpus else ""
        return Finding(
            "cpu_throttled",
            f"container:{info.id}",
            FindingSeverity.WARN,
            f"{sanitise.safe_text(info.name, 40)}: CPU {figure.text()}{quota}",
            (
                ("throttled_ratio", round(figure.ratio, 4)),
                ("throttled_percent", figure.percent),
                ("window_s", figure.span_s),
                ("throttled_periods", figure.throttled),
                ("periods", figure.periods),
                ("throttled_seconds", info.cpu_throttled_seconds or 0.0),
                ("cpu_quota_cpus", info.cpu_quota_cpus or 0.0),
                ("cpu_percent", info.cpu_percent if info.cpu_percent is not None else -1),
            ),
        )

    def _idle(self, snapshot: Snapshot, usage: ContainerUsage) -> Finding | None:
        info = usage.info
        if (
            not usage.gpu_data
            or info.gpu_request is None
            or info.status not in ("running", "created", "restarting")
        ):
            # Without GPU data there is no idle verdict, and the idle clock starts again.
            self._idle_since.pop(info.id, None)
            return None
        sm = usage.sm_util or 0
        if usage.pids and sm >= self.rules.idle_sm_threshold:
            self._idle_since.pop(info.id, None)
            return None
        now = snapshot.taken_at
        since = self._idle_since.setdefault(info.id, now)
        observed = now - since
        wait = self.rules.low_util_min_s if usage.pids else self.rules.idle_min_s
        if observed < wait:
            return None
        name = sanitise.safe_text(info.name, 40)
        request = units.gpu_request(info.gpu_request)
        tokens = info.gpu_request if isinstance(info.gpu_request, tuple) else ()
        migs = [m for t in tokens if (m := mig_request(t, snapshot.gpus)) is not None]
        mig_names = ",".join(mig_device_name(g.index, m.index) for g, m in migs)
        if migs:
            # One MIG device is reserved, not its GPU: say which device, and its profile.
            profiles = ", ".join(m.profile for _, m in migs if m.profile)
            request = f"MIG device {mig_names}" + (f" ({profiles})" if profiles else "")
        elif any(is_mig_token(t) for t in tokens):
            request = f"MIG device {request}"
        request = sanitise.safe_text(request, 60)
        what = request if request.startswith("MIG") else f"GPU {request}"
        if info.status == "created":
            summary = f"{name}: reserved {what} but was never started"
        elif usage.pids:
            summary = f"{name}: holds {what} at {sm}% SM for {units.duration(observed)}"
        else:
            facts = [f"idle {units.duration(observed)}"] if observed > 0 else []
            if info.started_at:
                facts.append(f"up {units.duration(now - info.started_at)}")
            tail = f" ({', '.join(facts)})" if facts else ""
            summary = f"{name}: reserved {what} and runs no GPU process{tail}"
        return Finding(
            "idle_reservation",
            f"container:{info.id}",
            FindingSeverity.WARN,
            summary,
            (
                ("idle_seconds", round(observed, 1)),
                ("gpu_processes", len(usage.pids)),
                ("sm_util", sm),
                ("uptime_seconds", round(now - info.started_at, 1) if info.started_at else -1),
                *((("mig_devices", mig_names),) if mig_names else ()),
            ),
        )


def _growth_label(party: GpuProcess | ContainerUsage) -> str:
    """How a memory-growth finding names its process or container."""
    if isinstance(party, ContainerUsage):
        return f"container {sanitise.safe_text(party.info.name, 40)}"
    return f"PID {party.pid} ({sanitise.safe_text(party.info.name, 30)})"
