"""A time window over one series that keeps a bounded number of points, whatever the refresh rate.

Trend detectors (memory growth, dynamic alert bounds) look back minutes to half an hour. Keeping
every sample would cost memory and CPU in proportion to the refresh rate: at 10 Hz a 30-minute
window holds 18,000 samples per series, and the TUI grew by hundreds of MB per hour. Samples that
fall within one step (window / points) of the current point are folded into it instead.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

#: How two samples within one step become one point: keep the lower (so a fall is never hidden
#: from a "grows without falling" test) or the newer (a plain subsample, for statistics).
LOWER: Callable[[float, float], float] = min


def newer(_old: float, new: float) -> float:
    """Keep the newer value of two samples in one step."""
    return new


class SampledWindow:
    """Up to about ``points`` (time, value) points spanning the last ``window_s`` seconds."""

    __slots__ = ("_combine", "_points", "_start", "step", "window_s")

    def __init__(
        self,
        window_s: float,
        points: int = 240,
        combine: Callable[[float, float], float] = LOWER,
    ) -> None:
        self.window_s = window_s
        self.step = window_s / points
        self._combine = combine
        self._points: deque[tuple[float, float]] = deque()
        self._start = float("-inf")  # when the newest point's step began

    def add(self, t: float, value: float) -> None:
        """Add a sample at time ``t`` (non-decreasing) and drop what fell out of the window."""
        if self._points and t - self._start < self.step:
            last_v = self._points[-1][1]
            self._points[-1] = (t, self._combine(last_v, value))
        else:
            self._points.append((t, value))
            self._start = t
        while self._points and self._points[0][0] < t - self.window_s:
            self._points.popleft()

    def ends(self) -> tuple[tuple[float, float], tuple[float, float]] | None:
        """The oldest and the newest point (None when empty), without copying the rest."""
        if not self._points:
            return None
        return self._points[0], self._points[-1]

    def points(self) -> list[tuple[float, float]]:
        """The kept points, oldest first."""
        return list(self._points)

    def values(self) -> list[float]:
        """The kept values, oldest first."""
        return [v for _, v in self._points]

    def __len__(self) -> int:
        return len(self._points)
