"""The History tab: per-GPU sparklines and the selected container's GPU memory.

GPU series are util %, memory % (of the GPU's memory), power W and temperature °C, and on a GPU
with NVML GPM (Hopper+) SM activity, tensor activity and DRAM bandwidth % under util; ``w`` cycles
the window (1 / 5 / 30 min). Every row prints its unit, the newest value and the window's min and
max; the title says how much of the window the history covers, and each sparkline spans the
window by time, so 5 minutes of a 30-minute window fill a sixth of its width. A GPU split into
MIG devices has one more row per device under its own: the device's memory in use, on the scale
of its memory (NVML's utilization has no figure per MIG device).
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.widget import Widget
from textual.widgets import Label, Static

from gputui.boundary import sanitise
from gputui.derive.history import (
    GPM_METRICS,
    GPU_METRICS,
    UNITS,
    HistoryReader,
    SeriesKey,
    container_key,
    coverage_label,
    gpu_key,
    mig_devices,
    mig_key,
    resample,
    value_summary,
)
from gputui.model.gpu import GpuSample, MigInstance
from gputui.model.mig import mig_device_name
from gputui.model.snapshot import ContainerUsage
from gputui.ui.widgets.spark import Spark

_METRIC_LABEL = {
    "util": "util %",
    "mem": "mem %",
    "power": "power W",
    "temp": "temp °C",
    "sm_act": "SM act %",
    "tensor": "tensor %",
    "dram": "DRAM bw %",
}


def mig_label(gpu: GpuSample, instance: MigInstance) -> str:
    """``3:0 3g.71gb``: a MIG device's row label, its name and profile (14 cells at most)."""
    name = mig_device_name(gpu.index, instance.index)
    return f"{name} {sanitise.safe_text(instance.profile, max(1, 13 - len(name)), na='?')}"


#: Columns of the numbers: ``12.5GiB  min 12.1GiB  max 12.9GiB`` is the widest a row prints.
VALUE_WIDTH = 34


class SeriesRow(Horizontal):
    """``label  ▁▂▃▅▇  now  min …  max …``: one series, with its unit.

    Args:
        name: The row's label.
        unit: ``%``, ``W``, ``°C`` or ``B`` (bytes), see :data:`gputui.derive.history.UNITS`.
    """

    DEFAULT_CSS = f"""
    SeriesRow {{ height: 1; }}
    SeriesRow .name {{ width: 14; color: $text-muted; }}
    SeriesRow Spark {{ width: 1fr; }}
    SeriesRow .value {{ width: {VALUE_WIDTH}; padding-left: 1; }}
    """

    def __init__(self, name: str, unit: str) -> None:
        super().__init__()
        self.unit = unit
        self.name_label = Label(name, classes="name")
        self.spark = Spark()
        self.value = Label("", classes="value")
        self.values: tuple[float, ...] = ()
        # What show_timed drew last, to place it again once the sparkline's width is known or
        # changes (a first draw before layout is one cell per sample).
        self._timed: tuple[HistoryReader, SeriesKey, float, float | None] | None = None

    def compose(self) -> ComposeResult:
        """Name, sparkline, numbers."""
        yield self.name_label
        yield self.spark
        yield self.value

    def show(self, values: tuple[float, ...], high: float | None = None) -> None:
        """Draw samples as they are (one cell each); see :meth:`show_timed` for a time axis."""
        self._draw(values, values, high)

    def show_timed(
        self,
        history: HistoryReader,
        key: SeriesKey,
        window: float,
        high: float | None = None,
    ) -> None:
        """Draw one series of ``history`` on a time axis spanning ``window`` seconds.

        Args:
            history: The ring buffers.
            key: Which series.
            window: Seconds the sparkline's width stands for.
            high: The top of the scale (default: the data's maximum).
        """
        self._timed = (history, key, window, high)
        times, values = history.timed(key, window)
        end = history.last_time
        cells = self.spark.size.width
        # Not laid out yet: one cell per sample; the next refresh places the samples by time.
        drawn = values if end is None or cells <= 0 else resample(times, values, end, window, cells)
        self._draw(values, drawn, high)

    def on_resize(self) -> None:
        """Place a time-axis sparkline again for its new width."""
        if self._timed is not None:
            self.show_timed(*self._timed)

    def _draw(
        self, values: tuple[float, ...], drawn: tuple[float, ...], high: float | None
    ) -> None:
        top = high if high is not None else max(values, default=1.0)
        self.spark.set_scale(0.0, top or 1.0)
        if drawn != self.spark.data:
            self.spark.data = drawn
        if values != self.values:
            self.values = values
            self.value.update(value_summary(values, self.unit))


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
        self.container_row = SeriesRow("container mem", UNITS[("container", "gpu_mem")])
        self.rows: dict[str, dict[str, SeriesRow]] = {}
        #: GPU id -> MIG series id -> the device's memory row, in the GPU's device order.
        self.mig_rows: dict[str, dict[str, SeriesRow]] = {}
        self._titles: dict[str, Static] = {}

    def compose(self) -> ComposeResult:
        """The title and the container row; GPU rows are mounted as GPUs appear."""
        yield self.title_label
        yield self.container_row

    def show(
        self,
        gpus: tuple[GpuSample, ...],
        history: HistoryReader,
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
        keys = [gpu_key(g, m) for g in gpus for m in GPU_METRICS]
        if container is not None:
            keys.append(container_key(container.info.id))
        covered = history.covered(keys, window)
        title = f"{coverage_label(covered, window)}  ·  w: change window"
        if str(self.title_label.content) != title:
            self.title_label.update(title)
        # The container row: GPU memory of the container selected in the tree, on the scale of
        # the memory of the GPUs it uses (so "half the GPU" looks like half).
        name = "no container" if container is None else sanitise.safe_text(container.info.name, 13)
        if str(self.container_row.name_label.content) != name:
            self.container_row.name_label.update(name)
        totals = [
            g.memory_total_bytes
            for g in gpus
            if container is not None
            and g.index in container.gpu_indexes
            and g.memory_total_bytes is not None
        ]
        scale = float(sum(totals)) if totals else None
        if container is None:
            self.container_row.show((), scale)
        else:
            self.container_row.show_timed(history, container_key(container.info.id), window, scale)
        ids = {gpu_key(g, "util")[1]: g for g in gpus}
        for gone in [i for i in self.rows if i not in ids]:
            for row in self.rows.pop(gone).values():
                row.remove()
            for row in self.mig_rows.pop(gone, {}).values():
                row.remove()
            self._titles.pop(gone).remove()
        for ident, gpu in ids.items():
            rows = self.rows.get(ident)
            if rows is None:
                title_widget = Static(
                    f"GPU {gpu.index}  {sanitise.safe_text(gpu.name, 40)}", classes="gpu-title"
                )
                rows = {m: SeriesRow(_METRIC_LABEL[m], UNITS[("gpu", m)]) for m in GPU_METRICS}
                self._titles[ident] = title_widget
                self.rows[ident] = rows
                widgets: list[Widget] = [title_widget, *rows.values()]
                self.mount_all(widgets)
            if gpu.gpm_sm_active is not None and "sm_act" not in rows:
                # GPM figures arrive with the second sample: their rows join under util then.
                gpm_rows = {m: SeriesRow(_METRIC_LABEL[m], UNITS[("gpu", m)]) for m in GPM_METRICS}
                self.mount_all(list(gpm_rows.values()), after=rows["util"])
                rows.update(gpm_rows)
            for metric, row in rows.items():
                high = gpu.power_limit_w if metric == "power" else 100.0
                row.show_timed(history, gpu_key(gpu, metric), window, high)
            self._show_mig(ident, gpu, history, window)

    def _show_mig(self, ident: str, gpu: GpuSample, history: HistoryReader, window: float) -> None:
        """One memory row per MIG device of ``gpu``, under the GPU's rows; gone devices go."""
        rows = self.mig_rows.setdefault(ident, {})
        devices = {mig_key(gpu, inst): inst for inst in mig_devices(gpu)}
        for gone in [k for k in rows if k not in {key[1] for key in devices}]:
            rows.pop(gone).remove()
        for key, inst in devices.items():
            row = rows.get(key[1])
            label = mig_label(gpu, inst)
            if row is None:
                row = rows[key[1]] = SeriesRow(label, UNITS[("mig", "mem")])
                # After the GPU's last row so far: its metrics, then its devices in order.
                others = [r for r in rows.values() if r is not row]
                after = others[-1] if others else list(self.rows[ident].values())[-1]
                self.mount(row, after=after)
            elif str(row.name_label.content) != label:
                row.name_label.update(label)  # same device index, reconfigured profile
            total = inst.memory_total_bytes
            row.show_timed(history, key, window, None if total is None else float(total))
