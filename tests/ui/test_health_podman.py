"""The health tab shows podman's own GPU checks: the double-injection finding, its fix to hand."""

from __future__ import annotations

from pathlib import Path

from textual.app import App, ComposeResult

from gputui.ui.widgets.health_panel import HealthPanel
from tests.support.health import (
    host_files,
    make_roots,
    podman_inputs,
    run,
    spec_yaml,
    write_hook,
)


class _Health(App[None]):
    def compose(self) -> ComposeResult:
        yield HealthPanel(id="health")


async def test_the_health_tab_lists_podmans_checks_worst_first(tmp_path: Path) -> None:
    roots = make_roots(tmp_path)
    host_files(tmp_path)
    (tmp_path / "usr/bin/nvidia-container-toolkit").write_text("")
    (tmp_path / "etc/cdi/nvidia.yaml").write_text(spec_yaml(2))
    hook = write_hook(tmp_path)
    checks = tuple(c for c in run(podman_inputs(), roots).values() if c.id.startswith("podman."))
    app = _Health()
    async with app.run_test(size=(160, 40)) as pilot:
        panel = app.query_one(HealthPanel)
        panel.show(checks)
        await pilot.pause()
        rows = [
            [str(cell) for cell in panel.table.get_row_at(i)] for i in range(panel.table.row_count)
        ]
        assert [(r[0].strip(), r[1]) for r in rows] == [
            ("warn", "podman.hooks"),
            ("pass", "podman.cdi"),
        ]
        assert rows[0][2].startswith("The NVIDIA OCI hook and a CDI spec both inject GPUs")
        detail = str(panel.detail.content)
        assert f"sudo rm {hook}" in detail
        assert "nvidia.com/gpu, cdiVersion 0.5.0" not in detail  # podman.cdi's, not shown yet
