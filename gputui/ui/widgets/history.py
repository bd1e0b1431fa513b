"""The History tab: per-GPU sparklines and the selected container's GPU memory.

GPU series are util, memory, power and temperature; ``w`` cycles the window (1 / 5 / 30 min).
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.widget import Widget
from textual.widgets import Label, Static

from gputui.derive import fmt
from gputui.derive.history import GPU_METRICS, History, container_key, gpu_key, window_label
from gputui.model import ContainerUsage, GpuSample
from gputui.ui.widgets.spark import Spark

_METRIC_LABEL = {"util": "util %", "mem": "mem %", "power": "power W", "temp": "temp °C"}


def _latest(values: tuple[float, ...], metric: str) -> str:
    if not values:
        return fmt.NA
    last, peak = values[-1], max(values)
    if metric == "power":
        return f"{last:.0f} (max {peak:.0f})"
    if metric in ("gpu_mem", "mem"):
        return f"{fmt.size(last)} (max {fmt.size(peak)})"
    if metric == "cpu":
        return f"{last:.0f}% (max {peak:.0f}%)"
    return f"{last:.0f} (max {peak:.0f})"


class SeriesRow(Horizontal):
    """``label  ▁▂▃▅▇  last (max)``: one series."""

    DEFAULT_CSS = """
    SeriesRow { height: 1; }
    SeriesRow .name { width: 14; color: $text-muted; }
    SeriesRow Spark { width: 1fr; }
    SeriesRow .value { width: 22; padding-left: 1; }
    """

    def __init__(self, name: str, metric: str) -> None:
        super().__init__()
        self.metric = metric
        self.name_label = Label(name, classes="name")
        self.spark = Spark()
        self.value = Label("", classes="value")

    def compose(self) -> ComposeResult:
        """Name, sparkline, numbers."""
        yield self.name_label
        yield self.spark
        yield self.value

    def show(self, values: tuple[float, ...], high: float | None = None) -> None:
        """Assign fresh data only when it changed; ``high`` sets the scale (default: data max)."""
        top = high if high is not None else max(values, default=1.0)
        self.spark.set_scale(0.0, top or 1.0)
        if values != self.spark.data:
            self.spark.data = values
            self.value.update(_latest(values, self.metric))


class HistoryPanel(VerticalScroll):
    """Sparklines keyed by GPU id, plus the selected container's GPU memory."""

    DEFAULT_CSS = """
    HistoryPanel .title { height: 1; text-style: bold; }
    HistoryPanel .gpu-title { height: 1; margin-top: 1; color: $accent; text-style: bold; }
    """

    can_focus = True  # so the History tab can be scrolled with the keyboard

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.title_label = Static("", classes="title")
        self.container_row = SeriesRow("container mem", "gpu_mem")
        self.rows: dict[str, dict[str, SeriesRow]] = {}
        self._titles: dict[str, Static] = {}

    def compose(self) -> ComposeResult:
        """The title and the container row; GPU rows are mounted as GPUs appear."""
        yield self.title_label
        yield self.container_row

    def show(
        self,
        gpus: tuple[GpuSample, ...],
        history: History,
        window: float,
        container: ContainerUsage | None,
    ) -> None:
        """Refresh every series for the given window.

        Args:
            gpus: GPUs of the current snapshot.
            history: The ring buffers.
            window: Seconds to show.
            container: The container selected in the tree, if any.
        """
        title = f"last {window_label(window)}  ·  w: change window"
        if str(self.title_label.content) != title:
            self.title_label.update(title)
        # The container row: GPU memory of the container selected in the tree, on the scale of
        # the memory of the GPUs it uses (so "half the GPU" looks like half).
        name = "no container" if container is None else fmt.safe_text(container.info.name, 13)
        if str(self.container_row.name_label.content) != name:
            self.container_row.name_label.update(name)
        totals = [
            g.memory_total_bytes
            for g in gpus
            if container is not None
            and g.index in container.gpu_indexes
            and g.memory_total_bytes is not None
        ]
        self.container_row.show(
            () if container is None else history.series(container_key(container.info.id), window),
            float(sum(totals)) if totals else None,
        )
        ids = {gpu_key(g, "util")[1]: g for g in gpus}
        for gone in [i for i in self.rows if i not in ids]:
            for row in self.rows.pop(gone).values():
                row.remove()
            self._titles.pop(gone).remove()
        for ident, gpu in ids.items():
            rows = self.rows.get(ident)
            if rows is None:
                title_widget = Static(
                    f"GPU {gpu.index}  {fmt.safe_text(gpu.name, 40)}", classes="gpu-title"
                )
                rows = {m: SeriesRow(_METRIC_LABEL[m], m) for m in GPU_METRICS}
                self._titles[ident] = title_widget
                self.rows[ident] = rows
                widgets: list[Widget] = [title_widget, *rows.values()]
                self.mount_all(widgets)
            for metric, row in rows.items():
                high = gpu.power_limit_w if metric == "power" else 100.0
                row.show(history.series(gpu_key(gpu, metric), window), high)
