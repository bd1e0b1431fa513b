"""Empty panels say why, the fix, and where to look (no GPU, no Docker, no containers)."""

from __future__ import annotations

from gputui.model.status import HealthCheck, HealthStatus, SourceStatus
from gputui.ui.empty_states import containers_empty, gpus_empty, processes_empty
from tests.support.factories import FakeCollector, container, gpu, proc, snapshot, standard
from tests.support.pilot import AppFactory, ready, screen_lines

NO_LIBRARY = SourceStatus("nvml", False, "NVML Shared Library Not Found", "LibraryNotFound")
DOCKER_DOWN = SourceStatus(
    "docker",
    False,
    "cannot connect to /var/run/docker.sock: connection refused",
    "unreachable",
    "sudo systemctl start docker",
)
OK = {name: SourceStatus(name, True) for name in ("nvml", "docker", "procs")}


def _first_run(docker: SourceStatus = OK["docker"]) -> object:
    """A machine without the NVIDIA driver: no GPU, no GPU process, NVML's check failing."""
    return snapshot(
        gpus=(),
        sources={**OK, "nvml": NO_LIBRARY, "docker": docker},
        health=(
            HealthCheck(
                "nvml.init",
                HealthStatus.FAIL,
                "NVML cannot be loaded",
                fix="install the NVIDIA driver (apt install nvidia-driver-580)",
            ),
        ),
    )


async def test_no_gpu_first_run_explains_itself(make_app: AppFactory) -> None:
    app = make_app(FakeCollector([_first_run()]))  # type: ignore[list-item]
    async with app.run_test(size=(120, 30)) as pilot:
        await ready(pilot)
        for _ in range(3):
            await pilot.pause()
        text = "\n".join(screen_lines(app))
        assert "No GPU data: NVML is not installed (no libnvidia-ml.so: no NVIDIA driver)" in text
        assert "fix  install the NVIDIA driver (apt install nvidia-driver-580)" in text  # check's
        assert "3 (Health tab)" in text and "gputui doctor" in text and "gputui --demo" in text
        panel = app.main.gpus
        assert panel.has_class("-empty")
        assert panel.outer_size.height == 4  # three lines and the border; the rest is the tabs'


async def test_no_gpu_and_no_docker_still_says_why(make_app: AppFactory) -> None:
    app = make_app(FakeCollector([_first_run(DOCKER_DOWN)]))  # type: ignore[list-item]
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        for _ in range(3):
            await pilot.pause()
        text = "\n".join(screen_lines(app))
        assert "No GPU data" in text
        assert "gputui doctor" in text
    tree = containers_empty(_first_run(DOCKER_DOWN))  # type: ignore[arg-type]
    assert tree is not None
    # The adapter's own sentence names the endpoint.
    assert "No containers: Docker: cannot connect to /var/run/docker.sock" in tree.plain
    assert "fix  sudo systemctl start docker" in tree.plain  # the source's own fix
    table = processes_empty(_first_run(DOCKER_DOWN))  # type: ignore[arg-type]
    assert table is not None and "No GPU processes: NVML" in table.plain


def test_gpu_panel_text_for_each_case() -> None:
    assert "Reading" in gpus_empty(None).plain
    no_device = snapshot(gpus=())
    assert "reports no NVIDIA GPU" in gpus_empty(no_device).plain
    # Without a check's or the source's fix, a generic one still says what to do.
    bare = snapshot(gpus=(), sources={**OK, "nvml": NO_LIBRARY})
    assert "fix  install the NVIDIA driver" in gpus_empty(bare).plain
    # The source's error reaches the text only through safe_text.
    odd = SourceStatus("nvml", False, "bad\x1b[31m driver\u202e", "Unknown")
    text = gpus_empty(snapshot(gpus=(), sources={**OK, "nvml": odd})).plain
    assert "\x1b" not in text and "\u202e" not in text


def test_no_containers_and_idle_gpus() -> None:
    nothing = containers_empty(snapshot(gpus=(gpu(0),)))
    assert nothing is not None
    assert "Nothing uses a GPU: no container" in nothing.plain
    assert "docker run --rm --gpus all" in nothing.plain
    table = processes_empty(snapshot(gpus=(gpu(0),)))
    assert table is not None and "No process is using a GPU right now" in table.plain
    # Containers without GPU use are rows of the tree ("other containers"): not empty.
    idle = snapshot(gpus=(gpu(0),), containers=[container(4, "web", gpu_request=None)])
    assert containers_empty(idle) is None


def test_panels_with_rows_have_no_empty_state() -> None:
    busy = standard()
    assert containers_empty(busy) is None
    assert processes_empty(busy) is None
    filtered = processes_empty(busy, "nomatch")
    assert filtered is not None and "No process matches “nomatch”" in filtered.plain
    host_only = snapshot(processes=[proc(900, 0, 256, None, "Xorg :0")])
    assert containers_empty(host_only) is None  # the host group is a row


async def test_a_filter_that_matches_says_no_no_match() -> None:
    """A Processes filter that keeps rows shows them, never "No process matches" above them."""
    from tests.support.factories import demo_app

    app = demo_app(refreshes=3)
    async with app.run_test(size=(120, 30)) as pilot:
        await ready(pilot)
        await pilot.press("2", "slash", *"vllm")
        await pilot.pause()
        text = "\n".join(screen_lines(app))
        assert app.main.table.row_count >= 1
        assert "51234" in text and "vllm-server" in text
        assert "No process matches" not in text
        await pilot.press(*"zzz")
        await pilot.pause()
        assert "No process matches “vllmzzz”" in "\n".join(screen_lines(app))
