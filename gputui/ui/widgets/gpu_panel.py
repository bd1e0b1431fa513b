"""One card per GPU: gauges as bars with numbers, clocks, throttle reasons and sparklines.

The screen's layout (:mod:`gputui.ui.layout`) picks the style: full cards, one line per GPU
(the ``-compact`` class), one summary line for all (``-summary``: many GPUs on a small terminal,
or the panel collapsed with ``v``), or, without any GPU, why and what to do (``-empty``).
"""

from __future__ import annotations

from collections.abc import Mapping

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.events import Click, Resize
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Static

from gputui.boundary import sanitise
from gputui.derive import units
from gputui.derive.findings import Share
from gputui.derive.history import HistoryReader, gpu_key
from gputui.model.gpu import GpuSample
from gputui.model.mig import mig_device_name
from gputui.ui.layout import CARD_HEIGHT, GpuStyle
from gputui.ui.widgets.repaint import LineCachedWidget
from gputui.ui.widgets.spark import SparkPair

__all__ = ["CARD_HEIGHT", "GpuCard", "GpuPanel", "card_lines", "compact_line", "summary_line"]

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
        (units.bar(percent, bar_width), _level_style(percent)),
        " ",
        (value.rjust(max(0, width - len(label) - bar_width - 2)), "bold"),
    ]


def _short_name(name: str | None) -> str:
    text = sanitise.safe_text(name, 40, na="GPU")
    return text.removeprefix("NVIDIA ").strip() or text


def _mem_value(gpu: GpuSample) -> str:
    used, total = gpu.memory_used_bytes, gpu.memory_total_bytes
    if used is None:
        return sanitise.NA  # "N/A/141GiB" reads badly; the total alone says nothing about use
    return f"{units.size(used)}/{units.size(total)}"


def _power_value(gpu: GpuSample) -> str:
    """``684/700W``; ``N/A`` (never a bare ``/700W``) when the reading is missing."""
    if gpu.power_w is None:
        return sanitise.NA
    if gpu.power_limit_w is None:
        return units.watts(gpu.power_w)
    return f"{gpu.power_w:.0f}/{units.watts(gpu.power_limit_w)}"


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
    names = [sanitise.safe_text(s.label, 40) for s in shown]
    room = width - needed(shown, 0, rest)
    if sum(len(n) for n in names) > room:
        each = max(6, room // len(shown))
        names = [sanitise.safe_text(n, each) for n in names]
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
                sanitise.safe_text(gpu.error, max(0, width - len(head) - 7), na="GPU is lost"),
                "$text-error",
            ),
        )
    tail = f" {units.temp(gpu.temperature_c):>5} {_power_value(gpu):>9}"
    rest = max(20, width - len(head) - len(tail))
    util_w = rest * 2 // 5
    util = gpu.utilization_gpu
    temp = None if gpu.temperature_c is None else float(gpu.temperature_c)
    mem_pct = units.ratio(gpu.memory_used_bytes, gpu.memory_total_bytes)
    throttled = units.throttle(gpu.throttle_reasons) not in ("none", sanitise.NA)
    act: list[Part] = []
    if gpu.gpm_sm_active is not None:
        # SM activity beside util, never in its place: util is "a kernel was running".
        act = [(" SM act", "$text-muted"), (f"{units.pct(gpu.gpm_sm_active):>5}", "bold")]
        # Its cells come out of util's bar first: memory keeps room for its whole value.
        mem_need = len("mem") + len(_mem_value(gpu)) + 2 + 3
        util_w = max(12, min(util_w, rest - 1 - _plain_width(act) - mem_need))
    mem_w = rest - util_w - 1 - _plain_width(act)
    util_parts = [*_gauge("util", util, units.pct(util), util_w), *act]
    if util is None and gpu.mig_mode_current and gpu.mig_instances:
        # No utilization on a MIG GPU: its devices' memory use takes the gauge's cells.
        listed = [("MIG ", "bold $text-accent"), *mig_parts(gpu)]
        if _plain_width(listed) > util_w:
            # Every device's memory before any device's GPM util: drop util when all do not fit.
            listed = [("MIG ", "bold $text-accent"), *mig_parts(gpu, util=False)]
        devices = _fit_text(listed, util_w)
        util_parts = [*devices, " " * max(0, util_w - _plain_width(devices))]
    return Content.assemble(
        (head, "bold $text-warning" if throttled else "bold"),
        *util_parts,
        " ",
        *_gauge("mem", mem_pct, _mem_value(gpu), mem_w),
        (
            tail,
            _level_style(temp, 80, 88),
        ),
    )


def _plain_width(parts: list[Part]) -> int:
    return sum(len(p) if isinstance(p, str) else len(p[0]) for p in parts)


def _fitted(parts: list[Part], width: int) -> Content:
    """One line of parts, cut with an ellipsis at ``width`` cells: a card line never wraps."""
    line = Content.assemble(*parts)
    return line.truncate(max(1, width), ellipsis=True) if line.cell_length > width else line


def _rate(kbps: int | None) -> str:
    """PCIe throughput (NVML reports KB/s) as ``1.2GiB/s``."""
    return sanitise.NA if kbps is None else f"{units.size(kbps * 1024)}/s"


def title_parts(gpu: GpuSample, width: int, shares: tuple[Share, ...] = ()) -> list[Part]:
    """``GPU 0 H200  MIG  shared: a 62% · b 38%``: the name gives way before the parties do.

    Args:
        gpu: The sample.
        width: Cells available; the result never exceeds it (names are cut with ``…``).
        shares: The GPU's parties; two or more add the ``shared:`` figures.

    Returns:
        Styled parts of one line.
    """
    head = f"GPU {gpu.index} "
    mig: list[Part] = ["  ", ("MIG", "bold $text-accent")] if gpu.mig_mode_current else []
    name = _short_name(gpu.name)
    sharing: list[Part] = []
    if len(shares) >= 2:
        # The name keeps at least 8 cells; the sharing line gets the rest and fits itself.
        room = width - len(head) - min(len(name), 8) - _plain_width(mig) - 2
        if room >= 16:
            sharing = ["  ", *share_parts(shares, room)]
    elif mig and gpu.mig_instances:
        # A MIG GPU is split, not shared: its devices and their memory fill the sharing room.
        room = width - len(head) - min(len(name), 8) - _plain_width(mig) - 2
        if room >= 16:
            sharing = ["  ", *_fit_text(mig_parts(gpu), room)]
    room = max(1, width - len(head) - _plain_width(mig) - _plain_width(sharing))
    if len(name) > room:
        name = name[: max(0, room - 1)] + "…"
    return [(head, "bold $accent"), (name, "bold"), *mig, *sharing]


def _util_value(gpu: GpuSample) -> str:
    """Utilization; on a MIG GPU, where NVML measures none, ``N/A MIG`` says why."""
    if gpu.utilization_gpu is None and gpu.mig_mode_current:
        return f"{sanitise.NA} MIG"
    return units.pct(gpu.utilization_gpu)


def mig_parts(gpu: GpuSample, util: bool = True) -> list[Part]:
    """``0:0 3g.71gb 28% · 0:1 1g.18gb 0%``: each MIG device, its profile and memory in use.

    Where GPM measures the device's GPU instance, its utilization follows, named
    (``0:0 3g.71gb 28% util 44%``). A GPU instance without a compute instance shows as
    ``GI 5 no CI``: nothing can run there.
    """
    parts: list[Part] = []
    for inst in gpu.mig_instances:
        if parts:
            parts.append((" · ", "$text-muted"))
        if inst.index < 0:
            parts.append((f"GI {inst.gpu_instance_id} no CI", "$text-warning"))
            continue
        pct = units.ratio(inst.memory_used_bytes, inst.memory_total_bytes)
        parts += [
            (mig_device_name(gpu.index, inst.index), "bold"),
            (f" {sanitise.safe_text(inst.profile, 12, na='?')} ", "$text-muted"),
        ]
        parts.append((units.pct(pct), _level_style(pct)))
        if util and inst.gpm_graphics_active is not None:
            # NVML has no utilization per MIG device; GPM measures its GPU instance.
            active = inst.gpm_graphics_active
            parts += [(" util ", "$text-muted"), (units.pct(active), _level_style(active))]
    return parts


def _fit_text(parts: list[Part], width: int) -> list[Part]:
    """``parts`` cut at ``width`` cells with ``…`` (a title segment that must not wrap)."""
    out: list[Part] = []
    used = 0
    for part in parts:
        text, style = (part, "") if isinstance(part, str) else part
        if used + len(text) > width:
            out.append((text[: max(0, width - used - 1)] + "…", style))
            break
        out.append(part)
        used += len(text)
    return out


def detail_parts(gpu: GpuSample) -> list[Part]:
    """PCIe rx/tx, encoder/decoder and ECC: what NVML has beyond the gauges (N/A when absent)."""
    parts: list[Part] = [
        ("PCIe rx ", "$text-muted"),
        _rate(gpu.pcie_rx_kbps),
        (" tx ", "$text-muted"),
        _rate(gpu.pcie_tx_kbps),
        ("  enc ", "$text-muted"),
        units.pct(gpu.encoder_util),
        (" dec ", "$text-muted"),
        units.pct(gpu.decoder_util),
    ]
    if gpu.ecc_mode_current is not None:
        parts.append(("  ECC ", "$text-muted"))
        if not gpu.ecc_mode_current:
            parts.append("off")
        else:
            errors = gpu.ecc_uncorrected_volatile
            bad = bool(errors) or bool(gpu.remapped_rows_failure)
            text = "on" if errors is None else f"on, {errors} uncorrected"
            if gpu.remapped_rows_failure:
                text += ", row remap failed"
            parts.append((text, "bold $text-error") if bad else text)
    return parts


def card_lines(gpu: GpuSample, width: int, shares: tuple[Share, ...] = ()) -> Content:
    """The five text lines of a full card, each cut to ``width`` (never wrapped).

    Args:
        gpu: The sample.
        width: Cells available.
        shares: The GPU's parties; two or more put a ``shared:`` figure in the title row
            (the name is shortened first; P-state and fan live on the clocks line, so sharing
            never hides them).

    Returns:
        Title; util + memory; temperature + power; clocks, P-state, fan and throttle reasons;
        PCIe rx/tx, encoder/decoder and ECC.
    """
    title = title_parts(gpu, width, shares)
    if gpu.lost:
        title = [*title_parts(gpu, width - 8), "  ", (" LOST ", "bold reverse $text-error")]
        error = sanitise.safe_text(
            gpu.error, max(10, width), na="GPU is lost (fallen off the bus?)"
        )
        return Content("\n").join(
            [_fitted(title, width), _fitted([(error, "$text-error")], width), "", "", ""]
        )
    half = max(16, (width - 2) // 2)
    mem_pct = units.ratio(gpu.memory_used_bytes, gpu.memory_total_bytes)
    temp = None if gpu.temperature_c is None else float(gpu.temperature_c)
    power_pct = units.ratio(gpu.power_w, gpu.power_limit_w)
    reasons = units.throttle(gpu.throttle_reasons)
    reason_style = "$text-muted" if reasons in ("none", sanitise.NA) else "bold $text-warning"
    clocks: list[Part] = [
        ("SM ", "$text-muted"),
        units.mhz(gpu.clock_sm_mhz),
        ("  MEM ", "$text-muted"),
        units.mhz(gpu.clock_mem_mhz),
    ]
    if gpu.pstate is not None:
        clocks += [("  P", "$text-muted"), str(gpu.pstate)]
    if gpu.fan_percent is not None:
        clocks += [("  fan ", "$text-muted"), units.pct(gpu.fan_percent)]
    clocks += [("  throttle ", "$text-muted"), (reasons, reason_style)]
    if gpu.gpm_sm_active is not None:
        # GPM on this GPU: SM activity gets the second gauge of util's line, so the two are
        # read side by side; memory and power share the next line, temperature leads the clocks.
        clocks = [(f"{units.temp(gpu.temperature_c)}  ", _level_style(temp, 80, 88)), *clocks]
        gpm: list[Part] = [
            ("tensor ", "$text-muted"),
            units.pct(gpu.gpm_tensor_active),
            ("  DRAM bw ", "$text-muted"),
            units.pct(gpu.gpm_dram_active),
            ("  occup ", "$text-muted"),
            units.pct(gpu.gpm_sm_occupancy),
            "  ",
        ]
        return Content("\n").join(
            [
                _fitted(title, width),
                _fitted(
                    [
                        *_gauge("util", gpu.utilization_gpu, _util_value(gpu), half),
                        "  ",
                        *_gauge("SM act", gpu.gpm_sm_active, units.pct(gpu.gpm_sm_active), half),
                    ],
                    width,
                ),
                _fitted(
                    [
                        *_gauge("mem ", mem_pct, _mem_value(gpu), half),
                        "  ",
                        *_gauge("pwr ", power_pct, _power_value(gpu), half),
                    ],
                    width,
                ),
                _fitted(clocks, width),
                _fitted([*gpm, *detail_parts(gpu)], width),
            ]
        )
    lines = [
        _fitted(title, width),
        _fitted(
            [
                *_gauge("util", gpu.utilization_gpu, _util_value(gpu), half),
                "  ",
                *_gauge("mem ", mem_pct, _mem_value(gpu), half),
            ],
            width,
        ),
        _fitted(
            [
                *_gauge("temp", temp, units.temp(gpu.temperature_c), half),
                "  ",
                *_gauge("pwr ", power_pct, _power_value(gpu), half),
            ],
            width,
        ),
        _fitted(clocks, width),
        _fitted(detail_parts(gpu), width),
    ]
    return Content("\n").join(lines)


def summary_line(gpus: tuple[GpuSample, ...], width: int, collapsed: bool) -> Content:
    """All GPUs on one line: count, mean and peak util, memory, hottest, power, lost ones.

    Args:
        gpus: The samples.
        width: Cells available (the line is cut with ``…``).
        collapsed: The user collapsed the panel: say which key expands it.

    Returns:
        The styled line.
    """
    alive = [g for g in gpus if not g.lost]
    utils = [g.utilization_gpu for g in alive if g.utilization_gpu is not None]
    used = [g.memory_used_bytes for g in alive if g.memory_used_bytes is not None]
    total = [g.memory_total_bytes for g in alive if g.memory_total_bytes is not None]
    temps = [g.temperature_c for g in alive if g.temperature_c is not None]
    power = [g.power_w for g in alive if g.power_w is not None]
    mean = sum(utils) / len(utils) if utils else None
    parts: list[Part] = [(f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''}", "bold $accent")]
    parts += [("  util ", "$text-muted"), (units.pct(mean), _level_style(mean))]
    if utils:
        parts += [("  max ", "$text-muted"), units.pct(max(utils))]
    active = [g.gpm_sm_active for g in alive if g.gpm_sm_active is not None]
    if active:
        # Beside util, never instead of it: how much of the GPUs worked (NVML GPM).
        mean_act = sum(active) / len(active)
        parts += [("  SM act ", "$text-muted"), (units.pct(mean_act), _level_style(mean_act))]
    mem = f"{units.size(sum(used))}/{units.size(sum(total))}" if used and total else sanitise.NA
    parts += [("  mem ", "$text-muted"), mem]
    hottest = max(temps) if temps else None
    parts += [("  max ", "$text-muted"), (units.temp(hottest), _level_style(hottest, 80, 88))]
    parts += [("  pwr ", "$text-muted"), units.watts(sum(power)) if power else sanitise.NA]
    lost = len(gpus) - len(alive)
    if lost:
        parts += ["  ", (f" {lost} LOST ", "bold reverse $text-error")]
    throttled = sum(
        1 for g in alive if units.throttle(g.throttle_reasons) not in ("none", sanitise.NA)
    )
    if throttled:
        parts += [("  throttled ", "$text-muted"), (str(throttled), "bold $text-warning")]
    if collapsed:
        parts += [("   v: show GPUs", "$text-muted")]
    return _fitted(parts, width)


class GpuGauges(LineCachedWidget):
    """The text part of a card; re-renders only the lines whose figures changed."""

    DEFAULT_CSS = """
    GpuGauges { height: 5; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.sample: GpuSample | None = None
        self.shares: tuple[Share, ...] = ()
        #: The content for the sample at a width and style (compact or not), built once: both
        #: the repaint regions and the render need it.
        self._built: tuple[tuple[int, bool], Content] | None = None
        self._shown: Content | None = None  # the content the screen shows (or is about to)

    def set_sample(self, sample: GpuSample, shares: tuple[Share, ...] = ()) -> None:
        """Show a sample; frozen samples compare by value, so an unchanged GPU costs nothing."""
        if sample != self.sample or shares != self.shares:
            self.sample = sample
            self.shares = shares
            self._built = None
            # Repaint only the cells that changed: at steady state util, power and the share
            # figures move while the name, clocks and most bars stay put.
            content = self._content()
            self.show_content(self._shown, content)
            self._shown = content

    def render(self) -> Content:
        """Lay the gauges out for the current width and compactness."""
        self._shown = self._content()
        return self._shown

    def _compact(self) -> bool:
        panel = self.parent.parent if self.parent is not None else None
        return panel is not None and panel.has_class("-compact")  # one line per GPU

    def _content(self) -> Content:
        if self.sample is None:
            return Content("")
        key = (self.size.width, self._compact())
        if self._built is not None and self._built[0] == key:
            return self._built[1]
        width, compact = key
        if compact:
            content = compact_line(self.sample, width, len(self.shares) >= 2)
        else:
            content = card_lines(self.sample, width, self.shares)
        self._built = (key, content)
        return content


class GpuCard(Widget):
    """One GPU: gauges above a util / memory sparkline row; a click scopes the monitor to it."""

    DEFAULT_CSS = """
    GpuCard { height: auto; }
    GpuCard.-scoped { background: $accent 25%; }
    """

    def __init__(self, index: int) -> None:
        super().__init__(id=f"gpu-{index}")
        self.index = index
        self.gauges = GpuGauges()
        self.sparks = SparkPair(("util", "mem"), classes="sparks")
        self.util_spark = self.sparks.first
        self.mem_spark = self.sparks.second

    def compose(self) -> ComposeResult:
        """Gauges, then the sparkline row."""
        yield self.gauges
        yield self.sparks

    def on_click(self, event: Click) -> None:
        """A click picks this GPU (the screen scopes the tree and the table to it)."""
        event.stop()
        self.post_message(GpuPanel.Picked(self.index))

    def show(
        self,
        sample: GpuSample,
        history: HistoryReader,
        window: float,
        sparks: bool,
        shares: tuple[Share, ...] = (),
    ) -> None:
        """Update gauges always; sparklines only when shown and only with changed data."""
        self.gauges.set_sample(sample, shares)
        self.set_class(sample.lost, "-lost")
        if not sparks:
            return
        util = history.series(gpu_key(sample, "util"), window)
        mem = history.series(gpu_key(sample, "mem"), window)
        if util != self.util_spark.data or mem != self.mem_spark.data:
            self.sparks.show(util, mem)


class GpuPanel(VerticalScroll):
    """The GPUs in the style the layout picked: cards, lines, a summary line, or why none.

    Cards are mounted and removed only when the GPU set changes.
    """

    # Nested under GpuPanel because DEFAULT_CSS is scoped to the widget that declares it.
    DEFAULT_CSS = """
    GpuPanel {
        height: 1fr;
        /* One line each, cut with an ellipsis: the layout counts on their heights. */
        #gpu-summary, #gpu-empty {
            display: none;
            height: auto;
            text-wrap: nowrap;
            text-overflow: ellipsis;
        }
        &.-compact {
            GpuGauges { height: 1; }
            GpuCard .sparks { display: none; }
        }
        &.-summary {
            GpuCard { display: none; }
            #gpu-summary { display: block; height: 1; }
        }
        &.-empty {
            GpuCard { display: none; }
            #gpu-empty { display: block; }
        }
    }
    """

    can_focus = False

    class Picked(Message):
        """A GPU was clicked: the monitor scopes its tree and table to it (or back to all)."""

        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        #: The GPU the monitor is scoped to: its card is highlighted.
        self.scope: int | None = None
        self.cards: dict[int, GpuCard] = {}
        self.style = GpuStyle.CARDS
        self.collapsed = False
        self.summary = Static("", id="gpu-summary")
        self.empty = Static("", id="gpu-empty")
        self._gpus: tuple[GpuSample, ...] = ()
        self._empty_text: Content | None = None
        self._summary_text: Content | None = None

    def compose(self) -> ComposeResult:
        """The summary line and the empty-state text; cards are mounted as GPUs appear."""
        yield self.summary
        yield self.empty

    def show(
        self,
        gpus: tuple[GpuSample, ...],
        history: HistoryReader,
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
        self._gpus = gpus
        indexes = [gpu.index for gpu in gpus]
        if list(self.cards) != indexes:
            for index in [i for i in self.cards if i not in indexes]:
                self.cards.pop(index).remove()
            for gpu in gpus:
                if gpu.index not in self.cards:
                    self.cards[gpu.index] = card = GpuCard(gpu.index)
                    card.set_class(gpu.index == self.scope, "-scoped")
                    self.mount(card)
            self.cards = {i: self.cards[i] for i in indexes}
        if self.style is GpuStyle.SUMMARY:
            self._update_summary()
            return  # the cards are hidden: nothing else to draw
        sparks = self.style is GpuStyle.CARDS
        for gpu in gpus:
            self.cards[gpu.index].show(gpu, history, window, sparks, shares.get(gpu.index, ()))

    def set_scope(self, index: int | None) -> None:
        """Highlight the card of the GPU the monitor is scoped to (None: no card)."""
        self.scope = index
        for card in self.cards.values():
            card.set_class(card.index == index, "-scoped")

    def show_empty(self, text: Content) -> None:
        """What to say when there is no GPU (see :mod:`gputui.ui.empty_states`).

        Called every refresh while there is none: the text (whose height may change, so it is
        laid out again) is only replaced when it differs.
        """
        if not _same(text, self._empty_text):
            self._empty_text = text
            self.empty.update(text)

    def set_style(self, style: GpuStyle, collapsed: bool = False) -> None:
        """Draw the GPUs as the layout says; classes change (and cards re-render) only on change.

        Args:
            style: Cards, lines, summary or empty.
            collapsed: The summary stands for a panel the user collapsed (it says how to expand).
        """
        self.collapsed = collapsed
        if style is self.style and self.has_class(f"-{_CLASS[style]}"):
            self._update_summary()
            return
        self.style = style
        for name in _CLASS.values():
            self.set_class(name == _CLASS[style], f"-{name}")
        for card in self.cards.values():
            card.gauges.refresh(layout=True)
        self._update_summary()

    def _update_summary(self) -> None:
        if self.style is GpuStyle.SUMMARY:
            width = self.size.width or (self.app.size.width if self.is_attached else 80)
            line = summary_line(self._gpus, width, self.collapsed)
            if not _same(line, self._summary_text):
                self._summary_text = line
                # One line cut to the width (its CSS height is 1): no layout pass needed.
                self.summary.update(line, layout=False)

    def on_resize(self, event: Resize) -> None:
        """The summary line is fitted to the width."""
        self._update_summary()


def _same(a: Content, b: Content | None) -> bool:
    """Text *and* styles equal (``Content.__eq__`` compares the text only)."""
    return b is not None and a.plain == b.plain and a.spans == b.spans


#: The panel's class for each style (``-compact`` is one line per GPU).
_CLASS = {
    GpuStyle.CARDS: "cards",
    GpuStyle.LINES: "compact",
    GpuStyle.SUMMARY: "summary",
    GpuStyle.EMPTY: "empty",
}
