"""MIG on screen: the demo machine's GPU 3 is split into three MIG devices.

The GPU line (or card) names its devices with their profile and memory in use, and says that
utilization is not measured; a container's row names the MIG device it runs on or reserves; the
idle reservation and the sharing markers are per MIG device.
"""

from __future__ import annotations

import pytest

from gputui.ui.widgets.gpu_panel import card_lines, compact_line
from tests.support.factories import demo_app, demo_snapshots
from tests.support.pilot import ready, screen_lines


def _line(lines: list[str], needle: str) -> str:
    hits = [ln for ln in lines if needle in ln]
    assert hits, f"no line with {needle!r} in:\n" + "\n".join(lines)
    return hits[0]


@pytest.mark.parametrize("size", [(80, 24), (160, 50)])
async def test_mig_devices_show_under_their_gpu_and_on_container_rows(
    size: tuple[int, int],
) -> None:
    app = demo_app(refreshes=5)
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        lines = screen_lines(app)
        gpu3 = _line(lines, " 3 H200")
        assert "MIG 3:0 3g.71gb 9%" in gpu3
        assert "util ░" not in gpu3 and "util N/A" not in gpu3  # no NVML utilization gauge
        assert "util" in _line(lines, " 0 H200")
        assert "3:0" in _line(lines, "containerd-")
        notebook = _line(lines, "notebook-gpu")
        assert "3:1" in notebook
        if size[0] >= 160:
            assert " 3:0 " in _line(lines, "52001 (1) root")  # the process row names its device
            assert "IDLE" in notebook
            assert "SHARED" in _line(lines, "unfindable GPU memory")
            assert "3:2 1g.18gb" in gpu3


def test_a_mig_gpu_card_lists_its_devices_and_says_why_util_is_missing() -> None:
    gpu = demo_snapshots(1)[0].gpus[3]
    card = card_lines(gpu, 100).plain.splitlines()
    # Each device's memory in use, then its utilization from GPM (NVML has none per device).
    assert card[0].startswith("GPU 3 H200  MIG  3:0 3g.71gb 9% util ")
    assert "· 3:1 2g.35gb 0% util 0%" in card_lines(gpu, 160).plain.splitlines()[0]
    assert "N/A MIG" in card[1]
    narrow = card_lines(gpu, 40).plain.splitlines()[0]
    assert len(narrow) <= 40 and narrow.endswith("…")
    other = card_lines(demo_snapshots(1)[0].gpus[0], 100).plain.splitlines()
    assert "MIG" not in other[0] and "N/A MIG" not in other[1]
    assert "MIG 3:0" in compact_line(gpu, 120).plain


def test_an_mps_client_row_says_so() -> None:
    from gputui.model.gpu import GpuProcessSample
    from gputui.model.processes import GpuProcess, ProcessInfo
    from gputui.ui.widgets.tree_labels import process_inputs, process_label

    info = ProcessInfo(4242, command="python serve.py", name="python", user="root")
    client = GpuProcess(GpuProcessSample(4242, 0, 1 << 30, kind="M+C", mps=True), info)
    plain = GpuProcess(GpuProcessSample(4242, 0, 1 << 30), info)
    assert " MPS " in process_label(client).plain
    assert " MPS " not in process_label(plain).plain
    assert process_inputs(client, ()) != process_inputs(plain, ())
