"""Container logs and lifecycle through the Engine-API client: the frame decoder and line splitter
on crafted bytes, then real containers (stopped, following, TTY, hostile output) and real
stop / start / restart calls.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from gputui.collect.docker.logs import (
    MAX_FRAME_BYTES,
    MAX_LINE_BYTES,
    EngineLogReader,
    FrameDecoder,
    LineSplitter,
    LogLine,
    LogStreamError,
    PendingLines,
    parse_line,
)
from gputui.collect.docker.source import DockerSource


def frame(stream: int, payload: bytes) -> bytes:
    """One frame of the engine's multiplexed stream."""
    return bytes([stream, 0, 0, 0]) + len(payload).to_bytes(4, "big") + payload


class Chunks:
    """Bytes handed out in fixed pieces, as a socket might."""

    def __init__(self, data: bytes, size: int) -> None:
        self.parts = [data[i : i + size] for i in range(0, len(data), size)]
        self.closed = False

    def read(self) -> bytes:
        return self.parts.pop(0) if self.parts and not self.closed else b""

    def close(self) -> None:
        self.closed = True


def read_all(reader: Any, deadline_s: float = 20.0) -> list[LogLine]:
    """Every line of a reader until its end (bounded in time)."""
    lines: list[LogLine] = []
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        batch = reader.read()
        if batch is None:
            return lines
        lines += batch
    raise AssertionError("the stream did not end in time")


# --------------------------------------------------------------------------- decoding


def test_frames_split_anywhere_decode_the_same() -> None:
    data = (
        frame(1, b"2026-11-30T17:26:40.686858555Z out one\n")
        + frame(2, b"2026-11-30T17:26:40.7Z err one\n2026-11-30T17:26:41Z err ")
        + frame(2, b"two\n")
        + frame(1, b"2026-11-30T17:26:42+01:00 out two")
    )
    expected = [
        LogLine("stdout", "out one", "2026-11-30T17:26:40.686858555Z"),
        LogLine("stderr", "err one", "2026-11-30T17:26:40.7Z"),
        LogLine("stderr", "err two", "2026-11-30T17:26:41Z"),
        LogLine("stdout", "out two", "2026-11-30T17:26:42+01:00"),
    ]
    for size in (1, 2, 3, 7, 8, 9, 13, len(data)):
        lines = read_all(EngineLogReader(Chunks(data, size), tty=False))
        by_stream = {s: [x for x in lines if x.stream == s] for s in ("stdout", "stderr")}
        assert by_stream["stdout"] == [expected[0], expected[3]], size
        assert by_stream["stderr"] == expected[1:3], size


@pytest.mark.parametrize(
    "header",
    [
        bytes([3, 0, 0, 0, 0, 0, 0, 1]),  # no such stream
        bytes([1, 0, 7, 0, 0, 0, 0, 1]),  # padding not zero
        bytes([1, 0, 0, 0]) + (MAX_FRAME_BYTES + 1).to_bytes(4, "big"),  # too large
        b"hello wo",  # a raw stream taken for a multiplexed one
    ],
)
def test_bad_frame_headers_end_the_stream(header: bytes) -> None:
    reader = EngineLogReader(Chunks(header + b"x\n", 4), tty=False)
    with pytest.raises(LogStreamError, match="malformed"):
        read_all(reader)
    assert reader.read() is None  # ended: no second error, no more reading


def test_a_huge_frame_is_streamed_not_buffered() -> None:
    decoder = FrameDecoder(multiplexed=True)
    header = frame(1, b"")[:4] + MAX_FRAME_BYTES.to_bytes(4, "big")
    assert decoder.feed(header) == []
    assert decoder.feed(b"a" * 10) == [("stdout", b"a" * 10)]


def test_long_lines_are_cut_and_the_next_line_is_whole() -> None:
    splitter = LineSplitter("stdout")
    lines = splitter.feed(b"x" * (MAX_LINE_BYTES + 5000))
    lines += splitter.feed(b"y" * 10 + b"\nnext\n" + b"z" * (MAX_LINE_BYTES * 3))
    lines += splitter.flush()
    assert [len(x.text) for x in lines] == [MAX_LINE_BYTES, 4, MAX_LINE_BYTES]
    assert [x.cut for x in lines] == [True, False, True]
    assert lines[0].text == "x" * MAX_LINE_BYTES
    assert splitter.flush() == []


def test_parse_line_timestamps_crlf_and_bad_utf8() -> None:
    line = parse_line("tty", b"2026-01-02T03:04:05.123456789Z caf\xc3\xa9 \xff\xfe\r")
    assert line == LogLine("tty", "café \ufffd\ufffd", "2026-01-02T03:04:05.123456789Z")
    # A line without the engine's stamp keeps its text; a forged one inside a line stays text.
    assert parse_line("stdout", b"no stamp").timestamp is None
    forged = parse_line("stdout", b"x 2026-01-02T03:04:05Z y")
    assert forged.timestamp is None and forged.text == "x 2026-01-02T03:04:05Z y"


def test_pending_lines_keep_the_newest_and_count_the_rest() -> None:
    pending = PendingLines(limit=3)
    pending.extend([LogLine("stdout", str(i)) for i in range(5)])
    pending.extend([LogLine("stdout", "5")])
    lines, dropped = pending.drain()
    assert [x.text for x in lines] == ["3", "4", "5"]
    assert dropped == 3
    assert pending.drain() == ([], 0)


def test_pending_lines_are_bounded_in_bytes_and_drained_within_a_budget() -> None:
    pending = PendingLines(limit=1000, byte_limit=10_000)
    pending.extend([parse_line("stdout", b"x" * 4000) for _ in range(5)])
    assert pending.bytes == 8000 and len(pending) == 2  # the 3 oldest dropped, by bytes
    pending.extend([parse_line("stdout", b"y" * 100) for _ in range(10)])
    lines, dropped = pending.drain(max_bytes=4500)
    assert dropped == 3
    assert [len(x.text) for x in lines] == [4000]  # the next 4,000 would pass the budget
    lines, dropped = pending.drain(max_bytes=1)  # at least one line, whatever the budget
    assert [len(x.text) for x in lines] == [4000] and dropped == 0
    lines, _ = pending.drain(max_bytes=350)
    assert len(lines) == 3 and pending.bytes == 700


# ------------------------------------------------------------------------ real engine


def _source(free_run_id: str) -> DockerSource:
    source = DockerSource(label=f"gputui-test={free_run_id}")
    assert source.read().status.ok
    return source


def _wait_exited(container: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        container.reload()
        if container.status == "exited":
            return
        time.sleep(0.1)
    raise AssertionError(f"{container.name} did not exit: {container.status}")


def test_the_docker_source_offers_logs_and_lifecycle() -> None:
    source = DockerSource()
    try:
        assert source.name == "docker"
        offers = source.capabilities()
        assert offers.exec and offers.logs and offers.lifecycle
    finally:
        source.close()


def test_the_wirings_collector_routes_logs_to_the_docker_source(
    run_container: Callable[..., Any], free_run_id: str
) -> None:
    """The collector the wiring builds (its Docker source built lazily) opens a container's
    logs through the source that lists it, and says so when none does."""
    from gputui.model.settings import Settings
    from gputui.wiring.compose import build_collector

    container = run_container(
        ["sh", "-c", "echo routed-1"], name=f"logs-routed-{free_run_id}", network_mode="none"
    )
    _wait_exited(container)
    collector = build_collector(Settings(), health=False)
    try:
        deadline = time.monotonic() + 60  # a loaded engine may miss a refresh's 2 s wait
        while (owner := collector.container_owner(container.id)) is None:
            assert time.monotonic() < deadline, "the engine never listed the container"
            collector.collect()
        assert owner.source == "docker" and owner.capabilities.logs
        lines = read_all(collector.open_container_logs(container.id, tail=10, follow=False))
        assert [x.text for x in lines] == ["routed-1"]
        with pytest.raises(LogStreamError, match="no connected engine lists container f00d"):
            collector.open_container_logs("f00d" * 16, tail=10, follow=False)
    finally:
        collector.close()


def test_stopped_container_last_lines_with_streams_and_hostile_bytes(
    run_container: Callable[..., Any], free_run_id: str
) -> None:
    script = (
        "echo out-1; echo err-1 >&2; printf 'esc \\033[31mred\\033[0m \\342\\200\\256bidi\\n'; "
        "printf 'bad \\377\\376 utf8\\n'; echo out-last"
    )
    container = run_container(["sh", "-c", script], name=f"logs-stopped-{free_run_id}")
    _wait_exited(container)
    source = _source(free_run_id)
    try:
        reader = source.open_logs(container.id, tail=100, follow=False)
        assert reader.tty is False
        lines = read_all(reader)
    finally:
        source.close()
    stdout = [x.text for x in lines if x.stream == "stdout"]
    assert stdout[0] == "out-1" and stdout[-1] == "out-last"
    assert [x.text for x in lines if x.stream == "stderr"] == ["err-1"]
    # The bytes arrive as they were written (decoded, not yet sanitised: the screen does that).
    assert "esc \x1b[31mred\x1b[0m \u202ebidi" in stdout
    assert "bad \ufffd\ufffd utf8" in stdout
    assert all(x.timestamp and x.timestamp.startswith("20") for x in lines)


def test_tail_limits_the_lines(run_container: Callable[..., Any], free_run_id: str) -> None:
    container = run_container(
        ["sh", "-c", "for i in 1 2 3 4 5 6 7 8 9; do echo line-$i; done"],
        name=f"logs-tail-{free_run_id}",
    )
    _wait_exited(container)
    source = _source(free_run_id)
    try:
        lines = read_all(source.open_logs(container.id, tail=3, follow=False))
    finally:
        source.close()
    assert [x.text for x in lines] == ["line-7", "line-8", "line-9"]


def test_follow_shows_new_lines_and_close_ends_a_blocked_read(
    run_container: Callable[..., Any], free_run_id: str
) -> None:
    # Prints "second" (the file's content) once the test writes the file, then stays quiet.
    script = "echo first; until cat /tmp/go 2>/dev/null; do sleep 0.1; done; exec sleep 300"
    container = run_container(["sh", "-c", script], name=f"logs-follow-{free_run_id}")
    source = _source(free_run_id)
    try:
        reader = source.open_logs(container.id, tail=10, follow=True)
        assert [x.text for x in reader.read() or []] == ["first"]
        container.exec_run(["sh", "-c", "echo second > /tmp/go"])
        assert [x.text for x in reader.read() or []] == ["second"]
        # Nothing more comes: a read blocks until close() from another thread ends it.
        result: list[object] = []
        thread = threading.Thread(target=lambda: result.append(reader.read()), daemon=True)
        thread.start()
        time.sleep(0.5)
        assert thread.is_alive()
        started = time.monotonic()
        reader.close()
        thread.join(5)
        assert not thread.is_alive()
        assert time.monotonic() - started < 2
        assert result in ([None], [[]])
    finally:
        source.close()


def test_tty_container_is_one_raw_stream(
    run_container: Callable[..., Any], free_run_id: str
) -> None:
    container = run_container(
        ["sh", "-c", "echo tty-out; echo tty-err >&2"], name=f"logs-tty-{free_run_id}", tty=True
    )
    _wait_exited(container)
    source = _source(free_run_id)
    try:
        reader = source.open_logs(container.id, tail=100, follow=False)
        lines = read_all(reader)
    finally:
        source.close()
    assert reader.tty is True
    assert [(x.stream, x.text) for x in lines] == [("tty", "tty-out"), ("tty", "tty-err")]


def test_logs_of_unknown_and_malformed_ids_refuse(free_run_id: str, docker_engine: Any) -> None:
    source = _source(free_run_id)
    try:
        calls = source.api_calls
        with pytest.raises(LogStreamError, match="64 hex"):
            source.open_logs("../../version", tail=1, follow=False)
        assert source.container_action("abc", "stop") is not None
        assert source.api_calls == calls  # refused before any request
        with pytest.raises(LogStreamError, match="no such container"):
            source.open_logs("0" * 64, tail=1, follow=False)
        assert "no such container" in (source.container_action("0" * 64, "stop") or "")
        assert source.container_action("0" * 64, "remove") == "not a container action: remove"
    finally:
        source.close()


def test_stop_start_restart_change_the_real_container(
    run_container: Callable[..., Any], free_run_id: str
) -> None:
    # exec: sleep is PID 1 and dies on SIGTERM, so stop does not wait the 10 s grace.
    container = run_container(
        ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.2; done"],
        name=f"logs-life-{free_run_id}",
    )
    source = _source(free_run_id)
    try:
        assert source.container_action(container.id, "stop") is None
        container.reload()
        assert container.status == "exited"
        assert source.container_action(container.id, "stop") is None  # already stopped: fine
        assert source.container_action(container.id, "start") is None
        container.reload()
        assert container.status == "running"
        started = container.attrs["State"]["StartedAt"]
        assert source.container_action(container.id, "restart") is None
        container.reload()
        assert container.status == "running"
        assert container.attrs["State"]["StartedAt"] != started
    finally:
        source.close()


def test_pause_and_unpause_freeze_and_thaw_the_real_container(
    run_container: Callable[..., Any], free_run_id: str
) -> None:
    container = run_container(
        ["sleep", "300"], name=f"logs-pause-{free_run_id}", network_mode="none"
    )
    source = _source(free_run_id)
    try:
        assert source.container_action(container.id, "pause") is None
        container.reload()
        assert container.status == "paused"
        listed = {c.id: c for c in source.read().containers}
        assert listed[container.id].status == "paused"  # the pause event marked it for inspect
        assert source.container_action(container.id, "unpause") is None
        container.reload()
        assert container.status == "running"
        # Unpausing a running container is the engine's error, said in one line.
        error = source.container_action(container.id, "unpause") or ""
        assert error and "\n" not in error and "not paused" in error, error
    finally:
        source.close()
