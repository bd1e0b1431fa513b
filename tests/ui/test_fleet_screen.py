"""The fleet screen on recorded Prometheus answers (tests/fixtures/fleet-answers.json).

The answers file holds what a Prometheus answered for a 12-host fleet (ten ``gputui export``
hosts, one of them down, two plain dcgm-exporter hosts): the screen parses and draws it exactly
as it would a live answer. The live path is tested in tests/engine/test_fleet_prometheus.py.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable

from gputui.fleet.client import FleetError
from gputui.fleet.command import FleetOptions
from gputui.fleet.model import HostDetail, HostRow
from gputui.fleet.queries import FIELD
from gputui.fleet.source import FleetSnapshot, RecordedFleet
from gputui.ui.fleet_app import FleetApp, FleetScreen, HostScreen

ANSWERS = Path(__file__).parent.parent / "fixtures" / "fleet-answers.json"
SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((160, 50), id="160x50")]


def fleet_app(source: Any = None, **options: Any) -> FleetApp:
    return FleetApp(source or RecordedFleet(ANSWERS), FleetOptions(**options), interval=3600)


async def refreshed(pilot: Pilot[None], count: int = 1) -> FleetApp:
    app = pilot.app
    assert isinstance(app, FleetApp)
    deadline = time.monotonic() + 10
    while app.refreshes < count:
        assert time.monotonic() < deadline, "no refresh reached the screen"
        await pilot.pause(0.05)
    await pilot.pause()
    return app


def host_column(app: FleetApp) -> list[str]:
    screen = app.screen
    assert isinstance(screen, FleetScreen)
    return [row.host for row in screen.shown]


def lines(app: FleetApp) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


@pytest.mark.parametrize("size", [(80, 24), (160, 50)])
async def test_host_table_lists_every_gpu_host(size: tuple[int, int]) -> None:
    app = fleet_app()
    async with app.run_test(size=size) as pilot:
        await refreshed(pilot)
        hosts = host_column(app)
        assert len(hosts) == 12 and "prometheus.lab:9090" not in hosts  # not a GPU target
        assert hosts == sorted(hosts)
        text = lines(app)
        assert "12 hosts" in text and "1 down" in text and "72 GPUs" in text
        table = app.screen.query_one("#hosts", DataTable)
        assert table.row_count == 12


async def test_sort_filter_and_reverse_like_the_main_app() -> None:
    app = fleet_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await refreshed(pilot)
        await pilot.press("s")  # host → problems
        screen = app.screen
        assert isinstance(screen, FleetScreen) and screen.sort == "problems"
        assert host_column(app)[0] == "gpu-a02"  # 2 alerts and a failing check
        await pilot.press("s")  # util, biggest first
        utils = [r.util_pct or -1 for r in screen.shown]
        assert utils == sorted(utils, reverse=True)
        await pilot.press("S")
        assert [r.util_pct or -1 for r in screen.shown] == sorted(utils)
        await pilot.press("slash", "d", "g", "x")
        assert host_column(app) == ["dgx-07", "dgx-08"] or set(host_column(app)) == {
            "dgx-07",
            "dgx-08",
        }
        await pilot.press("escape")
        assert len(host_column(app)) == 12
        await pilot.press("slash", *"whisper", "enter")  # a container name finds its hosts
        assert host_column(app) and all(
            any(t.name == "whisper" for t in r.top) for r in screen.shown
        )


async def test_enter_drills_down_to_gpus_containers_and_problems() -> None:
    app = fleet_app(sort="problems")
    async with app.run_test(size=(160, 50)) as pilot:
        await refreshed(pilot)
        assert host_column(app)[0] == "gpu-a02"
        await pilot.press("enter")
        await refreshed(pilot, 2)
        screen = app.screen
        assert isinstance(screen, HostScreen) and screen.detail is not None
        assert [g.gpu for g in screen.detail.gpus] == ["0", "1", "2", "3"]
        assert screen.query_one("#host-gpus", DataTable).row_count == 4
        text = lines(app)
        assert "gpu_temp_high GPU 3" in text and "gpu.ecc_uncorrected" in text
        assert "idle reservation" in text
        assert any(ch in text for ch in "▁▂▃▄▅▆▇█")  # sparklines from the range answer
        await pilot.press("escape")
        assert isinstance(app.screen, FleetScreen)


async def test_dcgm_host_shows_what_its_series_allow() -> None:
    app = fleet_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await refreshed(pilot)
        assert host_column(app)[0] == "dgx-07"
        await pilot.press("enter")
        await refreshed(pilot, 2)
        screen = app.screen
        assert isinstance(screen, HostScreen) and screen.detail is not None
        assert len(screen.detail.gpus) == 8 and screen.detail.containers == ()
        assert "no containers" in lines(app)


class _Failing:
    """A source whose Prometheus went away after the first answer."""

    def __init__(self) -> None:
        self.inner = RecordedFleet(ANSWERS)
        self.calls = 0

    @property
    def shown(self) -> str:
        return "http://prometheus:9090"

    def snapshot(self) -> FleetSnapshot:
        self.calls += 1
        if self.calls > 1:
            raise FleetError(
                "cannot reach Prometheus at http://prometheus:9090 (connection refused): "
                "is it running, and is the URL right?"
            )
        return self.inner.snapshot()

    def detail(self, host: HostRow) -> HostDetail:
        return self.inner.detail(host)

    def close(self) -> None:
        self.inner.close()


async def test_an_error_is_one_sentence_and_the_last_table_stays() -> None:
    source = _Failing()
    app = fleet_app(source)
    async with app.run_test(size=(120, 30)) as pilot:
        await refreshed(pilot)
        await pilot.press("r")
        await refreshed(pilot, 2)
        text = lines(app)
        assert "connection refused" in text and "is it running" in text
        assert "Traceback" not in text
        assert len(host_column(app)) == 12


def test_answers_file_that_is_not_one_is_a_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "answers.json"
    bad.write_text(json.dumps({"format": "something else", "taken_at": 1}))
    with pytest.raises(FleetError, match="not a fleet answers file"):
        RecordedFleet(bad)


@pytest.mark.parametrize("size", SIZES)
def test_fleet_snapshot(snap_compare: Any, size: tuple[int, int]) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await refreshed(pilot)

    assert snap_compare(fleet_app(), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_fleet_host_snapshot(snap_compare: Any, size: tuple[int, int]) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await refreshed(pilot)
        await pilot.press("enter")  # the host with the most problems
        await refreshed(pilot, 2)

    app = fleet_app(sort="problems")
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("on_host", [False, True])
async def test_q_quits_from_the_table_and_the_host(on_host: bool) -> None:
    app = fleet_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await refreshed(pilot)
        if on_host:
            await pilot.press("enter")
            await refreshed(pilot, 2)
            assert isinstance(app.screen, HostScreen)
        await pilot.press("q")
        await pilot.pause()
        assert app.return_code == 0 and not app.is_running


async def test_question_mark_shows_the_keys_and_escape_closes_them() -> None:
    app = fleet_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await refreshed(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        text = lines(app)
        assert "gputui fleet: keys" in text and "drill down" in text and "refresh now" in text
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen) and app.is_running


# -- Kubernetes pods' containers ---------------------------------------------------------------

GIB = 1024**3
TAKEN = 1_780_000_000.0
#: A node whose containers are two pods' ``server`` (as CRI names them) and one that is no pod's.
POD_CONTAINERS = (
    ("serving", "infer-a-7d9c", "server", "0", 30 * GIB),
    ("serving", "infer-b-5f2e", "server", "1", 12 * GIB),
    ("", "", "trainer", "0", 8 * GIB),
)


def _vector(*series: tuple[dict[str, str], float]) -> dict[str, Any]:
    return {
        "resultType": "vector",
        "result": [{"metric": m, "value": [TAKEN, repr(v)]} for m, v in series],
    }


def pod_answers(path: Path) -> Path:
    """Recorded answers of two hosts: node-k8s (pods' containers) and node-plain (none)."""

    def host(instance: str, name: str) -> list[tuple[dict[str, str], float]]:
        base = {"instance": instance}
        return [
            ({**base, "job": "gpu", FIELD: "up"}, 1.0),
            ({**base, FIELD: "scrape"}, TAKEN - 2),
            ({**base, "job": "gpu", "Hostname": name, FIELD: "seen"}, 2.0),
            ({**base, FIELD: "gpus"}, 2.0),
            ({**base, FIELD: "age"}, 1.0),
            ({**base, FIELD: "mem_used"}, 51200.0),
            ({**base, FIELD: "mem_free"}, 236342.0),
        ]

    def labels(ns: str, pod: str) -> dict[str, str]:
        return {"namespace": ns, "pod": pod} if pod else {}

    tops = [
        ({"instance": "k8s:9400", FIELD: "top", "container": c, **labels(ns, pod)}, mem)
        for ns, pod, c, _, mem in POD_CONTAINERS
    ]
    tops.append(({"instance": "plain:9400", FIELD: "top", "container": "etl"}, 4 * GIB))

    def detail(instance: str, rows: Any) -> dict[str, Any]:
        gpus = [
            ({"__name__": n, "instance": instance, "gpu": g, "modelName": "NVIDIA H200"}, v)
            for g in ("0", "1")
            for n, v in (("DCGM_FI_DEV_FB_USED", 25600.0), ("DCGM_FI_DEV_FB_FREE", 118171.0))
        ]
        mem = [
            (
                {
                    "__name__": "gputui_container_gpu_memory_bytes",
                    "instance": instance,
                    "container": c,
                    "image": f"{c}:1",
                    "gpu": g,
                    **labels(ns, pod),
                },
                value,
            )
            for ns, pod, c, g, value in rows
        ]
        return _vector(*gpus, *mem)

    doc = {
        "format": "gputui-fleet-answers/1",
        "taken_at": TAKEN,
        "hosts": [
            _vector(*host("k8s:9400", "node-k8s"), *host("plain:9400", "node-plain")),
            _vector(*tops),
        ],
        "detail": {
            "k8s:9400": detail("k8s:9400", POD_CONTAINERS),
            "plain:9400": detail("plain:9400", [("", "", "etl", "0", 4 * GIB)]),
        },
    }
    path.write_text(json.dumps(doc))
    return path


def container_columns(app: FleetApp) -> list[str]:
    table = app.screen.query_one("#host-containers", DataTable)
    return [str(column.label) for column in table.columns.values()]


async def test_pods_containers_are_named_by_pod_in_the_table_the_filter_and_the_drill_down(
    tmp_path: Path,
) -> None:
    app = fleet_app(RecordedFleet(pod_answers(tmp_path / "answers.json")))
    async with app.run_test(size=(160, 50)) as pilot:
        await refreshed(pilot)
        assert host_column(app) == ["node-k8s", "node-plain"]
        assert "infer-a-7d9c/server 30.0GiB, infer-b-5f2e/server 12.0GiB, trainer 8.0GiB" in lines(
            app
        )
        await pilot.press("slash", *"infer-b", "enter")  # a pod's name finds its host
        assert host_column(app) == ["node-k8s"]
        await pilot.press("escape", "slash", *"serving", "enter")  # and its namespace
        assert host_column(app) == ["node-k8s"]
        await pilot.press("escape")
        await pilot.press("enter")  # node-k8s
        await refreshed(pilot, 2)
        screen = app.screen
        assert isinstance(screen, HostScreen) and screen.detail is not None
        assert container_columns(app)[:3] == ["CONTAINER", "POD", "IMAGE"]
        table = screen.query_one("#host-containers", DataTable)
        rows = [[str(cell) for cell in table.get_row_at(i)[:3]] for i in range(table.row_count)]
        assert rows == [
            ["server", "serving/infer-a-7d9c", "server:1"],
            ["server", "serving/infer-b-5f2e", "server:1"],
            ["trainer", "-", "trainer:1"],
        ]
        await pilot.press("escape", "down", "enter")  # node-plain: no pod, no POD column
        await refreshed(pilot, 3)
        assert isinstance(app.screen, HostScreen) and app.screen.row.host == "node-plain"
        assert container_columns(app)[:2] == ["CONTAINER", "IMAGE"]
        assert "POD" not in container_columns(app)


def test_fleet_pod_host_snapshot(snap_compare: Any, tmp_path: Path) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await refreshed(pilot)
        await pilot.press("enter")  # node-k8s
        await refreshed(pilot, 2)

    app = fleet_app(RecordedFleet(pod_answers(tmp_path / "answers.json")))
    assert snap_compare(app, terminal_size=(160, 50), run_before=run_before)
