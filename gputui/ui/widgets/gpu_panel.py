"""One card per GPU: gauges as bars with numbers, clocks, throttle reasons and sparklines.

When the panel is short (or the terminal narrow) it gets the ``-compact`` class and every GPU
collapses to one line, so eight GPUs fit on an 80x24 terminal next to the container tree.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.events import Resize
from textual.widget import Widget
from textual.widgets import Label

from gputui.derive import fmt
from gputui.derive.history import History, gpu_key
from gputui.model import GpuSample
from gputui.ui.widgets.spark import Spark

#: Lines one full card takes (4 gauge lines + the sparkline row).
CARD_HEIGHT = 5

Part = str | tuple[str, str]


def _level_style(percent: float | None, warn: float = 80.0, high: float = 95.0) -> str:
    if percent is None:
        return "$text-muted"
    if percent >= high:
        return "$text-error"
    if percent >= warn:
        return "$text-warning"
    return "$text-success"


def _gauge(label: str, percent: float | None, value: str, width: int) -> list[Part]:
    """``label ██████▌   value`` exactly ``width`` cells wide (value right-aligned)."""
    bar_width = max(3, width - len(label) - len(value) - 2)
    return [
        (label, "$text-muted"),
        " ",
        (fmt.bar(percent, bar_width), _level_style(percent)),
        " ",
        (value.rjust(max(0, width - len(label) - bar_width - 2)), "bold"),
    ]


def _short_name(name: str | None) -> str:
    text = fmt.safe_text(name, 40, na="GPU")
    return text.removeprefix("NVIDIA ").strip() or text


def _mem_value(gpu: GpuSample) -> str:
    used, total = gpu.memory_used_bytes, gpu.memory_total_bytes
    return f"{fmt.size(used)}/{fmt.size(total)}"


def _power_value(gpu: GpuSample) -> str:
    if gpu.power_limit_w is None:
        return fmt.watts(gpu.power_w)
    return f"{fmt.watts(gpu.power_w, na='?')[:-1]}/{fmt.watts(gpu.power_limit_w)}"


def compact_line(gpu: GpuSample, width: int) -> Content:
    """One line for one GPU: index, name, util and memory bars, temperature, power.

    Args:
        gpu: The sample.
        width: Cells available.

    Returns:
        The styled line.
    """
    head = f"{gpu.index} {_short_name(gpu.name)[:10]:<10} "
    if gpu.lost:
        return Content.assemble(
            (head, "bold"),
            (" LOST ", "bold reverse $text-error"),
            " ",
            (
                fmt.safe_text(gpu.error, max(0, width - len(head) - 7), na="GPU is lost"),
                "$text-error",
            ),
        )
    tail = f" {fmt.temp(gpu.temperature_c):>5} {_power_value(gpu):>9}"
    rest = max(20, width - len(head) - len(tail))
    util_w = rest * 2 // 5
    mem_w = rest - util_w - 1
    util = gpu.utilization_gpu
    temp = None if gpu.temperature_c is None else float(gpu.temperature_c)
    mem_pct = fmt.ratio(gpu.memory_used_bytes, gpu.memory_total_bytes)
    throttled = fmt.throttle(gpu.throttle_reasons) not in ("none", fmt.NA)
    return Content.assemble(
        (head, "bold $text-warning" if throttled else "bold"),
        *_gauge("util", util, fmt.pct(util), util_w),
        " ",
        *_gauge("mem", mem_pct, _mem_value(gpu), mem_w),
        (
            tail,
            _level_style(temp, 80, 88),
        ),
    )


def card_lines(gpu: GpuSample, width: int) -> Content:
    """The four gauge lines of a full card.

    Args:
        gpu: The sample.
        width: Cells available.

    Returns:
        Title, util + memory, temperature + power, clocks + throttle reasons.
    """
    title: list[Part] = [(f"GPU {gpu.index} ", "bold $accent"), (_short_name(gpu.name), "bold")]
    if gpu.lost:
        title += ["  ", (" LOST ", "bold reverse $text-error")]
        error = fmt.safe_text(gpu.error, max(10, width), na="GPU is lost (fallen off the bus?)")
        return Content.assemble(*title, "\n", (error, "$text-error"), "\n\n")
    if gpu.pstate is not None:
        title += [("  P", "$text-muted"), str(gpu.pstate)]
    if gpu.fan_percent is not None:
        title += [("  fan ", "$text-muted"), fmt.pct(gpu.fan_percent)]
    if gpu.mig_mode_current:
        title += ["  ", ("MIG", "bold $text-accent")]
    half = max(16, (width - 2) // 2)
    mem_pct = fmt.ratio(gpu.memory_used_bytes, gpu.memory_total_bytes)
    temp = None if gpu.temperature_c is None else float(gpu.temperature_c)
    power_pct = fmt.ratio(gpu.power_w, gpu.power_limit_w)
    reasons = fmt.throttle(gpu.throttle_reasons)
    reason_style = "$text-muted" if reasons in ("none", fmt.NA) else "bold $text-warning"
    return Content.assemble(
        *title,
        "\n",
        *_gauge("util", gpu.utilization_gpu, fmt.pct(gpu.utilization_gpu), half),
        "  ",
        *_gauge("mem ", mem_pct, _mem_value(gpu), half),
        "\n",
        *_gauge("temp", temp, fmt.temp(gpu.temperature_c), half),
        "  ",
        *_gauge("pwr ", power_pct, _power_value(gpu), half),
        "\n",
        ("SM ", "$text-muted"),
        fmt.mhz(gpu.clock_sm_mhz),
        ("  MEM ", "$text-muted"),
        fmt.mhz(gpu.clock_mem_mhz),
        ("  throttle ", "$text-muted"),
        (reasons, reason_style),
    )


class GpuGauges(Widget):
    """The text part of a card; re-renders only when its sample (or width) changes."""

    DEFAULT_CSS = """
    GpuGauges { height: 4; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.sample: GpuSample | None = None

    def set_sample(self, sample: GpuSample) -> None:
        """Show a sample; frozen samples compare by value, so an unchanged GPU costs nothing."""
        if sample != self.sample:
            self.sample = sample
            self.refresh()

    def render(self) -> Content:
        """Lay the gauges out for the current width and compactness."""
        if self.sample is None:
            return Content("")
        width = self.size.width
        if self.parent is not None and self.parent.parent is not None:
            panel = self.parent.parent
            if panel.has_class("-compact"):
                return compact_line(self.sample, width)
        return card_lines(self.sample, width)


class GpuCard(Widget):
    """One GPU: gauges above a util / memory sparkline row."""

    DEFAULT_CSS = """
    GpuCard { height: auto; }
    GpuCard .sparks { height: 1; }
    GpuCard .sparks Label { width: 5; color: $text-muted; }
    GpuCard .sparks Spark { margin-right: 1; }
    GpuCard .sparks Spark.mem { color: $secondary; }
    """

    def __init__(self, index: int) -> None:
        super().__init__(id=f"gpu-{index}")
        self.index = index
        self.gauges = GpuGauges()
        self.util_spark = Spark(classes="util")
        self.mem_spark = Spark(classes="mem")

    def compose(self) -> ComposeResult:
        """Gauges, then the sparkline row."""
        yield self.gauges
        with Horizontal(classes="sparks"):
            yield Label("util")
            yield self.util_spark
            yield Label("mem")
            yield self.mem_spark

    def show(self, sample: GpuSample, history: History, window: float, sparks: bool) -> None:
        """Update gauges always; sparklines only when shown and only with changed data."""
        self.gauges.set_sample(sample)
        self.set_class(sample.lost, "-lost")
        if not sparks:
            return
        for spark, metric in ((self.util_spark, "util"), (self.mem_spark, "mem")):
            data = history.series(gpu_key(sample, metric), window)
            if data != spark.data:
                spark.data = data


class GpuPanel(VerticalScroll):
    """The cards, keyed by GPU index; mounts and removes cards only when the GPU set changes."""

    # Nested under GpuPanel because DEFAULT_CSS is scoped to the widget that declares it.
    DEFAULT_CSS = """
    GpuPanel {
        height: 1fr;
        &.-compact {
            GpuGauges { height: 1; }
            GpuCard .sparks { display: none; }
        }
    }
    """

    can_focus = False

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.cards: dict[int, GpuCard] = {}

    def show(self, gpus: tuple[GpuSample, ...], history: History, window: float) -> None:
        """Display the GPUs of one snapshot.

        Args:
            gpus: The samples, by index.
            history: Where the sparkline series come from.
            window: Seconds of history the sparklines show.
        """
        indexes = [gpu.index for gpu in gpus]
        if list(self.cards) != indexes:
            for index in [i for i in self.cards if i not in indexes]:
                self.cards.pop(index).remove()
            for gpu in gpus:
                if gpu.index not in self.cards:
                    self.cards[gpu.index] = card = GpuCard(gpu.index)
                    self.mount(card)
            self.cards = {i: self.cards[i] for i in indexes}
            self.update_compact()
        sparks = not self.has_class("-compact")
        for gpu in gpus:
            self.cards[gpu.index].show(gpu, history, window, sparks)

    def update_compact(self) -> None:
        """Cards when they fit, one line per GPU when they do not (or the screen is narrow)."""
        narrow = self.screen.has_class("-narrow") if self.is_attached else False
        compact = narrow or self.size.height < len(self.cards) * CARD_HEIGHT
        if compact != self.has_class("-compact"):
            self.set_class(compact, "-compact")
            for card in self.cards.values():
                card.gauges.refresh(layout=True)

    def on_resize(self, event: Resize) -> None:
        """Re-decide compactness whenever the space changes."""
        self.update_compact()
