"""One card per GPU: gauges as bars with numbers, clocks, throttle reasons and sparklines.

When the panel is short (or the terminal narrow) it gets the ``-compact`` class and every GPU
collapses to one line, so eight GPUs fit on an 80x24 terminal next to the container tree.
"""

from __future__ import annotations

from collections.abc import Mapping

from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.events import Resize
from textual.widget import Widget
from textual.widgets import Label

from gputui.derive import fmt
from gputui.derive.findings import Share
from gputui.derive.history import History, gpu_key
from gputui.model import GpuSample
from gputui.ui.widgets.repaint import changed_regions
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
    if used is None:
        return fmt.NA  # "N/A/141GiB" reads badly; the total alone says nothing about use
    return f"{fmt.size(used)}/{fmt.size(total)}"


def _power_value(gpu: GpuSample) -> str:
    """``684/700W``; ``N/A`` (never a bare ``/700W``) when the reading is missing."""
    if gpu.power_w is None:
        return fmt.NA
    if gpu.power_limit_w is None:
        return fmt.watts(gpu.power_w)
    return f"{gpu.power_w:.0f}/{fmt.watts(gpu.power_limit_w)}"


def share_parts(shares: tuple[Share, ...], width: int) -> list[Part]:
    """``shared: trainer 62% SM 40 · host 38% SM 5``, fitted into ``width`` cells.

    The biggest parties come first; when they do not all fit, the smallest are folded into
    ``+N``, then names are shortened (never below 6 cells: a name is the point of the line).

    Args:
        shares: The GPU's parties, biggest first (two or more).
        width: Cells available.

    Returns:
        Styled parts; party names pass through ``safe_text``.
    """

    def figure(share: Share) -> str:
        sm = f" SM {share.sm_util}" if share.sm_util is not None else ""
        return f" {share.memory_share * 100:.0f}%{sm}"

    def needed(shown: tuple[Share, ...], names: int, rest: int) -> int:
        more = len(f" +{rest}") if rest else 0
        joins = 3 * (len(shown) - 1)
        return len("shared: ") + sum(len(figure(s)) for s in shown) + joins + names + more

    shown = shares
    while len(shown) > 2 and needed(shown, 6 * len(shown), len(shares) - len(shown)) > width:
        shown = shown[:-1]
    rest = len(shares) - len(shown)
    names = [fmt.safe_text(s.label, 40) for s in shown]
    room = width - needed(shown, 0, rest)
    if sum(len(n) for n in names) > room:
        each = max(6, room // len(shown))
        names = [fmt.safe_text(n, each) for n in names]
    parts: list[Part] = [("shared: ", "bold $text-warning")]
    for index, (share, name) in enumerate(zip(shown, names, strict=True)):
        if index:
            parts.append((" · ", "$text-muted"))
        parts += [(name, "bold"), figure(share)]
    if rest:
        parts.append((f" +{rest}", "$text-muted"))
    return parts


def compact_line(gpu: GpuSample, width: int, shared: bool = False) -> Content:
    """One line for one GPU: index, name, util and memory bars, temperature, power.

    Args:
        gpu: The sample.
        width: Cells available.
        shared: Two or more parties use the GPU: a ``⇄`` after the name says so.

    Returns:
        The styled line.
    """
    name = f"{_short_name(gpu.name)[:8]:<8}{' ⇄' if shared else '  '}"
    head = f"{gpu.index} {name} "
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


def card_lines(gpu: GpuSample, width: int, shares: tuple[Share, ...] = ()) -> Content:
    """The four gauge lines of a full card.

    Args:
        gpu: The sample.
        width: Cells available.
        shares: The GPU's parties; two or more put a ``shared:`` line in the title row (in place
            of P-state and fan, which matter less than who is competing for the GPU).

    Returns:
        Title, util + memory, temperature + power, clocks + throttle reasons.
    """
    title: list[Part] = [(f"GPU {gpu.index} ", "bold $accent"), (_short_name(gpu.name), "bold")]
    if gpu.lost:
        title += ["  ", (" LOST ", "bold reverse $text-error")]
        error = fmt.safe_text(gpu.error, max(10, width), na="GPU is lost (fallen off the bus?)")
        return Content.assemble(*title, "\n", (error, "$text-error"), "\n\n")
    if gpu.mig_mode_current:
        title += ["  ", ("MIG", "bold $text-accent")]
    if len(shares) >= 2:
        used = sum(len(p) if isinstance(p, str) else len(p[0]) for p in title)
        title += ["  ", *share_parts(shares, width - used - 2)]
    else:
        if gpu.pstate is not None:
            title += [("  P", "$text-muted"), str(gpu.pstate)]
        if gpu.fan_percent is not None:
            title += [("  fan ", "$text-muted"), fmt.pct(gpu.fan_percent)]
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
        self.shares: tuple[Share, ...] = ()
        self._shown: Content | None = None  # what the last render drew

    def set_sample(self, sample: GpuSample, shares: tuple[Share, ...] = ()) -> None:
        """Show a sample; frozen samples compare by value, so an unchanged GPU costs nothing."""
        if sample != self.sample or shares != self.shares:
            self.sample = sample
            self.shares = shares
            # Repaint only the cells that changed: at steady state util, power and the share
            # figures move while the name, clocks and most bars stay put.
            regions = changed_regions(self._shown, self._content(), self.size.width)
            if regions is None:
                self.refresh()
            elif regions:
                self.refresh(*regions)

    def render(self) -> Content:
        """Lay the gauges out for the current width and compactness."""
        self._shown = self._content()
        return self._shown

    def _content(self) -> Content:
        if self.sample is None:
            return Content("")
        width = self.size.width
        if self.parent is not None and self.parent.parent is not None:
            panel = self.parent.parent
            if panel.has_class("-compact"):
                return compact_line(self.sample, width, len(self.shares) >= 2)
        return card_lines(self.sample, width, self.shares)


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

    def show(
        self,
        sample: GpuSample,
        history: History,
        window: float,
        sparks: bool,
        shares: tuple[Share, ...] = (),
    ) -> None:
        """Update gauges always; sparklines only when shown and only with changed data."""
        self.gauges.set_sample(sample, shares)
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

    def show(
        self,
        gpus: tuple[GpuSample, ...],
        history: History,
        window: float,
        shares: Mapping[int, tuple[Share, ...]] | None = None,
    ) -> None:
        """Display the GPUs of one snapshot.

        Args:
            gpus: The samples, by index.
            history: Where the sparkline series come from.
            window: Seconds of history the sparklines show.
            shares: Per GPU index, the parties using it (from the snapshot's analysis).
        """
        shares = shares or {}
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
            self.cards[gpu.index].show(gpu, history, window, sparks, shares.get(gpu.index, ()))

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
