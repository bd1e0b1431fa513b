"""Kernel-log faults in the TUI: the XID badge on the container row and its process, the Faults
view (``F``) with each fault's class, whom it hit, the fix and the kernel's line."""

from __future__ import annotations

from dataclasses import replace

from gputui.model.faults import FaultCandidate, KernelFault
from gputui.model.snapshot import Snapshot
from gputui.model.status import SourceStatus
from gputui.ui.screens.faults import FaultsScreen
from gputui.ui.screens.main import MainScreen
from tests.support.factories import FakeCollector, cid, standard
from tests.support.pilot import AppFactory, push, ready


def with_faults(base: Snapshot) -> Snapshot:
    """``standard()`` with an application XID on trainer-a's PID 611 and a bus XID on GPU 1."""
    at = base.taken_at - 30
    mmu = KernelFault(
        "xid",
        at,
        10,
        "NVRM: Xid (PCI:0000:3b:00): 31, pid=611, name=python3\x1b[2J, Ch 00000010",
        "application",
        "GPU memory page fault (illegal memory access)",
        "fix or restart the container; the GPU is fine",
        xid=31,
        pci_bus_id="0000:3b:00",
        gpu_index=0,
        pid=611,
        process_name="python3",
        container_id=cid(1),
        container_name="trainer-a",
        attribution="process",
    )
    bus = KernelFault(
        "xid",
        at + 1,
        11,
        "NVRM: Xid (PCI:0000:3c:00): 79, GPU has fallen off the bus.",
        "bus",
        "the GPU has fallen off the bus",
        "the node: drain it, check power, cooling and the PCIe slot, then reboot",
        xid=79,
        pci_bus_id="0000:3c:00",
        gpu_index=1,
        attribution="candidates",
        candidates=(FaultCandidate(700, "python3", cid(2), "inference"),),
    )
    sources = {**base.sources, "kmsg": SourceStatus("kmsg", ok=True)}
    return replace(base, sources=sources, kernel_faults=(mmu, bus))


async def test_fault_badges_and_the_faults_view(make_app: AppFactory) -> None:
    first = with_faults(standard())
    app = make_app(FakeCollector([first]))
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        await push(pilot, with_faults(standard(1_000_010.0)), analyse=True)
        markers = app.analysis.markers if app.analysis else {}
        assert "XID 31" in {m.badge for m in markers[f"container:{cid(1)}"]}
        assert "XID 31" in {m.badge for m in markers["pid:611"]}
        # The bus XID named no PID: its candidate is listed in the view, not badged.
        assert "XID 79" not in {m.badge for m in markers.get(f"container:{cid(2)}", ())}
        node = app.main.ctree.nodes_by_key[f"c:{cid(1)}"]
        assert "XID 31" in str(node.label)
        await pilot.press("F")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, FaultsScreen)
        body = str(screen.body.content)
        assert body.index("XID 79") < body.index("XID 31")  # newest first
        for fact in (
            "container trainer-a",
            "PID 611 python3",
            "fix or restart the container; the GPU is fine",
            "candidates inference (PID 700)",
            "no PID in the line: candidates on that GPU",
            "the node: drain it",
            "NVRM: Xid (PCI:0000:3b:00): 31, pid=611",
        ):
            assert fact in body, fact
        assert "\x1b" not in body
        # It follows the refreshes while open.
        later = with_faults(standard(1_000_020.0))
        later = replace(later, kernel_faults=later.kernel_faults[:1])
        await push(pilot, later, analyse=True)
        assert "XID 79" not in str(screen.body.content)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)


async def test_faults_view_says_when_the_kernel_log_is_not_read(make_app: AppFactory) -> None:
    denied = SourceStatus(
        "kmsg",
        ok=False,
        error="/dev/kmsg: Operation not permitted",
        kind="permission",
        fix="needs CAP_SYSLOG",
    )
    base = standard()
    app = make_app(FakeCollector([replace(base, sources={**base.sources, "kmsg": denied})]))
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("F")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, FaultsScreen)
        body = str(screen.body.content)
        assert "Cannot read the kernel log" in body and "CAP_SYSLOG" in body
